"""What the tracking CLI writes: JSON as fastcal writes it, outputs checked and committed together.

JSON: NaN becomes ``null`` and +-inf the strings ``"inf"`` / ``"-inf"`` (as
``fastcal score --json``), built whole in memory before anything is printed.
Outputs: refused when they are an input (or inside an input directory) or
another output, by path or through a link; written with
:func:`fastcal.io.commit`, all of them or none.
"""

import contextlib
import io
import os
import signal
import threading

from fastcal import io as fio
from tracking.scoring.report import check_plot_path

__all__ = ["to_json", "check_outputs", "commit", "commit_with_stdout", "signals_held", "plot_format",
           "figure_bytes", "write_report"]


def to_json(obj):
    """One line of strict JSON for ``obj``, with fastcal's convention."""
    return fio.json_text(obj)


@contextlib.contextmanager
def signals_held():
    """Hold SIGINT, SIGTERM and SIGHUP back until the block ends, then deliver the first.

    For imports of compiled libraries (matplotlib): an exception raised by a signal
    handler inside an extension's initialisation left it half-made, was reported
    as a missing matplotlib, and crashed the interpreter at exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []
    old = {}
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        old[s] = signal.signal(s, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if pending:
            signal.raise_signal(pending[0])


def _same(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(outputs, inputs):
    """Before any work: each ``(option, path)`` output is writable, not an input and not another output.

    Raises ValueError with one line naming the option and the path.
    """
    seen = []
    for option, target in outputs:
        if target is None or target == "-" or fio.is_special(target):
            continue
        real = os.path.realpath(os.fspath(target))
        if os.path.isdir(real):
            msg = f"{option} {target}: is a directory; expected a file name"
            raise ValueError(msg)
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            msg = f"{option} {target}: the directory {folder} does not exist"
            raise ValueError(msg)
        for inp in inputs:
            src = os.path.realpath(inp)
            if real == src or _same(real, src) or (os.path.isdir(src) and os.path.commonpath([real, src]) == src):
                msg = f"{option} {target}: is the input {inp} (or inside it); refusing to overwrite an input"
                raise ValueError(msg)
        for other, other_real in seen:
            if real == other_real or _same(real, other_real):
                msg = f"{option} {target}: is also the {other} output; expected a different file for each output"
                raise ValueError(msg)
        seen.append((option, real))


def commit(outputs):
    """Write ``[(path, bytes)]`` all together (``"-"`` is standard output, written last)."""
    fio.commit(outputs)


def cleanup():
    """Remove temporary files of an interrupted write."""
    fio.remove_temporaries()


def commit_with_stdout(outputs, text, plot):
    """Commit ``outputs`` and ``text`` for standard output together; a failed write is
    one ValueError naming ``--plot`` (the only file output of the tracking commands)."""
    try:
        commit(outputs + [("-", text.encode("utf-8"))])
    except OSError as exc:
        msg = f"cannot write --plot {plot!r}: {exc.strerror or exc}"
        raise ValueError(msg) from None


def plot_format(plot, inputs):
    """Before any work: the image format of ``--plot`` (None without one), checked as an output."""
    if plot is None:
        return None
    with signals_held():  # matplotlib's import must not be cut short
        fmt = check_plot_path(plot)
    check_outputs([("--plot", plot)], inputs)
    return fmt


def figure_bytes(fig, fmt):
    """The image of ``fig`` in format ``fmt``, in memory."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    return buf.getvalue()


def write_report(report, text, *, as_json, plot, figure, fmt):
    """Standard output and the ``--plot`` file, built in memory, then committed together.

    Standard output is ``report`` as JSON, or ``text()`` (and where the plot went);
    the plot is ``figure()`` in format ``fmt``, when ``plot`` names a file.
    """
    outputs = [] if plot is None else [(plot, figure_bytes(figure(), fmt))]
    if as_json:
        out = to_json(report)
    else:
        out = text() + "\n" + ("" if plot is None else f"\nplot written to {plot}\n")
    commit_with_stdout(outputs, out, plot)


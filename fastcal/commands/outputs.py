"""The outputs of ``fastcal score`` and ``fastcal recalibrate``: checked before
any work (folder, kind of file, not an input, not another output), drawn in
memory, then written together, all of them or none.
"""

import io
import os
import sys

from fastcal import _atomic
from fastcal.commands.common import MAX_PLOT_BINS, _check_local_output, _Fail
from fastcal.reports import plot
from fastcal.sources.readers import where
from fastcal.writers import _one_line


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_target(option, target, inputs):
    """Checks on one output before any work: folder, kind of file, not an input.

    ``inputs``: (what, path) pairs of every file the run reads (a directory:
    anything inside it is input)."""
    if target == "-":
        return
    _check_local_output(option, target)
    if _atomic.is_special(target):
        return  # a FIFO or device: written through
    real = _atomic.resolve(target)
    if os.path.isdir(real):
        raise _Fail(f"{option} {target}: is a directory; give a file name")
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise _Fail(f"{option} {target}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _Fail(f"{option} {target}: the directory {folder} is not writable")
    for what, path in inputs:
        path = where.local(path)  # a file:// URL is its local path
        if where.is_url(path):
            continue  # an object or a web server's file: never a local output
        src = os.path.realpath(path)
        if real == src or _same_file(real, src) or (
                os.path.isdir(src) and os.path.commonpath([real, src]) == src):
            raise _Fail(f"{option} {target}: is the {what} {path} (or inside it); "
                        f"refusing to overwrite an input file")


def _check_outputs(outputs, inputs):
    """Every output (option, path) passes :func:`_check_target` and differs from
    every other output, by name, through a symbolic link or as a hard link."""
    outputs = [(o, t) for o, t in outputs if t]
    for opt, target in outputs:
        _check_target(opt, target, inputs)
    for i, (opt_a, a) in enumerate(outputs):
        for opt_b, b in outputs[i + 1:]:
            same = a == b == "-" or (
                a != "-" and b != "-" and not _atomic.is_special(a)
                and (_atomic.resolve(a) == _atomic.resolve(b) or _same_file(a, b)))
            if same:
                raise _Fail(f"{opt_a} {a} and {opt_b} {b} are the same file; "
                            f"give each output its own name")


def _check_plot_bins(plot, bins):
    """--plot draws one bar per bin: refused above MAX_PLOT_BINS, before any scoring
    (300,000 bins took 453 s and 6.9 GB to draw)."""
    if plot and bins > MAX_PLOT_BINS:
        raise _Fail(f"--plot {plot}: a reliability diagram draws one bar per bin, at most "
                    f"{MAX_PLOT_BINS:,}; got --bins {bins:,} (lower --bins or drop --plot)")


def _plot_type(path):
    """The image type of --plot from its suffix; checked against matplotlib's writers."""
    try:
        Figure, FigureCanvasAgg = plot._matplotlib()
    except ImportError:
        raise _Fail("--plot needs matplotlib, which is not installed: pip install -e '.[plot]' "
                    "in a fastcal checkout, or pip install 'fastcal[plot]'") from None
    kind = os.path.splitext(path)[1].lower().lstrip(".") if path != "-" else ""
    kind = kind or "png"
    known = FigureCanvasAgg(Figure()).get_supported_filetypes()
    if kind not in known:
        raise _Fail(f"--plot {path}: unknown image type '.{kind}'; use one of "
                    f"{', '.join(sorted(known))}")
    return kind


def _figure_bytes(fig, kind):
    """A matplotlib figure as the bytes of an image of type ``kind``."""
    buf = io.BytesIO()
    fig.savefig(buf, format=kind, dpi=fig.dpi)
    return buf.getvalue()


def _output_names(outputs):
    """"--output r.txt and --plot r.png" for the messages; "-" is standard output."""
    names = []
    for opt, target in outputs:
        if target == "-":
            names.append("standard output")
        elif target:
            names.append(f"{opt} {target}")
    return " and ".join(dict.fromkeys(names))


def _stdout_buffer():
    buf = getattr(sys.stdout, "buffer", None)
    if buf is None:  # a text stream without a buffer (captured output)
        class _Text:
            @staticmethod
            def write(data):
                sys.stdout.write(data.decode("utf-8"))

            @staticmethod
            def flush():
                sys.stdout.flush()

        return _Text()
    sys.stdout.flush()
    return buf


def _write(outputs, named):
    """Write ``outputs`` ((target, bytes) pairs; "-" is standard output) together,
    all of them or none; ``named``: (option, target) pairs for the message."""
    try:
        _atomic.commit(outputs, stdout=_stdout_buffer())
    except OSError as exc:
        raise _Fail(f"{_output_names(named)}: could not write "
                    f"({exc.strerror or _one_line(exc)}); no output was changed") from exc

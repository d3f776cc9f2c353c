"""The ``fastcal`` command line: ``fastcal score``, ``recalibrate`` and ``simulate``.

Exit status 0 on success; 2 for bad usage, bad input or a fault of the
environment (missing optional dependency, full disk, unreachable or failing
Dask cluster, not enough memory), always with one line on stderr; 1 for an
internal error (also one line); 128 + N when stopped by signal N (SIGTERM,
SIGHUP; 130 for Ctrl-C). ``--debug`` or ``FASTCAL_DEBUG=1`` shows the
traceback instead.

``--plot`` draws one bar per bin and is refused above 1,000 ``--bins``
before any scoring; ``--bins`` has the API's bound (1,000,000) and message.
No output may be an input (the data, the ``--recalibration`` map) or another
output, by name, through a symbolic link or as a hard link.

``--json`` prints one JSON object, built whole before anything is printed;
in every command NaN is ``null`` and an infinity the string ``"inf"`` or
``"-inf"``.

Outputs of ``fastcal score`` (``--output`` and ``--plot``) are produced in
memory once the scoring succeeded, then written together: every regular file
through a temporary file beside it and a rename, all of them or none. A FIFO,
a device or ``-`` (standard output) is written through, a symbolic link is
followed, an existing file keeps its permissions, and no output may be one of
the input files. ``fastcal simulate`` writes to a temporary name and renames
it at the end. On an error or a signal the temporary files are removed.
"""

import argparse
import dataclasses
import logging
import math
import os
import re
import signal
import sys
import threading
import time
import warnings

from fastcal import _atomic
from fastcal.inputs.validation import check_eps, check_n_bins
from fastcal.reports._json import json_text
from fastcal.writers import SIM_CHUNK_ROWS, SIM_FORMATS, _one_line, simulate_file

EXIT_OK = 0
EXIT_BAD = 2
EXIT_INTERNAL = 1

# Sane bounds, checked with a message before anything is allocated.
MAX_BINS = 1_000_000          # = fastcal.inputs.validation.MAX_BINS (checked there)
MAX_CHUNK_ROWS = 1 << 26      # 67M rows: a few chunks are alive at once, ~9 bytes a row each
MAX_PLOT_BINS = 1_000         # --plot draws a bar per bin: about 5 ms each (5 s at the bound)
MAX_SIM_ROWS = 1 << 40        # 1.1e12 rows; the disk is checked too
DASK_TIME_LIMIT = 3600.0      # seconds for a whole --workers / --scheduler run


class _Fail(Exception):
    """Bad usage or input found by the CLI itself (message printed, exit 2)."""


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM / SIGHUP so that cleanup runs as on errors."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _version():
    from fastcal import __version__

    return __version__


def _names_list(text):
    """A comma-separated list of names ("ece_sweep,tace"); checked by the scoring options."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _count(text):
    """An integer option that also takes 1e6 or 1_000_000 (an integral value)."""
    try:
        return int(text.replace("_", ""))
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not math.isfinite(x) or x != int(x):
        raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}")
    return int(x)


def _parser():
    ap = argparse.ArgumentParser(
        prog="fastcal",
        description="Calibration metrics (ECE, ESCE, MCE, ECD, Brier, NLL) of prediction "
                    "files of any size, read out of core.")
    ap.add_argument("--version", action="version", version=f"fastcal {_version()}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_score, _add_recalibrate, _add_simulate, _add_warmup):
        add(sub)
    return ap


def _add_score(sub):
    """The ``fastcal score`` parser."""
    sc = sub.add_parser(
        "score", help="score a prediction file (Parquet, Feather/Arrow, NPY, CSV)",
        description="Score a file of predicted probabilities and 0/1 labels, chunk by chunk, "
                    "and print the per-bin table (or one JSON object with --json).")
    sc.add_argument("path", metavar="PATH", help="file, or directory of files (Parquet dataset; "
                                                 "NPY: one .npy file per column)")
    sc.add_argument("--prob", required=True, metavar="COL",
                    help="probability column of class 1; for K classes a comma-separated list "
                         "of K columns or a prefix ending in '*' (quote it: 'p_*')")
    sc.add_argument("--label", required=True, metavar="COL",
                    help="label column (0/1, or the class index); soft labels: K label-"
                         "distribution columns, comma-separated or a 'prefix*'")
    sc.add_argument("--bins", type=_count, default=10, metavar="N",
                    help=f"number of bins (10; at most {MAX_BINS:,})")
    sc.add_argument("--strategy", choices=("uniform", "quantile"), default="uniform",
                    help="uniform bins, or equal-mass bins (exact, second pass over the file)")
    sc.add_argument("--closed", choices=("left", "right"), default="left",
                    help="side of each bin that holds its edge (left: paper's Table I)")
    sc.add_argument("--observed", choices=("frac_pos", "accuracy"), default="frac_pos",
                    help="what ECE compares with the mean probability of a bin")
    sc.add_argument("--nan-policy", choices=("raise", "omit"), default="raise",
                    help="NaN or null rows: error (raise) or drop and count them (omit)")
    sc.add_argument("--logits", action="store_true",
                    help="the probability columns hold logits (sigmoid, or softmax across K)")
    sc.add_argument("--eps", type=float, default=None,
                    help="clip p to [eps, 1-eps] in the ECD and NLL terms (a finite score when "
                         "some p is exactly 0 or 1 and wrong)")
    sc.add_argument("--ace", action="store_true",
                    help="also compute ACE (equal-mass ECE) with a second pass")
    sc.add_argument("--renormalize", action="store_true",
                    help="K class columns: divide each row by its sum instead of refusing rows "
                         "that do not sum to 1")
    sc.add_argument("--smece", action="store_true",
                    help="also compute smooth ECE and its bandwidth (a grid of 8,193 points "
                         "filled in the same pass; the same as --metrics smece)")
    sc.add_argument("--metrics", type=_names_list, default=(), metavar="NAME,NAME",
                    help="also compute these measures: smece (smooth ECE), ece_sweep "
                         "(ECE-sweep and its bin count), tace (K classes: thresholded "
                         "adaptive calibration error)")
    sc.add_argument("--sweep", choices=("quantile", "uniform"), default="quantile",
                    help="the bins ECE-sweep sweeps: equal-mass (default) or equal-width")
    sc.add_argument("--tace-threshold", type=float, default=1e-3, metavar="P",
                    help="TACE ranks, per class, the probabilities above this (default 1e-3)")
    sc.add_argument("--ci", type=float, default=None, metavar="LEVEL",
                    help="confidence intervals at this level (e.g. 0.95): t-intervals for ECD, "
                         "Brier, NLL and a bootstrap for ECE, ESCE, MCE")
    sc.add_argument("--n-boot", type=_count, default=200, metavar="N",
                    help="bootstrap replicates with --ci (default 200)")
    sc.add_argument("--seed", type=int, default=0, help="seed of the bootstrap weights")
    sc.add_argument("--no-verify-checksums", action="store_true",
                    help="Parquet: do not check data pages against their stored checksums")
    sc.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="fill on the GPU (cuda: needs the cuda extra and an NVIDIA GPU) or "
                         "the CPU (default)")
    sc.add_argument("--format", choices=("parquet", "feather", "npy", "csv"), default=None,
                    help="file format (default: from the extension; .csv.gz is CSV)")
    sc.add_argument("--chunk-rows", type=_count, default=None, metavar="N",
                    help="rows per chunk (default 262144); results do not depend on it")
    sc.add_argument("--scheduler", metavar="ADDRESS",
                    help="score a Parquet file or dataset on the running Dask scheduler at "
                         "ADDRESS (tcp://host:8786); needs the dask extra on client and workers")
    sc.add_argument("--workers", type=_count, metavar="N",
                    help="score a Parquet file or dataset on a local Dask cluster of N worker "
                         "processes started for this run")
    sc.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                    help="give up connecting to --scheduler after SECONDS (10)")
    sc.add_argument("--time-limit", type=float, default=DASK_TIME_LIMIT, metavar="SECONDS",
                    help=f"give up a --workers / --scheduler run after SECONDS "
                         f"({DASK_TIME_LIMIT:g}), naming any paused worker")
    sc.add_argument("--recalibration", metavar="PARAMS.json",
                    help="apply the recalibration saved by 'fastcal recalibrate --out' to every "
                         "chunk before scoring")
    sc.add_argument("--json", action="store_true", help="print one JSON object")
    sc.add_argument("--output", metavar="FILE",
                    help="write the report to FILE instead of stdout ('-': stdout); a regular "
                         "file is replaced atomically, a FIFO or device written through")
    sc.add_argument("--plot", metavar="FILE.png",
                    help="save a reliability diagram (needs matplotlib: pip install "
                         "'fastcal[plot]'); type from the suffix: png, pdf, svg, ...; "
                         f"one bar per bin, so at most {MAX_PLOT_BINS:,} --bins")
    sc.add_argument("--plot-smooth", action="store_true",
                    help="--plot draws the smooth reliability diagram (the smoothed curve and "
                         "the density of the predictions; implies --smece) instead of the bins")
    sc.add_argument("--quiet", action="store_true", help="no progress bar")
    sc.add_argument("--debug", action="store_true",
                    help="show tracebacks (also FASTCAL_DEBUG=1)")
    sc.set_defaults(func=_cmd_score)


def _add_recalibrate(sub):
    """The ``fastcal recalibrate`` parser."""
    rc = sub.add_parser(
        "recalibrate", help="fit a recalibration map on a prediction file, out of core",
        description="Fit temperature scaling, Platt scaling, isotonic regression or histogram "
                    "binning on a file of predictions and labels, in a few passes over it; "
                    "save the map (--out) and print the before/after table on the same file.")
    rc.add_argument("path", metavar="PATH", help="file, or directory of files")
    rc.add_argument("--prob", required=True, metavar="COL",
                    help="probability (or logit) column; for K classes a comma-separated list "
                         "or a prefix ending in '*'")
    rc.add_argument("--label", required=True, metavar="COL", help="label column")
    rc.add_argument("--method", choices=("temperature", "platt", "isotonic", "histogram"),
                    default="temperature", help="the map to fit (temperature)")
    rc.add_argument("--target", choices=("nll", "safe"), default="nll",
                    help="temperature: minimise the NLL, or the smallest change after which the "
                         "ECD test no longer flags over-confidence at --alpha (safe)")
    rc.add_argument("--alpha", type=float, default=0.05, help="level of the safe target (0.05)")
    rc.add_argument("--logits", action="store_true", help="the columns hold logits")
    rc.add_argument("--hist-bins", type=_count, default=15, metavar="N",
                    help="bins of histogram binning (15)")
    rc.add_argument("--bins", type=_count, default=15, metavar="N",
                    help="bins of the before/after table (15)")
    rc.add_argument("--nan-policy", choices=("raise", "omit"), default="raise",
                    help="NaN or null rows: error (raise) or leave them out of the fit and "
                         "the tables (omit)")
    rc.add_argument("--format", choices=("parquet", "feather", "npy", "csv"), default=None,
                    help="file format (default: from the extension; .csv.gz is CSV)")
    rc.add_argument("--chunk-rows", type=_count, default=None, metavar="N",
                    help="rows per chunk (default 262144); the fit does not depend on it")
    rc.add_argument("--out", metavar="PARAMS.json", help="write the fitted map here (JSON)")
    rc.add_argument("--plot", metavar="FILE.png",
                    help="reliability diagrams before and after (at most "
                         f"{MAX_PLOT_BINS:,} --bins)")
    rc.add_argument("--no-table", action="store_true",
                    help="fit only: skip the before/after passes")
    rc.add_argument("--json", action="store_true", help="print one JSON object")
    rc.add_argument("--quiet", action="store_true", help="no progress bar")
    rc.add_argument("--debug", action="store_true",
                    help="show the traceback of an error (also FASTCAL_DEBUG=1)")
    rc.set_defaults(func=_cmd_recalibrate)


def _add_simulate(sub):
    """The ``fastcal simulate`` parser."""
    sm = sub.add_parser(
        "simulate", help="write the paper's simulated predictions (eq. 16-19) to a file",
        description="Write N rows of the paper's simulation as columns p (probability) and "
                    "y (uint8 label), chunk by chunk with bounded memory; the same seed gives "
                    "the same rows whatever the chunk size. NPY output is a directory OUT "
                    "holding p.npy and y.npy.")
    sm.add_argument("out", metavar="OUT", help="output file (directory for --format npy)")
    sm.add_argument("--n", required=True, type=_count, metavar="N",
                    help="number of rows (1e6 works)")
    sm.add_argument("--sigma", type=float, default=0.0,
                    help="log-odds noise: 0 calibrated, larger over-confident (0)")
    sm.add_argument("--seed", type=int, default=0,
                    help="seed of the random rows (0); the same seed gives the same file")
    sm.add_argument("--format", choices=SIM_FORMATS, default=None,
                    help="default: from OUT's extension (.parquet/.pq, .feather/.arrow, .csv, "
                         ".csv.gz, .npy)")
    sm.add_argument("--dtype", choices=("float32", "float64"), default="float64",
                    help="dtype of p (float64)")
    sm.add_argument("--chunk-rows", type=_count, default=SIM_CHUNK_ROWS, metavar="N",
                    help="rows generated and written at a time (1048576)")
    sm.add_argument("--quiet", action="store_true",
                    help="no progress bar and no summary line")
    sm.add_argument("--debug", action="store_true",
                    help="show tracebacks (also FASTCAL_DEBUG=1)")
    sm.set_defaults(func=_cmd_simulate)


def _add_warmup(sub):
    """The ``fastcal warmup`` parser."""
    wu = sub.add_parser(
        "warmup", help="compile the kernels of the common input dtypes into the cache",
        description="Compile the kernels of a default report for the common input dtypes "
                    "into Numba's disk cache (run once when an image or a CI cache is built), "
                    "printing the time each took.")
    wu.add_argument("--debug", action="store_true",
                    help="show tracebacks (also FASTCAL_DEBUG=1)")
    wu.set_defaults(func=_cmd_warmup)

def _check_range(option, value, lo, hi, why=""):
    if value is None:
        return
    if value < lo:
        raise _Fail(f"{option} must be >= {lo:,}; got {value:,}")
    if value > hi:
        raise _Fail(f"{option} must be <= {hi:,}{why}; got {value:,}")


def _check_bins(option, value):
    """A bin count, with the API's own check and message (one bound for both)."""
    try:
        check_n_bins(value)
    except ValueError as exc:
        raise _Fail(str(exc).replace("n_bins", option, 1)) from None


# -- outputs -------------------------------------------------------------------

def _remove(path):
    _atomic.remove(path)


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
        from fastcal.reports.plot import _matplotlib

        Figure, FigureCanvasAgg = _matplotlib()
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


def _plot_bytes(rep, kind, smooth=False):
    import io

    fig = rep.plot(smooth=smooth)
    buf = io.BytesIO()
    fig.savefig(buf, format=kind, dpi=fig.dpi)
    return buf.getvalue()


# -- messages --------------------------------------------------------------------

# Python keywords in library messages, as the option a command-line user types.
_WORDS = [
    # file messages give both ("use nan_policy='omit' (--nan-policy omit)"): keep one
    (re.compile(r"\bnan_policy='(\w+)' \(--nan-policy \1\)"), r"--nan-policy \1"),
    (re.compile(r"\bnan_policy='(\w+)'"), r"--nan-policy \1"),
    (re.compile(r"\bstrategy='(\w+)'"), r"--strategy \1"),
    (re.compile(r"\bclosed='(\w+)'"), r"--closed \1"),
    (re.compile(r"\bdevice='(\w+)'"), r"--device \1"),
    (re.compile(r"\bobserved='(\w+)'"), r"--observed \1"),
    (re.compile(r"\bace=True\b"), "--ace"),
    (re.compile(r"\blogits=True\b"), "--logits"),
    (re.compile(r"\brenormalize=True\b"), "--renormalize"),
    (re.compile(r"\bsmooth=True\b"), "--smece"),
    (re.compile(r"\bpass format=\s*"), "pass --format "),
    (re.compile(r"\bformat=(?=\W|$)"), "--format"),
    (re.compile(r"\bprob=(?=['\"\[])"), "--prob "),
    (re.compile(r"\blabel=(?=['\"])"), "--label "),
    (re.compile(r"(?<!\.)\bn_bins\b"), "--bins"),  # not a map field (params.n_bins)
    (re.compile(r"\bchunk_rows\b"), "--chunk-rows"),
    (re.compile(r"\brows_per_partition\b"), "--chunk-rows"),
    (re.compile(r"\beps must\b"), "--eps must"),
]


def _cli_words(text):
    for pattern, repl in _WORDS:
        text = pattern.sub(repl, text)
    return text


def _is_dask_error(exc):
    mod = type(exc).__module__ or ""
    return mod.split(".")[0] in ("distributed", "dask", "tornado")


def _describe_error(exc):
    """(exit status, one line) for an exception that ended a command."""
    if isinstance(exc, (_Fail, ValueError, ConnectionError)):
        return EXIT_BAD, _cli_words(_one_line(exc))
    if isinstance(exc, MemoryError):
        return EXIT_BAD, ("out of memory" + (f" ({_one_line(exc)})" if str(exc) else "")
                          + "; lower --chunk-rows or --bins")
    if isinstance(exc, ImportError):
        return EXIT_BAD, f"{_one_line(exc)} (a missing optional dependency?)"
    if type(exc).__name__ == "KilledWorker":
        return EXIT_BAD, ("a Dask worker died running a task (killed or out of memory): "
                          f"{_one_line(exc)}; give workers more memory or lower --chunk-rows")
    if _is_dask_error(exc) or isinstance(exc, TimeoutError):
        return EXIT_BAD, f"Dask: {type(exc).__name__}: {_one_line(exc)}"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        what = exc.strerror or _one_line(exc)
        return EXIT_BAD, f"{where}{what}"
    return EXIT_INTERNAL, (f"internal error: {type(exc).__name__}: {_one_line(exc)} "
                           f"(--debug or FASTCAL_DEBUG=1 shows the traceback)")


# -- JSON --------------------------------------------------------------------------

# -- score -----------------------------------------------------------------------

def _report_dict(rep, elapsed):
    out = rep.to_dict()
    out["file"] = rep.source
    out["format"] = rep.format
    out["n_rows"] = rep.n_rows
    out["passes"] = rep.passes
    out["seconds"] = round(elapsed, 6)
    return out


_ORDINAL = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def _pass_lines(steps, where):
    """What each pass after the first was, from the report's ``pass_steps``."""
    lines = []
    first = 1
    for what, k in steps:
        last = first + k - 1
        if what != "fill":
            if k > 1:
                at = f"passes {first}-{last}"
            else:
                at = f"a {_ORDINAL[first]} pass" if first in _ORDINAL else f"pass {first}"
            lines.append({
                "equal-mass bins": f"Equal-mass bins: exact, from {at} over {where}.",
                "ACE": f"ACE: exact equal-mass bins, from {at} over {where}.",
                "certain-and-wrong rows": f"Certain-and-wrong rows: counted in {at} over {where}.",
            }.get(what, f"{what}: {at} over {where}."))
        first = last + 1
    return lines


def _report_text(rep, elapsed):
    if not hasattr(rep, "n_bins"):  # soft labels: no bins
        return (f"# {rep.source}\n\n{rep.n_rows} rows ({rep.format}) of soft labels over "
                f"{rep.n_classes} classes scored in {elapsed:.2f} s\n\n{rep.to_markdown()}\n")
    head = [f"# {rep.source}", "",
            f"{rep.n_rows} rows ({rep.format}) scored in {elapsed:.2f} s, {rep.n_bins} "
            f"{rep.strategy} bins, closed={rep.closed!r}"]
    where = "the data" if getattr(rep, "dask", None) else "the file"
    if getattr(rep, "dask", None):
        head.append(f"Computed on Dask ({rep.dask}) in {rep.passes} "
                    f"pass{'es' if rep.passes != 1 else ''} over the data.")
    head += _pass_lines(getattr(rep, "pass_steps", ()), where)
    return "\n".join(head) + "\n\n" + rep.to_markdown() + "\n"


def _input_format(args):
    """--format, or CSV for a .csv.gz file (pyarrow decompresses it)."""
    if args.format is None and args.path.lower().endswith(".csv.gz") \
            and os.path.isfile(args.path):
        return "csv"
    return args.format


def _check_score_args(args):
    """Every check that needs no data: sizes, outputs, optional dependencies."""
    _check_bins("--bins", args.bins)
    _check_range("--chunk-rows", args.chunk_rows, 1, MAX_CHUNK_ROWS)
    try:  # the library's rule (0 <= eps < 0.5), in the CLI's words
        check_eps(args.eps)
    except ValueError as exc:
        raise _Fail(_cli_words(str(exc))) from None
    on_dask = args.scheduler is not None or args.workers is not None
    if on_dask:
        cores = os.cpu_count() or 1
        if args.scheduler is not None and args.workers is not None:
            raise _Fail("pass --scheduler or --workers, not both")
        _check_range("--workers", args.workers, 1, max(64, 4 * cores),
                     f" (this machine has {cores} cores)")
        for opt, val in (("--timeout", args.timeout), ("--time-limit", args.time_limit)):
            if not (val > 0 and math.isfinite(val)):
                raise _Fail(f"{opt} must be a positive number of seconds; got {val!r}")
        try:
            import distributed  # noqa: F401
        except ImportError:
            opt = "--scheduler" if args.scheduler is not None else "--workers"
            raise _Fail(f"{opt} needs Dask, which is not installed: pip install -e '.[dask]' "
                        f"in a fastcal checkout, or pip install 'fastcal[dask]'") from None
    inputs = [("input", args.path)]
    if args.recalibration:
        inputs.append(("--recalibration map", args.recalibration))
    _check_outputs([("--output", args.output), ("--plot", args.plot)], inputs)
    _check_plot_bins(args.plot, args.bins)
    return _plot_type(args.plot) if args.plot else None


def _cmd_score(args):
    from fastcal.files import score_file

    plot_kind = _check_score_args(args)
    if args.plot_smooth and not args.plot:
        raise _Fail("--plot-smooth chooses what --plot draws; pass --plot FILE.png too")
    args.smece = args.smece or args.plot_smooth
    progress = False if args.quiet else None  # on stderr when it is a terminal, --json or not
    prob = [c.strip() for c in args.prob.split(",")] if "," in args.prob else args.prob
    label = [c.strip() for c in args.label.split(",")] if "," in args.label else args.label
    soft = not isinstance(label, str) or label.endswith("*")
    if soft and args.plot:
        raise _Fail("--plot draws a reliability diagram of bins; soft labels (K --label "
                    "columns) have no bins: drop --plot")
    on_dask = args.scheduler is not None or args.workers is not None
    fmt = _input_format(args)
    transform = _load_recalibration(args.recalibration, args.logits) \
        if args.recalibration else None
    t0 = time.perf_counter()
    if on_dask:
        rep = _score_on_dask(args, fmt, prob, label, transform)
    else:
        rep = score_file(args.path, prob=prob, label=label, n_bins=args.bins,
                         closed=args.closed, strategy=args.strategy, observed=args.observed,
                         nan_policy=args.nan_policy, eps=args.eps, ace=args.ace,
                         chunk_rows=args.chunk_rows, progress=progress, format=fmt,
                         logits=args.logits, renormalize=args.renormalize, ci=args.ci,
                         n_boot=args.n_boot, seed=args.seed, device=args.device,
                         verify_checksums=not args.no_verify_checksums, transform=transform,
                         smooth=args.smece, metrics=args.metrics, sweep=args.sweep,
                         tace_threshold=args.tace_threshold)
    elapsed = time.perf_counter() - t0
    if args.json:
        text = json_text(_report_dict(rep, elapsed))
    else:
        text = _report_text(rep, elapsed)
    outputs = [(args.output or "-", text.encode("utf-8"))]
    if args.plot:
        try:
            outputs.append((args.plot, _plot_bytes(rep, plot_kind, args.plot_smooth)))
        except Exception as exc:
            # the report is finished: print it rather than lose it, write no file
            if args.output != "-":
                sys.stdout.write(text)
                sys.stdout.flush()
            where = "printed above" if args.output in (None, "-") else "printed to stdout"
            raise _Fail(f"--plot {args.plot}: could not draw the diagram "
                        f"({type(exc).__name__}: {_one_line(exc)}); the report was {where} and "
                        f"no file was written") from exc
    try:
        _atomic.commit(outputs, stdout=_stdout_buffer())
    except OSError as exc:
        names = _output_names((("--output", args.output or "-"), ("--plot", args.plot)))
        raise _Fail(f"{names}: could not write ({exc.strerror or _one_line(exc)}); "
                    f"no output was changed") from exc
    return EXIT_OK


def _load_recalibration(path, logits):
    from fastcal import recalibrate

    try:
        model = recalibrate.load(path)
    except OSError as exc:
        raise _Fail(f"--recalibration {path}: {exc.strerror or _one_line(exc)}") from None
    except ValueError as exc:
        raise _Fail(f"--recalibration {_one_line(exc)}") from None
    if model.logits != bool(logits):
        want = "logits (pass --logits)" if model.logits else "probabilities (drop --logits)"
        raise _Fail(f"--recalibration {path}: the map was fitted on {want}")
    return model


def _cmd_recalibrate(args):
    from fastcal import recalibrate
    from fastcal.files import score_file

    _check_bins("--bins", args.bins)
    _check_bins("--hist-bins", args.hist_bins)
    _check_range("--chunk-rows", args.chunk_rows, 1, MAX_CHUNK_ROWS)
    if not 0.0 < args.alpha < 0.5:
        raise _Fail(f"--alpha must be strictly between 0 and 0.5; got {args.alpha!r}")
    if args.target == "safe" and args.method != "temperature":
        raise _Fail(f"--target safe is for --method temperature; got --method {args.method}")
    _check_outputs([("standard output", "-"), ("--out", args.out), ("--plot", args.plot)],
                   [("input", args.path)])
    _check_plot_bins(args.plot, args.bins)
    plot_kind = _plot_type(args.plot) if args.plot else None
    if args.plot and args.no_table:
        raise _Fail("--plot draws the before/after table's bins; drop --no-table")
    progress = False if args.quiet else None  # on stderr when it is a terminal, --json or not
    prob = [c.strip() for c in args.prob.split(",")] if "," in args.prob else args.prob
    fmt = _input_format(args)
    options = {"temperature": dict(target=args.target, alpha=args.alpha),
               "histogram": dict(n_bins=args.hist_bins)}.get(args.method, {})
    model = recalibrate.make(args.method, logits=args.logits, nan_policy=args.nan_policy,
                             **options)
    t0 = time.perf_counter()
    recalibrate.fit_file(model, args.path, prob=prob, label=args.label,
                         chunk_rows=args.chunk_rows, progress=progress, format=fmt)
    fit_seconds = time.perf_counter() - t0
    out = {"file": args.path, "method": args.method, "passes": model.passes_,
           "fit_seconds": round(fit_seconds, 6), "params": model.to_dict()}
    lines = [f"# {args.path}: {args.method} recalibration", "",
             f"fitted on {model.n_} rows in {model.passes_} passes, {fit_seconds:.2f} s"]
    if args.method == "temperature":
        lines.append(f"T = {model.temperature_:.6g}" + (
            f" (safe at alpha = {args.alpha:g}; the NLL optimum is "
            f"T = {model.temperature_nll_:.6g})" if args.target == "safe" else ""))
    elif args.method == "platt":
        lines.append(f"a = {model.a_:.6g}, b = {model.b_:.6g}")
    reports = None
    if not args.no_table:
        common = dict(prob=prob, label=args.label, n_bins=args.bins, nan_policy=args.nan_policy,
                      chunk_rows=args.chunk_rows, progress=progress, format=fmt)
        before = score_file(args.path, logits=args.logits, **common)
        after = score_file(args.path, logits=args.logits, transform=model, **common)
        reports = [("before", before), ("after", after)]
        if args.method == "temperature" and args.target == "safe":
            nll_model = recalibrate.from_dict(dict(model.to_dict(), params=dict(
                model.to_dict()["params"], temperature=model.temperature_nll_, target="nll")))
            reports.append(("NLL optimum", score_file(args.path, logits=args.logits,
                                                      transform=nll_model, **common)))
        keys = (("ECD", "ecd"), ("ECE", "ece"), ("Brier", "brier"), ("NLL", "nll"),
                ("ECD z", "ecd_z"), ("p(over-confident)", "ecd_p_over"))
        out["table"] = {name: {k: float(getattr(r, attr)) for k, r in reports}
                        for name, attr in keys}
        out["table"]["verdict"] = {k: r.verdict for k, r in reports}
        lines += ["", "In-sample (the fitting data; fastcal.recalibrate.evaluate cross-fits):", "",
                  "| | " + " | ".join(k for k, _ in reports) + " |",
                  "|---|" + "---:|" * len(reports)]
        for name, attr in keys:
            lines.append(f"| {name} | " + " | ".join(f"{getattr(r, attr):.4g}" for _, r in reports)
                         + " |")
        lines.append("| verdict | " + " | ".join(r.verdict for _, r in reports) + " |")
        if len(reports) == 3:
            b, n = reports[1][1], reports[2][1]
            lines.append("")
            lines.append(f"Cost of being safe: NLL {b.nll - n.nll:+.3g}, ECE {b.ece - n.ece:+.3g} "
                         "against the NLL optimum.")
    text = json_text(out) if args.json else "\n".join(lines) + "\n"
    outputs = [("-", text.encode("utf-8"))]
    if args.out:
        outputs.append((args.out, (model.to_json(indent=1) + "\n").encode("utf-8")))
    if args.plot:
        import io

        fig = recalibrate.before_after_diagram(reports[0][1], reports[1][1],
                                               title=f"{args.method} recalibration")
        buf = io.BytesIO()
        fig.savefig(buf, format=plot_kind, dpi=fig.dpi)
        outputs.append((args.plot, buf.getvalue()))
    try:
        _atomic.commit(outputs, stdout=_stdout_buffer())
    except OSError as exc:
        names = _output_names((("standard output", "-"), ("--out", args.out),
                               ("--plot", args.plot)))
        raise _Fail(f"{names}: could not write ({exc.strerror or _one_line(exc)}); "
                    f"no output was changed") from exc
    return EXIT_OK


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


class _Watchdog:
    """Closes a Dask client after ``limit`` seconds, saying what the workers were doing."""

    def __init__(self, client, limit):
        self.client = client
        self.limit = limit
        self.message = None
        self._timer = threading.Timer(limit, self._fire)
        self._timer.daemon = True

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()
        return False

    def _fire(self):
        paused = []
        try:
            info = self.client.scheduler_info()
            for addr, w in sorted(info.get("workers", {}).items()):
                if str(w.get("status", "")).lower() == "paused":
                    mem = (w.get("metrics") or {}).get("memory")
                    lim = w.get("memory_limit")
                    share = f", memory {100 * mem / lim:.0f}% of its limit" if mem and lim else ""
                    paused.append(f"{addr} (paused{share})")
        except Exception:  # the scheduler itself may be the problem
            pass
        why = ("; workers paused for memory: " + ", ".join(paused) if paused
               else "; no worker reported paused (slow or stuck tasks?)")
        self.message = (f"the Dask run did not finish within --time-limit {self.limit:g} s{why}")
        try:
            self.client.close(timeout=5)
        except Exception:
            pass


_DASK_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


def _quiet_dask(debug):
    """Silence distributed's loggers in this process for a run (workers get silence_logs);
    returns their old levels for :func:`_restore_logs`.

    Each logger is set, not only the top one: distributed's config gives
    ``distributed.client`` and others their own level (and handler), so a killed
    scheduler's tracebacks would still be printed before fastcal's one line.
    """
    if debug:
        return {}
    names = {n for n in logging.root.manager.loggerDict if n.split(".")[0] in _DASK_LOGGERS}
    old = {}
    for name in sorted(names | set(_DASK_LOGGERS)):
        logger = logging.getLogger(name)
        old[name] = logger.level
        logger.setLevel(logging.CRITICAL + 1)
    return old


def _restore_logs(old):
    for name, level in old.items():
        logging.getLogger(name).setLevel(level)


def _score_on_dask(args, fmt, prob, label, transform):
    """``--scheduler`` / ``--workers``: the same report, computed by Dask workers
    (``prob``, ``label``: the column names, or lists of them, as parsed;
    ``transform``: the --recalibration map or None)."""
    from fastcal.sources.io import detect_format

    fmt = detect_format(args.path, fmt)
    if fmt != "parquet":
        raise _Fail(f"{args.path}: --scheduler and --workers read Parquet only; got {fmt}")
    from fastcal.distributed import ROWS_PER_PARTITION, connect, score_dataset

    debug = _debug(args)
    levels = _quiet_dask(debug)
    own = []
    try:
        if args.scheduler is not None:
            client = connect(args.scheduler, timeout=args.timeout)
            own.append(client)
            where = f"scheduler {args.scheduler}"
        else:
            from distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                   silence_logs=logging.WARNING if debug else logging.CRITICAL)
            own.append(cluster)
            client = Client(cluster, set_as_default=False)
            own.append(client)
            where = f"local cluster of {args.workers} workers"
        with _Watchdog(client, args.time_limit) as dog:
            try:
                rep = score_dataset(args.path, prob=prob, label=label,
                                    n_bins=args.bins, closed=args.closed,
                                    strategy=args.strategy, observed=args.observed,
                                    nan_policy=args.nan_policy, eps=args.eps, ace=args.ace,
                                    logits=args.logits, ci=args.ci, n_boot=args.n_boot,
                                    seed=args.seed, device=args.device, transform=transform,
                                    smooth=args.smece,
                                    verify_checksums=not args.no_verify_checksums,
                                    metrics=args.metrics, sweep=args.sweep,
                                    tace_threshold=args.tace_threshold, client=client,
                                    rows_per_partition=args.chunk_rows or ROWS_PER_PARTITION)
            except Exception:
                if dog.message:
                    raise _Fail(dog.message) from None
                raise
        # the CLI made the client: name the cluster as the user asked for it
        rep.provenance = dataclasses.replace(rep.provenance, dask=where)
        return rep
    finally:
        for x in reversed(own):
            try:
                x.close()
            except Exception:
                pass
        _restore_logs(levels)


# -- simulate -----------------------------------------------------------------------

_SIM_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".csv.gz": "csv",
                   ".feather": "feather", ".arrow": "feather", ".npy": "npy"}


def _sim_format(out, fmt):
    """--format, else from OUT's extension; an unknown extension is an error, not Parquet."""
    if fmt is not None:
        return fmt
    low = out.lower()
    for ext in sorted(_SIM_EXTENSIONS, key=len, reverse=True):
        if low.endswith(ext):
            return _SIM_EXTENSIONS[ext]
    ext = os.path.splitext(out)[1]
    raise _Fail(f"{out}: cannot tell the format from the name ("
                + (f"extension {ext!r}" if ext else "no extension")
                + "); pass --format (parquet, feather, csv or npy) or use an extension: "
                + ", ".join(_SIM_EXTENSIONS))


def _cmd_warmup(args):
    from fastcal.warmup import cache_dir, warmup

    t0 = time.perf_counter()
    warmup(on_step=lambda label, sec: print(f"{label}: {sec:.1f} s", flush=True))
    where = cache_dir() or "memory only (no writable cache directory)"
    print(f"done in {time.perf_counter() - t0:.1f} s; cache: {where}")
    return EXIT_OK


def _cmd_simulate(args):
    _check_range("--n", args.n, 1, MAX_SIM_ROWS)
    _check_range("--chunk-rows", args.chunk_rows, 1, MAX_CHUNK_ROWS)
    if not (args.sigma >= 0 and math.isfinite(args.sigma)):
        raise _Fail(f"--sigma must be a finite number >= 0; got {args.sigma!r}")
    if args.out == "-":
        raise _Fail("OUT -: simulate writes a file, not standard output")
    fmt = _sim_format(args.out, args.format)
    t0 = time.perf_counter()
    simulate_file(args.out, n=args.n, sigma=args.sigma, seed=args.seed, format=fmt,
                  dtype=args.dtype, chunk_rows=args.chunk_rows,
                  progress=False if args.quiet else None)
    if not args.quiet:
        print(f"wrote {args.n:,} rows (p {args.dtype}, y uint8; sigma {args.sigma:g}, seed "
              f"{args.seed}) to {args.out} ({fmt}, {_size(args.out)}) in "
              f"{time.perf_counter() - t0:.2f} s", file=sys.stderr)
    return EXIT_OK


def _size(path):
    """The size of a written file (or NPY directory), as "12.3 MB"."""
    try:
        if os.path.isdir(path):
            n = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        elif _atomic.is_special(path):
            return "written through"
        else:
            n = os.path.getsize(path)
    except OSError:
        return "size unknown"
    return f"{n / 1e6:.3g} MB"


# -- entry point ------------------------------------------------------------------------

def _debug(args):
    return bool(getattr(args, "debug", False)) or os.environ.get("FASTCAL_DEBUG", "") not in (
        "", "0")


def _in_compiler(frame):
    """Whether Python code called back from the compiler (llvmlite, through ctypes) runs:
    an exception raised there is printed and dropped, so a signal must wait."""
    while frame is not None:
        if f"{os.sep}llvmlite{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _later(signum):
    """Send ``signum`` to this process again in 50 ms (out of the compiler's callback)."""
    t = threading.Timer(0.05, os.kill, (os.getpid(), signum))
    t.daemon = True
    t.start()


def _on_interrupt(signum, frame):
    if _in_compiler(frame):
        _later(signum)
        return
    raise KeyboardInterrupt


def _on_signal(signum, frame):
    if _in_compiler(frame):
        _later(signum)
        return
    # once: a second signal during the cleanup must not interrupt it
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    raise _Terminated(signum)


def _install_signals():
    """SIGTERM, SIGHUP and SIGINT raise in the main thread, so cleanup runs as on errors
    (held back while the compiler runs Python code, which would swallow the exception)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old = {}
    for s, handler in ((signal.SIGTERM, _on_signal), (signal.SIGHUP, _on_signal),
                       (signal.SIGINT, _on_interrupt)):
        try:
            old[s] = signal.signal(s, handler)
        except (ValueError, OSError):
            pass
    return old


def main(argv=None):
    """Run the command line; returns the exit status.

    Ctrl-C at any stage after the interpreter imported this module (parsing,
    the imports of a command, compiling, running, writing) ends with one line
    and status 130. Run as the command (``argv`` None), a Ctrl-C that comes
    once the status is known (while the interpreter shuts down) is ignored.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        _atomic.cleanup()
        if _debug(None):
            raise
        print("fastcal: interrupted; temporary files removed", file=sys.stderr)
        return 130
    finally:
        if argv is None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _main(argv):
    ap = _parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help(sys.stderr)
        return EXIT_BAD
    debug = _debug(args)
    old = _install_signals()
    shown = warnings.showwarning

    def note(message, category, filename, lineno, file=None, line=None):
        # a user's warning is one line on stderr, not Python's two (message and source line)
        print(f"fastcal {args.command}: note: {message}", file=sys.stderr)

    if not debug:
        warnings.showwarning = note
    try:
        with warnings.catch_warnings():
            if not debug:  # each warning once as a note, whatever filters the caller set
                warnings.simplefilter("default")
                # but not Python's own ResourceWarning (ignored by default): a Ctrl-C inside an
                # import leaves a .pyc reader unclosed, and its note preceded "interrupted"
                warnings.simplefilter("ignore", ResourceWarning)
            return args.func(args)
    except _Terminated as exc:
        _atomic.cleanup()
        name = signal.Signals(exc.signum).name
        print(f"fastcal {args.command}: stopped by {name}; temporary files removed",
              file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        _atomic.cleanup()
        if debug:
            raise
        print(f"fastcal {args.command}: interrupted; temporary files removed", file=sys.stderr)
        return 130
    except Exception as exc:
        _atomic.cleanup()
        if debug:
            raise
        code, text = _describe_error(exc)
        print(f"fastcal {args.command}: error: {text}", file=sys.stderr)
        return code
    finally:
        warnings.showwarning = shown
        for s, h in old.items():
            try:
                signal.signal(s, h)
            except (ValueError, OSError, TypeError):
                pass


def _entry():
    sys.exit(main())


if __name__ == "__main__":
    _entry()

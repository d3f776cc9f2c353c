"""The ``fastcal`` command line: ``fastcal score``, ``recalibrate`` and ``simulate``.

Exit status 0 on success; 2 for bad usage, bad input or a fault of the
environment (missing optional dependency, full disk, unreachable or failing
Dask cluster, not enough memory), always with one line on stderr; 1 for an
internal error (also one line); 128 + N when stopped by signal N (SIGTERM,
SIGHUP; 130 for Ctrl-C). ``--debug`` or ``FASTCAL_DEBUG=1`` shows the
traceback instead. The command's start-up, before this module is imported, is
:mod:`fastcal.__main__` (see :mod:`fastcal.process` for the signals).

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
import importlib
import math
import signal
import sys
import threading
import warnings

from fastcal import __version__, _atomic
from fastcal.commands.common import (
    DASK_TIME_LIMIT,
    EXIT_BAD,
    EXIT_INTERNAL,
    MAX_BINS,
    MAX_PLOT_BINS,
    _cli_words,
    _debug,
    _Fail,
)
from fastcal.inputs.validation import DEFAULT_N_BINS
from fastcal.process import Stop, Terminated, load_blas, not_enough_memory
from fastcal.writers import SIM_CHUNK_ROWS, SIM_FORMATS, _one_line


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
    ap.add_argument("--version", action="version", version=f"fastcal {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name, (options, texts) in _COMMANDS.items():
        options(sub.add_parser(name, **texts))
    return ap


# Options that mean the same in several commands, with the same help: one definition each.
_COMMON = {
    "--format": dict(choices=("parquet", "feather", "npy", "csv"), default=None,
                     help="file format (default: from the extension; .csv.gz is CSV)"),
    "--json": dict(action="store_true", help="print one JSON object"),
    "--quiet": dict(action="store_true", help="no progress bar"),
    "--debug": dict(action="store_true", help="show tracebacks (also FASTCAL_DEBUG=1)"),
    "--where": dict(metavar="FILTER",
                    help="a Parquet dataset in Hive layout (directories KEY=VALUE): read only "
                         "the files whose partition values pass FILTER, such as \"model = "
                         "'v3'\" or \"model in ('v2', 'v3') and day >= '2024-05-01'\""),
}


def _add_common(parser, *names):
    for name in names:
        parser.add_argument(name, **_COMMON[name])


def _add_score(sc):
    """The options of ``fastcal score``."""
    for add in (_score_inputs, _score_binning, _score_measures, _score_reading,
                _score_outputs):
        add(sc)


def _score_inputs(sc):
    """The file and its columns."""
    sc.add_argument("path", metavar="PATH", help="file, or directory of files (Parquet dataset; "
                                                 "NPY: one .npy file per column), or a URL of "
                                                 "one: s3://, gs://, az://, abfs://, hf://, "
                                                 "http(s)://, file://")
    sc.add_argument("--prob", required=True, metavar="COL",
                    help="probability column of class 1; for K classes a comma-separated list "
                         "of K columns or a prefix ending in '*' (quote it: 'p_*')")
    sc.add_argument("--label", required=True, metavar="COL",
                    help="label column (0/1, or the class index); soft labels: K label-"
                         "distribution columns, comma-separated or a 'prefix*'")
    sc.add_argument("--weight", metavar="COL",
                    help="column of the rows' weights (finite, >= 0): every metric is a "
                         "weighted mean, the tests take Kish's effective rows")
    sc.add_argument("--by", metavar="COL[,COL...]",
                    help="column(s) of a segment key per row (any type; nulls are a segment): "
                         "a table of the segments, surest miscalibration first, and the "
                         "segments whose ECD test fails after --correction")
    sc.add_argument("--correction", choices=("holm", "bh"), default=None,
                    help="with --by: Holm (family-wise error; the default) or Benjamini-"
                         "Hochberg (false discovery rate) adjustment of the segments' p-values")
    sc.add_argument("--max-segments", type=_count, default=100_000, metavar="N",
                    help="with --by: refuse more distinct keys than this (100,000; each "
                         "segment keeps a state of its own)")


def _score_binning(sc):
    """The bins, and how the columns are read (NaN rows, logits)."""
    sc.add_argument("--bins", type=_count, default=DEFAULT_N_BINS, metavar="N",
                    help=f"number of bins ({DEFAULT_N_BINS}; at most {MAX_BINS:,})")
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


def _score_measures(sc):
    """The measures, their options and their confidence intervals."""
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
                         "adaptive calibration error), ecce (ECCE, binning-free, with its "
                         "sigma and p-value; one more pass)")
    sc.add_argument("--sweep", choices=("quantile", "uniform"), default=None,
                    help="with --metrics ece_sweep: the bins ECE-sweep sweeps, equal-mass "
                         "(quantile, the default) or equal-width")
    sc.add_argument("--tace-threshold", type=float, default=None, metavar="P",
                    help="with --metrics tace: TACE ranks, per class, the probabilities above "
                         "this (default 1e-3)")
    sc.add_argument("--ci", type=float, default=None, metavar="LEVEL",
                    help="confidence intervals at this level (e.g. 0.95): t-intervals for ECD, "
                         "Brier, NLL and a bootstrap for ECE, ESCE, MCE")
    sc.add_argument("--n-boot", type=_count, default=200, metavar="N",
                    help="bootstrap replicates with --ci (default 200)")
    sc.add_argument("--seed", type=int, default=0, help="seed of the bootstrap weights")


def _score_reading(sc):
    """How and where the file is read: checks, device, format, chunks, Dask."""
    sc.add_argument("--no-verify-checksums", action="store_true",
                    help="Parquet: do not check data pages against their stored checksums")
    sc.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="fill on the GPU (cuda: needs the cuda extra and an NVIDIA GPU) or "
                         "the CPU (default)")
    _add_common(sc, "--format", "--where")
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


def _score_outputs(sc):
    """What is printed or written."""
    _add_common(sc, "--json")
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
    _add_common(sc, "--quiet", "--debug")


def _add_recalibrate(rc):
    """The options of ``fastcal recalibrate``."""
    rc.add_argument("path", metavar="PATH", help="file, or directory of files, or a URL of one "
                                                 "(as fastcal score takes)")
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
    rc.add_argument("--bins", type=_count, default=DEFAULT_N_BINS, metavar="N",
                    help=f"bins of the before/after table ({DEFAULT_N_BINS}, as fastcal score)")
    rc.add_argument("--nan-policy", choices=("raise", "omit"), default="raise",
                    help="NaN or null rows: error (raise) or leave them out of the fit and "
                         "the tables (omit)")
    _add_common(rc, "--format", "--where")
    rc.add_argument("--chunk-rows", type=_count, default=None, metavar="N",
                    help="rows per chunk (default 262144); the fit does not depend on it")
    rc.add_argument("--out", metavar="PARAMS.json", help="write the fitted map here (JSON)")
    rc.add_argument("--plot", metavar="FILE.png",
                    help="reliability diagrams before and after (at most "
                         f"{MAX_PLOT_BINS:,} --bins)")
    rc.add_argument("--no-table", action="store_true",
                    help="fit only: skip the before/after passes")
    _add_common(rc, "--json", "--quiet")
    rc.add_argument("--debug", action="store_true",
                    help="show the traceback of an error (also FASTCAL_DEBUG=1)")


def _add_simulate(sm):
    """The options of ``fastcal simulate``."""
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
    _add_common(sm, "--debug")


def _add_warmup(wu):
    """The options of ``fastcal warmup``."""
    _add_common(wu, "--debug")


# Each command: the function adding its options, its help line and its description.
_COMMANDS = {
    "score": (_add_score, dict(
        help="score a prediction file (Parquet, Feather/Arrow, NPY, CSV)",
        description="Score a file of predicted probabilities and 0/1 labels, chunk by chunk, "
                    "and print the per-bin table (or one JSON object with --json).")),
    "recalibrate": (_add_recalibrate, dict(
        help="fit a recalibration map on a prediction file, out of core",
        description="Fit temperature scaling, Platt scaling, isotonic regression or histogram "
                    "binning on a file of predictions and labels, in a few passes over it; "
                    "save the map (--out) and print the before/after table on the same file.")),
    "simulate": (_add_simulate, dict(
        help="write the paper's simulated predictions (eq. 16-19) to a file",
        description="Write N rows of the paper's simulation as columns p (probability) and "
                    "y (uint8 label), chunk by chunk with bounded memory; the same seed gives "
                    "the same rows whatever the chunk size. NPY output is a directory OUT "
                    "holding p.npy and y.npy.")),
    "warmup": (_add_warmup, dict(
        help="compile the kernels of the common input dtypes for this CPU into the cache",
        description="Compile the kernels of a default report for the common input dtypes, "
                    "for this very CPU, into Numba's disk cache, which is looked up before the "
                    "kernels shipped in the package (compiled for a baseline x86-64 CPU); print "
                    "the time each took, and whether the shipped kernels are loaded here (and "
                    "why not). Not needed where they are.")),
}


# -- messages --------------------------------------------------------------------

def _is_dask_error(exc):
    mod = type(exc).__module__ or ""
    return mod.split(".")[0] in ("distributed", "dask", "tornado")


def _describe_error(exc):
    """(exit status, one line) for an exception that ended a command."""
    memory = not_enough_memory(exc)  # first: a reader words it as its file's ValueError
    if memory is not None:
        hint = "; lower --chunk-rows or --bins" if "an allocation failed" in memory else ""
        return EXIT_BAD, memory + hint
    if isinstance(exc, (_Fail, ValueError, ConnectionError)):
        return EXIT_BAD, _cli_words(_one_line(exc))
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


# -- entry point ------------------------------------------------------------------------

def main(argv=None):
    """Run the command line; returns the exit status.

    Ctrl-C at any stage (parsing, the imports of a command, compiling,
    running, writing) ends with one line and status 130; run as the command
    (``fastcal.__main__``), the start-up before this module is imported too.
    Run as the command (``argv`` None), a signal that comes once the status is
    known (while the interpreter shuts down) is ignored.
    """
    as_command = argv is None and threading.current_thread() is threading.main_thread()
    try:
        return _main(argv, as_command)
    except KeyboardInterrupt:  # parsing or the command's imports, under the caller's handler
        _atomic.cleanup()
        if _debug(None):
            raise
        print("fastcal: interrupted; temporary files removed", file=sys.stderr)
        return 130
    finally:
        if as_command:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _main(argv, as_command):
    ap = _parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help(sys.stderr)
        return EXIT_BAD
    debug = _debug(args)
    stop = Stop()
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
            # the command's imports run under the handlers of the caller (the command's
            # start-up: one line and out; SIGTERM by its default action); its own from here.
            # Under Python's own Ctrl-C handler (main() called from Python, not as the
            # command) the run's handler comes first: a KeyboardInterrupt raised inside an
            # import's lock callback is dropped by Python, and only the run's handler sends
            # it again (Stop._unraisable)
            early = signal.getsignal(signal.SIGINT) is signal.default_int_handler
            if early:
                stop.install()
            command = _command(args.command)
            if not early:
                stop.install()
            status = command.run(args)
            stop.check()
            return status
    except (KeyboardInterrupt, Terminated, Exception) as exc:
        stop.seen = True
        _atomic.cleanup()
        signum = stop.signum or (signal.SIGINT if isinstance(exc, KeyboardInterrupt) else None)
        if signum is None or signum == signal.SIGINT:
            if debug:
                raise
        if signum == signal.SIGINT:
            print(f"fastcal {args.command}: interrupted; temporary files removed",
                  file=sys.stderr)
            return 130
        if signum is not None:
            print(f"fastcal {args.command}: stopped by {signal.Signals(signum).name}; "
                  "temporary files removed", file=sys.stderr)
            return 128 + signum
        code, text = _describe_error(exc)
        print(f"fastcal {args.command}: error: {text}", file=sys.stderr)
        return code
    finally:
        warnings.showwarning = shown
        stop.restore(as_command)


def _command(name):
    """The command's module (``fastcal.commands.<name>``), imported now: only the
    command that runs pays for its imports. A command that runs numba's kernels loads
    SciPy's BLAS first (:func:`fastcal.process.load_blas`)."""
    if name != "simulate":
        load_blas()
    return importlib.import_module(f"fastcal.commands.{name}")


def _entry():
    sys.exit(main())


if __name__ == "__main__":
    _entry()

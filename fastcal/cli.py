"""The ``fastcal`` command line: ``fastcal score`` and ``fastcal simulate``.

Exit status 0 on success, 2 on bad usage or bad input with a one-line message
on stderr (the traceback only with ``--debug``). Output files are written to a
temporary name in the same directory and renamed when complete, so a failed
run leaves nothing behind.
"""

import argparse
import json
import os
import sys
import tempfile
import time

from fastcal import _atomic

EXIT_OK = 0
EXIT_BAD = 2

SIM_FORMATS = ("parquet", "npy", "csv", "feather")
SIM_CHUNK_ROWS = 1 << 20


class _Fail(Exception):
    """Bad usage or input found by the CLI itself (message printed, exit 2)."""


def _version():
    from fastcal import __version__

    return __version__


def _parser():
    ap = argparse.ArgumentParser(
        prog="fastcal",
        description="Calibration metrics (ECE, ESCE, MCE, ECD, Brier, NLL) of prediction "
                    "files of any size, read out of core.")
    ap.add_argument("--version", action="version", version=f"fastcal {_version()}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    sc = sub.add_parser(
        "score", help="score a prediction file (Parquet, Feather/Arrow, NPY, CSV)",
        description="Score a file of predicted probabilities and 0/1 labels, chunk by chunk, "
                    "and print the per-bin table (or one JSON object with --json).")
    sc.add_argument("path", metavar="PATH", help="file, or directory of files (Parquet dataset; "
                                                 "NPY: one .npy file per column)")
    sc.add_argument("--prob", required=True, metavar="COL",
                    help="probability column of class 1; for K classes a comma-separated list "
                         "of K columns or a prefix ending in '*' (quote it: 'p_*')")
    sc.add_argument("--label", required=True, metavar="COL", help="label column (0/1)")
    sc.add_argument("--bins", type=int, default=10, metavar="N", help="number of bins (10)")
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
                    help="clip p to [eps, 1-eps] in the ECD and NLL terms")
    sc.add_argument("--ace", action="store_true",
                    help="also compute ACE (equal-mass ECE) with a second pass")
    sc.add_argument("--format", choices=("parquet", "feather", "npy", "csv"), default=None,
                    help="file format (default: from the extension)")
    sc.add_argument("--chunk-rows", type=int, default=None, metavar="N",
                    help="rows per chunk (default 262144); results do not depend on it")
    sc.add_argument("--scheduler", metavar="ADDRESS",
                    help="score a Parquet file or dataset on the running Dask scheduler at "
                         "ADDRESS (tcp://host:8786); needs the dask extra on client and workers")
    sc.add_argument("--workers", type=int, metavar="N",
                    help="score a Parquet file or dataset on a local Dask cluster of N worker "
                         "processes started for this run")
    sc.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                    help="give up connecting to --scheduler after SECONDS (10)")
    sc.add_argument("--json", action="store_true", help="print one JSON object")
    sc.add_argument("--output", metavar="FILE",
                    help="write the report to FILE (atomically) instead of stdout")
    sc.add_argument("--plot", metavar="FILE.png", help="save a reliability diagram")
    sc.add_argument("--quiet", action="store_true", help="no progress bar")
    sc.add_argument("--debug", action="store_true", help="show tracebacks")
    sc.set_defaults(func=_cmd_score)

    sm = sub.add_parser(
        "simulate", help="write the paper's simulated predictions (eq. 16-19) to a file",
        description="Write N rows of the paper's simulation as columns p (probability) and "
                    "y (uint8 label), chunk by chunk with bounded memory; the same seed gives "
                    "the same rows whatever the chunk size. NPY output is a directory OUT "
                    "holding p.npy and y.npy.")
    sm.add_argument("out", metavar="OUT", help="output file (directory for --format npy)")
    sm.add_argument("--n", required=True, type=int, metavar="N", help="number of rows")
    sm.add_argument("--sigma", type=float, default=0.0,
                    help="log-odds noise: 0 calibrated, larger over-confident (0)")
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument("--format", choices=SIM_FORMATS, default=None,
                    help="default: from OUT's extension, else parquet")
    sm.add_argument("--dtype", choices=("float32", "float64"), default="float64",
                    help="dtype of p (float64)")
    sm.add_argument("--chunk-rows", type=int, default=SIM_CHUNK_ROWS, metavar="N",
                    help="rows generated and written at a time (1048576)")
    sm.add_argument("--quiet", action="store_true", help="no progress bar")
    sm.add_argument("--debug", action="store_true", help="show tracebacks")
    sm.set_defaults(func=_cmd_simulate)
    return ap


# -- atomic output -------------------------------------------------------------

def _check_folder(path):
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise _Fail(f"{path}: the directory {d} does not exist")


def _temp_near(path, suffix=""):
    _check_folder(path)
    return _atomic.temp_near(path, suffix)


def write_text_atomic(path, text):
    """Write ``text`` to ``path`` via a temporary file and a rename."""
    _check_folder(path)
    _atomic.write_atomically(path, lambda fh: fh.write(text), mode="w")


def _remove(path):
    try:
        if os.path.isdir(path):
            for f in os.listdir(path):
                os.remove(os.path.join(path, f))
            os.rmdir(path)
        elif os.path.exists(path):
            os.remove(path)
    except OSError:
        pass


# -- score -----------------------------------------------------------------------

def _report_dict(rep, elapsed):
    out = rep.to_dict()
    out["file"] = rep.source
    out["format"] = rep.format
    out["n_rows"] = rep.n_rows
    out["passes"] = rep.passes
    out["seconds"] = round(elapsed, 6)
    return out


def _report_text(rep, elapsed):
    head = [f"# {rep.source}", "",
            f"{rep.n_rows} rows ({rep.format}) scored in {elapsed:.2f} s, {rep.n_bins} "
            f"{rep.strategy} bins, closed={rep.closed!r}"]
    if getattr(rep, "dask", None):
        head.append(f"Computed on Dask ({rep.dask}) in {rep.passes} passes over the data"
                    + ("; equal-mass bins exact." if rep.passes > 1 else "."))
    elif rep.strategy == "quantile":
        head.append("Equal-mass bins: exact, from a second pass over the file.")
    elif rep.passes == 2:
        head.append("ACE: exact equal-mass bins, from a second pass over the file.")
    return "\n".join(head) + "\n\n" + rep.to_markdown() + "\n"


def _cmd_score(args):
    from fastcal.files import score_file
    from fastcal.reports.report import CalibrationReport

    if args.plot and not hasattr(CalibrationReport, "plot"):
        raise _Fail("--plot: plotting is not available in this fastcal (CalibrationReport.plot "
                    "is missing; it needs the plot extra: pip install 'fastcal[plot]')")
    if args.bins < 1:
        raise _Fail(f"--bins must be >= 1; got {args.bins}")
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise _Fail(f"--chunk-rows must be >= 1; got {args.chunk_rows}")
    for opt, target in (("--output", args.output), ("--plot", args.plot)):
        if target:
            d = os.path.dirname(os.path.abspath(target))
            if not os.path.isdir(d):
                raise _Fail(f"{opt} {target}: the directory {d} does not exist")
    progress = False if (args.quiet or args.json) else None
    prob = [c.strip() for c in args.prob.split(",")] if "," in args.prob else args.prob
    on_dask = args.scheduler is not None or args.workers is not None
    if on_dask and (not isinstance(prob, str) or prob.endswith("*") or args.logits):
        raise _Fail("--scheduler/--workers score one probability column; K class columns and "
                    "--logits run in one process (drop --scheduler/--workers)")
    t0 = time.perf_counter()
    if on_dask:
        rep = _score_on_dask(args)
    else:
        rep = score_file(args.path, prob=prob, label=args.label, n_bins=args.bins,
                         closed=args.closed, strategy=args.strategy, observed=args.observed,
                         nan_policy=args.nan_policy, eps=args.eps, ace=args.ace,
                         chunk_rows=args.chunk_rows, progress=progress, format=args.format,
                         logits=args.logits)
    elapsed = time.perf_counter() - t0
    if args.json:
        text = json.dumps(_report_dict(rep, elapsed), allow_nan=False) + "\n"
    else:
        text = _report_text(rep, elapsed)
    if args.plot:
        _plot_atomic(rep, args.plot)
    if args.output:
        write_text_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _score_on_dask(args):
    """``--scheduler`` / ``--workers``: the same report, computed by Dask workers."""
    from fastcal.sources.io import detect_format

    if args.scheduler is not None and args.workers is not None:
        raise _Fail("pass --scheduler or --workers, not both")
    if args.workers is not None and args.workers < 1:
        raise _Fail(f"--workers must be >= 1; got {args.workers}")
    if not args.timeout > 0:
        raise _Fail(f"--timeout must be > 0; got {args.timeout}")
    fmt = detect_format(args.path, args.format)
    if fmt != "parquet":
        raise _Fail(f"{args.path}: --scheduler and --workers read Parquet only; got {fmt}")
    try:
        from fastcal.distributed import ROWS_PER_PARTITION, score_dataset
    except ImportError as exc:
        raise _Fail(f"--scheduler/--workers need Dask: pip install 'fastcal[dask]' ({exc})")
    return score_dataset(args.path, prob=args.prob, label=args.label, n_bins=args.bins,
                         closed=args.closed, strategy=args.strategy, observed=args.observed,
                         nan_policy=args.nan_policy, eps=args.eps, ace=args.ace,
                         scheduler=args.scheduler, workers=args.workers, timeout=args.timeout,
                         rows_per_partition=args.chunk_rows or ROWS_PER_PARTITION)


def _plot_atomic(rep, path):
    _check_folder(path)
    rep.plot(path)  # CalibrationReport.plot writes through a temporary file and a rename


# -- simulate -----------------------------------------------------------------------

def _sim_format(out, fmt):
    if fmt is not None:
        return fmt
    ext = os.path.splitext(out)[1].lower()
    return {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".feather": "feather",
            ".arrow": "feather", ".npy": "npy"}.get(ext, "npy" if ext == "" and
                                                     os.path.isdir(out) else "parquet")


def _chunks(n, sigma, seed, dtype, chunk_rows):
    """Simulated (y, p) chunks in order; up to two are generated ahead in worker threads."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    from fastcal.simulate import simulate

    with ThreadPoolExecutor(max_workers=2) as pool:
        ahead = deque()
        for a in range(0, n, chunk_rows):
            ahead.append(pool.submit(simulate, min(chunk_rows, n - a), sigma=sigma, seed=seed,
                                     start=a, dtype=dtype))
            if len(ahead) > 2:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def simulate_file(out, *, n, sigma=0.0, seed=0, format="parquet", dtype="float64",
                  chunk_rows=SIM_CHUNK_ROWS, progress=None):
    """Write rows [0, n) of :func:`fastcal.simulate` to ``out`` as columns p and y.

    Written chunk by chunk to a temporary name next to ``out`` and renamed at
    the end. ``format="npy"`` writes a directory ``out`` with ``p.npy`` and
    ``y.npy`` (and refuses to replace an existing directory).
    """
    import numpy as np

    from fastcal.progress import Progress

    if format not in SIM_FORMATS:
        msg = f"format must be one of {', '.join(SIM_FORMATS)}; got {format!r}"
        raise ValueError(msg)
    if n < 1:
        msg = f"n must be >= 1; got {n}"
        raise ValueError(msg)
    if chunk_rows < 1:
        msg = f"chunk_rows must be >= 1; got {chunk_rows}"
        raise ValueError(msg)
    if not sigma >= 0:
        msg = f"sigma must be >= 0; got {sigma}"
        raise ValueError(msg)
    dt = np.dtype(dtype)
    if os.path.isdir(out):
        msg = f"{out}: is an existing directory; remove it or choose another name"
        raise ValueError(msg)
    bar = Progress(n, label=os.path.basename(out), enabled=progress)
    chunks = _chunks(n, sigma, seed, dt, chunk_rows)
    try:
        if format == "npy":
            _write_npy_dir(out, n, dt, chunks, bar)
        else:
            tmp = _temp_near(out, suffix=os.path.splitext(out)[1])
            try:
                _WRITERS[format](tmp, dt, chunks, bar, chunk_rows)
                os.replace(tmp, out)
            except BaseException:
                _remove(tmp)
                raise
    finally:
        bar.close()


def _arrow_schema(dt):
    import pyarrow as pa

    return pa.schema([("p", pa.from_numpy_dtype(dt)), ("y", pa.uint8())])


def _batch(schema, y, p):
    import pyarrow as pa

    return pa.record_batch([pa.array(p), pa.array(y)], schema=schema)


def _write_parquet(tmp, dt, chunks, bar, chunk_rows):
    import pyarrow.parquet as pq

    schema = _arrow_schema(dt)
    with pq.ParquetWriter(tmp, schema) as w:
        for y, p in chunks:
            w.write_batch(_batch(schema, y, p), row_group_size=chunk_rows)
            bar.update(p.shape[0])


def _write_feather(tmp, dt, chunks, bar, chunk_rows):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    schema = _arrow_schema(dt)
    with pa.OSFile(tmp, "wb") as sink, ipc.new_file(sink, schema) as w:
        for y, p in chunks:
            w.write_batch(_batch(schema, y, p))
            bar.update(p.shape[0])


def _write_csv(tmp, dt, chunks, bar, chunk_rows):
    import pyarrow.csv as pcsv

    schema = _arrow_schema(dt)
    with pcsv.CSVWriter(tmp, schema) as w:
        for y, p in chunks:
            w.write_batch(_batch(schema, y, p))
            bar.update(p.shape[0])


_WRITERS = {"parquet": _write_parquet, "feather": _write_feather, "csv": _write_csv}


def _write_npy_dir(out, n, dt, chunks, bar):
    import numpy as np

    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        msg = f"{out}: the directory {parent} does not exist"
        raise ValueError(msg)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(out) + ".", suffix=".tmp", dir=parent)
    os.chmod(tmp, 0o777 & ~_atomic.umask())
    try:
        files = {}
        for name, dtype in (("p", dt), ("y", np.dtype(np.uint8))):
            fh = open(os.path.join(tmp, f"{name}.npy"), "wb")
            files[name] = fh
            header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                      "shape": (n,)}
            np.lib.format.write_array_header_1_0(fh, header)
        try:
            for y, p in chunks:
                files["p"].write(np.ascontiguousarray(p, dtype=dt).tobytes())
                files["y"].write(np.ascontiguousarray(y, dtype=np.uint8).tobytes())
                bar.update(p.shape[0])
        finally:
            for fh in files.values():
                fh.close()
        os.replace(tmp, out)
    except BaseException:
        _remove(tmp)
        raise


def _cmd_simulate(args):
    fmt = _sim_format(args.out, args.format)
    simulate_file(args.out, n=args.n, sigma=args.sigma, seed=args.seed, format=fmt,
                  dtype=args.dtype, chunk_rows=args.chunk_rows,
                  progress=False if args.quiet else None)
    return EXIT_OK


# -- entry point ------------------------------------------------------------------------

def main(argv=None):
    """Run the command line; returns the exit status."""
    ap = _parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help(sys.stderr)
        return EXIT_BAD
    try:
        return args.func(args)
    except (_Fail, ValueError, OSError) as exc:
        if getattr(args, "debug", False):
            raise
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"fastcal {args.command}: error: {text}", file=sys.stderr)
        return EXIT_BAD
    except KeyboardInterrupt:
        print(f"fastcal {args.command}: interrupted", file=sys.stderr)
        return 130


def _entry():
    sys.exit(main())


if __name__ == "__main__":
    _entry()

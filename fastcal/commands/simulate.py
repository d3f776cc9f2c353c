"""``fastcal simulate``: write the paper's simulated predictions to a file."""

import math
import os
import sys
import time

from fastcal import _atomic
from fastcal.commands.common import EXIT_OK, MAX_CHUNK_ROWS, MAX_SIM_ROWS, _check_local_output, _check_range, _Fail
from fastcal.writers import simulate_file

_SIM_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".csv.gz": "csv",
                   ".feather": "feather", ".arrow": "feather", ".npy": "npy"}


def run(args):
    """Run ``fastcal simulate`` with the parsed ``args``; returns the exit status."""
    _check_range("--n", args.n, 1, MAX_SIM_ROWS)
    _check_range("--chunk-rows", args.chunk_rows, 1, MAX_CHUNK_ROWS)
    if not (args.sigma >= 0 and math.isfinite(args.sigma)):
        raise _Fail(f"--sigma must be a finite number >= 0; got {args.sigma!r}")
    if args.out == "-":
        raise _Fail("OUT -: simulate writes a file, not standard output")
    _check_local_output("OUT", args.out)
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


"""A segmented report with ECCE against MCGrad's MulticalibrationError, same data, same run;
and a file scored by segment against the same file unsegmented.

    python benchmarks/segments_speed.py [--rows 1e7] [--segments 100] [--repeat 3]
                                        [--file-rows 1e8] [--file-segments 1000]

Data: the paper's simulation (``fastcal.simulate``, sigma = 0.5), one integer segment key per
row drawn uniformly from ``--segments`` values. fastcal: ``calibration_report(y, p, by=g,
metrics=("ecce",))`` then ``multicalibration_error(r, min_rows=...)``, timed whole (the
call as the guide shows it), and ``ace=False`` besides. MCGrad:
``MulticalibrationError(frame, ..., categorical_segment_columns=["g"], max_depth=1,
precision_dtype="float64").mce_sigma`` on a pandas frame built before the clock starts.
Prints each time (best of ``--repeat``; MCGrad once when it takes over a minute), the ratio,
and both ``mce_sigma`` (they agree where p has no ties; the simulation's float64 p has none).

File (``--file-rows`` > 0): a Parquet file of the same simulation with a uniform integer key of
``--file-segments`` values, written in row groups of 2**20 rows by a child process (so this
process's peak memory is the scoring's), then ``score_file(path, by="g")`` against
``score_file(path)`` (both one pass, ACE off as files have it), best of ``--repeat``: rows a
second of each, their ratio, and this process's peak resident memory.
"""

import argparse
import os
import resource
import subprocess
import sys
import time

import numpy as np


def _best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        if times[-1] > 60:
            break
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--file-rows", type=float, default=1e8)
    ap.add_argument("--file-segments", type=int, default=1000)
    ap.add_argument("--skip-mcgrad", action="store_true", help="the file only")
    args = ap.parse_args(argv)
    if not args.skip_mcgrad:
        _against_mcgrad(args)
    if args.file_rows > 0:
        _file(args)


_WRITE = """
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq, fastcal
path, n, segments = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
step = 1 << 20
rng = np.random.default_rng(1)
with pq.ParquetWriter(path, pa.schema([("y", pa.uint8()), ("p", pa.float64()),
                                       ("g", pa.int64())])) as out:
    for k, a in enumerate(range(0, n, step)):
        m = min(step, n - a)
        y, p = fastcal.simulate(m, sigma=0.5, seed=k)
        out.write_table(pa.table({"y": y.astype(np.uint8), "p": p,
                                  "g": rng.integers(0, segments, m)}))
"""


def _file(args):
    import fastcal

    n = int(args.file_rows)
    path = f"/tmp/fastcal_segments_{n}_{args.file_segments}.parquet"
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-c", _WRITE, path, str(n), str(args.file_segments)],
                       check=True)
    small = path + ".first-group.parquet"  # the kernels compiled before the clock
    if not os.path.exists(small):
        import pyarrow.parquet as pq

        pq.write_table(pq.ParquetFile(path).read_row_group(0), small)
    fastcal.score_file(small, prob="p", label="y")
    fastcal.score_file(small, prob="p", label="y", by="g")
    t_plain = t_by = float("inf")
    for _ in range(args.repeat):  # alternated: a change of load reaches both
        t, plain = _best(lambda: fastcal.score_file(path, prob="p", label="y"), 1)
        t_plain = min(t_plain, t)
        t, by = _best(lambda: fastcal.score_file(path, prob="p", label="y", by="g"), 1)
        t_by = min(t_by, t)
    assert by.overall.n == plain.n == n and len(by) == args.file_segments
    assert abs(by.overall.ece - plain.ece) <= 1e-12 * plain.ece
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 10
    print(f"file {n:,} rows, {args.file_segments} segments: score_file {t_plain:.2f} s "
          f"({n / t_plain / 1e6:.1f} M rows/s), by='g' {t_by:.2f} s ({n / t_by / 1e6:.1f} M rows/s); "
          f"ratio {t_by / t_plain:.2f}x; peak memory "
          + (f"{peak:,.0f} MiB" if args.skip_mcgrad else "(with --skip-mcgrad only)"))


def _against_mcgrad(args):
    from mcgrad.metrics import MulticalibrationError
    import pandas as pd

    import fastcal

    n = int(args.rows)
    y, p = fastcal.simulate(n, sigma=0.5, seed=0)
    g = np.random.default_rng(1).integers(0, args.segments, n)
    min_rows = 100

    def ours(**kw):
        r = fastcal.calibration_report(y, p, by=g, metrics=("ecce",), **kw)
        return fastcal.multicalibration_error(r, min_rows=min_rows).mce_sigma

    ours()  # compiled and cached before the clock
    t_ours, s_ours = _best(ours, args.repeat)
    t_noace, _ = _best(lambda: ours(ace=False), args.repeat)
    frame = pd.DataFrame({"y": y.astype(np.float64), "p": p, "g": g})

    def theirs():
        return MulticalibrationError(frame, "y", "p", categorical_segment_columns=["g"],
                                     max_depth=1, max_values_per_segment_feature=args.segments,
                                     min_samples_per_segment=min_rows,
                                     precision_dtype="float64").mce_sigma

    t_theirs, s_theirs = _best(theirs, args.repeat)
    print(f"rows {n:,}, segments {args.segments}")
    print(f"fastcal report(by=, ecce) + multicalibration_error: {t_ours:.3f} s "
          f"(ace=False {t_noace:.3f} s); mce_sigma {s_ours:.12g}")
    print(f"MCGrad MulticalibrationError.mce_sigma: {t_theirs:.3f} s; mce_sigma {s_theirs:.12g}")
    print(f"ratio (MCGrad / fastcal): {t_theirs / t_ours:.1f}x, ace=False {t_theirs / t_noace:.1f}x")


if __name__ == "__main__":
    main()

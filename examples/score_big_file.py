"""Simulate 1e8 rows to Parquet, then score the file out of core and print the time.

The rows are the paper's simulation (eq. 16-19) written in row groups of
1,000,000 by pyarrow; scoring streams record batches through a
CalibrationAccumulator, so memory stays at one batch whatever the file size.
The report carries the ECD test, and with --ci the intervals (the bootstrap
replicates are filled in the same pass, row weights fixed by the global row
index, so the intervals do not depend on the batch size).

Usage: python examples/score_big_file.py OUT_DIR [--small] [--rows N] [--sigma S]
                                         [--ci 0.95 --n-boot 50] [--keep]
Writes OUT_DIR/big.parquet (deleted unless --keep), report.md, report.json and
reliability.png.
"""

import argparse
import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

import fastcal

ROW_GROUP = 1_000_000


def write_parquet(path, n_rows, sigma, seed):
    """The simulation in row groups, written to a temporary file then renamed."""
    schema = pa.schema([("y_true", pa.uint8()), ("y_prob", pa.float64())])
    tmp = path + ".tmp"
    with pq.ParquetWriter(tmp, schema, compression="snappy") as writer:
        for start in range(0, n_rows, ROW_GROUP):
            n = min(ROW_GROUP, n_rows - start)
            y, p = fastcal.simulate(n, sigma=sigma, seed=seed, start=start)
            writer.write_table(pa.table({"y_true": y, "y_prob": p}, schema=schema))
    os.replace(tmp, path)


def score_parquet(path, *, ci=None, n_boot=0, seed=0, batch_size=1_000_000):
    """Stream the file's batches through one accumulator; returns the report."""
    acc = fastcal.CalibrationAccumulator(n_bins=10, n_boot=n_boot if ci else 0, seed=seed)
    for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size,
                                                   columns=["y_true", "y_prob"]):
        y = batch.column(0).to_numpy(zero_copy_only=False)
        p = batch.column(1).to_numpy(zero_copy_only=False)
        acc.update(y, p)
    return acc.report(ci=ci)


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--small", action="store_true", help="1e6 rows, for CI")
    ap.add_argument("--rows", type=int, default=None, help="rows (default 1e8, 1e6 with --small)")
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ci", type=float, default=None, help="confidence level of the intervals")
    ap.add_argument("--n-boot", type=int, default=50, help="bootstrap replicates with --ci")
    ap.add_argument("--keep", action="store_true", help="keep the Parquet file")
    args = ap.parse_args(argv)
    n_rows = args.rows or (1_000_000 if args.small else 100_000_000)
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, "big.parquet")

    t0 = time.perf_counter()
    write_parquet(path, n_rows, args.sigma, args.seed)
    t_write = time.perf_counter() - t0
    size_mb = os.path.getsize(path) / 1e6
    print(f"wrote {n_rows:,} rows ({size_mb:,.0f} MB) in {t_write:.1f} s", file=sys.stderr)

    # warm the JIT (serial and parallel kernels) outside the timing
    wy, wp = fastcal.simulate(200_000, sigma=args.sigma, seed=args.seed)
    fastcal.CalibrationAccumulator(n_boot=args.n_boot if args.ci else 0).update(wy, wp)
    fastcal.CalibrationAccumulator(n_boot=args.n_boot if args.ci else 0).update(wy[:1000], wp[:1000])
    t0 = time.perf_counter()
    rep = score_parquet(path, ci=args.ci, n_boot=args.n_boot, seed=args.seed)
    t_score = time.perf_counter() - t0
    rate = n_rows / t_score
    boot = f", bootstrap B = {args.n_boot}" if args.ci else ""
    summary = (f"scored {n_rows:,} rows out of core in {t_score:.2f} s ({rate / 1e6:.1f} M rows/s"
               f"{boot}; busy shared machine, timings noisy)")
    print(summary)
    print(rep.to_markdown())
    _write(os.path.join(args.out_dir, "report.md"), summary + "\n\n" + rep.to_markdown() + "\n")
    out = rep.to_dict()
    out["timing"] = {"rows": n_rows, "write_s": t_write, "score_s": t_score, "rows_per_s": rate}
    _write(os.path.join(args.out_dir, "report.json"), json.dumps(out, indent=1))
    rep.plot(os.path.join(args.out_dir, "reliability.png"),
             title=f"{n_rows:,} simulated rows, sigma = {args.sigma:g}, scored out of core")
    if not args.keep:
        os.unlink(path)


if __name__ == "__main__":
    main()

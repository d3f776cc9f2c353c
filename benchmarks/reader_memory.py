"""Peak memory and read cost of the file readers (issue 12), on files too big for the tests.

    python benchmarks/reader_memory.py [--rows 2e7] [--dir DIR]

Writes, into DIR (a temporary directory by default, removed afterwards):
a Parquet file of one row group, a Feather file of one record batch, a
Feather file of 64Ki-row batches, a Parquet file with page checksums, a 1-D
and a structured NPY file, all with columns p (float64) and y (uint8). Then,
each in a fresh process:

* peak RSS (``resource.getrusage(...).ru_maxrss``) of reading every chunk of
  (p, y), above the process's peak after importing numpy and pyarrow;
* the time to read every chunk of the Parquet file with and without page
  checksum verification, of the Feather files and of the NPY files (all
  ordinary reads), best of 7.

Not a pytest benchmark: RSS needs a process of its own per file. The files are
written by a child process too: ru_maxrss survives exec, so a parent that
held the data would lift every child's peak.
"""

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = """
import resource, sys, time
sys.path.insert(0, sys.argv[1])
import numpy, pyarrow, pyarrow.parquet, pyarrow.ipc  # before the baseline
from fastcal.sources.io import open_reader
path, names, chunk_rows, mode = sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5]
kw = {"verify_checksums": mode != "nocheck"}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best, rows, biggest = float("inf"), 0, 0
for _ in range(1 if mode == "rss" else 7):
    r, _ = open_reader(path, **kw)
    t = time.perf_counter()
    rows = 0
    for c in r.chunks(names, chunk_rows):
        rows += len(c.columns[0])
        biggest = max(biggest, len(c.columns[0]))
    best = min(best, time.perf_counter() - t)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{(peak - base) / 1024:.0f} {best * 1e3:.0f} {rows} {biggest}")
"""


def write_files(d, n, names_only=False):
    names = {
        "parquet, one row group": "one_rg.parquet", "parquet, page checksums": "ck.parquet",
        "feather, one batch": "one.feather", "feather, 64Ki-row batches": "many.feather",
        "npy 1-D": "p.npy", "npy structured": "s.npy"}
    out = {k: os.path.join(d, v) for k, v in names.items()}
    if names_only:
        return out
    import numpy as np
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    p = rng.random(n)
    y = (rng.random(n) < p).astype(np.uint8)
    t = pa.table({"p": p, "y": y})
    pq.write_table(t, out["parquet, one row group"], row_group_size=n)
    pq.write_table(t, out["parquet, page checksums"], write_page_checksum=True)
    for key, size in (("feather, one batch", None), ("feather, 64Ki-row batches", 1 << 16)):
        with pa.OSFile(out[key], "wb") as sink, ipc.new_file(sink, t.schema) as w:
            for b in t.to_batches(max_chunksize=size):
                w.write_batch(b)
    np.save(out["npy 1-D"], p)
    s = np.zeros(n, dtype=[("p", "<f8"), ("y", "u1")])
    s["p"], s["y"] = p, y
    np.save(out["npy structured"], s)
    return out


def child(path, names, chunk_rows, mode):
    res = subprocess.run([sys.executable, "-c", _CHILD, ROOT, path, names, str(chunk_rows),
                          mode], capture_output=True, text=True, check=True)
    extra, ms, rows, biggest = res.stdout.split()
    return int(extra), int(ms), int(rows), int(biggest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=2e7)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--write", default=None, help=argparse.SUPPRESS)  # the writing child
    args = ap.parse_args()
    n = int(args.rows)
    if args.write:
        write_files(args.write, n)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--rows", str(n),
                        "--write", d], check=True)
        files = write_files(d, 0, names_only=True)
        print(f"{n} rows; peak RSS above the import baseline, reading (p, y):")
        for key in ("parquet, one row group", "feather, one batch", "feather, 64Ki-row batches"):
            for chunk_rows in (1 << 16, 1 << 18):
                extra, _, rows, biggest = child(files[key], "p,y", chunk_rows, "rss")
                print(f"  {key:28s} chunk_rows={chunk_rows:7d}: {extra:5d} MB "
                      f"(rows {rows}, largest chunk {biggest})")
        print("read time, best of 7 (file in the page cache):")
        for mode in ("check", "nocheck"):
            _, ms, _, _ = child(files["parquet, page checksums"], "p,y", 1 << 18, mode)
            print(f"  parquet with page checksums, verify_checksums={mode == 'check'}: {ms} ms")
        for key in ("feather, one batch", "feather, 64Ki-row batches"):
            _, ms, _, _ = child(files[key], "p,y", 1 << 18, "time")
            print(f"  {key} (p, y): {ms} ms")
        _, ms, _, _ = child(files["npy 1-D"], "p", 1 << 18, "time")
        print(f"  npy 1-D (p): {ms} ms")
        _, ms, _, _ = child(files["npy structured"], "p,y", 1 << 18, "time")
        print(f"  npy structured (p, y): {ms} ms")


if __name__ == "__main__":
    main()

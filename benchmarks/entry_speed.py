"""Speed of the default entry points once compiled, for before/after comparisons.

Prints one line ``name seconds`` per figure (median of 5 calls after one
warm-up call): the default binary report of N rows in memory, ``score_file``
of the same rows from Parquet, ``score_dask`` of them in 4 chunks (Dask's
threaded scheduler) and a 4-class report of N / 10 rows. Only API that every
version since 0.1.0 has, so two checkouts can be timed in turns::

    PYTHONPATH=/path/to/before python benchmarks/entry_speed.py 1e7
    PYTHONPATH=. python benchmarks/entry_speed.py 1e7
"""

import os
import sys
import tempfile

from kernel_speed import _data, _median  # benchmarks/ is on the path of a script run from it
import pyarrow as pa
import pyarrow.parquet as pq

import fastcal


def main():
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10_000_000
    y, p, yk, P = _data(n)
    path = os.path.join(tempfile.gettempdir(), f"fastcal-entry-speed-{n}.parquet")
    if not os.path.exists(path):
        pq.write_table(pa.table({"p": p, "y": y}), path, row_group_size=1 << 20)

    import dask.array as da

    from fastcal.distributed import score_dask

    dy, dp = da.from_array(y, chunks=n // 4), da.from_array(p, chunks=n // 4)
    figures = {
        "report": lambda: fastcal.calibration_report(y, p, n_bins=15),
        "score_file": lambda: fastcal.score_file(path, prob="p", label="y", n_bins=15),
        "score_dask": lambda: score_dask(dy, dp, n_bins=15),
        "multiclass": lambda: fastcal.calibration_report(yk, P, n_bins=15),
    }
    for name, call in figures.items():
        print(f"{name} {_median(call):.4f}", flush=True)


if __name__ == "__main__":
    main()

"""Kernel speed once compiled: median of 5 reports of 1e7 binary rows (issue 26).

Prints ``binary_ace_s binary_no_ace_s kclass_s`` (medians, seconds), the
figures to compare before and after a change to how kernels are compiled::

    python benchmarks/kernel_speed.py [n_rows]

float32 p, uint8 y, 15 bins; a 4-class float32 report of n_rows // 10 rows.
"""

import statistics
import sys
import time

import numpy as np

import fastcal


def _median(call, reps=5):
    call()  # compile or load
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _data(n):
    """n binary rows (float32 p, uint8 y) and n / 10 rows of 4 classes, seed 0."""
    rng = np.random.default_rng(0)
    p = rng.random(n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.uint8)
    P = rng.dirichlet(np.ones(4), n // 10).astype(np.float32)
    yk = rng.integers(0, 4, n // 10).astype(np.uint8)
    return y, p, yk, P


def main():
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10_000_000
    y, p, yk, P = _data(n)
    out = [_median(lambda: fastcal.calibration_report(y, p, n_bins=15)),
           _median(lambda: fastcal.calibration_report(y, p, n_bins=15, ace=False)),
           _median(lambda: fastcal.calibration_report(yk, P, n_bins=15))]
    print(" ".join(f"{x:.4f}" for x in out))


if __name__ == "__main__":
    main()

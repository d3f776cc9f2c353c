"""Shared data and helpers of the benchmark suite (pytest-benchmark).

Sizes: FASTCAL_BENCH_N (default 1e8) predictions for fastcal and the read
floor; slower contenders run on the first rows of the same data (their
throughput is per prediction, so the sizes only bound the suite's time).
Every timing is the minimum over rounds after one warm-up round, which also
compiles the kernels.
"""

import os

# OpenMP threads (numba's default threading layer here, and torch's) spin while
# waiting for work. On a shared machine with more busy threads than cores the
# spinning of every process delays everyone's parallel regions by milliseconds
# (measured: a 1,000-row two-thread call took 21 ms with active waiting and
# 0.02 ms with passive). Set before any OpenMP runtime is loaded; an explicit
# setting in the environment wins. RESULTS.md records the value used.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fastcal  # noqa: E402

N = int(float(os.environ.get("FASTCAL_BENCH_N", "1e8")))
N_BINS = 15
SIGMA = 0.5  # the middle noise level of the paper's Table I
# Rows given to each slower contender (capped at N).
SIZES = {"numpy_vectorised": 10**7, "numpy_loop": 10**7, "torchmetrics": 10**7,
         "sklearn": 10**6, "netcal": 10**6}


def size_of(contender):
    return min(N, SIZES.get(contender, N))


@pytest.fixture(scope="session")
def data():
    """The paper's simulated predictions: uint8 labels, float64 and float32 p."""
    y, p64 = fastcal.simulate(N, sigma=SIGMA, seed=0, dtype=np.float64)
    return {"y": y, np.float64: p64, np.float32: p64.astype(np.float32)}


@pytest.fixture(scope="session")
def reference(data):
    """fastcal's report on the first n rows (cached), to check each contender."""
    cache = {}

    def get(dtype, n, closed="left", n_bins=N_BINS, edges=None, clip=None):
        key = (dtype, n, closed, n_bins, None if edges is None else tuple(edges), clip)
        if key not in cache:
            p = data[dtype][:n]
            if clip is not None:
                p = np.clip(p, clip, 1 - clip)
            cache[key] = fastcal.calibration_report(data["y"][:n], p, n_bins=n_bins, edges=edges,
                                                    closed=closed, ace=False)
        return cache[key]

    return get


def race(benchmark, fn, *, group, contender, n, rounds=3, **info):
    """Time fn (min of rounds after a warm-up) and label the row for report.py."""
    benchmark.group = group
    benchmark.extra_info.update({"contender": contender, "n": int(n), **info})
    iterations = max(1, 200_000 // int(n))  # many calls per round for small inputs
    return benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)


def peer(module, name):
    """Import a peer or skip with a message naming what to install."""
    return pytest.importorskip(module, reason=f"{name} is not installed (pip install -e '.[bench]')")

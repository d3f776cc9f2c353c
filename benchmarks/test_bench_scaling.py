"""Throughput of the full report against N, n_bins and threads.

N from 1e3 (where the fixed cost per call decides: dispatch, validation,
building the report) to FASTCAL_BENCH_N, for the full report against the
vectorised-numpy report and for ECE alone against numpy's bincount ECE (numpy
up to 1e7); n_bins from 10 to 10,000 at 1e7 rows; 1 and 2 threads at N rows,
with the read floor at the same thread counts.
"""

from conftest import N_BINS, N, race
import contenders as c
import numpy as np
import pytest

SIZES_N = [n for n in (10**3, 10**4, 10**5, 10**6, 10**7, 10**8) if n <= N]


@pytest.mark.parametrize("n", SIZES_N)
def test_report_vs_n(benchmark, data, n):
    y, p = data["y"][:n], data[np.float32][:n]
    rep = race(benchmark, lambda: c.fastcal_report(y, p, N_BINS), group="scaling-n",
               contender="fastcal report", n=n, rounds=5)
    assert rep.n == n


@pytest.mark.parametrize("n", [n for n in SIZES_N if n <= 10**7])
def test_numpy_vs_n(benchmark, data, reference, n):
    y, p = data["y"][:n], data[np.float32][:n]
    out = race(benchmark, lambda: c.numpy_vectorised(y, p, N_BINS), group="scaling-n",
               contender="numpy vectorised", n=n, rounds=5)
    assert out["ece"] == pytest.approx(reference(np.float32, n).ece, rel=1e-9)


@pytest.mark.parametrize("n", SIZES_N)
def test_ece_vs_n(benchmark, data, n):
    y, p = data["y"][:n], data[np.float32][:n]
    out = race(benchmark, lambda: c.fastcal_ece(y, p, N_BINS), group="scaling-n",
               contender="fastcal ece", n=n, rounds=5)
    assert out["ece"] == pytest.approx(c.numpy_ece(y, p, N_BINS)["ece"], rel=1e-9)


@pytest.mark.parametrize("n", [n for n in SIZES_N if n <= 10**7])
def test_numpy_ece_vs_n(benchmark, data, n):
    y, p = data["y"][:n], data[np.float32][:n]
    out = race(benchmark, lambda: c.numpy_ece(y, p, N_BINS), group="scaling-n",
               contender="numpy ece (bincount)", n=n, rounds=5)
    assert out["ece"] == pytest.approx(c.numpy_vectorised(y, p, N_BINS)["ece"], rel=1e-9)


@pytest.mark.parametrize("n_bins", [10, 100, 1000, 10_000])
def test_report_vs_bins(benchmark, data, reference, n_bins):
    n = min(N, 10**7)
    y, p = data["y"][:n], data[np.float32][:n]
    rep = race(benchmark, lambda: c.fastcal_report(y, p, n_bins), group="scaling-bins",
               contender="fastcal report", n=n, n_bins=n_bins)
    want = c.numpy_vectorised(y, p, n_bins)
    np.testing.assert_array_equal(rep.bins["count"], want["count"])
    assert rep.ece == pytest.approx(want["ece"], rel=1e-9)


@pytest.mark.parametrize("threads", [1, 2])
def test_report_vs_threads(benchmark, data, reference, threads):
    y, p = data["y"], data[np.float32]
    rep = race(benchmark, lambda: c.fastcal_report(y, p, N_BINS, threads=threads),
               group="scaling-threads", contender="fastcal report", n=N, threads=threads)
    assert rep.ece == pytest.approx(reference(np.float32, N).ece, rel=1e-12)


@pytest.mark.parametrize("threads", [1, 2])
def test_read_floor_vs_threads(benchmark, data, threads):
    y, p = data["y"], data[np.float32]
    _, sy = race(benchmark, lambda: c.read_floor(y, p, threads), group="scaling-threads",
                 contender="read floor", n=N, threads=threads, floor=True)
    assert sy == int(y.sum(dtype=np.int64))

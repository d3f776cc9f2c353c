"""GPU scoring against torchmetrics on the same GPU and the same data.

Binary: FASTCAL_GPU_BENCH_N (default 1e9) float32 predictions, uniform p and
calibrated labels (y ~ Bernoulli(p), uint8), 15 bins, generated on the GPU;
fastcal's full fill (counts, positives, correct, sum p, ECD sum and variance,
Brier, NLL and their squares) then the report, against torchmetrics'
``binary_calibration_error`` on the same tensors in float32 and float64.
Multi-class: FASTCAL_GPU_BENCH_MC_N (default 1e8) rows of K = 10 softmax
probabilities (float32) against ``multiclass_calibration_error``. Bootstrap
intervals (200 replicates) on the first FASTCAL_GPU_BENCH_BOOT_N (1e8) binary rows.

Every fastcal result is checked against the CPU kernels on a host copy of the
same data (counts exact, sums to 1e-12) before it counts. Without a GPU (the
simulator, ``NUMBA_ENABLE_CUDASIM=1``) the same code runs on tiny N with
host tensors, to keep this file correct. The summary of a run is written by
``benchmarks/gpu_run.sh`` from pytest-benchmark's JSON.
"""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tm = pytest.importorskip("torchmetrics.functional.classification")

import fastcal  # noqa: E402
from fastcal._kernels import binary as kb  # noqa: E402
from fastcal.backends import cpu as mc  # noqa: E402
from fastcal.backends import cuda as fc  # noqa: E402
from fastcal.inputs.binning import kernel_edges  # noqa: E402
from fastcal.reports.report import CalibrationReport  # noqa: E402

N = int(float(os.environ.get("FASTCAL_GPU_BENCH_N", "1e9")))
N_MC = int(float(os.environ.get("FASTCAL_GPU_BENCH_MC_N", "1e8")))
N_BOOT = int(float(os.environ.get("FASTCAL_GPU_BENCH_BOOT_N", "1e8")))
K = 10
N_BINS = 15
ROUNDS = int(os.environ.get("FASTCAL_GPU_BENCH_ROUNDS", "5"))
DEV = "cuda" if torch.cuda.is_available() else "cpu"

pytestmark = pytest.mark.skipif(not fc.is_available(),
                                reason="no CUDA GPU and not under NUMBA_ENABLE_CUDASIM=1")


def _sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def _on_gpu(t):
    """What fastcal gets: the torch tensor itself on a GPU, a simulator array otherwise."""
    if DEV == "cuda":
        return t
    from numba import cuda
    return cuda.to_device(t.numpy())


def _race(benchmark, fn, *, n, name, **info):
    def run():
        out = fn()
        _sync()
        return out

    out = benchmark.pedantic(run, rounds=ROUNDS, warmup_rounds=1, iterations=1)
    best = benchmark.stats.stats.min
    benchmark.extra_info.update(contender=name, n=n, device=_device_name(),
                                g_per_s=n / best / 1e9, **info)
    return out


def _device_name():
    return torch.cuda.get_device_name() if DEV == "cuda" else "numba CUDA simulator (CPU)"


@pytest.fixture(scope="module")
def binary_data():
    g = torch.Generator(device=DEV).manual_seed(0)
    p = torch.rand(N, generator=g, device=DEV, dtype=torch.float32)
    y = (torch.rand(N, generator=g, device=DEV, dtype=torch.float32) < p).to(torch.uint8)
    return y, p


@pytest.fixture(scope="module")
def binary_cpu_state(binary_data):
    """The CPU kernels on a host copy: the reference every GPU run must equal."""
    y, p = (t.cpu().numpy() for t in binary_data)
    edges = kernel_edges(N_BINS, "<f4")
    return mc.named(mc.BINARY, kb.fill_parallel(p, y, edges, True, False, False, 0.0, True,
                                                16 if N > 10**6 else 1))


def _report(state, n_bins=N_BINS):
    counts, sums, totals = state["counts"], state["sums"], state["totals"]
    return CalibrationReport.from_state(
        counts[:n_bins], sums[:n_bins], totals, edges=fastcal.uniform_edges(n_bins),
        closed="left", n_omitted=0, observed="frac_pos", strategy="uniform", eps=0.0)


def _check_state(gpu, cpu):
    """The same named arrays on both backends."""
    assert list(gpu) == list(cpu)
    for g, c in zip(gpu.values(), cpu.values()):
        if c.dtype.kind in "iu":
            np.testing.assert_array_equal(g, c)
        else:
            np.testing.assert_allclose(g, c, rtol=1e-12, atol=1e-12 * np.abs(c).max())


def test_fastcal_binary_full_report(benchmark, binary_data, binary_cpu_state):
    y, p = binary_data
    dy, dp = _on_gpu(y), _on_gpu(p)
    edges = kernel_edges(N_BINS, "<f4")

    def run():
        return _report(fc.fill_binary(dy, dp, edges, True, False, False, 0.0, True))

    rep = _race(benchmark, run, n=N, name="fastcal GPU report", dtype="float32")
    _check_state(fc.fill_binary(dy, dp, edges, True, False, False, 0.0, True), binary_cpu_state)
    want = _report(binary_cpu_state)
    assert rep.ece == pytest.approx(want.ece, rel=1e-9)
    assert rep.ecd == pytest.approx(want.ecd, rel=1e-9)
    benchmark.extra_info.update(ece=float(rep.ece), ecd=float(rep.ecd))


def test_fastcal_default_report_with_ace(benchmark, binary_data):
    """calibration_report's default (ACE on): buckets and the gather of boundary
    rows on the GPU too, against the CPU report of a host copy."""
    y, p = binary_data
    dy, dp = _on_gpu(y), _on_gpu(p)

    def run():
        return fastcal.calibration_report(dy, dp, n_bins=N_BINS)

    rep = _race(benchmark, run, n=N, name="fastcal GPU default report (ACE)", dtype="float32")
    yh, ph = (t.cpu().numpy() for t in binary_data)
    want = fastcal.calibration_report(yh, ph, n_bins=N_BINS)
    for name in ("ece", "ace", "ecd", "brier", "nll"):
        assert getattr(rep, name) == pytest.approx(getattr(want, name), rel=1e-12), name
    benchmark.extra_info.update(ece=float(rep.ece), ace=float(rep.ace))


def test_fastcal_report_with_intervals(benchmark, binary_data):
    """ci=0.95 with the default 200 bootstrap replicates, filled on the GPU
    (the first N_BOOT rows), against the CPU report of a host copy."""
    n = min(N, N_BOOT)
    y, p = (t[:n] for t in binary_data)
    dy, dp = _on_gpu(y), _on_gpu(p)

    def run():
        return fastcal.calibration_report(dy, dp, n_bins=N_BINS, ci=0.95, ace=False)

    rep = _race(benchmark, run, n=n, name="fastcal GPU report, 200 bootstrap replicates",
                dtype="float32")
    want = fastcal.calibration_report(y.cpu().numpy(), p.cpu().numpy(), n_bins=N_BINS,
                                      ci=0.95, ace=False)
    for name in ("ece", "esce", "mce"):
        np.testing.assert_allclose(rep.intervals[name], want.intervals[name], rtol=1e-12)
    benchmark.extra_info.update(ece=float(rep.ece))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torchmetrics_binary(benchmark, binary_data, binary_cpu_state, dtype):
    y, p = binary_data
    pt = p if dtype == "float32" else p.double()

    def run():
        return tm.binary_calibration_error(pt, y, n_bins=N_BINS, norm="l1")

    val = float(_race(benchmark, run, n=N, name=f"torchmetrics {dtype}", dtype=dtype))
    want = _report(binary_cpu_state).ece
    benchmark.extra_info.update(ece=val, ece_float64_reference=float(want),
                                abs_error=abs(val - float(want)))
    if dtype == "float64":
        assert val == pytest.approx(float(want), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("n_bins", [100, 2000])
def test_fastcal_binary_many_bins(benchmark, binary_data, n_bins):
    """Warp-private bins: in shared memory (100) and in global rows (2000)."""
    y, p = binary_data
    dy, dp = _on_gpu(y), _on_gpu(p)
    edges = kernel_edges(n_bins, "<f4")

    def run():
        return _report(fc.fill_binary(dy, dp, edges, True, False, False, 0.0, True), n_bins)

    rep = _race(benchmark, run, n=N, name=f"fastcal GPU report, {n_bins} bins", dtype="float32")
    yh, ph = (t.cpu().numpy() for t in binary_data)
    cpu = mc.named(mc.BINARY, kb.fill_parallel(ph, yh, edges, True, False, False, 0.0, True,
                                               16 if N > 10**6 else 1))
    _check_state(fc.fill_binary(dy, dp, edges, True, False, False, 0.0, True), cpu)
    benchmark.extra_info.update(ece=float(rep.ece), n_bins=n_bins)


def test_torchmetrics_binary_100_bins(benchmark, binary_data):
    y, p = binary_data

    def run():
        return tm.binary_calibration_error(p, y, n_bins=100, norm="l1")

    val = float(_race(benchmark, run, n=N, name="torchmetrics float32, 100 bins"))
    benchmark.extra_info.update(ece=val, n_bins=100)


@pytest.fixture(scope="module")
def mc_data():
    g = torch.Generator(device=DEV).manual_seed(1)
    z = torch.randn(N_MC, K, generator=g, device=DEV, dtype=torch.float32) * 2
    P = torch.softmax(z, dim=1)
    y = torch.multinomial(P, 1, generator=g).squeeze(1).to(torch.int64)
    return y, P


def test_fastcal_multiclass(benchmark, mc_data):
    y, P = mc_data
    dy, dP = _on_gpu(y), _on_gpu(P)
    edges = kernel_edges(N_BINS, "<f4")

    def run():
        return fc.fill_multiclass(dy, dP, edges, True, False, 0.0, False, True, True)

    state = _race(benchmark, run, n=N_MC, name="fastcal GPU multi-class", K=K)
    yh, Ph = y.cpu().numpy(), P.cpu().numpy()
    cpu = mc.fill_multiclass(yh, Ph, edges, True, False, 0.0, False, True, True, 16 if N_MC > 10**5 else 1)
    _check_state(state, cpu)
    counts, sums = state["counts"][:N_BINS], state["sums"][:N_BINS]
    n = counts[:, 0].sum()
    ece = np.abs(counts[:, 1] - sums[:, 0]).sum() / n
    benchmark.extra_info.update(ece=float(ece))


def test_fastcal_multiclass_default_report(benchmark, mc_data):
    """calibration_report's default for K classes: class-wise state, and ACE
    ranked, bucketed and gathered on the GPU (no copy of the (N, K) rows)."""
    y, P = mc_data
    dy, dP = _on_gpu(y), _on_gpu(P)

    def run():
        return fastcal.calibration_report(dy, dP, n_bins=N_BINS)

    rep = _race(benchmark, run, n=N_MC, name="fastcal GPU multi-class default report (ACE)",
                K=K)
    want = fastcal.calibration_report(y.cpu().numpy(), P.cpu().numpy(), n_bins=N_BINS)
    for name in ("ece", "ace", "classwise_ece", "ecd", "brier"):
        assert getattr(rep, name) == pytest.approx(getattr(want, name), rel=1e-12), name
    benchmark.extra_info.update(ece=float(rep.ece), ace=float(rep.ace))


def test_torchmetrics_multiclass(benchmark, mc_data):
    y, P = mc_data

    def run():
        return tm.multiclass_calibration_error(P, y, num_classes=K, n_bins=N_BINS, norm="l1")

    val = float(_race(benchmark, run, n=N_MC, name="torchmetrics multi-class", K=K))
    benchmark.extra_info.update(ece=val)

"""Binary calibration: fastcal against numpy, scikit-learn, torchmetrics and netcal.

Same data for all (the paper's simulation, sigma = 0.5, 15 bins), float32 p
with uint8 labels (the headline) and float64 p. Each contender's values are
checked against fastcal's report on the same rows where the definitions
agree; where they do not, the difference is recorded in extra_info and
explained in the docstring (and in RESULTS.md).
"""

from conftest import N_BINS, N, peer, race, size_of
import contenders as c
import numpy as np
import pytest

DTYPES = [pytest.param(np.float32, id="float32"), pytest.param(np.float64, id="float64")]


def group(dtype):
    return f"binary-{np.dtype(dtype).name}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_fastcal_report(benchmark, data, reference, dtype):
    """The report as the README calls it (defaults: ACE on), checked against a
    stable sort of all rows for ACE and chunked numpy sums for the rest."""
    y, p = data["y"], data[dtype]
    rep = race(benchmark, lambda: c.fastcal_report(y, p, N_BINS), group=group(dtype),
               contender="fastcal report", n=N, reference=True)
    assert rep.ace == pytest.approx(c.ace_by_sort(y, p, N_BINS), rel=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fastcal_report_one_pass(benchmark, data, reference, dtype):
    """The strictly single-pass report (ace=False)."""
    y, p = data["y"], data[dtype]
    rep = race(benchmark, lambda: c.fastcal_report_one_pass(y, p, N_BINS), group=group(dtype),
               contender="fastcal report, ace=False", n=N)
    want = c.numpy_sums_chunked(y, p, N_BINS)  # all N rows, untimed
    np.testing.assert_array_equal(rep.bins["count"], want["count"])
    np.testing.assert_allclose(rep.bins["conf"], want["sum_p"] / want["count"], rtol=1e-12)
    np.testing.assert_allclose(rep.bins["frac_pos"], want["pos"] / want["count"], rtol=1e-12)
    np.testing.assert_allclose(rep.bins["ecd"], want["sum_ecd"] / want["count"], rtol=1e-9)
    assert rep.ecd == pytest.approx(want["sum_ecd"].sum() / N, rel=1e-9)
    assert rep.brier == pytest.approx(want["brier"] / N, rel=1e-9)
    assert rep.nll == pytest.approx(want["nll"] / N, rel=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fastcal_one_metric(benchmark, data, reference, dtype):
    """fastcal.ece alone: the same pass without the logarithms."""
    y, p = data["y"], data[dtype]
    out = race(benchmark, lambda: c.fastcal_ece(y, p, N_BINS), group=group(dtype),
               contender="fastcal ece", n=N)
    assert out["ece"] == pytest.approx(reference(dtype, N).ece, rel=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_read_floor(benchmark, data, dtype):
    """A parallel pass that only sums p and y: what reading the bytes costs."""
    y, p = data["y"], data[dtype]
    sp, sy = race(benchmark, lambda: c.read_floor(y, p, 2), group=group(dtype),
                  contender="read floor", n=N, floor=True)
    assert sy == int(y.sum(dtype=np.int64))
    assert sp == pytest.approx(float(p.sum(dtype=np.float64)), rel=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_vectorised(benchmark, data, reference, dtype):
    """np.searchsorted + np.bincount per bin and a vectorised ECD, Brier, NLL."""
    n = size_of("numpy_vectorised")
    y, p = data["y"][:n], data[dtype][:n]
    out = race(benchmark, lambda: c.numpy_vectorised(y, p, N_BINS), group=group(dtype),
               contender="numpy vectorised", n=n)
    rep = reference(dtype, n)
    np.testing.assert_array_equal(out["count"], rep.bins["count"])
    np.testing.assert_allclose(out["conf"], rep.bins["conf"], rtol=1e-12)
    np.testing.assert_allclose(out["frac_pos"], rep.bins["frac_pos"], rtol=1e-12)
    np.testing.assert_allclose(out["ecd_bins"], rep.bins["ecd"], rtol=1e-9)
    for key in ("ece", "esce", "mce", "ecd", "brier", "nll"):
        assert out[key] == pytest.approx(getattr(rep, key), rel=1e-9), key


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_loop(benchmark, data, reference, dtype):
    """A Python loop over bins with boolean masks (seed 002's style)."""
    n = size_of("numpy_loop")
    y, p = data["y"][:n], data[dtype][:n]
    out = race(benchmark, lambda: c.numpy_loop(y, p, N_BINS), group=group(dtype),
               contender="numpy loop over bins", n=n)
    rep = reference(dtype, n)
    assert out["ece"] == pytest.approx(rep.ece, rel=1e-9)
    assert out["ecd"] == pytest.approx(rep.ecd, rel=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sklearn(benchmark, data, reference, dtype):
    """calibration_curve + brier_score_loss + log_loss.

    calibration_curve uses bins (a, b] with p = 0 in the first bin (fastcal's
    closed="right") and the float64 edges np.linspace(0, 1, n + 1): a float32
    p equal to float32(k/n) can then fall on the other side than with
    fastcal's default edges, which are rounded to p's dtype. So the reference
    is fastcal given the same float64 edges. calibration_curve drops empty
    bins and returns no counts, so ECE cannot be read off it; the per-bin
    curves are compared instead.
    """
    peer("sklearn", "scikit-learn")
    n = size_of("sklearn")
    y, p = data["y"][:n], data[dtype][:n]
    out = race(benchmark, lambda: c.sklearn_metrics(y, p, N_BINS), group=group(dtype),
               contender="scikit-learn", n=n)
    rep = reference(dtype, n, closed="right", edges=np.linspace(0.0, 1.0, N_BINS + 1))
    default = reference(dtype, n, closed="right")
    benchmark.extra_info["bins_moved_by_edge_rounding"] = int(
        np.abs(default.bins["count"] - rep.bins["count"]).sum() // 2)
    full = rep.bins["count"] > 0
    np.testing.assert_allclose(out["frac_pos"], rep.bins["frac_pos"][full], rtol=1e-12)
    np.testing.assert_allclose(out["conf"], rep.bins["conf"][full], rtol=1e-12)
    # brier_score_loss and log_loss compute the terms in p's dtype: float32
    # input loses digits there (recorded), float64 agrees.
    tol = 1e-9 if dtype == np.float64 else 1e-5
    benchmark.extra_info.update(brier_rel_diff=abs(out["brier"] - rep.brier) / rep.brier,
                                nll_rel_diff=abs(out["nll"] - rep.nll) / rep.nll)
    assert out["brier"] == pytest.approx(rep.brier, rel=tol)
    assert out["nll"] == pytest.approx(rep.nll, rel=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_torchmetrics(benchmark, data, reference, dtype):
    """torchmetrics binary_calibration_error (L1 norm = ECE with frac_pos).

    Its bins are [a, b) with p = 1 clamped into the last bin (as fastcal's
    default), with edges torch.linspace(0, 1, n + 1) in p's dtype; the
    reference is fastcal given those edges. It accumulates in p's dtype: on
    float32 input the per-bin sums of ~1e6 values are float32 and the ECE
    drifts (recorded as rel_diff); the float64 run agrees with fastcal.
    """
    peer("torch", "torch")
    peer("torchmetrics", "torchmetrics")
    import torch

    torch.set_num_threads(2)
    n = size_of("torchmetrics")
    y, p = data["y"][:n], data[dtype][:n]
    out = race(benchmark, lambda: c.torchmetrics_ece(y, p, N_BINS), group=group(dtype),
               contender="torchmetrics", n=n)
    edges = torch.linspace(0, 1, N_BINS + 1, dtype=torch.from_numpy(p[:1]).dtype).double().numpy()
    want = reference(dtype, n, edges=edges).ece
    benchmark.extra_info.update(value=out["ece"], fastcal=want,
                                rel_diff=abs(out["ece"] - want) / want)
    if dtype == np.float64:
        assert out["ece"] == pytest.approx(want, rel=1e-9)
    else:
        # float32 accumulation: recorded, and bounded by what float32 sums can lose
        assert abs(out["ece"] - want) < 0.01


@pytest.mark.parametrize("dtype", DTYPES)
def test_netcal(benchmark, data, reference, dtype):
    """netcal ECE: clips p to [eps, 1 - eps] with eps of p's dtype (so p = 1.0
    lands in the last bin at 1 - eps rather than in a bin of its own), then
    numpy histogram bins [a, b) with the last bin closed and the float64 edges
    np.linspace(0, 1, n + 1). The reference is fastcal on the clipped p with
    those edges; rel_diff records the difference from fastcal's default."""
    peer("netcal", "netcal")
    n = size_of("netcal")
    y, p = data["y"][:n], data[dtype][:n]
    out = race(benchmark, lambda: c.netcal_ece(y, p, N_BINS), group=group(dtype),
               contender="netcal", n=n)
    eps = float(np.finfo(dtype).eps)
    want = reference(dtype, n, edges=np.linspace(0.0, 1.0, N_BINS + 1), clip=eps).ece
    default = reference(dtype, n).ece
    benchmark.extra_info.update(value=out["ece"], fastcal=default,
                                rel_diff=abs(out["ece"] - default) / default)
    assert out["ece"] == pytest.approx(want, rel=1e-9)

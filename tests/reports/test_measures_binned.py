"""L2, max and debiased L2 calibration errors and the Brier decomposition (issue 27),
against torchmetrics, uncertainty-calibration and loop references, at every entry point."""

import json
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import fastcal
from fastcal.reports.measures import BRIER_PARTS

PARTS = BRIER_PARTS


def _binary(n=3000, seed=0):
    return fastcal.simulate(n, sigma=0.6, seed=seed)


def _classes(n=2000, k=4, seed=1):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.7), size=n)
    y = np.array([rng.choice(k, p=row) for row in p ** 1.5 / (p ** 1.5).sum(1, keepdims=True)])
    return y, p


def _identity(rep):
    d = {name: getattr(rep, name) for name in PARTS}
    return (d["brier_reliability"] - d["brier_resolution"] + d["brier_uncertainty"]
            + d["brier_within_variance"] - d["brier_within_covariance"])


def _loop_decomposition(y, p, edges, closed="left"):
    """Murphy + Stephenson et al. with loops over bins (binary, 0/1 y)."""
    n = len(p)
    side = "right" if closed == "left" else "left"
    b = np.clip(np.searchsorted(edges, p, side=side) - 1, 0, len(edges) - 2)
    ybar = np.mean(y)
    rel = res = wbv = wbc = 0.0
    for k in range(len(edges) - 1):
        sel = b == k
        if not sel.any():
            continue
        pk, yk = p[sel].mean(), y[sel].mean()
        rel += sel.sum() * (pk - yk) ** 2
        res += sel.sum() * (yk - ybar) ** 2
        wbv += np.sum((p[sel] - pk) ** 2)
        wbc += 2 * np.sum((p[sel] - pk) * (y[sel] - yk))
    return {"brier_reliability": rel / n, "brier_resolution": res / n,
            "brier_uncertainty": ybar * (1 - ybar), "brier_within_variance": wbv / n,
            "brier_within_covariance": wbc / n}


# -- torchmetrics: norm="l1" | "l2" | "max" -------------------------------------


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_binary_norms_equal_torchmetrics_float64(norm):
    torch = pytest.importorskip("torch")
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    y, p = _binary()
    ref = tmf.binary_calibration_error(torch.from_numpy(p), torch.from_numpy(y.astype(np.int64)),
                                       n_bins=15, norm=norm)
    got = fastcal.ece(y, p, n_bins=15, norm=norm)
    assert got == pytest.approx(float(ref), rel=1e-12, abs=1e-15)
    rep = fastcal.calibration_report(y, p, n_bins=15, ace=False)
    assert {"l1": rep.ece, "l2": rep.ece_l2, "max": rep.mce}[norm] == pytest.approx(got, rel=1e-12)


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
def test_top_label_norms_equal_torchmetrics_multiclass(norm):
    """multiclass_calibration_error casts the confidences to float32 before binning
    (torchmetrics' _multiclass_calibration_error_update): on float64 input it is its
    binary error of the (confidence, correct) pairs that fastcal equals to 1e-12, and
    the multi-class call within float32 rounding."""
    torch = pytest.importorskip("torch")
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    y, p = _classes()
    got = fastcal.ece(y, p, n_bins=15, norm=norm)
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(np.int64)
    ref = tmf.binary_calibration_error(torch.from_numpy(conf), torch.from_numpy(correct),
                                       n_bins=15, norm=norm)
    assert got == pytest.approx(float(ref), rel=1e-12)
    ref32 = tmf.multiclass_calibration_error(torch.from_numpy(p), torch.from_numpy(y),
                                             num_classes=p.shape[1], n_bins=15, norm=norm)
    assert got == pytest.approx(float(ref32), rel=1e-5)


def test_float32_input_differs_from_torchmetrics_only_by_float32_sums():
    """torchmetrics sums float32 input in float32 (scatter_add); fastcal sums in float64
    (its float32 bins are the same), so the two differ by float32 accumulation: 8e-6
    relative here (20,000 rows), 7e-5 at 1e6 rows, growing with n."""
    torch = pytest.importorskip("torch")
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    y, p = _binary(20_000)
    p32 = p.astype(np.float32)
    ref = float(tmf.binary_calibration_error(torch.from_numpy(p32),
                                             torch.from_numpy(y.astype(np.int64)), n_bins=15,
                                             norm="l2"))
    got = fastcal.ece(y, p32, n_bins=15, norm="l2")
    exact = fastcal.ece(y, p32.astype(np.float64), n_bins=15, norm="l2")
    assert got == pytest.approx(exact, rel=1e-12)
    assert got == pytest.approx(ref, rel=1e-4)
    assert got != ref  # the float32 sums do differ


def test_norm_is_checked():
    with pytest.raises(ValueError, match="norm must be one of 'l1', 'l2', 'max'; got 'l3'"):
        fastcal.ece([0, 1], [0.2, 0.7], norm="l3")


# -- uncertainty-calibration: debiased L2 --------------------------------------


def _peer_bins(values, num_bins=15):
    """uncertainty-calibration's bins for continuous scores (equal mass, upper edges at
    midpoints, right-closed: np.searchsorted(bins, p) side left) as fastcal edges."""
    cu = pytest.importorskip("calibration.utils")
    return np.array([0.0] + list(cu.get_equal_bins(list(values), num_bins=num_bins)))


def test_binary_debiased_equals_uncertainty_calibration():
    cal = pytest.importorskip("calibration")
    y, p = _binary()
    ref = cal.get_calibration_error(p, y.astype(np.int64), p=2, debias=True)
    edges = _peer_bins(p)
    rep = fastcal.calibration_report(y, p, edges=edges, closed="right", ace=False)
    assert rep.ece_debiased == pytest.approx(ref, rel=1e-12)
    plug = cal.get_calibration_error(p, y.astype(np.int64), p=2, debias=False)
    assert rep.ece_l2 == pytest.approx(plug, rel=1e-12)


def test_top_label_debiased_equals_uncertainty_calibration():
    cal = pytest.importorskip("calibration")
    y, p = _classes()
    ref = cal.get_calibration_error(p, y, p=2, debias=True, mode="top-label")
    edges = _peer_bins(p.max(axis=1))
    rep = fastcal.calibration_report(y, p, edges=edges, closed="right", ace=False)
    assert rep.ece_debiased == pytest.approx(ref, rel=1e-12)


def test_marginal_debiased_equals_uncertainty_calibration_on_shared_bins():
    """get_calibration_error bins each class by its own equal-mass edges; fastcal's
    class-wise state shares one set of edges, so the peer is called with those
    (its lower_bound_scaling_ce with a fixed binning_scheme)."""
    cu = pytest.importorskip("calibration.utils")
    y, p = _classes()
    edges = np.linspace(0.0, 1.0, 16)
    ref = cu.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=15, mode="marginal",
                                    binning_scheme=lambda probs, num_bins: list(edges[1:]))
    rep = fastcal.calibration_report(y, p, edges=edges, closed="right", ace=False)
    assert rep.classwise_ece_debiased == pytest.approx(ref, rel=1e-12)


def test_debiased_clamps_to_zero_and_skips_single_row_bins():
    # two bins of one row each: no variance estimate, every bin adds 0
    rep = fastcal.calibration_report([0, 1], [0.05, 0.95], n_bins=2, ace=False)
    assert rep.ece_debiased == 0.0
    # perfectly calibrated frequencies: the bias correction makes the square negative
    y = np.array([0, 1] * 50)
    rep = fastcal.calibration_report(y, np.full(100, 0.5), n_bins=2, ace=False)
    assert rep.ece_l2 == 0.0 and rep.ece_debiased == 0.0


# -- the Brier decomposition -------------------------------------------------


@pytest.mark.parametrize("closed", ["left", "right"])
def test_binary_decomposition_equals_loop_reference_and_sums_to_brier(closed):
    y, p = _binary()
    rep = fastcal.calibration_report(y, p, n_bins=12, closed=closed, ace=False)
    ref = _loop_decomposition(y, p, np.arange(13) / 12, closed)
    for name in PARTS:
        assert getattr(rep, name) == pytest.approx(ref[name], rel=1e-10, abs=1e-15), name
    assert _identity(rep) == pytest.approx(rep.brier, rel=1e-12)


def test_decomposition_sums_to_brier_on_every_kind_of_input():
    y, p = _binary(500, seed=3)
    z = np.log(p / (1 - p))
    yk, pk = _classes(700, k=3)
    reports = [
        fastcal.calibration_report(y, p, ace=False),
        fastcal.calibration_report(y, p.astype(np.float32), ace=False),
        fastcal.calibration_report(y, p, strategy="quantile"),
        fastcal.calibration_report(y, p, edges=[0, 0.1, 0.5, 0.55, 1], ace=False),
        fastcal.calibration_report(y, z, logits=True, ace=False),
        fastcal.calibration_report(yk, pk, ace=False),
        fastcal.calibration_report(yk, np.log(pk), logits=True, ace=False),
        fastcal.calibration_report(np.array([1, 1, 0]), np.array([1.0, 0.0, 0.0]), ace=False),
    ]
    for rep in reports:
        assert _identity(rep) == pytest.approx(rep.brier, rel=1e-12, abs=1e-15)
        assert rep.brier_within_variance >= -1e-15


def test_multiclass_decomposition_is_the_sum_of_the_class_columns():
    y, p = _classes(900, k=3)
    rep = fastcal.calibration_report(y, p, n_bins=8, ace=False)
    edges = np.arange(9) / 8
    refs = [_loop_decomposition((y == k).astype(float), p[:, k], edges) for k in range(3)]
    for name in PARTS:
        assert getattr(rep, name) == pytest.approx(sum(r[name] for r in refs), rel=1e-10), name


def test_multiclass_without_classwise_state_has_no_decomposition():
    y, p = _classes(200, k=3)
    acc = fastcal.CalibrationAccumulator(classwise=False).update(y, p)
    rep = acc.report()
    assert all(np.isnan(getattr(rep, name)) for name in PARTS)
    assert np.isnan(rep.classwise_ece_debiased)


# -- one state: chunking, merging, arrays, pickle, files ------------------------


FIELDS = ("ece_l2", "ece_debiased", *PARTS)


def _same(a, b):
    for name in FIELDS:
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("kind", ["binary", "logits", "multiclass"])
def test_chunks_merge_order_arrays_and_pickle_agree(kind):
    if kind == "multiclass":
        y, p = _classes(1500, k=3)
    else:
        y, p = _binary(1500)
        if kind == "logits":
            p = np.log(p / (1 - p))
    opts = dict(logits=kind == "logits", n_classes=3 if kind == "multiclass" else None)
    whole = fastcal.CalibrationAccumulator(**opts).update(y, p).report()
    cuts = [0, 7, 400, 401, 1500]
    parts = [fastcal.CalibrationAccumulator(**opts).update(y[a:b], p[a:b])
             for a, b in zip(cuts, cuts[1:])]
    _same(sum(parts[::-1]).report(), whole)
    merged = pickle.loads(pickle.dumps(parts[0]))
    for part in parts[1:]:
        merged += pickle.loads(pickle.dumps(part))
    _same(merged.report(), whole)
    arrays = fastcal.CalibrationAccumulator(**opts)
    for part in parts:
        arrays.add_arrays(part.to_arrays())
    _same(arrays.report(), whole)
    assert arrays.to_arrays()["totals"].shape == (7,)


def test_score_file_json_and_text_carry_the_fields(tmp_path):
    y, p = _binary(800)
    path = tmp_path / "s.csv"
    np.savetxt(path, np.column_stack([y, p]), delimiter=",", header="y,p", comments="")
    mem = fastcal.calibration_report(y, p, ace=False)
    got = fastcal.score_file(str(path))
    _same(got, mem)
    d = json.loads(got.to_json())
    for name in FIELDS:
        assert d[name] == pytest.approx(getattr(mem, name), rel=1e-12, abs=1e-15)
    assert d["ece_sweep"] is None and d["ece_sweep_bins"] is None
    text = str(got)
    assert f"L2 ECE = {got.ece_l2:.4f}, debiased L2 ECE = {got.ece_debiased:.4f}" in text
    assert f"reliability {got.brier_reliability:.4f}" in text


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_dask_equals_arrays(kind):
    da = pytest.importorskip("dask.array")
    from fastcal.distributed import score_dask

    y, p = _binary(1200) if kind == "binary" else _classes(1200, k=3)
    chunks = (300,) if p.ndim == 1 else (300, 3)
    got = score_dask(da.from_array(y, chunks=300), da.from_array(p, chunks=chunks))
    _same(got, fastcal.calibration_report(y, p, ace=False))


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 600), max_size=5), order=st.randoms(use_true_random=False),
       multiclass=st.booleans())
def test_any_chunking_and_merge_order_agree(cuts, order, multiclass):
    y, p = _classes(600, k=3, seed=5) if multiclass else _binary(600, seed=5)
    opts = dict(n_classes=3) if multiclass else {}
    whole = fastcal.CalibrationAccumulator(**opts).update(y, p).report()
    bounds = [0, *sorted(cuts), 600]
    parts = [fastcal.CalibrationAccumulator(**opts).update(y[a:b], p[a:b], start=a)
             for a, b in zip(bounds, bounds[1:])]
    order.shuffle(parts)
    got = sum(parts).report()
    _same(got, whole)
    assert _identity(got) == pytest.approx(got.brier, rel=1e-12)


def test_within_sums_leave_out_omitted_rows():
    """The fill's sum p**2 and sum p*y skip NaN rows under nan_policy='omit' (the kernel
    parks them as p = 0.5, y = 0 and takes their 0.25 off the squares)."""
    y, p = _binary(5000, seed=1)
    p[::7] = np.nan
    acc = fastcal.CalibrationAccumulator(nan_policy="omit").update(y, p)
    ok = ~np.isnan(p)
    totals = acc.to_arrays()["totals"]
    assert totals[5] == pytest.approx(np.sum(p[ok] ** 2), rel=1e-12)
    assert totals[6] == pytest.approx(np.sum(p[ok] * y[ok]), rel=1e-12)
    rep = acc.report()
    assert _identity(rep) == pytest.approx(rep.brier, rel=1e-12)

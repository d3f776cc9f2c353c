"""Multi-class (N, K): kernel against loop references, seed examples, K = 2, logits, laws, errors."""

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import fastcal
from fastcal._kernels import mathfn
from fastcal._kernels import multiclass as km
from tests import naive_multiclass as nm

SCALARS = ("ece", "esce", "mce", "ecd", "brier", "nll", "ecd_var")


def mc_data(n, k, seed, dtype=np.float64, alpha=0.5, zeros=False):
    """Dirichlet probabilities with labels drawn from a sharpened version of each row."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(k, alpha), size=n)
    if zeros:
        # exact zeros in some columns (the label then avoids them below)
        mask = rng.random((n, k)) < 0.2
        mask[np.arange(n), P.argmax(axis=1)] = False
        P[mask] = 0.0
        P /= P.sum(axis=1, keepdims=True)
    Q = P ** 1.5
    Q /= Q.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=q) for q in Q])
    return y, P.astype(dtype)


def assert_matches(rep, ref, *, rtol=1e-12, atol=1e-13):
    assert rep.n == ref["n"]
    for name in SCALARS:
        np.testing.assert_allclose(getattr(rep, name), ref[name], rtol=rtol, atol=atol, err_msg=name)
    np.testing.assert_array_equal(rep.bins["count"], ref["count"])
    for col, key in (("conf", "conf"), ("accuracy", "accuracy"), ("frac_pos", "accuracy"),
                     ("ecd", "ecd_bins")):
        np.testing.assert_allclose(rep.bins[col], ref[key], rtol=rtol, atol=atol, err_msg=col)
    np.testing.assert_allclose(rep.classes["ece"], ref["class_ece"], rtol=rtol, atol=atol)
    np.testing.assert_allclose(rep.classwise_ece, ref["classwise_ece"], rtol=rtol, atol=atol)
    np.testing.assert_array_equal(rep.class_bins["count"], ref["class_count"])
    np.testing.assert_array_equal(rep.class_bins["n_true"], ref["class_true"])


# -- against the loop reference ------------------------------------------------

@pytest.mark.parametrize("k", [2, 3, 7])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("zeros", [False, True])
def test_report_matches_reference(k, closed, zeros):
    y, P = mc_data(700, k, seed=k + 10 * zeros, zeros=zeros)
    rep = fastcal.calibration_report(y, P, n_bins=8, closed=closed)
    assert isinstance(rep, fastcal.MulticlassReport)
    assert_matches(rep, nm.report(y, P, n_bins=8, closed=closed))
    np.testing.assert_allclose(rep.ace, nm.top_label_ace(y, P, 8), rtol=1e-12, atol=1e-13)


def test_float32_rows_sum_in_float64_and_match_reference():
    y, P = mc_data(500, 5, seed=3)
    P32 = P.astype(np.float32)
    rep = fastcal.calibration_report(y, P32, n_bins=10)
    assert_matches(rep, nm.report(y, P32, n_bins=10, dtype=np.float32), rtol=1e-11)


def test_edges_on_bin_boundaries_and_explicit_edges():
    # max probabilities exactly on edges 0.5, 0.7, 0.6 and the last edge 1
    P = np.array([[0.5, 0.5, 0.0], [0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [1.0, 0.0, 0.0],
                  [0.25, 0.25, 0.5]])
    y = np.array([0, 1, 2, 0, 2])
    for closed in ("left", "right"):
        rep = fastcal.calibration_report(y, P, n_bins=10, closed=closed, ace=False)
        assert_matches(rep, nm.report(y, P, n_bins=10, closed=closed))
    edges = [0.0, 0.5, 0.6, 1.0]
    rep = fastcal.calibration_report(y, P, edges=edges, ace=False)
    assert_matches(rep, nm.report(y, P, edges=edges))


def test_large_parallel_matches_serial_and_threads_agree():
    y, P = mc_data(250_000, 5, seed=4)  # 1.25e6 elements: the parallel kernel
    one = fastcal.calibration_report(y, P, threads=1, ace=False)
    two = fastcal.calibration_report(y, P, threads=2, ace=False)
    np.testing.assert_array_equal(one.bins["count"], two.bins["count"])
    np.testing.assert_array_equal(one.class_bins["count"], two.class_bins["count"])
    for name in SCALARS + ("classwise_ece",):
        np.testing.assert_allclose(getattr(one, name), getattr(two, name), rtol=1e-12, err_msg=name)
    ref = nm.report(y[:20_000], P[:20_000])
    assert_matches(fastcal.calibration_report(y[:20_000], P[:20_000], ace=False), ref)


def test_many_classes_parallel_row_kernel_matches_serial():
    y, P = mc_data(20_000, 64, seed=15, dtype=np.float32)  # 1.28e6 elements, K >= ROWWISE_K
    one = fastcal.calibration_report(y, P, threads=1, ace=False)
    two = fastcal.calibration_report(y, P, threads=2, ace=False)
    np.testing.assert_array_equal(one.class_bins["count"], two.class_bins["count"])
    for name in SCALARS + ("classwise_ece",):
        np.testing.assert_allclose(getattr(one, name), getattr(two, name), rtol=1e-12, err_msg=name)
    assert_matches(fastcal.calibration_report(y[:2000], P[:2000], ace=False),
                   nm.report(y[:2000], P[:2000], dtype=np.float32), rtol=1e-11)


def test_metric_functions_equal_report_fields():
    y, P = mc_data(400, 4, seed=5)
    ref = nm.report(y, P, n_bins=10)
    assert math.isclose(fastcal.ece(y, P), ref["ece"], rel_tol=1e-12)
    assert math.isclose(fastcal.esce(y, P), ref["esce"], rel_tol=1e-12, abs_tol=1e-14)
    assert math.isclose(fastcal.mce(y, P), ref["mce"], rel_tol=1e-12)
    assert math.isclose(fastcal.ace(y, P), nm.top_label_ace(y, P, 10), rel_tol=1e-12)
    assert math.isclose(fastcal.ecd(y, P), ref["ecd"], rel_tol=1e-12)
    assert math.isclose(fastcal.brier_score(y, P), ref["brier"], rel_tol=1e-12)
    assert math.isclose(fastcal.log_loss(y, P), ref["nll"], rel_tol=1e-12)
    cw, per = fastcal.classwise_ece(y, P, return_per_class=True)
    assert math.isclose(cw, ref["classwise_ece"], rel_tol=1e-12)
    np.testing.assert_allclose(per, ref["class_ece"], rtol=1e-12)


# -- eq. 12 limits -------------------------------------------------------------

def test_ecd_zero_log_zero_and_infinite_true_class():
    P = np.array([[0.0, 0.25, 0.75], [0.5, 0.5, 0.0]])
    y = np.array([2, 0])
    h0 = 0.25 * math.log(0.25) + 0.75 * math.log(0.75)
    h1 = math.log(0.5)
    expected = ((h0 - math.log(0.75)) + (h1 - math.log(0.5))) / 2
    assert math.isclose(fastcal.ecd(y, P), expected, rel_tol=1e-14)
    assert fastcal.ecd(np.array([0, 2]), P) == math.inf
    assert fastcal.log_loss(np.array([0, 2]), P) == math.inf
    # a one-hot correct prediction scores exactly 0 on ECD and NLL
    assert fastcal.ecd([1], [[0.0, 1.0, 0.0]]) == 0.0
    assert fastcal.log_loss([1], [[0.0, 1.0, 0.0]]) == 0.0
    # eps clips each p_k to [eps, 1 - eps] and renormalises the row (logs only)
    q = np.array([1e-6, 1 - 1e-6, 1e-6])
    q /= q.sum()
    h = float(np.sum(q * np.log(q)))
    assert math.isclose(fastcal.ecd([1], [[0.0, 1.0, 0.0]], eps=1e-6), h - math.log(q[1]),
                        rel_tol=1e-12)
    assert math.isclose(fastcal.log_loss([0], [[0.0, 1.0, 0.0]], eps=1e-6), -math.log(q[0]),
                        rel_tol=1e-12)


# -- the calibration tutorial's worked examples (Riera i Marín and Galdran, Part III) ------

def test_seed004_brier_and_nll():
    # y = class 3 of 3 (index 2); p_bad uniform, p_better (0, 1/3, 2/3)
    p_bad = [[1 / 3, 1 / 3, 1 / 3]]
    p_better = [[0.0, 1 / 3, 2 / 3]]
    y = [2]
    assert math.isclose(fastcal.brier_score(y, p_bad), 2 / 3, rel_tol=1e-14)
    assert math.isclose(fastcal.brier_score(y, p_better), 2 / 9, rel_tol=1e-14)
    assert fastcal.brier_score(y, [[0.0, 0.0, 1.0]]) == 0.0
    # the slides' NLL values are in base 10: 0.477 and 0.176
    log10e = math.log10(math.e)
    assert round(fastcal.log_loss(y, p_bad) * log10e, 3) == 0.477
    assert round(fastcal.log_loss(y, p_better) * log10e, 3) == 0.176
    assert fastcal.log_loss(y, [[0.0, 0.0, 1.0]]) == 0.0


SEED004_P = np.array([[2 / 3, 1 / 3, 0]] * 3 + [[0, 2 / 3, 1 / 3]] * 3 + [[1 / 3, 0, 2 / 3]] * 3)


def test_seed004_calibrated_example_has_zero_classwise_and_confidence_ece():
    y = np.array([1, 1, 2, 2, 2, 3, 3, 3, 1]) - 1
    rep = fastcal.calibration_report(y, SEED004_P, n_bins=10)
    assert rep.classwise_ece == pytest.approx(0.0, abs=1e-15)
    assert rep.ece == pytest.approx(0.0, abs=1e-15)
    assert rep.accuracy if False else True
    np.testing.assert_allclose(rep.classes["ece"], [0, 0, 0], atol=1e-15)


def test_seed004_miscalibrated_examples():
    # last label changed from class 1 to class 2: class-wise ECE 2/27 (slides)
    y = np.array([1, 1, 2, 2, 2, 3, 3, 3, 2]) - 1
    cw, per = fastcal.classwise_ece(y, SEED004_P, n_bins=10, return_per_class=True)
    assert math.isclose(cw, 2 / 27, rel_tol=1e-12)
    np.testing.assert_allclose(per, [1 / 9, 1 / 9, 0], atol=1e-15)
    # last label changed to class 3: accuracy 7/9 at confidence 2/3 in a single bin.
    # The slides print 1/27 = 1/3 * |6/9 - 7/9|, an extra 1/M factor; the usual
    # |B|/n-weighted confidence ECE (their own formula with one bin) is 1/9.
    y = np.array([1, 1, 2, 2, 2, 3, 3, 3, 3]) - 1
    assert math.isclose(fastcal.ece(y, SEED004_P, n_bins=10), 1 / 9, rel_tol=1e-12)


# -- K = 2 given as (N, 2) against the binary path --------------------------------

@pytest.mark.parametrize("eps", [None, 1e-4])
def test_two_columns_agree_with_binary_path(eps):
    rng = np.random.default_rng(6)
    p = rng.random(3000)
    p[:5] = [0.0, 1.0, 0.5, 1e-300, 1 - 1e-16]
    y = (rng.random(3000) < p).astype(np.int64)
    y[:5] = [0, 1, 1, 0, 1]
    P = np.column_stack([1.0 - p, p])
    assert math.isclose(fastcal.ecd(y, P, eps=eps), fastcal.ecd(y, p, eps=eps), rel_tol=1e-12)
    assert math.isclose(fastcal.log_loss(y, P, eps=eps), fastcal.log_loss(y, p, eps=eps),
                        rel_tol=1e-12)
    # Brier over both columns is twice the binary Brier score
    assert math.isclose(fastcal.brier_score(y, P), 2 * fastcal.brier_score(y, p), rel_tol=1e-12)
    a = fastcal.calibration_report(y, P, ace=False)
    b = fastcal.calibration_report(y, p, ace=False)
    assert math.isclose(a.ecd_var, b.ecd_var, rel_tol=1e-10)


# -- logits ------------------------------------------------------------------------

def test_exp64_matches_numpy():
    x = -np.concatenate([np.linspace(0, 50, 100_001), np.geomspace(1e-300, 700, 1000),
                         [0.0, 1e-320, 708.0, 708.3, 745.0, 800.0, np.inf]])
    from numba import njit

    f = njit(lambda a: np.array([mathfn.exp64(v) for v in a]))
    got = f(x)
    ref = np.exp(x)
    ok = x >= -708.0
    np.testing.assert_allclose(got[ok], ref[ok], rtol=4e-16, atol=0)
    assert (got[~ok] == 0.0).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logits_match_explicit_softmax(dtype):
    rng = np.random.default_rng(7)
    Z = (rng.normal(size=(600, 6)) * 3).astype(dtype)
    Z[0] = [800, -800, 0, 1, 2, 3]     # would overflow a naive softmax
    Z[1, 2] = -np.inf                  # a masked class: probability 0
    y = rng.integers(0, 6, 600)
    y[0] = 1                           # true class at probability exp(-1600): NLL stays exact
    rep = fastcal.calibration_report(y, Z, logits=True, n_bins=10)
    ref = nm.report(y, Z, logits=True, n_bins=10)
    assert_matches(rep, ref, rtol=1e-11, atol=1e-12)
    assert math.isfinite(rep.nll)
    # against probabilities computed outside: same metrics (rows 2.. only, finite there)
    Zd = Z[2:].astype(np.float64)
    S = np.exp(Zd - Zd.max(axis=1, keepdims=True))
    S /= S.sum(axis=1, keepdims=True)
    a = fastcal.calibration_report(y[2:], Z[2:], logits=True, ace=False)
    b = fastcal.calibration_report(y[2:], S, ace=False)
    for name in SCALARS + ("classwise_ece",):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-14,
                                   err_msg=name)


def test_binary_logits_match_sigmoid_and_stay_exact_for_large_logits():
    rng = np.random.default_rng(8)
    z = rng.normal(size=2000) * 4
    y = (rng.random(2000) < 1 / (1 + np.exp(-z))).astype(np.uint8)
    p = 1 / (1 + np.exp(-z))
    a = fastcal.calibration_report(y, z, logits=True)
    b = fastcal.calibration_report(y, p)
    for name in ("ece", "esce", "mce", "ace", "ecd", "brier", "nll", "ecd_var"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-14,
                                   err_msg=name)
    # z = 50 on a negative: sigmoid rounds to 1 (infinite ECD and NLL from p), the
    # logits give the exact terms (p - y) * z = 50 and softplus(50) = 50 + log1p(e^-50).
    assert fastcal.ecd([0], [50.0], logits=True) == pytest.approx(50.0, rel=1e-15)
    assert fastcal.log_loss([0], [50.0], logits=True) == pytest.approx(50.0, rel=1e-15)
    assert fastcal.log_loss([1], [-800.0], logits=True) == pytest.approx(800.0, rel=1e-15)
    assert fastcal.ecd([0], [np.float64(1 / (1 + np.exp(-50.0)))]) == math.inf


def test_binary_logits_with_eps_take_logs_from_z_unless_clipped():
    # p = sigmoid(z) just below 1 - eps is not clipped: ECD (p - y)(log p - log(1 - p))
    # is sigmoid(z) * z exactly, NLL softplus(z); log(1 - p) of the rounded p was
    # off by up to 1e-7 absolute there.
    eps = 1e-9
    for z in (14.0, 17.0, 20.0, 20.7):
        s = 1 / (1 + math.exp(-z))
        softplus = z + math.log1p(math.exp(-z))
        assert fastcal.ecd([0], [z], logits=True, eps=eps) == pytest.approx(s * z, rel=1e-14)
        assert fastcal.ecd([1], [-z], logits=True, eps=eps) == pytest.approx(s * z, rel=1e-14)
        assert fastcal.log_loss([0], [z], logits=True, eps=eps) == pytest.approx(softplus,
                                                                                   rel=1e-14)
        assert fastcal.log_loss([1], [-z], logits=True, eps=eps) == pytest.approx(softplus,
                                                                                    rel=1e-14)
    # clipped (p > 1 - eps): the logs of the clipped value, as for probabilities
    hi = 1.0 - eps
    assert fastcal.ecd([0], [25.0], logits=True, eps=eps) == pytest.approx(
        hi * (math.log(hi) - math.log(1.0 - hi)), rel=1e-14)
    assert fastcal.log_loss([0], [25.0], logits=True, eps=eps) == pytest.approx(
        -math.log(1.0 - hi), rel=1e-14)


@pytest.mark.parametrize("z0", [1e154, 1.5e154, 1e300, np.finfo(np.float64).max])
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("label", [0, 1])
def test_binary_logits_variance_term_has_its_limit_at_huge_logits(z0, sign, label):
    # the row's variance term p(1 - p) z^2 = z^2 e^-|z| / (1 + e^-|z|)^2 is 0 in
    # float64 for |z| > 800; computed as 0 * inf it was NaN once |z| > 1.34e154
    y = np.array([label, 0], np.uint8)
    z = np.array([sign * z0, 0.5])
    rep = fastcal.calibration_report(y, z, logits=True)
    s = 1 / (1 + math.exp(-0.5))
    assert rep.n == 2
    assert rep.ecd_var == pytest.approx(s * (1 - s) * 0.25, rel=1e-14)
    wrong = (sign > 0) != (label == 1)
    # ECD terms: (p - y) z is |z| for a wrong label, 0 for a right one
    assert rep.ecd == pytest.approx(((z0 if wrong else 0.0) + s * 0.5) / 2, rel=1e-14)
    assert rep.verdict == ("over-confident" if wrong else "consistent with calibration")


# -- accumulator laws -----------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 900), max_size=5), seed=st.integers(0, 10_000),
       order_seed=st.integers(0, 1000), closed=st.sampled_from(["left", "right"]),
       logits=st.booleans())
def test_chunking_and_merge_order_do_not_change_results(cuts, seed, order_seed, closed, logits):
    y, P = mc_data(900, 4, seed=seed, dtype=np.float32, zeros=seed % 3 == 0)
    if logits:
        P = np.log(np.maximum(P, 1e-30)).astype(np.float32)
    whole = fastcal.calibration_report(y, P, n_bins=7, closed=closed, ace=False, logits=logits)
    bounds = [0, *sorted(cuts), 900]
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        acc = fastcal.CalibrationAccumulator(n_bins=7, closed=closed, logits=logits)
        if b > a:
            acc.update(y[a:b], P[a:b])
        parts.append(acc)
    np.random.default_rng(order_seed).shuffle(parts)
    total = parts[0]
    for part in parts[1:]:
        total = total + part if order_seed % 2 else part + total
    merged = total.report()
    assert merged.n_classes == 4
    np.testing.assert_array_equal(merged.bins["count"], whole.bins["count"])
    np.testing.assert_array_equal(merged.class_bins["count"], whole.class_bins["count"])
    np.testing.assert_array_equal(merged.class_bins["n_true"], whole.class_bins["n_true"])
    for name in SCALARS + ("classwise_ece",):
        np.testing.assert_allclose(getattr(merged, name), getattr(whole, name), rtol=1e-12,
                                   atol=1e-15, err_msg=name)


def test_accumulator_rejects_mixing_and_changing_k():
    acc = fastcal.CalibrationAccumulator()
    acc.update([0, 1], [[0.5, 0.5], [0.1, 0.9]])
    with pytest.raises(ValueError, match=r"y_prob has 3 columns .* 2-class state"):
        acc.update([0], [[0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match=r"shape \(n_samples, n_classes\)"):
        acc.update([0], [0.2])
    b = fastcal.CalibrationAccumulator()
    b.update([0, 1], [0.2, 0.7])
    with pytest.raises(ValueError, match=r"already holds 2 rows of binary"):
        b.update([0], [[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"different numbers of classes"):
        acc + b
    # an empty accumulator merges with a multi-class one
    assert (fastcal.CalibrationAccumulator() + acc).report().n == 2


def test_error_row_is_global_across_updates():
    acc = fastcal.CalibrationAccumulator()
    acc.update([0, 1, 2], np.eye(3))
    with pytest.raises(ValueError, match=r"label 7 at row 4"):
        acc.update([0, 7], np.eye(3)[:2])
    assert acc.n == 3


# -- report export ----------------------------------------------------------------------

def test_report_exports_cover_per_class_tables():
    y, P = mc_data(300, 3, seed=9)
    rep = fastcal.calibration_report(y, P, n_bins=5)
    d = json.loads(rep.to_json())
    assert d["n_classes"] == 3
    assert math.isclose(d["classwise_ece"], rep.classwise_ece)
    assert [c["class"] for c in d["classes"]] == [0, 1, 2]
    assert math.isclose(d["classes"][1]["ece"], rep.classes["ece"][1])
    assert d["classes"][2]["support"] == int((y == 2).sum())
    assert len(d["bins"]) == 5 and len(d["class_bins"]["count"]) == 3
    assert sum(d["class_bins"]["count"][0]) == 300
    md = rep.to_markdown()
    assert "Per class" in md and "| 2 | " in md and "accuracy" in md
    assert f"{rep.classwise_ece:.4f}" in md


# -- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("y, P, kwargs, pattern", [
    ([0, 1], [[0.5, 0.6], [0.2, 0.8]], {}, r"y_prob has 1 rows that do not sum to 1 .*row 0, sum 1\.1"),
    ([0, 1, 1], [[0.5, 0.5], [0.2, 0.8], [-0.1, 1.1]], {}, r"negative probabilities in 1 rows \(first at row 2"),
    ([0, 3, 5], np.full((3, 3), 1 / 3), {}, r"y_true has 2 labels outside .* label 3 at row 1"),
    ([0, -1], np.full((2, 3), 1 / 3), {}, r"label -1 at row 1"),
    ([0, 1.5], np.full((2, 3), 1 / 3), {}, r"label 1\.5 at row 1"),
    ([0, 0], [[1.0], [1.0]], {}, r"K >= 2"),
    ([0, 1, 2], np.full((2, 3), 1 / 3), {}, r"different numbers of rows: 3 and 2"),
    ([0, 1], [[np.nan, 0.5], [0.5, 0.5]], {}, r"y_prob contains NaN in 1 rows \(first at row 0\)"),
    ([0, 1], [[0.5, 0.5], [np.inf, 0.5]], {}, r"infinite value in 1 rows \(first at row 1\)"),
    ([0, 1], [[1.0, 2.0], [np.nan, 0.0]], {"logits": True}, r"NaN in 1 rows \(first at row 1\)"),
    ([0, 1], [[1.0, np.inf], [0.0, 0.0]], {"logits": True}, r"\+inf, or every logit -inf"),
    ([0, 1], [[-np.inf, -np.inf], [0.0, 0.0]], {"logits": True}, r"every logit -inf in 1 rows"),
    ([0, 1], [[0.0, 0.0], [0.5, 0.5]], {"renormalize": True}, r"summing to 0 .*row 0"),
])
def test_bad_input_raises_clear_errors(y, P, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        fastcal.calibration_report(y, P, **kwargs)


def test_two_dimensional_labels_are_soft_labels_in_calibration_report():
    """A 2-D y_true used to be refused here; it is now the soft-label report."""
    from fastcal.soft import soft_label_report

    rep = fastcal.calibration_report([[0.2, 0.8]], [[0.5, 0.5]])
    ref = soft_label_report([[0.2, 0.8]], [[0.5, 0.5]])
    assert type(rep).__name__ == "SoftLabelReport" and rep.to_dict() == ref.to_dict()
    with pytest.raises(ValueError, match="y_true must have shape .* label distributions"):
        soft_label_report([0, 1], [[0.5, 0.5], [0.2, 0.8]])


def test_renormalize_divides_rows_and_omit_drops_nan_rows():
    y, P = mc_data(200, 4, seed=10)
    scaled = P * np.linspace(0.5, 2.0, 200)[:, None]
    a = fastcal.calibration_report(y, scaled, renormalize=True)
    b = fastcal.calibration_report(y, P)
    for name in SCALARS + ("classwise_ece", "ace"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-15)
    Pn = P.copy()
    Pn[[3, 50]] = np.nan
    yf = y.astype(np.float64)
    yf[7] = np.nan
    r = fastcal.calibration_report(yf, Pn, nan_policy="omit")
    keep = np.ones(200, bool)
    keep[[3, 7, 50]] = False
    assert r.n == 197 and r.n_omitted == 3
    assert_matches(r, nm.report(y[keep], P[keep]))
    assert math.isclose(r.ace, nm.top_label_ace(y[keep], P[keep], 10), rel_tol=1e-12)
    with pytest.raises(ValueError, match=r"y_true contains 1 NaN labels \(first at row 7\)"):
        fastcal.calibration_report(yf, P)


def test_strided_fortran_and_integer_inputs():
    y, P = mc_data(300, 4, seed=11)
    ref = fastcal.calibration_report(y, P, ace=False)
    F = np.asfortranarray(P)
    wide = np.zeros((300, 8))
    wide[:, ::2] = P
    view = wide[:, ::2]
    rev = P[::-1][::-1]
    for arr in (F, view, rev, P.T.copy().T):
        r = fastcal.calibration_report(y, arr, ace=False)
        for name in SCALARS + ("classwise_ece",):
            assert getattr(r, name) == pytest.approx(getattr(ref, name), rel=1e-13, abs=1e-15)
    for ydt in (np.int8, np.uint16, np.int32, np.float32):
        r = fastcal.calibration_report(y.astype(ydt), P, ace=False)
        assert r.ecd == pytest.approx(ref.ecd, rel=1e-14)
    onehot = np.eye(3, dtype=np.int64)[[0, 1, 2, 1]]
    assert fastcal.log_loss([0, 1, 2, 1], onehot) == 0.0


@pytest.mark.parametrize("k", [2, 5, 63])
@pytest.mark.parametrize("logits", [False, True])
@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_blocked_kernel_equals_row_kernel(k, logits, eps):
    # the blocked (vectorised) kernel against the simple row-at-a-time one, with
    # invalid rows mixed in and a block boundary inside the range
    y, P = mc_data(max(300, 3 * km.block_rows(k) + 7), k, seed=k, dtype=np.float32)
    if logits:
        P = np.log(np.maximum(P, 1e-30)).astype(np.float32)
    P[5, 0] = np.nan
    P[9, 1] = -np.inf if logits else -0.5
    y[11] = k + 3
    edges = fastcal.uniform_edges(10, np.float64 if logits else np.float32)
    out = []
    ranks = []
    n = P.shape[0]
    for fn in (km.fill_range, km.fill_rows):
        st = km.new_state(10, k, True)
        rank = np.full(n, -1.0), np.full(n, 7, np.uint8)
        fn(P, y, 3, n - 2, edges, True, False, eps, logits, False, 1e-5, True, *st, *rank)
        out.append(st)
        ranks.append(rank)
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # the ranked pair written by the fill: the rows' own (multiclass.confidence), both kernels
    want_conf, want_ok = np.empty(n), np.empty(n, np.uint8)
    km.confidence(P, y, logits, False, 1e-5, 0.0, want_conf, want_ok)
    for conf, ok in ranks:
        if not logits:
            np.testing.assert_array_equal(conf[3:n - 2], want_conf[3:n - 2])
            np.testing.assert_array_equal(ok[3:n - 2], want_ok[3:n - 2])
            assert np.isnan(conf[[5, 9, 11]]).all() and not ok[[5, 9, 11]].any()
        assert (conf[:3] == -1.0).all() and (conf[n - 2:] == -1.0).all()  # rows outside: untouched
        assert (ok[:3] == 7).all() and (ok[n - 2:] == 7).all()


def tied_rows(case, n=40):
    """(y, P, options) of rows whose nonzero class probabilities are all equal."""
    y = np.arange(n) % 3
    if case == "float64 thirds":
        return y, np.full((n, 3), 1 / 3), {}
    if case == "float32 thirds":  # 3 * float32(1/3) = 1 + 3e-8
        return y, np.full((n, 3), 1 / 3, np.float32), {}
    if case == "equal logits":
        return y, np.full((n, 5), 2.5), {"logits": True}
    if case == "eps":
        return y, np.full((n, 3), 1 / 3, np.float32), {"eps": 1e-6}
    return y, np.tile(np.float32([0.2] * 5 + [0.0]), (n, 1)), {}  # a zero class


TIED = ["float64 thirds", "float32 thirds", "equal logits", "eps", "a zero class"]


@pytest.mark.parametrize("case", TIED)
def test_rows_of_equal_probabilities_have_zero_ecd_term_and_variance(case):
    # H = sum q log q of such a row is computed as log q times the rounded row sum, so its
    # ECD term and variance were rounding noise that the ECD test read as a signal
    # (40 float32 rows of 1/3: z = -6.3, "under-confident"); they are exactly 0
    y, P, kw = tied_rows(case)
    rep = fastcal.calibration_report(y, P, n_bins=15, **kw)
    assert rep.sums["sum_ecd"] == 0.0 and rep.sums["sum_ecd_var"] == 0.0
    assert rep.verdict == "consistent with calibration"
    logits, eps = kw.get("logits", False), kw.get("eps", 0.0)
    edges = fastcal.uniform_edges(15, np.float64 if logits else P.dtype)
    st = km.new_state(15, P.shape[1], True)
    km.fill_rows(P, y, 0, len(y), edges, True, False, eps, logits, False, 1e-5, True, *st,
                 *km.NO_RANK)
    assert not st[1][:, 1:].any()  # the row kernel: ECD sums and variances 0
    # beside other rows, in other bins, the others' terms are those of the others alone
    y2, P2 = mc_data(200, P.shape[1], seed=4, dtype=P.dtype)
    if logits:
        P2 = np.log(P2)
    both = fastcal.calibration_report(np.concatenate([y, y2]), np.concatenate([P, P2]),
                                      n_bins=15, **kw)
    alone = fastcal.calibration_report(y2, P2, n_bins=15, **kw)
    assert both.sums["sum_ecd"] == pytest.approx(alone.sums["sum_ecd"], rel=1e-12)
    assert both.sums["sum_ecd_var"] == pytest.approx(alone.sums["sum_ecd_var"], rel=1e-12)


def test_top_label_ece_and_mce_agree_with_torchmetrics():
    tm = pytest.importorskip(
        "torchmetrics.functional.classification.calibration_error",
        reason="torchmetrics not installed (the bench extra installs it)")
    import torch

    # float64, no confidence exactly on an edge or at 1: the binning conventions agree
    # there (torchmetrics' bins are [a, b) like closed="left", with 1.0 in an extra bin)
    y, P = mc_data(5000, 6, seed=12)
    ref = nm.report(y, P, n_bins=15)
    ours_ece, ours_mce = fastcal.ece(y, P, n_bins=15), fastcal.mce(y, P, n_bins=15)
    assert ours_ece == pytest.approx(ref["ece"], rel=1e-12)
    # torchmetrics' binning and reduction, fed float64 confidences directly: exact agreement
    conf = torch.from_numpy(P.max(axis=1))
    acc = torch.from_numpy((P.argmax(axis=1) == y).astype(np.float64))
    assert float(tm._ce_compute(conf, acc, 15, norm="l1")) == pytest.approx(ours_ece, rel=1e-12)
    assert float(tm._ce_compute(conf, acc, 15, norm="max")) == pytest.approx(ours_mce, rel=1e-12)
    # the public function casts confidences to float32 (`confidences.float()`) and sums in
    # float32, so it agrees only to float32 accuracy
    tp, ty = torch.from_numpy(P), torch.from_numpy(y)
    for norm, ours in (("l1", ours_ece), ("max", ours_mce)):
        theirs = float(tm.multiclass_calibration_error(tp, ty, num_classes=6, n_bins=15, norm=norm))
        assert ours == pytest.approx(theirs, rel=2e-5), norm


@pytest.mark.parametrize("k", [4, 100])
@pytest.mark.parametrize("logits", [False, True])
def test_binned_metrics_skip_logs_but_agree(k, logits):
    # ece/esce/mce fill without logarithms; they must equal the full report's
    y, P = mc_data(3000, k, seed=13)
    if logits:
        P = np.log(np.maximum(P, 1e-300)) * 1.3
    rep = fastcal.calibration_report(y, P, n_bins=12, logits=logits, ace=False)
    assert fastcal.ece(y, P, n_bins=12, logits=logits) == rep.ece
    assert fastcal.esce(y, P, n_bins=12, logits=logits) == rep.esce
    assert fastcal.mce(y, P, n_bins=12, logits=logits) == rep.mce


def test_ecd_test_and_intervals_for_multiclass():
    # labels drawn from the predicted distribution: the ECD z-score (eq. 12 sums over
    # the accumulated variance) is standard normal; sharpened predictions are over-confident
    rng = np.random.default_rng(14)
    P = rng.dirichlet(np.full(5, 0.7), size=20_000)
    y = (P.cumsum(axis=1) < rng.random(20_000)[:, None]).sum(axis=1)
    rep = fastcal.calibration_report(y, P, ci=0.95)
    ref = nm.report(y, P)
    assert rep.ecd_z == pytest.approx(ref["ecd"] * ref["n"] / math.sqrt(ref["ecd_var"]), rel=1e-10)
    assert abs(rep.ecd_z) < 3.5
    lo, hi = rep.intervals["ecd"]
    assert lo < rep.ecd < hi
    sharp = P ** 2 / (P ** 2).sum(axis=1, keepdims=True)
    over = fastcal.calibration_report(y, sharp, ace=False)
    assert over.ecd_z > 10 and over.verdict == "over-confident"
    # bootstrap replicates of K classes: those of the binary (confidence, correct) pairs
    acc = fastcal.CalibrationAccumulator(n_boot=5, seed=3).update(y, P)
    conf, correct = P.max(axis=1), (P.argmax(axis=1) == y).astype(np.uint8)
    ref = fastcal.CalibrationAccumulator(n_boot=5, seed=3).update(correct, conf)
    np.testing.assert_array_equal(acc.boot_counts, ref.boot_counts)
    np.testing.assert_allclose(acc.boot_sums, ref.boot_sums, rtol=1e-12)
    lo, hi = rep.intervals["ece"]
    assert np.isfinite(lo) and lo < hi


@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("k", [3, 70])
def test_float32_values_on_edges_go_to_the_documented_side(closed, k):
    # every column value is a float32-rounded edge j/10: exercises the arithmetic
    # edge rounding of both kernels (blocked for K = 3, row-wise for K = 70)
    rng = np.random.default_rng(16)
    rows = []
    while len(rows) < 400:
        v = np.zeros(k)
        a, b = rng.choice(k, 2, replace=False)
        t = rng.integers(1, 10)
        v[a], v[b] = t / 10, 1 - t / 10
        rows.append(v)
    P = np.array(rows).astype(np.float32)  # rows sum to 1 within float32 rounding
    edges32 = fastcal.uniform_edges(10, np.float32)
    assert np.isin(P[P > 0].astype(np.float64), edges32).all()
    y = rng.integers(0, k, 400)
    rep = fastcal.calibration_report(y, P, n_bins=10, closed=closed, ace=False)
    assert_matches(rep, nm.report(y, P, n_bins=10, closed=closed, dtype=np.float32), rtol=1e-11)


@pytest.mark.parametrize("k", [4, 40])  # rows.row_argmax: branch-free select (K < 32), scan
def test_confidence_argmax_is_the_first_of_tied_maxima(k):
    # ties at the first, a middle and the last classes, and a unique max at the last
    rng = np.random.default_rng(21)
    P = rng.dirichlet(np.ones(k), 64)
    P[0] = 1.0 / k
    P[1, :] = 0.0
    P[1, [1, k - 1]] = 0.5
    P[2, :] = 0.0
    P[2, k - 1] = 1.0
    P[3, :] = 0.0
    P[3, [k // 2 - 1, k - 2]] = 0.5
    y = P.argmax(axis=1)  # numpy's argmax is the first index of the max
    y[::2] = (y[::2] + 1) % k
    conf = np.empty(64)
    correct = np.empty(64, np.uint8)
    for logits, Q in ((False, P), (True, np.log(P + 1e-300))):
        km.confidence(Q, y, logits, False, 1e-5, 0.0, conf, correct)
        np.testing.assert_array_equal(correct, (P.argmax(axis=1) == y).astype(np.uint8))
        np.testing.assert_allclose(conf, P.max(axis=1), rtol=1e-12)


@pytest.mark.parametrize(("k", "dtype"), [(4, np.float32), (40, np.float64)])
def test_confidence_equals_the_fills_row_code_on_every_row(k, dtype):
    """The ranked pair of K-class probabilities (``confidence_fast``, K < 32 and
    K >= 32, then ``confidence`` for the rows it leaves) is ``confidence``'s, the
    fill's row code, on valid rows, rows at either side of the sum tolerance and
    of half of it, negative, -0.0, NaN and infinite values, tied maxima and bad
    labels."""
    from fastcal._kernels._config import SUM_TOL as tol
    from fastcal.backends import cpu

    rng = np.random.default_rng(22)
    P = rng.dirichlet(np.ones(k), 200)
    for i, off in enumerate([0.5, 0.5 - 1e-3, 0.5 + 1e-3, 1 - 1e-3, 1 + 1e-3, 2.0]):
        for sign, row in ((1, 2 * i), (-1, 2 * i + 1)):
            P[row] = P[row] * (1 + sign * off * tol)  # sums around tol / 2 and tol
    P[20, 1] = -1e-9
    P[21, 0] += P[21, 1]
    P[21, 1] = -0.0  # the row still sums to 1
    P[22, 2] = np.nan
    P[23, 3] = np.inf
    P[24, 0] = -np.inf
    P[25] = 0.0
    P[26] = 1.0 / k  # every class tied
    P[27, :] = 0.0
    P[27, [1, k - 1]] = 0.5
    P = P.astype(dtype)
    y = rng.integers(0, k, 200).astype(np.float64)
    y[30:34] = [np.nan, -1, k, 1.5]
    y[26:28] = [0, 1]
    correct, conf = cpu.ranking_pair(y, P, kind="multiclass")
    want_conf = np.empty(200)
    want_correct = np.empty(200, np.uint8)
    km.confidence(P, y, False, False, tol, 0.0, want_conf, want_correct)
    np.testing.assert_array_equal(conf, want_conf)  # NaN where the row code gives NaN
    np.testing.assert_array_equal(correct, want_correct)
    assert np.isnan(want_conf[[8, 9, 10, 11, 20, 22, 23, 24, 25, 30, 31, 32, 33]]).all()
    assert not np.isnan(want_conf[[0, 1, 2, 3, 4, 5, 21, 26, 27]]).any()


@pytest.mark.parametrize("ace", [True, False])
def test_tace_checks_the_rows_once_for_every_class(monkeypatch, ace):
    """TACE ranks each class's column, and the rows' check (their confidence)
    is made once for all K classes, not once a class; the values are those of
    the rows' own columns."""
    from fastcal._kernels import multiclass as km

    calls = []
    real = km.confidence_fast

    def counted(p, *args):
        calls.append(p.shape)
        return real(p, *args)

    monkeypatch.setattr(km, "confidence_fast", counted)
    rng = np.random.default_rng(24)
    P = rng.dirichlet(np.ones(5), 4000)
    P[7] = np.nan  # an omitted row: out of every class's column
    y = rng.integers(0, 5, 4000)
    rep = fastcal.calibration_report(y, P, n_bins=10, ace=ace, metrics=("tace",),
                                     nan_policy="omit")
    assert calls == ([] if ace else [(4000, 5)])  # with ACE the fill has ranked the rows
    keep = ~np.isnan(P).any(axis=1)
    ref = fastcal.calibration_report(y[keep], P[keep], n_bins=10, metrics=("tace",))
    assert rep.tace == pytest.approx(ref.tace, rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label_dtype", [np.uint8, np.int64, np.float64])
def test_a_class_column_pair_is_numpys_on_every_row(dtype, label_dtype):
    """TACE's pair of class k (``_column_pair``, one kernel pass) is the NumPy expression's:
    1[y = k], and p_k as float64, NaN where not above the threshold (a value equal to it
    included) or where the row is invalid (its confidence NaN); float labels too."""
    from fastcal.backends import cpu

    rng = np.random.default_rng(31)
    k = 4
    P = rng.dirichlet(np.ones(k), 500).astype(dtype)
    P[:20, 2] = dtype(0.001)  # equal to the threshold: out
    P[20:25, 2] = 0.0
    y = rng.integers(0, k, 500).astype(label_dtype)
    conf = rng.random(500)
    conf[::17] = np.nan  # invalid rows
    for column in range(k):
        label, x = cpu._column_pair(y, P, conf, column, 0.001, False, False)
        want = np.array(P[:, column], np.float64)
        want[np.isnan(conf) | ~(want > 0.001)] = np.nan
        assert label.dtype == np.uint8
        np.testing.assert_array_equal(label, (y == column).astype(np.uint8))
        np.testing.assert_array_equal(x, want)
    assert np.isnan(x[::17]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_class_column_and_its_bucket_statistics_in_one_pass(dtype, threads):
    """``ranked_buckets`` gives each class's pair as ``ranked`` does and its value bucket
    statistics as the equal-mass pass adds them (omitted rows in the last row, a value
    of 1 in the last bucket), on one thread and on two (500,000 rows of 4 classes: two
    ranges, as the parts' own pass splits them); other pairs are left to ``ranked`` and
    the parts' own pass (None)."""
    from fastcal import backends
    from fastcal.accumulators import equal_mass as em
    from fastcal.backends import cpu

    rng = np.random.default_rng(32)
    n, k = 500_000, 4
    P = rng.dirichlet(np.ones(k), n).astype(dtype)
    P[:20, 2] = dtype(0.001)  # equal to the threshold: out
    P[20:25] = [1.0, 0.0, 0.0, 0.0]  # 1 in the last bucket; 0 out
    P[30] = np.nan  # an invalid row: out of every column
    P[n // 2 - 3: n // 2 + 3, 1] += 0.5  # invalid rows (sum 1.5) across the ranges' border
    y = rng.integers(0, k, n)
    y[40] = k  # a label out of range: an invalid row
    batch = backends.resolve(y, P, multiclass=True)
    base = dict(logits=False, renormalize=False, eps=0.0)
    nb = em.fine_buckets_for(15)
    for column in range(k):
        pair = dict(base, column=column, above=0.001)
        (label, x), (counts, sums) = cpu.ranked_buckets(batch, pair, True, nb, threads)
        want_label, want_x = cpu.ranked(batch, pair)
        np.testing.assert_array_equal(label, want_label)
        np.testing.assert_array_equal(x, want_x)
        want_counts, want_sums = em.bucket_stats(em.ArrayParts(want_label, want_x, threads),
                                                 nb, True)
        assert counts.dtype == np.int64 and counts.shape == (nb + 1, 3)
        np.testing.assert_array_equal(counts, want_counts)
        np.testing.assert_array_equal(sums, want_sums)
        assert counts[:nb, 0].sum() == np.count_nonzero(~np.isnan(want_x))
        assert counts[nb, 0] == np.count_nonzero(np.isnan(want_x))  # the skipped rows' row
        assert np.isnan(x[[30, 40, n // 2 - 3, n // 2 + 2]]).all()
        if column == 0:
            assert counts[nb - 1, 0] >= 5  # the rows of 1.0
    for other in (dict(base, column=0, above=0.001, logits=True),
                  dict(base, column=0, above=0.001, renormalize=True), base):
        assert cpu.ranked_buckets(batch, other, True, nb, threads) is None
    assert cpu.ranked_buckets(batch, dict(base, column=0, above=0.001), False, nb,
                              threads) is None


def test_tace_adds_each_class_statistics_in_the_pass_of_its_column(monkeypatch):
    """TACE of K-class probabilities in memory adds each class's value bucket statistics
    in the pass that makes its column (no pass of their own), reads its ranges off them
    (``light_groups``), and gives the value of the separate passes and of the exact
    equal-mass passes (``groups``) to 1e-12."""
    from fastcal.accumulators import equal_mass as em
    from fastcal.backends import cpu

    rng = np.random.default_rng(33)
    P = rng.dirichlet(np.full(6, 0.3), 300_000).astype(np.float32)
    y = rng.integers(0, 6, 300_000)
    P[:50] = np.float32(1 / 6)  # ties at the threshold-free value of every class
    passes = []
    real = em._bucket_stats

    def counted(*args):
        passes.append(1)
        return real(*args)

    monkeypatch.setattr(em, "_bucket_stats", counted)
    fused = fastcal.calibration_report(y, P, n_bins=15, ace=False, metrics=("tace",)).tace
    assert passes == []
    monkeypatch.setattr(cpu, "ranked_buckets", lambda *args: None)
    apart = fastcal.calibration_report(y, P, n_bins=15, ace=False, metrics=("tace",)).tace
    assert len(passes) >= 6  # a statistics pass per class (one per thread part)
    monkeypatch.setattr(em, "light_groups", lambda *args: None)
    exact = fastcal.calibration_report(y, P, n_bins=15, ace=False, metrics=("tace",)).tace
    assert fused == pytest.approx(apart, rel=1e-12)
    assert fused == pytest.approx(exact, rel=1e-12)
    assert 0.0 < fused < 1.0


def test_default_report_ranks_the_rows_in_its_fill(monkeypatch):
    """ACE's value buckets and its gather of boundary rows use the ranking of the rows
    (the confidence of each row) that the fill wrote, no ranking pass of their own;
    nothing is kept after."""
    from fastcal.backends import cpu

    calls = []
    real = cpu.ranking_pair

    def counted(y, p, **kwargs):
        calls.append(p.shape)
        return real(y, p, **kwargs)

    monkeypatch.setattr(cpu, "ranking_pair", counted)
    rng = np.random.default_rng(23)
    P = rng.dirichlet(np.ones(4), 3000)
    y = rng.integers(0, 4, 3000)
    rep = fastcal.calibration_report(y, P, n_bins=10)
    assert calls == []
    assert rep.ace == pytest.approx(nm.top_label_ace(y, P, 10), rel=1e-12)
    assert rep.ece == pytest.approx(nm.report(y, P, n_bins=10)["ece"], rel=1e-12)
    assert cpu._RANKED == {}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tace_ranks_a_valid_rows_value_above_one_as_one(dtype):
    """A row whose class probability is just above 1 is valid while its sum is within
    the tolerance of 1: TACE ranks that value as 1 (the equal-mass passes take values
    in [0, 1]), where it stopped with "the data changed between passes"."""
    rng = np.random.default_rng(34)
    P = rng.dirichlet(np.ones(4), 5000).astype(dtype)
    y = rng.integers(0, 4, 5000)
    P[:3] = [dtype(1 + 2e-7), 0, 0, 0]
    assert (P[:3, 0] > 1).all()
    above = fastcal.calibration_report(y, P, n_bins=15, metrics=("tace",)).tace
    P[:3, 0] = 1.0
    one = fastcal.calibration_report(y, P, n_bins=15, metrics=("tace",)).tace
    assert above == one
    assert 0.0 < one < 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ace_ranks_a_valid_rows_confidence_above_one_as_one(dtype):
    """ACE, the smooth ECE and the equal-mass passes of K classes rank a valid row whose
    max is just above 1 as 1; their bucket statistics skipped it (ACE came out changed,
    3 rows of 5,000: 0.26108 against 0.26132)."""
    rng = np.random.default_rng(35)
    P = rng.dirichlet(np.ones(4), 5000).astype(dtype)
    y = rng.integers(0, 4, 5000)
    P[:3] = [dtype(1 + 2e-7), 0, 0, 0]
    assert (P[:3, 0] > 1).all()
    above = fastcal.calibration_report(y, P, n_bins=15, metrics=("smece",))
    P[:3, 0] = 1.0
    one = fastcal.calibration_report(y, P, n_bins=15, metrics=("smece",))
    assert above.ace == one.ace
    assert above.smece == one.smece
    assert above.n == one.n == 5000
    assert above.ece == pytest.approx(one.ece, rel=1e-5)  # the fill's own bins keep the value


@pytest.mark.parametrize("k", [5, 70])
def test_the_fills_ranked_pair_gives_the_reports_of_a_ranking_pass(monkeypatch, k):
    """The default report (ACE), the smooth ECE, ECCE and the bootstrap read the ranked
    pair the K-class fill writes (blocked kernel at K = 5, row kernel at K = 70, two
    threads) as they read a separate ranking pass: the same values, invalid rows
    omitted, and no ranking pass."""
    from fastcal.backends import cpu

    rng = np.random.default_rng(36)
    n = 1_000_000 // k + 10
    P = rng.dirichlet(np.ones(k), n).astype(np.float32)
    y = rng.integers(0, k, n)
    P[3, 1] = np.nan  # omitted rows
    P[8] = np.nan
    P[12, k - 1] = np.nan
    P[20] = [np.float32(1 + 2e-7)] + [0.0] * (k - 1)  # ranked as 1
    kw = dict(n_bins=15, nan_policy="omit", metrics=("smece", "ecce"), ci=0.9, n_boot=20,
              threads=2)
    calls = []
    real = cpu.ranking_pair
    def counted(*args, **kws):
        if not kws.get("raw"):  # the rows as given (no ranking): what a pass reads back
            calls.append(1)
        return real(*args, **kws)

    monkeypatch.setattr(cpu, "ranking_pair", counted)
    fused = fastcal.calibration_report(y, P, **kw)
    assert calls == []
    monkeypatch.setattr(cpu, "_ranks_in_fill", lambda spec: False)
    apart = fastcal.calibration_report(y, P, **kw)
    assert calls
    assert fused.n_omitted == apart.n_omitted == 3
    for name in ("ace", "smece", "ecce", "ece", "ecd"):
        assert getattr(fused, name) == getattr(apart, name), name
    assert fused.intervals == apart.intervals

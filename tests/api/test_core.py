"""Binary core engine: kernel against loop references, edges, limits, laws, errors."""

import json
import math
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import fastcal
from tests import naive

SCALARS = ("ece", "esce", "mce", "ecd", "brier", "nll", "ecd_var")


def random_data(n, seed, dtype=np.float64, extremes=False):
    rng = np.random.default_rng(seed)
    p = rng.random(n).astype(dtype)
    if extremes:
        k = max(1, n // 20)
        p[rng.integers(0, n, k)] = 0.0
        p[rng.integers(0, n, k)] = 1.0
    y = (rng.random(n) < p).astype(np.uint8)
    if extremes:
        # one confident mistake: p = 1 on a negative
        p[int(np.flatnonzero(y == 0)[0])] = 1.0
    return y, p


def assert_matches(rep, ref, *, rtol=1e-12, atol=1e-13):
    assert rep.n == ref["n"]
    for name in SCALARS:
        np.testing.assert_allclose(getattr(rep, name), ref[name], rtol=rtol, atol=atol, err_msg=name)
    np.testing.assert_array_equal(rep.bins["count"], ref["count"])
    for col, key in (("conf", "conf"), ("frac_pos", "frac_pos"), ("accuracy", "accuracy"),
                     ("ecd", "ecd_bins")):
        np.testing.assert_allclose(rep.bins[col], ref[key], rtol=rtol, atol=atol, err_msg=col)


# -- against the loop reference --------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("n_bins", [1, 3, 10, 15, 37])
def test_report_matches_reference(dtype, closed, n_bins):
    y, p = random_data(3000, seed=n_bins, dtype=dtype)
    rep = fastcal.calibration_report(y, p, n_bins=n_bins, closed=closed, ace=False)
    assert_matches(rep, naive.report(y, p, n_bins=n_bins, closed=closed))


@pytest.mark.parametrize("observed", ["frac_pos", "accuracy"])
def test_observed_option_matches_reference(observed):
    y, p = random_data(2000, seed=7)
    rep = fastcal.calibration_report(y, p, n_bins=7, observed=observed)
    ref = naive.report(y, p, n_bins=7, observed=observed)
    for name in ("ece", "esce", "mce"):
        np.testing.assert_allclose(getattr(rep, name), ref[name], rtol=1e-12, atol=1e-13)


def test_large_parallel_matches_reference_and_threads_agree():
    y, p = random_data(400_000, seed=3, dtype=np.float32)
    one = fastcal.calibration_report(y, p, n_bins=15, threads=1, ace=False)
    two = fastcal.calibration_report(y, p, n_bins=15, threads=2, ace=False)
    np.testing.assert_array_equal(one.bins["count"], two.bins["count"])
    for name in SCALARS:
        np.testing.assert_allclose(getattr(one, name), getattr(two, name), rtol=1e-12, atol=0)
    ref = naive.report(y[:50_000], p[:50_000], n_bins=15)
    assert_matches(fastcal.calibration_report(y[:50_000], p[:50_000], n_bins=15, threads=2, ace=False),
                   ref)


def test_explicit_edges_match_reference():
    edges = [0.0, 0.05, 0.2, 0.5, 0.51, 0.9, 1.0]
    y, p = random_data(2000, seed=11)
    for closed in ("left", "right"):
        rep = fastcal.calibration_report(y, p, edges=edges, closed=closed, ace=False)
        assert_matches(rep, naive.report(y, p, edges=edges, closed=closed))
        np.testing.assert_array_equal(rep.bins["lower"], edges[:-1])


def test_extremes_and_eps_match_reference():
    y, p = random_data(1000, seed=5, extremes=True)
    rep = fastcal.calibration_report(y, p, ace=False)
    ref = naive.report(y, p)
    assert rep.ecd == math.inf and ref["ecd"] == math.inf
    rep = fastcal.calibration_report(y, p, eps=1e-6, ace=False)
    ref = naive.report(y, p, eps=1e-6)
    assert math.isfinite(rep.ecd)
    assert_matches(rep, ref)


# -- bin edges -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("closed", ["left", "right"])
def test_every_edge_goes_to_documented_side(dtype, closed):
    for n_bins in range(1, 101):
        edges = naive.uniform_edges(n_bins, dtype)
        e = np.array(edges, dtype=dtype)
        below = np.nextafter(e, dtype(-1))[1:]
        above = np.nextafter(e, dtype(2))[:-1]
        p = np.concatenate([e, below, above])
        y = np.zeros(p.shape[0], np.uint8)
        rep = fastcal.calibration_report(y, p, n_bins=n_bins, closed=closed, ace=False)
        expected = np.zeros(n_bins, np.int64)
        for value in p.tolist():
            expected[naive.bin_of(value, edges, closed)] += 1
        np.testing.assert_array_equal(rep.bins["count"], expected,
                                      err_msg=f"n_bins={n_bins} dtype={dtype.__name__}")


def test_edge_examples_from_the_issue():
    # 0.3 / 0.1 is 2.9999999999999996, yet p = 0.3 is the lower edge of bin 3 (0-based).
    rep = fastcal.calibration_report([1], [0.3], n_bins=10, ace=False)
    assert rep.bins["count"][3] == 1
    # float32(0.7) widened is 0.69999998..., still the edge of bin 7 in float32.
    rep = fastcal.calibration_report([1], np.array([0.7], np.float32), n_bins=10, ace=False)
    assert rep.bins["count"][7] == 1
    rep = fastcal.calibration_report([1], [1.0], n_bins=10, ace=False)
    assert rep.bins["count"][9] == 1 and rep.n_bins == 10
    rep = fastcal.calibration_report([0], [0.0], n_bins=10, closed="right", ace=False)
    assert rep.bins["count"][0] == 1


# -- ECD limits and the paper's values -------------------------------------------

def test_ecd_limits():
    assert fastcal.ecd([1], [1.0]) == 0.0
    assert fastcal.ecd([0], [0.0]) == 0.0
    assert fastcal.ecd([0], [1.0]) == math.inf
    assert fastcal.ecd([1], [0.0]) == math.inf
    assert fastcal.ecd([1], [0.5]) == 0.0
    assert fastcal.ecd([0], [0.5]) == 0.0
    assert math.isfinite(fastcal.ecd([0], [1.0], eps=1e-9))
    np.testing.assert_allclose(fastcal.ecd([0], [1.0], eps=1e-9),
                               naive.ecd_term(1 - 1e-9, 0), rtol=1e-12)


def test_single_datum_lower_bound():
    # Section IV-D: the ECD of one datum is bounded below by about -0.2785
    # (y = 1 at p near 0.78, or y = 0 at p near 0.22). One bin per p value.
    p = np.linspace(0.5, 0.9999, 50_000)
    for y, q in ((1, p), (0, 1.0 - p)):
        rep = fastcal.calibration_report(np.full(q.shape[0], y), q, n_bins=200_000, ace=False)
        low = np.nanmin(rep.bins["ecd"])
        assert round(low, 4) == -0.2785
        assert -0.27847 < low < -0.27846


# -- the seeds' worked examples ------------------------------------------------

def test_mccaffrey_calibration_error():
    # Seed 001: 10 items, 3 equal-interval bins, accuracy of the thresholded
    # prediction against the mean pseudo-probability: CE = 0.241.
    pp = [0.61, 0.39, 0.31, 0.76, 0.22, 0.59, 0.92, 0.83, 0.57, 0.41]
    target = [1, 1, 0, 1, 1, 1, 0, 1, 1, 0]
    ce = fastcal.ece(target, pp, n_bins=3, observed="accuracy")
    assert round(ce, 3) == 0.241
    np.testing.assert_allclose(ce, 0.241, rtol=1e-12)


def test_pavlovic_ece():
    # Seed 002: 9 samples, 3 right-closed bins, accuracy vs confidence: 0.23778.
    samples = [0.22, 0.64, 0.92, 0.42, 0.51, 0.15, 0.70, 0.37, 0.83]
    labels = [0, 1, 0, 0, 0, 1, 1, 0, 1]
    value = fastcal.ece(labels, samples, n_bins=3, closed="right", observed="accuracy")
    assert round(value, 5) == 0.23778


# -- ACE ---------------------------------------------------------------------

@pytest.mark.parametrize("n_bins", [1, 4, 10])
def test_ace_matches_reference_with_ties(n_bins):
    rng = np.random.default_rng(n_bins)
    p = np.round(rng.random(503), 2)  # many ties
    y = (rng.random(503) < p).astype(np.int64)
    np.testing.assert_allclose(fastcal.ace(y, p, n_bins=n_bins), naive.ace(y, p, n_bins),
                               rtol=1e-12, atol=1e-15)
    rep = fastcal.calibration_report(y, p, n_bins=n_bins, strategy="quantile")
    sizes = rep.bins["count"]
    assert sizes.sum() == 503 and sizes.max() - sizes.min() <= 1
    assert rep.ace == rep.ece
    # ACE of the default report is read off value-bucket statistics, the quantile
    # report off its groups filled row by row: equal up to the order of the sums.
    np.testing.assert_allclose(fastcal.calibration_report(y, p, n_bins=n_bins).ace, rep.ece,
                               rtol=1e-12)


# -- scikit-learn where definitions agree ---------------------------------------

def test_agrees_with_scikit_learn():
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss, log_loss

    y, p = random_data(5000, seed=21)
    p = np.clip(p, 1e-6, 1 - 1e-6)
    rep = fastcal.calibration_report(y, p, n_bins=10, closed="right", ace=False)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    full = rep.bins["count"] > 0
    np.testing.assert_allclose(rep.bins["frac_pos"][full], prob_true, rtol=1e-12)
    np.testing.assert_allclose(rep.bins["conf"][full], prob_pred, rtol=1e-12)
    np.testing.assert_allclose(rep.brier, brier_score_loss(y, p), rtol=1e-12)
    np.testing.assert_allclose(rep.nll, log_loss(y, p), rtol=1e-12)
    np.testing.assert_allclose(fastcal.brier_score(y, p), brier_score_loss(y, p), rtol=1e-12)
    np.testing.assert_allclose(fastcal.log_loss(y, p), log_loss(y, p), rtol=1e-12)


# -- laws: chunking, merge order, pickling ------------------------------------------

@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 1500), max_size=6), seed=st.integers(0, 10_000),
       order_seed=st.integers(0, 1000), closed=st.sampled_from(["left", "right"]))
def test_chunking_and_merge_order_do_not_change_results(cuts, seed, order_seed, closed):
    y, p = random_data(1500, seed=seed, dtype=np.float32, extremes=seed % 3 == 0)
    whole = fastcal.calibration_report(y, p, n_bins=12, closed=closed, ace=False)
    bounds = [0, *sorted(cuts), 1500]
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        acc = fastcal.CalibrationAccumulator(n_bins=12, closed=closed)
        if b > a:
            acc.update(y[a:b], p[a:b])
        parts.append(acc)
    np.random.default_rng(order_seed).shuffle(parts)
    total = parts[0]
    for part in parts[1:]:
        total = total + part if order_seed % 2 else part + total
    merged = total.report()
    np.testing.assert_array_equal(merged.bins["count"], whole.bins["count"])
    for name in SCALARS:
        np.testing.assert_allclose(getattr(merged, name), getattr(whole, name), rtol=1e-12,
                                   atol=0, err_msg=name)


def test_accumulator_pickles_and_merges_in_place():
    y, p = random_data(1000, seed=1)
    a = fastcal.CalibrationAccumulator(n_bins=5).update(y[:400], p[:400])
    b = pickle.loads(pickle.dumps(fastcal.CalibrationAccumulator(n_bins=5).update(y[400:], p[400:])))
    a += b
    whole = fastcal.calibration_report(y, p, n_bins=5, ace=False)
    np.testing.assert_allclose(a.report().ecd, whole.ecd, rtol=1e-12)
    assert a.n == 1000 and math.isnan(a.report().ace)
    with pytest.raises(ValueError, match="cannot merge"):
        a + fastcal.CalibrationAccumulator(n_bins=6)


def test_float32_input_sums_in_float64():
    # 2e7 identical float32 probabilities: a float32 running sum would drift by
    # far more than 1e-9 relative; float64 sums keep the mean exact to rounding.
    n = 20_000_000
    p = np.full(n, 0.1, np.float32)
    y = np.zeros(n, np.uint8)
    y[: n // 10] = 1
    rep = fastcal.calibration_report(y, p, n_bins=15, ace=False)
    assert rep.bins["count"].dtype == np.int64 and rep.n == n
    np.testing.assert_allclose(rep.bins["conf"][1], float(np.float32(0.1)), rtol=1e-12)
    np.testing.assert_allclose(rep.ece, abs(0.1 - float(np.float32(0.1))), atol=1e-12)


# -- small cases --------------------------------------------------------------

def test_empty_bins_stay_in_the_table():
    rep = fastcal.calibration_report([0, 1], [0.05, 0.95], n_bins=10, ace=False)
    assert rep.n_bins == 10 and rep.bins["count"].tolist() == [1] + [0] * 8 + [1]
    assert np.isnan(rep.bins["conf"][1:9]).all() and np.isnan(rep.bins["ecd"][1:9]).all()
    d = rep.to_dict()
    assert len(d["bins"]) == 10 and d["bins"][4]["conf"] is None and d["bins"][4]["count"] == 0


def test_single_sample_and_constant_labels():
    rep = fastcal.calibration_report([1], [0.8], n_bins=4)
    np.testing.assert_allclose(rep.ece, 0.2, rtol=1e-12)
    np.testing.assert_allclose(rep.ecd, naive.ecd_term(0.8, 1), rtol=1e-12)
    y = np.ones(500, np.int32)
    p = np.random.default_rng(0).random(500)
    assert_matches(fastcal.calibration_report(y, p, ace=False), naive.report(y, p))


def test_label_dtypes():
    y, p = random_data(300, seed=2)
    base = fastcal.calibration_report(y, p, ace=False)
    for yy in (y.astype(bool), y.astype(np.int8), y.astype(np.int64), y.astype(np.float64),
               y.astype(np.uint16), y.tolist()):
        other = fastcal.calibration_report(yy, p, ace=False)
        assert other.ecd == base.ecd and other.ece == base.ece


def test_strided_and_foreign_byte_order_inputs():
    y, p = random_data(1001, seed=8)
    base = fastcal.calibration_report(y[::2].copy(), p[::2].copy(), ace=False)
    strided = fastcal.calibration_report(y[::2], p[::2], ace=False)
    swapped = fastcal.calibration_report(y[::2].astype(">i4"), p[::2].astype(">f8"), ace=False)
    for other in (strided, swapped):
        np.testing.assert_array_equal(other.bins["count"], base.bins["count"])
        assert other.ecd == base.ecd and other.ece == base.ece


def test_weighted_sums_of_columns_equal_scalars():
    y, p = random_data(4000, seed=9)
    rep = fastcal.calibration_report(y, p, n_bins=10)
    w = rep.bins["count"] / rep.n
    full = rep.bins["count"] > 0
    np.testing.assert_allclose(np.sum(w[full] * rep.bins["ece"][full]), rep.ece, rtol=1e-12)
    np.testing.assert_allclose(np.sum(w[full] * rep.bins["esce"][full]), rep.esce, rtol=1e-12)
    np.testing.assert_allclose(np.sum(w[full] * rep.bins["ecd"][full]), rep.ecd, rtol=1e-12)


def test_exports():
    y, p = random_data(200, seed=4)
    rep = fastcal.calibration_report(y, p, n_bins=10)
    d = json.loads(rep.to_json())
    for key in ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll", "bins"):
        assert key in d
    assert set(d["bins"][0]) >= {"lower", "upper", "count", "conf", "frac_pos", "ece", "esce", "ecd"}
    assert d["ece"] == rep.ece
    md = rep.to_markdown()
    assert md.count("\n|") >= 11 and "weighted sum" in md and "[0.9, 1]" in md
    inf = fastcal.calibration_report([0], [1.0], ace=False).to_dict()
    assert inf["ecd"] == "inf"


def test_simulation_is_chunk_reproducible():
    y, p = fastcal.simulate(200_000, sigma=0.5, seed=3)
    y2, p2 = fastcal.simulate(100_000, sigma=0.5, seed=3, start=100_000)
    np.testing.assert_array_equal(y[100_000:], y2)
    np.testing.assert_array_equal(p[100_000:], p2)
    _, p32 = fastcal.simulate(10, sigma=0.5, seed=3, dtype=np.float32)
    assert p32.dtype == np.float32


# -- bad input -----------------------------------------------------------------

@pytest.mark.parametrize("y, p, pattern", [
    ([0, 1, 1], [0.1, np.nan, np.nan], r"y_prob contains 2 NaN values \(first at index 1\)"),
    ([0, 1, 1], [0.1, 0.5, np.inf], r"y_prob contains 1 values outside \[0, 1\].*index 2"),
    ([0, 1, 1], [0.1, -0.2, 1.5], r"y_prob contains 2 values outside \[0, 1\].*index 1"),
    ([0, 2, 1], [0.1, 0.2, 0.3], r"y_true contains 1 labels other than 0 and 1 \(first at index 1\)"),
    ([0, 1], [0.1, 0.2, 0.3], r"different lengths: 2 and 3"),
    ([], [], r"empty"),
    ([0.0, np.nan], [0.1, 0.2], r"y_true contains 1 NaN"),
])
def test_bad_input_raises_clear_errors(y, p, pattern):
    with pytest.raises(ValueError, match=pattern):
        fastcal.calibration_report(y, p)


@pytest.mark.parametrize("kwargs, pattern", [
    ({"n_bins": 0}, "n_bins must be >= 1; got 0"),
    ({"n_bins": 2.5}, "n_bins must be an integer"),
    ({"edges": [0.0, 0.6, 0.4, 1.0]}, r"strictly increasing; edges\[1\]=0.6"),
    ({"edges": [0.1, 0.5, 1.0]}, "start at 0 and end at 1"),
    ({"closed": "both"}, "closed must be one of 'left', 'right'; got 'both'"),
    ({"nan_policy": "drop"}, "nan_policy must be one of"),
    ({"observed": "acc"}, "observed must be one of"),
    ({"strategy": "kmeans"}, "strategy must be one of"),
])
def test_bad_options(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        fastcal.calibration_report([0, 1], [0.2, 0.7], **kwargs)


def test_nan_policy_omit_counts_rows():
    y = np.array([0, 1, 1, 0, 1], np.float64)
    p = np.array([0.1, np.nan, 0.7, 0.3, 0.9])
    y[3] = np.nan
    rep = fastcal.calibration_report(y, p, nan_policy="omit")
    assert rep.n == 3 and rep.n_omitted == 2
    ref = naive.report([0, 1, 1], [0.1, 0.7, 0.9])
    np.testing.assert_allclose(rep.ecd, ref["ecd"], rtol=1e-12)
    with pytest.raises(ValueError, match="all 1 rows were omitted"):
        fastcal.calibration_report([1], [np.nan], nan_policy="omit")


def test_error_index_is_global_across_updates_and_state_unchanged():
    acc = fastcal.CalibrationAccumulator(n_bins=4)
    acc.update([0, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"first at index 4\)"):
        acc.update([0, 1], [0.5, np.nan])
    assert acc.n == 3


# -- the accumulator protocol ----------------------------------------------------

def test_sum_copy_and_merge_errors():
    rng = np.random.default_rng(30)
    p = rng.random(3_000)
    y = (rng.random(3_000) < p).astype(np.uint8)
    parts = [fastcal.CalibrationAccumulator(n_bins=8).update(y[a:a + 1000], p[a:a + 1000],
                                                               start=a)
             for a in (0, 1000, 2000)]
    total = sum(parts)
    whole = fastcal.CalibrationAccumulator(n_bins=8).update(y, p)
    np.testing.assert_array_equal(total.counts, whole.counts)
    np.testing.assert_allclose(total.sums, whole.sums, rtol=1e-12)
    assert parts[0].n == 1000  # sum() copied, never changed its terms
    c = parts[0].copy()
    c += parts[1]
    assert c.n == 2000 and parts[0].n == 1000
    f32 = fastcal.CalibrationAccumulator(n_bins=8).update(y, p.astype(np.float32))
    with pytest.raises(ValueError, match="cannot merge accumulators of float64 and float32"):
        whole + f32
    with pytest.raises(ValueError, match="y_prob is float32 but this accumulator holds float64"):
        whole.update(y, p.astype(np.float32))
    with pytest.raises(ValueError, match="different bins"):
        whole + fastcal.CalibrationAccumulator(n_bins=9)
    with pytest.raises(ValueError, match="different ACE bucket statistics"):
        whole + fastcal.CalibrationAccumulator(n_bins=8, ace_buckets=1 << 14)

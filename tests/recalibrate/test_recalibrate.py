"""fastcal.recalibrate in memory: every method against an independent fit
(scipy, scikit-learn, netcal), the safe target against the ECD test, the
isotonic histogram's error bound, saving, and the cross-fitted evaluation."""

import json
import math
import warnings

import numpy as np
import pytest
from scipy import optimize, special

import fastcal
from fastcal import recalibrate as rc
from fastcal.significance import ecd_test
from fastcal.sources.arrays import ArraySource


def binary(n, temperature=2.0, seed=0, scale=3.0):
    """Logits z and labels drawn from sigmoid(z / temperature): over-confident for T > 1."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.3, scale, n)
    y = (rng.random(n) < special.expit(z / temperature)).astype(np.uint8)
    return y, z


def multiclass(n, k=4, temperature=1.5, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (n, k))
    p = special.softmax(z / temperature, axis=1)
    y = (p.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    return y, z


def scipy_temperature(nll, dnll):
    """T minimising the NLL by scipy: the bounded minimiser (limited to about
    1e-8 by the precision of the NLL's value near its minimum), then the root of
    the NLL's derivative in T by brentq, started from the minimiser's bracket."""
    res = optimize.minimize_scalar(nll, bounds=(0.05, 20), method="bounded",
                                   options={"xatol": 1e-10})
    root = optimize.brentq(dnll, res.x * 0.99, res.x * 1.01, xtol=1e-14, rtol=1e-15)
    assert abs(root - res.x) < 1e-6
    return root


# -- temperature ------------------------------------------------------------------------

@pytest.mark.parametrize("logits", [True, False])
def test_temperature_binary_equals_scipy_minimum_of_nll(logits):
    y, z = binary(20_000)
    x = z if logits else special.expit(z)

    def nll(t):
        return np.mean(np.logaddexp(0, -(2.0 * y - 1) * z / t))

    def dnll(t):  # d/dT of the mean NLL: -mean((sigmoid(z / T) - y) z) / T^2
        return -np.mean((special.expit(z / t) - y) * z) / t ** 2

    t = rc.TemperatureScaling(logits=logits).fit(y, x)
    assert t.temperature_ == pytest.approx(scipy_temperature(nll, dnll), abs=1e-8)
    assert t.nll_ == pytest.approx(nll(t.temperature_), rel=1e-12)
    assert t.nll_before_ == pytest.approx(nll(1.0), rel=1e-12)
    assert t.passes_ <= 4  # histogram pass, then Newton polish
    q = t.transform(x)
    np.testing.assert_allclose(q, special.expit(z / t.temperature_), rtol=1e-12, atol=1e-15)


def test_temperature_multiclass_equals_scipy_and_netcal():
    y, z = multiclass(6000)

    def nll(t):
        return np.mean(special.logsumexp(z / t, axis=1) - z[np.arange(len(y)), y] / t)

    def dnll(t):  # -(E_q z - z_y) / T^2
        q = special.softmax(z / t, axis=1)
        return -np.mean((q * z).sum(1) - z[np.arange(len(y)), y]) / t ** 2

    t = rc.TemperatureScaling(logits=True).fit(y, z)
    assert t.temperature_ == pytest.approx(scipy_temperature(nll, dnll), abs=1e-8)
    assert t.n_classes_ == 4
    np.testing.assert_allclose(t.transform(z), special.softmax(z / t.temperature_, axis=1),
                               rtol=1e-12)
    # probabilities in: softmax(log p / T), the same T
    p = special.softmax(z, axis=1)
    t2 = rc.TemperatureScaling().fit(y, p)
    assert t2.temperature_ == pytest.approx(t.temperature_, rel=1e-9)
    # netcal's TemperatureScaling (an iterative optimiser) agrees where it converges
    netcal = pytest.importorskip("netcal.scaling")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = netcal.TemperatureScaling()
        m.fit(p, y)
    # netcal keeps the inverse temperature as its weight
    assert 1.0 / float(np.ravel(m.temperature)[0]) == pytest.approx(t2.temperature_, rel=1e-5)


def test_ecd_z_under_temperature_is_gradient_over_root_hessian():
    """The identity the safe target rests on: the ECD test of sigmoid(z / T) has
    z = g / sqrt(h) (NLL derivatives in 1 / T), binary and K classes."""
    for y, z in (binary(5000, seed=3), multiclass(3000, seed=4)):
        t = rc.TemperatureScaling(logits=True, target="safe").fit(y, z)
        rep = fastcal.calibration_report(y, t.transform(z), ace=False)
        assert rep.ecd_z == pytest.approx(t.ecd_z_, rel=1e-9)
        before = fastcal.calibration_report(y, z, logits=True, ace=False)
        assert before.ecd_z == pytest.approx(t.ecd_z_before_, rel=1e-9)


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_safe_temperature_is_the_smallest_unflagged(alpha):
    y, z = binary(30_000, temperature=1.8, seed=1)
    nll_fit = rc.TemperatureScaling(logits=True).fit(y, z)
    safe = rc.TemperatureScaling(logits=True, target="safe", alpha=alpha).fit(y, z)
    assert 1.0 < safe.temperature_ < nll_fit.temperature_
    assert safe.temperature_nll_ == pytest.approx(nll_fit.temperature_, rel=1e-10)
    # at T_safe the one-sided p-value is alpha; a little less T and it is flagged
    res = ecd_test(y, safe.transform(z), method="normal")
    assert res.p_over == pytest.approx(alpha, rel=1e-6)
    sharper = special.expit(z / (safe.temperature_ * (1 - 1e-4)))
    assert ecd_test(y, sharper, method="normal").p_over < alpha
    # the cost of being safe, in NLL, is small and positive
    assert safe.nll_ > safe.nll_at_optimum_
    assert safe.nll_ - safe.nll_at_optimum_ < 1e-3
    assert safe.passes_ <= 6


def test_safe_temperature_multiclass_and_unflagged_model():
    y, z = multiclass(8000, temperature=1.4, seed=5)
    safe = rc.TemperatureScaling(logits=True, target="safe").fit(y, z)
    rep = fastcal.calibration_report(y, safe.transform(z), ace=False)
    assert rep.ecd_p_over == pytest.approx(0.05, rel=1e-6)
    # an under-confident model is not flagged: the safe change is none (T = 1)
    y2, z2 = binary(5000, temperature=0.7, seed=6)
    t = rc.TemperatureScaling(logits=True, target="safe").fit(y2, z2)
    assert t.temperature_ == 1.0
    assert t.temperature_nll_ < 1.0


# -- Platt -----------------------------------------------------------------------------

def test_platt_equals_scipy_and_is_close_to_sklearn():
    y, z = binary(20_000, temperature=1.7, seed=2)
    z = z + 0.4  # a shift for b to undo
    p = special.expit(z)

    def nll(ab):
        return np.sum(np.logaddexp(0, -(2.0 * y - 1) * (ab[0] * z + ab[1])))

    res = optimize.minimize(nll, [1.0, 0.0], method="BFGS", options={"gtol": 1e-10})
    m = rc.PlattScaling().fit(y, p)
    assert m.a_ == pytest.approx(res.x[0], abs=1e-6)
    assert m.b_ == pytest.approx(res.x[1], abs=1e-6)
    assert m.passes_ <= 4
    np.testing.assert_allclose(m.transform(p), special.expit(m.a_ * z + m.b_), rtol=1e-10)
    # scikit-learn's sigmoid calibration fits Platt's smoothed targets
    # (n+ + 1) / (n+ + 2) and 1 / (n- + 2) with L-BFGS: not the same optimum, close for large n
    from sklearn.calibration import _sigmoid_calibration

    a_sk, b_sk = _sigmoid_calibration(z, y)
    assert -a_sk == pytest.approx(m.a_, rel=2e-3)
    assert -b_sk == pytest.approx(m.b_, abs=5e-3)
    # the difference is the smoothing: the same smoothed-target fit by scipy is sklearn's
    n1 = y.sum()
    n0 = len(y) - n1
    tgt = np.where(y == 1, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))

    def nll_smooth(ab):
        t = ab[0] * z + ab[1]
        return np.sum(tgt * np.logaddexp(0, -t) + (1 - tgt) * np.logaddexp(0, t))

    sm = optimize.minimize(nll_smooth, [1.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    assert -a_sk == pytest.approx(sm[0], rel=1e-4)
    assert abs(sm[0] - m.a_) > 1e-6  # the smoothing moves the optimum measurably


@pytest.fixture(scope="module")
def frozen_naive_bayes():
    """A GaussianNB (no decision_function: scikit-learn calibrates its predict_proba)
    fitted on 2,000 rows, and 20,000 other rows to calibrate on."""
    from sklearn.datasets import make_classification
    from sklearn.naive_bayes import GaussianNB

    X, y = make_classification(n_samples=22_000, n_features=6, n_informative=3,
                               random_state=0)
    return GaussianNB().fit(X[:2000], y[:2000]), X[2000:], y[2000:]


def test_platt_on_p_is_sklearns_sigmoid_calibration_of_predict_proba(frozen_naive_bayes):
    from sklearn.calibration import CalibratedClassifierCV, _sigmoid_calibration
    from sklearn.frozen import FrozenEstimator

    clf, X, y = frozen_naive_bayes
    p = clf.predict_proba(X)[:, 1]
    m = rc.PlattScaling(feature="p").fit(y, p)
    assert m.passes_ <= 4

    def nll(ab):
        return np.sum(np.logaddexp(0, -(2.0 * y - 1) * (ab[0] * p + ab[1])))

    res = optimize.minimize(nll, [1.0, 0.0], method="BFGS", options={"gtol": 1e-10})
    assert m.a_ == pytest.approx(res.x[0], abs=1e-6)
    assert m.b_ == pytest.approx(res.x[1], abs=1e-6)
    # scikit-learn's map of the same model: f = p, its a and b negated, and Platt's
    # smoothed targets (the same O(1 / n) difference as on logits)
    cal = CalibratedClassifierCV(FrozenEstimator(clf), method="sigmoid").fit(X, y)
    sk = cal.calibrated_classifiers_[0].calibrators[0]
    a_sk, b_sk = _sigmoid_calibration(p, y)
    assert (sk.a_, sk.b_) == (a_sk, b_sk)
    assert -a_sk == pytest.approx(m.a_, rel=2e-3)
    assert -b_sk == pytest.approx(m.b_, rel=2e-3)
    np.testing.assert_allclose(m.transform(p), cal.predict_proba(X)[:, 1], rtol=0, atol=1e-3)
    # the default fits logit(p): another map
    logit = rc.PlattScaling().fit(y, p)
    assert np.abs(logit.transform(p) - m.transform(p)).max() > 0.05
    # saved and read back with its feature; a map saved before the option is on logit(p)
    d = json.loads(m.to_json())
    assert d["params"]["feature"] == "p"
    np.testing.assert_array_equal(rc.from_dict(d).transform(p), m.transform(p))
    del d["params"]["feature"]
    old = rc.from_dict(d)
    assert old.feature == "logit"
    np.testing.assert_allclose(old.transform(p), special.expit(
        m.a_ * special.logit(np.clip(p, 1e-15, 1 - 1e-15)) + m.b_), rtol=1e-12)


def test_platt_feature_is_checked_in_one_line():
    y, z = binary(500, seed=3)
    with pytest.raises(ValueError, match=r"^feature must be one of"):
        rc.PlattScaling(feature="probability").fit(y, special.expit(z))
    with pytest.raises(ValueError, match=r"^feature='p' fits the sigmoid on probabilities; "
                                         r"with logits=True"):
        rc.PlattScaling(logits=True, feature="p").fit(y, z)
    d = rc.PlattScaling(logits=True).fit(y, z).to_dict()
    d["params"]["feature"] = "p"
    with pytest.raises(ValueError, match=r"^params.feature must be 'logit' in a map of logits; "
                                         r"got 'p'$"):
        rc.from_dict(d)


def test_platt_at_nll_optimum_has_zero_ecd():
    """sum (q - y)(a f + b) = a g_a + b g_b = 0 at the optimum: ECD is 0."""
    y, z = binary(10_000, seed=7)
    m = rc.PlattScaling(logits=True).fit(y, z)
    assert abs(fastcal.ecd(y, m.transform(z))) < 1e-12


# -- isotonic and histogram binning --------------------------------------------------

def test_isotonic_equals_sklearn_exactly():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(8)
    n = 5000
    p = np.round(rng.beta(2, 3, n), 3)  # ties on purpose
    y = (rng.random(n) < p ** 1.5).astype(np.uint8)
    m = rc.IsotonicCalibration().fit(y, p)
    ref = IsotonicRegression(out_of_bounds="clip").fit(p, y)
    assert m.exact_
    np.testing.assert_allclose(m.x_, ref.X_thresholds_, rtol=0, atol=0)
    np.testing.assert_allclose(m.y_, ref.y_thresholds_, rtol=1e-12, atol=1e-15)
    grid = np.linspace(-0.1, 1.1, 2001)
    np.testing.assert_allclose(m.transform(np.clip(grid, 0, 1)), ref.predict(np.clip(grid, 0, 1)),
                               rtol=1e-12, atol=1e-15)


def test_isotonic_from_histogram_is_the_fit_of_binned_values():
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(9)
    n = 20_000
    # every fine bin holds at most one distinct value: the histogram fit is exact
    p = rng.integers(0, 1001, n) / 1000.0
    y = (rng.random(n) < p ** 2).astype(np.uint8)
    exact = IsotonicRegression(out_of_bounds="clip").fit(p, y)
    hist = rc.IsotonicCalibration()
    hist._fit(_data(y, p), in_memory=False)
    assert not hist.exact_
    np.testing.assert_allclose(hist.transform(p), exact.predict(p), rtol=1e-12, atol=1e-15)
    # continuous values, coarse fine bins: the exact isotonic fit of the data with
    # every value replaced by its bin's mean (rows of a bin pooled)
    p = rng.random(n)
    y = (rng.random(n) < p ** 2).astype(np.uint8)
    hist = rc.IsotonicCalibration(n_fine=64)
    hist._fit(_data(y, p), in_memory=False)
    j = np.minimum((p * 64).astype(int), 63)
    means = np.bincount(j, weights=p, minlength=64) / np.maximum(np.bincount(j, minlength=64), 1)
    pooled = IsotonicRegression(out_of_bounds="clip").fit(means[j], y)
    np.testing.assert_allclose(hist.transform(p), pooled.predict(p), rtol=1e-12, atol=1e-15)
    exact = IsotonicRegression(out_of_bounds="clip").fit(p, y)
    assert 0 < np.max(np.abs(hist.transform(p) - exact.predict(p))) < 0.2


def _data(y, p, logits=False):
    d = rc._Data.arrays(y, p, logits=logits, nan_policy="raise")
    d._n_classes = None if np.ndim(p) == 1 else np.shape(p)[1]
    return d


def test_histogram_binning_is_the_reports_fraction_of_positives():
    y, z = binary(10_000, seed=10)
    p = special.expit(z)
    m = rc.HistogramBinning(n_bins=10).fit(y, p)
    rep = fastcal.calibration_report(y, p, n_bins=10, ace=False)
    full = rep.bins["count"] > 0
    np.testing.assert_array_equal(m.counts_, rep.bins["count"])
    np.testing.assert_allclose(m.values_[full], rep.bins["frac_pos"][full], rtol=1e-15)
    # edges go where the report puts them (0.3 * 10 rounds below 3)
    assert m.transform(np.array([0.3]))[0] == m.values_[3]
    assert m.transform(np.array([1.0]))[0] == m.values_[9]


def test_top_label_isotonic_keeps_rows_summing_to_one():
    from sklearn.isotonic import IsotonicRegression

    y, z = multiclass(4000, seed=11)
    p = special.softmax(z, axis=1)
    m = rc.IsotonicCalibration().fit(y, p)
    q = m.transform(p)
    np.testing.assert_allclose(q.sum(1), 1.0, rtol=1e-12)
    conf = p.max(1)
    ref = IsotonicRegression(out_of_bounds="clip").fit(conf, p.argmax(1) == y)
    np.testing.assert_allclose(q[np.arange(len(y)), p.argmax(1)], ref.predict(conf), rtol=1e-12)
    # the other classes keep their ratios
    r = q / p
    top = np.zeros_like(p, bool)
    top[np.arange(len(y)), p.argmax(1)] = True
    rest = np.where(top, np.nan, r)
    np.testing.assert_allclose(np.nanmin(rest, 1), np.nanmax(rest, 1), rtol=1e-10)
    # logits in: the same map of the softmax's confidence
    ml = rc.IsotonicCalibration(logits=True).fit(y, z)
    np.testing.assert_allclose(ml.x_, m.x_, rtol=1e-14)


# -- saving, errors, evaluation -----------------------------------------------------------

@pytest.mark.parametrize("method", rc.METHODS)
def test_to_dict_round_trip(method):
    y, z = binary(3000, seed=12)
    m = rc.make(method, logits=True).fit(y, z)
    d = json.loads(m.to_json())
    back = rc.from_dict(d)
    np.testing.assert_array_equal(back.transform(z), m.transform(z))
    with pytest.raises(ValueError, match="not a fastcal recalibration"):
        rc.from_dict({"method": "magic"})


def test_errors_name_the_argument_and_row():
    y, z = binary(100, seed=13)
    p = special.expit(z)
    p[17] = np.nan
    with pytest.raises(ValueError, match=r"NaN.*index 17"):
        rc.TemperatureScaling().fit(y, p)
    m = rc.TemperatureScaling(nan_policy="omit").fit(y, p)
    assert m.n_ == 99 and m.n_omitted_ == 1
    p[17] = 1.5
    with pytest.raises(ValueError, match="17"):
        rc.PlattScaling().fit(y, p)
    with pytest.raises(ValueError, match="target"):
        rc.TemperatureScaling(target="fast").fit(y, z)
    with pytest.raises(ValueError, match="not fitted"):
        rc.PlattScaling().transform(z)
    with pytest.raises(ValueError, match="shape"):
        rc.TemperatureScaling(logits=True).fit(y, z).transform(np.zeros((3, 2)))
    sep = np.array([-2.0, -1.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="separable"):
        rc.TemperatureScaling(logits=True).fit(np.array([0, 0, 1, 1]), sep)


def test_evaluate_is_cross_fitted(tmp_path):
    y, z = binary(6000, temperature=1.6, seed=14)
    ev = rc.evaluate(y, z, logits=True, method="temperature", cv=3, seed=1)
    # recompute the out-of-fold predictions by hand
    fold = np.empty(len(y), int)
    fold[np.random.default_rng(1).permutation(len(y))] = np.arange(len(y)) % 3
    q = np.empty(len(y))
    for k in range(3):
        t = rc.TemperatureScaling(logits=True).fit(y[fold != k], z[fold != k])
        q[fold == k] = t.transform(z[fold == k])
        assert t.temperature_ == pytest.approx(ev.models[k].temperature_, rel=1e-12)
    ref = fastcal.calibration_report(y, q, n_bins=15, ace=False)
    assert ev.after.ecd == pytest.approx(ref.ecd, rel=1e-12)
    assert ev.after.nll == pytest.approx(ref.nll, rel=1e-12)
    assert ev.before.ecd > 10 * abs(ev.after.ecd)
    d = ev.to_dict()
    assert d["metrics"]["verdict"]["before"] == "over-confident"
    assert set(d["metrics"]) >= {"ECD", "ECE", "Brier", "NLL", "ECD z", "p(over-confident)"}
    assert "| ECD |" in ev.to_markdown()
    pytest.importorskip("matplotlib")
    ev.plot(tmp_path / "ba.png")
    assert (tmp_path / "ba.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_source_of_arrays_equals_fit():
    y, z = binary(4000, seed=15)
    a = rc.TemperatureScaling(logits=True).fit(y, z)
    b = rc.TemperatureScaling(logits=True).fit_source(ArraySource(y, z))
    assert a.temperature_ == b.temperature_
    assert math.isfinite(a.ecd_z_)


def test_docstring_examples():
    import doctest

    result = doctest.testmod(rc)
    assert result.attempted > 0 and result.failed == 0


def test_transform_in_the_driver_refuses_the_gpu_path():
    from fastcal.score import Options, score

    y, z = binary(1000, seed=16)
    m = rc.TemperatureScaling(logits=True).fit(y, z)
    with pytest.raises(ValueError, match="applied on the host"):
        score(ArraySource(y, z), Options(logits=True, device="cuda", transform=m))
    rep = score(ArraySource(y, z), Options(logits=True, ace=False, transform=m))
    assert rep.ecd == pytest.approx(fastcal.ecd(y, m.transform(z)), rel=1e-12)

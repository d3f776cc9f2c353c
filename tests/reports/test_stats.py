"""The ECD test of calibration, its null laws, and confidence intervals.

References are slow float64 loops written here; rates are measured on data
simulated with numpy directly (the paper's recipe, eq. 16-19, vectorised over
seeds) and scored with the library.
"""

from decimal import Decimal, getcontext
import importlib.util
import itertools
import json
import math
from pathlib import Path
import pickle

import numpy as np
import pytest
from scipy import stats as sps

import fastcal
from fastcal import CalibrationAccumulator
from fastcal._kernels import bootstrap as kboot
from fastcal.reports import stats

# -- helpers -----------------------------------------------------------------

def paper_sim(rng, n_seeds, n, sigma, shift=0.0):
    """(n_seeds, n) labels and probabilities of eq. 16-19 (W = 0.5), plus a logit shift."""
    u = 0.5 * rng.uniform(-10.0, 10.0, (n_seeds, n))
    y = (rng.random((n_seeds, n)) < 1.0 / (1.0 + np.exp(-u))).astype(np.uint8)
    noise = sigma * rng.standard_normal((n_seeds, n)) if sigma else 0.0
    p = 1.0 / (1.0 + np.exp(-(u + noise + shift)))
    return y, p


def loop_sums(y, p, edges, closed="left"):
    """Per-bin and total sum of ECD terms and of their null variance, by loops."""
    nb = len(edges) - 1
    s = [0.0] * nb
    v = [0.0] * nb
    for yi, pi in zip(y.tolist(), p.tolist()):
        if closed == "left":
            b = next(k for k in range(nb) if edges[k] <= pi < edges[k + 1] or
                     (k == nb - 1 and pi == edges[-1]))
        else:
            b = next(k for k in range(nb) if edges[k] < pi <= edges[k + 1] or
                     (k == 0 and pi == edges[0]))
        lg = math.log(pi) - math.log1p(-pi)
        s[b] += (pi - yi) * lg
        v[b] += pi * (1 - pi) * lg * lg
    return s, v


def normal_sf(z):
    return 0.5 * math.erfc(z / math.sqrt(2.0))


# -- the z statistic ---------------------------------------------------------

@pytest.mark.parametrize("closed", ["left", "right"])
def test_z_and_per_bin_z_match_loop_reference(closed):
    rng = np.random.default_rng(11)
    p = np.concatenate([rng.uniform(0.001, 0.999, 3000), [0.1, 0.5, 0.9, 0.2, 0.7]])
    y = (rng.random(p.shape[0]) < p ** 1.3).astype(np.int64)
    edges = [k / 10 for k in range(11)]
    s, v = loop_sums(y, p, edges, closed)
    rep = fastcal.calibration_report(y, p, closed=closed, ace=False)
    z_ref = sum(s) / math.sqrt(sum(v))
    assert rep.ecd_z == pytest.approx(z_ref, rel=1e-10)
    assert rep.ecd_p_over == pytest.approx(normal_sf(z_ref), rel=1e-9)
    assert rep.ecd_p_under == pytest.approx(normal_sf(-z_ref), rel=1e-9)
    assert rep.ecd_p_two_sided == pytest.approx(2 * normal_sf(abs(z_ref)), rel=1e-9)
    for b in range(10):
        assert rep.bins["ecd_z"][b] == pytest.approx(s[b] / math.sqrt(v[b]), rel=1e-9, abs=1e-12)
    res = fastcal.ecd_test(y, p, method="normal")
    assert res.z == pytest.approx(z_ref, rel=1e-10)
    assert res.method == "normal"


def test_empty_bins_have_nan_z_and_zero_variance_gives_signed_inf():
    rep = fastcal.calibration_report([0, 1, 1], [0.05, 0.95, 0.9], ace=False)
    assert np.isnan(rep.bins["ecd_z"][4])
    # every p in {0, 0.5, 1}: the sum is exactly 0 under calibration
    assert stats.z_from_sums(0.0, 0.0) == 0.0
    assert stats.z_from_sums(2.0, 0.0) == math.inf
    assert stats.z_from_sums(-2.0, 0.0) == -math.inf
    # a certain prediction that was wrong: impossible under calibration
    rep = fastcal.calibration_report([0, 1], [1.0, 0.6], ace=False)
    assert rep.ecd_z == math.inf and rep.ecd_p_over == 0.0
    assert rep.verdict == "over-confident"


def test_report_exports_the_test():
    y, p = fastcal.simulate(100_000, sigma=0.5, seed=3)
    rep = fastcal.calibration_report(y, p, ace=False)
    d = json.loads(rep.to_json())
    assert d["ecd_test"]["z"] == pytest.approx(rep.ecd_z)
    assert d["ecd_test"]["verdict"] == rep.verdict == "over-confident"
    assert all("ecd_z" in row for row in d["bins"])
    md = rep.to_markdown()
    assert "| z |" in md and "ECD test: z = " in md and rep.verdict in md


def test_z_is_streaming_and_mergeable():
    y, p = fastcal.simulate(50_000, sigma=0.2, seed=5)
    whole = fastcal.calibration_report(y, p, ace=False)
    a = CalibrationAccumulator()
    b = CalibrationAccumulator()
    for lo, hi in [(0, 7_000), (7_000, 7_001), (7_001, 30_000)]:
        a.update(y[lo:hi], p[lo:hi])
    b.update(y[30_000:], p[30_000:])
    merged = (b + a).report()
    assert merged.ecd_z == pytest.approx(whole.ecd_z, rel=1e-12)
    np.testing.assert_allclose(merged.bins["ecd_z"], whole.bins["ecd_z"], rtol=1e-12)
    assert merged.verdict == whole.verdict


def test_normal_tail_and_quantile_are_scipys():
    """The p-values and the bin test's critical value, computed without SciPy, are
    SciPy's ndtr and ndtri: to 3e-15 for |z| < 8, to 1e-13 in the far tail (results
    near the smallest normal floats), 0 and 1 where SciPy's are, except that for z
    about -37.5 to -38.5 SciPy's underflows to 0 where the standard library's erfc
    gives the subnormal value."""
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-39.0, 39.0, 20_001), [0.0, -0.0, np.inf, -np.inf, 5e-324]])
    got = np.array([stats.ndtr(float(v)) for v in x])
    ref = special.ndtr(x)
    pos = ref > 0
    sub = ~pos & (got > 0)
    assert (got[sub] < np.finfo(np.float64).tiny).all() and (x[sub] < -37).all()
    assert np.array_equal(got[~pos & ~sub], ref[~pos & ~sub])
    rel = np.abs(got[pos] - ref[pos]) / ref[pos]
    assert rel.max() <= 1e-13
    assert rel[np.abs(x[pos]) < 8].max() <= 3e-15
    assert np.isnan(stats.normal_pvalues(float("nan"))).all()
    for k in (1, 2, 10, 15, 1000, 100_000):
        for alpha in (0.01, 0.05, 0.2):
            z = np.zeros(k)
            z[0] = 1.0
            critical = stats.bin_test(z, alpha=alpha).critical_z
            want = -special.ndtri(stats._sidak(alpha, k) / 2.0)
            assert critical == pytest.approx(want, rel=1e-15, abs=0), (k, alpha)


def test_verdict_rules():
    v = stats.verdict
    assert v(0.01, 0.99, 0.02) == "over-confident"
    assert v(0.99, 0.01, 0.02) == "under-confident"
    assert v(0.03, 0.97, 0.06) == "consistent with calibration"
    assert v(0.03, 0.97, 0.06, alternative="over") == "over-confident"
    assert v(0.99, 0.01, 0.02, alternative="over") == "consistent with calibration"
    assert v(0.99, 0.01, 0.02, alternative="under") == "under-confident"
    assert v(0.03, 0.97, 0.06, alpha=0.1) == "over-confident"
    with pytest.raises(ValueError, match="alternative must be one of"):
        v(0.5, 0.5, 1.0, alternative="greater")
    with pytest.raises(ValueError, match="alpha must be"):
        v(0.5, 0.5, 1.0, alpha=1.5)


def test_bad_options_raise_with_names():
    y, p = [0, 1, 1], [0.2, 0.7, 0.9]
    with pytest.raises(ValueError, match="method must be one of"):
        fastcal.ecd_test(y, p, method="bootstrap")
    with pytest.raises(ValueError, match="n_resamples must be an integer >= 1; got 0"):
        fastcal.ecd_test(y, p, n_resamples=0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        fastcal.ecd_test(y, p, seed=-1)
    y30, p30 = fastcal.simulate(30, seed=1)
    with pytest.raises(ValueError, match="needs n <= 20; got n=30"):
        fastcal.ecd_test(y30, p30, method="exact")
    with pytest.raises(ValueError, match="y_prob contains 1 NaN"):
        fastcal.ecd_test(y, [0.2, float("nan"), 0.9])


# -- size and power of the normal test (the requirements) -------------

def test_size_at_sigma_0_is_5_percent_over_2000_seeds():
    """sigma = 0, N = 10,000, 2,000 seeds: both tests reject in 5% +/- 1.5%."""
    rng = np.random.default_rng(20240501)
    z = []
    for _ in range(8):
        y, p = paper_sim(rng, 250, 10_000, 0.0)
        for s in range(250):
            z.append(CalibrationAccumulator().update(y[s], p[s]).report().ecd_z)
    z = np.array(z)
    p_over = np.array([stats.normal_pvalues(x)[0] for x in z])
    p_two = np.array([stats.normal_pvalues(x)[2] for x in z])
    one_sided = np.mean(p_over < 0.05)
    two_sided = np.mean(p_two < 0.05)
    assert abs(one_sided - 0.05) <= 0.015, one_sided
    assert abs(two_sided - 0.05) <= 0.015, two_sided
    # and the statistic is standard normal, not just at the 5% point
    assert abs(np.mean(z)) < 0.08 and abs(np.std(z) - 1.0) < 0.05


def test_power_at_sigma_05_n_100k_is_at_least_99_percent():
    rng = np.random.default_rng(77)
    rejected = 0
    n_seeds = 200
    for _ in range(n_seeds // 50):
        y, p = paper_sim(rng, 50, 100_000, 0.5)
        for s in range(50):
            rep = CalibrationAccumulator().update(y[s], p[s]).report()
            rejected += rep.ecd_test(alternative="over").verdict == "over-confident"
    assert rejected / n_seeds >= 0.99


# -- exact and simulated nulls -------------------------------------------------

def brute_force_pvalues(y, p):
    """P(T >= t_obs) and P(T <= t_obs) over all 2^n label vectors, by loops."""
    lg = [math.log(q) - math.log1p(-q) for q in p]
    t_obs = sum((q - yi) * g for q, yi, g in zip(p, y, lg))
    over = under = 0.0
    for ys in itertools.product([0, 1], repeat=len(p)):
        prob = 1.0
        t = 0.0
        for q, yi, g in zip(p, ys, lg):
            prob *= q if yi else 1.0 - q
            t += (q - yi) * g
        if t >= t_obs - 1e-9:
            over += prob
        if t <= t_obs + 1e-9:
            under += prob
    return over, under


@pytest.mark.parametrize("n,seed", [(6, 1), (11, 2), (14, 3)])
def test_exact_null_matches_brute_force(n, seed):
    y, p = fastcal.simulate(n, sigma=1.0, seed=seed)
    res = fastcal.ecd_test(y, p, method="exact")
    over, under = brute_force_pvalues(y.tolist(), p.tolist())
    assert res.p_over == pytest.approx(over, rel=1e-9)
    assert res.p_under == pytest.approx(under, rel=1e-9)
    assert res.p_two_sided == pytest.approx(min(1.0, 2 * min(over, under)), rel=1e-9)


def test_null_fill_same_for_any_thread_count():
    # replicates split over threads (a Python pool over the serial kernel)
    from fastcal._kernels import bootstrap as kboot

    rng = np.random.default_rng(1)
    p = rng.random(3_000)
    y = (rng.random(3_000) < p).astype(np.float64)
    y[5] = np.nan
    edges = np.linspace(0.0, 1.0, 11)
    got = []
    for threads in (1, 2, 3):
        pos = np.zeros((7, 10), np.int64)
        ecd = np.zeros(7)
        kboot.null_fill(p, y, 0, edges, True, False, 1e-6, 9, threads, pos, ecd)
        got.append((pos, ecd))
    assert got[0][0].sum() > 0
    for pos, ecd in got[1:]:
        np.testing.assert_array_equal(pos, got[0][0])
        np.testing.assert_array_equal(ecd, got[0][1])


def test_simulated_null_agrees_with_exact():
    y, p = fastcal.simulate(16, sigma=2.0, seed=4)
    exact = fastcal.ecd_test(y, p, method="exact")
    sim = fastcal.ecd_test(y, p, method="simulate", n_resamples=40_000, seed=9)
    for a, b in [(sim.p_over, exact.p_over), (sim.p_under, exact.p_under)]:
        se = math.sqrt(b * (1 - b) / 40_000) + 1 / 40_000
        assert abs(a - b) <= 4 * se
    # reproducible for a seed, different for another
    again = fastcal.ecd_test(y, p, method="simulate", n_resamples=40_000, seed=9)
    other = fastcal.ecd_test(y, p, method="simulate", n_resamples=40_000, seed=10)
    assert again.p_over == sim.p_over and other.p_over != sim.p_over


def test_auto_picks_exact_simulate_normal():
    y, p = fastcal.simulate(200_000, sigma=0.0, seed=8)
    assert fastcal.ecd_test(y[:20], p[:20]).method == "exact"
    assert fastcal.ecd_test(y[:150], p[:150], n_resamples=999).method == "simulate"
    big = fastcal.ecd_test(y, p)
    assert big.method == "normal" and big.skewness < stats.MAX_SKEWNESS
    # extreme probabilities: skewed null even with n >= 200
    pe = np.full(400, 0.9995)
    ye = np.ones(400, np.uint8)
    res = fastcal.ecd_test(ye, pe, n_resamples=999)
    assert res.skewness > stats.MAX_SKEWNESS and res.method == "simulate"


def test_skewness_matches_moment_formula_by_loops():
    p = np.array([0.01, 0.3, 0.5, 0.8, 0.999])
    var = mu3 = 0.0
    for q in p:
        lg = math.log(q / (1 - q))
        t1, t0 = (q - 1) * lg, q * lg  # outcomes for y = 1 and y = 0, mean 0
        var += q * t1 ** 2 + (1 - q) * t0 ** 2
        mu3 += q * t1 ** 3 + (1 - q) * t0 ** 3
    assert stats.null_skewness(p) == pytest.approx(mu3 / var ** 1.5, rel=1e-10)


@pytest.mark.parametrize("n,method", [(20, "exact"), (30, "simulate")])
def test_small_n_extreme_p_normal_is_anticonservative_exact_and_simulated_are_not(n, method):
    """All p = 0.995: the number K of y = 0 is Binomial(n, 0.005) under calibration.

    The exact size of each test is sum_k P(K = k) 1[test rejects with k zeros].
    The normal approximation rejects already at K = 1 (P(K >= 1) = 10-14%);
    the exact and simulated nulls keep the level.
    """
    q = 0.995
    p = np.full(n, q)
    size_normal = size_other = 0.0
    for k in range(0, 7):
        y = np.ones(n, np.uint8)
        y[:k] = 0
        pk = sps.binom.pmf(k, n, 1 - q)
        size_normal += pk * (fastcal.ecd_test(y, p, method="normal").p_over < 0.05)
        res = fastcal.ecd_test(y, p, method=method, n_resamples=4999, seed=1)
        size_other += pk * (res.p_over < 0.05)
    assert size_normal > 0.09
    assert size_other <= 0.05


def test_chi2_nees_test_has_its_level_and_detects_small_covariances():
    rng = np.random.default_rng(5)
    n_seeds, n, d = 2000, 50, 2
    a = rng.normal(size=(n_seeds, n, d, d))
    cov = a @ np.swapaxes(a, -1, -2) + 0.5 * np.eye(d)
    chol = np.linalg.cholesky(cov)
    err = (chol @ rng.normal(size=(n_seeds, n, d, 1)))[..., 0]
    nees = np.einsum("...i,...i->...", err, np.linalg.solve(cov, err[..., None])[..., 0])
    sums = nees.sum(axis=1)
    res = [fastcal.chi2_nees_test(s, n * d) for s in sums]
    rate_two = np.mean([r.p_two_sided < 0.05 for r in res])
    rate_over = np.mean([r.p_over < 0.05 for r in res])
    assert abs(rate_two - 0.05) <= 0.015 and abs(rate_over - 0.05) <= 0.015
    r0 = res[0]
    assert r0.p_over == pytest.approx(sps.chi2.sf(sums[0], n * d), rel=1e-12)
    assert r0.ecd == pytest.approx((sums[0] - n * d) / (2 * n * d), rel=1e-12)
    # covariances reported 2x too small: NEES doubles, over-confident
    assert fastcal.chi2_nees_test(2 * sums[0], n * d).verdict == "over-confident"
    assert fastcal.chi2_nees_test(0.5 * sums[0], n * d).verdict == "under-confident"
    with pytest.raises(ValueError, match="dof must be an integer >= 1"):
        fastcal.chi2_nees_test(1.0, 0)


def test_ece_test_level_and_reference():
    rng = np.random.default_rng(3)
    y, p = paper_sim(rng, 200, 2_000, 0.0)
    rej = [fastcal.ece_test(y[s], p[s], n_resamples=199, seed=s).p_value < 0.05 for s in range(200)]
    # exact-size Monte Carlo test: level 5%, 200 seeds -> within 3.5 SE
    assert np.mean(rej) <= 0.05 + 3.5 * math.sqrt(0.05 * 0.95 / 200)
    y, p = fastcal.simulate(20_000, sigma=0.5, seed=1)
    assert fastcal.ece_test(y, p, n_resamples=99).verdict == "miscalibrated"


# -- bootstrap kernel -----------------------------------------------------------

M64 = (1 << 64) - 1


def py_mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def py_thresholds32():
    """floor(2^32 P(X <= k)) for X ~ Poisson(1), k = 0..11, in 60-digit decimals."""
    getcontext().prec = 60
    e1 = Decimal(-1).exp()
    cdf, fact, out = Decimal(0), Decimal(1), []
    for k in range(12):
        fact *= max(k, 1)
        cdf += e1 / fact
        out.append(int(cdf * (Decimal(2) ** 32)))
    return out


T32 = py_thresholds32()


def py_weight(seed, row, r):
    skey = py_mix64(seed ^ 0xD1B54A32D192ED03)
    rkey = py_mix64(py_mix64((row * 0x9E3779B97F4A7C15) & M64) ^ skey)
    h = py_mix64((rkey + (r + 1) * 0x9E3779B97F4A7C15) & M64)
    u = h >> 32
    return sum(u >= t for t in T32)


def test_poisson_table_is_exact():
    got = [int(t) >> 32 for t in kboot.POISSON1_CDF[:12]]
    assert got == T32


@pytest.mark.parametrize("closed,edges", [("left", None), ("right", None),
                                          ("left", [0.0, 0.15, 0.5, 0.8, 0.9, 1.0]),
                                          ("right", [0.0, 0.15, 0.5, 0.8, 0.9, 1.0])])
def test_bootstrap_replicates_match_python_reference(closed, edges):
    rng = np.random.default_rng(2)
    n, n_boot, seed = 400, 5, 12345
    p = rng.uniform(0, 1, n)
    p[:6] = [0.0, 1.0, 0.3, 0.15, 0.8, 0.2]
    p[10] = np.nan
    y = (rng.random(n) < p).astype(np.float64)
    y[20] = np.nan
    acc = CalibrationAccumulator(n_bins=5, edges=edges, closed=closed, nan_policy="omit",
                                 n_boot=n_boot, seed=seed)
    acc.update(y[:123], p[:123])
    acc.update(y[123:], p[123:])
    edges = edges or [k / 5 for k in range(6)]
    ref_c = np.zeros((n_boot, 5, 3), np.int64)
    ref_s = np.zeros((n_boot, 5))
    for i in range(n):
        if np.isnan(p[i]) or np.isnan(y[i]):
            continue
        pi, yi = float(p[i]), int(y[i])
        if closed == "left":
            b = next(k for k in range(5) if edges[k] <= pi < edges[k + 1] or (k == 4 and pi == 1))
        else:
            b = next(k for k in range(5) if edges[k] < pi <= edges[k + 1] or (k == 0 and pi == 0))
        for r in range(n_boot):
            w = py_weight(seed, i, r)
            ref_c[r, b] += [w, w * yi, w * int((pi > 0.5) == (yi == 1))]
            ref_s[r, b] += w * pi
    np.testing.assert_array_equal(acc.boot_counts, ref_c)
    np.testing.assert_allclose(acc.boot_sums, ref_s, rtol=1e-12)


def test_poisson_weights_have_the_poisson1_law():
    counts = np.zeros((400, 1, 3), np.int64)
    sums = np.zeros((400, 1))
    p = np.full(5_000, 0.3)
    y = np.zeros(5_000)
    kboot.boot_fill_range(p, y, 0, np.array([0.0, 1.0]), True, False, 7, 0, 400, counts, sums)
    # the total weight of a replicate is Poisson(5000): mean 5000, variance 5000
    tot = counts[:, 0, 0]
    assert abs(tot.mean() - 5000) < 4 * math.sqrt(5000 / 400)
    assert 0.8 < tot.var(ddof=1) / 5000 < 1.25
    # single weights: goodness of fit on 200,000 draws
    w = np.array([py_weight(3, i, 0) for i in range(20_000)])
    freq = np.bincount(w, minlength=6)[:6].astype(float)
    freq[5] = len(w) - freq[:5].sum()
    pmf = sps.poisson.pmf(np.arange(5), 1.0)
    expected = len(w) * np.append(pmf, 1 - pmf.sum())
    assert sps.chisquare(freq, expected).pvalue > 0.001


def test_bootstrap_is_the_same_whatever_chunking_threads_and_merge_order():
    y, p = fastcal.simulate(30_000, sigma=0.5, seed=2)
    one = CalibrationAccumulator(n_boot=16, seed=4, threads=1).update(y, p)
    chunked = CalibrationAccumulator(n_boot=16, seed=4, threads=2)
    for lo, hi in [(0, 1), (1, 4_097), (4_097, 20_000), (20_000, 30_000)]:
        chunked.update(y[lo:hi], p[lo:hi])
    # partitions filled apart (as on Dask) with their global offsets, merged in reverse
    parts = [CalibrationAccumulator(n_boot=16, seed=4).update(y[lo:hi], p[lo:hi], start=lo)
             for lo, hi in [(0, 11_111), (11_111, 30_000)]]
    merged = parts[1] + parts[0]
    big = CalibrationAccumulator(n_boot=16, seed=4, threads=2)
    big.update(np.tile(y, 200), np.tile(p, 200))  # parallel path: 6e6 rows x 16
    for acc in (chunked, merged):
        np.testing.assert_array_equal(acc.boot_counts, one.boot_counts)
        np.testing.assert_allclose(acc.boot_sums, one.boot_sums, rtol=1e-12)
    serial = CalibrationAccumulator(n_boot=16, seed=4, threads=1)
    serial.update(np.tile(y, 200), np.tile(p, 200))
    np.testing.assert_array_equal(big.boot_counts, serial.boot_counts)
    np.testing.assert_allclose(big.boot_sums, serial.boot_sums, rtol=1e-12)
    other_seed = CalibrationAccumulator(n_boot=16, seed=5).update(y, p)
    assert not np.array_equal(other_seed.boot_counts, one.boot_counts)
    r1 = one.report(ci=0.9)
    r2 = merged.report(ci=0.9)
    for k in r1.intervals:
        np.testing.assert_allclose(r1.intervals[k], r2.intervals[k], rtol=1e-12)


def test_bootstrap_accumulator_pickles_copies_and_refuses_bad_merges():
    y, p = fastcal.simulate(5_000, seed=1)
    acc = CalibrationAccumulator(n_boot=8, seed=3).update(y, p)
    back = pickle.loads(pickle.dumps(acc))
    np.testing.assert_array_equal(back.boot_counts, acc.boot_counts)
    c = acc.copy()
    c.update(y, p)
    assert acc.boot_counts.sum() < c.boot_counts.sum()
    assert "n_boot=8" in repr(acc)
    with pytest.raises(ValueError, match="different bootstrap settings"):
        acc + CalibrationAccumulator(n_boot=8, seed=4)
    with pytest.raises(ValueError, match="different bootstrap settings"):
        acc + CalibrationAccumulator()
    with pytest.raises(ValueError, match="n_boot must be an integer >= 0"):
        CalibrationAccumulator(n_boot=-1)
    with pytest.raises(ValueError, match="start must be an integer >= 0"):
        acc.update(y, p, start=-5)
    with pytest.raises(ValueError, match="ci must be None or a confidence level"):
        acc.report(ci=95)
    # an error leaves the bootstrap state unchanged
    before = acc.boot_counts.copy()
    with pytest.raises(ValueError, match="y_prob contains 1 values outside"):
        acc.update([0, 1], [0.5, 1.5])
    np.testing.assert_array_equal(acc.boot_counts, before)


def test_calibration_report_ci_equals_streamed_ci():
    y, p = fastcal.simulate(40_000, sigma=0.5, seed=6)
    rep = fastcal.calibration_report(y, p, ci=0.95, n_boot=50, seed=3, ace=False)
    acc = CalibrationAccumulator(n_boot=50, seed=3)
    for lo in range(0, 40_000, 9_999):
        acc.update(y[lo:lo + 9_999], p[lo:lo + 9_999])
    streamed = acc.report(ci=0.95)
    assert set(rep.intervals) == {"ece", "esce", "mce", "ecd", "brier", "nll"}
    for k, (lo, hi) in rep.intervals.items():
        assert lo < hi
        np.testing.assert_allclose(streamed.intervals[k], (lo, hi), rtol=1e-10)
    assert rep.ci_level == 0.95
    d = json.loads(rep.to_json())
    assert d["ci"]["level"] == 0.95 and len(d["ci"]["ece"]) == 2
    # no bootstrap: analytic intervals only, binned ones NaN
    no_boot = fastcal.calibration_report(y, p, ci=0.95, n_boot=0, ace=False)
    assert np.isnan(no_boot.intervals["ece"][0]) and np.isfinite(no_boot.intervals["ecd"][0])


def test_mean_interval_matches_t_interval_by_loops():
    y, p = fastcal.simulate(3_000, sigma=1.0, seed=2)
    rep = fastcal.calibration_report(y, p, ci=0.9, n_boot=0, ace=False)
    terms = [(pi - yi) * (math.log(pi) - math.log1p(-pi)) for pi, yi in zip(p.tolist(), y.tolist())]
    mean = sum(terms) / len(terms)
    sd = math.sqrt(sum((t - mean) ** 2 for t in terms) / (len(terms) - 1))
    half = sps.t.ppf(0.95, len(terms) - 1) * sd / math.sqrt(len(terms))
    np.testing.assert_allclose(rep.intervals["ecd"], (mean - half, mean + half), rtol=1e-9)
    brier = [(pi - yi) ** 2 for pi, yi in zip(p.tolist(), y.tolist())]
    mb = sum(brier) / len(brier)
    sb = math.sqrt(sum((t - mb) ** 2 for t in brier) / (len(brier) - 1))
    hb = sps.t.ppf(0.95, len(brier) - 1) * sb / math.sqrt(len(brier))
    np.testing.assert_allclose(rep.intervals["brier"], (mb - hb, mb + hb), rtol=1e-9)


# -- coverage (the requirement) ---------------------------------------

def _load_coverage_example():
    """examples/coverage_table.py as a module (its exact population values and sampler)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "coverage_table.py"
    spec = importlib.util.spec_from_file_location("coverage_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The coverage table of docs/guide/verdict.md, as documented: (setting, sigma, shift) -> metric -> percent.
_COVERAGE_ROWS = (("log-odds shifted by +1", 0.0, 1.0), ("sigma = 0.5", 0.5, 0.0),
                  ("sigma = 0 (calibrated)", 0.0, 0.0))
_COVERAGE_METRICS = ("ece", "esce", "mce", "ecd", "brier", "nll")
_README_SEEDS = 20_000  # the README's table: seeds 0-19,999 of examples/coverage_table.py


def _readme_coverage():
    """The coverage figures of the docs' table (docs/guide/verdict.md, once the README's), parsed from it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "verdict.md").read_text()
    out = {}
    for label, sigma, shift in _COVERAGE_ROWS:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {label}"))
        cells = [c.strip() for c in line.strip().strip("|").split("|")][1:]
        assert len(cells) == len(_COVERAGE_METRICS), line
        out[(sigma, shift)] = {m: float(c.split("+-")[0]) / 100
                               for m, c in zip(_COVERAGE_METRICS, cells)}
    return out


def test_interval_coverage_is_what_the_readme_documents():
    """Coverage of the 95% intervals, on seeds the README's table did not use.

    Same recipe, N = 1,000 rows, B = 200 and exact population values as
    examples/coverage_table.py (whose 20,000 seeds 0-19,999 give the README's
    table). Here 3,000 fresh seeds (100,000-102,999) per setting. Each measured
    coverage must lie within z standard errors of the README's figure c, the
    standard error of the difference of two independent estimates being
    sqrt(c (1 - c) (1/3,000 + 1/20,000)) (about 0.5 points at c = 0.93); z is
    the Bonferroni bound for the 18 comparisons at a family-wise 1%
    (z = 3.45). So the test fails when the intervals change (better or worse)
    and the README is not updated, and it does not hold ECE or MCE to 95%:
    they under-cover, as documented.
    """
    ct = _load_coverage_example()
    seeds = 3_000
    documented = _readme_coverage()
    z = sps.norm.isf(0.01 / (2 * len(documented) * len(_COVERAGE_METRICS)))
    bad = []
    for (sigma, shift), want in documented.items():
        truth = ct.population(sigma, shift)
        hit = dict.fromkeys(_COVERAGE_METRICS, 0)
        for s in range(100_000, 100_000 + seeds):
            y, p = ct.sample(s, 1_000, sigma, shift)
            rep = CalibrationAccumulator(n_boot=200, seed=s, threads=1).update(y, p).report(ci=0.95)
            for m in _COVERAGE_METRICS:
                lo, hi = rep.intervals[m]
                hit[m] += bool(lo <= truth[m] <= hi)
        for m, c in want.items():
            got = hit[m] / seeds
            band = z * math.sqrt(c * (1 - c) * (1 / seeds + 1 / _README_SEEDS))
            if abs(got - c) > band:
                bad.append(f"sigma={sigma} shift={shift} {m}: measured {got:.4f}, README {c:.3f} "
                           f"+- {band:.4f}")
    assert not bad, bad


@pytest.mark.parametrize("name", ["fastcal.reports.stats", "fastcal.reports.plot"])
def test_docstring_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0



# -- the per-bin test: miscalibration in any direction (issue 12, defect 13) ---------

def s_shaped(rng, n, k=0.3, pivot=2.7317):
    """Labels from true log-odds u ~ U(-5, 5); reported log-odds u (1 + k (|u| - pivot)).

    Under-confident for |u| < pivot, over-confident beyond: an S-shaped
    reliability curve whose population ECD is 0 (pivot 2.7317 is the root of
    the ECD integral over u, found numerically): the net test cannot see it.
    """
    u = rng.uniform(-5.0, 5.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-u))).astype(np.uint8)
    return y, 1.0 / (1.0 + np.exp(-u * (1.0 + k * (np.abs(u) - pivot))))


def test_bin_test_matches_a_hand_computed_holm_sidak():
    z = [3.5, -0.4, float("nan"), -2.6, 0.9, -2.9]
    r = stats.bin_test(z, alpha=0.05)
    assert r.n_bins == 5 and r.max_abs_z == 3.5
    p = [2 * normal_sf(abs(x)) for x in (3.5, -0.4, -2.6, 0.9, -2.9)]
    assert r.p_value == pytest.approx(1 - (1 - min(p)) ** 5, rel=1e-12)
    assert r.critical_z == pytest.approx(sps.norm.isf((1 - 0.95 ** (1 / 5)) / 2), rel=1e-12)
    # step-down: 3.5 (p 4.7e-4 < 1 - .95^(1/5) = .0102), 2.9 (p .0037 < .0127),
    # 2.6 (p .0093 < .0170), then 0.9 (p .37 > .0253) stops
    assert r.over_bins == [1] and r.under_bins == [4, 6]
    assert r.verdict == "miscalibrated: over-confident in bin 1, under-confident in bins 4, 6"
    assert stats.bin_test([1.0, -1.5, 0.2]).verdict == "no bin miscalibrated"
    assert stats.bin_test([np.nan, np.nan]).verdict == "undefined (no samples)"
    inf = stats.bin_test([np.inf, 0.1, -3.6, -3.7, -3.8, 0.0])
    assert inf.over_bins == [1] and inf.under_bins == [3, 4, 5] and inf.p_value == 0.0
    assert "under-confident in bins 3-5" in inf.verdict
    with pytest.raises(ValueError, match="alpha must be"):
        stats.bin_test([1.0], alpha=1.5)


def test_bin_test_size_under_calibration_is_alpha_over_2000_seeds():
    """sigma = 0, N = 10,000, 10 bins: the family-wise rejection rate is 5% +/- 1.5%."""
    rng = np.random.default_rng(20240502)
    rejected = 0
    for _ in range(8):
        y, p = paper_sim(rng, 250, 10_000, 0.0)
        for s in range(250):
            rep = CalibrationAccumulator().update(y[s], p[s]).report()
            rejected += rep.bin_test().verdict != "no bin miscalibrated"
    assert abs(rejected / 2000 - 0.05) <= 0.015, rejected


def test_bin_test_finds_an_s_shape_that_the_net_ecd_test_misses():
    rng = np.random.default_rng(5)
    net = per_bin = outer_over = middle_under = 0
    for _ in range(200):
        rep = CalibrationAccumulator().update(*s_shaped(rng, 10_000)).report()
        b = rep.bin_test()
        net += rep.net_verdict != "consistent with calibration"
        per_bin += b.verdict.startswith("miscalibrated")
        outer_over += b.over_bins == [1, 10]
        middle_under += set(b.under_bins) >= {3, 4, 7, 8}
    assert net <= 60  # the net test mostly misses it (the complaint)
    assert per_bin >= 196 and outer_over >= 180 and middle_under >= 180


def test_every_report_carries_both_verdicts():
    rng = np.random.default_rng(6)
    rep = fastcal.calibration_report(*s_shaped(rng, 200_000), ace=False)
    c = rep.bins["count"]
    want = (f"no net over- or under-confidence; miscalibrated: over-confident in bins "
            f"1 ({c[0]:,} rows), 10 ({c[9]:,} rows), under-confident in bins 2-9 "
            f"({c[1:9].sum():,} rows)")
    assert rep.net_verdict == "consistent with calibration"  # the net test alone
    # issue 23, item 9: the verdict a user reads first carries both tests
    assert rep.verdict == "miscalibrated"
    assert rep.overall_verdict == want
    d = json.loads(rep.to_json())
    assert d["verdict"] == "miscalibrated" and d["overall_verdict"] == want
    assert d["ecd_test"]["verdict"] == "consistent with calibration"
    assert d["bin_test"]["over_bins"] == [1, 10] and d["bin_test"]["under_bins"] == list(range(2, 10))
    assert d["bin_test"]["p_value"] < 1e-10 and d["bin_test"]["n_bins"] == 10
    md = rep.to_markdown()
    assert md.rstrip().endswith(f"Verdict: miscalibrated ({want})")
    assert "Per-bin test (max |z| = " in md


def test_combined_verdict_reads_both_tests():
    """Issue 23, item 9: one answer from the net test and the flagged bins."""
    def bins(over, under):
        return stats.BinTestResult(3, 5.0, 0.0, 2.4, over, under, "", 0.05)

    cv = stats.combined_verdict
    assert cv(stats.CONSISTENT, bins([], [])) == stats.CONSISTENT
    assert cv(stats.OVER, bins([], [])) == stats.OVER
    assert cv(stats.OVER, bins([1], [])) == stats.OVER
    assert cv(stats.CONSISTENT, bins([], [2])) == stats.UNDER
    assert cv(stats.UNDER, bins([3], [])) == stats.MISCALIBRATED
    assert cv(stats.CONSISTENT, bins([1], [2])) == stats.MISCALIBRATED
    assert cv("undefined (no samples)", bins([], [])) == "undefined (no samples)"


def test_max_abs_z_is_the_largest_when_p_values_underflow():
    """Issue 23, item 10: |z| above ~38 gives p = 0 in several bins; max |z| is still the max."""
    r = stats.bin_test([50.02, -55.31, 1.0, 420.38])
    assert r.max_abs_z == 420.38 and r.p_value == 0.0
    assert r.over_bins == [1, 4] and r.under_bins == [2]
    # the same through a report: attribute, JSON and text agree with the table
    y = np.r_[np.ones(2), np.arange(40) % 2, np.zeros(30)].astype(np.uint8)
    p = np.r_[np.full(2, 0.001), np.full(40, 0.5), np.full(30, 0.998)]  # z 44.7, 0, 122.4
    rep = fastcal.calibration_report(y, p, n_bins=10, ace=False)
    z = rep.bins["ecd_z"]
    want = float(np.nanmax(np.abs(z)))
    assert np.sum(np.abs(z) > 40) == 2 and abs(z[0]) != want
    assert rep.bin_test().max_abs_z == want
    assert json.loads(rep.to_json())["bin_test"]["max_abs_z"] == want
    assert f"max |z| = {want:.2f} over" in rep.to_markdown()


def test_verdicts_that_name_bins_give_their_rows_and_a_caution_when_few():
    """Issue 23, item 20: 3 of 450 rows must not read like a whole bin of evidence."""
    y = np.r_[np.ones(3), np.arange(447) % 2].astype(np.uint8)
    p = np.r_[np.full(3, 0.01), np.full(447, 0.5)]  # logit(0.5) = 0: bin 6 has z = 0
    rep = fastcal.calibration_report(y, p, n_bins=10, ace=False)
    b = rep.bin_test()
    assert b.over_bins == [1] and b.few_rows == [1] and stats.MIN_BIN_ROWS == 200
    assert b.verdict == ("miscalibrated: over-confident in bin 1 (3 rows) (caution: bin 1 holds "
                         "fewer than 200 rows, where a bin's z is a rough normal approximation)")
    assert rep.verdict == "over-confident" and b.verdict in rep.overall_verdict
    assert json.loads(rep.to_json())["bin_test"]["few_rows"] == [1]
    # enough rows: the count, no caution; without counts the verdict is as before
    big = stats.bin_test([5.0, 0.1], counts=[250, 30])
    assert big.verdict == "miscalibrated: over-confident in bin 1 (250 rows)" and not big.few_rows
    assert stats.bin_test([5.0, 0.1]).verdict == "miscalibrated: over-confident in bin 1"


# -- intervals respect each metric's range (issue 12, defect 15) ------------------

def test_ci_with_quantile_bins_is_refused_in_one_line_everywhere(tmp_path, capsys):
    """Issue 23, item 11: it gave NaN intervals for ECE, ESCE and MCE without a word."""
    from fastcal.cli import main

    y, p = fastcal.simulate(500, sigma=0.5, seed=3)
    want = "ci cannot be combined with strategy='quantile'"
    with pytest.raises(ValueError, match=want):
        fastcal.calibration_report(y, p, strategy="quantile", ci=0.95)
    csv = tmp_path / "d.csv"
    csv.write_text("p,y\n" + "".join(f"{a!r},{b}\n" for a, b in zip(p, y)))
    with pytest.raises(ValueError, match=want):
        fastcal.score_file(str(csv), prob="p", label="y", strategy="quantile", ci=0.9)
    code = main(["score", str(csv), "--prob", "p", "--label", "y", "--strategy", "quantile",
                 "--ci", "0.95"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--strategy quantile" in err and "--strategy uniform" in err
    # uniform bins still give every interval
    r = fastcal.calibration_report(y, p, ci=0.95)
    assert all(np.isfinite(r.intervals[k]).all() for k in ("ece", "esce", "mce", "ecd"))


def test_intervals_stay_inside_each_metrics_range():
    lows = []
    for s in range(20):  # near calibration, small n: raw MCE / ECE lower ends go below 0
        y, p = fastcal.simulate(300, seed=s)
        rep = fastcal.calibration_report(y, p, ci=0.95, n_boot=200, seed=s, ace=False)
        for k, (lo, hi) in rep.intervals.items():
            a, b = stats.RANGES[k]
            assert a <= lo <= hi <= b, (s, k, lo, hi)
        lows.append(rep.intervals["mce"][0])
        # the raw basic interval is what was clipped, and it did go negative somewhere
    assert min(lows) == 0.0
    # Brier and NLL t-intervals of a nearly perfect model with one bad miss
    y = np.ones(50, np.uint8)
    p = np.full(50, 0.99)
    p[0] = 0.01
    rep = fastcal.calibration_report(y, p, ci=0.95, n_boot=0, ace=False)
    raw = stats.mean_interval(rep.sums["sum_brier"], rep.sums["sum_brier_sq"], 50, 0.95)
    assert raw[0] < 0  # what the unclipped t-interval gives
    assert rep.intervals["brier"] == (0.0, pytest.approx(raw[1], rel=1e-12))
    assert rep.intervals["nll"][0] >= 0.0 and rep.intervals["ecd"][0] >= stats.ECD_MIN
    # K classes: Brier may reach 2, and the range is applied there too
    yk = np.array([0, 1, 2] * 20)
    pk = np.tile([[0.98, 0.01, 0.01], [0.01, 0.98, 0.01], [0.01, 0.01, 0.98]], (20, 1))
    pk[0] = [0.01, 0.98, 0.01]
    mrep = fastcal.calibration_report(yk, pk, ci=0.95, n_boot=50, ace=False)
    assert mrep.intervals["brier"][0] == 0.0 and not mrep.intervals["mce"][0] < 0.0


def test_clip_interval_never_drops_an_in_range_value():
    assert stats.clip_interval((-0.1275, 0.3653), (0.0, 1.0)) == (0.0, 0.3653)
    assert stats.clip_interval((-0.3, -0.1), (0.0, 1.0)) == (0.0, 0.0)
    assert stats.clip_interval((0.2, 1.4), (0.0, 1.0)) == (0.2, 1.0)
    lo, hi = stats.clip_interval((float("nan"), float("nan")), (0.0, 1.0))
    assert math.isnan(lo) and math.isnan(hi)
    assert stats.ECD_MIN == pytest.approx(min((q - 1) * math.log(q / (1 - q))
                                              for q in np.linspace(0.5, 0.99, 200_001)), abs=1e-12)


# -- certain and wrong predictions (issue 12, defect 16) ----------------------------

def test_certain_and_wrong_rows_are_counted_with_global_rows_from_every_source(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    y, p = fastcal.simulate(5_000, seed=3)
    p[[1700, 2600, 4900]] = [0.0, 1.0, 1.0]
    y[[1700, 2600, 4900]] = [1, 0, 1]  # row 4900 is certain and right
    rep = fastcal.calibration_report(y, p, ace=False, threads=2)
    assert (rep.n_certain_wrong, rep.first_certain_wrong_row) == (2, 1700)
    f = tmp_path / "cw.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, row_group_size=1000)
    got = fastcal.score_file(f, chunk_rows=512)
    assert (got.n_certain_wrong, got.first_certain_wrong_row) == (2, 1700)


def test_report_says_rows_are_certain_and_wrong_and_how_to_get_a_finite_score():
    y = np.array([1, 0, 1, 0, 1, 1])
    p = np.array([0.0, 1.0, 0.7, 0.2, 0.9, 1.0])
    rep = fastcal.calibration_report(y, p, n_bins=5, ace=False)
    assert math.isinf(rep.ecd) and math.isinf(rep.nll) and math.isinf(rep.ecd_z)
    # the driver counts them (one light pass, only when a bin's ECD is +inf)
    assert rep.certain_wrong_bins == [1, 5] and rep.n_certain_wrong == 2
    assert rep.first_certain_wrong_row == 0 and rep.passes == 2
    note = rep.certain_wrong_note()
    assert note.startswith("2 rows are certain and wrong (first at row 0) in bins 1, 5")
    assert "--eps" in note and "eps=" in note
    assert note in rep.to_markdown()
    d = json.loads(rep.to_json())
    assert d["certain_wrong"]["bins"] == [1, 5] and d["certain_wrong"]["n"] == 2
    # a state alone knows only that there is one
    alone = fastcal.CalibrationAccumulator(n_bins=5).update(y, p).report()
    assert alone.n_certain_wrong is None
    assert alone.certain_wrong_note().startswith("At least one row is certain and wrong in bins 1, 5")
    from fastcal.reports.report import count_certain_wrong

    assert count_certain_wrong(y, p, start=100) == (2, 100)
    # with eps the score is finite and nothing is counted
    clipped = fastcal.calibration_report(y, p, n_bins=5, ace=False, eps=1e-6)
    assert math.isfinite(clipped.ecd) and clipped.n_certain_wrong is None and clipped.passes == 1
    # the accumulator can hand its own counter to from_state (-1: none)
    from fastcal.reports.report import CalibrationReport

    c = np.array([[1, 1, 0], [1, 0, 0]])
    s = np.array([[0.0, np.inf, 0.0], [1.0, np.inf, 0.0]])
    t = np.array([1.0, np.inf, np.inf, 1.0, np.inf])
    r2 = CalibrationReport.from_state(c, s, t, edges=np.array([0.0, 0.5, 1.0]), closed="left",
                                      n_omitted=0, n_certain_wrong=2, first_certain_wrong_row=5)
    assert r2.certain_wrong_note().startswith("2 rows are certain and wrong (first at row 5)")
    # eps gives a finite score and no note; a certain and right prediction is no fault
    assert fastcal.calibration_report(y, p, n_bins=5, ace=False, eps=1e-6).certain_wrong_note() == ""
    ok = fastcal.calibration_report([0, 1, 1], [0.0, 1.0, 0.6], n_bins=5, ace=False)
    assert ok.certain_wrong_note() == "" and "certain_wrong" not in ok.to_dict()


def test_bin_test_of_all_zero_z_has_p_value_one_without_a_warning():
    # every bin exactly at its expectation (rows of equal probabilities): p = 1, no
    # "divide by zero" from log1p(-1) (warnings are errors in the suite)
    from fastcal.reports.stats import bin_test

    r = bin_test([0.0, 0.0, float("nan")])
    assert r.p_value == 1.0 and r.over_bins == [] and r.under_bins == []

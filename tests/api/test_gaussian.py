"""Tests for fastcal.gaussian: NEES, Gaussian ECD (Sumler et al., eq. 10-11), bands, accumulator."""

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st
import numba
import numpy as np
import pytest
from scipy import stats

from fastcal.gaussian import (
    GaussianAccumulator,
    anees_bounds,
    ecd_bounds,
    gaussian_ecd,
    nees,
)


# ---------------------------------------------------------------- naive references
def naive_nees(e, C):
    """Obviously-correct NEES: invert C by Gauss-Jordan with loops, then e^T C^-1 e."""
    d = len(e)
    a = [[float(C[i][j]) for j in range(d)] + [1.0 if i == j else 0.0 for j in range(d)] for i in range(d)]
    for col in range(d):
        piv = max(range(col, d), key=lambda r: abs(a[r][col]))
        a[col], a[piv] = a[piv], a[col]
        p = a[col][col]
        a[col] = [v / p for v in a[col]]
        for r in range(d):
            if r != col:
                f = a[r][col]
                a[r] = [vr - f * vc for vr, vc in zip(a[r], a[col])]
    inv = [row[d:] for row in a]
    total = 0.0
    for i in range(d):
        for j in range(d):
            total += e[i] * inv[i][j] * e[j]
    return total


def random_spd(rng, shape, d):
    a = rng.normal(size=shape + (d, d))
    c = a @ np.swapaxes(a, -1, -2) + 0.1 * np.eye(d)
    return 0.5 * (c + np.swapaxes(c, -1, -2))


# ---------------------------------------------------------------- NEES kernel
@pytest.mark.parametrize("d", [1, 2, 4, 7])
def test_nees_matches_naive_loop_reference(d):
    rng = np.random.default_rng(d)
    covs = random_spd(rng, (3, 5), d)
    errors = rng.normal(size=(3, 5, d))
    got = nees(errors, covs)
    assert got.shape == (3, 5)
    for i in range(3):
        for j in range(5):
            assert got[i, j] == pytest.approx(naive_nees(errors[i, j], covs[i, j]), rel=1e-10)


def test_nees_hand_picked_edges():
    assert nees([0.0, 0.0], np.eye(2)) == 0.0
    assert nees([3.0], [[9.0]]) == pytest.approx(1.0, rel=1e-15)
    assert nees([1.0, 2.0], np.diag([1.0, 4.0])) == pytest.approx(2.0, rel=1e-15)
    # Strongly correlated but still SPD.
    c = np.array([[1.0, 0.999], [0.999, 1.0]])
    e = np.array([1.0, -1.0])
    assert nees(e, c) == pytest.approx(e @ np.linalg.solve(c, e), rel=1e-10)
    # Empty batch keeps its shape.
    assert nees(np.zeros((0, 3)), np.zeros((0, 3, 3))).shape == (0,)


def test_nees_does_not_depend_on_thread_count():
    rng = np.random.default_rng(1)
    covs = random_spd(rng, (101,), 3)
    errors = rng.normal(size=(101, 3))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = nees(errors, covs)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, nees(errors, covs))


def test_gaussian_ecd_is_half_anees_minus_half_d():
    rng = np.random.default_rng(2)
    covs = random_spd(rng, (40,), 4)
    errors = rng.normal(size=(40, 4))
    values = [naive_nees(e, c) for e, c in zip(errors, covs)]
    expected = float(np.mean([0.5 * v - 2.0 for v in values]))  # eq. 10
    assert gaussian_ecd(errors, covs) == pytest.approx(expected, rel=1e-12)


def test_seed000_consistent_gaussian_has_ecd_zero_and_nees_d():
    # Seed 000, section IV-B: a consistent Gaussian estimator has mean NEES d and ECD 0.
    rng = np.random.default_rng(3)
    d, n = 3, 200_000
    covs = random_spd(rng, (1,), d)[0]
    errors = rng.multivariate_normal(np.zeros(d), covs, size=n)
    values = nees(errors, np.broadcast_to(covs, (n, d, d)))
    assert values.mean() == pytest.approx(d, abs=0.03)
    assert gaussian_ecd(errors, np.broadcast_to(covs, (n, d, d))) == pytest.approx(0.0, abs=0.015)


# ---------------------------------------------------------------- accumulator
@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 60), max_size=4), reverse=st.booleans())
def test_accumulator_merge_is_invariant_to_chunking_and_order(cuts, reverse):
    rng = np.random.default_rng(4)
    errors = rng.normal(size=(60, 5, 2))
    covs = random_spd(rng, (60, 5), 2)
    whole = GaussianAccumulator(2, shape=(5,)).update(errors, covs)
    bounds = [0] + sorted(cuts) + [60]
    parts = [GaussianAccumulator(2, shape=(5,)).update(errors[a:b], covs[a:b]) for a, b in zip(bounds, bounds[1:])]
    if reverse:
        parts = parts[::-1]
    merged = GaussianAccumulator(2, shape=(5,))
    for p in parts:
        merged += p
    np.testing.assert_array_equal(merged.count, whole.count)
    np.testing.assert_allclose(merged.nees_sum, whole.nees_sum, rtol=1e-12)
    summed = parts[0]
    for p in parts[1:]:
        summed = summed + p
    np.testing.assert_allclose(summed.result().anees, whole.result().anees, rtol=1e-12)


def test_accumulator_result_pickle_and_empty_bins():
    rng = np.random.default_rng(5)
    errors = rng.normal(size=(10, 4, 3))
    covs = random_spd(rng, (10, 4), 3)
    acc = GaussianAccumulator(3, shape=(4,)).update(errors, covs)
    res = acc.result()
    expected = nees(errors, covs).mean(axis=0)
    np.testing.assert_allclose(res.anees, expected, rtol=1e-13)
    np.testing.assert_allclose(res.ecd, 0.5 * expected - 1.5, rtol=1e-13)
    np.testing.assert_array_equal(res.count, [10, 10, 10, 10])
    clone = pickle.loads(pickle.dumps(acc))
    np.testing.assert_array_equal(clone.nees_sum, acc.nees_sum)
    empty = GaussianAccumulator(3, shape=(4,)).result()
    assert empty.count.tolist() == [0, 0, 0, 0]
    assert np.isnan(empty.anees).all() and np.isnan(empty.ecd).all()


def test_accumulator_is_one_mergeable_family():
    # sum(), copy(), += and report() as on the calibration accumulators
    rng = np.random.default_rng(6)
    errors = rng.normal(size=(9, 3, 2))
    covs = random_spd(rng, (9, 3), 2)
    parts = [GaussianAccumulator(2, shape=(3,)).update(errors[i:i + 3], covs[i:i + 3])
             for i in (0, 3, 6)]
    whole = GaussianAccumulator(2, shape=(3,)).update(errors, covs)
    total = sum(parts)
    assert total is not parts[0]
    np.testing.assert_array_equal(total.count, whole.count)
    np.testing.assert_allclose(total.report().anees, whole.report().anees, rtol=1e-12)
    np.testing.assert_array_equal(total.report().anees, total.result().anees)
    clone = parts[0].copy()
    clone += parts[1]
    np.testing.assert_array_equal(parts[0].count, [3, 3, 3])  # the copy is independent
    np.testing.assert_array_equal(clone.count, [6, 6, 6])
    with pytest.raises(TypeError, match="can only merge a GaussianAccumulator"):
        parts[0] + 1
    with pytest.raises(ValueError, match="expected equal dim and shape"):
        parts[0] + GaussianAccumulator(3, shape=(3,))


def test_nan_policies():
    errors = np.array([[1.0, 0.0], [np.nan, 0.0], [0.0, 2.0]])
    covs = np.broadcast_to(np.eye(2), (3, 2, 2))
    with pytest.raises(ValueError, match=r"errors contains NaN or inf in 1 of 3 entries \(first at index \[1\]\)"):
        nees(errors, covs)
    prop = nees(errors, covs, nan_policy="propagate")
    assert prop[0] == 1.0 and np.isnan(prop[1]) and prop[2] == 4.0
    assert gaussian_ecd(errors, covs, nan_policy="omit") == pytest.approx(0.5 * 2.5 - 1.0)
    assert np.isnan(gaussian_ecd(errors, covs, nan_policy="propagate"))
    acc = GaussianAccumulator(2).update(errors, covs, nan_policy="omit")
    assert acc.result().count == 2
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        nees(errors, covs, nan_policy="omit")


# ---------------------------------------------------------------- bands
@pytest.mark.parametrize("runs,dim,alpha", [(2, 1, 0.05), (50, 4, 0.05), (100, 2, 0.01), (1000, 4, 0.1)])
def test_bands_equal_scipy_chi2(runs, dim, alpha):
    lo, hi = anees_bounds(runs, dim, alpha=alpha)
    assert lo == stats.chi2.ppf(alpha / 2, runs * dim) / runs
    assert hi == stats.chi2.ppf(1 - alpha / 2, runs * dim) / runs
    elo, ehi = ecd_bounds(runs, dim, alpha=alpha)
    # 2R(ECD + d/2) ~ chi2_{R d}
    assert 2 * runs * (elo + dim / 2) == pytest.approx(stats.chi2.ppf(alpha / 2, runs * dim), rel=1e-14)
    assert 2 * runs * (ehi + dim / 2) == pytest.approx(stats.chi2.ppf(1 - alpha / 2, runs * dim), rel=1e-14)


# ---------------------------------------------------------------- bad input
def test_bad_inputs_name_the_argument():
    eye = np.broadcast_to(np.eye(2), (3, 2, 2)).copy()
    with pytest.raises(ValueError, match=r"covs has shape \(3, 2, 2\) but errors has shape \(3, 3\)"):
        nees(np.zeros((3, 3)), eye)
    bad = eye.copy()
    bad[2] = [[1.0, 2.0], [2.0, 1.0]]  # symmetric, eigenvalues 3 and -1
    with pytest.raises(ValueError, match=r"covs\[2\] is not positive definite"):
        nees(np.zeros((3, 2)), bad)
    asym = eye.copy()
    asym[1, 0, 1] = 0.5
    with pytest.raises(ValueError, match=r"covs\[1\] is not symmetric"):
        nees(np.zeros((3, 2)), asym)
    grid = np.broadcast_to(np.eye(2), (1, 2, 2, 2)).copy()
    grid[0, 1] = 0.0
    with pytest.raises(ValueError, match=r"covs\[0, 1\] is not positive definite"):
        nees(np.zeros((1, 2, 2)), grid)
    with pytest.raises(ValueError, match="covs contains NaN"):
        nees(np.zeros(2), np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="runs must be an integer >= 2"):
        anees_bounds(1, 4)
    with pytest.raises(ValueError, match="runs must be an integer >= 2"):
        ecd_bounds(1, 4)
    with pytest.raises(ValueError, match="alpha must be a number in"):
        anees_bounds(10, 4, alpha=1.5)
    with pytest.raises(ValueError, match="dim must be an integer >= 1"):
        GaussianAccumulator(0)
    with pytest.raises(ValueError, match="this accumulator expects dim=3"):
        GaussianAccumulator(3).update(np.zeros((1, 2)), eye[:1])
    with pytest.raises(ValueError, match="accumulator shape"):
        GaussianAccumulator(2, shape=(4,)).update(np.zeros((1, 3, 2)), np.zeros((1, 3, 2, 2)))
    with pytest.raises(ValueError, match="cannot merge"):
        GaussianAccumulator(2) + GaussianAccumulator(3)

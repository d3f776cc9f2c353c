"""The binary fill kernel and its logarithms against plain float64 loop references.

The references are tests/naive.py's loops (bin by linear scan over the
edges, ECD / variance / NLL terms from math.log and math.log1p). The kernel
is called directly, so these tests pin its state layout: counts (n,
positives, correct), sums (p, ECD term, variance term), totals (Brier, NLL,
ECD^2, Brier^2, NLL^2, p^2, p*y) and the invalid-input checks with first indices.
"""

import math

from numba import njit
import numpy as np
import pytest

from fastcal._kernels import binary as kb
from fastcal._kernels import equal_mass as kem
from fastcal._kernels._config import FASTMATH_EXACT, FLUSH
from fastcal._kernels.mathfn import log1m, log64, log_pair, search_sorted
from fastcal.inputs.binning import uniform_edges
from fastcal.inputs.validation import kernel_view
from tests import naive


def reference_fill(p, y, edges, closed, eps):
    """State of the kernel computed by loops in float64 (valid rows only)."""
    nb = len(edges) - 1
    counts = np.zeros((nb, 3), np.int64)
    sums = np.zeros((nb, 3))
    scale = np.zeros((nb, 3))  # sums of |terms|: the size of the rounding to expect
    totals = np.zeros(7)
    tscale = np.zeros(7)
    for pi, yi in zip(np.asarray(p, np.float64).tolist(), np.asarray(y).tolist()):
        b = naive.bin_of(pi, edges, closed)
        yi = int(yi)
        q = min(max(pi, eps), 1.0 - eps)
        e = naive.ecd_term(q, yi)
        v = naive.var_term(q)
        nll = naive.nll_term(q, yi)
        br = (pi - yi) ** 2
        counts[b] += (1, yi, int((pi > 0.5) == (yi == 1)))
        sums[b] += (pi, e, v)
        scale[b] += (abs(pi), abs(e), abs(v))
        terms = (br, nll, e * e, br * br, nll * nll, pi * pi, pi * yi)
        totals += terms
        tscale += np.abs(terms)
    return counts, sums, scale, totals, tscale


def run_kernel(p, y, n_bins, closed, eps, threads, edges=None, omit=False, fine=0):
    """The kernel's state; with ``fine`` value buckets (ACE's, filled in the
    same pass through the joint table) also checks those buckets against
    ``equal_mass.bucket_stats``, a separate plain loop. The kernels read the
    arrays as the gate hands them over (read-only views: the type a report
    compiles; a writable array would compile each kernel once more)."""
    p, y = kernel_view(p), kernel_view(y)
    if edges is None:
        kedges, uniform = uniform_edges(n_bins, p.dtype), True
    else:
        kedges, uniform = np.asarray(edges, np.float64), False
    right = closed == "right"
    if threads == 0:  # the serial entry point
        counts, sums, totals, checks = kb.new_state(kedges.shape[0] - 1)
        if not fine:
            kb.fill_range(p, y, 0, p.shape[0], kedges, uniform, right, omit, eps, True,
                          counts, sums, totals, checks)
            return counts, sums, totals, checks
        fc = np.zeros((fine + 1, kb.N_COUNTS), np.int64)
        fp = np.zeros(fine + 1)
        kb.fill_range_fine(p, y, 0, p.shape[0], kedges, uniform, right, omit, eps, True,
                           counts, sums, totals, checks, fc, fp)
    elif not fine:
        return kb.fill_parallel(p, y, kedges, uniform, right, omit, eps, True, threads)
    else:
        counts, sums, totals, checks, fc, fp = kb.fill_parallel_fine(
            p, y, kedges, uniform, right, omit, eps, True, threads, fine)
    want_c = np.zeros((fine + 1, kb.N_COUNTS), np.int64)
    want_p = np.zeros(fine + 1)
    kem.bucket_stats(p, y, omit, want_c, want_p)
    np.testing.assert_array_equal(fc[:fine], want_c[:fine])
    np.testing.assert_allclose(fp[:fine], want_p[:fine], rtol=1e-12, atol=1e-300)
    assert fc[fine, 0] == counts[-1, 0]  # invalid rows: both trash rows
    return counts, sums, totals, checks


# ACE's value buckets off, fewer than the bins, and the default for many rows
FINE = [0, 8, 1 << 14]


def assert_state_matches(got, ref, rtol=1e-12):
    counts, sums, totals, _ = got
    rcounts, rsums, rscale, rtotals, rtscale = ref
    nb = rcounts.shape[0]
    np.testing.assert_array_equal(counts[:nb], rcounts)
    sums = sums[:nb]
    finite = np.isfinite(rsums)
    np.testing.assert_array_equal(np.isfinite(sums), finite)
    np.testing.assert_array_equal(sums[~finite], rsums[~finite])
    assert np.all(np.abs(sums[finite] - rsums[finite]) <= rtol * rscale[finite] + 1e-300)
    tfinite = np.isfinite(rtotals)
    np.testing.assert_array_equal(np.isfinite(totals), tfinite)
    assert np.all(np.abs(totals[tfinite] - rtotals[tfinite]) <= rtol * rtscale[tfinite] + 1e-300)


def simulated(n, dtype, seed):
    rng = np.random.default_rng(seed)
    u = rng.uniform(-6, 6, n)
    p = (1 / (1 + np.exp(-(u + rng.normal(0, 0.5, n))))).astype(dtype)
    y = (rng.random(n) < 1 / (1 + np.exp(-u))).astype(np.uint8)
    return p, y


# -- seeded random data -------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("eps", [0.0, 1e-3])
@pytest.mark.parametrize("fine", FINE)
def test_random_data_matches_reference(dtype, closed, eps, fine):
    p, y = simulated(3001, dtype, seed=7)
    p[:4] = [0.0, 1.0, 0.0, 1.0]  # ECD limits 0 (p == y) and +inf (p == 1 - y) unless eps
    y[:4] = [0, 1, 1, 0]
    ref = reference_fill(p, y, naive.uniform_edges(15, dtype), closed, eps)
    for threads in (0, 1, 2):
        assert_state_matches(run_kernel(p, y, 15, closed, eps, threads, fine=fine), ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fine", FINE)
def test_explicit_edges_match_reference(dtype, fine):
    p, y = simulated(2000, dtype, seed=3)
    edges = [0.0, 0.05, 0.3, 0.3000001, 0.5, 0.9, 1.0]
    p[:6] = np.asarray(edges[:6], dtype)  # on the edges
    for closed in ("left", "right"):
        ref = reference_fill(p, y, [float(e) for e in edges], closed, 0.0)
        for threads in (0, 2):
            got = run_kernel(p, y, None, closed, 0.0, threads, edges=edges, fine=fine)
            assert_state_matches(got, ref)


@pytest.mark.parametrize("label_dtype", [np.bool_, np.float64])
def test_label_dtypes(label_dtype):
    p, y = simulated(500, np.float64, seed=11)
    ref = reference_fill(p, y, naive.uniform_edges(10, np.float64), "left", 0.0)
    yy = y.astype(label_dtype)
    if label_dtype is np.bool_:
        yy = yy.view(np.uint8)
    assert_state_matches(run_kernel(p, yy, 10, "left", 0.0, 2), ref)


# -- edges ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("fine", FINE)
def test_every_edge_of_every_n_bins(dtype, closed, fine):
    """p on every edge k/n (in p's dtype) and one ulp either side, n = 1..100."""
    for n in range(1, 101):
        edges = naive.uniform_edges(n, dtype)
        e = np.asarray(edges, dtype)
        p = np.concatenate([e, np.nextafter(e, dtype(2)), np.nextafter(e, dtype(-1))])
        p = np.clip(p, 0, 1).astype(dtype)
        y = (np.arange(p.shape[0]) % 2).astype(np.uint8)
        counts, sums, _, _ = run_kernel(p, y, n, closed, 0.0, 0, fine=fine)
        want = np.zeros(n, np.int64)
        want_p = np.zeros(n)
        for pi in p.astype(np.float64).tolist():
            b = naive.bin_of(pi, edges, closed)
            want[b] += 1
            want_p[b] += pi
        np.testing.assert_array_equal(counts[:n, 0], want, err_msg=f"n_bins={n}")
        np.testing.assert_allclose(sums[:n, 0], want_p, rtol=1e-12, atol=0, err_msg=f"n_bins={n}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_many_bins_and_empty_bins(dtype):
    rng = np.random.default_rng(5)
    p = rng.uniform(0.2, 0.4, 4000).astype(dtype)  # most of the 1000 bins stay empty
    p[:101] = np.asarray(naive.uniform_edges(1000, dtype), dtype)[::10]  # every 10th edge
    y = (rng.random(p.shape[0]) < p).astype(np.uint8)
    counts, sums, _, _ = run_kernel(p, y, 1000, "left", 0.0, 2)
    edges = np.asarray(naive.uniform_edges(1000, dtype))
    # bin by binary search over the same edges (checked against bin_of above)
    b = np.minimum(np.searchsorted(edges, p.astype(np.float64), side="right") - 1, 999)
    np.testing.assert_array_equal(counts[:1000, 0], np.bincount(b, minlength=1000))
    empty = counts[:1000, 0] == 0
    assert empty.sum() > 500
    assert np.all(sums[:1000][empty] == 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_more_bins_than_direct_min_match_reference(dtype):
    """Past DIRECT_MIN bins the block goes straight into the output (no
    interleaved copies); the state, invalid rows and the fused value buckets
    are the same as the reference's."""
    n_bins = kb.DIRECT_MIN + 3
    p, y = simulated(6000, dtype, seed=11)
    p[:4] = [0.0, 1.0, 0.0, 1.0]
    y[:4] = [0, 1, 1, 0]
    ref = reference_fill(p, y, naive.uniform_edges(n_bins, dtype), "left", 0.0)
    for threads in (0, 2):
        assert_state_matches(run_kernel(p, y, n_bins, "left", 0.0, threads), ref)
    # with an invalid row and the fused value buckets of ACE
    p[10], y[11] = np.nan, 1
    kedges = uniform_edges(n_bins, p.dtype)
    counts, sums, totals, checks = kb.new_state(n_bins)
    fc = np.zeros(((1 << 10) + 1, 3), np.int64)
    fp = np.zeros((1 << 10) + 1)
    kb.fill_range_fine(p, y, 0, p.shape[0], kedges, True, False, True, 0.0, True,
                       counts, sums, totals, checks, fc, fp)
    assert checks[kb.CHECK_NAN_P] == 1 and checks[kb.N_CHECK_KINDS + kb.CHECK_NAN_P] == 10
    assert counts[n_bins, 0] == 1  # the trash row
    keep = ~np.isnan(p)
    want = np.bincount(np.minimum((p[keep].astype(np.float64) * 1024).astype(np.int64), 1023),
                       minlength=1024)
    np.testing.assert_array_equal(fc[:1024, 0], want)
    assert counts[:n_bins, 0].sum() == keep.sum()


@pytest.mark.parametrize("fine", FINE)
def test_packed_counters_across_flushes(fine):
    """Counts packed three to a word stay exact over several flushes."""
    n = 2 * FLUSH + 4097
    p = np.full(n, 0.9, np.float32)
    y = np.ones(n, np.uint8)
    p[-3:] = 0.1
    y[-1] = 0
    for threads in (0, 2):
        counts, _, _, _ = run_kernel(p, y, 10, "left", 0.0, threads, fine=fine)
        assert counts[9].tolist() == [n - 3, n - 3, n - 3]
        assert counts[1].tolist() == [3, 2, 1]


# -- invalid input -----------------------------------------------------------

@pytest.mark.parametrize("fine", FINE)
def test_invalid_values_counted_with_first_index(fine):
    n = 5000
    p, y = simulated(n, np.float64, seed=2)
    yf = y.astype(np.float64)
    p[[4100, 3000, 4500]] = np.nan
    p[[2600, 4700]] = [1.5, -np.inf]
    yf[[3500, 2700]] = [2.0, -1.0]
    yf[[4800, 4900]] = np.nan
    p[4900] = np.nan  # both NaN: omitted once
    good = np.ones(n, bool)
    good[[4100, 3000, 4500, 2600, 4700, 3500, 2700, 4800, 4900]] = False
    ref = reference_fill(p[good], yf[good], naive.uniform_edges(10, np.float64), "left", 0.0)
    for threads in (0, 1, 2):
        for omit in (False, True):
            counts, sums, totals, checks = run_kernel(p, yf, 10, "left", 0.0, threads,
                                                      omit=omit, fine=fine)
            assert_state_matches((counts, sums, totals, checks), ref)
            k = kb.N_CHECK_KINDS
            assert checks[kb.CHECK_NAN_P] == 4 and checks[k + kb.CHECK_NAN_P] == 3000
            assert checks[kb.CHECK_RANGE_P] == 2 and checks[k + kb.CHECK_RANGE_P] == 2600
            assert checks[kb.CHECK_BAD_Y] == 2 and checks[k + kb.CHECK_BAD_Y] == 2700
            assert checks[kb.CHECK_NAN_Y] == 2 and checks[k + kb.CHECK_NAN_Y] == 4800
            assert checks[kb.CHECK_OMITTED] == 5 and checks[k + kb.CHECK_OMITTED] == 3000


def test_clean_input_has_no_checks():
    p, y = simulated(2000, np.float32, seed=4)
    _, _, _, checks = run_kernel(p, y, 10, "left", 0.0, 2)
    assert checks[: kb.N_CHECK_KINDS].tolist() == [0] * kb.N_CHECK_KINDS
    assert checks[kb.N_CHECK_KINDS:].tolist() == [-1] * kb.N_CHECK_KINDS


# -- limits, eps, threads ----------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ecd_limits_and_eps(dtype):
    p = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 0.5], dtype)
    y = np.array([0, 1, 1, 0, 0, 1], np.uint8)
    counts, sums, totals, _ = run_kernel(p[:2], y[:2], 1, "left", 0.0, 0)
    assert sums[0, 1] == 0.0 and sums[0, 2] == 0.0 and totals[1] == 0.0
    counts, sums, totals, _ = run_kernel(p[2:3], y[2:3], 1, "left", 0.0, 0)
    assert sums[0, 1] == math.inf and totals[1] == math.inf
    counts, sums, totals, _ = run_kernel(p[3:4], y[3:4], 1, "left", 0.0, 0)
    assert sums[0, 1] == math.inf and totals[1] == math.inf
    counts, sums, totals, _ = run_kernel(p[4:], y[4:], 1, "left", 0.0, 0)
    assert sums[0, 1] == 0.0  # p = 0.5: logit 0 for either label
    ref = reference_fill(p, y, [0.0, 1.0], "left", 1e-6)
    assert_state_matches(run_kernel(p, y, 1, "left", 1e-6, 0), ref)
    assert np.all(np.isfinite(ref[1]))


def test_thread_counts_agree():
    p, y = simulated(400_003, np.float32, seed=9)
    one = run_kernel(p, y, 15, "left", 0.0, 1)
    two = run_kernel(p, y, 15, "left", 0.0, 2)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[3], two[3])
    np.testing.assert_allclose(two[1], one[1], rtol=1e-12, atol=0)
    np.testing.assert_allclose(two[2], one[2], rtol=1e-12, atol=0)


def test_chunked_fill_range_equals_one_call():
    p, y = simulated(10_000, np.float64, seed=13)
    edges = uniform_edges(15, np.float64)
    whole = run_kernel(p, y, 15, "right", 0.0, 0)
    counts, sums, totals, checks = kb.new_state(15)
    for a, b in [(0, 1), (1, 777), (777, 5000), (5000, 10_000)]:
        kb.fill_range(p, y, a, b, edges, True, True, False, 0.0, True, counts, sums, totals, checks)
    np.testing.assert_array_equal(counts, whole[0])
    np.testing.assert_allclose(sums, whole[1], rtol=1e-12)
    np.testing.assert_allclose(totals, whole[2], rtol=1e-12)


# -- logarithms ------------------------------------------------------------

@njit(error_model="numpy", fastmath={"reassoc", "contract", "nsz"})
def _apply_logs_in_a_reassociating_loop(x, out1, out2):
    # log64 and log1m keep their own flags when LLVM inlines them here.
    for i in range(x.shape[0]):
        out1[i] = log64(x[i])
        out2[i] = log1m(x[i])


@njit(error_model="numpy", fastmath=FASTMATH_EXACT)
def _apply_log_pair(x, out1, out2):
    for i in range(x.shape[0]):
        a, b = log_pair(x[i])
        out1[i] = a
        out2[i] = b


def ulp_distance(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite
        d = np.abs(got - want) / np.spacing(np.abs(want))
    return np.where(same, 0.0, np.where(np.isfinite(d), d, np.inf))


def _log_points():
    rng = np.random.default_rng(0)
    tiny = np.finfo(np.float64).tiny
    return np.concatenate([
        rng.random(200_000),
        np.exp(rng.uniform(-744, 709, 200_000)),  # subnormals to large
        1.0 + rng.normal(0, 1e-6, 20_000),
        1.0 - np.exp(rng.uniform(-36, 0, 20_000)),  # near 1 from below
        np.ldexp(rng.random(2000), -1070),  # subnormals
        [0.0, 1.0, 0.5, 2.0, np.inf, np.nan, 5e-324, tiny, np.nextafter(tiny, 0),
         np.nextafter(1.0, 0), np.nextafter(1.0, 2), np.sqrt(0.5), np.sqrt(2.0)],
    ])


def test_log64_and_log1m_within_two_ulp():
    x = _log_points()
    out1 = np.empty_like(x)
    out2 = np.empty_like(x)
    _apply_logs_in_a_reassociating_loop(x, out1, out2)
    with np.errstate(divide="ignore", invalid="ignore"):
        want1 = np.log(x)
        want2 = np.log1p(-x)
    assert ulp_distance(out1, want1).max() <= 2
    assert ulp_distance(out2, want2).max() <= 2
    assert log64(0.0) == -math.inf and log64(math.inf) == math.inf
    assert math.isnan(log64(math.nan)) and math.isnan(log64(-1.0))
    assert log1m(1.0) == -math.inf and log1m(0.0) == 0.0
    assert log1m(5e-324) == -5e-324 and math.isnan(log1m(math.nan))


def test_log_pair_within_two_ulp_on_unit_interval():
    x = _log_points()
    x = x[(x >= 0) & (x <= 1)]
    x = np.concatenate([x, np.random.default_rng(1).random(100_000).astype(np.float32)])
    out1 = np.empty_like(x)
    out2 = np.empty_like(x)
    _apply_log_pair(x, out1, out2)
    with np.errstate(divide="ignore"):
        assert ulp_distance(out1, np.log(x)).max() <= 2
        assert ulp_distance(out2, np.log1p(-x)).max() <= 2
    assert (x == 0).any() and np.all(out1[x == 0] == -math.inf)
    assert (x == 1).any() and np.all(out2[x == 1] == -math.inf)


def test_search_sorted_matches_numpy():
    # the kernels' binary search (no NaN) against np.searchsorted, both sides,
    # with repeated edges and values on, between and beyond the edges
    edges = np.array([0.0, 0.1, 0.1, 0.25, 0.5, 0.5, 0.5, 0.9, 1.0])
    xs = np.concatenate([edges, [-0.5, 0.05, 0.3, 0.95, 1.5], np.nextafter(edges, 2.0)])
    for right in (False, True):
        want = np.searchsorted(edges, xs, side="right" if right else "left")
        got = [search_sorted(edges, float(x), right) for x in xs]
        assert got == want.tolist()


def test_bit_casts_and_floor_match_numpy():
    # mathfn's LLVM intrinsics, which the CPU and the CUDA kernels share (numpy's
    # scalar .view does not compile for CUDA)
    from numba import njit

    from fastcal._kernels.mathfn import as_bits, floor64, from_bits

    x = np.array([0.0, -0.0, 1.0, -2.5, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                  np.inf, -np.inf, np.nan, 0.3, -0.7, 2.0**52 + 0.5, -(2.0**60)])
    bits = njit(lambda a: np.array([as_bits(v) for v in a]))(x)
    np.testing.assert_array_equal(bits, x.view(np.int64))
    back = njit(lambda b: np.array([from_bits(v) for v in b]))(bits)
    np.testing.assert_array_equal(back.view(np.int64), bits)
    fl = njit(lambda a: np.array([floor64(v) for v in a]))(x)
    np.testing.assert_array_equal(fl, np.floor(x))

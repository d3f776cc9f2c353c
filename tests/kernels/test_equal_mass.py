"""The one equal-mass algorithm (fastcal.accumulators.equal_mass) against the stable sort."""

import numpy as np
import pytest

from fastcal._kernels import binary as kb
from fastcal._kernels import equal_mass as kem
from fastcal.accumulators import equal_mass as em
from fastcal.inputs.validation import kernel_view


def reference(y, x, n_bins):
    """Groups of the stable order by (value, row), filled row by row."""
    keep = ~(np.isnan(x) | np.isnan(y.astype(np.float64)))
    y, x = y[keep], x[keep]
    n = x.shape[0]
    order = np.argsort(x + 0.0, kind="stable")  # -0.0 ties with 0.0
    counts = np.zeros((n_bins, 2), np.int64)
    sum_p = np.zeros(n_bins)
    lower = np.full(n_bins, np.nan)
    upper = np.full(n_bins, np.nan)
    for g in range(n_bins):
        rows = order[(g * n) // n_bins:((g + 1) * n) // n_bins]
        counts[g] = rows.shape[0], int(y[rows].sum())
        sum_p[g] = x[rows].astype(np.float64).sum()
        if rows.shape[0]:
            lower[g], upper[g] = x[rows].min(), x[rows].max()
    return counts, sum_p, lower, upper


def datasets(n, seed):
    rng = np.random.default_rng(seed)
    three = np.array([0.1, 0.5, 0.9])[rng.integers(0, 3, n)]
    near = 0.3 + rng.integers(0, 5, n) * 2.0 ** -50          # agree to 50 bits
    edges = rng.integers(0, 17, n) / 16                        # on bucket edges
    zeros = np.where(rng.random(n) < 0.5, -0.0, 0.0)
    zeros[rng.random(n) < 0.2] = 1.0
    mixed = np.where(rng.random(n) < 0.5, three, rng.random(n))
    return {"uniform": rng.random(n), "all equal": np.full(n, 0.7), "three values": three,
            "near ties": near, "bucket edges": edges, "signed zeros": zeros, "mixed": mixed,
            "float32": rng.random(n).astype(np.float32)}


@pytest.mark.parametrize("name", list(datasets(10, 0)))
@pytest.mark.parametrize("n_bins", [1, 3, 10, 37])
def test_groups_equal_the_stable_sort(name, n_bins):
    n = 2_000
    x = datasets(n, 1)[name]
    y = (np.random.default_rng(2).random(n) < 0.4).astype(np.uint8)
    want_counts, want_p, want_lo, want_hi = reference(y, x, n_bins)
    for bounds in ([0, n], [0, 1, 700, 701, 1500, n], list(range(0, n + 1, 250))):
        parts = em.ArrayParts(y, x, 2, bounds=bounds)
        counts, sums, totals, lower, upper, passes = em.groups(
            parts, n_bins, omit=False, eps=None, with_logs=True)
        np.testing.assert_array_equal(counts[:, :2], want_counts)
        np.testing.assert_allclose(sums[:, 0], want_p, rtol=1e-12, atol=1e-13)
        np.testing.assert_array_equal(lower, want_lo)
        np.testing.assert_array_equal(upper, want_hi)


@pytest.mark.parametrize("name", ["uniform", "three values", "near ties", "float32"])
def test_many_groups_equal_the_stable_sort(name):
    """More groups than kb.DIRECT_MIN (the group fill without interleaved
    copies), two to three rows a group, ties spread over many parts."""
    n, n_bins = 12_000, kb.DIRECT_MIN + 5
    x = datasets(n, 3)[name]
    y = (np.random.default_rng(4).random(n) < 0.4).astype(np.uint8)
    want_counts, want_p, want_lo, want_hi = reference(y, x, n_bins)
    bounds = sorted({0, n, *np.random.default_rng(5).integers(0, n, 40).tolist()})
    counts, sums, totals, lower, upper, passes = em.groups(
        em.ArrayParts(y, x, 2, bounds=bounds), n_bins, omit=False, eps=None, with_logs=True)
    np.testing.assert_array_equal(counts[:, :2], want_counts)
    np.testing.assert_allclose(sums[:, 0], want_p, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(lower, want_lo)
    np.testing.assert_array_equal(upper, want_hi)


def test_memory_does_not_grow_with_groups_times_parts():
    """The tie counters are sparse: 1,000 parts and 2,000 groups of many tied
    values stay within a few MB of Python-side arrays (a table of ranks by
    parts, as before, takes 4,000 x 1,000 x 8 bytes = 32 MB twice, and the parts'
    histograms kept until all were made 500 MB)."""
    import tracemalloc

    n, n_bins, n_parts = 40_000, 2_000, 1_000
    rng = np.random.default_rng(6)
    x = np.round(rng.random(n), 3)  # 1,001 values: every cut value is tied
    y = (rng.random(n) < 0.5).astype(np.uint8)
    bounds = [(k * n) // n_parts for k in range(n_parts + 1)]
    parts = em.ArrayParts(y, x, 1, bounds=bounds)
    em.groups(parts, 3, omit=False, eps=None, with_logs=False)  # compile outside the trace
    tracemalloc.start()
    try:
        counts, sums, _, lower, upper, _ = em.groups(parts, n_bins, omit=False, eps=None,
                                                     with_logs=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    want_counts, _, want_lo, _ = reference(y, x, n_bins)
    np.testing.assert_array_equal(counts[:, :2], want_counts)
    np.testing.assert_array_equal(lower, want_lo)
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MB"


def test_big_ranges_are_split_not_gathered(monkeypatch):
    """With a tiny gather limit every range is narrowed by histograms of its
    keys; the groups stay exact and no tied row is collected."""
    monkeypatch.setattr(em, "GATHER_MAX", 4)
    n = 3_000
    rng = np.random.default_rng(5)
    x = 0.3 + rng.integers(0, 7, n) * 2.0 ** -40
    y = (rng.random(n) < 0.5).astype(np.uint8)
    want = reference(y, x, 9)
    counts, sums, _, lower, upper, passes = em.groups(
        em.ArrayParts(y, x, 2, bounds=[0, 999, 2000, n]), 9, omit=False, eps=None,
        with_logs=False)
    np.testing.assert_array_equal(counts[:, :2], want[0])
    np.testing.assert_array_equal(lower, want[2])
    assert passes > 3  # histogram, several narrowing probes, groups


def test_nan_rows_are_skipped_under_omit():
    n = 1_000
    rng = np.random.default_rng(3)
    x = rng.random(n)
    y = (rng.random(n) < 0.5).astype(np.float64)
    x[rng.integers(0, n, 50)] = np.nan
    y[rng.integers(0, n, 50)] = np.nan
    want = reference(y, x, 7)
    counts, sums, *_ = em.groups(em.ArrayParts(y, x, 2, bounds=[0, 400, n]), 7, omit=True,
                                 eps=None, with_logs=True)
    np.testing.assert_array_equal(counts[:, :2], want[0])
    np.testing.assert_allclose(sums[:, 0], want[1], rtol=1e-12)


def test_group_state_matches_the_binary_fill():
    """Each group's full state (ECD sums, totals) is the binary fill of its rows."""
    n, n_bins = 5_000, 6
    rng = np.random.default_rng(4)
    # read-only, as the gate hands arrays to the kernels (the type a report compiles)
    x = kernel_view(np.round(rng.random(n), 2))  # many ties
    y = kernel_view((rng.random(n) < x).astype(np.uint8))
    counts, sums, totals, *_ = em.groups(em.ArrayParts(y, x, 2), n_bins, omit=False, eps=None,
                                         with_logs=True)
    order = np.argsort(x, kind="stable")
    for g in range(n_bins):
        rows = order[(g * n) // n_bins:((g + 1) * n) // n_bins]
        c, s, t, chk = kb.new_state(1)
        kb.fill_range(kernel_view(x[rows]), kernel_view(y[rows]), 0,
                      rows.shape[0], np.array([0.0, 1.0]), False, False, False, 0.0, True,
                      c, s, t, chk)
        np.testing.assert_array_equal(counts[g], c[0])
        np.testing.assert_allclose(sums[g], s[0], rtol=1e-12)
    c, s, t, chk = kb.new_state(1)
    kb.fill_range(x, y, 0, n, np.array([0.0, 1.0]), False, False, False, 0.0, True, c, s, t, chk)
    np.testing.assert_allclose(totals, t, rtol=1e-12)


def test_probe_ranges_matches_masks():
    rng = np.random.default_rng(1)
    x = np.where(rng.random(4000) < 0.5, 0.5, rng.random(4000))
    y = np.zeros(4000, np.uint8)
    keys = np.maximum(x.view(np.int64), 0)
    nb = 16
    k05 = int(np.array(0.5).view(np.int64))
    lo = np.array([0, k05, k05 + 1], np.int64)
    hi = np.array([int(np.array(1 / 16).view(np.int64)) - 1, k05, k05 + 2 ** 48], np.int64)
    modes = np.array([1, 0, 2], np.int64)
    shift = np.array([0, 0, 40], np.int64)
    sizes = np.where(modes == 2, ((hi - lo) >> shift) + 1, 0)
    buckets = np.minimum((lo.view(np.float64) * nb).astype(np.int64), nb - 1)
    first = np.searchsorted(buckets, np.arange(nb + 1)).astype(np.int64)
    count, got, key_start, hist, hist_start = kem.probe_ranges(
        x, y, False, nb, first, lo, hi, shift, modes, sizes)
    for s in range(3):
        sel = keys[(keys >= lo[s]) & (keys <= hi[s])]
        assert count[s] == sel.shape[0]
        if modes[s] == 1:
            np.testing.assert_array_equal(got[key_start[s]:key_start[s + 1]], sel)
        if modes[s] == 2:
            want = np.bincount((sel - lo[s]) >> shift[s], minlength=sizes[s])
            np.testing.assert_array_equal(hist[hist_start[s]:hist_start[s + 1]], want)
    assert count[1] == np.count_nonzero(x == 0.5) > 0
    # only the gathered range's keys are stored: nothing for the others
    assert got.shape[0] == count[0] == key_start[-1]


@pytest.mark.parametrize("n_wanted", [1, 5, kem.MAX_RUNS + 9])
def test_gather_buckets_matches_masks(n_wanted):
    """Rows of the wanted buckets, in row order, by runs of buckets compared
    per block (few runs) or by a table look-up (many); invalid rows skipped."""
    rng = np.random.default_rng(12)
    n, nb = 50_000, 1 << 10
    x = rng.random(n).astype(np.float32)
    x[:50] = np.arange(50) / 64  # values on bucket edges
    y = (rng.random(n) < 0.5).astype(np.float64)
    x[100], y[101] = np.nan, np.nan
    wanted = np.sort(rng.choice(nb, n_wanted, replace=False))
    wanted[-1] = nb - 1  # the last bucket, which also holds x = 1
    x[7] = 1.0
    slot = np.full(nb, -1, np.int64)
    slot[wanted] = np.arange(n_wanted)
    bucket = np.minimum((np.nan_to_num(x, nan=0.0).astype(np.float64) * nb).astype(np.int64),
                        nb - 1)
    valid = ~np.isnan(x) & ~np.isnan(y)
    cap = np.array([np.count_nonzero(valid & (bucket == b)) for b in wanted])
    cap_start = np.concatenate([[0], np.cumsum(cap)]).astype(np.int64)
    keys = np.empty(cap_start[-1], np.int64)
    labels = np.empty(cap_start[-1], np.uint8)
    filled = np.zeros(n_wanted, np.int64)
    kem.gather_buckets(x, y, True, slot, cap_start, keys, labels, filled)
    np.testing.assert_array_equal(filled, cap)
    for s, b in enumerate(wanted):
        rows = np.flatnonzero(valid & (bucket == b))
        got = slice(cap_start[s], cap_start[s] + cap[s])
        np.testing.assert_array_equal(keys[got], x[rows].astype(np.float64).view(np.int64))
        np.testing.assert_array_equal(labels[got], y[rows] == 1)


def test_gather_counts_rows_beyond_a_slots_room_without_writing_them():
    """Data that changed since its rows were counted (a bug once fed logits where
    the count had seen their sigmoid) overfills a slot: the extra rows are counted,
    so the caller says the data changed, and nothing is written past the arrays."""
    x = np.array([0.1, 0.9, 0.95, 0.97, 0.99, 0.15], np.float64)
    y = np.ones_like(x)
    nb = 4
    slot = np.full(nb, -1, np.int64)
    slot[[0, nb - 1]] = [0, 1]
    cap_start = np.array([0, 2, 3], np.int64)  # room for 2 rows of bucket 0, 1 of the last
    guard = 4
    keys_all = np.full(cap_start[-1] + guard, -7, np.int64)
    labels_all = np.full(cap_start[-1] + guard, 9, np.uint8)
    keys, labels = keys_all[:cap_start[-1]], labels_all[:cap_start[-1]]
    filled = np.zeros(2, np.int64)
    kem.gather_buckets(x, y, True, slot, cap_start, keys, labels, filled)
    np.testing.assert_array_equal(filled, [2, 4])  # 4 rows of the last bucket, room for 1
    np.testing.assert_array_equal(keys_all[cap_start[-1]:], -7)  # nothing past the end
    np.testing.assert_array_equal(labels_all[cap_start[-1]:], 9)
    np.testing.assert_array_equal(keys[:3], x[[0, 5, 1]].view(np.int64))
    got_keys, got_labels, got_filled = em._gather(y, x, True, slot, cap_start)
    assert len(got_keys) == len(got_labels) == 3
    np.testing.assert_array_equal(got_filled, [2, 4])


def naive_ace(y, x, n_bins):
    counts, sum_p, _, _ = reference(y, x, n_bins)
    n = counts[:, 0].sum()
    full = counts[:, 0] > 0
    gap = counts[full, 1] / counts[full, 0] - sum_p[full] / counts[full, 0]
    return float(np.sum(counts[full, 0] / n * np.abs(gap)))


@pytest.mark.parametrize("name", list(datasets(10, 0)))
@pytest.mark.parametrize("n_bins", [1, 2, 15, 40])
def test_ace_from_bucket_statistics_equals_the_stable_sort(name, n_bins, monkeypatch):
    n = 3_000
    x = datasets(n, 7)[name]
    y = (np.random.default_rng(8).random(n) < 0.3).astype(np.uint8)
    want = naive_ace(y, x, n_bins)
    for budget in (em.GATHER_BUDGET, 0):  # 0: the boundary buckets are too big, groups()
        monkeypatch.setattr(em, "GATHER_BUDGET", budget)
        for bounds in ([0, n], [0, 5, 1700, n]):
            parts = em.ArrayParts(y, x, 2, bounds=bounds)
            # the buckets for any number of rows, and the fewer ones for these rows
            for n_buckets in {em.fine_buckets_for(n_bins), em.fine_buckets_for(n_bins, n)}:
                fine = em.bucket_stats(parts, n_buckets, False)
                got, passes = em.ace(*fine, n_bins, parts, False)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fill_gives_the_bucket_statistics_of_ace(dtype):
    """The statistics fused into the binary fill equal the standalone kernel's,
    invalid and omitted rows excluded."""
    from fastcal.inputs.binning import kernel_edges

    n = 20_000
    rng = np.random.default_rng(9)
    p = rng.random(n).astype(dtype)
    p[::97] = np.nan
    p[5] = 1.0
    p[6] = 0.0
    y = (rng.random(n) < 0.5).astype(np.float64)
    y[::101] = np.nan
    B = 1 << 14
    edges = kernel_edges(10, np.dtype(dtype).str)
    c, s, t, chk = kb.new_state(10)
    fc = np.zeros((B + 1, 3), np.int64)
    fp = np.zeros(B + 1)
    kb.fill_range_fine(p, y, 0, n, edges, True, False, True, 0.0, True, c, s, t, chk, fc, fp)
    want_c = np.zeros((B + 1, 3), np.int64)
    want_p = np.zeros(B + 1)
    kem.bucket_stats(p, y, True, want_c, want_p)
    np.testing.assert_array_equal(fc[:B], want_c[:B])
    np.testing.assert_allclose(fp[:B], want_p[:B], rtol=1e-12)
    assert fc[:B, 0].sum() == c[:10, 0].sum()  # the same rows as the ordinary bins
    par = kb.fill_parallel_fine(p, y, edges, True, False, True, 0.0, True, 2, B)
    np.testing.assert_array_equal(par[4][:B], want_c[:B])

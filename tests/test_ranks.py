"""Equal-mass kernels of fastcal.distributed against loop references."""

import numpy as np
import pytest

from fastcal._kernels import ranks


def tied_data(n, seed):
    rng = np.random.default_rng(seed)
    values = np.array([0.0, -0.0, 0.25, 0.5, np.nextafter(0.5, 1.0), 0.75, 1.0])
    p = np.where(rng.random(n) < 0.5, values[rng.integers(0, len(values), n)], rng.random(n))
    y = (rng.random(n) < np.abs(p)).astype(np.uint8)
    return y, p


def test_value_histogram_matches_a_loop():
    p = np.array([0.0, -0.0, 1.0, 0.5, np.nextafter(0.5, 0.0), 1 / 16, np.nextafter(1 / 16, 0),
                  np.nan, 0.999, 0.3])
    y = np.array([0, 1, 1, 0, 1, 0, 1, 0, 1, np.nan])
    for omit, keep in ((True, slice(None)), (False, slice(0, 7))):
        want = np.zeros(16, np.int64)
        for pi, yi in zip(p[keep], y[keep]):
            if not (np.isnan(pi) or np.isnan(yi)):
                want[min(int(pi * 16), 15)] += 1
        np.testing.assert_array_equal(ranks.value_histogram(p[keep], y[keep], omit, 16), want)
    assert list(want[[0, 1, 7, 8, 15]]) == [3, 1, 1, 1, 1]  # edges land on the right side


def test_probe_ranges_matches_masks():
    y, p = tied_data(5_000, 1)
    keys = np.maximum(p.view(np.int64), 0)
    k05 = int(np.array(0.5).view(np.int64))
    lo = np.array([0, k05, k05, int(np.array(0.25).view(np.int64))], np.int64)
    hi = np.array([0, k05, k05 + 10, int(np.array(0.75).view(np.int64))], np.int64)
    shift = np.array([0, 0, 0, 40], np.int64)
    mode = np.array([0, 1, 2, 2], np.int64)
    sizes = np.where(mode == 2, ((hi - lo) >> shift) + 1, 0)
    count, got_keys, key_start, hist, hist_start = ranks.probe_ranges(
        p, y, False, lo, hi, shift, mode, sizes)
    for s in range(4):
        sel = keys[(keys >= lo[s]) & (keys <= hi[s])]
        assert count[s] == sel.shape[0]
        if mode[s] == 1:
            np.testing.assert_array_equal(got_keys[key_start[s]:key_start[s + 1]], sel)
        if mode[s] == 2:
            want = np.bincount((sel - lo[s]) >> shift[s], minlength=sizes[s])
            np.testing.assert_array_equal(hist[hist_start[s]:hist_start[s + 1]], want)
    assert count[0] == np.count_nonzero(p == 0.0) > 0  # 0.0 and -0.0 share a key


@pytest.mark.parametrize("n_groups, n_parts, seed", [(4, 3, 0), (10, 7, 1), (13, 1, 2)])
def test_group_rows_follow_the_stable_sort(n_groups, n_parts, seed):
    """Partition by partition, each row lands in the group of its rank in the
    stable sort of all the data (ties by global row)."""
    n = 3_000
    y, p = tied_data(n, seed)
    order = sorted(range(n), key=lambda i: (p[i], i))  # -0.0 == 0.0 in this order
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    starts = [(g * n) // n_groups for g in range(n_groups)]
    group_of = np.searchsorted(starts, rank, side="right") - 1
    cut_ranks = [(c * n) // n_groups for c in range(1, n_groups)]
    cut_values = np.array([p[order[r]] for r in cut_ranks], np.float64)
    cut_below = np.array([r - int(np.sum(p < v)) for r, v in zip(cut_ranks, cut_values)],
                         np.int64)
    bounds_in = np.linspace(0, n, n_parts + 1).astype(int)
    for k in range(n_parts):
        a, b = bounds_in[k], bounds_in[k + 1]
        prior = np.array([int(np.sum(p[:a] == v)) for v in cut_values], np.int64)
        ps, ys, bounds, lower, upper = ranks.group_rows(p[a:b], y[a:b], False, cut_values,
                                                        cut_below, prior, n_groups)
        for g in range(n_groups):
            rows = [i for i in range(a, b) if group_of[i] == g]
            np.testing.assert_array_equal(ps[bounds[g]:bounds[g + 1]], p[rows])
            np.testing.assert_array_equal(ys[bounds[g]:bounds[g + 1]], y[rows])
            if rows:
                assert lower[g] == min(p[rows]) and upper[g] == max(p[rows])
            else:
                assert np.isnan(lower[g]) and np.isnan(upper[g])

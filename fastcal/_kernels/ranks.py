"""Kernels for exact equal-mass bins over partitioned data (fastcal.distributed).

Only @njit functions over arrays and scalars. Rows are skipped when ``omit``
is set and p or y is NaN, the rows the single-process path drops before its
stable sort; every other row has p in [0, 1] (checked by the fill before).
"""

import numpy as np
from numba import njit


@njit(nogil=True, error_model="numpy", cache=True)
def value_histogram(p, y, omit, n_buckets):
    """Counts of floor(p * n_buckets), the last bucket also holding p = 1.

    n_buckets is a power of two, so p * n_buckets is exact.
    """
    counts = np.zeros(n_buckets, np.int64)
    scale = np.float64(n_buckets)
    for i in range(p.shape[0]):
        pi = np.float64(p[i])
        if omit and (pi != pi or np.float64(y[i]) != np.float64(y[i])):
            continue
        b = min(np.int64(pi * scale), n_buckets - 1)
        counts[b] += 1
    return counts


@njit(nogil=True, error_model="numpy", cache=True)
def group_rows(p, y, omit, cut_values, cut_below, cut_prior, n_groups):
    """The rows of one partition regrouped by equal-mass group (stable within a group).

    A row with value x is in group g = #{c : x > cut_c} + #{c : x == cut_c and
    t >= below_c}, where t is its tie index: rows equal to x before it in all
    the data (``cut_prior[c]`` of them in earlier partitions, for the first cut
    c of each run of equal cut values). Returns (ps, ys, bounds, lower,
    upper): group g is ps[bounds[g]:bounds[g + 1]] (and ys), its smallest and
    largest p are lower[g] and upper[g] (NaN when empty).
    """
    n = p.shape[0]
    n_cuts = cut_values.shape[0]
    group = np.empty(n, np.int32)
    seen = np.zeros(n_cuts, np.int64)
    sizes = np.zeros(n_groups + 1, np.int64)
    for i in range(n):
        x = np.float64(p[i])
        if omit and (x != x or np.float64(y[i]) != np.float64(y[i])):
            group[i] = -1
            continue
        lo = 0  # cuts with value < x: the first cut with value >= x
        if n_cuts <= 64:
            for c in range(n_cuts):  # branch-free count, cheaper than a search
                lo += cut_values[c] < x
        else:
            hi = n_cuts
            while lo < hi:
                mid = (lo + hi) >> 1
                if cut_values[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
        g = lo
        if lo < n_cuts and cut_values[lo] == x:
            t = cut_prior[lo] + seen[lo]
            seen[lo] += 1
            c = lo
            while c < n_cuts and cut_values[c] == x:
                if t >= cut_below[c]:
                    g += 1
                c += 1
        group[i] = g
        sizes[g + 1] += 1
    bounds = np.cumsum(sizes)
    pos = bounds[:-1].copy()
    ps = np.empty(bounds[-1], p.dtype)
    ys = np.empty(bounds[-1], y.dtype)
    lower = np.full(n_groups, np.inf)
    upper = np.full(n_groups, -np.inf)
    for i in range(n):
        g = group[i]
        if g >= 0:
            x = p[i]
            ps[pos[g]] = x
            ys[pos[g]] = y[i]
            pos[g] += 1
            lower[g] = min(lower[g], np.float64(x))
            upper[g] = max(upper[g], np.float64(x))
    for g in range(n_groups):
        if sizes[g + 1] == 0:
            lower[g] = np.nan
            upper[g] = np.nan
    return ps, ys, bounds, lower, upper


@njit(nogil=True, error_model="numpy", cache=True)
def probe_ranges(p, y, omit, lo, hi, shift, mode, sizes):
    """Look at the rows whose float64 bit pattern (sort key; -0.0 as 0.0) is in
    [lo[s], hi[s]], for each range s: count them (every mode), gather their keys
    (mode 1) or histogram (key - lo[s]) >> shift[s] over sizes[s] cells (mode 2).

    Returns (count, keys, key_start, hist, hist_start): the keys of range s
    are keys[key_start[s]:key_start[s + 1]] in row order, its histogram
    hist[hist_start[s]:hist_start[s + 1]].
    """
    n = p.shape[0]
    n_ranges = lo.shape[0]
    bits = np.empty(1, np.float64)
    ibits = bits.view(np.int64)
    count = np.zeros(n_ranges, np.int64)
    hist_start = np.zeros(n_ranges + 1, np.int64)
    for s in range(n_ranges):
        hist_start[s + 1] = hist_start[s] + (sizes[s] if mode[s] == 2 else 0)
    hist = np.zeros(hist_start[n_ranges], np.int64)
    for i in range(n):
        x = np.float64(p[i])
        if omit and (x != x or np.float64(y[i]) != np.float64(y[i])):
            continue
        bits[0] = x
        k = max(ibits[0], 0)
        for s in range(n_ranges):
            if lo[s] <= k and k <= hi[s]:
                count[s] += 1
                if mode[s] == 2:
                    hist[hist_start[s] + ((k - lo[s]) >> shift[s])] += 1
    key_start = np.zeros(n_ranges + 1, np.int64)
    for s in range(n_ranges):
        key_start[s + 1] = key_start[s] + (count[s] if mode[s] == 1 else 0)
    keys = np.empty(key_start[n_ranges], np.int64)
    if key_start[n_ranges] > 0:
        pos = key_start[:n_ranges].copy()
        for i in range(n):
            x = np.float64(p[i])
            if omit and (x != x or np.float64(y[i]) != np.float64(y[i])):
                continue
            bits[0] = x
            k = max(ibits[0], 0)
            for s in range(n_ranges):
                if mode[s] == 1 and lo[s] <= k and k <= hi[s]:
                    keys[pos[s]] = k
                    pos[s] += 1
    return count, keys, key_start, hist, hist_start

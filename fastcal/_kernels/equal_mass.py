"""Kernels of the exact equal-mass (ACE, strategy="quantile") algorithm.

Only @njit functions over arrays and scalars (fastcal.accumulators.equal_mass drives them).
Equal-mass group g holds the rows of ranks [g n // G, (g + 1) n // G) in the
stable order by (value, row). Three kinds of pass, each over one part of the
data (a thread's slice, a file chunk or a Dask partition) and mergeable:

- ``value_histogram``: counts per value bucket floor(x * B) (B a power of
  two, so x * B is exact; x = 1 in the last bucket).
- ``probe_ranges``: for a few ranges of float64 bit patterns (the sort key;
  -0.0 has the key of 0.0), each inside one bucket: count, gather the keys
  (small ranges) or histogram them (big ranges), to narrow down the value at
  a given rank without sorting.
- ``fill_groups_range``: every row into its group, given the cut values, and
  the per-group state of the binary fill (``binary.fill_range``'s layout).

Rows are skipped when ``omit`` is set and x or y is NaN: the rows the fill
drops. Every other x is in [0, 1] (checked by the fill before).
"""

import numpy as np

from ._config import BLOCK, FASTMATH, FLUSH
from ._lazy import njit
from .binary import (
    _SHIFT_OK,
    _SHIFT_POS,
    DIRECT_MIN,
    _flush,
    _flush_fine,
    _logs,
    _scatter,
    _scatter_direct,
    _terms,
    block_scratch,
    copies_scratch,
)


@njit(inline="always", cache=True)
def _skip(x, yv, omit):
    return omit and (x != x or yv != yv)


@njit(inline="always", cache=True)
def _bucket(x, scale, top):
    return min(np.int64(x * scale), top)


@njit(nogil=True, error_model="numpy", cache=True)
def value_histogram(p, y, omit, n_buckets):
    """Counts of floor(p * n_buckets), the last bucket also holding p = 1."""
    counts = np.zeros(n_buckets, np.int64)
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    for i in range(p.shape[0]):
        x = np.float64(p[i])
        if _skip(x, np.float64(y[i]), omit):
            continue
        counts[_bucket(x, scale, top)] += 1
    return counts


@njit(inline="always", cache=True)
def _find(k, lo, hi, s0, s1):
    """Index of the range of [s0, s1) (sorted by lo, disjoint) holding key k, or -1."""
    a = s0
    b = s1
    while b - a > 1:
        mid = (a + b) >> 1
        if lo[mid] <= k:
            a = mid
        else:
            b = mid
    if lo[a] <= k and k <= hi[a]:
        return a
    return -1


@njit(nogil=True, error_model="numpy", cache=True)
def probe_ranges(p, y, omit, n_buckets, first, lo, hi, shift, mode, sizes):
    """Look at the rows whose key lies in one of the ranges [lo[s], hi[s]].

    Ranges are sorted by lo, disjoint, and each lies inside one value bucket:
    those of bucket b are first[b]:first[b + 1]. Per range s: count its rows
    (every mode), gather their keys (mode 1) or add (key - lo[s]) >> shift[s]
    to a histogram of sizes[s] cells (mode 2).

    Returns (count, keys, key_start, hist, hist_start): the keys of range s
    are keys[key_start[s]:key_start[s + 1]] in row order (only mode 1 ranges
    have any: nothing is allocated for the others), its histogram
    hist[hist_start[s]:hist_start[s + 1]]. Two loops over the part: the first
    notes each row's range (4 bytes a row) and counts, the second copies the
    keys into place, so the keys take exactly what was found.
    """
    n_ranges = lo.shape[0]
    count = np.zeros(n_ranges, np.int64)
    hist_start = np.zeros(n_ranges + 1, np.int64)
    for s in range(n_ranges):
        hist_start[s + 1] = hist_start[s] + (sizes[s] if mode[s] == 2 else 0)
    hist = np.zeros(hist_start[n_ranges], np.int64)
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    buf = np.empty(1, np.float64)
    ibuf = buf.view(np.int64)
    n = p.shape[0]
    where = np.empty(n, np.int32)
    n_gather = 0
    for i in range(n):
        where[i] = -1
        x = np.float64(p[i])
        if _skip(x, np.float64(y[i]), omit):
            continue
        b = _bucket(x, scale, top)
        s0 = first[b]
        s1 = first[b + 1]
        if s0 == s1:
            continue
        buf[0] = x
        k = max(ibuf[0], 0)
        s = _find(k, lo, hi, s0, s1)
        if s < 0:
            continue
        count[s] += 1
        m = mode[s]
        if m == 1:
            where[i] = s
            n_gather += 1
        elif m == 2:
            hist[hist_start[s] + ((k - lo[s]) >> shift[s])] += 1
    key_start = np.zeros(n_ranges + 1, np.int64)
    for s in range(n_ranges):
        key_start[s + 1] = key_start[s] + (count[s] if mode[s] == 1 else 0)
    keys = np.empty(n_gather, np.int64)
    if n_gather:
        fill = key_start[:n_ranges].copy()
        for i in range(n):
            s = where[i]
            if s >= 0:
                buf[0] = np.float64(p[i])
                keys[fill[s]] = max(ibuf[0], 0)
                fill[s] += 1
    return count, keys, key_start, hist, hist_start


@njit(inline="always", cache=True)
def _group(x, cut_values, cut_below, run_end, seen):
    """Group of a row of value x from the cuts (row-ordered tie counters in seen).

    g = #{c : x > cut_c} + #{c : x == cut_c and t >= below_c}, t being the
    row's index among the rows equal to x (seen[c] for the first cut c of a
    run of equal cut values, which ends at run_end[c]; below_c rises along
    the run, so the second count is a binary search too).
    """
    n_cuts = cut_values.shape[0]
    lo = 0
    hi = n_cuts
    while lo < hi:
        mid = (lo + hi) >> 1
        if cut_values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    g = lo
    if lo < n_cuts and cut_values[lo] == x:
        t = seen[lo]
        seen[lo] = t + 1
        a = lo
        b = run_end[lo]
        while a < b:  # first cut of the run with below > t
            mid = (a + b) >> 1
            if cut_below[mid] <= t:
                a = mid + 1
            else:
                b = mid
        g = a
    return g


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_groups_range(p, y, start, stop, table, cut_values, cut_below, run_end, seen, eps,
                      with_logs, counts, sums, totals):
    """Add rows [start, stop) to the state of their equal-mass groups.

    ``table[b]`` is the group of every row in value bucket b when no cut value
    lies in that bucket, else -1 (then the cuts decide, see ``_group``).
    ``seen`` holds, per cut, the rows equal to its value met before (in
    earlier parts, then here): updated in place. counts/sums/totals have the
    layout of ``binary.fill_range`` with n_groups + 1 rows (the last one
    receives NaN rows under nan_policy='omit').
    """
    ng = counts.shape[0] - 1
    n_buckets = table.shape[0]
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    lo_e = eps
    hi_e = 1.0 - eps
    bi, inc, pv, ev, vv, lpv, lqv = block_scratch()
    direct = ng > DIRECT_MIN  # many groups: no interleaved copies to clear and flush
    loc_i, loc_p, loc_e, loc_v = copies_scratch(0 if direct else ng)
    since_flush = 0
    for bstart in range(start, stop, BLOCK):
        m = min(BLOCK, stop - bstart)
        pb = p[bstart:bstart + m]
        yb = y[bstart:bstart + m]
        for j in range(m):
            x = np.float64(pb[j])
            yv = np.float64(yb[j])
            if not ((x >= 0.0) & (x <= 1.0)) or yv != yv:
                bi[j] = ng  # omitted NaN rows: the trash row, as in the fill
                continue
            g = table[_bucket(x, scale, top)]
            if g < 0:
                g = _group(x, cut_values, cut_below, run_end, seen)
            bi[j] = g
        if with_logs:
            _logs(pb, lo_e, hi_e, lpv, lqv)
        _terms(pb, yb, ng, lo_e, hi_e, with_logs, bi, lpv, lqv, inc, pv, ev, vv, totals)
        if direct:
            _scatter_direct(m, bi, ng, inc, pv, ev, vv, counts, sums)
            continue
        _scatter(m, bi, inc, pv, ev, vv, loc_i, loc_p, loc_e, loc_v)
        since_flush += m
        if since_flush >= FLUSH:
            _flush(loc_i, loc_p, loc_e, loc_v, counts, sums)
            since_flush = 0
    if not direct:
        _flush(loc_i, loc_p, loc_e, loc_v, counts, sums)


# -- ACE from bucket statistics ------------------------------------------------
#
# ACE needs, per equal-mass group, only its count, positives, correct
# thresholded labels and sum of p. Those of a bucket that lies inside one
# group are summed from per-bucket statistics; only the rows of the few
# buckets that hold a group boundary are looked at again (gathered, ranked).



@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def bucket_stats(p, y, omit, counts, sum_p):
    """Add per value bucket floor(p * B) (B = counts.shape[0] - 1, p = 1 in the
    last bucket) the rows, positives and correct thresholded labels
    (counts[b, 0:3]) and the sum of p (sum_p[b]). Skipped rows go to row B.
    """
    n_buckets = counts.shape[0] - 1
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    packed = np.zeros(n_buckets + 1, np.int64)
    loc_p = np.zeros(n_buckets + 1, np.float64)
    bi = np.empty(BLOCK, np.int64)
    inc = np.empty(BLOCK, np.int64)
    pv = np.empty(BLOCK, np.float64)
    n = p.shape[0]
    since_flush = 0
    for bstart in range(0, n, BLOCK):
        m = min(BLOCK, n - bstart)
        for j in range(m):
            x = np.float64(p[bstart + j])
            yv = np.float64(y[bstart + j])
            ok = (x >= 0.0) & (x <= 1.0) & ((yv == 0.0) | (yv == 1.0))
            xs = x if ok else 0.0
            pos = yv == 1.0
            good = (xs > 0.5) == pos
            bi[j] = min(np.int32(xs * scale), top) if ok else n_buckets
            inc[j] = 1 + (np.int64(pos) << _SHIFT_POS) + (np.int64(good) << _SHIFT_OK)
            pv[j] = xs
        for j in range(m):
            f = np.uint64(bi[j])
            packed[f] += inc[j]
            loc_p[f] += pv[j]
        since_flush += m
        if since_flush >= FLUSH or bstart + m >= n:
            _flush_fine(packed, loc_p, counts, sum_p)
            since_flush = 0


MAX_RUNS = 32  # more runs of wanted buckets: a table look-up per row instead


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def gather_buckets(p, y, omit, slot, cap_start, keys, labels, filled):
    """Keys and labels, in row order, of the rows whose bucket has slot[b] >= 0
    (B = slot.shape[0]); slot s has room for cap_start[s + 1] - cap_start[s] rows
    and finds filled[s]. On return the slots' rows lie one after the other
    from keys[0] (slot s from sum(filled[:s])). More rows in a slot than its
    room (data that changed since the rows were counted) are counted in filled
    but not written, so the caller can say so; nothing is written out of bounds.

    The wanted buckets are few (one per group boundary, for ACE): they are
    merged into runs of consecutive buckets, and a first loop per block marks
    the rows inside a run by one unsigned comparison per run, vectorised
    over the block (a table look-up per row when there are more than
    MAX_RUNS runs); only the marked rows are then copied.
    """
    n_buckets = slot.shape[0]
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    run_lo = np.empty(n_buckets, np.int32)
    run_len = np.empty(n_buckets, np.uint32)
    n_runs = 0
    b = 0
    while b < n_buckets:
        if slot[b] >= 0:
            a = b
            while b < n_buckets and slot[b] >= 0:
                b += 1
            run_lo[n_runs] = a
            run_len[n_runs] = b - a
            n_runs += 1
        else:
            b += 1
    if n_runs == 0:
        return
    wanted = np.zeros(n_buckets, np.uint8)
    for b in range(n_buckets):
        wanted[b] = slot[b] >= 0
    few = n_runs <= MAX_RUNS
    bucket = np.empty(BLOCK, np.int32)
    hit = np.empty(BLOCK, np.uint8)
    buf = np.empty(1, np.float64)
    ibuf = buf.view(np.int64)
    n = p.shape[0]
    for bstart in range(0, n, BLOCK):
        m = min(BLOCK, n - bstart)
        pb = p[bstart:bstart + m]
        for j in range(m):
            x = np.float64(pb[j])
            xs = x if (x >= 0.0) & (x <= 1.0) else 0.0
            bucket[j] = min(np.int32(xs * scale), top)
        n_hit = 0
        if few:
            for j in range(m):
                hit[j] = 0
            for r in range(n_runs):
                lo_r = run_lo[r]
                len_r = run_len[r]
                for j in range(m):
                    hit[j] |= np.uint32(bucket[j] - lo_r) < len_r
            for j in range(m):
                n_hit += hit[j]
        else:
            for j in range(m):
                h = wanted[bucket[j]]
                hit[j] = h
                n_hit += h
        if n_hit == 0:
            continue
        yb = y[bstart:bstart + m]
        for j in range(m):
            if hit[j] == 0:
                continue
            x = np.float64(pb[j])
            yv = np.float64(yb[j])
            if not ((x >= 0.0) & (x <= 1.0)) or yv != yv:
                continue
            s = slot[bucket[j]]
            i = cap_start[s] + filled[s]
            if i < cap_start[s + 1]:  # a row beyond the slot's room is counted, not written
                buf[0] = x
                keys[i] = max(ibuf[0], 0)
                labels[i] = np.uint8(yv == 1.0)
            filled[s] += 1
    # close the gaps: the slots' rows one after the other from 0
    at = 0
    for s in range(filled.shape[0]):
        a = cap_start[s]
        kept = min(filled[s], cap_start[s + 1] - a)
        for i in range(kept):
            keys[at + i] = keys[a + i]
            labels[at + i] = labels[a + i]
        at += kept


@njit(nogil=True, error_model="numpy", cache=True)
def bucket_groups(fine_counts, fine_p, n_bins, counts, sums, cand, cand_below):
    """Add every value bucket that lies inside one equal-mass group to that
    group (counts: rows, positives, correct; sums: p) and list the others,
    the buckets with a group boundary strictly inside, in cand (with the rows
    of smaller value, cand_below). Returns the number of those buckets.

    Group g holds the ranks [g n // G, (g + 1) n // G) of the n rows.
    """
    nb = fine_counts.shape[0] - 1
    n = 0
    for b in range(nb):
        n += fine_counts[b, 0]
    n_cand = 0
    below = 0
    g = 0
    for b in range(nb):
        m = fine_counts[b, 0]
        if m == 0:
            continue
        while (g + 1) * n // n_bins <= below:  # the group of the bucket's first rank
            g += 1
        if g + 1 < n_bins and (g + 1) * n // n_bins < below + m:
            cand[n_cand] = b
            cand_below[n_cand] = below
            n_cand += 1
        else:
            for c in range(3):
                counts[g, c] += fine_counts[b, c]
            sums[g, 0] += fine_p[b]
        below += m
    return n_cand


@njit(nogil=True, error_model="numpy", cache=True)
def add_rows(x, labels, groups, counts, sums):
    """Add rows of value x[i] and label labels[i] to group groups[i], in order
    (counts: rows, positives, correct; sums: p). The ranking that decides the
    groups is done with NumPy's sorts (fastcal.accumulators.equal_mass), which
    need no compiling."""
    for i in range(x.shape[0]):
        _add_row(counts, sums, groups[i], x[i], labels[i])


@njit(inline="always", cache=True)
def _add_row(counts, sums, g, x, label):
    pos = label == 1
    counts[g, 0] += 1
    counts[g, 1] += np.int64(pos)
    counts[g, 2] += np.int64((x > 0.5) == pos)
    sums[g, 0] += x

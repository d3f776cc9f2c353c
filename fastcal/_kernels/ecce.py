"""Kernels of the exact ECCE (Arrieta-Ibarra et al., 2022): bucket sums and probes.

Only @njit functions over arrays and scalars (fastcal.accumulators.ecce drives
them). ECCE is the range of the running sums of w (y - x) in the order of x
(x a probability in [0, 1], y a label 0/1, w a row weight; an empty ``w``
means every weight is 1). The running sum at the end of a value bucket is the
sum over that bucket and the ones below it, so one pass gives it at every
bucket boundary; inside a bucket it can rise at most by the bucket's sum of
w y (1 - x) and fall at most by its sum of w (1 - y) x. The running sums
themselves add the terms w (y - x) (their own sum, kept apart: the
difference of the rise and the fall would lose digits where both are large).
Two kinds of pass,
each over one part of the data and mergeable:

- ``bucket_sums_range``: per value bucket floor(x B) (B = ``BUCKETS``, x = 1
  in the last bucket): rows (int64), sums of w y (1 - x), w (1 - y) x and
  w (y - x);
  the totals sum of w and sum of w**2 x (1 - x) (the variance under
  calibration).
- ``probe_ranges``: for a few ranges of float64 bit patterns (the sort key),
  each inside one bucket: count the rows, gather (key, label, weight) of
  small ranges, or sum them in 2**k sub-ranges of big ones.

Rows whose x is not in [0, 1] or whose y is not 0/1 (NaN rows that the fill
omits) are skipped: the fill has refused every other invalid row before.
"""

import numpy as np

from ._lazy import njit
from ._threads import run_threads, thread_range

# Value buckets of the ECCE state (a power of two, so x * BUCKETS is exact): 65,536
# buckets take 2 MiB (a count and three sums each).
BUCKETS = 1 << 16


@njit(inline="always", cache=True)
def _weight(w, i):
    return 1.0 if w.shape[0] == 0 else np.float64(w[i])


@njit(inline="always", cache=True)
def _add_row(acc, b, xv, yv, wv):
    """Add a row (value xv, label yv, weight wv) to bucket b of a scratch of
    (rows, rise, fall, sum of w (y - x)); returns its variance term w**2 x (1 - x)."""
    acc[b, 0] += 1.0
    acc[b, 1] += wv * yv * (1.0 - xv)
    acc[b, 2] += wv * (1.0 - yv) * xv
    acc[b, 3] += wv * (yv - xv)
    return wv * wv * (xv * (1.0 - xv))


@njit(nogil=True, error_model="numpy", cache=True)
def bucket_sums_range(x, y, w, start, stop, counts, sums, totals):
    """Add rows [start, stop) to ``counts`` (B + 1,), ``sums`` (B + 1, 3): the
    sums of w y (1 - x), w (1 - y) x and w (y - x) per bucket, and ``totals``
    (2,): the sums of w and of w**2 x (1 - x). Row B of counts and sums stays
    unused.

    The rows are scattered into one packed scratch (rows as float64, exact
    below 2**53, and both sums side by side: one cache line a row, where
    separate arrays take two; the rows come in no order of x) and added to
    the state at the end; branch-free terms (y is 0 or 1).
    """
    nb = counts.shape[0] - 1
    scale = np.float64(nb)
    top = nb - 1
    acc = np.zeros((nb, 4), np.float64)
    tw = 0.0
    tv = 0.0
    for i in range(start, stop):
        xv = np.float64(x[i])
        yv = np.float64(y[i])
        if not ((xv >= 0.0) & (xv <= 1.0) & ((yv == 0.0) | (yv == 1.0))):
            continue
        wv = _weight(w, i)
        tw += wv
        tv += _add_row(acc, min(np.int64(xv * scale), top), xv, yv, wv)
    for b in range(nb):
        counts[b] += np.int64(acc[b, 0])
        sums[b, 0] += acc[b, 1]
        sums[b, 1] += acc[b, 2]
        sums[b, 2] += acc[b, 3]
    totals[0] += tw
    totals[1] += tv


@njit(nogil=True, error_model="numpy", cache=True)
def segment_sums_range(x, y, w, g, start, stop, counts, sums, totals):
    """``bucket_sums_range`` per segment: row i is added to segment g[i]
    (counts (S, B + 1), sums (S, B + 1, 3), totals (S, 2)); a negative code
    puts it in none.

    The rows of one segment are summed in a packed scratch of one segment's
    buckets (one cache line a row, as in ``bucket_sums_range``), added to the
    state when the code changes: rows grouped by segment (sorted by code) are
    read once, each segment's sums staying in cache. Only the buckets a run of
    rows touched are added and cleared, so rows in any order cost the same
    per row.
    """
    nb = counts.shape[1] - 1
    scale = np.float64(nb)
    top = nb - 1
    acc = np.zeros((nb, 4), np.float64)
    touched = np.empty(nb, np.int64)
    n_touched = 0
    tw = 0.0
    tv = 0.0
    cur = np.int64(-1)
    for i in range(start, stop):
        xv = np.float64(x[i])
        yv = np.float64(y[i])
        c = np.int64(g[i])
        if not ((xv >= 0.0) & (xv <= 1.0) & ((yv == 0.0) | (yv == 1.0))) or c < 0:
            continue
        if c != cur:
            if cur >= 0:
                _flush_segment(acc, touched, n_touched, tw, tv, counts[cur], sums[cur],
                               totals[cur])
            n_touched = 0
            tw = 0.0
            tv = 0.0
            cur = c
        wv = _weight(w, i)
        b = min(np.int64(xv * scale), top)
        if acc[b, 0] == 0.0:
            touched[n_touched] = b
            n_touched += 1
        tw += wv
        tv += _add_row(acc, b, xv, yv, wv)
    if cur >= 0:
        _flush_segment(acc, touched, n_touched, tw, tv, counts[cur], sums[cur], totals[cur])


@njit(inline="always", cache=True)
def _flush_segment(acc, touched, n_touched, tw, tv, counts, sums, totals):
    """Add the touched buckets of the scratch to one segment's state and clear them."""
    for t in range(n_touched):
        b = touched[t]
        counts[b] += np.int64(acc[b, 0])
        sums[b, 0] += acc[b, 1]
        sums[b, 1] += acc[b, 2]
        sums[b, 2] += acc[b, 3]
        acc[b, 0] = 0.0
        acc[b, 1] = 0.0
        acc[b, 2] = 0.0
        acc[b, 3] = 0.0
    totals[0] += tw
    totals[1] += tv


def bucket_sums(x, y, w, n_threads, counts, sums, totals):
    """Add every row to the bucket sums: one contiguous range per thread, each
    into its own arrays, added in thread order."""
    rows = x.shape[0]
    if n_threads == 1:
        bucket_sums_range(x, y, w, 0, rows, counts, sums, totals)
        return
    parts = [(np.zeros_like(counts), np.zeros_like(sums), np.zeros_like(totals))
             for _ in range(n_threads)]

    def run(t):
        start, stop = thread_range(t, rows, n_threads)
        bucket_sums_range(x, y, w, start, stop, *parts[t])

    run_threads(n_threads, run)
    for c, s, t in parts:
        counts += c
        sums += s
        totals += t


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


@njit(inline="always", cache=True)
def _segment(g, i, n_buckets):
    """The first combined bucket of row i's segment (segment code x B; -1: the
    row is in no segment); 0 without segment codes."""
    if g.shape[0] == 0:
        return 0
    code = np.int64(g[i])
    return code * n_buckets if code >= 0 else -1


@njit(nogil=True, error_model="numpy", cache=True)
def _mark(x, g, scale, top, n_buckets, wanted, hit):
    """hit[i] = 1 where x[i] is in [0, 1] and its (segment, value) bucket is
    wanted (a byte per bucket, 64 KiB a segment: mostly an L2 look-up; about
    2 ns a row)."""
    for i in range(x.shape[0]):
        xv = np.float64(x[i])
        ok = (xv >= 0.0) & (xv <= 1.0)
        b = min(np.int64(xv * scale if ok else 0.0), top)
        base = _segment(g, i, n_buckets)
        hit[i] = wanted[base + b] & ok if base >= 0 else 0


@njit(nogil=True, error_model="numpy", cache=True)
def probe_ranges(x, y, w, g, n_buckets, first, lo, hi, shift, mode, sizes):
    """Look at the rows whose key lies in one of the ranges [lo[s], hi[s]].

    ``g``: a segment code per row (empty: one segment; a negative code: in
    none). Ranges are sorted by (segment, lo), disjoint within a segment, and
    each lies inside one value bucket of one segment: those of bucket b of
    segment c are first[c B + b]:first[c B + b + 1] (B = ``n_buckets``). Per range s: count its rows,
    gather their (key, label, weight) (mode 1) or add them to cell
    (key - lo[s]) >> shift[s] of sizes[s] cells (mode 2): rows, sum of
    w y (1 - x), of w (1 - y) x and of w (y - x).

    Returns (count, keys, labels, weights, key_start, cells, cell_sums,
    cell_start): the gathered rows of range s are [key_start[s],
    key_start[s + 1]) in row order (weights empty when ``w`` is), its cells
    cell_start[s]:cell_start[s + 1]. A byte per bucket says whether it holds
    a range (``_mark``), so most rows cost a look-up in a 64 KiB table; the
    rows to gather are counted by a first loop and copied by a second.
    """
    n_ranges = lo.shape[0]
    count = np.zeros(n_ranges, np.int64)
    cell_start = np.zeros(n_ranges + 1, np.int64)
    for s in range(n_ranges):
        cell_start[s + 1] = cell_start[s] + (sizes[s] if mode[s] == 2 else 0)
    cells = np.zeros(cell_start[n_ranges], np.int64)
    cell_sums = np.zeros((cell_start[n_ranges], 3), np.float64)
    n_all = first.shape[0] - 1  # buckets of every segment
    wanted = np.zeros(n_all, np.uint8)
    for b in range(n_all):
        wanted[b] = first[b + 1] > first[b]
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    buf = np.empty(1, np.float64)
    ibuf = buf.view(np.int64)
    n = x.shape[0]
    n_gather = 0
    hit = np.empty(n, np.uint8)
    _mark(x, g, scale, top, n_buckets, wanted, hit)
    for i in range(n):
        if hit[i] == 0:
            continue
        xv = np.float64(x[i])
        b = _segment(g, i, n_buckets) + min(np.int64(xv * scale), top)
        buf[0] = xv
        k = max(ibuf[0], 0)
        s = _find(k, lo, hi, first[b], first[b + 1])
        if s < 0:
            continue
        yv = np.float64(y[i])
        if not ((yv == 0.0) | (yv == 1.0)):
            continue
        count[s] += 1
        m = mode[s]
        if m == 1:
            n_gather += 1
        elif m == 2:
            c = cell_start[s] + ((k - lo[s]) >> shift[s])
            cells[c] += 1
            wv = _weight(w, i)
            cell_sums[c, 0] += wv * yv * (1.0 - xv)
            cell_sums[c, 1] += wv * (1.0 - yv) * xv
            cell_sums[c, 2] += wv * (yv - xv)
    key_start = np.zeros(n_ranges + 1, np.int64)
    for s in range(n_ranges):
        key_start[s + 1] = key_start[s] + (count[s] if mode[s] == 1 else 0)
    keys = np.empty(n_gather, np.int64)
    labels = np.empty(n_gather, np.uint8)
    weights = np.empty(n_gather if w.shape[0] else 0, np.float64)
    if n_gather:
        fill = key_start[:n_ranges].copy()
        for i in range(n):
            if hit[i] == 0:
                continue
            xv = np.float64(x[i])
            b = _segment(g, i, n_buckets) + min(np.int64(xv * scale), top)
            buf[0] = xv
            k = max(ibuf[0], 0)
            s = _find(k, lo, hi, first[b], first[b + 1])
            if s < 0 or mode[s] != 1:
                continue
            yv = np.float64(y[i])
            if not ((yv == 0.0) | (yv == 1.0)):
                continue
            j = fill[s]
            keys[j] = k
            labels[j] = np.uint8(yv == 1.0)
            if w.shape[0]:
                weights[j] = np.float64(w[i])
            fill[s] = j + 1
    return count, keys, labels, weights, key_start, cells, cell_sums, cell_start


@njit(nogil=True, error_model="numpy", cache=True)
def gathered_extremes(keys, d, starts, stops, ranges, c0, seg, top, bottom):
    """Raise ``top`` / lower ``bottom`` (per segment, in place) to the extremes of the
    running sums over gathered ranges: the rows of range ``ranges[j]`` are
    [starts[j], stops[j]), ranked by their key (float64 bits), ``d`` their terms
    w (y - x); C = c0[r] + the running sum of d, taken at the end of each run of
    equal keys (the sums of ``numpy.cumsum``, added to c0 as the vectorised code did)."""
    for j in range(ranges.shape[0]):
        r = ranges[j]
        a = starts[j]
        b = stops[j]
        s = seg[r]
        run = 0.0
        for i in range(a, b):
            run += d[i]
            if i == b - 1 or keys[i + 1] != keys[i]:
                c = c0[r] + run
                if c > top[s]:
                    top[s] = c
                if c < bottom[s]:
                    bottom[s] = c

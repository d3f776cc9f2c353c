"""Kernels of segments: the rows of each segment code in their order (a counting
sort), and the binary per-bin state of every segment in one pass.

Only @njit functions over arrays and scalars (fastcal.inputs.segments and
fastcal.accumulators.segmented drive them).
"""

import numpy as np

from ._config import BLOCK, FASTMATH
from ._lazy import njit
from ._threads import run_threads, thread_range
from .binary import _uniform_ok, bins_and_logs
from .rows import binary_terms


@njit(nogil=True, error_model="numpy", cache=True)
def mark_values(values, start, stop, lo, present):
    """``present[v - lo] = 1`` for each of the int64 ``values[start:stop]`` (all in
    [lo, lo + present.shape[0]))."""
    for i in range(start, stop):
        present[values[i] - lo] = 1


@njit(nogil=True, error_model="numpy", cache=True)
def value_codes(values, start, stop, lo, rank, codes):
    """``codes[i] = rank[values[i] - lo]`` for i in [start, stop)."""
    for i in range(start, stop):
        codes[i] = rank[values[i] - lo]


@njit(nogil=True, error_model="numpy", cache=True)
def stable_order(codes, n_keys):
    """(order, bounds): the rows of code k are ``order[bounds[k]:bounds[k + 1]]``, in
    their order; ``codes`` int64 in [0, n_keys). A counting sort: one pass counts
    the rows of each code, a second writes each row's index at its code's next
    place (sequential reads, one write stream per code)."""
    n = codes.shape[0]
    bounds = np.zeros(n_keys + 1, np.int64)
    for i in range(n):
        bounds[codes[i] + 1] += 1
    for k in range(n_keys):
        bounds[k + 1] += bounds[k]
    at = bounds[:n_keys].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        c = codes[i]
        order[at[c]] = i
        at[c] += 1
    return order, bounds


@njit(nogil=True, error_model="numpy", cache=True)
def count_codes(codes, start, stop, counts):
    """Add the rows [start, stop) of each code to ``counts`` (a thread's share of
    a counting sort's first pass)."""
    for i in range(start, stop):
        counts[codes[i]] += 1


@njit(nogil=True, error_model="numpy", cache=True)
def group_rows(x, codes, start, stop, at, out):
    """Write rows [start, stop) of ``x`` grouped by code: row i at ``out[at[c]]``,
    ``at[c]`` then moved on (``at`` the next place of each code, in place): a
    counting sort's second pass over one thread's range (sequential reads, one
    write stream per code), each code's rows in their order."""
    for i in range(start, stop):
        c = codes[i]
        out[at[c]] = x[i]
        at[c] += 1


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_binary_segments(p, y, codes, rowmap, start, stop, edges, uniform, right, eps, with_logs,
                         counts, sums, totals):
    """Add rows [start, stop) of binary (p, y), checked, to the state of segment
    ``rowmap[codes[i]]``: counts (S, nb + 1, 3), sums (S, nb + 1, 3) and totals
    (S, 7) as one binary fill of each segment's rows keeps them
    (:mod:`fastcal._kernels.binary`).

    Per block of rows, the fill's own first stage (bins and logarithms,
    vectorised), then a scalar loop of the per-row terms (``rows.binary_terms``)
    added to the row's segment: the six per-bin values side by side in one
    float64 scratch row (counts exact below 2**53), added to the state at the
    end. The rows were checked by the fill of the whole: a row that is not valid
    here is one omitted (a NaN under nan_policy='omit'); it goes to its
    segment's trash row nb as the fill sends it (p = 0.5, y = 0: counts
    (1, 0, 1), sum of p 0.5), so a segment's rows are its counts' and its
    omitted rows the trash row's. ``with_logs`` False keeps the counts and the
    sums of p only, as the fill does. Sums are added in row order (the fill adds
    them in blocks: the same sums to rounding). Returns the rows not valid.
    """
    nb = edges.shape[0] - 1
    n_seg = counts.shape[0]
    lo = eps
    hi = 1.0 - eps
    uniform = uniform and _uniform_ok(edges, p.itemsize == 4)
    bi = np.empty(BLOCK, np.int64)
    lpv = np.empty(BLOCK, np.float64)
    lqv = np.empty(BLOCK, np.float64)
    acc = np.zeros((n_seg * (nb + 1), 6), np.float64)
    bad = 0
    for bstart in range(start, stop, BLOCK):
        m = min(BLOCK, stop - bstart)
        pb = p[bstart:bstart + m]
        bins_and_logs(pb, edges, nb, uniform, right, lo, hi, with_logs, bi, lpv, lqv)
        for j in range(m):
            i = bstart + j
            c = rowmap[codes[i]]
            pj = np.float64(p[i])
            yj = np.float64(y[i])
            good = (pj >= 0.0) & (pj <= 1.0) & ((yj == 0.0) | (yj == 1.0))
            ps = pj if good else 0.5
            ys = yj if good else 0.0
            bad += np.int64(not good)
            k = c * (nb + 1) + (bi[j] if good else nb)
            pos = np.float64(ys == 1.0)
            acc[k, 0] += 1.0
            acc[k, 1] += pos
            acc[k, 2] += np.float64((ps > 0.5) == (ys == 1.0))
            acc[k, 3] += ps
            if with_logs and good:
                q = min(max(pj, lo), hi)
                e, v, nll, br = binary_terms(q, pj, yj, lpv[j], lqv[j])
                acc[k, 4] += e
                acc[k, 5] += v
                totals[c, 0] += br
                totals[c, 1] += nll
                totals[c, 2] += e * e
                totals[c, 3] += br * br
                totals[c, 4] += nll * nll
                totals[c, 5] += pj * pj
                totals[c, 6] += pj * yj
    _flush_segments(acc, counts, sums)
    return bad


@njit(nogil=True, error_model="numpy", cache=True)
def _flush_segments(acc, counts, sums):
    """Add the packed scratch (a row per segment and bin: rows, positives, correct
    labels as float64, then the three sums) to the state's counts and sums."""
    nb1 = counts.shape[1]
    for c in range(counts.shape[0]):
        for b in range(nb1):
            k = c * nb1 + b
            if acc[k, 0] == 0.0:
                continue
            counts[c, b, 0] += np.int64(acc[k, 0])
            counts[c, b, 1] += np.int64(acc[k, 1])
            counts[c, b, 2] += np.int64(acc[k, 2])
            sums[c, b, 0] += acc[k, 3]
            sums[c, b, 1] += acc[k, 4]
            sums[c, b, 2] += acc[k, 5]


def fill_segments_threads(p, y, codes, rowmap, edges, uniform, right, eps, with_logs, counts,
                          sums, totals, n_threads):
    """``fill_binary_segments`` of every row: one contiguous range per thread, each
    into its own arrays, added to ``counts``, ``sums`` and ``totals`` in thread order.
    Returns the rows not valid."""
    n = p.shape[0]
    args = (edges, uniform, right, eps, with_logs)
    if n_threads == 1:
        return fill_binary_segments(p, y, codes, rowmap, 0, n, *args, counts, sums, totals)
    parts = [(np.zeros_like(counts), np.zeros_like(sums), np.zeros_like(totals))
             for _ in range(n_threads)]
    bad = [0] * n_threads

    def run(t):
        start, stop = thread_range(t, n, n_threads)
        bad[t] = fill_binary_segments(p, y, codes, rowmap, start, stop, *args, *parts[t])

    run_threads(n_threads, run)
    for c, s, t in parts:
        counts += c
        sums += s
        totals += t
    return sum(bad)


__all__ = ["count_codes", "fill_binary_segments", "fill_segments_threads", "group_rows",
           "mark_values", "stable_order", "value_codes"]

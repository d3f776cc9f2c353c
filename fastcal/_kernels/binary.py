"""Single-pass fill of per-bin statistics for binary predictions.

Only @njit functions over arrays and scalars: no validation, no objects. The
public modules check arguments once and then call ``fill``.

State layout (one row per bin, plus one "trash" row at index n_bins that
receives rows to be omitted or rows that are invalid, so the hot loop has no
branches):

    counts[b, 0]  number of samples                      int64
    counts[b, 1]  number of positives (y == 1)            int64
    counts[b, 2]  number of correct thresholded labels    int64  ((p > 0.5) == y)
    sums[b, 0]    sum of p                                float64
    sums[b, 1]    sum of ECD terms (p - y) * logit(p)     float64  (eq. 15)
    sums[b, 2]    sum of p (1 - p) logit(p)**2            float64  (Var of ECD term if calibrated)
    totals[0..4]  sums of Brier terms, NLL terms, squared ECD, squared Brier and squared NLL terms
    checks[0..7]  invalid-input counts and first indices (see CHECK_* below)
"""

import numpy as np
from numba import njit, prange

from ._config import BLOCK, COPIES, FASTMATH, FLUSH
from .mathfn import log1m, log64

N_COUNTS = 3
N_SUMS = 3
N_TOTALS = 5

# checks[]: counts then first (smallest) row index of each kind, -1 if none
CHECK_NAN_P = 0      # p is NaN
CHECK_RANGE_P = 1    # p is not NaN and outside [0, 1] (includes +-inf)
CHECK_BAD_Y = 2      # label is not NaN and not 0/1
CHECK_NAN_Y = 3      # label is NaN (float labels only)
CHECK_OMITTED = 4    # rows dropped under nan_policy='omit' (p or label NaN)
N_CHECK_KINDS = 5

_SHIFT_POS = 21
_SHIFT_OK = 42
_FIELD = (1 << 21) - 1


@njit(inline="always", error_model="numpy", cache=True)
def _bin_uniform(p, edges, nb, nbf, right):
    """Bin of p for uniform edges, exact at every edge (edges already rounded to p's dtype).

    p * n can be one ulp off an integer (0.3 * 10 = 2.9999999999999996), so the
    first guess is corrected once against the stored edges, branch-free.
    """
    b = min(np.int64(p * nbf), nb - 1)
    if right:
        # (a, b] with p = 0 in the first bin
        b = b - np.int64((b > 0) & (p <= edges[b]))
        b = b + np.int64((b < nb - 1) & (p > edges[b + 1]))
    else:
        # [a, b) with p = 1 in the last bin
        b = b - np.int64(p < edges[b])
        b = b + np.int64((b < nb - 1) & (p >= edges[b + 1]))
    return b


@njit(inline="always", error_model="numpy", cache=True)
def _bin_search(p, edges, nb, right):
    """Bin of p for arbitrary sorted edges spanning [0, 1]."""
    if right:
        b = np.searchsorted(edges, p, side="left") - 1
        return max(b, 0)
    b = np.searchsorted(edges, p, side="right") - 1
    return min(b, nb - 1)


@njit(error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_range(p, y, start, stop, edges, uniform, right, omit, eps, with_logs,
               counts, sums, totals, checks):
    """Add rows [start, stop) of (p, y) into counts, sums, totals and checks.

    ``checks`` first-index entries are absolute row numbers (start-based).
    """
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    lo = eps
    hi = 1.0 - eps
    # Scratch for one block.
    pv = np.empty(BLOCK, np.float64)
    yv = np.empty(BLOCK, np.float64)
    wv = np.empty(BLOCK, np.float64)
    bi = np.empty(BLOCK, np.int64)
    lp = np.empty(BLOCK, np.float64)
    lq = np.empty(BLOCK, np.float64)
    pe = np.empty(BLOCK, np.float64)
    ecd = np.empty(BLOCK, np.float64)
    var = np.empty(BLOCK, np.float64)
    # Interleaved per-bin scratch: packed integer counters and float sums.
    loc_i = np.zeros((COPIES, nb + 1), np.int64)
    loc_p = np.zeros((COPIES, nb + 1), np.float64)
    loc_e = np.zeros((COPIES, nb + 1), np.float64)
    loc_v = np.zeros((COPIES, nb + 1), np.float64)
    since_flush = 0
    for bstart in range(start, stop, BLOCK):
        m = min(BLOCK, stop - bstart)
        # Stage 1: load, classify, sanitise, bin.
        n_nan_p = 0
        n_range = 0
        n_bad_y = 0
        n_nan_y = 0
        for j in range(m):
            pj = np.float64(p[bstart + j])
            yj = np.float64(y[bstart + j])
            nan_p = pj != pj
            nan_y = yj != yj
            in_range = (pj >= 0.0) & (pj <= 1.0)
            y_ok = (yj == 0.0) | (yj == 1.0)
            good = in_range & y_ok
            n_nan_p += nan_p
            n_range += (~in_range) & (~nan_p)
            n_bad_y += (~y_ok) & (~nan_y)
            n_nan_y += nan_y
            ps = pj if good else 0.5
            ys = yj if good else 0.0
            if uniform:
                b = _bin_uniform(ps, edges, nb, nbf, right)
            else:
                b = _bin_search(ps, edges, nb, right)
            bi[j] = b if good else nb
            pv[j] = ps
            yv[j] = ys
            wv[j] = 1.0 if good else 0.0
        if n_nan_p + n_range + n_bad_y + n_nan_y > 0:
            _record_checks(p, y, bstart, m, omit, checks)
        # Stage 2: logarithms (vectorised).
        if with_logs:
            for j in range(m):
                q = min(max(pv[j], lo), hi)
                pe[j] = q
                lp[j] = log64(q)
                lq[j] = log1m(q)
            # Stage 3: per-sample terms and global sums.
            s_brier = 0.0
            s_nll = 0.0
            s_ecd2 = 0.0
            s_brier2 = 0.0
            s_nll2 = 0.0
            for j in range(m):
                w = wv[j]
                q = pe[j]
                yy = yv[j]
                logit = lp[j] - lq[j]
                d = q - yy
                # Limits: (p - y) logit(p) -> 0 when p == y in {0, 1}.
                e = 0.0 if d == 0.0 else d * logit
                pq = q * (1.0 - q)
                v = 0.0 if pq == 0.0 else pq * logit * logit
                nll = -lp[j] if yy == 1.0 else -lq[j]
                db = pv[j] - yy
                br = db * db
                ecd[j] = e
                var[j] = v
                s_brier += w * br
                s_brier2 += w * br * br
                s_nll += w * nll
                s_nll2 += w * nll * nll
                s_ecd2 += w * e * e
            totals[0] += s_brier
            totals[1] += s_nll
            totals[2] += s_ecd2
            totals[3] += s_brier2
            totals[4] += s_nll2
        else:
            for j in range(m):
                ecd[j] = 0.0
                var[j] = 0.0
        # Stage 4: scatter into interleaved copies.
        for j in range(m):
            b = bi[j]
            c = j & (COPIES - 1)
            pj = pv[j]
            pos = np.int64(yv[j] == 1.0)
            ok = np.int64((pj > 0.5) == (yv[j] == 1.0))
            loc_i[c, b] += 1 + (pos << _SHIFT_POS) + (ok << _SHIFT_OK)
            loc_p[c, b] += pj
            loc_e[c, b] += ecd[j]
            loc_v[c, b] += var[j]
        since_flush += m
        if since_flush >= FLUSH:
            _flush(loc_i, loc_p, loc_e, loc_v, counts, sums)
            since_flush = 0
    _flush(loc_i, loc_p, loc_e, loc_v, counts, sums)


@njit(error_model="numpy", cache=True)
def _flush(loc_i, loc_p, loc_e, loc_v, counts, sums):
    nb1 = loc_i.shape[1]
    for c in range(loc_i.shape[0]):
        for b in range(nb1):
            packed = loc_i[c, b]
            counts[b, 0] += packed & _FIELD
            counts[b, 1] += (packed >> _SHIFT_POS) & _FIELD
            counts[b, 2] += (packed >> _SHIFT_OK) & _FIELD
            sums[b, 0] += loc_p[c, b]
            sums[b, 1] += loc_e[c, b]
            sums[b, 2] += loc_v[c, b]
            loc_i[c, b] = 0
            loc_p[c, b] = 0.0
            loc_e[c, b] = 0.0
            loc_v[c, b] = 0.0


@njit(error_model="numpy", cache=True)
def _record_checks(p, y, bstart, m, omit, checks):
    """Slow path, only for blocks holding invalid values: count and locate them."""
    for j in range(m):
        i = bstart + j
        pj = np.float64(p[i])
        yj = np.float64(y[i])
        nan_p = pj != pj
        nan_y = yj != yj
        if nan_p or nan_y:
            _note(checks, CHECK_OMITTED, i)
        if nan_p:
            _note(checks, CHECK_NAN_P, i)
        elif not (pj >= 0.0 and pj <= 1.0):
            _note(checks, CHECK_RANGE_P, i)
        if nan_y:
            _note(checks, CHECK_NAN_Y, i)
        elif not (yj == 0.0 or yj == 1.0):
            _note(checks, CHECK_BAD_Y, i)


@njit(inline="always", cache=True)
def _note(checks, kind, i):
    checks[kind] += 1
    first = checks[N_CHECK_KINDS + kind]
    if first < 0 or i < first:
        checks[N_CHECK_KINDS + kind] = i


def new_state(n_bins):
    """Zeroed state arrays for n_bins bins (plus the trash row)."""
    counts = np.zeros((n_bins + 1, N_COUNTS), np.int64)
    sums = np.zeros((n_bins + 1, N_SUMS), np.float64)
    totals = np.zeros(N_TOTALS, np.float64)
    checks = np.full(2 * N_CHECK_KINDS, -1, np.int64)
    checks[:N_CHECK_KINDS] = 0
    return counts, sums, totals, checks


@njit(error_model="numpy", cache=True)
def _new_checks():
    checks = np.full(2 * N_CHECK_KINDS, -1, np.int64)
    checks[:N_CHECK_KINDS] = 0
    return checks


@njit(parallel=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_parallel(p, y, edges, uniform, right, omit, eps, with_logs, n_threads):
    """Fill fresh state from all of (p, y) with n_threads contiguous ranges.

    Per-thread state, prange over threads, then a serial reduction in thread
    order: no shared writes, no atomics.
    """
    n = p.shape[0]
    nb = edges.shape[0] - 1
    t_counts = np.zeros((n_threads, nb + 1, N_COUNTS), np.int64)
    t_sums = np.zeros((n_threads, nb + 1, N_SUMS), np.float64)
    t_totals = np.zeros((n_threads, N_TOTALS), np.float64)
    t_checks = np.empty((n_threads, 2 * N_CHECK_KINDS), np.int64)
    for t in prange(n_threads):
        t_checks[t] = _new_checks()
        start = (t * n) // n_threads
        stop = ((t + 1) * n) // n_threads
        fill_range(p, y, start, stop, edges, uniform, right, omit, eps, with_logs,
                   t_counts[t], t_sums[t], t_totals[t], t_checks[t])
    counts = t_counts[0].copy()
    sums = t_sums[0].copy()
    totals = t_totals[0].copy()
    checks = t_checks[0].copy()
    for t in range(1, n_threads):
        counts += t_counts[t]
        sums += t_sums[t]
        totals += t_totals[t]
        for k in range(N_CHECK_KINDS):
            checks[k] += t_checks[t, k]
            f = t_checks[t, N_CHECK_KINDS + k]
            if f >= 0 and (checks[N_CHECK_KINDS + k] < 0 or f < checks[N_CHECK_KINDS + k]):
                checks[N_CHECK_KINDS + k] = f
    return counts, sums, totals, checks

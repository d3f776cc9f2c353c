"""Single-pass fill of calibration statistics for multi-class predictions.

Only @njit functions over arrays and scalars: no validation, no objects.

Input: ``P`` of shape (n, K), probabilities or (``logits=True``) scores, any
strides; labels ``y`` of shape (n,), integer or float.

Top-label (confidence) state, in the binary kernel's layout so the accumulator
and report code can share it ("positive" means "the argmax is the label"):

    counts[b, 0]  rows whose max probability falls in bin b      int64
    counts[b, 1]  of those, rows whose argmax equals the label   int64
    counts[b, 2]  same as counts[b, 1] (the binary "correct")    int64
    sums[b, 0]    sum of the max probability                     float64
    sums[b, 1]    sum of ECD terms sum_k p_k log p_k - log p_y   float64  (eq. 12)
    sums[b, 2]    sum of sum_k p_k (log p_k - H)^2, H = sum_k p_k log p_k
                  (the variance of the ECD term if the label were drawn from p)
    totals[0..4]  sums of Brier terms sum_k (p_k - 1[y = k])^2, NLL terms
                  -log p_y, squared ECD terms, squared Brier, squared NLL
    totals[5..6]  sums of sum_k p_k**2 and p_y (the within-bin terms of the
                  class-wise Brier decomposition; binary logits: p**2 and p*y)

With ``with_logs=False`` (binned metrics only) no logarithm is taken and the
ECD, variance and NLL sums stay 0.

counts and sums have n_bins + 1 rows like the binary state; the last row stays
zero here (invalid rows are skipped, not binned).

Class-wise state (only if ``classwise``):

    ccounts[k, b, 0]  rows whose p_k falls in bin b               int64
    ccounts[k, b, 1]  of those, rows with label k                 int64
    csums[k, b]       sum of p_k over those rows                  float64

checks[0..N_CHECK_KINDS) are counts of invalid rows by kind, followed by the
first (smallest) row index of each kind, -1 if none.
"""

import numpy as np

from ._cache import njit
from ._threads import merge_checks, run_threads, thread_range
from ._config import COPIES, FASTMATH
from .mathfn import log64, search_sorted

N_COUNTS = 3
N_SUMS = 3
N_TOTALS = 7

CHECK_NAN_P = 0      # row has a NaN in y_prob
CHECK_INF_P = 1      # row has +-inf (probabilities) or +inf / all -inf (logits), no NaN
CHECK_NEG_P = 2      # row has a negative probability (finite)
CHECK_SUM_P = 3      # row sum differs from 1 by more than tol (or is 0 when renormalising)
CHECK_BAD_Y = 4      # label not NaN and not an integer in [0, K)
CHECK_NAN_Y = 5      # label is NaN
CHECK_OMITTED = 6    # rows dropped under nan_policy='omit' (NaN in the row or label)
CHECK_BAD_T = 7      # soft labels only: target row negative, non-finite or not summing to 1
N_CHECK_KINDS = 8

_LOG2E = 1.4426950408889634
ROWWISE_K = 64  # from this many classes on, the row-at-a-time kernel is used (faster there)
_FEW_BINS = 16  # class-wise state: compare-and-add per bin up to this many bins, else scatter
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


@njit(inline="always", fastmath=FASTMATH, cache=True, error_model="numpy")
def exp64(x):
    """exp(x) for x <= 0 (float64), branch-free so loops over it vectorise.

    x = n ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor series to r**13
    (truncation below 2e-16 relative), times 2**n built from the exponent
    bits. Results below the smallest normal float64 (x < -708.39) are 0.
    """
    xc = max(x, -708.0)
    n = np.floor(xc * _LOG2E + 0.5)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    # Horner form of sum_{j=0}^{13} r**j / j!
    e = 1.0 / 6227020800.0
    e = 1.0 / 479001600.0 + r * e
    e = 1.0 / 39916800.0 + r * e
    e = 1.0 / 3628800.0 + r * e
    e = 1.0 / 362880.0 + r * e
    e = 1.0 / 40320.0 + r * e
    e = 1.0 / 5040.0 + r * e
    e = 1.0 / 720.0 + r * e
    e = 1.0 / 120.0 + r * e
    e = 1.0 / 24.0 + r * e
    e = 1.0 / 6.0 + r * e
    e = 0.5 + r * e
    e = 1.0 + r * e
    e = 1.0 + r * e
    bits = np.uint64(np.int64(n) + 1023) << np.uint64(52)
    out = e * np.uint64(bits).view(np.float64)
    return 0.0 if x < -708.0 else out


@njit(inline="always", error_model="numpy", cache=True)
def _bin(p, edges, nb, nbf, uniform, right):
    """Bin of p in [0, 1] (values a rounding above 1 go to the last bin).

    Same conventions as the binary kernel: uniform edges are checked once
    against the stored (dtype-rounded) edges so a p on an edge goes to the
    documented side; arbitrary edges use a binary search.
    """
    if uniform:
        b = min(max(np.int64(p * nbf), 0), nb - 1)
        if right:
            b = b - np.int64((b > 0) & (p <= edges[b]))
            b = b + np.int64((b < nb - 1) & (p > edges[b + 1]))
        else:
            b = b - np.int64((b > 0) & (p < edges[b]))
            b = b + np.int64((b < nb - 1) & (p >= edges[b + 1]))
        return b
    b = search_sorted(edges, p, not right) - 1  # (a, b] searches from the left
    return min(max(b, 0), nb - 1)


@njit(nogil=True, cache=True, error_model="numpy")
def _isnan(x):
    """NaN test compiled without fastmath: under fastmath flags LLVM may fold
    ``x != x`` to False, so every NaN test in a fastmath kernel calls this."""
    return x != x


@njit(inline="always", cache=True)
def _note(checks, kind, i):
    checks[kind] += 1
    first = checks[N_CHECK_KINDS + kind]
    if first < 0 or i < first:
        checks[N_CHECK_KINDS + kind] = i


@njit(inline="always", error_model="numpy", fastmath=FASTMATH, cache=True)
def _load_row(P, i, K, logits, renorm, tol, eps, qv, lv, with_logs=True):
    """Probabilities (qv) and their logs (lv) of row i, plus the row status.

    Returns (status, argmax): status -1 valid, otherwise the CHECK_* kind.
    Clipping for eps > 0 is done by the caller (``_clip_row``).
    """
    s = 0.0
    mx = -np.inf
    mn = np.inf
    for k in range(K):
        v = np.float64(P[i, k])
        qv[k] = v
        s += v
        mx = v if v > mx else mx
        mn = v if v < mn else mn
    # Comparisons, not s - s == 0: fastmath may fold x - x to 0 even for NaN.
    if not ((s > -np.inf) & (s < np.inf)):
        # Slow path: the row has a NaN or an infinity somewhere.
        has_nan = False
        has_pinf = False
        mx = -np.inf
        for k in range(K):
            v = qv[k]
            if _isnan(v):
                has_nan = True
            elif v == np.inf:
                has_pinf = True
            elif v > mx:
                mx = v
        if has_nan:
            return CHECK_NAN_P, 0
        # Logits may hold -inf (a class with probability 0) if the max is finite.
        if not logits or has_pinf or mx == -np.inf:
            return CHECK_INF_P, 0
    am = 0
    for k in range(K):
        if qv[k] == mx:
            am = k
            break
    if logits:
        t = 0.0
        for k in range(K):
            d = qv[k] - mx
            lv[k] = d
            e = exp64(d)
            qv[k] = e
            t += e
        lt = log64(t)
        inv = 1.0 / t
        for k in range(K):
            qv[k] = qv[k] * inv
            lv[k] = lv[k] - lt
    else:
        if mn < 0.0:
            return CHECK_NEG_P, 0
        if renorm:
            if not (s > 0.0):
                return CHECK_SUM_P, 0
            inv = 1.0 / s
            for k in range(K):
                qv[k] = qv[k] * inv
        elif abs(s - 1.0) > tol:
            return CHECK_SUM_P, 0
        if with_logs:
            for k in range(K):
                lv[k] = log64(qv[k])
    return -1, am


@njit(inline="always", error_model="numpy", fastmath=FASTMATH, cache=True)
def _clip_row(qv, ev, lv, K, lo, hi):
    """ev = the row clipped to [eps, 1 - eps] and renormalised, lv = log(ev).

    Renormalising keeps the clipped row a distribution (for K = 2 it already
    is one, so this is the binary kernel's clipping).
    """
    s = 0.0
    for k in range(K):
        qe = min(max(qv[k], lo), hi)
        ev[k] = qe
        s += qe
    inv = 1.0 / s
    for k in range(K):
        qe = ev[k] * inv
        ev[k] = qe
        lv[k] = log64(qe)


@njit(inline="always", cache=True)
def _flat_h(h, lmn, lmx):
    """H = sum_k q_k log q_k of a row, exactly log q when every nonzero q_k is
    the same q (ties such as (1/3, 1/3, 1/3), or equal logits). Computed, it is
    log q times the rounded row sum, and the row's ECD term h - log q_y and
    variance would be rounding noise, about 1e-16 and 1e-32, which the ECD test
    reads as a signal once a bin holds only such rows (z = sqrt(n))."""
    return lmx if lmn == lmx else h


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_rows(P, y, start, stop, edges, uniform, right, eps, logits, renorm, tol, classwise,
              counts, sums, totals, ccounts, csums, checks, with_logs=True):
    """Row-at-a-time version of ``fill_range`` (same results; simpler, slower).

    Kept as a second implementation the blocked kernel is tested against.
    """
    K = P.shape[1]
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    kf = np.float64(K)
    lo = eps
    hi = 1.0 - eps
    qv = np.empty(K, np.float64)
    lv = np.empty(K, np.float64)
    ev = np.empty(K, np.float64)
    bv = np.empty(K, np.int64)
    c0 = np.zeros(K, np.int64)
    s0 = np.zeros(K, np.float64)
    f32 = uniform and edges[1] != 1.0 / nbf
    for i in range(start, stop):
        yi = np.float64(y[i])
        status, am = _load_row(P, i, K, logits, renorm, tol, eps, qv, lv, with_logs)
        nan_y = _isnan(yi)
        y_ok = (yi >= 0.0) & (yi < kf) & (yi == np.floor(yi))
        if status >= 0 or not y_ok:
            if status == CHECK_NAN_P or nan_y:
                _note(checks, CHECK_OMITTED, i)
            if status >= 0:
                _note(checks, status, i)
            if nan_y:
                _note(checks, CHECK_NAN_Y, i)
            elif not y_ok:
                _note(checks, CHECK_BAD_Y, i)
            continue
        yk = np.int64(yi)
        # Entropy term H = sum_k p_k log p_k (0 log 0 = 0) and Brier sum_k p_k^2.
        h = 0.0
        sq = 0.0
        if not with_logs:
            for k in range(K):
                q = qv[k]
                sq += q * q
                lv[k] = 0.0
        elif eps > 0.0:
            _clip_row(qv, ev, lv, K, lo, hi)
            lmn, lmx = np.inf, -np.inf
            for k in range(K):
                q = qv[k]
                sq += q * q
                h += ev[k] * lv[k]
                lmn = min(lmn, lv[k])
                lmx = max(lmx, lv[k])
            h = _flat_h(h, lmn, lmx)
        else:
            lmn, lmx = np.inf, -np.inf
            for k in range(K):
                q = qv[k]
                sq += q * q
                h += 0.0 if q == 0.0 else q * lv[k]
                lmn = min(lmn, np.inf if q == 0.0 else lv[k])
                lmx = max(lmx, -np.inf if q == 0.0 else lv[k])
            h = _flat_h(h, lmn, lmx)
        # Variance of the ECD term under the model's own distribution.
        var = 0.0
        if not with_logs:
            pass
        elif eps > 0.0:
            for k in range(K):
                d = lv[k] - h
                var += ev[k] * d * d
        else:
            for k in range(K):
                q = qv[k]
                d = lv[k] - h
                var += 0.0 if q == 0.0 else q * d * d
        ly = lv[yk]
        nll = -ly
        ecd = h - ly
        qy = qv[yk]
        brier = sq - 2.0 * qy + 1.0
        conf = qv[am]
        b = _bin(conf, edges, nb, nbf, uniform, right)
        ok = np.int64(am == yk)
        counts[b, 0] += 1
        counts[b, 1] += ok
        counts[b, 2] += ok
        sums[b, 0] += conf
        sums[b, 1] += ecd
        sums[b, 2] += var
        totals[0] += brier
        totals[1] += nll
        totals[2] += ecd * ecd
        totals[3] += brier * brier
        totals[4] += nll * nll
        totals[5] += sq
        totals[6] += qy
        if classwise:
            # With many classes most p_k fall in the first bin: count those with
            # a vectorised add into dense per-class arrays, scatter the rest.
            if uniform:
                for k in range(K):
                    bv[k] = _bin_u(qv[k], nb, nbf, right, f32)
            else:
                for k in range(K):
                    bv[k] = _bin(qv[k], edges, nb, nbf, False, right)
            for k in range(K):
                first = bv[k] == 0
                c0[k] += 1 if first else 0
                s0[k] += qv[k] if first else 0.0
            for k in range(K):
                bk = bv[k]
                if bk != 0:
                    ccounts[k, bk, 0] += 1
                    csums[k, bk] += qv[k]
            ccounts[yk, _bin(qy, edges, nb, nbf, uniform, right), 1] += 1
    if classwise:
        for k in range(K):
            ccounts[k, 0, 0] += c0[k]
            csums[k, 0] += s0[k]


@njit(nogil=True, cache=True)
def block_rows(n_classes):
    """Rows per block: the (K, B) float64 scratch arrays stay around 16-32 KB."""
    return max(4, min(128, 2048 // n_classes))


@njit(inline="always", error_model="numpy", cache=True)
def _bin_u(p, nb, nbf, right, f32):
    """Uniform-edge bin of p, branch-free and without table look-ups (vectorises).

    The edges b / n_bins are recomputed in float64 (the same division as
    ``binning.uniform_edges``) and rounded to float32 when the probabilities
    are float32, so a p on an edge goes to the documented side exactly as
    in ``_bin``.
    """
    b = min(max(np.int64(p * nbf), 0), nb - 1)
    bf = np.float64(b)
    lo = bf / nbf
    hi = (bf + 1.0) / nbf
    if f32:
        lo = np.float64(np.float32(lo))
        hi = np.float64(np.float32(hi))
    if right:
        b = b - np.int64((b > 0) & (p <= lo))
        b = b + np.int64((b < nb - 1) & (p > hi))
    else:
        b = b - np.int64((b > 0) & (p < lo))
        b = b + np.int64((b < nb - 1) & (p >= hi))
    return b


@njit(nogil=True, error_model="numpy", cache=True)
def _bad_row(P, i, K, logits):
    """Kind of a row whose sum is not finite (slow path): NaN, inf, or -1 if the
    row is valid (logits with some -inf but a finite max)."""
    has_nan = False
    has_pinf = False
    mx = -np.inf
    for k in range(K):
        v = np.float64(P[i, k])
        if v != v:
            has_nan = True
        elif v == np.inf:
            has_pinf = True
        elif v > mx:
            mx = v
    if has_nan:
        return CHECK_NAN_P
    if not logits or has_pinf or mx == -np.inf:
        return CHECK_INF_P
    return -1


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_range(P, y, start, stop, edges, uniform, right, eps, logits, renorm, tol, classwise,
               counts, sums, totals, ccounts, csums, checks, with_logs=True):
    """Add rows [start, stop) of (P, y) into the state arrays (see module docstring).

    Rows are processed in blocks of B, transposed into (K, B) float64 scratch
    so that every per-element step (sums, max, argmax, softmax, logs, bins)
    is a loop over B contiguous rows that LLVM vectorises; per-row work
    (checks, labels, the top-label bin) and the scatters stay scalar.
    Invalid rows are recorded, replaced by a harmless uniform row and given
    weight 0, so the vector loops have no branches.
    """
    K = P.shape[1]
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    kf = np.float64(K)
    lo = eps
    hi = 1.0 - eps
    B = block_rows(K)
    # Uniform edges are float32-rounded exactly when the values binned are the
    # input's own float32 values (no renormalisation, no softmax).
    f32 = uniform and edges[1] != 1.0 / nbf
    T = np.empty((K, B), np.float64)    # values, then probabilities
    L = np.empty((K, B), np.float64)    # log-probabilities
    E = np.empty((K, B), np.float64) if eps > 0.0 else T  # clipped probabilities
    s = np.empty(B, np.float64)
    mx = np.empty(B, np.float64)
    mn = np.empty(B, np.float64)
    sc = np.empty(B, np.float64)
    h = np.empty(B, np.float64)
    sq = np.empty(B, np.float64)
    var = np.empty(B, np.float64)
    lmn = np.empty(B, np.float64)  # least and greatest log of a nonzero probability
    lmx = np.empty(B, np.float64)
    wf = np.empty(B, np.float64)
    wi = np.empty(B, np.int64)
    am = np.empty(B, np.int64)
    yb = np.empty(B, np.int64)
    bk = np.empty(B, np.int64)
    kc = K if classwise else 0
    cc = np.zeros((COPIES, kc, nb), np.int64)
    cs = np.zeros((COPIES, kc, nb), np.float64)
    s_brier = 0.0
    s_nll = 0.0
    s_ecd2 = 0.0
    s_brier2 = 0.0
    s_nll2 = 0.0
    s_p2 = 0.0
    s_py = 0.0
    uni = 1.0 / kf
    for b0 in range(start, stop, B):
        m = min(B, stop - b0)
        # Stage 1: transpose the block into float64 scratch.
        for k in range(K):
            for j in range(m):
                T[k, j] = np.float64(P[b0 + j, k])
        for j in range(m):
            s[j] = 0.0
            mx[j] = -np.inf
            mn[j] = np.inf
        for k in range(K):
            for j in range(m):
                v = T[k, j]
                s[j] += v
                a = mx[j]
                mx[j] = v if v > a else a
                c = mn[j]
                mn[j] = v if v < c else c
        # Stage 2: per-row checks; invalid rows become uniform with weight 0.
        for j in range(m):
            i = b0 + j
            sj = s[j]
            status = -1
            if not ((sj > -np.inf) & (sj < np.inf)):
                status = _bad_row(P, i, K, logits)
            elif not logits:
                if mn[j] < 0.0:
                    status = CHECK_NEG_P
                elif renorm:
                    if not (sj > 0.0):
                        status = CHECK_SUM_P
                elif abs(sj - 1.0) > tol:
                    status = CHECK_SUM_P
            yi = np.float64(y[i])
            nan_y = _isnan(yi)
            y_ok = (yi >= 0.0) & (yi < kf) & (yi == np.floor(yi))
            if status >= 0 or not y_ok:
                if status == CHECK_NAN_P or nan_y:
                    _note(checks, CHECK_OMITTED, i)
                if status >= 0:
                    _note(checks, status, i)
                if nan_y:
                    _note(checks, CHECK_NAN_Y, i)
                elif not y_ok:
                    _note(checks, CHECK_BAD_Y, i)
                fill = 0.0 if logits else uni
                for k in range(K):
                    T[k, j] = fill
                mx[j] = fill
                s[j] = 1.0
                wf[j] = 0.0
                wi[j] = 0
                yb[j] = 0
            else:
                wf[j] = 1.0
                wi[j] = 1
                yb[j] = np.int64(yi)
            sc[j] = 1.0 / s[j] if (renorm and not logits) else 1.0
        # Stage 3: argmax (first index of the max).
        for j in range(m):
            am[j] = 0
        for k in range(K - 1, -1, -1):
            for j in range(m):
                am[j] = k if T[k, j] == mx[j] else am[j]
        # Stage 4: probabilities and their logs.
        if logits:
            for j in range(m):
                s[j] = 0.0
            for k in range(K):
                for j in range(m):
                    d = T[k, j] - mx[j]
                    L[k, j] = d
                    e = exp64(d)
                    T[k, j] = e
                    s[j] += e
            for j in range(m):
                sc[j] = 1.0 / s[j]
                s[j] = log64(s[j])
            for k in range(K):
                for j in range(m):
                    T[k, j] = T[k, j] * sc[j]
                    L[k, j] = L[k, j] - s[j]
        elif with_logs:
            for k in range(K):
                for j in range(m):
                    q = T[k, j] * sc[j]
                    T[k, j] = q
                    L[k, j] = log64(q)
        else:
            # binned metrics only (ece, mce, ...): no logarithms
            for k in range(K):
                for j in range(m):
                    T[k, j] = T[k, j] * sc[j]
                    L[k, j] = 0.0
        if eps > 0.0 and with_logs:
            for j in range(m):
                s[j] = 0.0
            for k in range(K):
                for j in range(m):
                    qe = min(max(T[k, j], lo), hi)
                    E[k, j] = qe
                    s[j] += qe
            for j in range(m):
                sc[j] = 1.0 / s[j]
            for k in range(K):
                for j in range(m):
                    qe = E[k, j] * sc[j]
                    E[k, j] = qe
                    L[k, j] = log64(qe)
        # Stage 5: entropy term, Brier sum of squares, variance (two passes).
        for j in range(m):
            h[j] = 0.0
            sq[j] = 0.0
            var[j] = 0.0
        if with_logs:
            for j in range(m):
                lmn[j] = np.inf
                lmx[j] = -np.inf
            for k in range(K):
                for j in range(m):
                    q = T[k, j]
                    sq[j] += q * q
                    qe = E[k, j]
                    lk = L[k, j]
                    h[j] += 0.0 if qe == 0.0 else qe * lk
                    lmn[j] = min(lmn[j], np.inf if qe == 0.0 else lk)
                    lmx[j] = max(lmx[j], -np.inf if qe == 0.0 else lk)
            for j in range(m):
                h[j] = _flat_h(h[j], lmn[j], lmx[j])
            for k in range(K):
                for j in range(m):
                    qe = E[k, j]
                    d = L[k, j] - h[j]
                    var[j] += 0.0 if qe == 0.0 else qe * d * d
        else:
            for k in range(K):
                for j in range(m):
                    q = T[k, j]
                    sq[j] += q * q
        # Stage 6: per-row terms and the top-label bin.
        for j in range(m):
            if wi[j] == 0:
                continue
            yk = yb[j]
            ly = L[yk, j]
            nll = -ly
            ecd = h[j] - ly
            qy = T[yk, j]
            brier = sq[j] - 2.0 * qy + 1.0
            conf = T[am[j], j]
            if uniform:
                b = _bin_u(conf, nb, nbf, right, f32)
            else:
                b = _bin(conf, edges, nb, nbf, False, right)
            ok = np.int64(am[j] == yk)
            counts[b, 0] += 1
            counts[b, 1] += ok
            counts[b, 2] += ok
            sums[b, 0] += conf
            sums[b, 1] += ecd
            sums[b, 2] += var[j]
            s_brier += brier
            s_nll += nll
            s_ecd2 += ecd * ecd
            s_brier2 += brier * brier
            s_nll2 += nll * nll
            s_p2 += sq[j]
            s_py += qy
            if classwise:
                if uniform:
                    by = _bin_u(qy, nb, nbf, right, f32)
                else:
                    by = _bin(qy, edges, nb, nbf, False, right)
                ccounts[yk, by, 1] += 1
        # Stage 7: class-wise scatter, interleaved over COPIES to break the
        # store-to-load chains when consecutive rows share a bin.
        if classwise:
            for k in range(K):
                if nb <= _FEW_BINS:
                    # Few bins: one vectorised compare-and-add pass per bin
                    # against the bin's two edges (scalars, so no look-ups and
                    # no bin index) beats a scatter. The outer edges are open
                    # so values a rounding outside [0, 1] still land in a bin.
                    for b in range(nb):
                        lo_e = -np.inf if b == 0 else edges[b]
                        hi_e = np.inf if b == nb - 1 else edges[b + 1]
                        cnt = 0.0
                        tot = 0.0
                        if right:
                            for j in range(m):
                                q = T[k, j]
                                sel = (q > lo_e) & (q <= hi_e)
                                cnt += wf[j] if sel else 0.0
                                tot += q * wf[j] if sel else 0.0
                        else:
                            for j in range(m):
                                q = T[k, j]
                                sel = (q >= lo_e) & (q < hi_e)
                                cnt += wf[j] if sel else 0.0
                                tot += q * wf[j] if sel else 0.0
                        cc[0, k, b] += np.int64(cnt)
                        cs[0, k, b] += tot
                else:
                    if uniform:
                        for j in range(m):
                            bk[j] = _bin_u(T[k, j], nb, nbf, right, f32)
                    else:
                        for j in range(m):
                            bk[j] = _bin(T[k, j], edges, nb, nbf, False, right)
                    for j in range(m):
                        c = j & (COPIES - 1)
                        b = bk[j]
                        cc[c, k, b] += wi[j]
                        cs[c, k, b] += T[k, j] * wf[j]
    totals[0] += s_brier
    totals[1] += s_nll
    totals[2] += s_ecd2
    totals[3] += s_brier2
    totals[4] += s_nll2
    totals[5] += s_p2
    totals[6] += s_py
    for c in range(COPIES):
        for k in range(kc):
            for b in range(nb):
                ccounts[k, b, 0] += cc[c, k, b]
                csums[k, b] += cs[c, k, b]


def new_state(n_bins, n_classes, classwise=True):
    """Zeroed state arrays (class-wise arrays have a zero class axis if not classwise)."""
    kc = n_classes if classwise else 0
    counts = np.zeros((n_bins + 1, N_COUNTS), np.int64)
    sums = np.zeros((n_bins + 1, N_SUMS), np.float64)
    totals = np.zeros(N_TOTALS, np.float64)
    ccounts = np.zeros((kc, n_bins, 2), np.int64)
    csums = np.zeros((kc, n_bins), np.float64)
    checks = np.full(2 * N_CHECK_KINDS, -1, np.int64)
    checks[:N_CHECK_KINDS] = 0
    return counts, sums, totals, ccounts, csums, checks


def fill_parallel(P, y, edges, uniform, right, eps, logits, renorm, tol, classwise, n_threads,
                  with_logs=True):
    """Fill fresh state from all rows with n_threads contiguous row ranges (blocked kernel).

    Per-thread state, each thread on a contiguous range, serial reduction in
    thread order. The threads are a Python pool running the serial kernel
    (``nogil``): nothing is compiled beyond the serial fill (a ``parallel=True``
    prange version compiled for about 16 s on the 2-core test machine).
    """
    return _fill_threads(fill_range, P, y, edges, uniform, right, eps, logits, renorm, tol,
                         classwise, n_threads, with_logs)


def fill_rows_parallel(P, y, edges, uniform, right, eps, logits, renorm, tol, classwise,
                       n_threads, with_logs=True):
    """``fill_parallel`` with the row-at-a-time kernel (for K >= ROWWISE_K)."""
    return _fill_threads(fill_rows, P, y, edges, uniform, right, eps, logits, renorm, tol,
                         classwise, n_threads, with_logs)


def _fill_threads(fill, P, y, edges, uniform, right, eps, logits, renorm, tol, classwise,
                  n_threads, with_logs):
    n, K = P.shape
    parts = [new_state(edges.shape[0] - 1, K, classwise) for _ in range(n_threads)]

    def run(t):
        start, stop = thread_range(t, n, n_threads)
        fill(P, y, start, stop, edges, uniform, right, eps, logits, renorm, tol, classwise,
             *parts[t], with_logs)

    run_threads(n_threads, run)
    counts, sums, totals, ccounts, csums, checks = (a.copy() for a in parts[0])
    for t in range(1, n_threads):
        t_counts, t_sums, t_totals, t_ccounts, t_csums, t_checks = parts[t]
        counts += t_counts
        sums += t_sums
        totals += t_totals
        ccounts += t_ccounts
        csums += t_csums
        merge_checks(checks, t_checks)
    return counts, sums, totals, ccounts, csums, checks


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def confidence(P, y, logits, renorm, tol, eps, conf, correct):
    """Max probability and 1[argmax == label] per valid row (for equal-mass bins).

    Rows that are invalid get conf = NaN; the caller has already validated
    the data with ``fill_range`` and drops them only under nan_policy='omit'.
    """
    K = P.shape[1]
    kf = np.float64(K)
    qv = np.empty(K, np.float64)
    lv = np.empty(K, np.float64)
    for i in range(P.shape[0]):
        status, am = _load_row(P, i, K, logits, renorm, tol, eps, qv, lv, False)  # no logs needed
        yi = np.float64(y[i])
        y_ok = (yi >= 0.0) & (yi < kf) & (yi == np.floor(yi))
        if status >= 0 or not y_ok:
            conf[i] = np.nan
            correct[i] = 0
            continue
        conf[i] = qv[am]
        correct[i] = 1 if am == np.int64(yi) else 0


# -- soft labels --------------------------------------------------------------

N_SOFT = 9
# soft totals: sum |EntCE|, sum EntCE (signed, H(target) - H(model)), RankCS matches,
# sum DistCE (total variation), Brier, cross-entropy, ECD, ECD variance, squared ECD


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def soft_range(P, T, start, stop, eps, logits, renorm, tol, totals, checks):
    """Soft-label sums for rows [start, stop): T holds one label distribution per row."""
    K = P.shape[1]
    qv = np.empty(K, np.float64)
    lv = np.empty(K, np.float64)
    tv = np.empty(K, np.float64)
    ev = np.empty(K, np.float64)
    lo = eps
    hi = 1.0 - eps
    for i in range(start, stop):
        status, am = _load_row(P, i, K, logits, renorm, tol, eps, qv, lv)
        st = 0.0
        tmn = np.inf
        for k in range(K):
            t = np.float64(T[i, k])
            tv[k] = t
            st += t
            tmn = min(tmn, t)
        t_nan = _isnan(st)
        t_ok = (st > -np.inf) & (st < np.inf) & (tmn >= 0.0) & (abs(st - 1.0) <= tol)
        if status >= 0 or not t_ok:
            if status == CHECK_NAN_P or t_nan:
                _note(checks, CHECK_OMITTED, i)
            if status >= 0:
                _note(checks, status, i)
            if t_nan:
                _note(checks, CHECK_NAN_Y, i)
            elif not t_ok:
                _note(checks, CHECK_BAD_T, i)
            continue
        if eps > 0.0:
            _clip_row(qv, ev, lv, K, lo, hi)
        else:
            for k in range(K):
                ev[k] = qv[k]
        hp = 0.0
        ht = 0.0
        ce = 0.0
        tvd = 0.0
        br = 0.0
        for k in range(K):
            q = qv[k]
            t = tv[k]
            qe = ev[k]
            hp += 0.0 if qe == 0.0 else qe * lv[k]
            ht += 0.0 if t == 0.0 else t * log64(t)
            ce += 0.0 if t == 0.0 else t * lv[k]
            tvd += abs(q - t)
            br += (q - t) * (q - t)
        var = 0.0
        for k in range(K):
            q = ev[k]
            d = lv[k] - hp
            var += 0.0 if q == 0.0 else q * d * d
        # Ranking: stable argsorts of the prediction and the target must match.
        rank_ok = 1.0
        op = np.argsort(qv, kind="mergesort")
        ot = np.argsort(tv, kind="mergesort")
        for k in range(K):
            if op[k] != ot[k]:
                rank_ok = 0.0
                break
        # H(.) = -sum p log p; EntCE_i = H(target) - H(model).
        ent = hp - ht
        ecd = hp - ce
        totals[0] += abs(ent)
        totals[1] += ent
        totals[2] += rank_ok
        totals[3] += 0.5 * tvd
        totals[4] += br
        totals[5] += -ce
        totals[6] += ecd
        totals[7] += var
        totals[8] += ecd * ecd


def soft_parallel(P, T, eps, logits, renorm, tol, n_threads):
    """soft_range over n_threads contiguous row ranges, serial reduction in
    thread order (the serial kernel in a Python thread pool, as fill_parallel)."""
    n = P.shape[0]
    t_totals = np.zeros((n_threads, N_SOFT), np.float64)
    t_checks = np.full((n_threads, 2 * N_CHECK_KINDS), -1, np.int64)
    t_checks[:, :N_CHECK_KINDS] = 0

    def run(t):
        start, stop = thread_range(t, n, n_threads)
        soft_range(P, T, start, stop, eps, logits, renorm, tol, t_totals[t], t_checks[t])

    run_threads(n_threads, run)
    totals = t_totals[0].copy()
    checks = t_checks[0].copy()
    for t in range(1, n_threads):
        totals += t_totals[t]
        merge_checks(checks, t_checks[t])
    return totals, checks


# -- binary logits -------------------------------------------------------------

@njit(inline="always", fastmath=FASTMATH, cache=True, error_model="numpy")
def _log_sigmoid(z):
    """log(1 / (1 + exp(-z))) without overflow, for finite z."""
    a = -abs(z)
    # log(1 + exp(a)) for a <= 0, accurate when exp(a) is tiny
    e = exp64(a)
    u = 1.0 + e
    l1p = log64(u) - ((u - 1.0) - e) / u if e > 0.0 else 0.0
    return (min(z, 0.0)) - l1p


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_binary_logits_range(z, y, start, stop, edges, uniform, right, eps,
                             counts, sums, totals, checks, bin_checks):
    """Binary state (the layout of ``binary.py``) from logits z of class 1.

    p = sigmoid(z) is never stored; log p and log(1 - p) come from z
    directly, so large |z| keep exact ECD (p - y) z and NLL terms where p
    itself rounds to 0 or 1; with eps > 0 only a clipped p takes the logs
    of the clipped value. ``bin_checks`` holds the binary check kinds
    (NaN z, infinite z, bad label, NaN label, omitted) as indices
    0..4 of ``checks``.
    """
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    lo = eps
    hi = 1.0 - eps
    nk = bin_checks.shape[0]
    for i in range(start, stop):
        zi = np.float64(z[i])
        yi = np.float64(y[i])
        nan_z = _isnan(zi)
        nan_y = _isnan(yi)
        fin = (zi > -np.inf) & (zi < np.inf)
        y_ok = (yi == 0.0) | (yi == 1.0)
        if not (fin and y_ok):
            if nan_z or nan_y:
                _note_k(checks, nk, bin_checks[4], i)
            if nan_z:
                _note_k(checks, nk, bin_checks[0], i)
            elif not fin:
                _note_k(checks, nk, bin_checks[1], i)
            if nan_y:
                _note_k(checks, nk, bin_checks[3], i)
            elif not y_ok:
                _note_k(checks, nk, bin_checks[2], i)
            continue
        lp = _log_sigmoid(zi)
        lq = _log_sigmoid(-zi)
        p = exp64(lp)
        pe = p
        if eps > 0.0:
            pe = min(max(p, lo), hi)
            if pe != p:
                # clipped: logs of the clipped value. Unclipped rows keep lp, lq
                # from z: for p near 1, log(1 - p) turns the last-bit rounding
                # of p into an error of up to 1e-7 (p = 1 - 1e-9).
                lp = log64(pe)
                lq = log64(1.0 - pe)
        logit = lp - lq
        d = pe - yi
        e = d * logit
        # pq = 0 when p rounds to 0 or 1: the term's limit is 0, and pq * logit**2
        # would be 0 * inf once |z| > 1.34e154
        pq = pe * (1.0 - pe)
        v = 0.0 if pq == 0.0 else pq * logit * logit
        nll = -lp if yi == 1.0 else -lq
        db = p - yi
        br = db * db
        b = _bin(p, edges, nb, nbf, uniform, right)
        counts[b, 0] += 1
        counts[b, 1] += np.int64(yi == 1.0)
        counts[b, 2] += np.int64((p > 0.5) == (yi == 1.0))
        sums[b, 0] += p
        sums[b, 1] += e
        sums[b, 2] += v
        totals[0] += br
        totals[1] += nll
        totals[2] += e * e
        totals[3] += br * br
        totals[4] += nll * nll
        totals[5] += p * p
        totals[6] += p * yi


@njit(inline="always", cache=True)
def _note_k(checks, nk, kind, i):
    checks[kind] += 1
    first = checks[nk + kind]
    if first < 0 or i < first:
        checks[nk + kind] = i

"""Single-pass fill of calibration statistics for multi-class predictions (hard labels).

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

from ._config import FASTMATH
from ._lazy import njit
from ._threads import fill_threads
from .mathfn import as_bits, close_compensated, exp64, flush_compensated, flush_every, from_bits, isnan, log64
from .rows import (
    bin_near_edge,
    bin_search,
    class_terms,
    flat_h,
    label_ok,
    note_row,
    row_argmax,
    row_clip,
    row_entropy_clipped,
    row_entropy_plain,
    row_load,
    row_probs,
    row_scale,
    row_softmax,
    row_status,
)

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

_SELECT_K = 32  # confidence_fast: a running select below this many classes, else reductions
ROWWISE_K = 64  # from this many classes on, the row-at-a-time kernel is used (faster there)
@njit(inline="always", cache=True)
def note(checks, i, status, nan_y, y_ok, bad_label):
    """Count the faults of row i (``rows.note_row`` with this module's kinds)."""
    note_row(checks, N_CHECK_KINDS, i, status, status == CHECK_NAN_P, nan_y, y_ok, CHECK_OMITTED,
             CHECK_NAN_Y, bad_label)


@njit(inline="always", error_model="numpy", fastmath=FASTMATH, cache=True)
def load_row(P, i, K, logits, renorm, tol, eps, qv, lv, with_logs=True):
    """Probabilities (qv) and their logs (lv) of row i, plus the row status.

    Returns (status, argmax): status -1 valid, otherwise the CHECK_* kind.
    Clipping for eps > 0 is done by the caller (``rows.row_clip``).
    """
    s, mx, mn = row_load(P, i, K, qv)
    status, mx = row_status(qv, K, logits, renorm, tol, s, mx, mn, CHECK_NAN_P, CHECK_INF_P,
                            CHECK_NEG_P, CHECK_SUM_P)
    if status >= 0:
        return status, 0
    am = row_probs(qv, lv, K, logits, renorm, s, mx, log64)
    if with_logs and not logits:
        for k in range(K):
            lv[k] = log64(qv[k])
    return -1, am


@njit(inline="always", cache=True)
def near_edges(edges, uniform, f32):
    """True when ``rows.bin_near_edge`` reproduces every stored edge (uniform
    edges, float32-rounded when f32): the bins are then arithmetic, else a
    binary search over the edges."""
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    invn = 1.0 / nbf
    ok = uniform
    for k in range(nb + 1):
        kf = np.float64(k)
        e = np.float64(np.float32(kf * invn)) if f32 else kf / nbf
        ok = ok and e == edges[k]
    return ok


@njit(inline="always", error_model="numpy", cache=True)
def bin_of(x, edges, nb, nbf, top, invn, near, right, f32):
    """Bin of x: ``rows.bin_near_edge`` when near (see ``near_edges``), else
    ``rows.bin_search``; both exact at every edge."""
    if near:
        return bin_near_edge(x, nbf, top, invn, right, f32)
    return bin_search(edges, nb, x, right)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_rows(P, y, start, stop, edges, uniform, right, eps, logits, renorm, tol, classwise,
              counts, sums, totals, ccounts, csums, checks, rank_conf, rank_ok, with_logs=True):
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
    near = near_edges(edges, uniform, f32)
    top = nb - 1
    invn = 1.0 / nbf
    loc = np.zeros_like(sums)  # per-bin sums of the last rows (see fill_range)
    comp = np.zeros_like(sums)
    every = flush_every(nb)
    since = 0
    ranked = rank_conf.shape[0] > 0
    for i in range(start, stop):
        if since == every:
            flush_compensated(loc, sums, comp)
            since = 0
        since += 1
        yi = np.float64(y[i])
        # load_row and row_terms written out: the rows functions are called one
        # inlining level deep, where their loops vectorise (two levels deep, LLVM
        # kept the entropy loop scalar: 3 ns a value at K = 1000 against 0.9)
        s, mx, mn = row_load(P, i, K, qv)
        status, mx = row_status(qv, K, logits, renorm, tol, s, mx, mn, CHECK_NAN_P, CHECK_INF_P,
                                CHECK_NEG_P, CHECK_SUM_P)
        nan_y = isnan(yi)
        y_ok = label_ok(yi, kf)
        if status >= 0 or not y_ok:
            note(checks, i, status, nan_y, y_ok, CHECK_BAD_Y)
            if ranked:
                rank_conf[i] = np.nan
                rank_ok[i] = 0
            continue
        am = row_argmax(qv, K, mx)
        if logits:
            row_softmax(qv, lv, K, mx, log64)
        elif renorm:
            row_scale(qv, K, s)
        yk = np.int64(yi)
        # NLL, ECD (H - log p_y), Brier and the variance of the ECD term.
        if with_logs:
            if lo > 0.0:
                row_clip(qv, ev, lv, K, lo, hi, log64)
                h, sq, var = row_entropy_clipped(qv, ev, lv, K)
            else:
                if not logits:
                    for k in range(K):
                        lv[k] = log64(qv[k])
                h, sq, var = row_entropy_plain(qv, lv, K)
        else:
            h, var = 0.0, 0.0
            sq = 0.0
            for k in range(K):
                q = qv[k]
                sq += q * q
                lv[k] = 0.0
        nll, ecd, brier = class_terms(h, sq, lv[yk], qv[yk])
        qy = qv[yk]
        conf = qv[am]
        b = bin_of(conf, edges, nb, nbf, top, invn, near, right, f32)
        ok = np.int64(am == yk)
        if ranked:
            rank_conf[i] = min(conf, 1.0)
            rank_ok[i] = ok
        counts[b, 0] += 1
        counts[b, 1] += ok
        counts[b, 2] += ok
        loc[b, 0] += conf
        loc[b, 1] += ecd
        loc[b, 2] += var
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
            if near:
                for k in range(K):
                    bv[k] = bin_near_edge(qv[k], nbf, top, invn, right, f32)
            else:
                for k in range(K):
                    bv[k] = bin_search(edges, nb, qv[k], right)
            for k in range(K):
                first = bv[k] == 0
                c0[k] += 1 if first else 0
                s0[k] += qv[k] if first else 0.0
            for k in range(K):
                bk = bv[k]
                if bk != 0:
                    ccounts[k, bk, 0] += 1
                    csums[k, bk] += qv[k]
            ccounts[yk, bin_of(qy, edges, nb, nbf, top, invn, near, right, f32), 1] += 1
    close_compensated(loc, sums, comp)
    if classwise:
        for k in range(K):
            ccounts[k, 0, 0] += c0[k]
            csums[k, 0] += s0[k]


@njit(nogil=True, cache=True)
def block_rows(n_classes):
    """Rows per block: the (K, B) float64 scratch arrays stay around 16-32 KB."""
    return max(4, min(128, 2048 // n_classes))


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_range(P, y, start, stop, edges, uniform, right, eps, logits, renorm, tol, classwise,
               counts, sums, totals, ccounts, csums, checks, rank_conf, rank_ok, with_logs=True):
    """Add rows [start, stop) of (P, y) into the state arrays (see module docstring).

    ``rank_conf``, ``rank_ok`` (one per row of P, or empty): the rows' ranked pair for
    the passes after the fill (ACE's equal-mass bins), written by the same pass: as
    ``confidence`` gives it for rows of probabilities (the confidence, at most 1, and
    1[argmax == label]; NaN and 0 for an invalid row). Only for rows neither logits nor
    renormalised (``backends.cpu.fill``): their confidence is the row's value itself.

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
    near = near_edges(edges, uniform, f32)
    top = nb - 1
    invn = 1.0 / nbf
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
    kc = K if classwise else 0
    BK = np.empty((kc, B), np.int64)  # class-wise bins of the block
    cb = np.zeros((kc, nb), np.int64)  # the block's class-wise counts and sums
    sb = np.zeros((kc, nb), np.float64)
    cs = np.zeros((kc, nb), np.float64)  # the range's class-wise sums
    s_brier = 0.0
    s_nll = 0.0
    s_ecd2 = 0.0
    s_brier2 = 0.0
    s_nll2 = 0.0
    s_p2 = 0.0
    s_py = 0.0
    uni = 1.0 / kf
    # Top-label sums go into loc and, every few hundred rows, into the state with
    # compensation (mathfn.flush_compensated): confidences of float64 or softmaxed
    # rows are full float64, and one long plain sum per bin would make ECE depend
    # on how the rows are split (2e-12 relative at 1e6 rows).
    loc = np.zeros_like(sums)
    comp = np.zeros_like(sums)
    every = flush_every(nb)
    since = 0
    ranked = rank_conf.shape[0] > 0
    for b0 in range(start, stop, B):
        if since >= every:
            flush_compensated(loc, sums, comp)
            since = 0
        m = min(B, stop - b0)
        since += m
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
        # Stage 2: per-row checks, a vectorised test of what makes a row valid
        # (``rows.row_status`` returns -1 exactly for these rows, and more
        # logit rows: those with -inf, whose sum is not finite), then
        # ``row_status`` on the rows that fail it, if any; invalid rows become
        # uniform with weight 0.
        n_slow = 0
        for j in range(m):
            sj = s[j]
            yi = np.float64(y[b0 + j])
            good = (sj > -np.inf) & (sj < np.inf) & label_ok(yi, kf)
            if not logits:
                good = good & (mn[j] >= 0.0)
                good = good & ((sj > 0.0) if renorm else (abs(sj - 1.0) <= tol))
            wi[j] = np.int64(good)
            yb[j] = np.int64(yi) if good else 0
            n_slow += np.int64(not good)
        if n_slow:
            for j in range(m):
                if wi[j]:
                    continue
                i = b0 + j
                status, _ = row_status(T[:, j], K, logits, renorm, tol, s[j], mx[j], mn[j],
                                       CHECK_NAN_P, CHECK_INF_P, CHECK_NEG_P, CHECK_SUM_P)
                yi = np.float64(y[i])
                nan_y = isnan(yi)
                y_ok = label_ok(yi, kf)
                if status >= 0 or not y_ok:
                    note(checks, i, status, nan_y, y_ok, CHECK_BAD_Y)
                    fill = 0.0 if logits else uni
                    for k in range(K):
                        T[k, j] = fill
                    mx[j] = fill
                    s[j] = 1.0
                else:
                    wi[j] = 1
                    yb[j] = np.int64(yi)
        for j in range(m):
            wf[j] = np.float64(wi[j])
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
                h[j] = flat_h(h[j], lmn[j], lmx[j])
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
                if ranked:
                    rank_conf[b0 + j] = np.nan
                    rank_ok[b0 + j] = 0
                continue
            yk = yb[j]
            qy = T[yk, j]
            nll, ecd, brier = class_terms(h[j], sq[j], L[yk, j], qy)
            conf = T[am[j], j]
            b = bin_of(conf, edges, nb, nbf, top, invn, near, right, f32)
            ok = np.int64(am[j] == yk)
            if ranked:
                rank_conf[b0 + j] = min(conf, 1.0)
                rank_ok[b0 + j] = ok
            counts[b, 0] += 1
            counts[b, 1] += ok
            counts[b, 2] += ok
            loc[b, 0] += conf
            loc[b, 1] += ecd
            loc[b, 2] += var[j]
            s_brier += brier
            s_nll += nll
            s_ecd2 += ecd * ecd
            s_brier2 += brier * brier
            s_nll2 += nll * nll
            s_p2 += sq[j]
            s_py += qy
            if classwise:
                ccounts[yk, bin_of(qy, edges, nb, nbf, top, invn, near, right, f32), 1] += 1
        # Stage 7: class-wise bins, a vectorised loop per class (arithmetic,
        # exact at every edge, or a binary search), then a scatter row by row:
        # a row's K updates go to K different cells, so no update waits for
        # the one before (one compare-and-add pass per bin cost 1.6x this at
        # K = 10 and 15 bins). The block's sums go into the range's once per block.
        if classwise:
            for k in range(K):
                if near:
                    for j in range(m):
                        BK[k, j] = bin_near_edge(T[k, j], nbf, top, invn, right, f32)
                else:
                    for j in range(m):
                        BK[k, j] = bin_search(edges, nb, T[k, j], right)
            for j in range(m):
                if wi[j] == 0:
                    continue
                for k in range(K):
                    b = BK[k, j]
                    cb[k, b] += 1
                    sb[k, b] += T[k, j]
            for k in range(K):
                for b in range(nb):
                    cs[k, b] += sb[k, b]
                    sb[k, b] = 0.0
    close_compensated(loc, sums, comp)
    totals[0] += s_brier
    totals[1] += s_nll
    totals[2] += s_ecd2
    totals[3] += s_brier2
    totals[4] += s_nll2
    totals[5] += s_p2
    totals[6] += s_py
    for k in range(kc):
        for b in range(nb):
            ccounts[k, b, 0] += cb[k, b]
            csums[k, b] += cs[k, b]


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


NO_RANK = (np.zeros(0, np.float64), np.zeros(0, np.uint8))  # rank_conf, rank_ok: none


def fill_parallel(P, y, edges, uniform, right, eps, logits, renorm, tol, classwise, n_threads,
                  with_logs=True, rank=NO_RANK):
    """Fill fresh state from all rows with n_threads contiguous row ranges (blocked kernel).

    Per-thread state, each thread on a contiguous range, serial reduction in
    thread order. The threads are a Python pool running the serial kernel
    (``nogil``): nothing is compiled beyond the serial fill (a ``parallel=True``
    prange version compiled for about 16 s on the 2-core test machine).
    """
    return _fill_threads(fill_range, P, y, edges, uniform, right, eps, logits, renorm, tol,
                         classwise, n_threads, with_logs, rank)


def fill_rows_parallel(P, y, edges, uniform, right, eps, logits, renorm, tol, classwise,
                       n_threads, with_logs=True, rank=NO_RANK):
    """``fill_parallel`` with the row-at-a-time kernel (for K >= ROWWISE_K)."""
    return _fill_threads(fill_rows, P, y, edges, uniform, right, eps, logits, renorm, tol,
                         classwise, n_threads, with_logs, rank)


def _fill_threads(fill, P, y, edges, uniform, right, eps, logits, renorm, tol, classwise,
                  n_threads, with_logs, rank):
    n, K = P.shape

    def new_part():
        return new_state(edges.shape[0] - 1, K, classwise)

    def fill_part(start, stop, *part):
        # each thread writes the ranked pair of its own rows
        fill(P, y, start, stop, edges, uniform, right, eps, logits, renorm, tol, classwise,
             *part, *rank, with_logs)

    return fill_threads(n, n_threads, new_part, fill_part, 5)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def confidence(P, y, logits, renorm, tol, eps, conf, correct):
    """Max probability and 1[argmax == label] per valid row (for equal-mass bins).

    Rows that are invalid get conf = NaN; the caller has already validated
    the data with ``fill_range`` and drops them only under nan_policy='omit'.
    A valid row's max above 1 (its sum within the tolerance of 1) is ranked as 1:
    the equal-mass passes take values in [0, 1] (ACE's bucket statistics skipped
    such a value and its gather looked for it in the first bucket).
    """
    K = P.shape[1]
    kf = np.float64(K)
    qv = np.empty(K, np.float64)
    lv = np.empty(K, np.float64)
    for i in range(P.shape[0]):
        status, am = load_row(P, i, K, logits, renorm, tol, eps, qv, lv, False)  # no logs needed
        yi = np.float64(y[i])
        y_ok = label_ok(yi, kf)
        if status >= 0 or not y_ok:
            conf[i] = np.nan
            correct[i] = 0
            continue
        conf[i] = min(qv[am], 1.0)
        correct[i] = 1 if am == np.int64(yi) else 0


SLOW = 2  # correct[i] of a row that confidence_fast leaves to confidence


@njit(nogil=True, error_model="numpy", cache=True)
def column_pair(P, y, conf, k, above, label, x, fine_counts, fine_p):
    """One class's pair for its equal-mass bins (TACE): ``label[i] = 1[y[i] == k]`` and
    ``x[i] = P[i, k]`` (as float64), NaN where it is not above ``above`` or the row is
    invalid (``conf[i]`` NaN). One pass where NumPy's expression took five. A valid
    row's value above 1 (its sum within the tolerance of 1) is ranked as 1: the
    equal-mass passes take values in [0, 1], and one above was skipped by some of
    them and not by others.

    ``fine_counts`` (B + 1, 3) and ``fine_p`` (B + 1), or empty: the pair's value
    bucket statistics added in the same pass, as ``equal_mass.bucket_stats`` adds
    them (rows, positives, correct thresholded labels and the sum of x per bucket
    floor(x B); skipped rows in row B), the first of the class's equal-mass passes,
    which would read x again. Each class reads the whole matrix: the pair alone is
    bound by memory (two threads gained nothing); with its statistics it is not
    (``backends.cpu.ranked_buckets`` runs it on the batch's threads)."""
    nbk = fine_counts.shape[0] - 1
    scale = np.float64(nbk)
    top = nbk - 1
    for i in range(P.shape[0]):
        v = np.float64(P[i, k])
        keep = (v > above) & (conf[i] == conf[i])
        xv = min(v, 1.0) if keep else np.nan
        pos = y[i] == k
        x[i] = xv
        label[i] = 1 if pos else 0
        if nbk > 0:
            ok = (xv >= 0.0) & (xv <= 1.0)
            xs = xv if ok else 0.0
            b = min(np.int64(xs * scale), top) if ok else nbk
            fine_counts[b, 0] += 1
            fine_counts[b, 1] += np.int64(pos)
            fine_counts[b, 2] += np.int64((xs > 0.5) == pos)
            fine_p[b] += xs


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def confidence_fast(P, y, tol, conf, correct):
    """``confidence`` of the rows of probabilities (not logits, not renormalised)
    that are clearly valid: sum within half the tolerance of 1 (a sum in another
    order cannot judge otherwise), no negative, NaN or infinite value; the others
    get correct[i] = SLOW, for ``confidence`` (the fill's row code) to decide. The
    max is the confidence as it stands, so the pair is ``confidence``'s on every
    row it gives, at a fraction of the cost (and of the compile time).

    Short rows: one pass, a running select for the first max. Long rows
    (K >= _SELECT_K): integer reductions over the bits, which vectorise
    where float min and max (NaN-aware) do not; the bits of values >= 0
    order as the values, and a value with its sign bit set (-0.0 too) sends
    the row to ``confidence``; then the first index of the max, a
    min-reduction. Each written out in its own loop over the rows: through
    inlined helpers that take the arrays, the short rows ran 1.5 - 2x slower.
    """
    K = P.shape[1]
    kf = np.float64(K)
    half = 0.5 * tol
    if K < _SELECT_K:
        for i in range(P.shape[0]):
            s = 0.0
            mx = -np.inf
            mn = np.inf
            am = 0
            for k in range(K):
                v = np.float64(P[i, k])
                s += v
                mn = min(mn, v)
                am = k if v > mx else am
                mx = max(mx, v)
            if (abs(s - 1.0) <= half) & (mn >= 0.0) & (mx < np.inf):
                yi = np.float64(y[i])
                y_ok = label_ok(yi, kf)
                conf[i] = min(mx, 1.0) if y_ok else np.nan
                correct[i] = 1 if y_ok and am == np.int64(yi) else 0
            else:
                correct[i] = SLOW
        return
    for i in range(P.shape[0]):
        s = 0.0
        sign = np.int64(0)
        top = np.int64(0)
        for k in range(K):
            v = np.float64(P[i, k])
            b = as_bits(v)
            s += v
            sign |= b
            top = max(top, b)
        am = K
        for k in range(K):
            am = min(am, k if as_bits(np.float64(P[i, k])) == top else K)
        mx = from_bits(top)
        if (abs(s - 1.0) <= half) & (sign >= 0) & (mx < np.inf):
            yi = np.float64(y[i])
            y_ok = label_ok(yi, kf)
            conf[i] = min(mx, 1.0) if y_ok else np.nan
            correct[i] = 1 if y_ok and am == np.int64(yi) else 0
        else:
            correct[i] = SLOW

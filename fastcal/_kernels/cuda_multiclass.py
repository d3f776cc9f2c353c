"""GPU fill of the multi-class state (the layout of ``multiclass.py``): top-label,
class-wise and the eq.-12 ECD sums, probabilities or logits (softmax in the kernel).

One thread per row (grid-stride, the same number of rounds for every thread
of a block). The row's K probabilities and logs live in thread-local arrays
of compile-time size, so one kernel is compiled per K (``kernel(K)``). Row
status, argmax, softmax, clipping, entropy, variance, terms and bins are the
functions of ``rows.py`` that the CPU's row-at-a-time kernel
(``multiclass.fill_rows``) calls, with the same ``exp64`` and logarithm.

State: top-label bins as in the binary kernel (private per thread up to 47
bins, else per warp). The class-wise K x n_bins state is private per warp
(``_cuda.classes_add_warp``: no atomics, sums in lane order), in shared
memory while the block's copies fit, else in the warp's row of a global
array; each block writes one partial row and the host adds the rows.

``confidence_kernel(K)`` gives the (confidence, correct) pair that equal-mass
bins rank (ACE), with the same row code as the fill.
"""

import math

import numpy as np

from ._cuda import (
    BIN_FIELDS,
    CLASS_FIELDS,
    F64,
    I64,
    SLOTS_PER_BIN,
    WARP,
    bins_add,
    bins_finish,
    bins_start,
    classes_add_warp,
    cuda,
    plain,
    totals_add,
    totals_add_within,
    totals_start,
)
from .mathfn import log_inline
from .rows import bin_search, bin_uniform, label_ok, note_row, row_load, row_probs, row_status, row_terms

ROWWISE_K = 64  # multiclass.ROWWISE_K
N_TOT = 7
N_KINDS = 8   # multiclass.CHECK_* kinds
N_CHK = 16
NAN_P, INF_P, NEG_P, SUM_P, BAD_Y, NAN_Y, OMIT = 0, 1, 2, 3, 4, 5, 6

_cache = {}


def kernel(K):
    """The fill kernel for rows of K classes (compiled on first launch, cached)."""
    return _cached("fill", K, _make)


def confidence_kernel(K):
    """The kernel of ``multiclass.confidence`` for rows of K classes (cached)."""
    return _cached("confidence", K, _make_confidence)


def _cached(what, K, make):
    k = _cache.get((what, K))
    if k is None:
        k = make(K)
        _cache[what, K] = k
    return k


@cuda.jit(device=True, inline=True)
def load(P, i, K, logits, renorm, tol, qv):
    """Row i of P into qv: (status, sum, max), status -1 when the row is valid,
    else its ``multiclass.CHECK_*`` kind."""
    s, mx, mn = row_load(P, i, K, qv)
    status, mx = row_status(qv, K, logits, renorm, tol, s, mx, mn, NAN_P, INF_P, NEG_P, SUM_P)
    return status, s, mx


def _make_confidence(K):
    kf = np.float64(K)

    @cuda.jit
    def confidence(P, y, logits, renorm, tol, conf, correct):
        """Max probability and 1[argmax == label] per row; NaN and 0 for rows
        that are invalid (``multiclass.confidence``)."""
        qv = cuda.local.array(K, F64)
        lv = cuda.local.array(K, F64)
        P = plain(P)
        for i in range(cuda.grid(1), P.shape[0], cuda.gridsize(1)):
            status, s, mx = load(P, i, K, logits, renorm, tol, qv)
            yi = np.float64(y[i])
            if status >= 0 or not label_ok(yi, kf):
                conf[i] = math.nan
                correct[i] = 0
            else:
                am = row_probs(qv, lv, K, logits, renorm, s, mx, log_inline)
                conf[i] = min(qv[am], 1.0)  # as multiclass.confidence
                correct[i] = 1 if am == np.int64(yi) else 0

    return confidence


def _make(K):
    # with_logs=False (binned metrics only): the CPU's blocked kernel (K < 64) keeps the
    # log-softmax of logits in its ECD/NLL sums, the row kernel (K >= 64) zeroes them.
    zero_logit_logs = K >= ROWWISE_K

    @cuda.jit
    def fill(P, y, edges, uniform, right, f32, eps, logits, renorm, tol, classwise, with_logs,
             warp_bins, bins_global, gw, classes_global, gcw,
             part_i, part_f, part_t, part_c, part_w):
        sh = cuda.shared.array(0, F64)
        T = cuda.blockDim.x
        tid = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        lane = tid % WARP
        nw = T // WARP
        P = plain(P)
        edges = plain(edges)
        n = P.shape[0]
        nb1 = edges.shape[0]
        # top-label bins as in cuda_binary (the layout _cuda.plan_launch sized)
        store, wbase, base0 = bins_start(sh, gw, T, tid, nb1, warp_bins, bins_global)
        # class-wise, per warp: [count per (k, b)] [label count per (k, b)] [sum p_k per (k, b)],
        # after the top-label bins in shared memory, or in the warp's row of gcw
        csize = CLASS_FIELDS * K * (nb1 - 1)
        cbase0 = blk * nw * csize if classes_global else top_slots(T, nb1, warp_bins,
                                                                    bins_global)
        cstore = gcw if classes_global else sh
        if classwise:
            for s in range(tid, nw * csize, T):
                cstore[cbase0 + s] = 0.0
        cbase = cbase0 + (tid // WARP) * csize
        cuda.syncthreads()
        qv = cuda.local.array(K, F64)
        lv = cuda.local.array(K, F64)
        ev = cuda.local.array(K, F64)
        tot = cuda.local.array(N_TOT, F64)
        chk = cuda.local.array(N_CHK, I64)
        totals_start(tot, chk, N_KINDS)
        # every thread of a block runs the same number of rounds (warp state needs whole warps)
        for i0 in range(blk * T, n, cuda.gridsize(1)):
            i = i0 + tid
            use = i < n
            b, yk, ok, conf, ecd, var = np.int64(-1), np.int64(-1), False, 0.0, 0.0, 0.0
            if use:
                use, b, yk, ok, conf, ecd, var = fill_row(
                    P, y, i, K, edges, uniform, right, f32, eps, logits, renorm, tol, with_logs,
                    zero_logit_logs, qv, lv, ev, tot, chk)
            bins_add(sh, store, wbase, T, tid, lane, nb1, warp_bins, use, b, ok, ok, conf, ecd,
                     var)
            if classwise:
                classes_row(cstore, cbase, qv, K, edges, uniform, right, f32, use, yk, lane)
        cuda.syncthreads()
        if classwise:
            classes_finish(cstore, cbase0, csize, nw, T, tid, part_w, blk)
        bins_finish(sh, store, base0, T, tid, nb1, warp_bins, N_TOT, N_KINDS, tot, chk, part_i,
                    part_f, part_t, part_c)

    return fill


@cuda.jit(device=True, inline=True)
def top_slots(T, nb1, warp_bins, bins_global):
    """Shared-memory slots of the block's top-label state (bins, or the totals
    and checks where the bins are in global memory); the class-wise state follows."""
    if warp_bins:
        top = (N_TOT + N_CHK) * T
        if not bins_global:
            top = max(top, (T // WARP) * BIN_FIELDS * nb1)
        return top
    return max(SLOTS_PER_BIN * nb1, N_TOT + N_CHK) * T


@cuda.jit(device=True, inline=True)
def fill_row(P, y, i, K, edges, uniform, right, f32, eps, logits, renorm, tol, with_logs,
             zero_logit_logs, qv, lv, ev, tot, chk):
    """Row i's terms into the thread's totals, or its faults into chk:
    (valid, top-label bin, label, argmax == label, confidence, ECD term, variance)."""
    status, s, mx = load(P, i, K, logits, renorm, tol, qv)
    yi = np.float64(y[i])
    nan_y = yi != yi
    y_ok = label_ok(yi, np.float64(K))
    if status >= 0 or not y_ok:
        note_row(chk, N_KINDS, i, status, status == NAN_P, nan_y, y_ok, OMIT, NAN_Y, BAD_Y)
        return False, np.int64(-1), np.int64(-1), False, 0.0, 0.0, 0.0
    am = row_probs(qv, lv, K, logits, renorm, s, mx, log_inline)
    if with_logs and not logits:
        for k in range(K):
            lv[k] = log_inline(qv[k])
    yk = np.int64(yi)
    nll, ecd, brier, var, sq = row_terms(qv, ev, lv, K, yk, with_logs, eps, 1.0 - eps,
                                         zero_logit_logs or not logits, log_inline)
    conf = qv[am]
    nb = edges.shape[0] - 1
    if uniform:
        b = bin_uniform(conf, nb, np.float64(nb), right, f32)
    else:
        b = bin_search(edges, nb, conf, right)
    totals_add(tot, brier, nll, ecd)
    totals_add_within(tot, sq, qv[yk])
    return True, b, yk, am == yk, conf, ecd, var


@cuda.jit(device=True, inline=True)
def classes_row(cstore, cbase, qv, K, edges, uniform, right, f32, use, yk, lane):
    """A row's class-wise bins into its warp's state (every lane takes part;
    use False: a row that adds nothing)."""
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    for k in range(K):
        key = np.int64(-1)
        q = 0.0
        if use:
            q = qv[k]
            if uniform:
                key = k * nb + bin_uniform(q, nb, nbf, right, f32)
            else:
                key = k * nb + bin_search(edges, nb, q, right)
        classes_add_warp(cstore, cbase, K * nb, key, lane, k == yk, q)


@cuda.jit(device=True, inline=True)
def classes_finish(cstore, cbase0, csize, nw, T, tid, part_w, blk):
    """The block's class-wise partial row part_w[blk]: the nw warps' states added
    in warp order."""
    for s in range(tid, csize, T):
        acc = 0.0
        for w in range(nw):
            acc += cstore[cbase0 + w * csize + s]
        part_w[blk, s] = acc

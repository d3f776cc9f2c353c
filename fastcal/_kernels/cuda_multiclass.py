"""GPU fill of the multi-class state (the layout of ``multiclass.py``): top-label,
class-wise and the eq.-12 ECD sums, probabilities or logits (softmax in the kernel).

One thread per row (grid-stride, the same number of rounds for every thread
of a block). The row's K probabilities and logs live in thread-local arrays
of compile-time size, so one kernel is compiled per K (``kernel(K)``). Row
status, argmax, softmax, clipping, entropy, variance and bins follow the
CPU's row-at-a-time kernel (``multiclass.fill_rows``) step for step;
``exp64`` is the CPU's own series, the logarithms are libdevice's (both
within an ulp or two of the CPU's, far inside 1e-12).

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

from ._cuda import (BIN_FIELDS, CLASS_FIELDS, F64, I64, SLOTS_PER_BIN, WARP, bins_add,
                    bins_finish, bins_start, classes_add_warp, cuda, exp64, log0, mc_uniform_bin,
                    note, search_bin, totals_add, totals_add_within, totals_start)

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
def row_status(P, i, K, logits, renorm, tol, qv):
    """Row i of P loaded into qv (float64): (status, sum, max), status -1 when
    the row is valid, else the CPU's check kind (``multiclass._load_row``)."""
    s = 0.0
    mx = -math.inf
    mn = math.inf
    for k in range(K):
        v = np.float64(P[i, k])
        qv[k] = v
        s += v
        mx = v if v > mx else mx
        mn = v if v < mn else mn
    status = -1
    if not ((s > -math.inf) and (s < math.inf)):
        has_nan = False
        has_pinf = False
        mx = -math.inf
        for k in range(K):
            v = qv[k]
            if v != v:
                has_nan = True
            elif v == math.inf:
                has_pinf = True
            elif v > mx:
                mx = v
        if has_nan:
            status = NAN_P
        elif (not logits) or has_pinf or mx == -math.inf:
            status = INF_P
    if status < 0 and not logits:
        if mn < 0.0:
            status = NEG_P
        elif renorm:
            if not (s > 0.0):
                status = SUM_P
        elif abs(s - 1.0) > tol:
            status = SUM_P
    return status, s, mx


@cuda.jit(device=True, inline=True)
def row_probs(qv, lv, K, logits, renorm, s, mx):
    """The argmax of a valid row; qv becomes its probabilities (the softmax of
    logits, whose log-softmax goes to lv; or renormalised by the sum s)."""
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
        lt = math.log(t)
        inv = 1.0 / t
        for k in range(K):
            qv[k] = qv[k] * inv
            lv[k] = lv[k] - lt
    elif renorm:
        inv = 1.0 / s
        for k in range(K):
            qv[k] = qv[k] * inv
    return am


def _make_confidence(K):
    kf = np.float64(K)

    @cuda.jit
    def confidence(P, y, logits, renorm, tol, conf, correct):
        """Max probability and 1[argmax == label] per row; NaN and 0 for rows
        that are invalid (``multiclass.confidence``)."""
        qv = cuda.local.array(K, F64)
        lv = cuda.local.array(K, F64)
        for i in range(cuda.grid(1), P.shape[0], cuda.gridsize(1)):
            status, s, mx = row_status(P, i, K, logits, renorm, tol, qv)
            yi = np.float64(y[i])
            y_ok = (yi >= 0.0) and (yi < kf) and (yi == math.floor(yi))
            if status >= 0 or not y_ok:
                conf[i] = math.nan
                correct[i] = 0
            else:
                am = row_probs(qv, lv, K, logits, renorm, s, mx)
                conf[i] = qv[am]
                correct[i] = 1 if am == np.int64(yi) else 0

    return confidence


def _make(K):
    kf = np.float64(K)
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
        n = P.shape[0]
        nb = edges.shape[0] - 1
        nb1 = nb + 1
        nbf = np.float64(nb)
        lo = eps
        hi = 1.0 - eps
        # top-label bins as in cuda_binary (the layout _cuda.plan_launch sized)
        bsize = BIN_FIELDS * nb1
        store, wbase, base0 = bins_start(sh, gw, T, tid, nb1, warp_bins, bins_global)
        if warp_bins:
            top = (N_TOT + N_CHK) * T
            if not bins_global:
                top = max(top, nw * bsize)
        else:
            top = max(SLOTS_PER_BIN * nb1, N_TOT + N_CHK) * T
        # class-wise, per warp: [count per (k, b)] [label count per (k, b)] [sum p_k per (k, b)],
        # after the top-label bins in shared memory, or in the warp's row of gcw
        knb = K * nb
        csize = CLASS_FIELDS * knb
        cbase0 = blk * nw * csize if classes_global else top
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
            conf = 0.0
            ecd = 0.0
            var = 0.0
            b = np.int64(-1)
            yk = np.int64(-1)
            ok = False
            if use:
                status, s, mx = row_status(P, i, K, logits, renorm, tol, qv)
                yi = np.float64(y[i])
                nan_y = yi != yi
                y_ok = (yi >= 0.0) and (yi < kf) and (yi == math.floor(yi))
                if status >= 0 or not y_ok:
                    if status == NAN_P or nan_y:
                        note(chk, OMIT, N_KINDS, i)
                    if status >= 0:
                        note(chk, status, N_KINDS, i)
                    if nan_y:
                        note(chk, NAN_Y, N_KINDS, i)
                    elif not y_ok:
                        note(chk, BAD_Y, N_KINDS, i)
                    use = False
            if use:
                am = row_probs(qv, lv, K, logits, renorm, s, mx)
                if with_logs and not logits:
                    for k in range(K):
                        lv[k] = log0(qv[k])
                yk = np.int64(yi)
                # -- entropy term, Brier sum of squares, variance (multiclass.fill_rows) --
                h = 0.0
                sq = 0.0
                var = 0.0
                if not with_logs:
                    for k in range(K):
                        q = qv[k]
                        sq += q * q
                        if zero_logit_logs or not logits:
                            lv[k] = 0.0
                elif eps > 0.0:
                    sc = 0.0
                    for k in range(K):
                        qe = min(max(qv[k], lo), hi)
                        ev[k] = qe
                        sc += qe
                    inv = 1.0 / sc
                    for k in range(K):
                        qe = ev[k] * inv
                        ev[k] = qe
                        lv[k] = math.log(qe)
                    lmn, lmx = math.inf, -math.inf
                    for k in range(K):
                        q = qv[k]
                        sq += q * q
                        h += ev[k] * lv[k]
                        lmn = min(lmn, lv[k])
                        lmx = max(lmx, lv[k])
                    h = lmx if lmn == lmx else h  # multiclass._flat_h
                    for k in range(K):
                        d = lv[k] - h
                        var += ev[k] * d * d
                else:
                    lmn, lmx = math.inf, -math.inf
                    for k in range(K):
                        q = qv[k]
                        sq += q * q
                        h += 0.0 if q == 0.0 else q * lv[k]
                        lmn = min(lmn, math.inf if q == 0.0 else lv[k])
                        lmx = max(lmx, -math.inf if q == 0.0 else lv[k])
                    h = lmx if lmn == lmx else h  # multiclass._flat_h
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
                if uniform:
                    b = mc_uniform_bin(conf, nb, nbf, right, f32)
                else:
                    b = search_bin(edges, nb, conf, right)
                ok = am == yk
                totals_add(tot, brier, nll, ecd)
                totals_add_within(tot, sq, qy)
            bins_add(sh, store, wbase, T, tid, lane, nb1, warp_bins, use, b, ok, ok, conf, ecd,
                     var)
            if classwise:
                for k in range(K):
                    key = np.int64(-1)
                    q = 0.0
                    if use:
                        q = qv[k]
                        if uniform:
                            key = k * nb + mc_uniform_bin(q, nb, nbf, right, f32)
                        else:
                            key = k * nb + search_bin(edges, nb, q, right)
                    classes_add_warp(cstore, cbase, knb, key, lane, k == yk, q)
        cuda.syncthreads()
        if classwise:
            for s in range(tid, csize, T):
                acc = 0.0
                for w in range(nw):
                    acc += cstore[cbase0 + w * csize + s]
                part_w[blk, s] = acc
        bins_finish(sh, store, base0, T, tid, nb1, warp_bins, N_TOT, N_KINDS, tot, chk, part_i,
                    part_f, part_t, part_c)

    return fill


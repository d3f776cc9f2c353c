"""GPU fill of the multi-class state (the layout of ``multiclass.py``): top-label,
class-wise and the eq.-12 ECD sums, probabilities or logits (softmax in the kernel).

One thread per row (grid-stride). The row's K probabilities and logs live in
thread-local arrays of compile-time size, so one kernel is compiled per K
(``kernel(K)``). Row status, argmax, softmax, clipping, entropy, variance and
bins follow the CPU's row-at-a-time kernel (``multiclass.fill_rows``) step for
step; ``exp64`` is the CPU's own series, the logarithms are libdevice's (both
within an ulp or two of the CPU's, far inside 1e-12).

State: top-label bins are private per thread in shared memory like the binary
kernel (packed counters, sum of the max probability, ECD and variance sums;
no atomics). The class-wise K x n_bins state is per block: in shared memory
when it fits, updated with shared-memory atomics (float64 counters are exact
integers), else in the block's own row of a global array; either way each
block writes its own partial row and the host adds the rows.
"""

import math

import numpy as np

from ._cuda import (F64, I64, PACK, PACK2, cuda, exp64, log0, mc_uniform_bin, note,
                    search_bin)

SLOTS = 4
ROWWISE_K = 64  # multiclass.ROWWISE_K
N_TOT = 5
N_KINDS = 8   # multiclass.CHECK_* kinds
N_CHK = 16
NAN_P, INF_P, NEG_P, SUM_P, BAD_Y, NAN_Y, OMIT = 0, 1, 2, 3, 4, 5, 6

_cache = {}


def shared_per_thread(n_bins):
    return 8 * max(SLOTS * (n_bins + 1), N_TOT + N_CHK)


def kernel(K):
    """The fill kernel for rows of K classes (compiled on first launch, cached)."""
    k = _cache.get(K)
    if k is None:
        k = _make(K)
        _cache[K] = k
    return k


def _make(K):
    kf = np.float64(K)
    # with_logs=False (binned metrics only): the CPU's blocked kernel (K < 64) keeps the
    # log-softmax of logits in its ECD/NLL sums, the row kernel (K >= 64) zeroes them.
    zero_logit_logs = K >= ROWWISE_K

    @cuda.jit
    def fill(P, y, edges, uniform, right, f32, eps, logits, renorm, tol, classwise, with_logs,
             cw_shared, part_i, part_f, part_t, part_c, part_w):
        sh = cuda.shared.array(0, F64)
        T = cuda.blockDim.x
        tid = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        n = P.shape[0]
        nb = edges.shape[0] - 1
        nb1 = nb + 1
        nbf = np.float64(nb)
        lo = eps
        hi = 1.0 - eps
        top_slots = SLOTS * nb1
        if top_slots < N_TOT + N_CHK:
            top_slots = N_TOT + N_CHK
        for s in range(SLOTS * nb1):
            sh[s * T + tid] = 0.0
        # class-wise state: [count per (k, b)] [label count per (k, b)] [sum p_k per (k, b)]
        cwn = 3 * K * nb
        cw0 = top_slots * T
        if classwise and cw_shared:
            for s in range(tid, cwn, T):
                sh[cw0 + s] = 0.0
        cuda.syncthreads()
        qv = cuda.local.array(K, F64)
        lv = cuda.local.array(K, F64)
        ev = cuda.local.array(K, F64)
        tot = cuda.local.array(N_TOT, F64)
        chk = cuda.local.array(N_CHK, I64)
        for k in range(N_TOT):
            tot[k] = 0.0
        for k in range(N_KINDS):
            chk[k] = 0
            chk[N_KINDS + k] = -1
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            # -- the row, its status and argmax (multiclass._load_row) --
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
                continue
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
            else:
                if renorm:
                    inv = 1.0 / s
                    for k in range(K):
                        qv[k] = qv[k] * inv
                if with_logs:
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
                for k in range(K):
                    q = qv[k]
                    sq += q * q
                    h += ev[k] * lv[k]
                for k in range(K):
                    d = lv[k] - h
                    var += ev[k] * d * d
            else:
                for k in range(K):
                    q = qv[k]
                    sq += q * q
                    h += 0.0 if q == 0.0 else q * lv[k]
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
            packed = 1.0 + (PACK + PACK2 if ok else 0.0)
            base = b * T + tid
            sh[base] += packed
            base += nb1 * T
            sh[base] += conf
            base += nb1 * T
            sh[base] += ecd
            base += nb1 * T
            sh[base] += var
            tot[0] += brier
            tot[1] += nll
            tot[2] += ecd * ecd
            tot[3] += brier * brier
            tot[4] += nll * nll
            if classwise:
                for k in range(K):
                    q = qv[k]
                    if uniform:
                        bk = mc_uniform_bin(q, nb, nbf, right, f32)
                    else:
                        bk = search_bin(edges, nb, q, right)
                    j = k * nb + bk
                    if cw_shared:
                        cuda.atomic.add(sh, cw0 + j, 1.0)
                        cuda.atomic.add(sh, cw0 + 2 * K * nb + j, q)
                    else:
                        cuda.atomic.add(part_w, (blk, j), 1.0)
                        cuda.atomic.add(part_w, (blk, 2 * K * nb + j), q)
                if uniform:
                    by = mc_uniform_bin(qy, nb, nbf, right, f32)
                else:
                    by = search_bin(edges, nb, qy, right)
                j = K * nb + yk * nb + by
                if cw_shared:
                    cuda.atomic.add(sh, cw0 + j, 1.0)
                else:
                    cuda.atomic.add(part_w, (blk, j), 1.0)
        cuda.syncthreads()
        if classwise and cw_shared:
            for s in range(tid, cwn, T):
                part_w[blk, s] = sh[cw0 + s]
        _block_reduce(sh, T, tid, nb1, tot, chk, part_i, part_f, part_t, part_c, blk)

    return fill


@cuda.jit(device=True, inline=True)
def _block_reduce(sh, T, tid, nb1, tot, chk, part_i, part_f, part_t, part_c, blk):
    """Fixed-order reduction of the top-label bins, totals and checks (see cuda_binary)."""
    cuda.syncthreads()
    for s in range(tid, SLOTS * nb1, T):
        f = s // nb1
        b = s - f * nb1
        base = s * T
        if f == 0:
            c0 = np.int64(0)
            c1 = np.int64(0)
            for j in range(T):
                c = np.int64(sh[base + j])
                c0 += c & 131071
                c1 += (c >> 17) & 131071
            part_i[blk, b, 0] = c0
            part_i[blk, b, 1] = c1
            part_i[blk, b, 2] = c1
        else:
            acc = 0.0
            for j in range(T):
                acc += sh[base + j]
            part_f[blk, b, f - 1] = acc
    cuda.syncthreads()
    for k in range(N_TOT):
        sh[k * T + tid] = tot[k]
    for k in range(N_CHK):
        sh[(N_TOT + k) * T + tid] = np.float64(chk[k])
    cuda.syncthreads()
    for r in range(tid, N_TOT + N_KINDS, T):
        if r < N_TOT:
            acc = 0.0
            for j in range(T):
                acc += sh[r * T + j]
            part_t[blk, r] = acc
        else:
            k = r - N_TOT
            cnt = np.int64(0)
            first = np.int64(-1)
            for j in range(T):
                cnt += np.int64(sh[(N_TOT + k) * T + j])
                fj = np.int64(sh[(N_TOT + N_KINDS + k) * T + j])
                if fj >= 0 and (first < 0 or fj < first):
                    first = fj
            part_c[blk, k] = cnt
            part_c[blk, N_KINDS + k] = first

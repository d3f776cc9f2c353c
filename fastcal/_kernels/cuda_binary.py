"""GPU fill of the binary per-bin state (the layout of ``binary.py``), probabilities and logits.

CUDA kernels only: no validation, no objects; ``fastcal.cuda`` launches them
and reduces their per-block partial results on the host.

Design (one pass over the data, a persistent grid-stride loop):

* Each thread owns private bins in shared memory, laid out slot-major
  (``sh[slot * T + tid]``) so a warp's accesses hit distinct banks. Four
  float64 slots per bin: the three counters packed into one exact integer
  (see ``_cuda.PACK``), the sum of p, of the ECD terms and of their variance.
  An update is four shared-memory read-add-writes: no atomics at all, and
  no per-bin compare-and-add.
* The five global sums and the invalid-input counters stay in registers.
* At the end each block reduces its threads' bins in a fixed order and
  writes one partial row per block; the host adds the rows. Float sums are
  float64 whatever the input dtype; counts are exact integers.
* Bins use the CPU kernel's edge arithmetic (``_cuda.uniform_bin``), so a p
  on an edge goes to the same side for float32 and float64 and either
  ``closed``. Invalid rows (NaN, p outside [0, 1], labels other than 0/1)
  go to the trash bin nb with the CPU's neutral values and are counted,
  with their first index, while filling.
"""

import math

import numpy as np

from ._cuda import F64, I64, PACK, PACK2, cuda, exp64, log0, log1m, note, search_bin, uniform_bin, unpack

SLOTS = 4          # shared float64 slots per bin and thread
N_TOT = 5
N_KINDS = 5        # binary.CHECK_* kinds
N_CHK = 2 * N_KINDS  # counts then first indices (a literal size for local arrays)
# indices of binary.CHECK_*: NaN p, p out of range, bad label, NaN label, omitted
_NAN_P, _RANGE_P, _BAD_Y, _NAN_Y, _OMIT = 0, 1, 2, 3, 4
_LOG_HALF = -0.6931471805599453


@cuda.jit(device=True, inline=True)
def _add(sh, T, tid, nb1, b, packed, pv, ev, vv):
    s = b * T + tid
    sh[s] += packed
    s += nb1 * T
    sh[s] += pv
    s += nb1 * T
    sh[s] += ev
    s += nb1 * T
    sh[s] += vv


@cuda.jit(device=True, inline=True)
def _block_reduce(sh, T, tid, nb1, tot, chk, part_i, part_f, part_t, part_c, blk):
    """Fixed-order reduction of the block's private bins, totals and checks."""
    cuda.syncthreads()
    for s in range(tid, SLOTS * nb1, T):
        f = s // nb1
        b = s - f * nb1
        base = s * T
        if f == 0:
            c0 = np.int64(0)
            c1 = np.int64(0)
            c2 = np.int64(0)
            for j in range(T):
                a0, a1, a2 = unpack(sh[base + j])
                c0 += a0
                c1 += a1
                c2 += a2
            part_i[blk, b, 0] = c0
            part_i[blk, b, 1] = c1
            part_i[blk, b, 2] = c2
        else:
            acc = 0.0
            for j in range(T):
                acc += sh[base + j]
            part_f[blk, b, f - 1] = acc
    cuda.syncthreads()
    # Totals and checks through the same shared memory (at least 15 slots per thread).
    for k in range(N_TOT):
        sh[k * T + tid] = tot[k]
    for k in range(2 * N_KINDS):
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


@cuda.jit
def fill_prob(p, y, edges, uniform, right, is32, lo, hi, with_logs,
              part_i, part_f, part_t, part_c):
    """Binary probabilities: one partial state per block (see the module docstring).

    ``is32`` says the edges are float32-rounded (float32 p): it selects the
    edge formula, exactly as on the CPU.
    """
    sh = cuda.shared.array(0, F64)
    T = cuda.blockDim.x
    tid = cuda.threadIdx.x
    blk = cuda.blockIdx.x
    n = p.shape[0]
    nb = edges.shape[0] - 1
    nb1 = nb + 1
    nbf = np.float64(nb)
    invn = 1.0 / nbf
    top = nb - 1
    for s in range(SLOTS * nb1):
        sh[s * T + tid] = 0.0
    tot = cuda.local.array(N_TOT, F64)
    chk = cuda.local.array(N_CHK, I64)
    for k in range(N_TOT):
        tot[k] = 0.0
    for k in range(N_KINDS):
        chk[k] = 0
        chk[N_KINDS + k] = -1
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        pj = np.float64(p[i])
        yj = np.float64(y[i])
        good = (pj >= 0.0) and (pj <= 1.0) and ((yj == 0.0) or (yj == 1.0))
        ps = pj if good else 0.5
        ys = yj if good else 0.0
        if not good:
            nan_p = pj != pj
            nan_y = yj != yj
            if nan_p or nan_y:
                note(chk, _OMIT, N_KINDS, i)
            if nan_p:
                note(chk, _NAN_P, N_KINDS, i)
            elif not (pj >= 0.0 and pj <= 1.0):
                note(chk, _RANGE_P, N_KINDS, i)
            if nan_y:
                note(chk, _NAN_Y, N_KINDS, i)
            elif not (yj == 0.0 or yj == 1.0):
                note(chk, _BAD_Y, N_KINDS, i)
        if not good:
            b = nb
        elif uniform:
            b = uniform_bin(ps, nbf, top, invn, right, is32)
        else:
            b = search_bin(edges, nb, ps, right)
        pos = ys == 1.0
        ok = (ps > 0.5) == pos
        packed = 1.0 + (PACK if pos else 0.0) + (PACK2 if ok else 0.0)
        ev = 0.0
        vv = 0.0
        if with_logs:
            q = min(max(ps, lo), hi)
            if good:
                lp = log0(q)
                lq = log1m(q)
            else:
                lp = _LOG_HALF
                lq = _LOG_HALF
            logit = lp - lq
            d = q - ys
            ev = 0.0 if d == 0.0 else d * logit
            pq = q * (1.0 - q)
            vv = 0.0 if pq == 0.0 else pq * logit * logit
            if good:
                nll = -lp if pos else -lq
                db = ps - ys
                br = db * db
                tot[0] += br
                tot[1] += nll
                tot[2] += ev * ev
                tot[3] += br * br
                tot[4] += nll * nll
        _add(sh, T, tid, nb1, b, packed, ps, ev, vv)
    _block_reduce(sh, T, tid, nb1, tot, chk, part_i, part_f, part_t, part_c, blk)


@cuda.jit(device=True, inline=True)
def _log_sigmoid(z):
    """log(1 / (1 + exp(-z))) for finite z, as the CPU kernel computes it."""
    a = -abs(z)
    e = exp64(a)
    u = 1.0 + e
    l1p = math.log(u) - ((u - 1.0) - e) / u if e > 0.0 else 0.0
    return min(z, 0.0) - l1p


@cuda.jit
def fill_logit(z, y, edges, uniform, right, lo, hi, eps_pos,
               part_i, part_f, part_t, part_c):
    """Binary logits (``multiclass.fill_binary_logits_range``): p = sigmoid(z) never stored.

    Invalid rows are skipped (not binned), as on the CPU; the check kinds
    are binary.CHECK_*, "p out of range" meaning an infinite logit.
    """
    sh = cuda.shared.array(0, F64)
    T = cuda.blockDim.x
    tid = cuda.threadIdx.x
    blk = cuda.blockIdx.x
    n = z.shape[0]
    nb = edges.shape[0] - 1
    nb1 = nb + 1
    for s in range(SLOTS * nb1):
        sh[s * T + tid] = 0.0
    tot = cuda.local.array(N_TOT, F64)
    chk = cuda.local.array(N_CHK, I64)
    for k in range(N_TOT):
        tot[k] = 0.0
    for k in range(N_KINDS):
        chk[k] = 0
        chk[N_KINDS + k] = -1
    nbf = np.float64(nb)
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        zi = np.float64(z[i])
        yi = np.float64(y[i])
        fin = (zi > -math.inf) and (zi < math.inf)
        y_ok = (yi == 0.0) or (yi == 1.0)
        if not (fin and y_ok):
            nan_z = zi != zi
            nan_y = yi != yi
            if nan_z or nan_y:
                note(chk, _OMIT, N_KINDS, i)
            if nan_z:
                note(chk, _NAN_P, N_KINDS, i)
            elif not fin:
                note(chk, _RANGE_P, N_KINDS, i)
            if nan_y:
                note(chk, _NAN_Y, N_KINDS, i)
            elif not y_ok:
                note(chk, _BAD_Y, N_KINDS, i)
            continue
        lp = _log_sigmoid(zi)
        lq = _log_sigmoid(-zi)
        p = exp64(lp)
        if eps_pos:
            pe = min(max(p, lo), hi)
            lp = math.log(pe)
            lq = math.log(1.0 - pe)
        else:
            pe = p
        logit = lp - lq
        e = (pe - yi) * logit
        v = pe * (1.0 - pe) * logit * logit
        pos = yi == 1.0
        nll = -lp if pos else -lq
        db = p - yi
        br = db * db
        if uniform:
            # the multi-class kernel's uniform bin (float64 edges: logits give float64 p)
            b = min(max(np.int64(p * nbf), np.int64(0)), nb - 1)
            if right:
                b = b - np.int64((b > 0) and (p <= edges[b]))
                b = b + np.int64((b < nb - 1) and (p > edges[b + 1]))
            else:
                b = b - np.int64((b > 0) and (p < edges[b]))
                b = b + np.int64((b < nb - 1) and (p >= edges[b + 1]))
        else:
            b = search_bin(edges, nb, p, right)
        ok = (p > 0.5) == pos
        packed = 1.0 + (PACK if pos else 0.0) + (PACK2 if ok else 0.0)
        tot[0] += br
        tot[1] += nll
        tot[2] += e * e
        tot[3] += br * br
        tot[4] += nll * nll
        _add(sh, T, tid, nb1, b, packed, p, e, v)
    _block_reduce(sh, T, tid, nb1, tot, chk, part_i, part_f, part_t, part_c, blk)


def shared_per_thread(n_bins):
    """Dynamic shared-memory bytes per thread for n_bins bins."""
    return 8 * max(SLOTS * (n_bins + 1), N_TOT + 2 * N_KINDS)

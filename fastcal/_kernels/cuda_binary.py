"""GPU fill of the binary per-bin state (the layout of ``binary.py``), probabilities and logits.

CUDA kernels only: no validation, no objects; ``fastcal.cuda`` launches them
and reduces their per-block partial results on the host.

Design (one pass over the data, a persistent grid-stride loop):

* Up to 47 bins, each thread owns private bins in shared memory, laid out
  slot-major (``sh[slot * T + tid]``) so a warp's accesses hit distinct
  banks. Four float64 slots per bin: the three counters packed into one exact
  integer (see ``_cuda.PACK``), the sum of p, of the ECD terms and of their
  variance. An update is four shared-memory read-add-writes: no atomics at
  all, and no per-bin compare-and-add.
* With more bins, each warp owns private bins (``_cuda.bins_add_warp``: lanes
  with the same bin are grouped and added by one lane, in lane order), in
  shared memory while they fit, else in the warp's row of a global array.
* The five global sums and the invalid-input counters stay in registers.
* At the end each block reduces its threads' bins in a fixed order and
  writes one partial row per block; the host adds the rows. Float sums are
  float64 whatever the input dtype; counts are exact integers.
* Bins, logarithms and per-row terms are the CPU kernels' own functions
  (``rows.py``, ``mathfn.py``), so a p on an edge goes to the same side for
  float32 and float64 and either ``closed``. Invalid rows (NaN, p outside
  [0, 1], labels other than 0/1) go to the trash bin nb with neutral values
  (p = 0.5, y = 0) and are counted, with their first index, while filling.
"""

import math

import numpy as np

from ._cuda import (
    F64,
    I64,
    WARP,
    bins_add,
    bins_finish,
    bins_start,
    cuda,
    plain,
    totals_add,
    totals_add_within,
    totals_start,
)
from .mathfn import exp64, log_inline, log_pair
from .rows import bin_edges, bin_near_edge, bin_search, binary_terms, log_sigmoid, note_pair

N_TOT = 7
N_KINDS = 5        # binary.CHECK_* kinds
N_CHK = 2 * N_KINDS  # counts then first indices (a literal size for local arrays)
# indices of binary.CHECK_*: NaN p, p out of range, bad label, NaN label, omitted
_NAN_P, _RANGE_P, _BAD_Y, _NAN_Y, _OMIT = 0, 1, 2, 3, 4
_LOG_HALF = -0.6931471805599453


@cuda.jit
def fill_prob(p, y, edges, uniform, right, is32, lo, hi, with_logs, warp_bins, wglobal, gw,
              part_i, part_f, part_t, part_c):
    """Binary probabilities: one partial state per block (see the module docstring).

    ``is32`` says the edges are float32-rounded (float32 p): it selects the
    edge formula. ``warp_bins``/``wglobal``/``gw``:
    where the bins live (``_cuda.plan_launch``).
    """
    sh = cuda.shared.array(0, F64)
    T = cuda.blockDim.x
    tid = cuda.threadIdx.x
    lane = tid % WARP
    n = p.shape[0]
    edges = plain(edges)
    nb = edges.shape[0] - 1
    nb1 = nb + 1
    nbf = np.float64(nb)
    invn = 1.0 / nbf
    top = nb - 1
    store, wbase, base0 = bins_start(sh, gw, T, tid, nb1, warp_bins, wglobal)
    tot = cuda.local.array(N_TOT, F64)
    chk = cuda.local.array(N_CHK, I64)
    totals_start(tot, chk, N_KINDS)
    # every thread of a block runs the same number of rounds (warp_bins needs whole warps)
    for i0 in range(cuda.blockIdx.x * T, n, cuda.gridsize(1)):
        i = i0 + tid
        live = i < n
        pj = 0.5
        yj = 0.0
        if live:
            pj = np.float64(p[i])
            yj = np.float64(y[i])
        good = (pj >= 0.0) and (pj <= 1.0) and ((yj == 0.0) or (yj == 1.0))
        ps = pj if good else 0.5
        ys = yj if good else 0.0
        if not good:
            note_pair(chk, N_KINDS, i, pj, (pj >= 0.0) and (pj <= 1.0), yj,
                      (yj == 0.0) or (yj == 1.0), _NAN_P, _RANGE_P, _OMIT, _NAN_Y, _BAD_Y)
        if not good:
            b = nb
        elif uniform:
            b = bin_near_edge(ps, nbf, top, invn, right, is32)
        else:
            b = bin_search(edges, nb, ps, right)
        pos = ys == 1.0
        ok = (ps > 0.5) == pos
        ev = 0.0
        vv = 0.0
        if with_logs:
            q = min(max(ps, lo), hi)
            lp = _LOG_HALF
            lq = _LOG_HALF
            if good:
                lp, lq = log_pair(q)
            ev, vv, nll, br = binary_terms(q, ps, ys, lp, lq)
            if good and live:
                totals_add(tot, br, nll, ev)
                totals_add_within(tot, ps * ps, ps * ys)
        bins_add(sh, store, wbase, T, tid, lane, nb1, warp_bins, live, b, pos, ok, ps, ev, vv)
    bins_finish(sh, store, base0, T, tid, nb1, warp_bins, N_TOT, N_KINDS, tot, chk, part_i,
                part_f, part_t, part_c)


@cuda.jit
def fill_logit(z, y, edges, uniform, right, lo, hi, eps_pos, warp_bins, wglobal, gw,
               part_i, part_f, part_t, part_c):
    """Binary logits (``logits.fill_binary_logits_range``): p = sigmoid(z) never stored.

    Invalid rows are skipped (not binned); the check kinds are
    binary.CHECK_*, "p out of range" meaning an infinite logit.
    """
    sh = cuda.shared.array(0, F64)
    T = cuda.blockDim.x
    tid = cuda.threadIdx.x
    lane = tid % WARP
    n = z.shape[0]
    edges = plain(edges)
    nb = edges.shape[0] - 1
    nb1 = nb + 1
    store, wbase, base0 = bins_start(sh, gw, T, tid, nb1, warp_bins, wglobal)
    tot = cuda.local.array(N_TOT, F64)
    chk = cuda.local.array(N_CHK, I64)
    totals_start(tot, chk, N_KINDS)
    nbf = np.float64(nb)
    for i0 in range(cuda.blockIdx.x * T, n, cuda.gridsize(1)):
        i = i0 + tid
        live = i < n
        zi = 0.0
        yi = 0.0
        if live:
            zi = np.float64(z[i])
            yi = np.float64(y[i])
        fin = (zi > -math.inf) and (zi < math.inf)
        y_ok = (yi == 0.0) or (yi == 1.0)
        use = live and fin and y_ok
        if not (fin and y_ok):
            note_pair(chk, N_KINDS, i, zi, fin, yi, y_ok, _NAN_P, _RANGE_P, _OMIT, _NAN_Y, _BAD_Y)
        p = 0.0
        e = 0.0
        v = 0.0
        pos = False
        ok = False
        b = np.int64(-1)
        if use:
            lp = log_sigmoid(zi, log_inline)
            lq = log_sigmoid(-zi, log_inline)
            p = exp64(lp)
            pe = p
            if eps_pos:
                pe = min(max(p, lo), hi)
                if pe != p:
                    # clipped: logs of the clipped value; unclipped rows keep lp, lq from z
                    lp = log_inline(pe)
                    lq = log_inline(1.0 - pe)
            e, v, nll, br = binary_terms(pe, p, yi, lp, lq)
            pos = yi == 1.0
            b = bin_edges(p, edges, nb, nbf, uniform, right)  # float64 edges: p is float64
            ok = (p > 0.5) == pos
            totals_add(tot, br, nll, e)
            totals_add_within(tot, p * p, p * yi)
        bins_add(sh, store, wbase, T, tid, lane, nb1, warp_bins, use, b, pos, ok, p, e, v)
    bins_finish(sh, store, base0, T, tid, nb1, warp_bins, N_TOT, N_KINDS, tot, chk, part_i,
                part_f, part_t, part_c)

"""Per-row arithmetic, written once for the CPU kernels and the CUDA kernels.

Every function here is ``@njit(inline="always")``: Numba pastes its body into
the caller, CPU loop or CUDA kernel, where it is compiled with the caller's
flags (the CPU kernels' ``FASTMATH``, none in the CUDA kernels). A CUDA kernel
can call a Numba function only that way (a separate device function needs a
GPU to compile). Under Numba's CUDA simulator the kernels run as Python and
call these functions compiled for the CPU, so arrays they take must be NumPy
arrays (``_cuda.plain``). The elementwise maths they build on (``exp64``, the
logarithms, the bit casts) are in ``mathfn.py``.

Logarithms are passed in as ``log``: the CPU kernels pass ``mathfn.log64``
(compiled on its own with ``FASTMATH_EXACT``: inlined into a reassociating
loop its exact float identities would be undone), the CUDA kernels
``mathfn.log_inline`` (the same function, inlined; they have no fastmath).

What stays apart, and why:

- the CPU kernels' block structure: bins, logs, terms and the scatter in
  separate vectorised loops over a block of rows (binary, the K-class blocked
  kernel for K < 64, bootstrap), packed counters and interleaved copies of
  the bins; the GPU has a thread per row instead. Both call the same row
  functions inside their loops;
- where the state lives on the GPU: per-thread and per-warp bins in shared or
  global memory, warp votes and shuffles, block reductions
  (``_cuda.bins_add``, ``group_sum``, ``reduce_*``), the one integer atomic of
  the equal-mass gather, thread-local arrays of compile-time size (one kernel
  per K or d), and the simulator's stand-ins for warp intrinsics;
- where the invalid rows are looked for: the CPU's binary kernel scans again
  only the blocks that hold some, the GPU notes them while filling (both call
  ``note_row``);
- the Gaussian NEES (``gaussian.nees_one`` and ``cuda_gaussian``): not shared
  yet; the CPU's Cholesky and substitution are separate ``nogil`` kernels
  (not inlined), which a CUDA kernel cannot call without a GPU to compile.

The bootstrap's hashes and Poisson weights (``bootstrap.mix64``, ``draw``,
``poisson1``) are shared the same way from ``bootstrap.py``.
"""

import numpy as np

from ._lazy import njit
from .mathfn import KEY_HIGH, KEY_LOW, exp64, floor64, from_key, order_key, search_sorted

_SELECT_K = 32  # row_argmax: a branch-free select below this many classes, else a min-reduction


# -- invalid rows ------------------------------------------------------------------

@njit(inline="always", cache=True)
def note_check(checks, nk, kind, i):
    """Count row i as invalid of this kind in checks (nk counts, then nk first
    indices, -1 for none); the first index kept is the smallest."""
    checks[kind] += 1
    first = checks[nk + kind]
    if first < 0 or i < first:
        checks[nk + kind] = i


@njit(inline="always", cache=True)
def note_row(checks, nk, i, p_kind, p_nan, nan_y, y_ok, omitted, nan_label, bad_label):
    """Count the faults of row i: its prediction's kind p_kind (-1: none), and
    omitted when the prediction (p_nan) or the label is NaN, and nan_label or
    bad_label (y_ok False) for the label."""
    if p_nan or nan_y:
        note_check(checks, nk, omitted, i)
    if p_kind >= 0:
        note_check(checks, nk, p_kind, i)
    if nan_y:
        note_check(checks, nk, nan_label, i)
    elif not y_ok:
        note_check(checks, nk, bad_label, i)


@njit(inline="always", cache=True)
def note_pair(checks, nk, i, x, x_ok, y, y_ok, nan_x, bad_x, omitted, nan_label, bad_label):
    """Count the faults of a row (x, y) of binary input: nan_x or bad_x (x_ok False)
    for the prediction x, nan_label or bad_label (y_ok False) for the label y,
    and omitted when either is NaN. The kinds are the caller's constants, so a
    CUDA kernel keeps its counts in registers."""
    x_nan = x != x
    y_nan = y != y
    if x_nan or y_nan:
        note_check(checks, nk, omitted, i)
    if x_nan:
        note_check(checks, nk, nan_x, i)
    elif not x_ok:
        note_check(checks, nk, bad_x, i)
    if y_nan:
        note_check(checks, nk, nan_label, i)
    elif not y_ok:
        note_check(checks, nk, bad_label, i)


# -- bins ------------------------------------------------------------------------

@njit(inline="always", error_model="numpy", cache=True)
def bin_near_edge(x, nbf, top, invn, right, is32):
    """Bin of x in [0, 1] for uniform edges, exact at every edge, without memory reads.

    Only the edge nearest to x * n can be on the wrong side of a naive
    floor(x * n) (0.3 * 10 = 2.9999999999999996), so that edge E_k = k / n,
    rounded to x's own dtype, is recomputed here and compared with x. For
    float32 data E_k = float32(k * (1 / n)): the float64 product is within
    2 ulp of k / n, far closer than any float32 rounding boundary, so it
    rounds to the same float32 as k / n (``binary._uniform_ok`` checks the
    whole table before this is used). For float64 data E_k is the correctly
    rounded division.
    """
    k = np.int64(x * nbf + 0.5)
    kf = np.float64(k)
    if is32:
        e = np.float64(np.float32(kf * invn))
    else:
        e = kf / nbf
    # (a, b] (right) with x = 0 in the first bin, or [a, b) with x = 1 in the
    # last bin: the same but one bin up when x == e. Arithmetic rather than a
    # branch, so that one compiled loop serves both sides.
    b = k - 1 + np.int64(x > e) + np.int64((x == e) & (not right))
    return min(max(b, np.int64(0)), top)


@njit(inline="always", error_model="numpy", cache=True)
def bin_uniform(x, nb, nbf, right, f32):
    """Uniform-edge bin of x, branch-free and without table look-ups (vectorises).

    The edges b / n_bins are recomputed in float64 (the same division as
    ``binning.uniform_edges``) and rounded to float32 when the values are
    float32, so an x on an edge goes to the documented side exactly as in
    ``bin_edges``.
    """
    b = min(max(np.int64(x * nbf), np.int64(0)), nb - 1)
    bf = np.float64(b)
    lo = bf / nbf
    hi = (bf + 1.0) / nbf
    if f32:
        lo = np.float64(np.float32(lo))
        hi = np.float64(np.float32(hi))
    if right:
        b = b - np.int64((b > 0) & (x <= lo))
        b = b + np.int64((b < nb - 1) & (x > hi))
    else:
        b = b - np.int64((b > 0) & (x < lo))
        b = b + np.int64((b < nb - 1) & (x >= hi))
    return b


@njit(inline="always", error_model="numpy", cache=True)
def bin_search(edges, nb, x, right):
    """Bin of x in [0, 1] for any sorted edges spanning [0, 1], by binary search:
    (a, b] bins (right) are searchsorted(edges, x, 'left') - 1, [a, b) bins
    searchsorted(edges, x, 'right') - 1, kept within [0, nb - 1]."""
    b = search_sorted(edges, x, not right) - 1
    return min(max(b, np.int64(0)), nb - 1)


@njit(inline="always", error_model="numpy", cache=True)
def bin_edges(x, edges, nb, nbf, uniform, right):
    """Bin of x in [0, 1] by the stored edges (values a rounding above 1 go to the
    last bin): uniform ones by floor(x * n), moved by one where a stored edge
    says so, so an x on an edge goes to the documented side; others by
    ``bin_search``."""
    if uniform:
        b = min(max(np.int64(x * nbf), np.int64(0)), nb - 1)
        if right:
            b = b - np.int64((b > 0) & (x <= edges[b]))
            b = b + np.int64((b < nb - 1) & (x > edges[b + 1]))
        else:
            b = b - np.int64((b > 0) & (x < edges[b]))
            b = b + np.int64((b < nb - 1) & (x >= edges[b + 1]))
        return b
    return bin_search(edges, nb, x, right)


# -- binary rows -------------------------------------------------------------------

@njit(inline="always", error_model="numpy", cache=True)
def binary_terms(q, p, y, lp, lq):
    """(ECD term, its variance, NLL term, Brier term) of one binary row.

    q is p clipped to [eps, 1 - eps], lp and lq are log q and log(1 - q), y is
    0 or 1. ECD (p - y) logit(q) (eq. 15), 0 when q == y (its limit);
    variance q (1 - q) logit(q)**2, 0 when q (1 - q) is 0 (its limit, where
    the product would be 0 * inf); NLL -log q_y; Brier (p - y)**2.
    """
    logit = lp - lq
    d = q - y
    e = 0.0 if d == 0.0 else d * logit
    pq = q * (1.0 - q)
    v = 0.0 if pq == 0.0 else pq * logit * logit
    nll = -lp if y == 1.0 else -lq
    db = p - y
    return e, v, nll, db * db


@njit(inline="always", error_model="numpy", cache=True)
def log_sigmoid(z, log):
    """log(1 / (1 + exp(-z))) without overflow, for finite z; ``log`` is the
    logarithm of the caller's target (see the module docstring)."""
    a = -abs(z)
    # log(1 + exp(a)) for a <= 0, accurate when exp(a) is tiny
    e = exp64(a)
    u = 1.0 + e
    l1p = log(u) - ((u - 1.0) - e) / u if e > 0.0 else 0.0
    return min(z, 0.0) - l1p


# -- rows of K classes -------------------------------------------------------------

@njit(inline="always", error_model="numpy", cache=True)
def row_load(P, i, K, qv):
    """Row i of P into qv (float64): (sum, max, min).

    The max and min are taken over ``order_key``s, so the loop vectorises. They
    are the values' own max and min when no value is NaN (a zero's sign aside);
    a NaN makes the sum NaN, and ``row_status`` then looks at the row again.
    """
    s = 0.0
    kmx = KEY_LOW
    kmn = KEY_HIGH
    for k in range(K):
        v = np.float64(P[i, k])
        qv[k] = v
        s += v
        key = order_key(v)
        kmx = max(kmx, key)
        kmn = min(kmn, key)
    return s, from_key(kmx), from_key(kmn)


@njit(inline="always", error_model="numpy", cache=True)
def row_status(qv, K, logits, renorm, tol, s, mx, mn, nan_p, inf_p, neg_p, sum_p):
    """(status, max) of a row loaded by ``row_load``: status -1 when the row is
    valid, else the kind (nan_p, inf_p, neg_p or sum_p: the caller's check
    codes); max over the finite values when the row holds an infinity.

    Logits may hold -inf (a class with probability 0) if their max is finite.
    """
    # Comparisons, not s - s == 0: fastmath may fold x - x to 0 even for NaN.
    if not ((s > -np.inf) & (s < np.inf)):
        # Slow path: the row has a NaN or an infinity somewhere.
        has_nan = False
        has_pinf = False
        mx = -np.inf
        for k in range(K):
            v = qv[k]
            if not (v == v):
                has_nan = True
            elif v == np.inf:
                has_pinf = True
            elif v > mx:
                mx = v
        if has_nan:
            return nan_p, mx
        if (not logits) or has_pinf or mx == -np.inf:
            return inf_p, mx
    if not logits:
        if mn < 0.0:
            return neg_p, mx
        if renorm:
            if not (s > 0.0):
                return sum_p, mx
        elif abs(s - 1.0) > tol:
            return sum_p, mx
    return np.int64(-1), mx


@njit(inline="always", error_model="numpy", cache=True)
def row_argmax(qv, K, mx):
    """First index of the row's max (0 if no value equals mx).

    Short rows: a select over every class, from the last down, without
    branches (a branch per class mispredicts on a random argmax; 40% faster
    at K = 4). Long rows: the least index holding the max, a min-reduction
    that vectorises (a scan that stopped at the max did not). Neither loop has
    a ``break``: Numba gives qv a reference in the inlined body that each exit
    of a loop releases separately, and with two exits the reference counting
    is not pruned, so each row paid an atomic increment and decrement.
    """
    am = 0
    if K < _SELECT_K:
        for k in range(K - 1, -1, -1):
            am = k if qv[k] == mx else am
    else:
        am = K
        for k in range(K):
            am = min(am, k if qv[k] == mx else K)
        am = am if am < K else 0
    return am


@njit(inline="always", error_model="numpy", cache=True)
def row_probs(qv, lv, K, logits, renorm, s, mx, log):
    """The argmax of a valid row (sum s, max mx); qv becomes its probabilities:
    the softmax of logits (their log-softmax goes to lv), or the row divided
    by s when renormalising."""
    am = row_argmax(qv, K, mx)
    if logits:
        row_softmax(qv, lv, K, mx, log)
    elif renorm:
        row_scale(qv, K, s)
    return am


@njit(inline="always", error_model="numpy", cache=True)
def row_softmax(qv, lv, K, mx, log):
    """qv (logits, max mx) becomes the softmax, lv the log-softmax."""
    t = 0.0
    for k in range(K):
        d = qv[k] - mx
        lv[k] = d
        e = exp64(d)
        qv[k] = e
        t += e
    lt = log(t)
    inv = 1.0 / t
    for k in range(K):
        qv[k] = qv[k] * inv
        lv[k] = lv[k] - lt


@njit(inline="always", error_model="numpy", cache=True)
def row_scale(qv, K, s):
    """qv divided by its sum s (one reciprocal)."""
    inv = 1.0 / s
    for k in range(K):
        qv[k] = qv[k] * inv


@njit(inline="always", error_model="numpy", cache=True)
def row_clip(qv, ev, lv, K, lo, hi, log):
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
        lv[k] = log(qe)


@njit(inline="always", error_model="numpy", cache=True)
def flat_h(h, lmn, lmx):
    """H = sum_k q_k log q_k of a row, exactly log q when every nonzero q_k is
    the same q (ties such as (1/3, 1/3, 1/3), or equal logits). Computed, it is
    log q times the rounded row sum, and the row's ECD term h - log q_y and
    variance would be rounding noise, about 1e-16 and 1e-32, which the ECD test
    reads as a signal once a bin holds only such rows (z = sqrt(n))."""
    return lmx if lmn == lmx else h


@njit(inline="always", error_model="numpy", cache=True)
def row_entropy(qv, ev, lv, K, clipped):
    """(H, sum_k q_k**2, variance) of a row with logs lv: H = sum_k e_k log e_k
    (0 log 0 = 0) and the variance sum_k e_k (log e_k - H)**2 of the ECD term
    under the model's own distribution, e = ev (clipped) or qv.

    Each case is a function of its own, which a CPU kernel calls directly:
    inlined two levels deep (through this function or ``row_terms``), LLVM
    kept the loops scalar (3 ns a value at K = 1000 against 0.9 vectorised)."""
    if clipped:
        h, sq, var = row_entropy_clipped(qv, ev, lv, K)
    else:
        h, sq, var = row_entropy_plain(qv, lv, K)
    return h, sq, var


@njit(inline="always", error_model="numpy", cache=True)
def row_entropy_plain(qv, lv, K):
    """``row_entropy`` of an unclipped row. The least and greatest log of a
    nonzero q (for ``flat_h``) by ``order_key``, so the loop vectorises; the
    logs of a valid row are never NaN, so these are the float min and max."""
    h = 0.0
    sq = 0.0
    kmn = KEY_HIGH
    kmx = KEY_LOW
    for k in range(K):
        q = qv[k]
        lk = lv[k]  # loaded before the selects: a load under one would be a branch
        zero = q == 0.0
        sq += q * q
        h += 0.0 if zero else q * lk
        key = order_key(lk)
        kmn = min(kmn, KEY_HIGH if zero else key)
        kmx = max(kmx, KEY_LOW if zero else key)
    hf = flat_h(h, from_key(kmn), from_key(kmx))
    var = 0.0
    for k in range(K):
        q = qv[k]
        d = lv[k] - hf
        var += 0.0 if q == 0.0 else q * d * d
    return hf, sq, var


@njit(inline="always", error_model="numpy", cache=True)
def row_entropy_clipped(qv, ev, lv, K):
    """``row_entropy`` of a row clipped into ev (every ev[k] > 0)."""
    h = 0.0
    sq = 0.0
    kmn = KEY_HIGH
    kmx = KEY_LOW
    for k in range(K):
        q = qv[k]
        sq += q * q
        h += ev[k] * lv[k]
        key = order_key(lv[k])
        kmn = min(kmn, key)
        kmx = max(kmx, key)
    hf = flat_h(h, from_key(kmn), from_key(kmx))
    var = 0.0
    for k in range(K):
        d = lv[k] - hf
        var += ev[k] * d * d
    return hf, sq, var


@njit(inline="always", error_model="numpy", cache=True)
def class_terms(h, sq, ly, qy):
    """(NLL, ECD term, Brier term) of a row of K classes with label y: -log q_y,
    H - log q_y (eq. 12), sum_k q_k**2 - 2 q_y + 1."""
    return -ly, h - ly, sq - 2.0 * qy + 1.0


@njit(inline="always", error_model="numpy", cache=True)
def row_terms(qv, ev, lv, K, yk, with_logs, lo, hi, zero_logs, log):
    """(NLL, ECD term, Brier term, variance, sum_k q_k**2) of a valid row of K
    probabilities qv with logs lv and label yk (the last for the Brier
    decomposition's within-bin terms). eps = lo > 0 clips the row into ev first
    (``row_clip``). Without logs (binned metrics only) H and the variance are
    0, and lv is zeroed when zero_logs (else the logits' log-softmax stays)."""
    if with_logs:
        if lo > 0.0:
            row_clip(qv, ev, lv, K, lo, hi, log)
        h, sq, var = row_entropy(qv, ev, lv, K, lo > 0.0)
    else:
        h, sq, var = 0.0, 0.0, 0.0
        for k in range(K):
            q = qv[k]
            sq += q * q
            if zero_logs:
                lv[k] = 0.0
    nll, ecd, brier = class_terms(h, sq, lv[yk], qv[yk])
    return nll, ecd, brier, var, sq


@njit(inline="always", error_model="numpy", cache=True)
def label_ok(y, kf):
    """y is an integer class in [0, K) (float64 y, kf = K)."""
    return (y >= 0.0) & (y < kf) & (y == floor64(y))

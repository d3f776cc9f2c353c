"""Counter-based random weights and labels for bootstrap and null resampling.

Only @njit functions over arrays and scalars. Every random number is a pure
function of (seed, global row index, replicate), computed by hashing, never
drawn from a sequential generator: a row gets the same weights whatever the
chunk it arrives in, so results are reproducible for a seed whatever the
chunking, thread count or merge order.

Hash: the splitmix64 finaliser ``mix64``. Per row a key
``mix64(mix64(row * G) ^ seed_key)``; per replicate r the 64-bit value
``mix64(row_key + (r + 1) * G)`` with G the 64-bit golden-ratio constant.

Poisson(1) weights: inversion of the top 32 bits of the 64-bit value
against the cumulative probabilities P(X <= k), k = 0..11, scaled by 2**64
and truncated to their top 32 bits (``POISSON1_CDF``, computed with 60-digit
decimal arithmetic). Each probability is exact to 2**-32; weights are capped
at 12 (P(X >= 13) = 2.6e-11). The inversion is twelve branch-free integer
comparisons, which LLVM vectorises.

Bootstrap state per replicate r and bin b (``bcounts`` int64, ``bsums`` float64):

    bcounts[r, b, 0]  sum of weights                 (weighted count)
    bcounts[r, b, 1]  sum of weights * y             (weighted positives)
    bcounts[r, b, 2]  sum of weights * ((p > 0.5) == y)
    bsums[r, b]       sum of weights * p

Weights are integers, so the counts add exactly across chunks and merges.
"""

import numpy as np

from ._config import BLOCK, COPIES
from ._lazy import njit
from ._threads import run_threads, thread_range
from .mathfn import log1m, log64
from .rows import bin_edges

_G = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SALT = np.uint64(0xD1B54A32D192ED03)

POISSON1_CDF = np.array([
    0x5E2D58D8B3BCDF1A, 0xBC5AB1B16779BE35, 0xEB715E1DC1582DC2, 0xFB23979734A252F1,
    0xFF1025F59174DC3D, 0xFFD90F3BA4055E19, 0xFFFA8B71FC72C913, 0xFFFF540C0914B3C9,
    0xFFFFED1F4AA8F120, 0xFFFFFE216E641462, 0xFFFFFFD4D85D3183, 0xFFFFFFFC6DA262B4,
    0xFFFFFFFFBA12D178, 0xFFFFFFFFFB07C64C, 0xFFFFFFFFFFAB8EA5, 0xFFFFFFFFFFFABE22,
    0xFFFFFFFFFFFFB11A, 0xFFFFFFFFFFFFFBA1, 0xFFFFFFFFFFFFFFC5, 0xFFFFFFFFFFFFFFFD,
], dtype=np.uint64)
# top 32 bits of the first twelve thresholds, as int64 compile-time constants
(_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7, _T8, _T9, _T10, _T11) = [
    np.int64(int(t) >> 32) for t in POISSON1_CDF[:12]]

_INV53 = 1.0 / 9007199254740992.0  # 2**-53

# packed integer counters of the scatter scratch (see boot_fill)
_SHIFT_POS = 21
_SHIFT_OK = 42
_FIELD = (1 << 21) - 1


@njit(inline="always", cache=True, error_model="numpy")
def mix64(z):
    """splitmix64 finaliser: a bijective, well-mixing map of uint64."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(inline="always", cache=True, error_model="numpy")
def seed_key(seed):
    """64-bit key of an integer seed."""
    return mix64(np.uint64(seed) ^ _SALT)


@njit(inline="always", cache=True, error_model="numpy")
def row_key(skey, row):
    """Key of one global row index under a seed key."""
    return mix64(mix64(np.uint64(row) * _G) ^ skey)


@njit(inline="always", cache=True, error_model="numpy")
def draw(rkey, r):
    """The 64-bit random value of replicate r for a row key."""
    return mix64(rkey + np.uint64(r + 1) * _G)


@njit(inline="always", cache=True, error_model="numpy")
def poisson1(h):
    """Poisson(1) variate (capped at 12) from a uniform 64-bit value, by table inversion."""
    u = np.int64(h >> np.uint64(32))
    return (np.int64(u >= _T0) + np.int64(u >= _T1) + np.int64(u >= _T2) + np.int64(u >= _T3)
            + np.int64(u >= _T4) + np.int64(u >= _T5) + np.int64(u >= _T6)
            + np.int64(u >= _T7) + np.int64(u >= _T8) + np.int64(u >= _T9)
            + np.int64(u >= _T10) + np.int64(u >= _T11))


@njit(inline="always", cache=True, error_model="numpy")
def uniform01(h):
    """Uniform float64 in [0, 1) from the top 53 bits of h."""
    return np.float64(h >> np.uint64(11)) * _INV53


@njit(inline="always", error_model="numpy", cache=True)
def _stage(p, y, bstart, m, row0, skey, edges, nb, nbf, uniform, right, pv, yv, bi, keys):
    """Load one block: values, bins (-1 for NaN rows, which carry no weight), row keys."""
    for j in range(m):
        pj = np.float64(p[bstart + j])
        yj = np.float64(y[bstart + j])
        good = (pj == pj) & (yj == yj)
        ps = pj if good else 0.5
        bi[j] = bin_edges(ps, edges, nb, nbf, uniform, right) if good else -1
        pv[j] = ps
        yv[j] = yj if good else 0.0
        keys[j] = row_key(skey, row0 + bstart + j)


@njit(nogil=True, error_model="numpy", cache=True)
def boot_fill_range(p, y, row0, edges, uniform, right, seed, r0, r1, bcounts, bsums):
    """Add rows of (p, y) with Poisson(1) weights into replicates r0..r1-1 (serial).

    ``row0`` is the global index of p[0]; each replicate adds rows in row
    order. NaN rows (omitted by the caller) get no weight. Updates in place.

    Per block of rows: the bins and row keys once, then for each replicate
    the weights (a vectorised loop) and a scatter into COPIES interleaved
    per-bin scratch rows whose three integer counts are packed into one
    int64 (21 bits each: a block adds at most 12 * BLOCK to a field).
    """
    n = p.shape[0]
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    skey = seed_key(seed)
    pv = np.empty(BLOCK, np.float64)
    yv = np.empty(BLOCK, np.float64)
    bi = np.empty(BLOCK, np.int64)
    keys = np.empty(BLOCK, np.uint64)
    packed = np.empty(BLOCK, np.int64)
    live = np.empty(BLOCK, np.int64)
    wv = np.empty(BLOCK, np.int64)
    loc_i = np.zeros((COPIES, nb), np.int64)
    loc_f = np.zeros((COPIES, nb), np.float64)
    for bstart in range(0, n, BLOCK):
        m = min(BLOCK, n - bstart)
        _stage(p, y, bstart, m, row0, skey, edges, nb, nbf, uniform, right, pv, yv, bi, keys)
        for j in range(m):
            keep = bi[j] >= 0
            pos = np.int64(yv[j] == 1.0)
            ok = np.int64((pv[j] > 0.5) == (yv[j] == 1.0))
            packed[j] = 1 + (pos << _SHIFT_POS) + (ok << _SHIFT_OK)
            live[j] = np.int64(keep)
            bi[j] = bi[j] if keep else 0  # NaN rows: weight 0 in bin 0
        for r in range(r0, r1):
            for j in range(m):
                wv[j] = poisson1(draw(keys[j], r)) * live[j]
            for j in range(m):
                c = j & (COPIES - 1)
                b = bi[j]
                w = wv[j]
                loc_i[c, b] += w * packed[j]
                loc_f[c, b] += w * pv[j]
            for c in range(COPIES):
                for b in range(nb):
                    q = loc_i[c, b]
                    bcounts[r, b, 0] += q & _FIELD
                    bcounts[r, b, 1] += (q >> _SHIFT_POS) & _FIELD
                    bcounts[r, b, 2] += (q >> _SHIFT_OK) & _FIELD
                    bsums[r, b] += loc_f[c, b]
                    loc_i[c, b] = 0
                    loc_f[c, b] = 0.0


def boot_fill_parallel(p, y, row0, edges, uniform, right, seed, n_threads, bcounts, bsums):
    """boot_fill_range over all replicates, split into n_threads contiguous ranges.

    A thread writes only its own replicates, and each replicate adds rows in
    row order, so the result does not depend on n_threads. The threads are a
    Python pool running the serial kernel (``nogil``): nothing is compiled
    beyond it (a ``parallel=True`` prange version compiled it again).
    """
    n_rep = bcounts.shape[0]

    def run(t):
        r0, r1 = thread_range(t, n_rep, n_threads)
        if r1 > r0:
            boot_fill_range(p, y, row0, edges, uniform, right, seed, r0, r1, bcounts, bsums)

    run_threads(n_threads, run)


def null_fill(p, y, row0, edges, uniform, right, eps, seed, n_threads, pos, ecd):
    """Labels drawn from the predictions themselves (perfect calibration), R times.

    ``y`` is used only to skip rows whose label is NaN (omitted by the caller).

    For replicate r and row i, y* = 1 if u < p_i with u uniform from
    (seed, row0 + i, r). Adds the positives per bin into ``pos[r, b]`` and the
    ECD terms (p - y*) logit(p) (p clipped to [eps, 1 - eps]; the term is 0
    when p == y*) into ``ecd[r]``. NaN rows are skipped. Updates in place.

    The replicates are split into n_threads contiguous ranges, each run by
    ``null_fill_range`` (``nogil``) in a thread of a Python pool; a thread
    writes only its own replicates.
    """
    n_rep = pos.shape[0]

    def run(t):
        r0, r1 = thread_range(t, n_rep, n_threads)
        if r1 > r0:
            null_fill_range(p, y, row0, edges, uniform, right, eps, seed, r0, r1, pos, ecd)

    run_threads(n_threads, run)


@njit(nogil=True, error_model="numpy", cache=True)
def null_fill_range(p, y, row0, edges, uniform, right, eps, seed, r0, r1, pos, ecd):
    """``null_fill`` for replicates r0..r1-1 (serial)."""
    n = p.shape[0]
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    skey = seed_key(seed)
    lo = eps
    hi = 1.0 - eps
    pv = np.empty(BLOCK, np.float64)
    yv = np.empty(BLOCK, np.float64)
    bi = np.empty(BLOCK, np.int64)
    keys = np.empty(BLOCK, np.uint64)
    lg = np.empty(BLOCK, np.float64)
    pe = np.empty(BLOCK, np.float64)
    for bstart in range(0, n, BLOCK):
        m = min(BLOCK, n - bstart)
        _stage(p, y, bstart, m, row0, skey, edges, nb, nbf, uniform, right, pv, yv, bi, keys)
        for j in range(m):
            q = min(max(pv[j], lo), hi)
            pe[j] = q
            lg[j] = log64(q) - log1m(q)
        for r in range(r0, r1):
            s = 0.0
            for j in range(m):
                b = bi[j]
                if b < 0:
                    continue
                ys = uniform01(draw(keys[j], r)) < pv[j]
                pos[r, b] += np.int64(ys)
                d = pe[j] - (1.0 if ys else 0.0)
                s += 0.0 if d == 0.0 else d * lg[j]
            ecd[r] += s

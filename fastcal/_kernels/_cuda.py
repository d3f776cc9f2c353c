"""The one place that imports Numba's CUDA target, and helpers shared by the GPU kernels.

Importing this module imports ``numba.cuda`` (the ``numba-cuda`` package, or
Numba's built-in simulator when ``NUMBA_ENABLE_CUDASIM=1``). Nothing in
``import fastcal`` reaches it: ``fastcal.cuda`` imports it on first use.

numba-cuda 0.30.x registers an overload for ``np.row_stack`` when it is
imported; numpy 2.5 removed that name, so the import fails there. The name is
restored as ``np.vstack`` (what it always was) before the import, and only
if it is missing.
"""

import math

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import config, cuda  # noqa: E402

SIMULATOR = bool(config.ENABLE_CUDASIM)

# Counters of one thread are packed into one float64 slot of its private
# shared-memory bins: count + a * 2**17 + b * 2**34 stays an exact integer
# below 2**53 while each field is below 2**17, which the host guarantees by
# launching at least n / 2**16 threads.
PACK = 131072.0  # 2**17
PACK2 = PACK * PACK
MAX_ROWS_PER_THREAD = 1 << 16

# dtypes for cuda.local.array / cuda.shared.array: numba-cuda takes numpy scalar
# types; the simulator's dynamic shared memory needs a numpy dtype instance.
F64 = np.dtype(np.float64) if SIMULATOR else np.float64
I64 = np.dtype(np.int64) if SIMULATOR else np.int64

if SIMULATOR:
    # The simulator runs kernels as Python: libdevice's bit casts are stubs there.
    def as_bits(x):
        return np.float64(x).view(np.int64)

    def from_bits(i):
        return np.int64(i).view(np.float64)
else:
    from numba.cuda import libdevice

    @cuda.jit(device=True, inline=True)
    def as_bits(x):
        return libdevice.double_as_longlong(x)

    @cuda.jit(device=True, inline=True)
    def from_bits(i):
        return libdevice.longlong_as_double(i)


@cuda.jit(device=True, inline=True)
def unpack(v):
    """The three counters packed into the float64 v (see PACK)."""
    c = np.int64(v)
    a = c >> 17
    return c & 131071, a & 131071, a >> 17


@cuda.jit(device=True, inline=True)
def note(chk, kind, nk, i):
    """Count one invalid row of this kind; the first (smallest) index is kept.

    ``chk`` is a thread's local array of nk counts then nk first indices;
    rows are visited in increasing order, so the first one seen is the smallest.
    """
    chk[kind] += 1
    if chk[nk + kind] < 0:
        chk[nk + kind] = i


@cuda.jit(device=True, inline=True)
def search_bin(edges, nb, x, right):
    """Bin of x in [0, 1] for sorted edges: numpy's searchsorted rules as on the CPU.

    right: (a, b] bins, searchsorted(edges, x, 'left') - 1, at least 0;
    left: [a, b) bins, searchsorted(edges, x, 'right') - 1, at most nb - 1.
    """
    lo = 0
    hi = nb + 1
    if right:
        while lo < hi:
            mid = (lo + hi) >> 1
            if edges[mid] < x:
                lo = mid + 1
            else:
                hi = mid
    else:
        while lo < hi:
            mid = (lo + hi) >> 1
            if edges[mid] <= x:
                lo = mid + 1
            else:
                hi = mid
    return min(max(lo - 1, 0), nb - 1)


@cuda.jit(device=True, inline=True)
def uniform_bin(x, nbf, top, invn, right, is32):
    """Uniform-edge bin of x in [0, 1], exact at every edge (the CPU's ``_bin_near_edge``).

    Only the edge E_k nearest to x * n can be on the wrong side of a naive
    floor; it is recomputed exactly as ``binning.kernel_edges`` stores it
    (k / n correctly rounded, then rounded to float32 for float32 data) and
    compared with x.
    """
    k = np.int64(x * nbf + 0.5)
    kf = np.float64(k)
    if is32:
        e = np.float64(np.float32(kf * invn))
    else:
        e = kf / nbf
    b = k - 1 + np.int64(x > e) + np.int64((x == e) and not right)
    return min(max(b, np.int64(0)), top)


@cuda.jit(device=True, inline=True)
def mc_uniform_bin(x, nb, nbf, right, f32):
    """The multi-class kernel's uniform bin (``_kernels.multiclass._bin_u``), same edges."""
    b = min(max(np.int64(x * nbf), np.int64(0)), nb - 1)
    bf = np.float64(b)
    lo = bf / nbf
    hi = (bf + 1.0) / nbf
    if f32:
        lo = np.float64(np.float32(lo))
        hi = np.float64(np.float32(hi))
    if right:
        b = b - np.int64((b > 0) and (x <= lo))
        b = b + np.int64((b < nb - 1) and (x > hi))
    else:
        b = b - np.int64((b > 0) and (x < lo))
        b = b + np.int64((b < nb - 1) and (x >= hi))
    return b


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


@cuda.jit(device=True, inline=True)
def exp64(x):
    """exp(x) for x <= 0: the CPU kernel's ``exp64``, step for step (same roundings)."""
    xc = max(x, -708.0)
    n = np.float64(math.floor(xc * _LOG2E + 0.5))
    r = (xc - n * _LN2_HI) - n * _LN2_LO
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
    out = e * from_bits((np.int64(n) + 1023) << 52)
    return 0.0 if x < -708.0 else out


@cuda.jit(device=True, inline=True)
def log0(x):
    """log(x) for x >= 0 with log(0) = -inf (the simulator's math.log raises at 0)."""
    return math.log(x) if x > 0.0 else -math.inf


@cuda.jit(device=True, inline=True)
def log1m(q):
    """log(1 - q) for q <= 1, accurate for small q; log(0) = -inf."""
    return math.log1p(-q) if q < 1.0 else -math.inf



def launch_shape(n_items, per_thread_bytes, fixed_bytes=0, max_threads=128, min_items=256):
    """(blocks, threads, dynamic shared bytes) for a persistent grid over n_items.

    Threads per block: the most (a multiple of 32 where possible, at most
    max_threads) whose private shared-memory bins fit in 48 KB, the limit
    without an opt-in. Blocks: enough to fill every multiprocessor, fewer for
    small inputs, and never so few that one thread sees 2**16 rows.
    """
    limit = 48 * 1024 - fixed_bytes
    threads = max(1, min(max_threads, limit // max(per_thread_bytes, 1)))
    if threads >= 32:
        threads -= threads % 32
    if SIMULATOR:
        threads = min(threads, 32)
        n_sm, per_sm = 1, 1
    else:
        dev = cuda.get_current_device()
        n_sm = dev.MULTIPROCESSOR_COUNT
        per_sm = max(1, min(32, (2048 // threads), (227 * 1024) // (threads * per_thread_bytes
                                                                  + fixed_bytes + 1024)))
    blocks = max(1, min(n_sm * per_sm, -(-n_items // (threads * min_items))))
    need = -(-n_items // (threads * MAX_ROWS_PER_THREAD))
    blocks = max(blocks, need)
    shared = threads * per_thread_bytes + fixed_bytes
    return blocks, threads, shared

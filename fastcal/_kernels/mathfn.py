"""Elementwise maths that LLVM can vectorise.

Numba lowers ``np.log`` to a libm call that is not vectorised (no SVML here),
which costs several nanoseconds per element. The logarithms below are
branch-free integer and float arithmetic, so loops over them vectorise.

Method (fdlibm's arrangement): write x = 2**e * m with m in [sqrt(1/2),
sqrt(2)), f = m - 1, s = f / (2 + f) and

    log(1 + f) = f - f**2/2 + s * (f**2/2 + R(s**2)),
    R(z) = sum_{k>=1} 2 z**k / (2k + 1),

the Taylor series of 2 atanh(s) rearranged so that the rounding error of the
division only touches a small correction term. With |s| < 0.172, nine terms
of R leave a truncation error below 2**-55 relative; the result is within
1 ulp of a correctly rounded log (tests/kernels/test_kernel_binary.py checks 2 ulp
against numpy on millions of points).

``log_pair`` returns log(q) and log(1 - q) with one division for both: the
two quotients share the reciprocal 1 / ((2 + f1)(2 + f2)). The division is
the most expensive instruction of the loop, so this is what makes the fill
kernel's two logarithms per sample affordable.

All functions here rely on exact float identities (Sterbenz subtractions, the
order of the final sum) and are compiled with ``FASTMATH_EXACT`` (no
reassociation). ``log64`` and ``log1m`` are small enough for LLVM to inline
them into any loop with their own flags. ``log_pair`` and ``log_inline`` are
inlined by Numba (``inline="always"``), which gives their body the caller's
flags: call them only from loops compiled with ``FASTMATH_EXACT`` or from CUDA
kernels (compiled without fastmath).

The CPU kernels and the CUDA kernels call the same functions here (see
``rows.py``): a CUDA kernel takes a Numba function only when it is inlined
(``inline="always"``; a separate device function needs a GPU to compile), and
not numpy's scalar bit cast (``np.float64(x).view(np.int64)``), so the bit
casts and ``floor64`` are written as LLVM intrinsics, which both targets lower
the same way (a ``bitcast``, ``llvm.floor``).
"""

import numpy as np

from ._config import FASTMATH, FASTMATH_EXACT
from ._lazy import intrinsic, njit

_LN2_HI = 6.93147180369123816490e-01  # upper bits of ln 2 (exact times small ints)
_LN2_LO = 1.90821492927058770002e-10  # ln 2 - _LN2_HI
_TINY = 2.2250738585072014e-308  # smallest normal float64
_TWO54 = 18014398509481984.0
_SQRTH_BITS = 0x3FE6A09E667F3BCD  # bits of sqrt(1/2)

_LOG2E = 1.4426950408889634

# 2 / (2k + 1), k = 1..9
_A1 = 2.0 / 3.0
_A2 = 2.0 / 5.0
_A3 = 2.0 / 7.0
_A4 = 2.0 / 9.0
_A5 = 2.0 / 11.0
_A6 = 2.0 / 13.0
_A7 = 2.0 / 15.0
_A8 = 2.0 / 17.0
_A9 = 2.0 / 19.0


@intrinsic
def _bitcast(typingctx, x):
    """The 64 bits of x as the other of float64 and int64 (LLVM ``bitcast``)."""
    from numba import types

    if x == types.float64:
        out = types.int64
    elif x == types.int64:
        out = types.float64
    else:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(sig.return_type))

    return out(x), codegen


@intrinsic
def _floor(typingctx, x):
    """floor(x) of a float64 as a float64 (``llvm.floor``; numba-cuda has no np.floor)."""
    from llvmlite import ir
    from numba import types

    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        fn = builder.module.declare_intrinsic("llvm.floor", [ir.DoubleType()])
        return builder.call(fn, args)

    return types.float64(types.float64), codegen


@njit(inline="always", cache=True)
def as_bits(x):
    """The bits of the float64 x as an int64, on the CPU and in CUDA kernels."""
    return _bitcast(np.float64(x))


@njit(inline="always", cache=True)
def from_bits(i):
    """The float64 whose bits are the int64 i, on the CPU and in CUDA kernels."""
    return _bitcast(np.int64(i))


_KEY_FLIP = 0x7FFFFFFFFFFFFFFF
KEY_LOW = -0x8000000000000000  # below every float's key (what a min starts from)
KEY_HIGH = 0x7FFFFFFFFFFFFFFF  # above every float's key (what a max starts from)


@njit(inline="always", cache=True)
def order_key(x):
    """An int64 that orders as the float64 x (-0.0 just below 0.0; NaN with
    its sign bit clear above +inf, with it set below -inf); its own inverse
    (``from_key``). Integer min and max reductions vectorise where float ones
    do not: without ``nnan``, LLVM keeps a float min or max loop scalar."""
    b = _bitcast(np.float64(x))  # as_bits, one inlining level less (see row_entropy)
    return b ^ ((b >> 63) & _KEY_FLIP)


@njit(inline="always", cache=True)
def from_key(k):
    """The float64 whose ``order_key`` is k."""
    return _bitcast(np.int64(k ^ ((k >> 63) & _KEY_FLIP)))


@njit(inline="always", cache=True)
def floor64(x):
    """floor(x) as a float64, on the CPU and in CUDA kernels."""
    return _floor(np.float64(x))


@njit(inline="always", fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def _reduce(x):
    """(e, m - 1) with x = 2**e * m, m in [sqrt(1/2), sqrt(2)); x positive and normal."""
    bits = as_bits(x)
    # m >= sqrt(2) exactly when the mantissa bits reach those of sqrt(2).
    e = (bits - _SQRTH_BITS) >> 52
    m = from_bits(bits - (e << 52))
    return e, m - 1.0


@njit(inline="always", fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def _log_from(e, f, s):
    """log(2**e (1 + f)) given s = f / (2 + f)."""
    z = s * s
    r = z * (_A1 + z * (_A2 + z * (_A3 + z * (_A4 + z * (_A5 + z * (
        _A6 + z * (_A7 + z * (_A8 + z * _A9))))))))
    hfsq = 0.5 * f * f
    fe = np.float64(e)
    return fe * _LN2_HI - ((hfsq - (s * (hfsq + r) + fe * _LN2_LO)) - f)


@njit(inline="always", fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def _one_minus(p):
    """(1 - p rounded, correction c) with log(1 - p) = log(1 - p rounded) + c.

    d = (1 - q) - p is the exact rounding error of q = 1 - p when q > 1/2
    (Sterbenz) and q is exact otherwise; log(q - d) = log(q) - d/q + O(d**2),
    and 1/q = 1 + t + t**2 + ... with t = 1 - q <= 1/2 is cut after three
    terms: d is at most half an ulp of q, so what is left out is far below
    an ulp of the result.
    """
    q = 1.0 - p
    t = 1.0 - q
    d = t - p if q > 0.5 else 0.0
    return q, d * (1.0 + t * (1.0 + t))


@njit(inline="always", fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def log_inline(x):
    """``log64`` inlined into the caller (see the module docstring for where)."""
    small = x < _TINY
    xs = x * _TWO54 if small else x
    xs = xs if (xs > 0.0) & (xs < np.inf) else 1.0  # special values are set below
    e, f = _reduce(xs)
    e = e - 54 if small else e
    out = _log_from(e, f, f / (2.0 + f))
    out = -np.inf if x == 0.0 else out
    out = x if not (x < np.inf) else out  # inf and NaN pass through
    out = np.nan if x < 0.0 else out
    return out


@njit(nogil=True, fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def log64(x):
    """Natural log of x (float64): log(0) = -inf, log(inf) = inf, NaN and x < 0 give NaN."""
    return log_inline(x)


@njit(nogil=True, fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def log1m(p):
    """log(1 - p) for p <= 1, accurate for small p (log1p(-p) to about 1 ulp)."""
    q, c = _one_minus(p)
    return log64(q) + c


@njit(inline="always", fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def log_pair(q):
    """(log(q), log(1 - q)) for 0 <= q <= 1 (not NaN), with one division for both.

    Each log needs s = f / (2 + f); the two quotients are formed from one
    reciprocal 1 / ((2 + f1)(2 + f2)). Their few-ulp error only enters the
    term s (f**2/2 + R), which is below f**2/4 times the result, so both
    logs stay within about 1 ulp. log(0) = -inf.
    """
    small = q < _TINY
    x1 = q * _TWO54 if small else q
    x1 = 0.5 if q == 0.0 else x1
    x2, c = _one_minus(q)
    x2s = 0.5 if x2 == 0.0 else x2
    e1, f1 = _reduce(x1)
    e2, f2 = _reduce(x2s)
    e1 = e1 - 54 if small else e1
    g1 = 2.0 + f1
    g2 = 2.0 + f2
    inv = 1.0 / (g1 * g2)
    l1 = _log_from(e1, f1, f1 * g2 * inv)
    l2 = _log_from(e2, f2, f2 * g1 * inv) + c
    l1 = -np.inf if q == 0.0 else l1
    l2 = -np.inf if x2 == 0.0 else l2
    return l1, l2


# Rows a kernel adds into a block-local copy of its per-bin sums before
# ``flush_compensated`` moves them into the state (more with many bins: see flush_every).
FLUSH_ROWS = 256


@njit(inline="always", cache=True)
def flush_every(n_bins):
    """Rows between two flushes: a flush touches every bin, so many bins flush less often."""
    return max(FLUSH_ROWS, 4 * n_bins)


@njit(nogil=True, fastmath=FASTMATH_EXACT, cache=True, error_model="numpy")
def flush_compensated(loc, acc, comp):
    """acc += loc with each rounding error kept in comp (Neumaier's variant of
    Kahan summation), then loc = 0; ``close_compensated`` ends the fill.

    Kernels add a few hundred rows into loc, then flush: a bin's sum of a
    million float64 probabilities then carries about one rounding instead of
    a random walk of them, so it hardly depends on how the rows were split.
    ECE, a small difference of two such sums, then agrees across chunkings
    and devices to 1e-12 relative. Not inlined, so that it keeps its own
    flags (``reassoc`` in a caller would cancel the correction); one call per
    few hundred rows costs nothing measurable.
    """
    for i in range(loc.shape[0]):
        for j in range(loc.shape[1]):
            x = loc[i, j]
            s = acc[i, j]
            t = s + x
            if abs(t) < np.inf:  # an infinite or NaN sum stays so (inf - inf: a NaN comp)
                comp[i, j] += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
            acc[i, j] = t
            loc[i, j] = 0.0


@njit(nogil=True, cache=True, error_model="numpy")
def close_compensated(loc, acc, comp):
    """The last flush of a fill, then the kept rounding errors into acc."""
    flush_compensated(loc, acc, comp)
    acc += comp


@njit(nogil=True, cache=True, error_model="numpy")
def isnan(x):
    """NaN test compiled without fastmath: under fastmath flags LLVM may fold
    ``x != x`` to False, so every NaN test in a fastmath CPU kernel calls this."""
    return x != x


@njit(inline="always", fastmath=FASTMATH, cache=True, error_model="numpy")
def exp64(x):
    """exp(x) for x <= 0 (float64), branch-free so loops over it vectorise.

    x = n ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor series to r**13
    (truncation below 2e-16 relative), times 2**n built from the exponent
    bits. Results below the smallest normal float64 (x < -708.39) are 0.
    """
    xc = max(x, -708.0)
    n = floor64(xc * _LOG2E + 0.5)
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
    out = e * from_bits((np.int64(n) + 1023) << 52)
    return 0.0 if x < -708.0 else out


@njit(inline="always", cache=True, error_model="numpy")
def search_sorted(a, x, right):
    """``np.searchsorted(a, x, side="right" if right else "left")`` for x and a
    without NaN: the first i with a[i] > x (right) or a[i] >= x (left).

    A plain binary search: Numba's ``np.searchsorted`` compiles its NaN-aware
    comparisons and both sides, about a second on the first call.
    """
    lo = 0
    hi = a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        below = a[mid] <= x if right else a[mid] < x
        if below:
            lo = mid + 1
        else:
            hi = mid
    return lo

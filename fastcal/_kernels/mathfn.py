"""Elementwise maths that LLVM can vectorise.

Numba lowers ``np.log`` to a libm call that is not vectorised (no SVML here),
which costs several nanoseconds per element. ``log64`` below is a branch-free
natural logarithm made only of integer and float arithmetic, so loops over it
vectorise. It follows the classic reduction x = m * 2**e with m in
[sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f) and

    log(1 + f) = f - f**2/2 + s * (f**2/2 + R(s**2)),
    R(z) = sum_{k>=1} 2 z**k / (2k + 1),

the Taylor series of 2 atanh(s) rearranged so that the rounding error of the
division only touches a small correction term. With |s| < 0.172 eleven terms
leave a truncation error below 1e-18; the result is within 1-2 ulp of libm.
"""

import numpy as np
from numba import njit

from ._config import FASTMATH

_LN2_HI = 6.93147180369123816490e-01  # upper bits of ln 2 (exact times small ints)
_LN2_LO = 1.90821492927058770002e-10  # ln 2 - _LN2_HI
_SQRT2 = 1.4142135623730951
_TINY = 2.2250738585072014e-308  # smallest normal float64
_TWO54 = 18014398509481984.0

# 2 / (2k + 1) for k = 1..11
_C1 = 2.0 / 3.0
_C2 = 2.0 / 5.0
_C3 = 2.0 / 7.0
_C4 = 2.0 / 9.0
_C5 = 2.0 / 11.0
_C6 = 2.0 / 13.0
_C7 = 2.0 / 15.0
_C8 = 2.0 / 17.0
_C9 = 2.0 / 19.0
_C10 = 2.0 / 21.0
_C11 = 2.0 / 23.0


@njit(inline="always", fastmath=FASTMATH, cache=True, error_model="numpy")
def log64(x):
    """Natural log of x >= 0 (float64); log(0) = -inf, log(inf) = inf, NaN stays NaN."""
    small = x < _TINY
    xs = x * _TWO54 if small else x
    bits = np.float64(xs).view(np.uint64)
    e = np.int64((bits >> np.uint64(52)) & np.uint64(0x7FF)) - 1023
    mbits = (bits & np.uint64(0x000FFFFFFFFFFFFF)) | np.uint64(0x3FF0000000000000)
    m = np.uint64(mbits).view(np.float64)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    e = e - 54 if small else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    r = z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * (_C6 + z * (
        _C7 + z * (_C8 + z * (_C9 + z * (_C10 + z * _C11))))))))))
    hfsq = 0.5 * f * f
    fe = np.float64(e)
    out = fe * _LN2_HI - ((hfsq - (s * (hfsq + r) + fe * _LN2_LO)) - f)
    out = -np.inf if x == 0.0 else out
    out = x if not (x < np.inf) else out  # inf and NaN pass through
    return out


@njit(inline="always", fastmath=FASTMATH, cache=True, error_model="numpy")
def log1m(p):
    """log(1 - p) for p in [0, 1], accurate for small p (log1p(-p) to ~1-2 ulp)."""
    q = 1.0 - p
    # q - 1 is exact for q in [0.5, 1] (Sterbenz); for p > 0.5, q itself is exact.
    c = ((1.0 - q) - p) / q if q > 0.0 else 0.0
    return log64(q) + c

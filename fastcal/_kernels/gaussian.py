"""Compiled kernels for Gaussian consistency: NEES via Cholesky forward substitution.

Only ``@njit`` functions over arrays and scalars live here: no validation, no
objects, no imports from the public API (see ``fastcal.gaussian``).

Status codes written by :func:`nees_batch`, one per row:

``STATUS_OK``            NEES computed.
``STATUS_NAN``           the error vector or the covariance holds a NaN or inf.
``STATUS_ASYMMETRIC``    the covariance is not symmetric within the tolerance.
``STATUS_NOT_PD``        the Cholesky factorisation met a non-positive pivot.
"""

import numpy as np

from ._lazy import njit
from ._threads import run_threads, thread_range

STATUS_OK = 0
STATUS_NAN = 1
STATUS_ASYMMETRIC = 2
STATUS_NOT_PD = 3


@njit(nogil=True, cache=True)
def cholesky_lower(P, L):
    """Write the lower Cholesky factor of ``P`` (d, d) into ``L``; return False if not PD.

    Reads only the lower triangle of ``P``. The upper triangle of ``L`` is zeroed.
    """
    d = P.shape[0]
    for j in range(d):
        for i in range(j):
            L[i, j] = 0.0
        s = P[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        # `not s > 0` also catches NaN pivots.
        if not s > 0.0:
            return False
        ljj = np.sqrt(s)
        L[j, j] = ljj
        for i in range(j + 1, d):
            s = P[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / ljj
    return True


@njit(nogil=True, cache=True)
def forward_substitute(L, b, y):
    """Solve ``L y = b`` for lower-triangular ``L``; write into ``y``."""
    d = L.shape[0]
    for i in range(d):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * y[k]
        y[i] = s / L[i, i]


@njit(nogil=True, cache=True)
def nees_one(e, P, L, y, sym_rtol):
    """NEES ``e^T P^-1 e`` of one error vector, with its status code.

    With ``P = L L^T`` and ``L y = e``, ``e^T P^-1 e = y^T y``: one forward
    substitution, no inverse. ``L`` (d, d) and ``y`` (d,) are scratch space.
    Returns ``(nees, status)``; ``nees`` is NaN unless ``status == STATUS_OK``.
    """
    d = e.shape[0]
    for i in range(d):
        if not np.isfinite(e[i]):
            return np.nan, STATUS_NAN
        for j in range(d):
            if not np.isfinite(P[i, j]):
                return np.nan, STATUS_NAN
    for i in range(d):
        for j in range(i):
            scale = np.sqrt(abs(P[i, i] * P[j, j]))
            if abs(P[i, j] - P[j, i]) > sym_rtol * scale:
                return np.nan, STATUS_ASYMMETRIC
    if not cholesky_lower(P, L):
        return np.nan, STATUS_NOT_PD
    forward_substitute(L, e, y)
    total = 0.0
    for i in range(d):
        total += y[i] * y[i]
    return total, STATUS_OK


@njit(nogil=True, cache=True)
def nees_range(errors, covs, out, status, sym_rtol):
    """NEES of every row of ``errors`` (n, d), ``covs`` (n, d, d) -> ``out`` (n,), ``status`` (n,)."""
    n, d = errors.shape
    L = np.empty((d, d))
    y = np.empty(d)
    for i in range(n):
        value, code = nees_one(errors[i], covs[i], L, y, sym_rtol)
        out[i] = value
        status[i] = code


def nees_batch(errors, covs, out, status, sym_rtol, n_threads):
    """:func:`nees_range` over ``n_threads`` contiguous chunks of rows, one thread each.

    Every row is written by exactly one thread, so the result does not depend on
    the thread count. (Threads over a serial ``nogil`` kernel: a ``parallel=True``
    kernel compiled again, with its callees, under the parallel flags.)
    """
    n = errors.shape[0]
    n_threads = max(1, min(n_threads, n))

    def part(t):
        i, j = thread_range(t, n, n_threads)
        nees_range(errors[i:j], covs[i:j], out[i:j], status[i:j], sym_rtol)

    run_threads(n_threads, part)

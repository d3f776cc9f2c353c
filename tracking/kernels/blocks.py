"""Compiled building blocks of the batched filters: pure ``@njit`` functions over arrays.

Three groups:

* small linear algebra (Cholesky factor and solve, symmetrising, the Kalman
  gain) for any dimension ``d``; called from the batched kernels with ``d`` a
  compile-time constant, so LLVM unrolls the small loops;
* where a batch is (run, step, model function), for :mod:`tracking.kernels.guard`;
* numerical Jacobians (central differences) for models that give no analytic
  one, and mappers that apply a model function to many states.

The batched filters themselves are generated per model pair from
``tracking/kernels/batch_template.py`` (see :mod:`tracking.kernels.factory`),
which inlines these functions; the built-in models' physics is in
:mod:`tracking.models.physics`.

Every function here uses ``error_model="numpy"``: a division by zero gives inf
or NaN (which the filters report as singular geometry) instead of raising.
"""

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
import numpy as np

from fastcal.jit import njit

TWO_PI = 2.0 * np.pi

# Machine epsilon ** (1/3): the step of a central difference that balances
# truncation (O(h^2)) against rounding (O(eps / h)).
CBRT_EPS = np.finfo(np.float64).eps ** (1.0 / 3.0)

_INLINE = dict(cache=True, error_model="numpy", inline="always")


# ------------------------------------------------------------------ small linear algebra
@njit(**_INLINE)
def wrap_angle(a):
    """Wrap an angle to (-pi, pi]. Python's float ``%`` returns a value in [0, 2 pi).

    An angle already in (-pi, pi] (nearly every residual) is returned as it is: exact, and it
    skips the floating-point remainder, which costs more than the rest of a bearing update.
    """
    if -np.pi < a <= np.pi:
        return a
    return np.pi - ((np.pi - a) % TWO_PI)


@njit(**_INLINE)
def cholesky_lower(P, L, d):
    """Lower Cholesky factor of ``P`` (d, d) into ``L``; False if ``P`` is not positive definite."""
    for j in range(d):
        for i in range(j):
            L[i, j] = 0.0
        s = P[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:  # also catches NaN
            return False
        ljj = np.sqrt(s)
        L[j, j] = ljj
        for i in range(j + 1, d):
            s = P[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / ljj
    return True


@njit(**_INLINE)
def cholesky_solve(L, inv_diag, b, tmp, out, d):
    """Solve ``(L L^T) out = b`` (L is d x d) by forward then backward substitution.

    ``inv_diag[i] = 1 / L[i, i]``, computed once per factorisation (as LAPACK's
    triangular solvers do) so each substitution multiplies instead of divides.
    """
    for i in range(d):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * tmp[k]
        tmp[i] = s * inv_diag[i]
    for i in range(d - 1, -1, -1):
        s = tmp[i]
        for k in range(i + 1, d):
            s -= L[k, i] * out[k]
        out[i] = s * inv_diag[i]


@njit(**_INLINE)
def symmetrise(P, d):
    """Average ``P`` (d x d) with its transpose, in place."""
    for i in range(d):
        for j in range(i):
            v = 0.5 * (P[i, j] + P[j, i])
            P[i, j] = v
            P[j, i] = v


@njit(**_INLINE)
def gain(PXZ, L_S, K, tmp, inv_diag, sol, n, m):
    """Kalman gain ``K = PXZ S^-1`` (n x m) with ``S = L_S L_S^T``, row by row (S is symmetric)."""
    for a in range(m):
        inv_diag[a] = 1.0 / L_S[a, a]
    for i in range(n):
        cholesky_solve(L_S, inv_diag, PXZ[i], tmp, sol, m)
        for a in range(m):
            K[i, a] = sol[a]


@njit(**_INLINE)
def residual(a, b, out, angles):
    """``a - b`` with the components flagged in ``angles`` (a tuple of bools) wrapped."""
    for i in range(out.shape[0]):
        d = a[i] - b[i]
        if angles[i]:
            d = wrap_angle(d)
        out[i] = d


@njit(**_INLINE)
def sigma_mean(Wm, Z, zbar, angles):
    """Weighted mean of sigma points ``Z`` (n_sigma, m), about the centre point.

    Every component is averaged as differences from the centre sigma point,
    ``Z_0 + sum_{i>=1} Wm_i (Z_i - Z_0)``, which equals ``sum_i Wm_i Z_i`` because
    the weights sum to one but does not cancel catastrophically when the centre
    weight is large and negative (small alpha). For an angle the differences
    are wrapped: ``ref + sum_i Wm_i wrap(theta_i - ref)`` with ``ref = theta_0`` is
    the weighted mean of the angles unwrapped about ``ref``, correct for a
    negative centre weight too (the atan2 of weighted sines and cosines is not).
    """
    n_sig, m = Z.shape
    for a in range(m):
        ref = Z[0, a]
        s = 0.0
        for i in range(1, n_sig):
            if angles[a]:
                s += Wm[i] * wrap_angle(Z[i, a] - ref)
            else:
                s += Wm[i] * (Z[i, a] - ref)
        zbar[a] = ref + s
        if angles[a]:
            zbar[a] = wrap_angle(zbar[a])


# ------------------------------------------------------------------ where a batch is
# The batched kernel writes, into a small int64 array ``where``, the run and step it is
# on and which model function it is about to call (``SLOT_*``), so the caller can name
# the function that raised or never returned (tracking.kernels.guard). Atomic (relaxed) stores:
# the watching thread sees each one when it happens (a plain store could stay in a
# register for the whole loop); on x86 they are plain moves.
SLOT_F = 1
SLOT_JF = 2
SLOT_H = 3
SLOT_JH = 4


@intrinsic
def _store_seen(typingctx, arr, i, v):
    """``arr[i] = v`` for an int64 array, as an atomic store another thread sees."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64
            and isinstance(i, types.Integer) and isinstance(v, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        val = context.cast(builder, args[2], sig.args[2], types.int64)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [idx])
        builder.store_atomic(val, ptr, "monotonic", 8)
        return context.get_dummy_value()

    return types.void(arr, i, v), codegen


@njit(**_INLINE)
def mark_step(where, r, k):
    """The batch starts step ``k`` of run ``r`` (of its own range of runs)."""
    _store_seen(where, 0, r)
    _store_seen(where, 1, k)


@njit(**_INLINE)
def mark(where, slot):
    """The batch calls the model function ``slot`` (``SLOT_F``, ``SLOT_JF``, ``SLOT_H``, ``SLOT_JH``)."""
    _store_seen(where, 2, slot)


# ------------------------------------------------------------------ numerical Jacobians
@njit(**_INLINE)
def numjac_f(f, x, dt, p, out, xa, fa, fb):
    """Central-difference Jacobian of a motion function ``f(x, dt, p, out)`` at ``x`` into ``out``."""
    n = x.shape[0]
    for j in range(n):
        xa[j] = x[j]
    for j in range(n):
        step = CBRT_EPS * max(1.0, abs(x[j]))
        xa[j] = x[j] + step
        f(xa, dt, p, fa)
        xa[j] = x[j] - step
        f(xa, dt, p, fb)
        xa[j] = x[j]
        for i in range(n):
            out[i, j] = (fa[i] - fb[i]) / (2.0 * step)


@njit(**_INLINE)
def numjac_h(h, x, p, out, reads, angles, xa, za, zb):
    """Central-difference Jacobian of a sensor function ``h(x, p, out)`` at ``x``.

    Only the columns in ``reads`` are computed (the others are zero for a sensor
    that reads only those state components); angle components of the difference
    are wrapped, so a bearing near +-pi differentiates correctly.
    """
    n = x.shape[0]
    m = za.shape[0]
    for j in range(n):
        xa[j] = x[j]
    for j in reads:
        step = CBRT_EPS * max(1.0, abs(x[j]))
        xa[j] = x[j] + step
        h(xa, p, za)
        xa[j] = x[j] - step
        h(xa, p, zb)
        xa[j] = x[j]
        for a in range(m):
            d = za[a] - zb[a]
            if angles[a]:
                d = wrap_angle(d)
            out[a, j] = d / (2.0 * step)


@njit(error_model="numpy")
def no_jacobian_f(x, dt, p, out):  # pragma: no cover - placeholder, never called
    """Stands in for a missing motion Jacobian (the kernels use :func:`numjac_f`)."""
    out[0, 0] = np.nan


@njit(error_model="numpy")
def no_jacobian_h(x, p, out):  # pragma: no cover - placeholder, never called
    """Stands in for a missing sensor Jacobian (the kernels use :func:`numjac_h`)."""
    out[0, 0] = np.nan


# Mappers: apply one model function to many states. They take the model function
# as an argument, which Numba compiles per function and cannot cache on disk
# (the cache key would pickle the function's dispatcher, whose id changes in
# every process), so they are compiled once per process (well under a second).
@njit(error_model="numpy")
def map_f(f, X, dt, p, out):
    for i in range(X.shape[0]):
        f(X[i], dt, p, out[i])


@njit(error_model="numpy")
def map_h(h, X, p, out):
    for i in range(X.shape[0]):
        h(X[i], p, out[i])


@njit(error_model="numpy")
def jacobian_f(f, F, has_F, x, dt, p, out):
    if has_F:
        F(x, dt, p, out)
    else:
        n = x.shape[0]
        numjac_f(f, x, dt, p, out, np.empty(n), np.empty(n), np.empty(n))


@njit(error_model="numpy")
def jacobian_h(h, H, has_H, x, p, out, reads, angles):
    out[:, :] = 0.0
    if has_H:
        H(x, p, out)
        # a sensor that reads only ``reads`` has zero elsewhere, whatever H wrote there
        for j in range(x.shape[0]):
            inside = False
            for r in reads:
                if r == j:
                    inside = True
            if not inside:
                for a in range(out.shape[0]):
                    out[a, j] = 0.0
    else:
        n, m = x.shape[0], out.shape[0]
        numjac_h(h, x, p, out, reads, angles, np.empty(n), np.empty(m), np.empty(m))

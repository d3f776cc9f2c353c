# Batched EKF / UKF kernel, one per model pair. NOT imported directly: this is the
# source that tracking.kernels.factory copies below a header that binds the model pair:
#
#   f, F      motion function f(x, dt, p, out) and Jacobian F(x, dt, p, out)
#   h, H      sensor function h(x, p, out) and Jacobian H(x, p, out)
#   HAS_F, HAS_H   False: use central differences instead of F / H
#   N, M, N_SIGMA  state and measurement dimension, 2 N + 1
#   READS     tuple of the state components the sensor reads (H is zero elsewhere)
#   ANGLES    tuple of M bools: which measurement components are angles
#   USE_UKF   True: the unscented filter; False: the extended one
#   LINEAR    the motion is linear (F does not depend on x): F is evaluated once,
#             and the UKF predicts with F P F^T + Q (the exact unscented transform)
#   F_SPARSE  True: the factory appends pattern_holds(Fm) and fpft_sparse(Fm, P, Q, Pp),
#             F P F^T + Q over the nonzeros of F only (same terms, same order)
#   CACHE     numba's cache flag for this module
#
# As module globals these are compile-time constants, so the small loops unroll.
# Layout: arrays shaped (runs, steps, ...). run_batch is serial and releases the GIL:
# the caller splits the runs into contiguous ranges, one per thread, and every run is
# written by exactly one thread, so results do not depend on the thread count. (A
# parallel=True kernel compiled about 2.7 times longer: Numba compiles it again, with
# every inlined function, under the parallel flags.) fastcal.jit.njit's pipeline runs the
# copy propagation a parfor kernel gets, so the inlined functions' arrays are not
# reference-counted in the step loop (about 3x a run-step; docs/contributors/kernel-notes.md).
# No Python per step, no allocation in the step loop.

from numba import prange  # noqa: F401 (model functions written into this file may use it)
import numpy as np

from fastcal.jit import njit
from tracking.kernels import blocks as _k

OK = 0
MISSED = 1
SINGULAR = 2
FAILED = 3

_OPTS = dict(cache=CACHE, error_model="numpy", inline="always")  # noqa: F821 (bound by the header)


@njit(**_OPTS)
def copy_state(x, P, x_out, P_out):
    """``x_out = x``, ``P_out = P`` (N and N x N)."""
    for i in range(N):
        x_out[i] = x[i]
        for j in range(N):
            P_out[i, j] = P[i, j]


@njit(**_OPTS)
def sigma_points(x, P, scale, L_P, sig):
    """Merwe's ``2 N + 1`` sigma points of ``(x, P)`` into ``sig``; False if ``P`` is not positive definite."""
    if not _k.cholesky_lower(P, L_P, N):
        return False
    for j in range(N):
        sig[0, j] = x[j]
    for j in range(N):
        for i in range(N):
            d = scale * L_P[i, j]
            sig[1 + j, i] = x[i] + d
            sig[1 + N + j, i] = x[i] - d
    return True


@njit(**_OPTS)
def gain_step(xp, K, y, x):
    """``x = xp + K y``."""
    for i in range(N):
        s = xp[i]
        for a in range(M):
            s += K[i, a] * y[a]
        x[i] = s


@njit(**_OPTS)
def write_step(means, covs, innov, innov_covs, r, k, x, P, y, S, updated):
    """Step ``k`` of run ``r``: the estimate ``(x, P)``, and the innovation ``(y, S)`` if
    ``updated`` (else NaN)."""
    for a in range(M):
        innov[r, k, a] = y[a] if updated else np.nan
        for b in range(M):
            innov_covs[r, k, a, b] = S[a, b] if updated else np.nan
    for i in range(N):
        means[r, k, i] = x[i]
        for j in range(N):
            covs[r, k, i, j] = P[i, j]


@njit(**_OPTS)
def motion_jacobian(x, dt, mp, Fm, xa, fa, fb, where):
    if HAS_F:
        Fm[:, :] = np.nan  # an unwritten component cannot pass as a number
        _k.mark(where, _k.SLOT_JF)
        F(x, dt, mp, Fm)
    else:
        _k.mark(where, _k.SLOT_F)
        _k.numjac_f(f, x, dt, mp, Fm, xa, fa, fb)


@njit(**_OPTS)
def sensor_jacobian(x, sp, Hm, xa, za, zb, where):
    if HAS_H:
        Hm[:, :] = np.nan
        _k.mark(where, _k.SLOT_JH)
        H(x, sp, Hm)
    else:
        _k.mark(where, _k.SLOT_H)
        _k.numjac_h(h, x, sp, Hm, READS, ANGLES, xa, za, zb)


@njit(**_OPTS)
def predict_linearised(x, P, dt, Q, mp, Fm, xp, Pp, tmp, xa, fa, fb, where):
    """``xp = f(x)``, ``Pp = F P F^T + Q`` (symmetrised), ``F`` the Jacobian at ``x``.

    With ``F_SPARSE`` and ``F`` zero outside its pattern, the product runs over the
    nonzeros only; otherwise (or if ``F`` has a nonzero outside it) the dense loops.
    """
    xp[:] = np.nan
    _k.mark(where, _k.SLOT_F)
    f(x, dt, mp, xp)
    if not LINEAR:
        motion_jacobian(x, dt, mp, Fm, xa, fa, fb, where)
    if F_SPARSE and pattern_holds(Fm):  # noqa: F821 (bound by the header / factory)
        fpft_sparse(Fm, P, Q, Pp)  # noqa: F821
        _k.symmetrise(Pp, N)
        return
    for i in range(N):
        for j in range(N):
            s = 0.0
            for k in range(N):
                s += Fm[i, k] * P[k, j]
            tmp[i, j] = s
    for i in range(N):
        for j in range(N):
            s = 0.0
            for k in range(N):
                s += tmp[i, k] * Fm[j, k]
            Pp[i, j] = s + Q[i, j]
    _k.symmetrise(Pp, N)


@njit(**_OPTS)
def predict_unscented(x, P, dt, Q, mp, Wm, Wc, scale, xp, Pp, L_P, sig, Xs, where):
    """Unscented prediction: sigma points of ``(x, P)`` through ``f``; False if ``P`` is not PD."""
    if not sigma_points(x, P, scale, L_P, sig):
        return False
    _k.mark(where, _k.SLOT_F)
    for s_i in range(N_SIGMA):
        Xs[s_i, :] = np.nan
        f(sig[s_i], dt, mp, Xs[s_i])
    for i in range(N):
        ref = Xs[0, i]
        s = 0.0
        for s_i in range(1, N_SIGMA):
            s += Wm[s_i] * (Xs[s_i, i] - ref)
        xp[i] = ref + s
    for i in range(N):
        for j in range(N):
            Pp[i, j] = 0.0
    for s_i in range(N_SIGMA):
        w = Wc[s_i]
        for i in range(N):
            di = Xs[s_i, i] - xp[i]
            for j in range(N):
                Pp[i, j] += w * di * (Xs[s_i, j] - xp[j])
    for i in range(N):
        for j in range(N):
            Pp[i, j] += Q[i, j]
    _k.symmetrise(Pp, N)
    return True


@njit(**_OPTS)
def ekf_update(xp, Pp, z, sp, R, x, P, y, S, zhat, Hm, PHt, L_S, K, B, BHt, KR,
               inv_diag, sol, tmp_m, xa, za, zb, where):
    """EKF update with a Joseph-form covariance; returns a status code.

    ``S = H Pp H^T + R``, ``K = Pp H^T S^-1`` (Cholesky solve), ``x = xp + K y``
    with ``y = z - h(xp)`` (angles wrapped), ``P = (I - K H) Pp (I - K H)^T + K R K^T``.
    ``H`` is zero outside the components in ``READS``; the products skip them.
    The Joseph form is kept in its factored order: ``B = (I - K H) Pp =
    Pp - K (Pp H^T)^T``, then ``P = B - (B H^T) K^T + K R K^T``.
    """
    zhat[:] = np.nan
    _k.mark(where, _k.SLOT_H)
    h(xp, sp, zhat)
    sensor_jacobian(xp, sp, Hm, xa, za, zb, where)
    for a in range(M):
        if not np.isfinite(zhat[a]):
            return SINGULAR
        for j in READS:
            if not np.isfinite(Hm[a, j]):
                return SINGULAR
    _k.residual(z, zhat, y, ANGLES)
    for i in range(N):
        for a in range(M):
            s = 0.0
            for j in READS:
                s += Pp[i, j] * Hm[a, j]
            PHt[i, a] = s
    for a in range(M):
        for b in range(M):
            s = R[a, b]
            for j in READS:
                s += Hm[a, j] * PHt[j, b]
            S[a, b] = s
    _k.symmetrise(S, M)
    if not _k.cholesky_lower(S, L_S, M):
        return FAILED
    _k.gain(PHt, L_S, K, tmp_m, inv_diag, sol, N, M)
    gain_step(xp, K, y, x)
    for i in range(N):
        for j in range(N):
            s = Pp[i, j]
            for a in range(M):
                s -= K[i, a] * PHt[j, a]
            B[i, j] = s
    for i in range(N):
        for a in range(M):
            s = 0.0
            for j in READS:
                s += B[i, j] * Hm[a, j]
            BHt[i, a] = s
            s = 0.0
            for b in range(M):
                s += K[i, b] * R[b, a]
            KR[i, a] = s
    for i in range(N):
        for j in range(i + 1):
            s = B[i, j]
            for a in range(M):
                s += (KR[i, a] - BHt[i, a]) * K[j, a]
            P[i, j] = s
            P[j, i] = s
    return OK


@njit(**_OPTS)
def ukf_update(xp, Pp, z, sp, R, Wm, Wc, scale, x, P, y, S, L_P, sig, Zs, zhat, dz,
               PXZ, L_S, K, tmp_m, inv_diag, sol, where):
    """UKF update on sigma points redrawn from ``(xp, Pp)``; returns a status code.

    ``zhat`` is the weighted mean (angles wrapped, see :func:`_k.sigma_mean`),
    ``S = sum Wc dz dz^T + R``, ``Pxz = sum Wc (X - xp) dz^T``, ``K = Pxz S^-1``
    (Cholesky solve), and ``P = Pp - K Pxz^T - Pxz K^T + K S K^T`` (the Joseph
    form written with cross-covariances, valid for any gain).
    """
    if not sigma_points(xp, Pp, scale, L_P, sig):
        return FAILED
    _k.mark(where, _k.SLOT_H)
    for s_i in range(N_SIGMA):
        Zs[s_i, :] = np.nan
        h(sig[s_i], sp, Zs[s_i])
        for a in range(M):
            if not np.isfinite(Zs[s_i, a]):
                return SINGULAR
    _k.sigma_mean(Wm, Zs, zhat, ANGLES)
    for a in range(M):
        for b in range(M):
            S[a, b] = 0.0
    for i in range(N):
        for b in range(M):
            PXZ[i, b] = 0.0
    for s_i in range(N_SIGMA):
        _k.residual(Zs[s_i], zhat, dz, ANGLES)
        w = Wc[s_i]
        for a in range(M):
            for b in range(M):
                S[a, b] += w * dz[a] * dz[b]
        for i in range(N):
            dx = sig[s_i, i] - xp[i]
            for b in range(M):
                PXZ[i, b] += w * dx * dz[b]
    for a in range(M):
        for b in range(M):
            S[a, b] += R[a, b]
    _k.symmetrise(S, M)
    if not _k.cholesky_lower(S, L_S, M):
        return FAILED
    _k.gain(PXZ, L_S, K, tmp_m, inv_diag, sol, N, M)
    _k.residual(z, zhat, y, ANGLES)
    gain_step(xp, K, y, x)
    for i in range(N):
        for j in range(i + 1):
            s = Pp[i, j]
            for a in range(M):
                s -= K[i, a] * PXZ[j, a] + PXZ[i, a] * K[j, a]
                ks = 0.0
                for b in range(M):
                    ks += K[i, b] * S[b, a]
                s += ks * K[j, a]
            P[i, j] = s
            P[j, i] = s
    return OK


@njit(cache=CACHE, nogil=True, error_model="numpy")  # noqa: F821
def run_batch(x0, P0, zs, dt, Q, mp, sp, R, Wm, Wc, scale,
              means, covs, innov, innov_covs, status, skip_first_predict, where):
    """Run R filters over T steps: predict, then update with ``zs[r, k]``.

    ``x0`` (R, N), ``P0`` (R, N, N), ``zs`` (R, T, M). Writes posterior ``means``
    (R, T, N), ``covs`` (R, T, N, N), innovations ``innov`` (R, T, M), their
    covariances ``innov_covs`` (R, T, M, M) and ``status`` (R, T) int8:

    OK 0: updated. MISSED 1: the measurement holds a NaN, predict only.
    SINGULAR 2: ``h`` or its Jacobian is not finite at the prediction (e.g. the
    target on the sensor), predict only. FAILED 3: a covariance stopped being
    positive definite; this step and the rest of the run are NaN.

    With ``skip_first_predict`` the first step updates ``(x0, P0)`` directly
    (the object API's single ``update`` is this kernel with T = 1).

    ``where`` int64, at least 3 long: the run, step and model function
    (``_k.SLOT_*``) being computed, kept up to date for the caller (``tracking.kernels.guard``).
    """
    n_runs, n_steps = zs.shape[0], zs.shape[1]
    # Scratch space, allocated once per call.
    x = np.empty(N)
    P = np.empty((N, N))
    xp = np.empty(N)
    Pp = np.empty((N, N))
    tmp = np.empty((N, N))
    Fm = np.zeros((N, N))
    B = np.empty((N, N))
    L_P = np.empty((N, N))
    xa = np.empty(N)
    fa = np.empty(N)
    fb = np.empty(N)
    y = np.empty(M)
    S = np.empty((M, M))
    zhat = np.empty(M)
    dz = np.empty(M)
    za = np.empty(M)
    zb = np.empty(M)
    Hm = np.zeros((M, N))
    PHt = np.empty((N, M))
    BHt = np.empty((N, M))
    KR = np.empty((N, M))
    K = np.empty((N, M))
    L_S = np.empty((M, M))
    inv_diag = np.empty(M)
    sol = np.empty(M)
    tmp_m = np.empty(M)
    sig = np.empty((N_SIGMA, N))
    Xs = np.empty((N_SIGMA, N))
    Zs = np.empty((N_SIGMA, M))
    zk = np.empty(M)
    if LINEAR and n_runs > 0:
        _k.mark_step(where, 0, 0)
        motion_jacobian(x0[0], dt, mp, Fm, xa, fa, fb, where)
    for r in range(n_runs):
        copy_state(x0[r], P0[r], x, P)
        for k in range(n_steps):
            _k.mark_step(where, r, k)
            code = OK
            if k == 0 and skip_first_predict:
                copy_state(x, P, xp, Pp)
            elif USE_UKF and not LINEAR:
                if not predict_unscented(x, P, dt, Q, mp, Wm, Wc, scale, xp, Pp, L_P, sig, Xs, where):
                    code = FAILED
            else:
                predict_linearised(x, P, dt, Q, mp, Fm, xp, Pp, tmp, xa, fa, fb, where)
            if code == OK:
                for a in range(M):
                    zk[a] = zs[r, k, a]
                    if np.isnan(zk[a]):
                        code = MISSED
            if code == OK:
                if USE_UKF:
                    code = ukf_update(xp, Pp, zk, sp, R, Wm, Wc, scale, x, P, y, S, L_P, sig,
                                      Zs, zhat, dz, PHt, L_S, K, tmp_m, inv_diag, sol, where)
                else:
                    code = ekf_update(xp, Pp, zk, sp, R, x, P, y, S, zhat, Hm, PHt, L_S, K,
                                      B, BHt, KR, inv_diag, sol, tmp_m, xa, za, zb, where)
            if code == FAILED:  # this step and the rest of the run: NaN
                x[:] = np.nan
                P[:, :] = np.nan
                for kk in range(k, n_steps):
                    status[r, kk] = FAILED
                    write_step(means, covs, innov, innov_covs, r, kk, x, P, y, S, False)
                break
            status[r, k] = code
            if code != OK:  # MISSED or SINGULAR: predict only
                copy_state(xp, Pp, x, P)
            write_step(means, covs, innov, innov_covs, r, k, x, P, y, S, code == OK)

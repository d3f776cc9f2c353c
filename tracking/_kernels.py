"""Compiled kernels for the tracking filters: pure ``@njit`` functions over arrays.

Shapes: state dimension ``n`` (4 for constant velocity), measurement dimension
``m`` (2). Batched kernels take arrays shaped ``(runs, steps, ...)`` and run in
parallel over contiguous chunks of runs, one chunk per thread; every run is
written by exactly one thread, so results do not depend on the thread count.
No Python runs per step, and no array is allocated inside the step loop.

Sensors are selected by an integer ``kind`` with parameters ``sp``:

``SENSOR_RANGE_BEARING``  ``sp = [sx, sy, sigma_r, sigma_theta]``, z = (range, bearing)
``SENSOR_POSITION``       ``sp = [0, 0, sigma, sigma]``, z = (x, y) (linear)
"""

import numpy as np
from numba import njit, prange

SENSOR_RANGE_BEARING = 0
SENSOR_POSITION = 1

# Fixed sizes (constant-velocity state, 2-D measurement). As module constants they
# are compile-time constants, so LLVM fully unrolls the small loops below.
N = 4
M = 2
N_SIGMA = 2 * N + 1

TWO_PI = 2.0 * np.pi


# ------------------------------------------------------------------ small linear algebra
@njit(cache=True, inline="always")
def wrap_angle(a):
    """Wrap an angle to (-pi, pi]. Python's float ``%`` returns a value in [0, 2 pi)."""
    return np.pi - ((np.pi - a) % TWO_PI)


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def cholesky_solve(L, inv_diag, b, tmp, out):
    """Solve ``(L L^T) out = b`` (L is M x M) by forward then backward substitution.

    ``inv_diag[i] = 1 / L[i, i]``, computed once per factorisation (as LAPACK's
    triangular solvers do) so each substitution multiplies instead of divides.
    """
    d = M
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


@njit(cache=True, inline="always")
def symmetrise(P):
    """Average ``P`` (M x M) with its transpose."""
    d = M
    for i in range(d):
        for j in range(i):
            v = 0.5 * (P[i, j] + P[j, i])
            P[i, j] = v
            P[j, i] = v


@njit(cache=True, inline="always")
def gain(PXZ, L_S, K, tmp, inv_diag, sol):
    """Kalman gain ``K = PXZ S^-1`` with ``S = L_S L_S^T``, row by row (S is symmetric).

    ``inv_diag`` (M,) is scratch space for the reciprocal diagonal of ``L_S``.
    """
    n, m = N, M
    for a in range(m):
        inv_diag[a] = 1.0 / L_S[a, a]
    for i in range(n):
        cholesky_solve(L_S, inv_diag, PXZ[i], tmp, sol)
        for a in range(m):
            K[i, a] = sol[a]


# ------------------------------------------------------------------ models
@njit(cache=True)
def cv_matrices(dt, q, F, Q):
    """Constant-velocity transition ``F`` and white-noise-acceleration ``Q`` for [x, vx, y, vy].

    Per axis, ``Q = q [[dt^3/3, dt^2/2], [dt^2/2, dt]]`` (continuous white noise
    acceleration of intensity ``q`` integrated over one period).
    """
    F[:, :] = 0.0
    Q[:, :] = 0.0
    for a in range(2):
        i = 2 * a
        F[i, i] = 1.0
        F[i, i + 1] = dt
        F[i + 1, i + 1] = 1.0
        Q[i, i] = q * dt ** 3 / 3.0
        Q[i, i + 1] = q * dt ** 2 / 2.0
        Q[i + 1, i] = q * dt ** 2 / 2.0
        Q[i + 1, i + 1] = q * dt


@njit(cache=True, inline="always")
def measure(kind, sp, x, z):
    """Noise-free measurement ``z = h(x)``."""
    if kind == SENSOR_RANGE_BEARING:
        dx = x[0] - sp[0]
        dy = x[2] - sp[1]
        z[0] = np.sqrt(dx * dx + dy * dy)
        z[1] = np.arctan2(dy, dx)
    else:
        z[0] = x[0]
        z[1] = x[2]


@njit(cache=True, inline="always")
def measure_jacobian(kind, sp, x, H):
    """Analytic Jacobian ``dh/dx`` (m, n)."""
    H[:, :] = 0.0
    if kind == SENSOR_RANGE_BEARING:
        dx = x[0] - sp[0]
        dy = x[2] - sp[1]
        r2 = dx * dx + dy * dy
        r = np.sqrt(r2)
        H[0, 0] = dx / r
        H[0, 2] = dy / r
        H[1, 0] = -dy / r2
        H[1, 2] = dx / r2
    else:
        H[0, 0] = 1.0
        H[1, 2] = 1.0


@njit(cache=True, inline="always")
def residual(kind, a, b, out):
    """``a - b`` with the bearing difference wrapped to (-pi, pi]."""
    for i in range(M):
        out[i] = a[i] - b[i]
    if kind == SENSOR_RANGE_BEARING:
        out[1] = wrap_angle(out[1])


@njit(cache=True, inline="always")
def sigma_mean(kind, Wm, Z, zbar):
    """Weighted mean of measurement sigma points ``Z`` (2n+1, m), about the centre point.

    Every component is averaged as differences from the centre sigma point,
    ``Z_0 + sum_{i>=1} Wm_i (Z_i - Z_0)``, which equals ``sum_i Wm_i Z_i`` because
    the weights sum to one but does not cancel catastrophically when the centre
    weight is large and negative (small alpha). For the bearing the differences
    are wrapped: ``ref + sum_i Wm_i wrap(theta_i - ref)`` with ``ref = theta_0`` is
    the weighted mean of the angles unwrapped about ``ref``, correct for a
    negative centre weight too (the atan2 of weighted sines and cosines is not).
    """
    n_sig, m = N_SIGMA, M
    for a in range(m):
        ref = Z[0, a]
        s = 0.0
        for i in range(1, n_sig):
            if kind == SENSOR_RANGE_BEARING and a == 1:
                s += Wm[i] * wrap_angle(Z[i, a] - ref)
            else:
                s += Wm[i] * (Z[i, a] - ref)
        zbar[a] = ref + s
    if kind == SENSOR_RANGE_BEARING:
        zbar[1] = wrap_angle(zbar[1])


# ------------------------------------------------------------------ filter steps
@njit(cache=True, inline="always")
def predict(x, P, dt, Q, xp, Pp, tmp):
    """Constant-velocity prediction ``xp = F x``, ``Pp = F P F^T + Q`` (symmetrised).

    ``F`` is block diagonal with blocks ``[[1, dt], [0, 1]]`` over (x, vx) and
    (y, vy), so ``F v`` only adds ``dt`` times each velocity to its position;
    the products are written out instead of multiplying by zeros and ones.
    The motion model is linear, so this is also the exact unscented transform
    of the prediction: the EKF and the UKF share it.
    """
    for i in range(0, N, 2):
        xp[i] = x[i] + dt * x[i + 1]
        xp[i + 1] = x[i + 1]
    # tmp = F P (row operations)
    for i in range(0, N, 2):
        for j in range(N):
            tmp[i, j] = P[i, j] + dt * P[i + 1, j]
            tmp[i + 1, j] = P[i + 1, j]
    # Pp = tmp F^T + Q (column operations)
    for i in range(N):
        for j in range(0, N, 2):
            Pp[i, j] = tmp[i, j] + dt * tmp[i, j + 1] + Q[i, j]
            Pp[i, j + 1] = tmp[i, j + 1] + Q[i, j + 1]
    for i in range(N):
        for j in range(i):
            v = 0.5 * (Pp[i, j] + Pp[j, i])
            Pp[i, j] = v
            Pp[j, i] = v


@njit(cache=True, inline="always")
def ekf_update(xp, Pp, z, kind, sp, R, x, P, y, S,
               zhat, H, PHt, L_S, K, B, BHt, KR, inv_diag, sol, tmp_m):
    """EKF update with a Joseph-form covariance; False if ``S`` is not positive definite.

    ``S = H Pp H^T + R``, ``K = Pp H^T S^-1`` (Cholesky solve),
    ``x = xp + K y`` with ``y = z - h(xp)`` (bearing wrapped),
    ``P = (I - K H) Pp (I - K H)^T + K R K^T``.

    Both sensors see only the position, so ``H`` is zero in the velocity
    columns 1 and 3; the products below skip them. The Joseph form is kept in
    its factored order: ``B = (I - K H) Pp = Pp - K (Pp H^T)^T``, then
    ``P = B (I - K H)^T + K R K^T = B - (B H^T) K^T + K R K^T``.
    """
    n = N
    m = M
    measure(kind, sp, xp, zhat)
    measure_jacobian(kind, sp, xp, H)
    residual(kind, z, zhat, y)
    for i in range(n):
        for a in range(m):
            PHt[i, a] = Pp[i, 0] * H[a, 0] + Pp[i, 2] * H[a, 2]
    for a in range(m):
        for b in range(m):
            S[a, b] = R[a, b] + H[a, 0] * PHt[0, b] + H[a, 2] * PHt[2, b]
    symmetrise(S)
    if not cholesky_lower(S, L_S, M):
        return False
    gain(PHt, L_S, K, tmp_m, inv_diag, sol)
    for i in range(n):
        s = xp[i]
        for a in range(m):
            s += K[i, a] * y[a]
        x[i] = s
    # B = (I - K H) Pp = Pp - K (H Pp), with H Pp = PHt^T (Pp symmetric)
    for i in range(n):
        for j in range(n):
            s = Pp[i, j]
            for a in range(m):
                s -= K[i, a] * PHt[j, a]
            B[i, j] = s
    for i in range(n):
        for a in range(m):
            BHt[i, a] = B[i, 0] * H[a, 0] + B[i, 2] * H[a, 2]
            s = 0.0
            for b in range(m):
                s += K[i, b] * R[b, a]
            KR[i, a] = s
    # P = B - BHt K^T + KR K^T, lower triangle then mirror
    for i in range(n):
        for j in range(i + 1):
            s = B[i, j]
            for a in range(m):
                s += (KR[i, a] - BHt[i, a]) * K[j, a]
            P[i, j] = s
            P[j, i] = s
    return True


@njit(cache=True, inline="always")
def ukf_update(xp, Pp, z, kind, sp, R, Wm, Wc, scale, x, P, y, S,
               L_P, sig, Zs, zhat, dz, PXZ, L_S, K, tmp_m, inv_diag, sol):
    """UKF update on sigma points redrawn from ``(xp, Pp)``; False if a Cholesky fails.

    Sigma points ``xp``, ``xp +/- scale * L[:, j]`` with ``Pp = L L^T`` and
    ``scale = sqrt(n + lambda)``. Then ``zhat`` is the weighted mean (wrapped
    bearing, see :func:`sigma_mean`), ``S = sum Wc dz dz^T + R``,
    ``Pxz = sum Wc (X - xp) dz^T``, ``K = Pxz S^-1`` (Cholesky solve), and the
    covariance update in Joseph-like form, valid for any gain:
    ``P = Pp - K Pxz^T - Pxz K^T + K S K^T`` (for a linear ``h`` it is exactly
    ``(I - K H) Pp (I - K H)^T + K R K^T``; with the optimal ``K`` it equals
    ``Pp - K S K^T``).
    """
    n = N
    m = M
    n_sig = N_SIGMA
    if not cholesky_lower(Pp, L_P, N):
        return False
    for j in range(n):
        sig[0, j] = xp[j]
    for j in range(n):
        for i in range(n):
            d = scale * L_P[i, j]
            sig[1 + j, i] = xp[i] + d
            sig[1 + n + j, i] = xp[i] - d
    for s_i in range(n_sig):
        measure(kind, sp, sig[s_i], Zs[s_i])
    sigma_mean(kind, Wm, Zs, zhat)
    S[:, :] = 0.0
    PXZ[:, :] = 0.0
    for s_i in range(n_sig):
        residual(kind, Zs[s_i], zhat, dz)
        w = Wc[s_i]
        for a in range(m):
            for b in range(m):
                S[a, b] += w * dz[a] * dz[b]
        for i in range(n):
            dx = sig[s_i, i] - xp[i]
            for b in range(m):
                PXZ[i, b] += w * dx * dz[b]
    for a in range(m):
        for b in range(m):
            S[a, b] += R[a, b]
    symmetrise(S)
    if not cholesky_lower(S, L_S, M):
        return False
    gain(PXZ, L_S, K, tmp_m, inv_diag, sol)
    residual(kind, z, zhat, y)
    for i in range(n):
        s = xp[i]
        for a in range(m):
            s += K[i, a] * y[a]
        x[i] = s
    for i in range(n):
        for j in range(i + 1):
            s = Pp[i, j]
            for a in range(m):
                s -= K[i, a] * PXZ[j, a] + PXZ[i, a] * K[j, a]
                ks = 0.0
                for b in range(m):
                    ks += K[i, b] * S[b, a]
                s += ks * K[j, a]
            P[i, j] = s
            P[j, i] = s
    return True


# ------------------------------------------------------------------ batched drivers
@njit(cache=True)
def _fill_nan_from(r, k0, means, covs, innov, innov_covs):
    means[r, k0:, :] = np.nan
    covs[r, k0:, :, :] = np.nan
    innov[r, k0:, :] = np.nan
    innov_covs[r, k0:, :, :] = np.nan


@njit(cache=True, parallel=True)
def run_batch(use_ukf, x0, P0, zs, dt, Q, kind, sp, R, Wm, Wc, scale,
              means, covs, innov, innov_covs, failed, n_threads, skip_first_predict):
    """Run R filters over T steps: predict, then update with ``zs[r, k]``.

    ``x0`` (R, n), ``P0`` (R, n, n), ``zs`` (R, T, m). Writes posterior
    ``means`` (R, T, n), ``covs`` (R, T, n, n), innovations ``innov`` (R, T, m)
    and their covariances ``innov_covs`` (R, T, m, m). A measurement holding a
    NaN means predict only (its innovation is NaN). ``failed[r]`` is the step at
    which a Cholesky factorisation failed (outputs NaN from there on), or -1.
    With ``skip_first_predict`` the first step updates ``(x0, P0)`` directly
    (the object API's single ``update`` is this kernel with T = 1).
    """
    n_runs, n_steps = zs.shape[0], zs.shape[1]
    n, m, n_sig = N, M, N_SIGMA
    n_chunks = max(1, min(n_threads, n_runs))
    for c in prange(n_chunks):
        start = c * n_runs // n_chunks
        stop = (c + 1) * n_runs // n_chunks
        # Scratch space, allocated once per chunk.
        x = np.empty(n)
        P = np.empty((n, n))
        xp = np.empty(n)
        Pp = np.empty((n, n))
        tmp = np.empty((n, n))
        B = np.empty((n, n))
        L_P = np.empty((n, n))
        y = np.empty(m)
        S = np.empty((m, m))
        zhat = np.empty(m)
        dz = np.empty(m)
        H = np.empty((m, n))
        PHt = np.empty((n, m))
        BHt = np.empty((n, m))
        KR = np.empty((n, m))
        K = np.empty((n, m))
        L_S = np.empty((m, m))
        inv_diag = np.empty(m)
        sol = np.empty(m)
        tmp_m = np.empty(m)
        sig = np.empty((n_sig, n))
        Zs = np.empty((n_sig, m))
        zk = np.empty(m)
        for r in range(start, stop):
            failed[r] = -1
            for i in range(n):
                x[i] = x0[r, i]
                for j in range(n):
                    P[i, j] = P0[r, i, j]
            for k in range(n_steps):
                if k == 0 and skip_first_predict:
                    for i in range(n):
                        xp[i] = x[i]
                        for j in range(n):
                            Pp[i, j] = P[i, j]
                else:
                    predict(x, P, dt, Q, xp, Pp, tmp)
                missing = False
                for a in range(m):
                    zk[a] = zs[r, k, a]
                    if np.isnan(zk[a]):
                        missing = True
                if missing:
                    for i in range(n):
                        x[i] = xp[i]
                        for j in range(n):
                            P[i, j] = Pp[i, j]
                    for a in range(m):
                        innov[r, k, a] = np.nan
                        for b in range(m):
                            innov_covs[r, k, a, b] = np.nan
                else:
                    if use_ukf:
                        ok = ukf_update(xp, Pp, zk, kind, sp, R, Wm, Wc, scale, x, P, y, S,
                                        L_P, sig, Zs, zhat, dz, PHt, L_S, K, tmp_m, inv_diag, sol)
                    else:
                        ok = ekf_update(xp, Pp, zk, kind, sp, R, x, P, y, S,
                                        zhat, H, PHt, L_S, K, B, BHt, KR, inv_diag, sol, tmp_m)
                    if not ok:
                        failed[r] = k
                        _fill_nan_from(r, k, means, covs, innov, innov_covs)
                        break
                    for a in range(m):
                        innov[r, k, a] = y[a]
                        for b in range(m):
                            innov_covs[r, k, a, b] = S[a, b]
                for i in range(n):
                    means[r, k, i] = x[i]
                    for j in range(n):
                        covs[r, k, i, j] = P[i, j]

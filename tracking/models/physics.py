"""The built-in models' physics, written once as compiled functions.

Motion functions ``f(x, dt, p, out)`` / ``F(x, dt, p, out)`` and sensor
functions ``h(x, p, out)`` / ``H(x, p, out)``, where ``p`` is the model's
parameter vector (:attr:`params` of the model objects in :mod:`tracking.models`).
The model objects hand them to the filters, whose batched kernel inlines them;
their numpy methods call them through the mappers of :mod:`tracking.kernels.blocks`.

Every function here uses ``error_model="numpy"``: a division by zero gives inf
or NaN (which the filters report as singular geometry) instead of raising.
"""

import numpy as np

from fastcal.jit import njit

_JIT = dict(cache=True, error_model="numpy")
_INLINE = dict(cache=True, error_model="numpy", inline="always")


# ------------------------------------------------------------------ built-in motion models
# State layouts: constant velocity [x, vx, y, vy(, z, vz)]; constant acceleration
# [x, vx, ax, y, vy, ay(, z, vz, az)]; coordinated turn [x, vx, y, vy(, z, vz), omega].
@njit(**_JIT)
def cv_f(x, dt, p, out):
    """Constant velocity: each (position, velocity) pair moves ``position += dt * velocity``."""
    for i in range(0, x.shape[0], 2):
        out[i] = x[i] + dt * x[i + 1]
        out[i + 1] = x[i + 1]


@njit(**_INLINE)
def _per_axis_F(out, block, dt):
    """``F`` of ``block`` integrators per axis (position, velocity(, acceleration)): on each
    axis ``F[i, j] = dt^(j-i) / (j-i)!`` for ``j >= i``, zero elsewhere."""
    out[:, :] = 0.0
    for a in range(0, out.shape[0], block):
        for i in range(block):
            c = 1.0
            for j in range(i, block):
                out[a + i, a + j] = c
                c = c * dt / (j - i + 1)


@njit(**_JIT)
def cv_F(x, dt, p, out):
    _per_axis_F(out, 2, dt)


@njit(**_JIT)
def ca_f(x, dt, p, out):
    """Constant acceleration per axis: ``p += dt v + dt^2/2 a``, ``v += dt a``."""
    h2 = 0.5 * dt * dt
    for i in range(0, x.shape[0], 3):
        out[i] = x[i] + dt * x[i + 1] + h2 * x[i + 2]
        out[i + 1] = x[i + 1] + dt * x[i + 2]
        out[i + 2] = x[i + 2]


@njit(**_JIT)
def ca_F(x, dt, p, out):
    _per_axis_F(out, 3, dt)


# Below this |omega dt| the turn coefficients use their Taylor series (the closed
# forms divide by omega); the series error is below 1e-17 relative there.
CT_SMALL = 1e-4


@njit(**_INLINE)
def _ct_coefficients(w, dt):
    """``a = sin(w dt)/w``, ``b = (1 - cos(w dt))/w``, their derivatives in ``w``, and
    ``cos(w dt)``, ``sin(w dt)``."""
    wt = w * dt
    s = np.sin(wt)
    c = np.cos(wt)
    if abs(wt) < CT_SMALL:
        wt2 = wt * wt
        a = dt * (1.0 - wt2 / 6.0)
        b = 0.5 * wt * dt * (1.0 - wt2 / 12.0)
        da = -w * dt ** 3 / 3.0
        db = 0.5 * dt * dt * (1.0 - wt2 / 4.0)
    else:
        a = s / w
        b = (1.0 - c) / w
        da = dt * c / w - s / (w * w)
        db = dt * s / w - (1.0 - c) / (w * w)
    return a, b, da, db, c, s


@njit(**_JIT)
def ct_f(x, dt, p, out):
    """Coordinated turn at rate ``omega`` (the last state component) in the x-y plane.

    ``x += a vx - b vy``, ``y += b vx + a vy``, velocity rotated by ``omega dt``,
    with ``a = sin(omega dt)/omega``, ``b = (1 - cos(omega dt))/omega``; a third
    axis (z, vz) moves at constant velocity.
    """
    n = x.shape[0]
    w = x[n - 1]
    a, b, _, _, c, s = _ct_coefficients(w, dt)
    vx = x[1]
    vy = x[3]
    out[0] = x[0] + a * vx - b * vy
    out[1] = c * vx - s * vy
    out[2] = x[2] + b * vx + a * vy
    out[3] = s * vx + c * vy
    if n == 7:
        out[4] = x[4] + dt * x[5]
        out[5] = x[5]
    out[n - 1] = w


@njit(**_JIT)
def ct_F(x, dt, p, out):
    n = x.shape[0]
    w = x[n - 1]
    a, b, da, db, c, s = _ct_coefficients(w, dt)
    vx = x[1]
    vy = x[3]
    out[:, :] = 0.0
    out[0, 0] = 1.0
    out[0, 1] = a
    out[0, 3] = -b
    out[0, n - 1] = da * vx - db * vy
    out[1, 1] = c
    out[1, 3] = -s
    out[1, n - 1] = -dt * (s * vx + c * vy)
    out[2, 1] = b
    out[2, 2] = 1.0
    out[2, 3] = a
    out[2, n - 1] = db * vx + da * vy
    out[3, 1] = s
    out[3, 3] = c
    out[3, n - 1] = dt * (c * vx - s * vy)
    if n == 7:
        out[4, 4] = 1.0
        out[4, 5] = dt
        out[5, 5] = 1.0
    out[n - 1, n - 1] = 1.0


# ------------------------------------------------------------------ built-in sensors
# Parameter vectors: position p = [i_0, ..., i_{m-1}] (state indices measured);
# range-bearing p = [ix, iy, sx, sy]; range-bearing-elevation p = [ix, iy, iz, sx, sy, sz];
# range-bearing-range-rate p = [ix, iy, ivx, ivy, sx, sy]. Indices are stored as floats.
@njit(**_JIT)
def position_h(x, p, out):
    for a in range(out.shape[0]):
        out[a] = x[int(p[a])]


@njit(**_JIT)
def position_H(x, p, out):
    out[:, :] = 0.0  # every component written: the kernel fills outputs with NaN first
    m = out.shape[0]
    for a in range(m):
        for b in range(m):
            out[a, int(p[b])] = 1.0 if a == b else 0.0


@njit(**_JIT)
def range_bearing_h(x, p, out):
    """``[hypot(dx, dy), atan2(dy, dx)]`` from the sensor at ``(p[2], p[3])``."""
    dx = x[int(p[0])] - p[2]
    dy = x[int(p[1])] - p[3]
    out[0] = np.hypot(dx, dy)
    out[1] = np.arctan2(dy, dx)


@njit(**_INLINE)
def _range_bearing_rows(out, ix, iy, dx, dy):
    """Rows 0 (range) and 1 (bearing) of a Jacobian at the offset ``(dx, dy)`` from the sensor,
    in the columns ``ix``, ``iy``; returns the range."""
    r2 = dx * dx + dy * dy
    r = np.sqrt(r2)
    out[0, ix] = dx / r
    out[0, iy] = dy / r
    out[1, ix] = -dy / r2
    out[1, iy] = dx / r2
    return r


@njit(**_JIT)
def range_bearing_H(x, p, out):
    """Analytic Jacobian; NaN when the target is on the sensor (range 0)."""
    out[:, :] = 0.0  # every component written: the kernel fills outputs with NaN first
    ix = int(p[0])
    iy = int(p[1])
    _range_bearing_rows(out, ix, iy, x[ix] - p[2], x[iy] - p[3])


@njit(**_JIT)
def range_bearing_elevation_h(x, p, out):
    """``[r, atan2(dy, dx), atan2(dz, rho)]`` with ``rho = sqrt(dx^2 + dy^2)``."""
    dx = x[int(p[0])] - p[3]
    dy = x[int(p[1])] - p[4]
    dz = x[int(p[2])] - p[5]
    rho2 = dx * dx + dy * dy
    out[0] = np.sqrt(rho2 + dz * dz)
    out[1] = np.arctan2(dy, dx)
    out[2] = np.arctan2(dz, np.sqrt(rho2))


@njit(**_JIT)
def range_bearing_elevation_H(x, p, out):
    """Analytic Jacobian; NaN when the target is on the sensor's vertical axis (rho = 0)."""
    out[:, :] = 0.0  # every component written: the kernel fills outputs with NaN first
    ix = int(p[0])
    iy = int(p[1])
    iz = int(p[2])
    dx = x[ix] - p[3]
    dy = x[iy] - p[4]
    dz = x[iz] - p[5]
    rho2 = dx * dx + dy * dy
    rho = np.sqrt(rho2)
    r2 = rho2 + dz * dz
    r = np.sqrt(r2)
    out[0, ix] = dx / r
    out[0, iy] = dy / r
    out[0, iz] = dz / r
    out[1, ix] = -dy / rho2
    out[1, iy] = dx / rho2
    out[1, iz] = 0.0
    out[2, ix] = -dx * dz / (r2 * rho)
    out[2, iy] = -dy * dz / (r2 * rho)
    out[2, iz] = rho / r2


@njit(**_JIT)
def range_bearing_rate_h(x, p, out):
    """``[r, atan2(dy, dx), (dx vx + dy vy) / r]`` (range rate: the speed away from the sensor)."""
    dx = x[int(p[0])] - p[4]
    dy = x[int(p[1])] - p[5]
    vx = x[int(p[2])]
    vy = x[int(p[3])]
    r = np.sqrt(dx * dx + dy * dy)
    out[0] = r
    out[1] = np.arctan2(dy, dx)
    out[2] = (dx * vx + dy * vy) / r


@njit(**_JIT)
def range_bearing_rate_H(x, p, out):
    """Analytic Jacobian; NaN when the target is on the sensor (range 0)."""
    out[:, :] = 0.0  # every component written: the kernel fills outputs with NaN first
    ix = int(p[0])
    iy = int(p[1])
    ivx = int(p[2])
    ivy = int(p[3])
    dx = x[ix] - p[4]
    dy = x[iy] - p[5]
    vx = x[ivx]
    vy = x[ivy]
    r = _range_bearing_rows(out, ix, iy, dx, dy)  # range and bearing do not depend on the velocity
    rdot = (dx * vx + dy * vy) / r
    out[2, ix] = (vx - rdot * dx / r) / r
    out[2, iy] = (vy - rdot * dy / r) / r
    out[2, ivx] = dx / r
    out[2, ivy] = dy / r

"""Your own model pair at compiled speed: a projectile with air drag seen by a ground radar.

Neither model is built in. The motion is a point mass in a vertical plane under gravity and
quadratic air drag (state ``[x, vx, z, vz]``, nonlinear in the velocity); the sensor is a radar
on the ground measuring range and elevation angle (an angle: wrapped in residuals and in the
UKF's means). An accurate range and a coarse angle make the measurement likelihood a thin
arc, which the EKF's linearisation misjudges (over-confident) and the UKF mostly captures.
Each is a small class whose physics is two ``@njit`` functions, the function and
its analytic Jacobian; the filters compile one batched kernel for the pair. The script checks
the Jacobians against central differences, runs the EKF and the UKF on the same Monte Carlo
truths and measurements, prints the consistency table (ANEES and Gaussian ECD against their
chi-square bands) and writes ``user_model_pair.png`` and ``user_model_pair.json``.

    python examples/user_model_pair.py out/            # 200 runs x 60 steps
    python examples/user_model_pair.py out/ --small    # 20 runs x 20 steps, for CI

The models are defined at module level and the script runs itself as an importable module
(see the bottom), so the compiled kernels are cached on disk and later runs start at once.
"""

import argparse
import json
import math
from pathlib import Path
import sys

from numba import njit
import numpy as np

from tracking.compare import compare, format_table, plot_report, write_atomically
from tracking.models import MotionModel, SensorModel
from tracking.scenario import Scenario


# ------------------------------------------------------------------ motion: gravity + quadratic drag
# p = [k, g]: drag coefficient (1/m) and gravity (m/s^2). One step of length dt with the
# acceleration a(v) = -k |v| v - [0, g] held over the step:
#   position += dt v + dt^2/2 a,   velocity += dt a.
@njit(error_model="numpy")
def drag_f(x, dt, p, out):
    k, g = p[0], p[1]
    vx, vz = x[1], x[3]
    s = math.sqrt(vx * vx + vz * vz)
    ax = -k * s * vx
    az = -k * s * vz - g
    h2 = 0.5 * dt * dt
    out[0] = x[0] + dt * vx + h2 * ax
    out[1] = vx + dt * ax
    out[2] = x[2] + dt * vz + h2 * az
    out[3] = vz + dt * az


@njit(error_model="numpy")
def drag_F(x, dt, p, out):
    k = p[0]
    vx, vz = x[1], x[3]
    s = math.sqrt(vx * vx + vz * vz)
    # d(s v)/dv = s I + v v^T / s  (-> 0 as s -> 0)
    c = vx * vz / s if s > 0.0 else 0.0
    dxx = -k * (s + (vx * vx / s if s > 0.0 else 0.0))
    dzz = -k * (s + (vz * vz / s if s > 0.0 else 0.0))
    dxz = -k * c
    h2 = 0.5 * dt * dt
    out[:, :] = 0.0
    out[0, 0] = 1.0
    out[0, 1] = dt + h2 * dxx
    out[0, 3] = h2 * dxz
    out[1, 1] = 1.0 + dt * dxx
    out[1, 3] = dt * dxz
    out[2, 1] = h2 * dxz
    out[2, 2] = 1.0
    out[2, 3] = dt + h2 * dzz
    out[3, 1] = dt * dxz
    out[3, 3] = 1.0 + dt * dzz


class Drag(MotionModel):
    """Point mass under gravity and quadratic drag, ``[x, vx, z, vz]``; white-noise acceleration ``q``."""

    ndim = 4
    f_jit = staticmethod(drag_f)
    F_jit = staticmethod(drag_F)
    position_indices = (0, 2)

    def __init__(self, k=2e-4, g=9.81, q=0.5, dt=0.5):
        self.k, self.g, self.q, self.dt = float(k), float(g), float(q), float(dt)

    @property
    def params(self):
        return np.array([self.k, self.g])

    @property
    def Q(self):
        dt, q = self.dt, self.q
        block = q * np.array([[dt ** 3 / 3.0, dt ** 2 / 2.0], [dt ** 2 / 2.0, dt]])
        return np.kron(np.eye(2), block)


# ------------------------------------------------------------------ sensor: range and elevation
# p = [sx, sz]: radar position. h(x) = [r, atan2(dz, dx)]; the elevation is an angle.
@njit(error_model="numpy")
def range_elevation_h(x, p, out):
    dx = x[0] - p[0]
    dz = x[2] - p[1]
    out[0] = math.sqrt(dx * dx + dz * dz)
    out[1] = math.atan2(dz, dx)


@njit(error_model="numpy")
def range_elevation_H(x, p, out):
    dx = x[0] - p[0]
    dz = x[2] - p[1]
    r2 = dx * dx + dz * dz
    r = math.sqrt(r2)  # r = 0 (target on the radar) gives NaN: reported as singular geometry
    out[:, :] = 0.0  # every component is written: the filters fill outputs with NaN before each call
    out[0, 0] = dx / r
    out[0, 2] = dz / r
    out[1, 0] = -dz / r2
    out[1, 2] = dx / r2


SIGMA_EL = math.radians(3.0)  # the radar's elevation noise, 3 degrees


class RangeElevationRadar(SensorModel):
    """Ground radar at ``position`` measuring range (m) and elevation (rad)."""

    ndim = 2
    angles = (1,)
    reads = (0, 2)
    h_jit = staticmethod(range_elevation_h)
    H_jit = staticmethod(range_elevation_H)

    def __init__(self, sigma_r=1.0, sigma_el=SIGMA_EL, position=(500.0, 0.0)):
        self.sigma_r, self.sigma_el = float(sigma_r), float(sigma_el)
        self.position = tuple(float(v) for v in position)

    @property
    def params(self):
        return np.array(self.position)

    @property
    def R(self):
        return np.diag([self.sigma_r ** 2, self.sigma_el ** 2])


# ------------------------------------------------------------------ the study
def scenario(runs, steps, seed):
    return Scenario(
        runs=runs, steps=steps, seed=seed, name="drag-radar",
        motion=Drag(), sensor=RangeElevationRadar(),
        truth0=[0.0, 250.0, 0.0, 250.0],  # launched at 45 degrees, 354 m/s
        P0=np.diag([50.0 ** 2, 10.0 ** 2, 50.0 ** 2, 10.0 ** 2]),
        description="projectile with quadratic drag (k 2e-4 /m), radar 500 m downrange: "
                    "accurate range (1 m), coarse elevation (3 deg), dt 0.5 s",
    )


def jacobian_check(motion, sensor, x):
    """Largest relative gap between the analytic Jacobians and central differences at ``x``."""
    def numeric(fun, x, eps=1e-5):
        cols = [(fun(x + eps * e) - fun(x - eps * e)) / (2 * eps) for e in np.eye(len(x))]
        return np.array(cols).T

    gaps = []
    for analytic, fun in ((motion.jacobian(x), motion.transition), (sensor.jacobian(x), sensor.h)):
        num = numeric(fun, x)
        gaps.append(float(np.max(np.abs(analytic - num) / np.maximum(1.0, np.abs(num)))))
    return max(gaps)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path, help="directory for user_model_pair.png and .json")
    parser.add_argument("--small", action="store_true", help="20 runs x 20 steps (fast, for CI)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs, steps = (20, 20) if args.small else (200, 60)
    sc = scenario(runs, steps, args.seed)
    args.outdir.mkdir(parents=True, exist_ok=True)

    gap = jacobian_check(sc.motion, sc.sensor, np.array([800.0, 180.0, 600.0, 90.0]))
    print(f"analytic Jacobians vs central differences: largest relative gap {gap:.1e}")

    report = compare(sc)
    report["jacobian_check"] = gap
    plot_report(report, args.outdir / "user_model_pair.png")
    write_atomically(args.outdir / "user_model_pair.json",
                     lambda fh: json.dump(report, fh, indent=1, allow_nan=False), mode="w")
    print(format_table(report))
    print(f"\nwrote {args.outdir / 'user_model_pair.png'} and {args.outdir / 'user_model_pair.json'}")
    return 0


if __name__ == "__main__":
    # Run through the importable module rather than __main__, so that the model functions can
    # be imported again by the generated kernel and the kernel is cached on disk.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import user_model_pair

    sys.exit(user_model_pair.main())

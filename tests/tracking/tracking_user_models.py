"""A user's own model pair for the tests, at module level so its kernel is cached on disk."""

from numba import njit
import numpy as np

from tracking.models import MotionModel, SensorModel


@njit(error_model="numpy")
def drift_f(x, dt, p, out):
    # [x, vx] with a velocity that decays at rate p[0] (nonlinear only through exp, linear in x)
    a = np.exp(-p[0] * dt)
    out[0] = x[0] + (1.0 - a) / p[0] * x[1]
    out[1] = a * x[1]


@njit(error_model="numpy")
def log_range_h(x, p, out):
    # log of the distance to a sensor at p[0] on the line, plus the position itself
    out[0] = np.log(np.sqrt((x[0] - p[0]) ** 2 + 1.0))
    out[1] = x[0]


class Drift(MotionModel):
    ndim = 2
    dt = 0.5
    params = np.array([0.3])
    f_jit = staticmethod(drift_f)  # no F_jit: central differences
    position_indices = (0,)

    @property
    def Q(self):
        return np.diag([1e-3, 1e-2])


class LogRange(SensorModel):
    ndim = 2
    R = np.diag([0.01, 0.25])
    params = np.array([3.0])
    h_jit = staticmethod(log_range_h)  # no H_jit: central differences
    reads = (0,)


@njit(error_model="numpy")
def kink_f(x, dt, p, out):
    # 1-D constant velocity, plus a pull on the velocity once the position passes p[0]:
    # dF[1, 0] is 0 below p[0] and 0.01 dt beyond it, a zero that random probes near 0 never see
    out[0] = x[0] + dt * x[1]
    pull = 0.01 * dt * (x[0] - p[0]) if x[0] > p[0] else 0.0
    out[1] = x[1] + pull


@njit(error_model="numpy")
def kink_F(x, dt, p, out):
    out[0, 0] = 1.0
    out[0, 1] = dt
    out[1, 0] = 0.01 * dt if x[0] > p[0] else 0.0
    out[1, 1] = 1.0


class Kink(MotionModel):
    ndim = 2
    dt = 1.0
    params = np.array([200.0])
    f_jit = staticmethod(kink_f)
    F_jit = staticmethod(kink_F)
    position_indices = (0,)

    @property
    def Q(self):
        return np.diag([0.05, 0.02])


@njit
def drift_f_raises_far(x, dt, p, out):
    # drift_f, with numba's default error model: a division by zero once the position passes 2.5
    a = np.exp(-p[0] * dt)
    w = x[0] - 2.5
    out[0] = x[0] + (1.0 - a) / p[0] * x[1] + (0.0 if x[0] < 2.5 else 1.0 / (w * 0.0))
    out[1] = a * x[1]


class DriftRaisesFar(Drift):
    f_jit = staticmethod(drift_f_raises_far)


# ---- mistakes that show only at a later step: the state walks to the right by dt a step, and
# each bad function misbehaves once the position passes a threshold in its params (inf: never)
@njit(error_model="numpy")
def walk_f_overruns_late(x, dt, p, out):
    # writes far past its output (800 MB) once the position passes p[0]
    out[0] = x[0] + dt
    out[1] = x[1]
    if x[0] > p[0]:
        out[100_000_000] = 0.0


class WalkOverrunsLate(MotionModel):
    ndim = 2
    dt = 0.5
    params = np.array([np.inf])
    f_jit = staticmethod(walk_f_overruns_late)
    position_indices = (0,)

    @property
    def Q(self):
        return np.diag([1e-4, 1e-4])


@njit(error_model="numpy")
def log_range_h_loops_late(x, p, out):
    # log_range_h, never returning once the position passes p[2]
    while x[0] > p[2]:
        out[0] = 0.0
    out[0] = np.log(np.sqrt((x[0] - p[0]) ** 2 + 1.0))
    out[1] = x[0]


@njit(error_model="numpy")
def log_range_H_overruns_late(x, p, out):
    # its Jacobian, written one column too far (into the next row) once the position passes p[1]
    d = x[0] - p[0]
    out[0, 0] = d / (d * d + 1.0)
    out[0, 1] = 0.0
    out[1, 0] = 1.0
    out[1, 1] = 0.0
    if x[0] > p[1]:
        out[0, 2] = 0.0


class LogRangeBadLate(LogRange):
    params = np.array([3.0, np.inf, np.inf])
    h_jit = staticmethod(log_range_h_loops_late)
    H_jit = staticmethod(log_range_H_overruns_late)

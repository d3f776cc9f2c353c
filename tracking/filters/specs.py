"""The gate of the filters: a motion and a sensor model checked once against the protocol of
:mod:`tracking.models`, handed on as plain values (:class:`MotionSpec`, :class:`SensorSpec`),
and the covariance check every entry point shares (:func:`check_spd`)."""

import math
import numbers
from typing import NamedTuple

import numpy as np

from fastcal.messages import show

__all__ = ["MotionSpec", "SensorSpec", "motion_spec", "sensor_spec", "check_spd", "as_float"]


def as_float(name, value):
    """``value`` as a float64 array; a ValueError naming ``name`` if it does not convert."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"{name} must be an array of real numbers; converting it failed: {exc}"
        raise ValueError(msg) from None


def check_spd(name, covs):
    """covs (..., n, n): finite, symmetric, positive definite; else a ValueError naming the index."""
    lead = covs.shape[:-2]

    def where(mask):
        i = int(np.flatnonzero(mask.reshape(-1))[0])
        return "" if not lead else "[" + ", ".join(str(int(j)) for j in np.unravel_index(i, lead)) + "]"

    finite = np.isfinite(covs).all(axis=(-2, -1))
    if not finite.all():
        msg = f"{name}{where(~finite)} contains NaN or inf; expected a finite symmetric positive definite covariance"
        raise ValueError(msg)
    gap = np.abs(covs - np.swapaxes(covs, -1, -2)).max(axis=(-2, -1))
    scale = np.abs(covs).max(axis=(-2, -1))
    asym = gap > 1e-10 * scale
    if asym.any():
        msg = f"{name}{where(asym)} is not symmetric; expected a symmetric positive definite covariance"
        raise ValueError(msg)
    low = np.linalg.eigvalsh(covs)[..., 0]
    bad = ~(low > 0)
    if bad.any():
        first = float(low.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]])
        msg = (
            f"{name}{where(bad)} is not positive definite (smallest eigenvalue {first:.3g}); "
            "expected a symmetric positive definite covariance"
        )
        raise ValueError(msg)


class MotionSpec(NamedTuple):
    """A motion model as the filters use it: dimension, period, ``Q``, parameters, functions."""

    n: int
    dt: float
    Q: np.ndarray
    params: np.ndarray
    f: object
    F: object
    linear: bool
    position: tuple


class SensorSpec(NamedTuple):
    """A sensor model as the filters use it: dimension, ``R``, parameters, functions, angle
    flags (``m`` bools) and the state components read."""

    m: int
    R: np.ndarray
    params: np.ndarray
    h: object
    H: object
    angles: tuple
    reads: tuple


def _require(model, role, need, optional):
    missing = [name for name in need if not hasattr(model, name)]
    if missing:
        msg = (
            f"{role} ({type(model).__name__}) has no {', '.join(missing)}; expected a {role} model "
            f"with {', '.join(need)} (and optionally {optional}), see tracking.models"
        )
        raise ValueError(msg)


def _compiled(role, functions, signature):
    for name, fn in functions:
        if fn is not None and not (callable(fn) and hasattr(fn, "py_func") and hasattr(fn, "compile")):
            msg = f"{role}.{name} must be a numba @njit function {signature}, got {type(fn).__name__}"
            raise ValueError(msg)


def _params(owner, value):
    p = as_float(f"{owner}.params", value)
    if p.ndim != 1:
        msg = f"{owner}.params has shape {p.shape}; expected a 1-D array of floats"
        raise ValueError(msg)
    return np.require(p, dtype=np.float64, requirements=["C", "W"])


def _dim(owner, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        msg = f"{owner}.ndim must be an integer >= 1, got {show(value)}"
        raise ValueError(msg)
    return int(value)


def motion_spec(motion):
    """Check a motion model against the protocol of :mod:`tracking.models`."""
    _require(motion, "motion", ("ndim", "dt", "Q", "params", "f_jit"), "F_jit, linear, position_indices")
    n = _dim("motion", motion.ndim)
    dt = motion.dt
    if not isinstance(dt, numbers.Real) or isinstance(dt, bool) or not (math.isfinite(dt) and dt > 0):
        msg = f"motion.dt must be a finite number > 0, got {show(dt)}"
        raise ValueError(msg)
    Q = as_float("motion.Q", motion.Q)
    if Q.shape != (n, n):
        msg = f"motion.Q has shape {Q.shape}; expected ({n}, {n}) for a state of dimension {n}"
        raise ValueError(msg)
    if not np.isfinite(Q).all() or np.abs(Q - Q.T).max() > 1e-10 * max(np.abs(Q).max(), 1e-300):
        msg = "motion.Q must be a finite symmetric matrix"
        raise ValueError(msg)
    f = motion.f_jit
    F = getattr(motion, "F_jit", None)
    _compiled("motion", (("f_jit", f), ("F_jit", F)), "f(x, dt, p, out)")
    position = getattr(motion, "position_indices", None)
    if position is not None:
        position = tuple(int(i) for i in position)
        if any(not 0 <= i < n for i in position):
            msg = f"motion.position_indices {position} must lie in [0, {n})"
            raise ValueError(msg)
    return MotionSpec(n, float(dt), np.ascontiguousarray(Q), _params("motion", motion.params),
                      f, F, bool(getattr(motion, "linear", False)), position)


def sensor_spec(sensor, n):
    """Check a sensor model against the protocol of :mod:`tracking.models` for a state of dimension ``n``."""
    _require(sensor, "sensor", ("ndim", "R", "params", "h_jit"), "H_jit, angles, reads")
    m = _dim("sensor", sensor.ndim)
    R = as_float("sensor.R", sensor.R)
    if R.shape != (m, m):
        msg = f"sensor.R has shape {R.shape}; expected ({m}, {m}) for a measurement of dimension {m}"
        raise ValueError(msg)
    check_spd("sensor.R", R)
    h = sensor.h_jit
    H = getattr(sensor, "H_jit", None)
    _compiled("sensor", (("h_jit", h), ("H_jit", H)), "h(x, p, out)")
    angles = tuple(getattr(sensor, "angles", ()) or ())
    if any(not isinstance(a, numbers.Integral) or not 0 <= a < m for a in angles):
        msg = f"sensor.angles {angles!r} must be measurement indices in [0, {m})"
        raise ValueError(msg)
    reads = getattr(sensor, "reads", None)
    reads = tuple(range(n)) if reads is None else tuple(int(j) for j in reads)
    if not reads or any(not 0 <= j < n for j in reads) or len(set(reads)) != len(reads):
        msg = f"sensor.reads {reads!r} must be different state indices in [0, {n}) for a state of dimension {n}"
        raise ValueError(msg)
    return SensorSpec(m, np.ascontiguousarray(R), _params("sensor", sensor.params), h, H,
                      tuple(i in angles for i in range(m)), reads)

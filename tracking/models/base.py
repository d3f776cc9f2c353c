"""The base classes of the models: numpy methods from a model's compiled functions, and the checks
the built-in models run on their parameters (the protocol is described in :mod:`tracking.models`)."""

import math
import numbers

import numpy as np

from fastcal.messages import show
from tracking.kernels import blocks as _k
from tracking.kernels.guard import bounds_checked

__all__ = ["MotionModel", "SensorModel", "wrap_angle"]


def check_real(name, value, *, positive=False, non_negative=False):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        msg = f"{name} must be a finite real number, got {show(value)}"
        raise ValueError(msg)
    if positive and not value > 0:
        msg = f"{name} must be > 0, got {show(value)}"
        raise ValueError(msg)
    if non_negative and not value >= 0:
        msg = f"{name} must be >= 0, got {show(value)}"
        raise ValueError(msg)
    return float(value)


def check_indices(name, value, length):
    try:
        out = tuple(value)
    except TypeError:
        out = None
    if (out is None or len(out) != length
            or not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) and i >= 0 for i in out)):
        msg = f"{name} must be {length} non-negative integer state indices, got {show(value)}"
        raise ValueError(msg)
    if len(set(out)) != len(out):
        msg = f"{name} must name {length} different state components, got {show(value)}"
        raise ValueError(msg)
    return tuple(int(i) for i in out)


def check_position(value, length):
    try:
        out = tuple(value)
    except TypeError:
        out = ()
    if len(out) != length:
        names = ("sx", "sy", "sz")[:length]
        msg = f"position must be {length} coordinates ({', '.join(names)}), got {show(value)}"
        raise ValueError(msg)
    return tuple(check_real(f"position[{i}]", v) for i, v in enumerate(out))


def check_dims(dims):
    if dims not in (2, 3) or isinstance(dims, bool):
        msg = f"dims must be 2 or 3 (spatial dimensions), got {show(dims)}"
        raise ValueError(msg)
    return int(dims)


def wrap_angle(a):
    """Wrap angles (array_like, radians) to (-pi, pi].

    Examples
    --------
    >>> import math
    >>> from tracking import wrap_angle
    >>> float(wrap_angle(1.5 * math.pi)) == -0.5 * math.pi, float(wrap_angle(-math.pi)) == math.pi
    (True, True)
    """
    a = np.asarray(a, dtype=np.float64)
    return np.pi - np.mod(np.pi - a, 2.0 * np.pi)


def _rows(x, n, name="x"):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0 or x.shape[-1] != n:
        msg = f"{name} has shape {x.shape}; expected (..., {n})"
        raise ValueError(msg)
    return np.ascontiguousarray(x.reshape(-1, n)), x.shape[:-1]


# Up to this many states, a model function is applied from Python, one call a state (its
# own kernel: cached for tracking's models, compiled once a process for a user's, as the
# probe compiles it anyway); beyond, map_f / map_h loop in one compiled call. Those take
# the function as an argument, which Numba cannot cache: they compile in every process
# (about 0.3-2 s a model function, measured), while a direct call costs about 2 us, so
# they pay only past a few hundred thousand states.
_DIRECT_ROWS = 100_000


def apply_f(f, X, dt, params, out):
    """``out[i] = f(X[i], dt)`` for the rows of C-contiguous ``X`` (see ``_DIRECT_ROWS``)."""
    if X.shape[0] > _DIRECT_ROWS:
        _k.map_f(f, X, dt, params, out)
        return
    for i in range(X.shape[0]):
        f(X[i], dt, params, out[i])


def apply_h(h, X, params, out):
    """``out[i] = h(X[i])`` for the rows of C-contiguous ``X`` (see ``_DIRECT_ROWS``)."""
    if X.shape[0] > _DIRECT_ROWS:
        _k.map_h(h, X, params, out)
        return
    for i in range(X.shape[0]):
        h(X[i], params, out[i])


class MotionModel:
    """Base class: numpy methods of a motion model from its compiled functions.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import ConstantVelocity, MotionModel
    >>> cv = ConstantVelocity(dt=1.0)
    >>> isinstance(cv, MotionModel)
    True
    >>> cv.transition(np.array([0.0, 1.0, 0.0, 2.0]))     # [x, vx, y, vy]
    array([1., 1., 2., 2.])
    """

    F_jit = None
    linear = False
    position_indices = None

    def transition(self, x):
        """``f(x, dt)`` for states shaped (..., n), through the compiled ``f_jit``."""
        X, lead = _rows(x, self.ndim)
        out = np.empty_like(X)
        f, dt, params = bounds_checked(self.f_jit), float(self.dt), np.asarray(self.params, dtype=np.float64)
        apply_f(f, X, dt, params, out)
        return out.reshape(lead + (self.ndim,))

    def jacobian(self, x):
        """``df/dx`` (n, n) at one state (``F_jit``, or central differences if it is None)."""
        X, _ = _rows(x, self.ndim)
        out = np.empty((self.ndim, self.ndim))
        x0, dt, params = X[0].copy(), float(self.dt), np.asarray(self.params, dtype=np.float64)
        if self.F_jit is not None:
            # called directly: its own cached kernel, where jacobian_f (a kernel taking
            # functions, which Numba cannot cache) would compile in every process
            bounds_checked(self.F_jit)(x0, dt, params, out)
        else:
            _k.jacobian_f(bounds_checked(self.f_jit), _k.no_jacobian_f, False, x0, dt, params, out)
        return out


class SensorModel:
    """Base class: numpy methods of a sensor model from its compiled functions.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import RangeBearingSensor, SensorModel
    >>> sensor = RangeBearingSensor()
    >>> isinstance(sensor, SensorModel)
    True
    >>> sensor.h(np.array([3.0, 0.0, 4.0, 0.0]))          # range, bearing
    array([5.        , 0.92729522])
    """

    H_jit = None
    angles = ()

    @property
    def reads(self):
        return None  # all state components

    def _reads(self, n):
        reads = self.reads
        return tuple(range(n)) if reads is None else tuple(reads)

    def _angle_flags(self):
        return tuple(i in tuple(self.angles) for i in range(self.ndim))

    def h(self, x):
        """Noise-free measurement for states shaped (..., n), through the compiled ``h_jit``."""
        x = np.asarray(x, dtype=np.float64)
        n = x.shape[-1] if x.ndim else 0
        X, lead = _rows(x, n)
        out = np.empty((X.shape[0], self.ndim))
        h, params = bounds_checked(self.h_jit), np.asarray(self.params, dtype=np.float64)
        apply_h(h, X, params, out)
        return out.reshape(lead + (self.ndim,))

    def jacobian(self, x):
        """``dh/dx`` (m, n) at one state (``H_jit``, or central differences if it is None)."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        n = x.shape[-1]
        out = np.empty((self.ndim, n))
        H, x0, params = self.H_jit, x.reshape(n).copy(), np.asarray(self.params, dtype=np.float64)
        if H is not None:
            # called directly, as MotionModel.jacobian calls F_jit: its own cached kernel, where
            # jacobian_h (a kernel taking functions, which Numba cannot cache) compiles in every
            # process (about 1-2.5 s for each sensor, measured). A sensor that reads only
            # ``reads`` has zero elsewhere, whatever H wrote there (as jacobian_h does).
            out[:, :] = 0.0
            bounds_checked(H)(x0, params, out)
            out[:, [j for j in range(n) if j not in self._reads(n)]] = 0.0
        else:
            _k.jacobian_h(bounds_checked(self.h_jit), _k.no_jacobian_h, False, x0, params, out,
                          self._reads(n), self._angle_flags())
        return out

    def residual(self, a, b):
        """``a - b`` with the angle components wrapped to (-pi, pi]; shapes (..., m)."""
        d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
        for i in self.angles:
            d[..., i] = wrap_angle(d[..., i])
        return d

"""Motion and sensor models: small immutable objects with numpy methods.

The filters hand each model's parameters to compiled kernels
(:mod:`tracking._kernels`); the methods here are the same equations in numpy,
for users, plots and tests.
"""

from dataclasses import dataclass
import math
import numbers

import numpy as np

from tracking import _kernels as _k

__all__ = ["ConstantVelocity", "RangeBearingSensor", "PositionSensor", "wrap_angle"]


def _check_real(name, value, *, positive=False, non_negative=False):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        msg = f"{name} must be a finite real number, got {value!r}"
        raise ValueError(msg)
    if positive and not value > 0:
        msg = f"{name} must be > 0, got {value!r}"
        raise ValueError(msg)
    if non_negative and not value >= 0:
        msg = f"{name} must be >= 0, got {value!r}"
        raise ValueError(msg)
    return float(value)


def wrap_angle(a):
    """Wrap angles (array_like, radians) to (-pi, pi]."""
    a = np.asarray(a, dtype=np.float64)
    return np.pi - np.mod(np.pi - a, 2.0 * np.pi)


@dataclass(frozen=True)
class ConstantVelocity:
    """2-D constant-velocity motion, state ``[x, vx, y, vy]``.

    Parameters
    ----------
    q : float, default 0.01
        Intensity (power spectral density) of the white-noise acceleration, m^2/s^3.
    dt : float, default 1.0
        Sampling period in seconds, > 0.

    Notes
    -----
    ``x_{k+1} = F x_k + w_k``, ``w_k ~ N(0, Q)`` with, per axis,
    ``F = [[1, dt], [0, 1]]`` and ``Q = q [[dt^3/3, dt^2/2], [dt^2/2, dt]]``.

    Examples
    --------
    >>> from tracking.models import ConstantVelocity
    >>> ConstantVelocity(q=0.01, dt=1.0).transition([0.0, 1.0, 0.0, 2.0]).tolist()
    [1.0, 1.0, 2.0, 2.0]
    """

    q: float = 0.01
    dt: float = 1.0

    ndim = 4

    def __post_init__(self):
        object.__setattr__(self, "q", _check_real("q", self.q, non_negative=True))
        object.__setattr__(self, "dt", _check_real("dt", self.dt, positive=True))

    def _matrices(self):
        F = np.empty((4, 4))
        Q = np.empty((4, 4))
        _k.cv_matrices(self.dt, self.q, F, Q)
        return F, Q

    @property
    def F(self):
        """Transition matrix (4, 4)."""
        return self._matrices()[0]

    @property
    def Q(self):
        """Process noise covariance (4, 4)."""
        return self._matrices()[1]

    def transition(self, x):
        """``F x`` for states shaped (..., 4)."""
        return np.asarray(x, dtype=np.float64) @ self.F.T

    def jacobian(self, x=None):
        """``dF x / dx = F`` (the model is linear)."""
        return self.F


@dataclass(frozen=True)
class RangeBearingSensor:
    """Range and bearing from a sensor at ``position``.

    Parameters
    ----------
    sigma_r : float, default 0.1
        Range noise standard deviation in metres, > 0.
    sigma_theta : float, default ``radians(5)``
        Bearing noise standard deviation in radians, > 0.
    position : (float, float), default (0, 0)
        Sensor position ``(sx, sy)``.

    Notes
    -----
    ``h(x) = [sqrt(dx^2 + dy^2), atan2(dy, dx)]`` with ``dx = x - sx``,
    ``dy = y - sy``; bearing residuals are wrapped to (-pi, pi].

    Examples
    --------
    >>> import numpy as np
    >>> from tracking.models import RangeBearingSensor
    >>> s = RangeBearingSensor(sigma_r=0.1, sigma_theta=np.radians(5))
    >>> np.round(s.h([0.0, 0.0, 2.0, 0.0]), 4).tolist()
    [2.0, 1.5708]
    """

    sigma_r: float = 0.1
    sigma_theta: float = math.radians(5.0)
    position: tuple = (0.0, 0.0)

    ndim = 2
    kind = _k.SENSOR_RANGE_BEARING

    def __post_init__(self):
        object.__setattr__(self, "sigma_r", _check_real("sigma_r", self.sigma_r, positive=True))
        object.__setattr__(self, "sigma_theta", _check_real("sigma_theta", self.sigma_theta, positive=True))
        try:
            sx, sy = self.position
        except (TypeError, ValueError):
            msg = f"position must be a pair (sx, sy), got {self.position!r}"
            raise ValueError(msg) from None
        object.__setattr__(
            self, "position", (_check_real("position[0]", sx), _check_real("position[1]", sy))
        )

    @property
    def params(self):
        """Kernel parameters ``[sx, sy, sigma_r, sigma_theta]``."""
        return np.array([self.position[0], self.position[1], self.sigma_r, self.sigma_theta])

    @property
    def R(self):
        """Measurement noise covariance (2, 2)."""
        return np.diag([self.sigma_r ** 2, self.sigma_theta ** 2])

    def h(self, x):
        """Noise-free (range, bearing) for states shaped (..., 4)."""
        x = np.asarray(x, dtype=np.float64)
        dx = x[..., 0] - self.position[0]
        dy = x[..., 2] - self.position[1]
        return np.stack([np.hypot(dx, dy), np.arctan2(dy, dx)], axis=-1)

    def jacobian(self, x):
        """Analytic Jacobian ``dh/dx`` (2, 4) at one state."""
        H = np.empty((2, 4))
        _k.measure_jacobian(self.kind, self.params, np.asarray(x, dtype=np.float64), H)
        return H

    def residual(self, a, b):
        """``a - b`` with the bearing wrapped to (-pi, pi]; shapes (..., 2)."""
        d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
        d[..., 1] = wrap_angle(d[..., 1])
        return d


@dataclass(frozen=True)
class PositionSensor:
    """Linear sensor measuring ``(x, y)`` with noise ``sigma`` on each axis.

    With :class:`ConstantVelocity` it makes a linear-Gaussian model, on which
    both filters reduce to the Kalman filter.
    """

    sigma: float = 1.0

    ndim = 2
    kind = _k.SENSOR_POSITION

    def __post_init__(self):
        object.__setattr__(self, "sigma", _check_real("sigma", self.sigma, positive=True))

    @property
    def params(self):
        return np.array([0.0, 0.0, self.sigma, self.sigma])

    @property
    def R(self):
        return np.eye(2) * self.sigma ** 2

    @property
    def H(self):
        H = np.zeros((2, 4))
        H[0, 0] = 1.0
        H[1, 2] = 1.0
        return H

    def h(self, x):
        x = np.asarray(x, dtype=np.float64)
        return np.stack([x[..., 0], x[..., 2]], axis=-1)

    def jacobian(self, x=None):
        return self.H

    def residual(self, a, b):
        return np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)

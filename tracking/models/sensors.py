"""The built-in sensor models: positions, and range and bearing (with elevation, or range rate).

Each is a frozen dataclass of its parameters over the compiled physics of
:mod:`tracking.models.physics`; the range-bearing family shares its checks, its
parameter vector and its diagonal ``R`` (:class:`_RangeBearingFamily`).
"""

from dataclasses import dataclass
import math

import numpy as np

from tracking.models import physics
from tracking.models.base import SensorModel, check_indices, check_position, check_real

__all__ = ["PositionSensor", "RangeBearingSensor", "RangeBearingElevationSensor", "RangeBearingRangeRateSensor"]


@dataclass(frozen=True)
class PositionSensor(SensorModel):
    """Linear sensor measuring the position components ``mapping``, noise ``sigma`` on each.

    With :class:`ConstantVelocity` it makes a linear-Gaussian model, on which
    both filters reduce to the Kalman filter.

    Parameters
    ----------
    sigma : float, default 1.0
    mapping : tuple of int, default (0, 2)
        State indices measured (``(0, 2, 4)`` for a 3-D constant-velocity state).

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import PositionSensor
    >>> PositionSensor().h(np.array([1.0, 2.0, 3.0, 4.0]))
    array([1., 3.])
    """

    sigma: float = 1.0
    mapping: tuple = (0, 2)

    h_jit = staticmethod(physics.position_h)
    H_jit = staticmethod(physics.position_H)

    def __post_init__(self):
        object.__setattr__(self, "sigma", check_real("sigma", self.sigma, positive=True))
        try:
            length = len(self.mapping)
        except TypeError:
            length = 0
        object.__setattr__(self, "mapping", check_indices("mapping", self.mapping, max(length, 1)))

    @property
    def ndim(self):
        return len(self.mapping)

    @property
    def reads(self):
        return self.mapping

    @property
    def params(self):
        return np.array(self.mapping, dtype=np.float64)

    @property
    def R(self):
        return np.eye(self.ndim) * self.sigma ** 2

    @property
    def H(self):
        """Measurement matrix (m, n) for the smallest state holding ``mapping``."""
        H = np.zeros((self.ndim, max(self.mapping) + 2))
        for a, j in enumerate(self.mapping):
            H[a, j] = 1.0
        return H


class _RangeBearingFamily(SensorModel):
    """A sensor at ``position`` (``_space`` coordinates) seeing the target's ``mapping``
    components: one measurement component per noise standard deviation in ``_sigmas`` (> 0,
    independent), the bearing second."""

    _space = 2
    _sigmas = ("sigma_r", "sigma_theta")
    angles = (1,)

    @property
    def ndim(self):
        return len(self._sigmas)

    def __post_init__(self):
        for name in self._sigmas:
            object.__setattr__(self, name, check_real(name, getattr(self, name), positive=True))
        object.__setattr__(self, "position", check_position(self.position, self._space))
        object.__setattr__(self, "mapping", check_indices("mapping", self.mapping, self._space))

    @property
    def reads(self):
        return self.mapping

    @property
    def params(self):
        return np.array([*self.mapping, *self.position], dtype=np.float64)

    @property
    def R(self):
        """Measurement noise covariance (m, m)."""
        return np.diag([getattr(self, name) ** 2 for name in self._sigmas])


@dataclass(frozen=True)
class RangeBearingSensor(_RangeBearingFamily):
    """Range and bearing from a sensor at ``position``.

    Parameters
    ----------
    sigma_r : float, default 0.1
        Range noise standard deviation in metres, > 0.
    sigma_theta : float, default ``radians(5)``
        Bearing noise standard deviation in radians, > 0.
    position : (float, float), default (0, 0)
        Sensor position ``(sx, sy)``.
    mapping : (int, int), default (0, 2)
        State indices of the target's x and y.

    Notes
    -----
    ``h(x) = [sqrt(dx^2 + dy^2), atan2(dy, dx)]`` with ``dx = x - sx``,
    ``dy = y - sy``; bearing residuals are wrapped to (-pi, pi]. With the target
    on the sensor the Jacobian is NaN: the filters skip that update and report it.

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
    mapping: tuple = (0, 2)

    h_jit = staticmethod(physics.range_bearing_h)
    H_jit = staticmethod(physics.range_bearing_H)


@dataclass(frozen=True)
class RangeBearingElevationSensor(_RangeBearingFamily):
    """3-D radar: range, bearing (azimuth in x-y) and elevation from a sensor at ``position``.

    Parameters
    ----------
    sigma_r : float, default 1.0
        Range noise standard deviation (m).
    sigma_theta, sigma_phi : float, default ``radians(1)``
        Bearing and elevation noise standard deviations (rad).
    position : (float, float, float), default (0, 0, 0)
    mapping : (int, int, int), default (0, 2, 4)
        State indices of x, y and z.

    Notes
    -----
    ``h(x) = [r, atan2(dy, dx), atan2(dz, rho)]`` with ``rho = sqrt(dx^2 + dy^2)``
    and ``r = sqrt(rho^2 + dz^2)``; bearing and elevation are angles. The
    Jacobian is NaN on the sensor's vertical axis (``rho = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from tracking.models import RangeBearingElevationSensor
    >>> s = RangeBearingElevationSensor()
    >>> np.round(s.h([3.0, 0.0, 0.0, 0.0, 4.0, 0.0]), 4).tolist()
    [5.0, 0.0, 0.9273]
    """

    sigma_r: float = 1.0
    sigma_theta: float = math.radians(1.0)
    sigma_phi: float = math.radians(1.0)
    position: tuple = (0.0, 0.0, 0.0)
    mapping: tuple = (0, 2, 4)

    angles = (1, 2)
    h_jit = staticmethod(physics.range_bearing_elevation_h)
    H_jit = staticmethod(physics.range_bearing_elevation_H)
    _space = 3
    _sigmas = ("sigma_r", "sigma_theta", "sigma_phi")


@dataclass(frozen=True)
class RangeBearingRangeRateSensor(_RangeBearingFamily):
    """Range, bearing and range rate (Doppler) from a sensor at ``position``.

    Parameters
    ----------
    sigma_r : float, default 0.1
    sigma_theta : float, default ``radians(5)``
    sigma_rdot : float, default 0.1
        Range-rate noise standard deviation (m/s).
    position : (float, float), default (0, 0)
    mapping : (int, int), default (0, 2)
        State indices of x and y.
    velocity_mapping : (int, int), default (1, 3)
        State indices of vx and vy.

    Notes
    -----
    ``h(x) = [r, atan2(dy, dx), (dx vx + dy vy) / r]``.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking.models import RangeBearingRangeRateSensor
    >>> np.round(RangeBearingRangeRateSensor().h([3.0, 1.0, 4.0, 0.0]), 4).tolist()
    [5.0, 0.9273, 0.6]
    """

    sigma_r: float = 0.1
    sigma_theta: float = math.radians(5.0)
    sigma_rdot: float = 0.1
    position: tuple = (0.0, 0.0)
    mapping: tuple = (0, 2)
    velocity_mapping: tuple = (1, 3)

    h_jit = staticmethod(physics.range_bearing_rate_h)
    H_jit = staticmethod(physics.range_bearing_rate_H)
    _sigmas = ("sigma_r", "sigma_theta", "sigma_rdot")

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "velocity_mapping", check_indices("velocity_mapping", self.velocity_mapping, 2))
        if set(self.mapping) & set(self.velocity_mapping):
            msg = (f"mapping {self.mapping} and velocity_mapping {self.velocity_mapping} overlap; "
                   "expected different state components")
            raise ValueError(msg)

    @property
    def reads(self):
        return tuple(sorted(self.mapping + self.velocity_mapping))

    @property
    def params(self):
        return np.array([*self.mapping, *self.velocity_mapping, *self.position], dtype=np.float64)

"""Motion and sensor models: physics written once as compiled functions.

A model is a small object; the filters read a few attributes from it (the
*protocol*) and compile one batched kernel per model pair from its ``@njit``
functions. The numpy methods (``transition``, ``h``, ``jacobian``,
``residual``) call the same compiled functions, for users, plots and tests.

Motion model protocol
---------------------
``ndim``            state dimension ``n``.
``dt``              sampling period (s).
``Q``               process noise covariance ``(n, n)`` over one period ``dt``.
``params``          1-D float array handed to ``f_jit`` / ``F_jit`` (may be empty).
``f_jit``           ``@njit`` function ``f(x, dt, p, out)``: writes the predicted state.
``F_jit``           ``@njit`` function ``F(x, dt, p, out)``: writes the Jacobian
                    ``df/dx`` (n, n); None for central differences.
``linear``          optional, default False: ``f`` is linear (its Jacobian does not
                    depend on ``x``); the UKF then predicts with ``F P F^T + Q``.
``position_indices`` optional: the state components that are positions (RMSE).

Sensor model protocol
---------------------
``ndim``            measurement dimension ``m``.
``R``               measurement noise covariance ``(m, m)``.
``params``          1-D float array handed to ``h_jit`` / ``H_jit``.
``h_jit``           ``@njit`` function ``h(x, p, out)``: writes the noise-free measurement.
``H_jit``           ``@njit`` function ``H(x, p, out)``: writes ``dh/dx`` at the columns
                    in ``reads``; None for central differences.
``angles``          optional, default (): indices of measurement components that are
                    angles in radians (wrapped to (-pi, pi] in residuals and means).
``reads``           optional, default all: the state components ``h`` depends on.

Compile the functions with ``@njit(error_model="numpy")`` so that a division by
zero gives inf / NaN, which the filters report as singular geometry; with
Numba's default error model it raises ``ZeroDivisionError`` instead. Define them
at module level in an importable module so that their kernel is cached on disk
(see :mod:`tracking._factory`).

Subclass :class:`MotionModel` / :class:`SensorModel` to get the numpy methods;
the filters need only the attributes above (duck typing).

Examples
--------
A sensor measuring the squared distance to the origin, with a numerical Jacobian:

>>> import numpy as np
>>> from numba import njit
>>> from tracking.models import SensorModel
>>> @njit(error_model="numpy")
... def sq_h(x, p, out):
...     out[0] = x[0] ** 2 + x[2] ** 2
>>> class SquaredRange(SensorModel):
...     ndim = 1
...     R = np.eye(1)
...     params = np.empty(0)
...     h_jit = staticmethod(sq_h)
...     reads = (0, 2)
>>> SquaredRange().h([3.0, 0.0, 4.0, 0.0]).tolist()
[25.0]
>>> np.round(SquaredRange().jacobian([3.0, 0.0, 4.0, 0.0]), 6).tolist()
[[6.0, 0.0, 8.0, 0.0]]
"""

from dataclasses import dataclass
import math
import numbers

import numpy as np

from fastcal.messages import show
from tracking import _kernels as _k
from tracking._guard import bounds_checked

__all__ = [
    "MotionModel",
    "SensorModel",
    "ConstantVelocity",
    "ConstantAcceleration",
    "CoordinatedTurn",
    "PositionSensor",
    "RangeBearingSensor",
    "RangeBearingElevationSensor",
    "RangeBearingRangeRateSensor",
    "wrap_angle",
]


def _check_real(name, value, *, positive=False, non_negative=False):
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


def _check_indices(name, value, length):
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


def _check_position(value, length):
    try:
        out = tuple(value)
    except TypeError:
        out = ()
    if len(out) != length:
        names = ("sx", "sy", "sz")[:length]
        msg = f"position must be {length} coordinates ({', '.join(names)}), got {show(value)}"
        raise ValueError(msg)
    return tuple(_check_real(f"position[{i}]", v) for i, v in enumerate(out))


def _check_dims(dims):
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
        _k.map_f(bounds_checked(self.f_jit), X, float(self.dt), np.asarray(self.params, dtype=np.float64), out)
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
        _k.map_h(bounds_checked(self.h_jit), X, np.asarray(self.params, dtype=np.float64), out)
        return out.reshape(lead + (self.ndim,))

    def jacobian(self, x):
        """``dh/dx`` (m, n) at one state (``H_jit``, or central differences if it is None)."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        n = x.shape[-1]
        out = np.empty((self.ndim, n))
        H = self.H_jit
        _k.jacobian_h(bounds_checked(self.h_jit), bounds_checked(H) if H is not None else _k.no_jacobian_h,
                      H is not None, x.reshape(n).copy(), np.asarray(self.params, dtype=np.float64), out,
                      self._reads(n), self._angle_flags())
        return out

    def residual(self, a, b):
        """``a - b`` with the angle components wrapped to (-pi, pi]; shapes (..., m)."""
        d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
        for i in self.angles:
            d[..., i] = wrap_angle(d[..., i])
        return d


def _white_noise_blocks(q, dt, order):
    """Per-axis process noise of a white-noise derivative of the given order (1: acceleration).

    Each entry is ``q * dt**k / c`` evaluated left to right, as the compiled
    constant-velocity matrices always were (same rounding, same numbers).
    """
    if order == 1:
        return np.array([[q * dt ** 3 / 3.0, q * dt ** 2 / 2.0], [q * dt ** 2 / 2.0, q * dt]])
    return np.array([
        [q * dt ** 5 / 20.0, q * dt ** 4 / 8.0, q * dt ** 3 / 6.0],
        [q * dt ** 4 / 8.0, q * dt ** 3 / 3.0, q * dt ** 2 / 2.0],
        [q * dt ** 3 / 6.0, q * dt ** 2 / 2.0, q * dt],
    ])


@dataclass(frozen=True)
class ConstantVelocity(MotionModel):
    """Constant velocity in 2-D ``[x, vx, y, vy]`` or 3-D ``[x, vx, y, vy, z, vz]``.

    Parameters
    ----------
    q : float, default 0.01
        Intensity (power spectral density) of the white-noise acceleration, m^2/s^3.
    dt : float, default 1.0
        Sampling period in seconds, > 0.
    dims : {2, 3}, default 2
        Spatial dimensions.

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
    dims: int = 2

    f_jit = staticmethod(_k.cv_f)
    F_jit = staticmethod(_k.cv_F)
    linear = True

    def __post_init__(self):
        object.__setattr__(self, "q", _check_real("q", self.q, non_negative=True))
        object.__setattr__(self, "dt", _check_real("dt", self.dt, positive=True))
        object.__setattr__(self, "dims", _check_dims(self.dims))

    @property
    def ndim(self):
        return 2 * self.dims

    @property
    def params(self):
        return np.empty(0)

    @property
    def position_indices(self):
        return (0, 2, 4)[: self.dims]

    @property
    def velocity_indices(self):
        return (1, 3, 5)[: self.dims]

    def process_noise(self, dt):
        """``Q`` over a period ``dt``."""
        Q = np.zeros((self.ndim, self.ndim))
        block = _white_noise_blocks(self.q, dt, 1)
        for a in range(self.dims):
            Q[2 * a:2 * a + 2, 2 * a:2 * a + 2] = block
        return Q

    @property
    def F(self):
        """Transition matrix (n, n)."""
        return self.jacobian(np.zeros(self.ndim))

    @property
    def Q(self):
        """Process noise covariance (n, n) over one period."""
        return self.process_noise(self.dt)


@dataclass(frozen=True)
class ConstantAcceleration(MotionModel):
    """Constant acceleration, per axis ``[p, v, a]``: 2-D ``[x, vx, ax, y, vy, ay]`` or 3-D.

    Parameters
    ----------
    q : float, default 0.01
        Intensity of the white-noise jerk, m^2/s^5.
    dt : float, default 1.0
    dims : {2, 3}, default 2

    Notes
    -----
    Per axis ``F = [[1, dt, dt^2/2], [0, 1, dt], [0, 0, 1]]`` and
    ``Q = q [[dt^5/20, dt^4/8, dt^3/6], [dt^4/8, dt^3/3, dt^2/2], [dt^3/6, dt^2/2, dt]]``.

    Examples
    --------
    >>> from tracking.models import ConstantAcceleration
    >>> ConstantAcceleration(dt=2.0).transition([0.0, 1.0, 0.5, 0.0, 0.0, 0.0]).tolist()
    [3.0, 2.0, 0.5, 0.0, 0.0, 0.0]
    """

    q: float = 0.01
    dt: float = 1.0
    dims: int = 2

    f_jit = staticmethod(_k.ca_f)
    F_jit = staticmethod(_k.ca_F)
    linear = True

    def __post_init__(self):
        object.__setattr__(self, "q", _check_real("q", self.q, non_negative=True))
        object.__setattr__(self, "dt", _check_real("dt", self.dt, positive=True))
        object.__setattr__(self, "dims", _check_dims(self.dims))

    @property
    def ndim(self):
        return 3 * self.dims

    @property
    def params(self):
        return np.empty(0)

    @property
    def position_indices(self):
        return (0, 3, 6)[: self.dims]

    @property
    def velocity_indices(self):
        return (1, 4, 7)[: self.dims]

    def process_noise(self, dt):
        Q = np.zeros((self.ndim, self.ndim))
        block = _white_noise_blocks(self.q, dt, 2)
        for a in range(self.dims):
            Q[3 * a:3 * a + 3, 3 * a:3 * a + 3] = block
        return Q

    @property
    def F(self):
        return self.jacobian(np.zeros(self.ndim))

    @property
    def Q(self):
        return self.process_noise(self.dt)


@dataclass(frozen=True)
class CoordinatedTurn(MotionModel):
    """Coordinated turn with unknown rate: 2-D ``[x, vx, y, vy, omega]``, 3-D ``[x, vx, y, vy, z, vz, omega]``.

    The target turns in the x-y plane at rate ``omega`` (rad/s, a state component),
    keeping its speed; in 3-D the height moves at constant velocity. Nonlinear:
    the UKF sends its sigma points through ``f``, the EKF uses the analytic Jacobian.

    Parameters
    ----------
    q : float, default 0.01
        White-noise acceleration intensity on each axis, m^2/s^3.
    q_turn : float, default 1e-4
        Intensity of the white noise on the turn rate, rad^2/s^3.
    dt : float, default 1.0
    dims : {2, 3}, default 2

    Notes
    -----
    With ``a = sin(omega dt)/omega`` and ``b = (1 - cos(omega dt))/omega``:
    ``x' = x + a vx - b vy``, ``y' = y + b vx + a vy``,
    ``[vx', vy'] = rotation(omega dt) [vx, vy]``, ``omega' = omega``
    (Bar-Shalom, Li and Kirubarajan, *Estimation with Applications to Tracking
    and Navigation*, 11.7). Near ``omega = 0`` the coefficients use their series.
    ``Q``: per axis ``q [[dt^3/3, dt^2/2], [dt^2/2, dt]]``, and ``q_turn dt`` on omega.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking.models import CoordinatedTurn
    >>> x = CoordinatedTurn(dt=1.0).transition([0.0, 1.0, 0.0, 0.0, np.pi / 2])
    >>> np.round(x, 6).tolist()  # a quarter turn: the velocity now points along +y
    [0.63662, 0.0, 0.63662, 1.0, 1.570796]
    """

    q: float = 0.01
    q_turn: float = 1e-4
    dt: float = 1.0
    dims: int = 2

    f_jit = staticmethod(_k.ct_f)
    F_jit = staticmethod(_k.ct_F)
    linear = False

    def __post_init__(self):
        object.__setattr__(self, "q", _check_real("q", self.q, non_negative=True))
        object.__setattr__(self, "q_turn", _check_real("q_turn", self.q_turn, non_negative=True))
        object.__setattr__(self, "dt", _check_real("dt", self.dt, positive=True))
        object.__setattr__(self, "dims", _check_dims(self.dims))

    @property
    def ndim(self):
        return 2 * self.dims + 1

    @property
    def params(self):
        return np.empty(0)

    @property
    def position_indices(self):
        return (0, 2, 4)[: self.dims]

    @property
    def velocity_indices(self):
        return (1, 3, 5)[: self.dims]

    def process_noise(self, dt):
        Q = np.zeros((self.ndim, self.ndim))
        block = _white_noise_blocks(self.q, dt, 1)
        for a in range(self.dims):
            Q[2 * a:2 * a + 2, 2 * a:2 * a + 2] = block
        Q[-1, -1] = self.q_turn * dt
        return Q

    @property
    def Q(self):
        return self.process_noise(self.dt)


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

    h_jit = staticmethod(_k.position_h)
    H_jit = staticmethod(_k.position_H)

    def __post_init__(self):
        object.__setattr__(self, "sigma", _check_real("sigma", self.sigma, positive=True))
        try:
            length = len(self.mapping)
        except TypeError:
            length = 0
        object.__setattr__(self, "mapping", _check_indices("mapping", self.mapping, max(length, 1)))

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


@dataclass(frozen=True)
class RangeBearingSensor(SensorModel):
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

    ndim = 2
    angles = (1,)
    h_jit = staticmethod(_k.range_bearing_h)
    H_jit = staticmethod(_k.range_bearing_H)

    def __post_init__(self):
        object.__setattr__(self, "sigma_r", _check_real("sigma_r", self.sigma_r, positive=True))
        object.__setattr__(self, "sigma_theta", _check_real("sigma_theta", self.sigma_theta, positive=True))
        object.__setattr__(self, "position", _check_position(self.position, 2))
        object.__setattr__(self, "mapping", _check_indices("mapping", self.mapping, 2))

    @property
    def reads(self):
        return self.mapping

    @property
    def params(self):
        return np.array([*self.mapping, *self.position], dtype=np.float64)

    @property
    def R(self):
        """Measurement noise covariance (2, 2)."""
        return np.diag([self.sigma_r ** 2, self.sigma_theta ** 2])


@dataclass(frozen=True)
class RangeBearingElevationSensor(SensorModel):
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

    ndim = 3
    angles = (1, 2)
    h_jit = staticmethod(_k.range_bearing_elevation_h)
    H_jit = staticmethod(_k.range_bearing_elevation_H)

    def __post_init__(self):
        for name in ("sigma_r", "sigma_theta", "sigma_phi"):
            object.__setattr__(self, name, _check_real(name, getattr(self, name), positive=True))
        object.__setattr__(self, "position", _check_position(self.position, 3))
        object.__setattr__(self, "mapping", _check_indices("mapping", self.mapping, 3))

    @property
    def reads(self):
        return self.mapping

    @property
    def params(self):
        return np.array([*self.mapping, *self.position], dtype=np.float64)

    @property
    def R(self):
        return np.diag([self.sigma_r ** 2, self.sigma_theta ** 2, self.sigma_phi ** 2])


@dataclass(frozen=True)
class RangeBearingRangeRateSensor(SensorModel):
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

    ndim = 3
    angles = (1,)
    h_jit = staticmethod(_k.range_bearing_rate_h)
    H_jit = staticmethod(_k.range_bearing_rate_H)

    def __post_init__(self):
        for name in ("sigma_r", "sigma_theta", "sigma_rdot"):
            object.__setattr__(self, name, _check_real(name, getattr(self, name), positive=True))
        object.__setattr__(self, "position", _check_position(self.position, 2))
        object.__setattr__(self, "mapping", _check_indices("mapping", self.mapping, 2))
        object.__setattr__(self, "velocity_mapping", _check_indices("velocity_mapping", self.velocity_mapping, 2))
        if set(self.mapping) & set(self.velocity_mapping):
            msg = f"mapping {self.mapping} and velocity_mapping {self.velocity_mapping} overlap; expected different state components"
            raise ValueError(msg)

    @property
    def reads(self):
        return tuple(sorted(self.mapping + self.velocity_mapping))

    @property
    def params(self):
        return np.array([*self.mapping, *self.velocity_mapping, *self.position], dtype=np.float64)

    @property
    def R(self):
        return np.diag([self.sigma_r ** 2, self.sigma_theta ** 2, self.sigma_rdot ** 2])

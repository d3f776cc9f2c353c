"""The built-in motion models: constant velocity, constant acceleration and a coordinated turn.

Each is a frozen dataclass of its parameters over the compiled physics of
:mod:`tracking.models.physics`; what they share (the per-axis state layout, the
checks of ``q``, ``dt`` and ``dims``, the white-noise ``Q``) is written once, in
:class:`_PerAxisMotion`, and what the two linear ones share (their parameters and ``F``)
in :class:`_LinearPerAxisMotion`.
"""

from dataclasses import dataclass

import numpy as np

from tracking.models import physics
from tracking.models.base import MotionModel, check_dims, check_real

__all__ = ["ConstantVelocity", "ConstantAcceleration", "CoordinatedTurn"]


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


class _PerAxisMotion(MotionModel):
    """A state of ``_axis`` components per spatial axis (position, velocity, ...), ``dims``
    axes one after another, then ``_extra`` components (a turn rate).

    White noise drives the highest derivative of each axis with intensity ``q``
    (``_white_noise_blocks``); the intensities named in ``_intensities`` must be
    >= 0, ``dt`` > 0 and ``dims`` 2 or 3.
    """

    _axis = 2
    _extra = 0
    _intensities = ("q",)

    def __post_init__(self):
        for name in self._intensities:
            object.__setattr__(self, name, check_real(name, getattr(self, name), non_negative=True))
        object.__setattr__(self, "dt", check_real("dt", self.dt, positive=True))
        object.__setattr__(self, "dims", check_dims(self.dims))

    @property
    def ndim(self):
        return self._axis * self.dims + self._extra

    @property
    def params(self):
        return np.empty(0)

    @property
    def position_indices(self):
        return tuple(self._axis * a for a in range(self.dims))

    @property
    def velocity_indices(self):
        return tuple(self._axis * a + 1 for a in range(self.dims))

    def process_noise(self, dt):
        """``Q`` over a period ``dt``."""
        Q = np.zeros((self.ndim, self.ndim))
        block = _white_noise_blocks(self.q, dt, self._axis - 1)
        b = self._axis
        for a in range(self.dims):
            Q[b * a:b * a + b, b * a:b * a + b] = block
        return Q

    @property
    def Q(self):
        """Process noise covariance (n, n) over one period."""
        return self.process_noise(self.dt)


@dataclass(frozen=True)
class _LinearPerAxisMotion(_PerAxisMotion):
    """The linear per-axis models: their parameters, and ``F`` (their Jacobian, the same everywhere)."""

    q: float = 0.01
    dt: float = 1.0
    dims: int = 2

    linear = True

    @property
    def F(self):
        """Transition matrix (n, n)."""
        return self.jacobian(np.zeros(self.ndim))


@dataclass(frozen=True)
class ConstantVelocity(_LinearPerAxisMotion):
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

    f_jit = staticmethod(physics.cv_f)
    F_jit = staticmethod(physics.cv_F)


@dataclass(frozen=True)
class ConstantAcceleration(_LinearPerAxisMotion):
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

    f_jit = staticmethod(physics.ca_f)
    F_jit = staticmethod(physics.ca_F)
    _axis = 3


@dataclass(frozen=True)
class CoordinatedTurn(_PerAxisMotion):
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

    f_jit = staticmethod(physics.ct_f)
    F_jit = staticmethod(physics.ct_F)
    linear = False
    _extra = 1
    _intensities = ("q", "q_turn")

    def process_noise(self, dt):
        """``Q`` over a period ``dt``."""
        Q = super().process_noise(dt)
        Q[-1, -1] = self.q_turn * dt
        return Q

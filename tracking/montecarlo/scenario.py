"""Seeded Monte Carlo scenarios: truths, measurements and initial estimates, for any model pair.

Three named scenarios ship (:func:`scenario_names`, :func:`make_scenario`):
today's 2-D range-bearing case, a 3-D radar (range, bearing, elevation) and a
manoeuvring target in a coordinated turn seen with range, bearing and range
rate. A user scenario is ``Scenario(motion=..., sensor=..., truth0=..., P0=...)``.
"""

from dataclasses import dataclass, fields
import math
import numbers
from typing import NamedTuple

import numpy as np

from fastcal.messages import show
from tracking.filters.specs import check_spd, motion_spec, sensor_spec
from tracking.models import (
    ConstantVelocity,
    CoordinatedTurn,
    RangeBearingElevationSensor,
    RangeBearingRangeRateSensor,
    RangeBearingSensor,
    wrap_angle,
)
from tracking.models.base import apply_f, apply_h

__all__ = ["Scenario", "Simulation", "simulate", "make_scenario", "scenario_names", "SCENARIOS"]


MAX_PARAM = 1e100  # scale parameters enter squared (and squared again in covariances)


@dataclass(frozen=True, eq=False)
class Scenario:
    """Parameters of a Monte Carlo tracking scenario.

    The default is the paper's motivating case (Sumler et al., section III-A): an
    accurate range and a coarse bearing, so the measurement likelihood is a
    thin banana. A sensor at the origin sees a target starting at range 20 m
    moving tangentially at 1 m/s; dt = 1 s, q = 0.01, sigma_r = 0.1 m,
    sigma_theta = 5 deg, 50 steps.

    Parameters
    ----------
    runs, steps : int
        Monte Carlo runs (>= 2) and time steps (>= 1).
    seed : int
        Seed of the numpy random generator; equal seeds give equal data.
    dt, q : float
        Sampling period (s) and white-noise acceleration intensity (m^2/s^3).
    sigma_r, sigma_theta_deg : float
        Range (m) and bearing (degrees) noise standard deviations.
    sensor_x, sensor_y : float
        Sensor position (m).
    range0, speed : float
        Initial range from the sensor along +x (m) and tangential speed along +y (m/s).
    p0_pos, p0_vel : float
        Initial estimate standard deviations for position (m) and velocity (m/s);
        the estimate is drawn from ``N(truth_0, P0)``, ``P0 = diag(p0_pos^2, p0_vel^2, ...)``.
    missing : float
        Probability that a measurement is missed (NaN: predict only), in [0, 1).
    motion, sensor : model objects, optional
        Any motion / sensor models (see :mod:`tracking.models`); they replace the
        2-D constant-velocity and range-bearing models built from the parameters
        above (``dt`` is then the motion model's).
    truth0 : array_like (n,), optional
        Initial true state; required with a custom ``motion``.
    P0 : array_like (n, n), optional
        Initial covariance (estimates are drawn from ``N(truth0, P0)``); required
        with a custom ``motion``.
    name, description : str
        Label and one-line description used by reports.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import CoordinatedTurn, RangeBearingSensor, Scenario
    >>> sc = Scenario(runs=10, steps=5, motion=CoordinatedTurn(), sensor=RangeBearingSensor(position=(0.0, -50.0)),
    ...               truth0=[0.0, 5.0, 0.0, 0.0, 0.05], P0=np.diag([4.0, 1.0, 4.0, 1.0, 1e-3]))
    >>> sc.motion.ndim, sc.sensor.ndim
    (5, 2)
    """

    runs: int = 100
    steps: int = 50
    seed: int = 0
    dt: float = 1.0
    q: float = 0.01
    sigma_r: float = 0.1
    sigma_theta_deg: float = 5.0
    sensor_x: float = 0.0
    sensor_y: float = 0.0
    range0: float = 20.0
    speed: float = 1.0
    p0_pos: float = 1.0
    p0_vel: float = 0.5
    missing: float = 0.0
    motion: object = None
    sensor: object = None
    truth0: object = None
    P0: object = None
    name: str = "range-bearing"
    description: str = None

    def __post_init__(self):
        self._check_numbers()
        custom = self.motion is not None
        if self.motion is None:
            object.__setattr__(self, "motion", ConstantVelocity(q=self.q, dt=self.dt))
        ms = motion_spec(self.motion)
        object.__setattr__(self, "dt", ms.dt)
        if self.sensor is None:
            object.__setattr__(self, "sensor", RangeBearingSensor(
                sigma_r=self.sigma_r,
                sigma_theta=math.radians(self.sigma_theta_deg),
                position=(self.sensor_x, self.sensor_y),
            ))
        sensor_spec(self.sensor, ms.n)
        n = ms.n
        self._set_initial("truth0", (n,), custom,
                          lambda: np.array([self.sensor_x + self.range0, 0.0, self.sensor_y, self.speed]))
        self._set_initial("P0", (n, n), custom,
                          lambda: np.diag([self.p0_pos ** 2, self.p0_vel ** 2, self.p0_pos ** 2, self.p0_vel ** 2]))
        check_spd("P0", self.P0)
        if not isinstance(self.name, str) or not self.name:
            msg = f"name must be a non-empty string, got {show(self.name)}"
            raise ValueError(msg)
        if self.description is None:
            object.__setattr__(self, "description", (
                f"sensor at ({self.sensor_x:g}, {self.sensor_y:g}), range {self.range0:g} m, "
                f"speed {self.speed:g} m/s, sigma_r {self.sigma_r:g} m, sigma_theta {self.sigma_theta_deg:g} deg"
            ) if not custom else f"{type(self.motion).__name__} + {type(self.sensor).__name__}")

    def _check_numbers(self):
        """The integer and real parameters: types, finiteness and ranges (reals stored as float)."""
        for name in ("runs", "steps", "seed"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                msg = f"{name} must be an integer, got {show(value)}"
                raise ValueError(msg)
        if self.runs < 2:
            msg = f"runs must be >= 2 for the chi-square bands, got {self.runs}"
            raise ValueError(msg)
        if self.steps < 1:
            msg = f"steps must be >= 1, got {self.steps}"
            raise ValueError(msg)
        if self.seed < 0:
            msg = f"seed must be >= 0, got {self.seed}"
            raise ValueError(msg)
        for name in ("dt", "q", "sigma_r", "sigma_theta_deg", "sensor_x", "sensor_y",
                     "range0", "speed", "p0_pos", "p0_vel", "missing"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
                msg = f"{name} must be a finite number, got {show(value)}"
                raise ValueError(msg)
            object.__setattr__(self, name, float(value))
            if name != "missing" and abs(value) > MAX_PARAM:
                msg = (f"{name} is {value!r}; expected |{name}| <= {MAX_PARAM:g}, so that its square and the "
                       "covariances built from it stay finite")
                raise ValueError(msg)
        for name in ("dt", "sigma_r", "sigma_theta_deg", "range0", "p0_pos", "p0_vel"):
            if not getattr(self, name) > 0:
                msg = f"{name} must be > 0, got {getattr(self, name)!r}"
                raise ValueError(msg)
        if self.q < 0:
            msg = f"q must be >= 0, got {show(self.q)}"
            raise ValueError(msg)
        if not 0 <= self.missing < 1:
            msg = f"missing must be in [0, 1), got {show(self.missing)}"
            raise ValueError(msg)

    def _set_initial(self, key, shape, custom, default):
        """``truth0`` or ``P0``: given (required with a custom motion) or ``default()``, checked
        for its shape and finiteness and stored read-only."""
        n = shape[0]
        value = getattr(self, key)
        if value is None:
            if custom:
                msg = f"{key} is required with a custom motion model; expected an array of shape {shape}"
                raise ValueError(msg)
            value = default()
        try:
            value = np.array(value, dtype=np.float64)
        except (TypeError, ValueError):
            msg = f"{key} must be an array of real numbers of shape {shape}, got {show(value)}"
            raise ValueError(msg) from None
        if value.shape != shape:
            msg = f"{key} has shape {value.shape}; expected {shape} for a state of dimension {n}"
            raise ValueError(msg)
        if not np.isfinite(value).all():
            msg = f"{key} contains NaN or inf; expected finite values"
            raise ValueError(msg)
        value.setflags(write=False)
        object.__setattr__(self, key, value)

    def as_dict(self):
        """JSON-ready parameters: the scalars, the models (as text), ``truth0`` and ``P0``."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("motion", "sensor"):
                value = repr(value)
            elif f.name in ("truth0", "P0"):
                value = value.tolist()
            out[f.name] = value
        return out


class Simulation(NamedTuple):
    """Data of one scenario draw.

    truth : (runs, steps, 4) true states after each prediction period.
    measurements : (runs, steps, 2) range (m) and bearing (rad, in (-pi, pi]); NaN if missed.
    x0 : (runs, 4) initial estimates, drawn from ``N(truth0, P0)``.
    P0 : (4, 4) initial covariance.
    truth0 : (4,) initial true state.

    Examples
    --------
    >>> from tracking import Scenario, simulate
    >>> sim = simulate(Scenario(runs=3, steps=4))
    >>> sim.truth.shape, sim.measurements.shape, sim.x0.shape
    ((3, 4, 4), (3, 4, 2), (3, 4))
    """

    truth: np.ndarray
    measurements: np.ndarray
    x0: np.ndarray
    P0: np.ndarray
    truth0: np.ndarray


def simulate(scenario=None):
    """Draw truths, measurements and initial estimates for every run.

    Vectorised over runs with numpy (one Python iteration per step, not per
    run-step). The random streams are drawn in a fixed order (initial
    estimates, process noise, measurement noise, misses) so one seed always
    gives the same data. Truths move by the motion model's compiled ``f`` (a
    linear model by its matrix) plus ``N(0, Q)`` noise; measurements are the
    sensor's ``h`` plus ``N(0, R)`` noise, angles wrapped to (-pi, pi].

    Examples
    --------
    >>> from tracking.scenario import Scenario, simulate
    >>> sim = simulate(Scenario(runs=3, steps=5, seed=1))
    >>> sim.truth.shape, sim.measurements.shape, sim.x0.shape
    ((3, 5, 4), (3, 5, 2), (3, 4))
    """
    sc = Scenario() if scenario is None else scenario
    if not isinstance(sc, Scenario):
        msg = f"scenario must be a tracking.Scenario (or a name, for compare), got {type(sc).__name__}"
        raise ValueError(msg)
    rng = np.random.default_rng(sc.seed)
    motion, sensor = sc.motion, sc.sensor
    ms = motion_spec(motion)
    ss = sensor_spec(sensor, ms.n)
    n, m = ms.n, ss.m
    R, T = sc.runs, sc.steps
    P0 = np.array(sc.P0)
    truth0 = np.array(sc.truth0)
    x0 = truth0 + rng.standard_normal((R, n)) @ np.linalg.cholesky(P0).T
    # Q is singular when q = 0; its Cholesky would fail, so use the eigen-square-root.
    w, V = np.linalg.eigh(ms.Q)
    q_root = V * np.sqrt(np.clip(w, 0.0, None))
    noise = rng.standard_normal((R, T, n)) @ q_root.T
    truth = np.empty((R, T, n))
    x = np.broadcast_to(truth0, (R, n))
    F = motion.jacobian(truth0) if ms.linear and hasattr(motion, "jacobian") else None
    for k in range(T):
        moved = x @ F.T if F is not None else _transition(ms, x)
        x = moved + noise[:, k]
        truth[:, k] = x
    Rm = ss.R
    if np.count_nonzero(Rm - np.diag(np.diag(Rm))) == 0:
        z_noise = rng.standard_normal((R, T, m)) * np.sqrt(np.diag(Rm))
    else:
        z_noise = rng.standard_normal((R, T, m)) @ np.linalg.cholesky(Rm).T
    z = _measure(ss, truth) + z_noise
    for a in np.flatnonzero(ss.angles):
        z[..., a] = wrap_angle(z[..., a])
    if sc.missing > 0:
        z[rng.random((R, T)) < sc.missing] = np.nan
    return Simulation(truth, z, x0, P0, truth0)


def _transition(ms, X):
    X2 = np.ascontiguousarray(X.reshape(-1, ms.n))
    out = np.empty_like(X2)
    apply_f(ms.f, X2, ms.dt, ms.params, out)
    return out.reshape(X.shape)


def _measure(ss, X):
    n = X.shape[-1]
    X2 = np.ascontiguousarray(X.reshape(-1, n))
    out = np.empty((X2.shape[0], ss.m))
    apply_h(ss.h, X2, ss.params, out)
    return out.reshape(X.shape[:-1] + (ss.m,))


# ------------------------------------------------------------------ named scenarios
def _range_bearing(runs, steps, seed, missing):
    return Scenario(runs=runs, steps=steps, seed=seed, missing=missing)


def _radar_3d(runs, steps, seed, missing):
    return Scenario(
        runs=runs, steps=steps, seed=seed, missing=missing, name="radar-3d",
        motion=ConstantVelocity(q=0.05, dt=1.0, dims=3),
        sensor=RangeBearingElevationSensor(sigma_r=2.0, sigma_theta=math.radians(2.0),
                                           sigma_phi=math.radians(2.0), position=(0.0, 0.0, 0.0)),
        truth0=[400.0, 0.0, 0.0, 15.0, 150.0, -1.0],
        P0=np.diag([10.0 ** 2, 2.0 ** 2, 10.0 ** 2, 2.0 ** 2, 10.0 ** 2, 2.0 ** 2]),
        description=("3-D constant velocity, radar at the origin (range, bearing, elevation): target at "
                     "400 m, 150 m up, 15 m/s tangential; sigma_r 2 m, sigma_theta = sigma_phi = 2 deg"),
    )


def _turn(runs, steps, seed, missing):
    return Scenario(
        runs=runs, steps=steps, seed=seed, missing=missing, name="turn",
        motion=CoordinatedTurn(q=0.05, q_turn=1e-4, dt=1.0),
        sensor=RangeBearingRangeRateSensor(sigma_r=1.0, sigma_theta=math.radians(2.0), sigma_rdot=0.5,
                                           position=(-150.0, 100.0)),
        truth0=[0.0, 10.0, 0.0, 0.0, 0.1],
        P0=np.diag([5.0 ** 2, 2.0 ** 2, 5.0 ** 2, 2.0 ** 2, 0.05 ** 2]),
        description=("manoeuvring target, coordinated turn at 0.1 rad/s and 10 m/s (unknown rate); sensor at "
                     "(-150, 100) m: range, bearing, range rate; sigma_r 1 m, sigma_theta 2 deg, sigma_rdot 0.5 m/s"),
    )


SCENARIOS = {
    "range-bearing": ("2-D constant velocity, range-bearing sensor: accurate range, coarse bearing "
                      "(Sumler et al., section III-A; the default)", _range_bearing),
    "radar-3d": ("3-D constant velocity seen by a radar measuring range, bearing and elevation", _radar_3d),
    "turn": ("manoeuvring target in a coordinated turn (nonlinear motion), range, bearing and range rate", _turn),
}


def scenario_names():
    """Names of the built-in scenarios, the default first."""
    return list(SCENARIOS)


def make_scenario(name="range-bearing", *, runs=100, steps=50, seed=0, missing=0.0):
    """A built-in scenario by name (see :data:`SCENARIOS`).

    Examples
    --------
    >>> from tracking.scenario import make_scenario
    >>> sc = make_scenario("radar-3d", runs=5, steps=3)
    >>> sc.motion.ndim, sc.sensor.ndim, sc.name
    (6, 3, 'radar-3d')
    """
    if name not in SCENARIOS:
        msg = f"scenario must be one of {', '.join(repr(k) for k in SCENARIOS)}; got {show(name)}"
        raise ValueError(msg)
    return SCENARIOS[name][1](runs, steps, seed, missing)

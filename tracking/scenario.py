"""Seeded Monte Carlo scenarios: truths, range-bearing measurements and initial estimates."""

from dataclasses import asdict, dataclass
import math
import numbers
from typing import NamedTuple

import numpy as np

from tracking.models import ConstantVelocity, RangeBearingSensor, wrap_angle

__all__ = ["Scenario", "Simulation", "simulate"]


@dataclass(frozen=True)
class Scenario:
    """Parameters of a Monte Carlo tracking scenario.

    The default is the paper's motivating case (seed 000, section III-A): an
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

    def __post_init__(self):
        for name in ("runs", "steps", "seed"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                msg = f"{name} must be an integer, got {value!r}"
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
                msg = f"{name} must be a finite number, got {value!r}"
                raise ValueError(msg)
            object.__setattr__(self, name, float(value))
        for name in ("dt", "sigma_r", "sigma_theta_deg", "range0", "p0_pos", "p0_vel"):
            if not getattr(self, name) > 0:
                msg = f"{name} must be > 0, got {getattr(self, name)!r}"
                raise ValueError(msg)
        if self.q < 0:
            msg = f"q must be >= 0, got {self.q!r}"
            raise ValueError(msg)
        if not 0 <= self.missing < 1:
            msg = f"missing must be in [0, 1), got {self.missing!r}"
            raise ValueError(msg)

    @property
    def motion(self):
        return ConstantVelocity(q=self.q, dt=self.dt)

    @property
    def sensor(self):
        return RangeBearingSensor(
            sigma_r=self.sigma_r,
            sigma_theta=math.radians(self.sigma_theta_deg),
            position=(self.sensor_x, self.sensor_y),
        )

    @property
    def truth0(self):
        """Initial true state ``[x, vx, y, vy]``."""
        return np.array([self.sensor_x + self.range0, 0.0, self.sensor_y, self.speed])

    @property
    def P0(self):
        return np.diag([self.p0_pos ** 2, self.p0_vel ** 2, self.p0_pos ** 2, self.p0_vel ** 2])

    def as_dict(self):
        return asdict(self)


class Simulation(NamedTuple):
    """Data of one scenario draw.

    truth : (runs, steps, 4) true states after each prediction period.
    measurements : (runs, steps, 2) range (m) and bearing (rad, in (-pi, pi]); NaN if missed.
    x0 : (runs, 4) initial estimates, drawn from ``N(truth0, P0)``.
    P0 : (4, 4) initial covariance.
    truth0 : (4,) initial true state.
    """

    truth: np.ndarray
    measurements: np.ndarray
    x0: np.ndarray
    P0: np.ndarray
    truth0: np.ndarray


def simulate(scenario=None):
    """Draw truths, measurements and initial estimates for every run.

    Vectorised over runs with numpy (one Python iteration per step, not per
    run-step). The random streams are drawn in a fixed order so one seed always
    gives the same data.

    Examples
    --------
    >>> from tracking.scenario import Scenario, simulate
    >>> sim = simulate(Scenario(runs=3, steps=5, seed=1))
    >>> sim.truth.shape, sim.measurements.shape, sim.x0.shape
    ((3, 5, 4), (3, 5, 2), (3, 4))
    """
    sc = Scenario() if scenario is None else scenario
    rng = np.random.default_rng(sc.seed)
    motion, sensor = sc.motion, sc.sensor
    F, Q = motion.F, motion.Q
    R, T = sc.runs, sc.steps
    P0 = sc.P0
    x0 = sc.truth0 + rng.standard_normal((R, 4)) @ np.linalg.cholesky(P0).T
    # Q is singular when q = 0; its Cholesky would fail, so use the eigen-square-root.
    w, V = np.linalg.eigh(Q)
    q_root = V * np.sqrt(np.clip(w, 0.0, None))
    noise = rng.standard_normal((R, T, 4)) @ q_root.T
    truth = np.empty((R, T, 4))
    x = np.broadcast_to(sc.truth0, (R, 4))
    for k in range(T):
        x = x @ F.T + noise[:, k]
        truth[:, k] = x
    z = sensor.h(truth) + rng.standard_normal((R, T, 2)) * [sensor.sigma_r, sensor.sigma_theta]
    z[..., 1] = wrap_angle(z[..., 1])
    if sc.missing > 0:
        z[rng.random((R, T)) < sc.missing] = np.nan
    return Simulation(truth, z, x0, P0, sc.truth0.copy())

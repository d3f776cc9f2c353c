"""tracking: EKF and UKF on range-bearing measurements, batched at compiled speed,
scored for consistency (NEES, Gaussian ECD) with :mod:`fastcal.gaussian`.

>>> from tracking import Scenario, compare
>>> report = compare(Scenario(runs=20, steps=10))
>>> sorted(report["filters"])
['ekf', 'ukf']
"""

from tracking.models import (
    ConstantAcceleration,
    ConstantVelocity,
    CoordinatedTurn,
    MotionModel,
    PositionSensor,
    RangeBearingElevationSensor,
    RangeBearingRangeRateSensor,
    RangeBearingSensor,
    SensorModel,
    wrap_angle,
)
from tracking.filters import ExtendedKalmanFilter, FilterRun, GaussianState, UnscentedKalmanFilter
from tracking._factory import kernel_dir
from tracking.scenario import Scenario, Simulation, simulate
from tracking.consistency import Consistency, evaluate
from tracking.compare import compare, format_table, plot_report

__all__ = [
    "MotionModel",
    "SensorModel",
    "ConstantVelocity",
    "ConstantAcceleration",
    "CoordinatedTurn",
    "RangeBearingSensor",
    "RangeBearingElevationSensor",
    "RangeBearingRangeRateSensor",
    "PositionSensor",
    "kernel_dir",
    "wrap_angle",
    "GaussianState",
    "FilterRun",
    "ExtendedKalmanFilter",
    "UnscentedKalmanFilter",
    "Scenario",
    "Simulation",
    "simulate",
    "Consistency",
    "evaluate",
    "compare",
    "format_table",
    "plot_report",
]

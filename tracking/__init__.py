"""tracking: EKF and UKF on range-bearing measurements, batched at compiled speed,
scored for consistency (NEES, Gaussian ECD) with :mod:`fastcal.gaussian`.

>>> from tracking import Scenario, compare
>>> report = compare(Scenario(runs=20, steps=10))
>>> sorted(report["filters"])
['ekf', 'ukf']
"""

from tracking import models
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
from tracking.kernels.factory import kernel_dir
from tracking.montecarlo.scenario import Scenario, Simulation, simulate
from tracking.scoring.consistency import Consistency, evaluate

# through the module tracking.compare, so that the name tracking.compare is the function
# (importing that module later would otherwise make it the module)
from tracking.compare import compare, format_table, plot_report

__all__ = [
    *models.__all__,
    "kernel_dir",
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

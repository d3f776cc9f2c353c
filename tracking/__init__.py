"""tracking: EKF and UKF on range-bearing measurements, batched at compiled speed,
scored for consistency (NEES, Gaussian ECD) with :mod:`fastcal.gaussian`."""

from tracking.models import ConstantVelocity, PositionSensor, RangeBearingSensor, wrap_angle
from tracking.filters import ExtendedKalmanFilter, FilterRun, GaussianState, UnscentedKalmanFilter

__all__ = [
    "ConstantVelocity",
    "RangeBearingSensor",
    "PositionSensor",
    "wrap_angle",
    "GaussianState",
    "FilterRun",
    "ExtendedKalmanFilter",
    "UnscentedKalmanFilter",
]

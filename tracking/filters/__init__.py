"""The filters: extended and unscented Kalman filters over any model pair, batched over runs.

- :mod:`tracking.filters.specs`: the gate; a model pair checked once against
  the protocol of :mod:`tracking.models` and handed on as plain values;
- :mod:`tracking.filters.batch`: one compiled batch run over worker threads and
  watched, its model functions named when they raise or stall;
- :mod:`tracking.filters.kalman`: :class:`ExtendedKalmanFilter`,
  :class:`UnscentedKalmanFilter` and what they return (:class:`GaussianState`,
  :class:`FilterRun`, the status codes).
"""

from tracking.filters.kalman import (
    FAILED,
    MISSED,
    OK,
    SINGULAR,
    ExtendedKalmanFilter,
    FilterRun,
    GaussianState,
    UnscentedKalmanFilter,
)
from tracking.filters.kalman import (
    STATUS_NAMES as STATUS_NAMES,
)
from tracking.filters.specs import motion_spec as motion_spec
from tracking.filters.specs import sensor_spec as sensor_spec

__all__ = ["GaussianState", "FilterRun", "ExtendedKalmanFilter", "UnscentedKalmanFilter",
           "OK", "MISSED", "SINGULAR", "FAILED"]

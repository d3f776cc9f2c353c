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
(see :mod:`tracking.kernels.factory`).

Subclass :class:`MotionModel` / :class:`SensorModel` to get the numpy methods;
the filters need only the attributes above (duck typing). The base classes are
in :mod:`tracking.models.base`, the built-in models in :mod:`tracking.models.motion`
and :mod:`tracking.models.sensors`, their compiled physics in
:mod:`tracking.models.physics`.

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

from tracking.models.base import MotionModel, SensorModel, wrap_angle
from tracking.models.motion import ConstantAcceleration, ConstantVelocity, CoordinatedTurn
from tracking.models.sensors import (
    PositionSensor,
    RangeBearingElevationSensor,
    RangeBearingRangeRateSensor,
    RangeBearingSensor,
)

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
    "wrap_angle",
]

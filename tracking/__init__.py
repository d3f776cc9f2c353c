"""tracking: EKF and UKF on range-bearing measurements, batched at compiled speed,
scored for consistency (NEES, Gaussian ECD) with :mod:`fastcal.gaussian`.

>>> from tracking import Scenario, compare
>>> report = compare(Scenario(runs=20, steps=10))
>>> sorted(report["filters"])
['ekf', 'ukf']
"""

import importlib
import sys
import types

# Every public name is imported on first use (PEP 562): ``import tracking`` loads
# nothing heavy, so the ``tracking`` command's start-up (``tracking.__main__``) is in
# charge of Ctrl-C before numpy and numba are loaded.
_LAZY = {
    **dict.fromkeys(["ConstantAcceleration", "ConstantVelocity", "CoordinatedTurn", "MotionModel",
                     "PositionSensor", "RangeBearingElevationSensor", "RangeBearingRangeRateSensor",
                     "RangeBearingSensor", "SensorModel", "wrap_angle"], "tracking.models"),
    **dict.fromkeys(["ExtendedKalmanFilter", "FilterRun", "GaussianState",
                     "UnscentedKalmanFilter"], "tracking.filters"),
    "kernel_dir": "tracking.kernels.factory",
    **dict.fromkeys(["Scenario", "Simulation", "simulate"], "tracking.montecarlo.scenario"),
    **dict.fromkeys(["Consistency", "evaluate"], "tracking.scoring.consistency"),
    **dict.fromkeys(["compare", "format_table", "plot_report"], "tracking.montecarlo.compare"),
}


class _Package(types.ModuleType):
    """``tracking.compare`` is a function and the name of its module: importing the
    module (``import tracking.compare``) binds the function, not the module."""

    def __setattr__(self, name, value):
        if name == "compare" and isinstance(value, types.ModuleType):
            value = value.compare
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'tracking' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


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

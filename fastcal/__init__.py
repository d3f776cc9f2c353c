"""fastcal: one-pass, Numba-compiled calibration metrics with mergeable state.

Scoring is fill then report: one compiled pass fills per-bin statistics
(:class:`CalibrationAccumulator`), and every metric is read off them
(:class:`CalibrationReport`).
"""

import importlib
import sys
import types

# Every public name is imported on first use (PEP 562): ``import fastcal`` loads
# nothing heavy (not even numpy), so the ``fastcal`` command's start-up
# (``fastcal.__main__``) is in charge of Ctrl-C before numpy is loaded, and the
# kernels a session never uses are never loaded.
_LAZY = {
    "simulate": "fastcal.simulate",
    "CalibrationAccumulator": "fastcal.accumulators.calibration",
    "uniform_edges": "fastcal.inputs.binning",
    "score_file": "fastcal.files",
    "GaussianAccumulator": "fastcal.gaussian",
    "anees_bounds": "fastcal.gaussian",
    "ecd_bounds": "fastcal.gaussian",
    "gaussian_ecd": "fastcal.gaussian",
    "nees": "fastcal.gaussian",
    "MulticlassReport": "fastcal.reports.multiclass_report",
    "SegmentedAccumulator": "fastcal.accumulators.segmented",
    "SegmentedReport": "fastcal.reports.segmented",
    "CalibrationReport": "fastcal.reports.report",
    "chi2_nees_test": "fastcal.reports.stats",
    "ecd_test": "fastcal.significance",
    "ece_test": "fastcal.significance",
}
_LAZY.update(dict.fromkeys(["ace", "brier_score", "calibration_report", "classwise_ece", "ecd",
                            "ecce", "ece", "esce", "log_loss", "mce", "multicalibration_error",
                            "smece"], "fastcal.metrics"))


class _Package(types.ModuleType):
    """``fastcal.simulate`` is a function and the name of its module: importing the
    module (``import fastcal.simulate``) binds the function, not the module."""

    def __setattr__(self, name, value):
        if name == "simulate" and isinstance(value, types.ModuleType):
            value = value.simulate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'fastcal' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "CalibrationAccumulator",
    "CalibrationReport",
    "GaussianAccumulator",
    "MulticlassReport",
    "SegmentedAccumulator",
    "SegmentedReport",
    "ace",
    "anees_bounds",
    "brier_score",
    "calibration_report",
    "chi2_nees_test",
    "classwise_ece",
    "ecd",
    "ecd_bounds",
    "ecd_test",
    "ecce",
    "ece",
    "ece_test",
    "esce",
    "gaussian_ecd",
    "log_loss",
    "mce",
    "multicalibration_error",
    "nees",
    "score_file",
    "simulate",
    "smece",
    "uniform_edges",
]

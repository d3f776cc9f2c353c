"""fastcal: one-pass, Numba-compiled calibration metrics with mergeable state.

Scoring is fill then report: one compiled pass fills per-bin statistics
(:class:`CalibrationAccumulator`), and every metric is read off them
(:class:`CalibrationReport`).
"""

from .accumulator import CalibrationAccumulator
from .binning import uniform_edges
from .metrics import ace, brier_score, calibration_report, ecd, ece, esce, log_loss, mce
from .multiclass import classwise_ece
from .multiclass_report import MulticlassReport
from .report import CalibrationReport
from .simulate import simulate

__version__ = "0.1.0"

__all__ = [
    "CalibrationAccumulator",
    "CalibrationReport",
    "MulticlassReport",
    "ace",
    "brier_score",
    "calibration_report",
    "classwise_ece",
    "ecd",
    "ece",
    "esce",
    "log_loss",
    "mce",
    "simulate",
    "uniform_edges",
]

"""fastcal: one-pass, Numba-compiled calibration metrics with mergeable state.

Scoring is fill then report: one compiled pass fills per-bin statistics
(:class:`CalibrationAccumulator`), and every metric is read off them
(:class:`CalibrationReport`).
"""

from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.inputs.binning import uniform_edges
from fastcal.files import score_file
from fastcal.gaussian import GaussianAccumulator, anees_bounds, ecd_bounds, gaussian_ecd, nees
from fastcal.metrics import (ace, brier_score, calibration_report, classwise_ece, ecd, ece, esce,
                      log_loss, mce)
from fastcal.reports.multiclass_report import MulticlassReport
from fastcal.reports.report import CalibrationReport
from fastcal.simulate import simulate
from fastcal.reports.stats import chi2_nees_test
from fastcal.significance import ecd_test, ece_test

__version__ = "0.1.0"

__all__ = [
    "CalibrationAccumulator",
    "CalibrationReport",
    "GaussianAccumulator",
    "MulticlassReport",
    "ace",
    "anees_bounds",
    "brier_score",
    "calibration_report",
    "chi2_nees_test",
    "classwise_ece",
    "ecd",
    "ecd_bounds",
    "ecd_test",
    "ece",
    "ece_test",
    "esce",
    "gaussian_ecd",
    "log_loss",
    "mce",
    "nees",
    "score_file",
    "simulate",
    "uniform_edges",
]

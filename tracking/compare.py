"""EKF vs UKF on the same truths and measurements (kept at this path; the code is in
:mod:`tracking.montecarlo.compare`, the verdict and plot checks in :mod:`tracking.scoring.report`)."""

from fastcal.io import write_atomically
from tracking.montecarlo.compare import (
    FILTER_NAMES,  # noqa: F401 - and the other name the module had
    compare,
    format_table,
    plot_report,
)
from tracking.scoring.report import check_plot_path, verdict

__all__ = ["compare", "format_table", "plot_report", "write_atomically", "check_plot_path", "verdict"]

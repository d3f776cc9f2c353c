"""Score any tracker's output from a file (kept at this path; the code is in
:mod:`tracking.scoring.files`, the command ``tracking score`` in :mod:`tracking.commands.score`)."""

from tracking.scoring.files import CHUNK_ROWS, filters_of, format_score, plot_score, resolve_columns, score_file  # noqa: F401 - and the other names the module had

__all__ = ["score_file", "format_score", "plot_score", "resolve_columns"]

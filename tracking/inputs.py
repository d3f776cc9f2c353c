"""The one gate for ``tracking score`` (kept at this path; the code is in :mod:`tracking.scoring.inputs`)."""

from tracking.scoring.inputs import Block, Layout, filter_specs, open_input
from tracking.scoring.inputs import FILTER_COLUMNS, TABLE_FORMATS, match_names, resolve_columns  # noqa: F401 - and the other names the module had

__all__ = ["Block", "Layout", "open_input", "filter_specs"]

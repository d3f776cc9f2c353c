"""The one gate for ``tracking score`` (kept at this path; the code is in :mod:`tracking.scoring.inputs`)."""

from tracking.scoring.inputs import (  # noqa: F401 - and the other names the module had
    FILTER_COLUMNS,
    TABLE_FORMATS,
    Block,
    Layout,
    filter_specs,
    match_names,
    open_input,
    resolve_columns,
)

__all__ = ["Block", "Layout", "open_input", "filter_specs"]

"""The one gate for ``tracking score`` (kept at this path; the code is in :mod:`tracking.scoring.inputs`)."""

from tracking.scoring.inputs import Block, Layout, filter_specs, open_input

__all__ = ["Block", "Layout", "open_input", "filter_specs"]

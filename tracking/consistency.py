"""Consistency of a batch of filter runs (kept at this path; the code is in
:mod:`tracking.scoring.consistency`)."""

from tracking.scoring.consistency import Consistency, evaluate

__all__ = ["Consistency", "evaluate"]

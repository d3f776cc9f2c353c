"""The input layer: converting what users pass (fastcal.inputs.convert), checking it
(validation) and resolving it once into a typed batch (batch).

Not API: internal to fastcal; what is supported is re-exported in ``fastcal.__all__``."""

from fastcal.inputs.convert import to_numpy

__all__ = ["to_numpy"]

"""The input layer: converting what users pass (fastcal.inputs.convert), checking it
(validation) and resolving it once into a typed batch (batch)."""

from fastcal.inputs.convert import to_numpy

__all__ = ["to_numpy"]

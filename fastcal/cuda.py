"""GPU scoring: is a GPU there, and is an array in its memory?

Scoring on the GPU needs nothing from here: pass arrays in GPU memory (torch
CUDA tensors, CuPy, Numba device arrays) or ``device="cuda"`` to any entry
point; the input gate records where the data lives and the GPU backend
(:mod:`fastcal.backends.cuda`, the ``cuda`` extra) fills the same state as
the CPU. Neither function below imports ``numba.cuda`` unless asked.
"""

from fastcal.backends.cuda import is_available
from fastcal.inputs.device import is_device_array

__all__ = ["is_available", "is_device_array"]

"""Where data lives: the questions the input gate asks, and nothing more.

``is_device_array`` looks only at attributes and ``dtype_of`` at the dtype,
so ``import fastcal`` and scoring host data never load ``numba.cuda``.
Everything done to data in GPU memory (device views, casts on the GPU, host
copies) is the GPU backend's (:mod:`fastcal.backends.cuda`).
"""

import numpy as np

# DLPack device types that live in GPU memory: kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
_DLPACK_CUDA = (2, 3, 13)


def is_device_array(x):
    """True if ``x`` is an array in GPU memory that the kernels can read in place.

    Anything with ``__cuda_array_interface__`` (torch CUDA tensors, CuPy,
    Numba device arrays), a DLPack producer on a CUDA device, or a device
    array of Numba's CUDA simulator. Does not import ``numba.cuda``.
    """
    if isinstance(x, np.ndarray):
        return False
    module = type(x).__module__
    if module.startswith("numba.cuda.simulator"):
        return True  # simulator arrays delegate __dlpack_device__ to a host array
    if module.startswith("torch") and isinstance(getattr(x, "is_cuda", None), bool):
        # a tensor's own answer: asking __cuda_array_interface__ of a host tensor costs
        # an exception inside torch (microseconds a batch in an evaluation loop)
        return x.is_cuda
    try:
        if hasattr(x, "__cuda_array_interface__"):
            return True
    except Exception:  # torch raises for CPU tensors on some versions
        pass
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        try:
            return int(dev()[0]) in _DLPACK_CUDA
        except Exception:
            return False
    return False


def dtype_of(x):
    """numpy dtype of a host or device array (torch dtypes have no numpy equivalent)."""
    dt = getattr(x, "dtype", None)
    try:
        return np.dtype(dt)
    except TypeError:
        return np.dtype(str(dt).replace("torch.", ""))

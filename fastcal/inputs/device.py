"""Where data lives: the device questions, answered once at the input gate.

``is_device_array`` looks only at attributes, so ``import fastcal`` and
scoring host data never load ``numba.cuda``; the rest (device views, casts
on the GPU, host copies) import it on first use through ``kernels``. Only
the gate (:mod:`fastcal.inputs.batch`) and the GPU backend
(:mod:`fastcal.backends.cuda`) call these.
"""

import importlib

import numpy as np

# DLPack device types that live in GPU memory: kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
_DLPACK_CUDA = (2, 3, 13)

_kernels = {}

NO_GPU = ("device='cuda': no CUDA GPU or driver was found (numba.cuda.is_available() is "
          "False); score on the CPU with device='cpu' (the default)")


def kernels(name):
    """The kernel module ``name``, imported (with numba.cuda) on first use.

    ``_cuda`` is kept only once a GPU answered: without one this raises
    ValueError(NO_GPU), one line, instead of the driver's own multi-line error.
    """
    mod = _kernels.get(name)
    if mod is None:
        mod = importlib.import_module(f"fastcal._kernels.{name}")
        if name == "_cuda" and not mod.cuda.is_available():
            raise ValueError(NO_GPU)
        _kernels[name] = mod
    return mod


def is_device_array(x):
    """True if ``x`` is an array in GPU memory that the kernels can read in place.

    Anything with ``__cuda_array_interface__`` (torch CUDA tensors, CuPy,
    Numba device arrays), a DLPack producer on a CUDA device, or a device
    array of Numba's CUDA simulator. Does not import ``numba.cuda``.
    """
    if isinstance(x, np.ndarray):
        return False
    if type(x).__module__.startswith("numba.cuda.simulator"):
        return True  # simulator arrays delegate __dlpack_device__ to a host array
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


def as_device_array(name, x):
    """A Numba device array viewing ``x`` (no copy); ValueError if ``x`` is not on a GPU.

    torch tensors that require grad are detached first; a DLPack-only
    producer is viewed through CuPy or torch when one of them is installed.
    """
    cuda = kernels("_cuda").cuda
    if type(x).__module__.startswith("numba.cuda"):
        return x
    if hasattr(x, "detach") and getattr(x, "requires_grad", False):
        x = x.detach()
    try:
        x.__cuda_array_interface__  # noqa: B018  (raises for non-CUDA torch tensors)
        return cuda.as_cuda_array(x)
    except AttributeError:
        pass
    if is_device_array(x):
        for mod in ("cupy", "torch"):
            try:
                lib = __import__(mod)
                return cuda.as_cuda_array(lib.from_dlpack(x))
            except Exception:
                continue
    msg = (f"{name} is a {type(x).__name__}, not an array in GPU memory; expected an object "
           "with __cuda_array_interface__ or a CUDA DLPack capsule (torch CUDA tensor, "
           "CuPy array, Numba device array)")
    raise ValueError(msg)


def as_dtype(x, dtype):
    """Device array ``x`` in ``dtype``: itself, a view (bool as uint8) or a copy
    cast on the GPU (``_cuda.cast_rows``)."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype == np.bool_ and dtype == np.uint8:
        return x.view(np.uint8)
    kc = kernels("_cuda")
    out = kc.cuda.device_array(x.shape, dtype)
    n = int(x.shape[0])
    if n:
        blocks, threads = grid(n, 4, 8192)
        (kc.cast_rows if x.ndim == 1 else kc.cast_rows_2d)[blocks, threads](x, out)
    return out


def to_host(name, x):
    """A host numpy array of ``x``: a copy of a device array, ``np.asarray`` of anything else."""
    if not is_device_array(x):
        return np.asarray(x)
    return as_device_array(name, x).copy_to_host()


def grid(n, rows_per_thread, max_blocks):
    """(blocks, threads) of a grid-stride kernel over n rows: 256 threads a block,
    about rows_per_thread rows each, at most max_blocks (the simulator: one warp)."""
    if kernels("_cuda").SIMULATOR:
        return 1, 32
    return max(1, min(-(-n // (256 * rows_per_thread)), max_blocks)), 256


def dtype_of(x):
    """numpy dtype of a host or device array (torch dtypes have no numpy equivalent)."""
    dt = getattr(x, "dtype", None)
    try:
        return np.dtype(dt)
    except TypeError:
        return np.dtype(str(dt).replace("torch.", ""))

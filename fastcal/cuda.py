"""GPU scoring: device detection and host-facing fills with the CPU kernels' state.

Nothing here imports Numba's CUDA target until a fill is asked for:
``is_device_array`` looks only at attributes, so ``import fastcal`` and
scoring host data never load ``numba.cuda``.

Every ``fill_*`` returns host numpy arrays with exactly the shapes, dtypes
and meaning of the matching CPU kernel's result (counts int64 exact, sums
float64; the ``checks`` array with the CPU's counts and first indices, so
the same error messages come out). Inputs may be device arrays (anything
with ``__cuda_array_interface__`` or a CUDA DLPack capsule: torch CUDA
tensors, CuPy arrays, Numba device arrays), scored in place, or host arrays,
copied to the device in chunks of ``chunk_rows`` rows.
"""

import numpy as np

from ._kernels import binary as kb
from ._kernels import multiclass as km

# DLPack device types that live in GPU memory: kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
_DLPACK_CUDA = (2, 3, 13)
# Rows per host-to-device copy when the input is on the host.
CHUNK_ROWS = 1 << 26

_kernels = {}


def _k(name):
    """The kernel module ``name``, imported (with numba.cuda) on first use."""
    mod = _kernels.get(name)
    if mod is None:
        import importlib

        mod = importlib.import_module(f"fastcal._kernels.{name}")
        _kernels[name] = mod
    return mod


def is_available():
    """True if a CUDA GPU (or Numba's simulator, ``NUMBA_ENABLE_CUDASIM=1``) can run the kernels.

    Imports ``numba.cuda``; False (no exception) when it is not installed or
    finds no driver or device.
    """
    try:
        cuda = _k("_cuda").cuda
        return bool(cuda.is_available())
    except Exception:  # no numba-cuda, no driver, no device: all mean "no GPU"
        return False


def is_device_array(x):
    """True if ``x`` is an array in GPU memory that the kernels can read in place.

    Anything with ``__cuda_array_interface__`` (torch CUDA tensors, CuPy,
    Numba device arrays), a DLPack producer on a CUDA device, or a device
    array of Numba's CUDA simulator. Does not import ``numba.cuda``.
    """
    if isinstance(x, np.ndarray):
        return False
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
    return type(x).__module__.startswith("numba.cuda.simulator")


def as_device_array(name, x):
    """A Numba device array viewing ``x`` (no copy); ValueError if ``x`` is not on a GPU.

    torch tensors that require grad are detached first; a DLPack-only
    producer is viewed through CuPy or torch when one of them is installed.
    """
    cuda = _k("_cuda").cuda
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


def _merge_checks(checks, part, nk, offset):
    """Add a chunk's checks (first indices counted from offset) into checks."""
    for k in range(nk):
        checks[k] += part[k]
        f = part[nk + k]
        if f >= 0:
            f += offset
            if checks[nk + k] < 0 or f < checks[nk + k]:
                checks[nk + k] = f


def _chunks(arrays, n, chunk_rows):
    """Yield (offset, device arrays) for [offset, offset + chunk) of every array.

    Device inputs are sliced (views); host inputs are copied one chunk at a time.
    """
    cuda = _k("_cuda").cuda
    on_dev = [is_device_array(a) for a in arrays]
    devs = [as_device_array("array", a) if d else np.asarray(a) for a, d in zip(arrays, on_dev)]
    if all(on_dev):
        yield 0, devs
        return
    step = max(1, int(chunk_rows))
    for start in range(0, max(n, 1), step):
        stop = min(n, start + step)
        out = []
        for a, d in zip(devs, on_dev):
            part = a[start:stop]
            out.append(part if d else cuda.to_device(np.ascontiguousarray(part)))
        yield start, out


def _reduce_binary(parts):
    """Host sum of the per-block partial results of one launch."""
    part_i, part_f, part_t, part_c = (a.copy_to_host() for a in parts)
    counts = part_i.sum(axis=0)
    sums = part_f.sum(axis=0)
    totals = part_t.sum(axis=0)
    checks = kb.new_state(0)[3]
    for row in part_c:
        _merge_checks(checks, row, kb.N_CHECK_KINDS, 0)
    return counts, sums, totals, checks


def _binary_launch(kernel, n, nb, args):
    kc = _k("_cuda")
    kcb = _k("cuda_binary")
    cuda = kc.cuda
    blocks, threads, shared = kc.launch_shape(n, kcb.shared_per_thread(nb))
    parts = (cuda.device_array((blocks, nb + 1, 3), np.int64),
             cuda.device_array((blocks, nb + 1, 3), np.float64),
             cuda.device_array((blocks, kcb.N_TOT), np.float64),
             cuda.device_array((blocks, 2 * kcb.N_KINDS), np.int64))
    kernel[blocks, threads, 0, shared](*args, *parts)
    return _reduce_binary(parts)


def fill_binary(y, p, edges, uniform, right, omit, eps, with_logs, *, chunk_rows=CHUNK_ROWS):
    """GPU version of ``_kernels.binary.fill_parallel``: (counts, sums, totals, checks).

    ``y`` and ``p`` are 1-D arrays of equal length (device or host; p float32
    or float64, y any real or bool dtype). ``edges`` are the kernel edges
    (``binning.kernel_edges``); ``uniform`` says they are the uniform ones
    rounded to p's dtype. ``omit`` is accepted for the CPU signature: as on
    the CPU, invalid rows always go to the trash row and are counted.
    """
    del omit  # the CPU kernel records the same checks either way
    cuda = _k("_cuda").cuda
    kcb = _k("cuda_binary")
    edges = np.ascontiguousarray(edges, np.float64)
    nb = edges.shape[0] - 1
    n = int(p.shape[0])
    is32 = np.dtype(str(_dtype(p))).itemsize == 4
    uniform = bool(uniform) and bool(kb._uniform_ok(edges, is32))
    eps = 0.0 if eps is None else float(eps)
    d_edges = cuda.to_device(edges)
    state = kb.new_state(nb)
    for off, (dy, dp) in _chunks((y, p), n, chunk_rows):
        m = int(dp.shape[0])
        if m == 0:
            continue
        out = _binary_launch(kcb.fill_prob, m, nb,
                             (dp, dy, d_edges, uniform, bool(right), is32, eps, 1.0 - eps,
                              bool(with_logs)))
        _add_state(state, out, kb.N_CHECK_KINDS, off)
    return state


def fill_binary_logits(y, z, edges, uniform, right, eps, *, chunk_rows=CHUNK_ROWS):
    """GPU version of ``_kernels.multiclass.fill_binary_logits_range`` on all rows.

    Returns (counts, sums, totals, checks) in the binary layout; check kinds
    are binary.CHECK_*, with CHECK_RANGE_P counting infinite logits.
    ``edges`` are float64 kernel edges (logits give float64 probabilities).
    """
    cuda = _k("_cuda").cuda
    kcb = _k("cuda_binary")
    edges = np.ascontiguousarray(edges, np.float64)
    nb = edges.shape[0] - 1
    n = int(z.shape[0])
    eps = 0.0 if eps is None else float(eps)
    d_edges = cuda.to_device(edges)
    state = kb.new_state(nb)
    for off, (dy, dz) in _chunks((y, z), n, chunk_rows):
        m = int(dz.shape[0])
        if m == 0:
            continue
        out = _binary_launch(kcb.fill_logit, m, nb,
                             (dz, dy, d_edges, bool(uniform), bool(right), eps, 1.0 - eps,
                              eps > 0.0))
        _add_state(state, out, kb.N_CHECK_KINDS, off)
    return state


def _add_state(state, out, nk, offset):
    """Add a chunk's state into state (all arrays but the last add; checks merge)."""
    for a, b in zip(state[:-1], out[:-1]):
        a += b
    _merge_checks(state[-1], out[-1], nk, offset)


def _dtype(x):
    """numpy dtype of a host or device array (torch dtypes have no numpy equivalent)."""
    dt = getattr(x, "dtype", None)
    try:
        return np.dtype(dt)
    except TypeError:
        return np.dtype(str(dt).replace("torch.", ""))

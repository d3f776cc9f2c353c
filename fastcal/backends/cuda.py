"""The GPU backend: host-facing fills with the CPU kernels' state.

Imported only when data in GPU memory or ``device="cuda"`` asks for it (see
:mod:`fastcal.backends`); nothing here loads Numba's CUDA target until a
GPU array is viewed or a fill runs. Every GPU helper of fastcal is here:
loading the CUDA kernels (``kernels``), device views of foreign arrays and
casts on the GPU (``as_device_array``, ``as_dtype``: the batches of
``resolve`` and ``resolve_gaussian``), grid sizes and host copies.

Every ``fill_*`` returns host numpy arrays with exactly the names, shapes,
dtypes and meaning of the matching CPU fill's result (counts int64 exact,
sums float64; the ``checks`` array with the CPU's counts and first indices,
so the same error messages come out). Inputs may be device arrays (anything
with ``__cuda_array_interface__`` or a CUDA DLPack capsule: torch CUDA
tensors, CuPy arrays, Numba device arrays), scored in place, or host arrays,
streamed to the device in chunks: each chunk is copied into a pinned buffer
and sent on its own CUDA stream, two chunks in flight, so the copy of one
overlaps the fill of the other.
"""

from dataclasses import dataclass
import importlib
import threading

import numpy as np

from fastcal._kernels import _config
from fastcal._kernels import binary as kb
from fastcal._kernels import bootstrap as kboot
from fastcal._kernels import multiclass as km
from fastcal.backends import cpu, layout
from fastcal.inputs import validation as v
from fastcal.inputs.batch import Batch, device_kind
from fastcal.inputs.binning import kernel_edges
from fastcal.inputs.device import dtype_of as _dtype
from fastcal.inputs.device import is_device_array
from fastcal.inputs.gaussian import GaussianBatch, as_float_array, check_device_array, check_device_shapes

# Rows per host-to-device copy when the input is on the host, and at most this
# many bytes of any one array per chunk (two pinned buffers per array are kept).
CHUNK_ROWS = 1 << 26
CHUNK_BYTES = 64 << 20

NO_GPU = ("device='cuda': no CUDA GPU or driver was found (numba.cuda.is_available() is "
          "False); score on the CPU with device='cpu' (the default)")

_kernels: dict = {}


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


_k = kernels  # the name the fills below use


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


# -- arrays in GPU memory --------------------------------------------------------

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


def as_dtype(x, dtype):
    """Device array ``x`` in ``dtype``: itself, a view (bool as uint8) or a copy
    cast on the GPU (``_cuda.cast_rows``)."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype == np.bool_ and dtype == np.uint8:
        return x.view(np.uint8)
    kc = _k("_cuda")
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
    if _k("_cuda").SIMULATOR:
        return 1, 32
    return max(1, min(-(-n // (256 * rows_per_thread)), max_blocks)), 256


@dataclass
class DeviceBatch(Batch):
    """A batch filled on the GPU: its arrays in GPU memory are Numba device
    views (host ones are streamed); ``host()`` copies them, once."""

    @staticmethod
    def to_host(name, x):
        return to_host(name, x)


@dataclass
class DeviceGaussianBatch(GaussianBatch):
    """A Gaussian batch filled on the GPU; ``host()``: float64 host copies, once."""

    @staticmethod
    def to_host(name, x):
        return as_float_array(name, to_host(name, x))


def resolve(y_true, y_prob, *, logits=False, multiclass=False, soft=None):
    """The batch of a fill on the GPU: the same shape and dtype checks and
    messages as on the host, without reading the data (the gate's
    ``device_kind``). Arrays in GPU memory become Numba device views, cast
    there only where the kernels need another dtype (float16 as float32,
    integer and bool probabilities as float64, float16 labels as float32;
    bool labels are viewed as uint8); host arrays are converted as on the
    host, to be streamed. Host arrays alone load no ``numba.cuda``."""
    def get(name, x):
        return as_device_array(name, x) if is_device_array(x) else v.to_array(name, x)

    def typed(x, dtype):
        return as_dtype(x, dtype) if is_device_array(x) else v.as_dtype(x, dtype)

    y, p = get("y_true", y_true), get("y_prob", y_prob)
    kind, y_dtype, p_dtype = device_kind(y, p, logits=logits, multiclass=multiclass, soft=soft)
    return DeviceBatch(kind, typed(y, y_dtype), typed(p, p_dtype), device="cuda")


def resolve_gaussian(errors, covs, group_shape=()):
    """The Gaussian batch of a fill on the GPU: device views of the arrays in
    GPU memory, float64 host arrays of the others; shapes checked as on the host."""
    errors, covs = (check_device_array(name, as_device_array(name, x)) if is_device_array(x)
                    else as_float_array(name, x)
                    for name, x in (("errors", errors), ("covs", covs)))
    d = check_device_shapes(errors, covs, group_shape)
    return DeviceGaussianBatch(errors, covs, d, device="cuda")


def _device_views(arrays):
    """Device arrays of the inputs: views of device inputs, whole copies of host ones."""
    cuda = _k("_cuda").cuda
    return [as_device_array("array", a) if is_device_array(a) else cuda.to_device(
        np.ascontiguousarray(a)) for a in arrays]


class _Staging:
    """Pinned host buffers and device buffers for the chunks of host inputs, two
    sets (one per stream), kept between calls while the shapes match. Each
    thread has its own: fills running at once (Dask's threaded workers) must
    not refill buffers whose copies and kernels are still queued."""

    local = threading.local()

    @classmethod
    def buffers(cls, slot, index, dtype, shape):
        cuda = _k("_cuda").cuda
        cache = cls.local.__dict__.setdefault("cache", {})
        key = (slot, index)
        have = cache.get(key)
        if have is None or have[0].dtype != dtype or have[0].shape != shape:
            have = (cuda.pinned_array(shape, dtype), cuda.device_array(shape, dtype))
            cache[key] = have
        return have


def _pipeline(arrays, n, chunk_rows, launch):
    """Run each chunk of rows through ``launch`` and yield (offset, result) in order.

    ``launch(device arrays, stream)`` enqueues a chunk's kernels on ``stream``
    and returns a function that gives the chunk's host result once the
    stream is done. Device inputs are one chunk, read in place. Host inputs
    are copied a chunk at a time into a pinned buffer and sent to the GPU
    asynchronously, alternating between two streams: while one chunk is
    copied and filled, the other's result is collected and its buffers refilled.
    """
    cuda = _k("_cuda").cuda
    on_dev = [is_device_array(a) for a in arrays]
    if all(on_dev):
        yield 0, launch([as_device_array("array", a) for a in arrays], 0)()
        return
    srcs = [as_device_array("array", a) if d else np.asarray(a) for a, d in zip(arrays, on_dev)]
    row_bytes = max(a.dtype.itemsize * int(np.prod(a.shape[1:], dtype=np.int64))
                    for a, d in zip(srcs, on_dev) if not d)
    step = max(1, min(int(chunk_rows), CHUNK_BYTES // max(row_bytes, 1), max(n, 1)))
    streams = (cuda.stream(), cuda.stream())
    pending = []
    for j, start in enumerate(range(0, max(n, 1), step)):
        if len(pending) == 2:
            off, stream, finish = pending.pop(0)
            stream.synchronize()
            yield off, finish()
        stop = min(n, start + step)
        m = stop - start
        stream = streams[j % 2]
        views = []
        for idx, (a, d) in enumerate(zip(srcs, on_dev)):
            if d:
                views.append(a[start:stop])
                continue
            host, dev = _Staging.buffers(j % 2, idx, a.dtype, (step, *a.shape[1:]))
            dev_m = dev[:m]
            if m:
                host[:m] = a[start:stop]
                dev_m.copy_to_device(host[:m], stream=stream)
            views.append(dev_m)
        pending.append((start, stream, launch(views, stream)))
    for off, stream, finish in pending:
        stream.synchronize()
        yield off, finish()


# Partial rows of more than this many values in all are added on the GPU.
DEVICE_SUM_MIN = 1 << 16


def _sum_blocks(part):
    """The sum over axis 0 (the blocks) of a device array, as a host array:
    on the host when small, else by ``_cuda.sum_rows`` (only the sum is copied)."""
    if part.size <= DEVICE_SUM_MIN:
        return part.copy_to_host().sum(axis=0)
    kc = _k("_cuda")
    flat = part.reshape(part.shape[0], part.size // part.shape[0])
    out = kc.cuda.device_array(flat.shape[1], part.dtype)
    threads = 32 if kc.SIMULATOR else 256
    kc.sum_rows[-(-flat.shape[1] // threads), threads](flat, out)
    return out.copy_to_host().reshape(part.shape[1:])


def _block_checks(kind, part_c):
    """The checks of one launch: each block's merged in block order."""
    checks = layout.new_checks(kind)
    for row in part_c.copy_to_host():
        layout.add_checks(checks, row)
    return checks


def _reduce_binary(parts):
    """Sums of the per-block partial results of one launch, by name."""
    part_i, part_f, part_t, part_c = parts
    return {"counts": _sum_blocks(part_i), "sums": _sum_blocks(part_f),
            "totals": part_t.copy_to_host().sum(axis=0),
            "checks": _block_checks("binary", part_c)}


def _binary_launch(kernel, nb, args, stream):
    """Enqueue a binary fill of the chunk whose first argument is args[0];
    returns the function that gives its counts, sums, totals and checks."""
    kc = _k("_cuda")
    kcb = _k("cuda_binary")
    cuda = kc.cuda
    n = int(args[0].shape[0])
    if n == 0:
        return lambda: None
    plan = kc.plan_launch(n, nb, kcb.N_TOT + kcb.N_CHK)
    blocks = plan.blocks
    parts = (cuda.device_array((blocks, nb + 1, 3), np.int64),
             cuda.device_array((blocks, nb + 1, 3), np.float64),
             cuda.device_array((blocks, kcb.N_TOT), np.float64),
             cuda.device_array((blocks, kcb.N_CHK), np.int64))
    kernel[blocks, plan.threads, stream, plan.shared](*args, plan.warp_bins, plan.bins_global,
                                                      plan.scratch("bins"), *parts)
    return lambda: _reduce_binary(parts)


def fill_binary(y, p, edges, uniform, right, omit, eps, with_logs, *, chunk_rows=CHUNK_ROWS):
    """GPU version of ``cpu.fill_binary``: counts, sums, totals, checks by name.

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
    state = cpu.named(cpu.BINARY, kb.new_state(nb))

    def launch(devs, stream):
        dy, dp = devs
        return _binary_launch(kcb.fill_prob, nb, (dp, dy, d_edges, uniform, bool(right), is32,
                                                  eps, 1.0 - eps, bool(with_logs)), stream)

    return _fill_chunks("binary", state, (y, p), n, chunk_rows, launch)


def _fill_chunks(kind, state, arrays, n, chunk_rows, launch):
    """``state`` plus the state of each chunk of ``_pipeline``, by the layout of
    ``kind`` (first rows of the checks counted from the chunk's offset)."""
    for off, out in _pipeline(arrays, n, chunk_rows, launch):
        if out is not None:
            layout.add(state, out, layout.FILLED[kind], off)
    return state


def fill_binary_logits(y, z, edges, uniform, right, eps, *, chunk_rows=CHUNK_ROWS):
    """GPU version of ``_kernels.logits.fill_binary_logits_range`` on all rows.

    Returns counts, sums, totals, checks in the binary layout; check kinds
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
    state = cpu.named(cpu.BINARY, kb.new_state(nb))

    def launch(devs, stream):
        dy, dz = devs
        return _binary_launch(kcb.fill_logit, nb, (dz, dy, d_edges, bool(uniform), bool(right),
                                                   eps, 1.0 - eps, eps > 0.0), stream)

    return _fill_chunks("logits", state, (y, z), n, chunk_rows, launch)


def gather_buckets(y, p, slot, cap):
    """``equal_mass._gather`` on the GPU: (keys, labels, filled) of the rows whose
    bucket has slot >= 0, slot after slot, each in row order (one part)."""
    kc = _k("_cuda")
    kce = _k("cuda_equal_mass")
    cuda = kc.cuda
    dy, dp = _device_views((y, p))
    n_slots = int(slot.max()) + 1 if slot.size else 0
    cap = int(cap)
    count = cuda.to_device(np.zeros(1, np.int64))
    out = (cuda.device_array(max(cap, 1), np.int64), cuda.device_array(max(cap, 1), np.int64),
           cuda.device_array(max(cap, 1), np.int64), cuda.device_array(max(cap, 1), np.uint8))
    n = int(dp.shape[0])
    if n:
        blocks, threads = grid(n, 64, 4096)
        kce.gather_rows[blocks, threads](dp, dy, cuda.to_device(np.ascontiguousarray(slot)),
                                         cap, count, *out)
    total = int(count.copy_to_host()[0])
    m = min(total, cap)
    rows, slots, keys, labels = (a.copy_to_host()[:m] for a in out)
    order = np.lexsort((rows, slots))
    filled = np.bincount(slots, minlength=n_slots).astype(np.int64)
    if total > cap:  # more rows than counted: the caller reports the data changed
        filled[0] += total - cap
    return keys[order], labels[order], filled


def ranking_pair(y, p, *, kind, logits=False, renormalize=False):
    """``equal_mass.ranking_pair`` on the GPU: (labels, values in [0, 1]) as
    device arrays. Binary probabilities are ranked as they are; binary logits
    by their sigmoid, K-class rows by (correct, confidence), both float64.
    Invalid rows get NaN (the fill has found them already)."""
    kc = _k("_cuda")
    cuda = kc.cuda
    dy, dp = _device_views((y, p))
    if kind == "binary":
        return dy, dp
    n = int(dp.shape[0])
    x = cuda.device_array(n, np.float64)
    if n == 0:
        return (dy if kind == "logits" else cuda.device_array(0, np.uint8)), x
    blocks, threads = grid(n, 1, 8192)
    if kind == "logits":
        _k("cuda_equal_mass").sigmoid[blocks, threads](dp, x)
        return dy, x
    correct = cuda.device_array(n, np.uint8)
    _k("cuda_multiclass").confidence_kernel(int(dp.shape[1]))[blocks, threads](
        dp, dy, bool(logits), bool(renormalize), float(_config.SUM_TOL), x, correct)
    return correct, x


def bootstrap_fits(n_bins):
    """True if the GPU bootstrap kernel takes this many bins (at most 94)."""
    return _k("cuda_bootstrap").threads_for(n_bins) > 0


def fill_bootstrap(y, x, row0, edges, uniform, right, seed, n_boot):
    """``_kernels.bootstrap.boot_fill_parallel`` on the GPU: boot_counts (n_boot, B,
    3) int64 and boot_sums (n_boot, B) float64 of ranked rows (labels, values in
    [0, 1]; NaN rows carry no weight), rows numbered from ``row0``; the same
    weights."""
    kc = _k("_cuda")
    kbt = _k("cuda_bootstrap")
    cuda = kc.cuda
    edges = np.ascontiguousarray(edges, np.float64)
    nb = edges.shape[0] - 1
    dy, dx = _device_views((y, x))
    n = int(dx.shape[0])
    if n == 0:
        return {"boot_counts": np.zeros((n_boot, nb, kb.N_COUNTS), np.int64),
                "boot_sums": np.zeros((n_boot, nb), np.float64)}
    threads = kbt.threads_for(nb)
    by = -(-n_boot // threads)
    tiles = -(-n // threads)
    bx = max(1, min(tiles, 1 if kc.SIMULATOR else max(1, 1024 // by)))
    rows_per_block = -(-tiles // bx) * threads
    bx = max(1, -(-n // rows_per_block))
    part_i = cuda.device_array((bx, n_boot, nb, 3), np.int64)
    part_f = cuda.device_array((bx, n_boot, nb), np.float64)
    kbt.boot_fill[(bx, by), threads, 0, threads * (2 * nb + 4) * 8](
        dx, dy, int(row0), cuda.to_device(edges), bool(uniform), bool(right),
        kboot.seed_key(seed), rows_per_block, part_i, part_f)
    return {"boot_counts": _sum_blocks(part_i), "boot_sums": _sum_blocks(part_f)}


def fill_multiclass(y, P, edges, uniform, right, eps, logits, renormalize, classwise,
                    with_logs=True, *, tol=None, chunk_rows=CHUNK_ROWS):
    """GPU version of ``_kernels.multiclass.fill_parallel`` on all rows.

    Returns counts, sums, totals, class_counts and class_sums (class-wise
    only), checks by name, as ``cpu.fill_multiclass``. ``P`` is (n, K)
    probabilities or (``logits``) scores, ``y`` (n,) labels; device or host
    arrays.
    """
    if tol is None:
        tol = _config.SUM_TOL
    kc = _k("_cuda")
    kcm = _k("cuda_multiclass")
    cuda = kc.cuda
    edges = np.ascontiguousarray(edges, np.float64)
    nb = edges.shape[0] - 1
    n, K = int(P.shape[0]), int(P.shape[1])
    eps = 0.0 if eps is None else float(eps)
    f32 = bool(uniform) and edges[1] != 1.0 / nb
    d_edges = cuda.to_device(edges)
    state = cpu.named(cpu.MULTICLASS, km.new_state(nb, K, classwise))
    if not classwise:
        del state["class_counts"], state["class_sums"]
    kern = kcm.kernel(K)
    class_slots = kc.CLASS_FIELDS * K * nb if classwise else 0

    def launch(devs, stream):
        dy, dP = devs
        m = int(dP.shape[0])
        if m == 0:
            return lambda: None
        plan = kc.plan_launch(m, nb, kcm.N_TOT + kcm.N_CHK, class_slots)
        blocks = plan.blocks
        parts = (cuda.device_array((blocks, nb + 1, 3), np.int64),
                 cuda.device_array((blocks, nb + 1, 3), np.float64),
                 cuda.device_array((blocks, kcm.N_TOT), np.float64),
                 cuda.device_array((blocks, kcm.N_CHK), np.int64),
                 cuda.device_array((blocks, max(class_slots, 1)), np.float64))
        kern[blocks, plan.threads, stream, plan.shared](
            dP, dy, d_edges, bool(uniform), bool(right), f32, eps, bool(logits),
            bool(renormalize), float(tol), bool(classwise), bool(with_logs), plan.warp_bins,
            plan.bins_global, plan.scratch("bins"), plan.classes_global, plan.scratch("classes"),
            *parts)
        return lambda: _reduce_multiclass(parts, K, nb, classwise)

    return _fill_chunks("multiclass", state, (y, P), n, chunk_rows, launch)


def _reduce_multiclass(parts, K, nb, classwise):
    """Sums of the per-block partial results of one multi-class launch, by name."""
    part_i, part_f, part_t, part_c, part_w = parts
    out = {"counts": _sum_blocks(part_i), "sums": _sum_blocks(part_f),
           "totals": part_t.copy_to_host().sum(axis=0),
           "checks": _block_checks("multiclass", part_c)}
    if classwise:
        w = _sum_blocks(part_w)  # counts are exact integers in float64 (below 2**53)
        ints = np.rint(w[:2 * K * nb]).astype(np.int64)
        out["class_counts"] = np.stack([ints[:K * nb].reshape(K, nb),
                                        ints[K * nb:].reshape(K, nb)], axis=-1)
        out["class_sums"] = w[2 * K * nb:].reshape(K, nb)
    return out


def fill_gaussian(errors, covs, n_groups, *, sym_rtol=None):
    """NEES statistics per group on the GPU, for ``GaussianAccumulator``.

    ``errors`` (n, d) and ``covs`` (n, d, d), device or host, rows ordered so
    that row r belongs to group r mod n_groups (``errors.reshape(-1, d)`` of
    an accumulator's ``(..., *shape, d)`` input). Returns a dict of host
    arrays: ``count`` and ``nees_sum`` (n_groups,) over rows with a valid
    NEES, ``n_bad`` (n_groups,) rows holding NaN or inf, and for each of
    "nan", "asymmetric", "not_pd" the total count and first flat row index
    (-1 if none), as ``checks[name] = (count, first)``.
    """
    if sym_rtol is None:
        sym_rtol = _config.SYMMETRY_RTOL
    kc = _k("_cuda")
    kcg = _k("cuda_gaussian")
    cuda = kc.cuda
    de, dc = _device_views((errors, covs))
    n, d = int(de.shape[0]), int(de.shape[1])
    G = int(n_groups)
    runs = n // G if G else 0
    threads = 32 if kc.SIMULATOR else 128
    target = 64 if kc.SIMULATOR else 132 * 2048
    S = max(1, min(runs, target // max(G, 1)))
    blocks = max(1, -(-(S * G) // threads))
    part_n = cuda.device_array((S, G), np.int64)
    part_s = cuda.device_array((S, G), np.float64)
    part_b = cuda.device_array((S, G), np.int64)
    part_k = cuda.device_array((S, G, 2 * kcg.N_STATUS), np.int64)
    if n:
        kcg.kernel(d)[blocks, threads](de, dc, G, S, float(sym_rtol), part_n, part_s, part_b,
                                       part_k)
        pk = part_k.copy_to_host().reshape(-1, 2 * kcg.N_STATUS)
        out = {"count": part_n.copy_to_host().sum(axis=0),
               "nees_sum": part_s.copy_to_host().sum(axis=0),
               "n_bad": part_b.copy_to_host().sum(axis=0)}
    else:
        pk = np.zeros((0, 2 * kcg.N_STATUS), np.int64)
        out = {"count": np.zeros(G, np.int64), "nees_sum": np.zeros(G),
               "n_bad": np.zeros(G, np.int64)}
    checks = {}
    for j, name in enumerate(("nan", "asymmetric", "not_pd")):
        firsts = pk[:, kcg.N_STATUS + j]
        firsts = firsts[firsts >= 0]
        checks[name] = (int(pk[:, j].sum()), int(firsts.min()) if firsts.size else -1)
    out["checks"] = checks
    return out


# -- the interface (see fastcal.backends) ---------------------------------------

def fill(batch, spec):
    """One chunk's state in its kind's layout and its checks (named arrays, as
    the CPU's ``fill``), filled on the GPU (device arrays in place, host arrays
    streamed through pinned buffers)."""
    y, p = batch.y, batch.p
    if batch.kind == "multiclass":
        edges, uniform = spec.edges(batch.dtype)
        return fill_multiclass(y, p, edges, uniform, spec.right, spec.eps, spec.logits,
                               spec.renormalize, spec.classwise, spec.with_logs)
    if batch.kind == "logits":
        edges, uniform = spec.edges(np.float64)
        return fill_binary_logits(y, p, edges, uniform, spec.right, spec.eps)
    edges, uniform = spec.edges(batch.dtype)
    return fill_binary(y, p, edges, uniform, spec.right, spec.omit, spec.eps, spec.with_logs)


class _Ranked:
    """A ranked pair (labels, values) in GPU memory, copied to the host once if
    a part needs it there."""

    def __init__(self, y, x):
        self.y, self.x = y, x
        self._host = None

    def host(self):
        if self._host is None:
            self._host = self.y.copy_to_host(), self.x.copy_to_host()
        return self._host


def fill_parts(batch, spec, row0, filled):
    """The parts of a chunk the GPU filled (named arrays, as the CPU's
    ``fill_parts``): bootstrap replicates, ACE's buckets, the smooth ECE grid,
    ECCE's buckets.

    Data in GPU memory is ranked there (``ranking_pair``, as ``gather`` ranks
    it for the later passes), and its replicates and buckets are filled there
    too; only the buckets of a chunk with invalid (omitted) rows, replicates
    over more bins than the GPU kernel takes, the smooth ECE grid and ECCE's
    buckets come from the ranked pair (9 bytes a row) copied to the host. Host data
    streamed to the GPU is ranked on the host (the CPU backend's ``fill_parts``).
    """
    if not spec.parts:
        return {}
    y, p = batch.y, batch.p
    if not is_device_array(p):
        return cpu.fill_parts(batch, spec, row0, {})
    if batch.kind == "multiclass":  # invalid (omitted) rows: ranked NaN, bucketed on the host
        invalid = bool(filled["checks"][: km.N_CHECK_KINDS].any())
    else:
        invalid = filled["counts"][spec.n_bins, 0] > 0
    pair = _Ranked(*ranking_pair(y, p, kind=batch.kind, logits=spec.logits,
                                 renormalize=spec.renormalize))
    out = _replicates(pair, row0, spec, batch.dtype)
    out.update(_buckets(pair, spec, invalid))
    if spec.smooth:  # no GPU kernel (see fill_grid)
        out.update(cpu.fill_grid(*pair.host(), spec))
    if spec.ecce:  # no GPU kernel: the ranked pair's buckets are summed on the host
        out.update(cpu.fill_ecce(*pair.host(), spec))
    return out


def _replicates(pair, row0, spec, dtype):
    """Bootstrap replicates of a ranked pair in GPU memory: on the GPU when its
    kernel takes this many bins, else from the pair copied to the host."""
    if not spec.n_boot:
        return {}
    if not bootstrap_fits(spec.n_bins):
        return cpu.fill_replicates(*pair.host(), row0, spec, dtype)
    edges, uniform = spec.edges(dtype)
    return fill_bootstrap(pair.y, pair.x, row0, edges, uniform, spec.right, spec.seed,
                          spec.n_boot)


def _buckets(pair, spec, invalid):
    """ACE's buckets of a ranked pair in GPU memory, filled there; a pair with
    invalid (NaN) rows is bucketed on the host."""
    if not spec.ace_buckets:
        return {}
    if invalid:
        return cpu.fill_buckets(*pair.host(), spec)
    return _device_buckets(pair, spec)[0]


def _device_buckets(pair, spec):
    """(buckets, rows found invalid) of a ranked pair in GPU memory: buckets
    floor(x * B), B a power of two, are exactly the uniform bins of the binary
    fill; its trash row counts the invalid rows (the buckets are right only
    when there are none)."""
    nb = spec.ace_buckets
    fine = fill_binary(pair.y, pair.x, kernel_edges(nb, _dtype(pair.x).str), True, False, False,
                       0.0, False)
    out = cpu.zeros(spec, "fine_counts", "fine_p")
    out["fine_counts"][:-1] = fine["counts"][:nb]
    out["fine_p"][:-1] = fine["sums"][:nb, 0]
    return out, int(fine["counts"][nb, 0])


def fill_replicates(y, x, row0, spec, dtype):
    """Bootstrap replicates of ranked rows (as the CPU's ``fill_replicates``):
    on the GPU for a pair in GPU memory, else on the host."""
    if not is_device_array(x):
        return cpu.fill_replicates(y, x, row0, spec, dtype)
    return _replicates(_Ranked(*_device_views((y, x))), row0, spec, dtype)


def fill_buckets(y, x, spec):
    """ACE's value buckets of ranked rows (as the CPU's ``fill_buckets``): on the
    GPU for a pair in GPU memory without NaN values, else on the host."""
    if not spec.ace_buckets:
        return {}
    if not is_device_array(x):
        return cpu.fill_buckets(y, x, spec)
    pair = _Ranked(*_device_views((y, x)))
    out, n_invalid = _device_buckets(pair, spec)
    return cpu.fill_buckets(*pair.host(), spec) if n_invalid else out


def fill_grid(y, x, spec):
    """The smooth ECE grid of ranked rows, on the host (no GPU kernel: float64
    atomics would make the sums depend on scheduling); a pair in GPU memory is
    copied (9 bytes a row)."""
    if not spec.smooth:
        return {}
    if is_device_array(x):
        y, x = _Ranked(*_device_views((y, x))).host()
    return cpu.fill_grid(y, x, spec)


def ranked(batch, pair):
    """The ranked pair on the host. Logits and K classes in GPU memory are ranked
    on the GPU (the values its fill bucketed: libdevice's exp may differ from the
    host's by an ulp) and only the pair is copied; other data, a class column
    (TACE) and the rows as given (``raw``), on the host, as the CPU ranks it."""
    y, p = batch.y, batch.p
    if pair.get("column") is None and not pair.get("raw") and is_device_array(p) \
            and batch.kind in ("logits", "multiclass"):
        ry, rx = (a.copy_to_host() for a in ranking_pair(
            y, p, kind=batch.kind, logits=pair["logits"], renormalize=pair["renormalize"]))
        return v.as_labels_1d(ry), rx
    y, p = batch.host()
    return cpu.ranking_pair(y, p, kind=batch.kind, **pair)


def ranked_buckets(batch, pair, omit, n_buckets, threads):
    """None: the ranked pair (``ranked``) and its value bucket statistics are made
    apart (the parts' own pass adds them)."""
    return None


def gather(batch, pair):
    """The equal-mass gather of boundary rows on the GPU for data in GPU memory
    (None for host data: the host parts gather it)."""
    y, p = batch.y, batch.p
    if pair.get("column") is not None:  # a class column (TACE): ranked on the host
        return None
    if not is_device_array(p) and batch.kind in ("logits", "multiclass"):
        return None

    def run(omit, slot, cap_start):
        ry, rx = ranking_pair(y, p, kind=batch.kind, logits=pair["logits"],
                              renormalize=pair["renormalize"])
        return [gather_buckets(ry, rx, slot, cap_start[-1])]

    return run


def fill_nees(batch, shape, nan_policy):
    """The NEES per group of ``shape`` (count, nees_sum), as the CPU backend's
    ``fill_nees``, computed on the GPU where only the per-group count and sum
    come back.

    Rows are read in place when they reshape to ``(n, dim)`` without a copy
    (C-contiguous, or already 2-D / 3-D with any strides); other strided device
    arrays are copied to the host and scored on the CPU, since Numba device
    arrays cannot be reshaped without a copy. A covariance that is not
    symmetric positive definite, or NaN/inf with ``nan_policy='raise'``, sends
    the inputs to the host so the CPU raises its own message.
    """
    errors, covs = batch.errors, batch.covs
    d = batch.d
    n = int(np.prod(errors.shape[:-1], dtype=np.int64))
    flat_e, flat_c = _flat(errors, (n, d)), _flat(covs, (n, d, d))
    if flat_e is None or flat_c is None:
        return cpu.fill_nees(batch, shape, nan_policy)
    n_groups = int(np.prod(shape, dtype=np.int64))
    out = fill_gaussian(flat_e, flat_c, n_groups)
    checks = out["checks"]
    if checks["asymmetric"][0] or checks["not_pd"][0] or (
            nan_policy == "raise" and checks["nan"][0]):
        # the CPU words the error (first index in the input's shape, eigenvalue)
        return cpu.fill_nees(batch, shape, nan_policy)
    counts, sums = out["count"], out["nees_sum"]
    if nan_policy == "propagate":
        # as the CPU: rows with NaN/inf count, and make their group's sum NaN
        counts = counts + out["n_bad"]
        sums = np.where(out["n_bad"] > 0, np.nan, sums)
    return {"count": counts.reshape(shape), "nees_sum": sums.reshape(shape)}


def _flat(x, shape):
    """``x`` as ``shape`` without a copy, or None (a non-contiguous device array)."""
    if tuple(x.shape) == shape:
        return x  # any strides: the kernel indexes [i, a] and [i, a, c]
    if isinstance(x, np.ndarray) or x.is_c_contiguous():
        return x.reshape(shape)
    return None


__all__ = ["NO_GPU", "as_device_array", "as_dtype", "is_available", "is_device_array",
           "resolve", "resolve_gaussian", "to_host"]

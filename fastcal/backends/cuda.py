"""The GPU backend: host-facing fills with the CPU kernels' state.

Imported only when data in GPU memory or ``device="cuda"`` asks for it (see
:mod:`fastcal.backends`); nothing here loads Numba's CUDA target until a
fill runs.

Every ``fill_*`` returns host numpy arrays with exactly the shapes, dtypes
and meaning of the matching CPU kernel's result (counts int64 exact, sums
float64; the ``checks`` array with the CPU's counts and first indices, so
the same error messages come out). Inputs may be device arrays (anything
with ``__cuda_array_interface__`` or a CUDA DLPack capsule: torch CUDA
tensors, CuPy arrays, Numba device arrays), scored in place, or host arrays,
streamed to the device in chunks: each chunk is copied into a pinned buffer
and sent on its own CUDA stream, two chunks in flight, so the copy of one
overlaps the fill of the other.
"""

import threading

import numpy as np

from fastcal.inputs.device import NO_GPU, as_device_array, as_dtype, is_device_array, to_host
from fastcal.inputs.device import dtype_of as _dtype
from fastcal.inputs.device import grid as _grid
from fastcal.inputs.device import kernels as _k
from fastcal.backends import cpu
from fastcal.inputs import validation as v
from fastcal.inputs.binning import kernel_edges
from fastcal._kernels import _config
from fastcal._kernels import binary as kb
from fastcal._kernels import bootstrap as kboot
from fastcal._kernels import multiclass as km

# Rows per host-to-device copy when the input is on the host, and at most this
# many bytes of any one array per chunk (two pinned buffers per array are kept).
CHUNK_ROWS = 1 << 26
CHUNK_BYTES = 64 << 20


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


def _merge_checks(checks, part, nk, offset):
    """Add a chunk's checks (first indices counted from offset) into checks."""
    for k in range(nk):
        checks[k] += part[k]
        f = part[nk + k]
        if f >= 0:
            f += offset
            if checks[nk + k] < 0 or f < checks[nk + k]:
                checks[nk + k] = f


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


def _reduce_binary(parts):
    """Sums of the per-block partial results of one launch."""
    part_i, part_f, part_t, part_c = parts
    counts = _sum_blocks(part_i)
    sums = _sum_blocks(part_f)
    totals = part_t.copy_to_host().sum(axis=0)
    part_c = part_c.copy_to_host()
    checks = kb.new_state(0)[3]
    for row in part_c:
        _merge_checks(checks, row, kb.N_CHECK_KINDS, 0)
    return counts, sums, totals, checks


def _binary_launch(kernel, nb, args, stream):
    """Enqueue a binary fill of the chunk whose first argument is args[0];
    returns the function that gives its (counts, sums, totals, checks)."""
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

    def launch(devs, stream):
        dy, dp = devs
        return _binary_launch(kcb.fill_prob, nb, (dp, dy, d_edges, uniform, bool(right), is32,
                                                  eps, 1.0 - eps, bool(with_logs)), stream)

    for off, out in _pipeline((y, p), n, chunk_rows, launch):
        if out is not None:
            _add_state(state, out, kb.N_CHECK_KINDS, off)
    return state


def fill_binary_logits(y, z, edges, uniform, right, eps, *, chunk_rows=CHUNK_ROWS):
    """GPU version of ``_kernels.logits.fill_binary_logits_range`` on all rows.

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

    def launch(devs, stream):
        dy, dz = devs
        return _binary_launch(kcb.fill_logit, nb, (dz, dy, d_edges, bool(uniform), bool(right),
                                                   eps, 1.0 - eps, eps > 0.0), stream)

    for off, out in _pipeline((y, z), n, chunk_rows, launch):
        if out is not None:
            _add_state(state, out, kb.N_CHECK_KINDS, off)
    return state


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
        blocks, threads = _grid(n, 64, 4096)
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
    blocks, threads = _grid(n, 1, 8192)
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
    """``_kernels.bootstrap.boot_fill_parallel`` on the GPU: (counts (n_boot, B, 3)
    int64, sums (n_boot, B) float64) of ranked rows (labels, values in [0, 1];
    NaN rows carry no weight), rows numbered from ``row0``; the same weights."""
    kc = _k("_cuda")
    kbt = _k("cuda_bootstrap")
    cuda = kc.cuda
    edges = np.ascontiguousarray(edges, np.float64)
    nb = edges.shape[0] - 1
    dy, dx = _device_views((y, x))
    n = int(dx.shape[0])
    if n == 0:
        return np.zeros((n_boot, nb, 3), np.int64), np.zeros((n_boot, nb), np.float64)
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
    return _sum_blocks(part_i), _sum_blocks(part_f)


def _add_state(state, out, nk, offset):
    """Add a chunk's state into state (all arrays but the last add; checks merge)."""
    for a, b in zip(state[:-1], out[:-1]):
        a += b
    _merge_checks(state[-1], out[-1], nk, offset)


def fill_multiclass(y, P, edges, uniform, right, eps, logits, renormalize, classwise,
                    with_logs=True, *, tol=None, chunk_rows=CHUNK_ROWS):
    """GPU version of ``_kernels.multiclass.fill_parallel`` on all rows.

    Returns (counts, sums, totals, ccounts, csums, checks) with the shapes of
    ``_kernels.multiclass.new_state``. ``P`` is (n, K) probabilities or
    (``logits``) scores, ``y`` (n,) labels; device or host arrays.
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
    state = km.new_state(nb, K, classwise)
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
        return lambda: _reduce_multiclass(parts, K, nb, classwise, state)

    for off, out in _pipeline((y, P), n, chunk_rows, launch):
        if out is not None:
            _add_state(state, out, km.N_CHECK_KINDS, off)
    return state


def _reduce_multiclass(parts, K, nb, classwise, state):
    """Sums of the per-block partial results of one multi-class launch."""
    part_i, part_f, part_t, part_c, part_w = parts
    checks = km.new_state(0, 0)[5]
    for row in part_c.copy_to_host():
        _merge_checks(checks, row, km.N_CHECK_KINDS, 0)
    if classwise:
        w = _sum_blocks(part_w)  # counts are exact integers in float64 (below 2**53)
        ints = np.rint(w[:2 * K * nb]).astype(np.int64)
        ccounts = np.stack([ints[:K * nb].reshape(K, nb), ints[K * nb:].reshape(K, nb)], axis=-1)
        csums = w[2 * K * nb:].reshape(K, nb)
    else:
        ccounts, csums = state[3].copy(), state[4].copy()
    return (_sum_blocks(part_i), _sum_blocks(part_f), part_t.copy_to_host().sum(axis=0),
            ccounts, csums, checks)


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

def fill(acc, batch):
    """One chunk's state for ``acc`` in its kind's CPU layout, filled on the GPU
    (device arrays in place, host arrays streamed through pinned buffers)."""
    y, p = batch.y, batch.p
    right = acc.closed == "right"
    if batch.kind == "multiclass":
        edges, uniform = acc.kernel_edges(batch.dtype)
        return fill_multiclass(y, p, edges, uniform, right, acc.eps, acc.logits,
                               acc.renormalize, acc.classwise, acc.with_logs)
    if batch.kind == "logits":
        edges, uniform = acc.kernel_edges(np.float64)
        return fill_binary_logits(y, p, edges, uniform, right, acc.eps)
    edges, uniform = acc.kernel_edges(batch.dtype)
    return fill_binary(y, p, edges, uniform, right, acc.nan_policy == "omit", acc.eps,
                       acc.with_logs)


def fill_parts(acc, batch, row0, filled):
    """ACE's buckets, the bootstrap replicates and the smooth ECE grid of a
    chunk the GPU filled.

    Data in GPU memory is ranked there (``ranking_pair``, as ``gather`` ranks
    it for the later passes), and its replicates and buckets are filled there
    too; only the buckets of a chunk with invalid (omitted) rows, replicates
    over more bins than the GPU kernel takes and the smooth ECE grid come
    from the ranked pair (9 bytes a row) copied to the host. Host data streamed to the GPU is
    ranked on the host (the CPU backend's ``fill_parts``).
    """
    if not (acc.ace_buckets or acc.n_boot or acc.grid.on):
        return
    y, p = batch.y, batch.p
    if not is_device_array(p):
        cpu.fill_parts(acc, batch, row0)
        return
    if batch.kind == "multiclass":  # invalid (omitted) rows: ranked NaN, bucketed on the host
        invalid = bool(filled[5][: km.N_CHECK_KINDS].any())
    else:
        invalid = filled[0][acc.n_bins, 0] > 0
    ry, rx = ranking_pair(y, p, kind=batch.kind, logits=acc.logits, renormalize=acc.renormalize)
    pair = []  # the ranked pair on the host, copied once if needed

    def on_host():
        if not pair:
            pair.extend(a.copy_to_host() for a in (ry, rx))
        return pair

    if acc.n_boot:
        edges, uniform = acc.kernel_edges(batch.dtype)
        right = acc.closed == "right"
        if bootstrap_fits(edges.shape[0] - 1):
            counts, sums = fill_bootstrap(ry, rx, row0, edges, uniform, right, acc.seed,
                                          acc.n_boot)
            acc.boot.counts += counts
            acc.boot.sums += sums
        else:
            acc.boot.fill(*on_host(), row0, edges, uniform, right, acc.threads)
    if acc.grid.on:  # no GPU kernel: float64 atomics would make sums depend on scheduling
        acc.grid.fill(*on_host(), acc.threads)
    if not acc.ace_buckets:
        return
    if invalid:
        acc.buckets.add_ranked(*on_host(), acc.nan_policy == "omit")
        return
    # buckets floor(x * B), B a power of two: exactly the uniform bins of the fill
    nb = acc.ace_buckets
    fine = fill_binary(ry, rx, kernel_edges(nb, _dtype(rx).str), True, False, False, 0.0,
                       False)
    acc.buckets.counts[:-1] += fine[0][:nb]
    acc.buckets.p[:-1] += fine[1][:nb, 0]


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


def fill_nees(acc, batch, nan_policy):
    """(counts, sums) of the NEES per group, as the CPU backend's ``fill_nees``,
    computed on the GPU where only the per-group count and sum come back.

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
        return cpu.fill_nees(acc, batch, nan_policy)
    n_groups = int(np.prod(acc.shape, dtype=np.int64))
    out = fill_gaussian(flat_e, flat_c, n_groups)
    checks = out["checks"]
    if checks["asymmetric"][0] or checks["not_pd"][0] or (
            nan_policy == "raise" and checks["nan"][0]):
        # the CPU words the error (first index in the input's shape, eigenvalue)
        return cpu.fill_nees(acc, batch, nan_policy)
    counts, sums = out["count"], out["nees_sum"]
    if nan_policy == "propagate":
        # as the CPU: rows with NaN/inf count, and make their group's sum NaN
        counts = counts + out["n_bad"]
        sums = np.where(out["n_bad"] > 0, np.nan, sums)
    return counts, sums


def _flat(x, shape):
    """``x`` as ``shape`` without a copy, or None (a non-contiguous device array)."""
    if tuple(x.shape) == shape:
        return x  # any strides: the kernel indexes [i, a] and [i, a, c]
    if isinstance(x, np.ndarray) or x.is_c_contiguous():
        return x.reshape(shape)
    return None


__all__ = ["NO_GPU", "as_dtype", "is_available", "is_device_array", "to_host"]

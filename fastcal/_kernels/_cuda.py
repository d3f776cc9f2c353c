"""The one place that imports Numba's CUDA target, and the GPU kernels' own helpers.

Importing this module imports ``numba.cuda`` (the ``numba-cuda`` package, or
Numba's built-in simulator when ``NUMBA_ENABLE_CUDASIM=1``). Nothing in
``import fastcal`` reaches it: ``fastcal.cuda`` imports it on first use.

numba-cuda 0.30.x registers an overload for ``np.row_stack`` when it is
imported; numpy 2.5 removed that name, so the import fails there. The name is
restored as ``np.vstack`` (what it always was) before the import, and only
if it is missing.

The per-row arithmetic (bins, logs, terms) is not here: the kernels call the
CPU kernels' own functions in ``rows.py`` and ``mathfn.py``. What is here is
what only a GPU has: per-thread and per-warp state, warp votes and block
reductions.
"""

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from numba import config, cuda  # noqa: E402

from fastcal._kernels import _lazy  # noqa: E402

_lazy.materialize()  # the GPU kernels call the CPU kernels' row maths, which Numba reads as dispatchers

SIMULATOR = bool(config.ENABLE_CUDASIM)

# Counters of one thread are packed into one float64 slot of its private
# shared-memory bins: count + a * 2**17 + b * 2**34 stays an exact integer
# below 2**53 while each field is below 2**17, which the host guarantees by
# launching at least n / 2**16 threads.
PACK = 131072.0  # 2**17
PACK2 = PACK * PACK
MAX_ROWS_PER_THREAD = 1 << 16
SLOTS_PER_BIN = 4  # per-thread bins: packed counts, sum p, ECD sum, variance sum

# dtypes for cuda.local.array / cuda.shared.array: numba-cuda takes numpy scalar
# types; the simulator's dynamic shared memory needs a numpy dtype instance.
F64 = np.dtype(np.float64) if SIMULATOR else np.float64
I64 = np.dtype(np.int64) if SIMULATOR else np.int64

if SIMULATOR:
    # The simulator runs kernels as Python, and calls the shared row maths
    # (rows.py, mathfn.py) compiled for the CPU, which take NumPy arrays only.
    def plain(a):
        """The NumPy array behind a simulated device array."""
        return getattr(a, "_ary", a)
else:
    @cuda.jit(device=True, inline=True)
    def plain(a):
        """The array itself (under the simulator: the NumPy array behind it)."""
        return a


@cuda.jit(device=True, inline=True)
def unpack(v):
    """The three counters packed into the float64 v (see PACK)."""
    c = np.int64(v)
    a = c >> 17
    return c & 131071, a & 131071, a >> 17


# -- warp-private bins --------------------------------------------------------
#
# Beyond a few dozen bins, private bins per thread no longer fit in shared
# memory, and class-wise state (K x n_bins per class) never does. Those are kept
# per warp instead: the lanes of a warp that hold the same bin are grouped
# (match_any), their values are added in increasing lane order by the group's
# lowest lane, and that lane alone writes the warp's copy. No atomics, so the
# sums come out the same on every run; counts are popcounts of ballots.
#
# Numba's simulator has no warp intrinsics, so there the five below exchange
# values through the block (two syncthreads each): every thread of the block
# must call them together, and any/all answer for the whole block (callers treat
# extra rounds as no-ops). Simulated blocks run whole warps only.

FULL_MASK = np.int32(-1)
WARP = 32
BIN_FIELDS = 6  # warp-private bins: count, positives, correct, sum p, ECD sum, variance sum
CLASS_FIELDS = 3  # warp-private class-wise state: count, labels, sum p_k

if SIMULATOR:
    import threading

    def _lanes(value):
        """The values of the 32 lanes of this thread's warp (simulator only)."""
        t = threading.current_thread()
        buf = t._manager.__dict__.setdefault("_fastcal_lanes", {})
        buf[t.thread_id] = value
        t.syncthreads()
        base = t.thread_id - t.thread_id % WARP
        out = [buf.get(base + j) for j in range(WARP)]
        t.syncthreads()
        return out

    def _block_any(pred):
        t = threading.current_thread()
        return bool(t.syncthreads_or(bool(pred)))

    def warp_match(key):
        lanes = _lanes(key)
        return sum(1 << j for j, k in enumerate(lanes) if k is not None and k == key)

    def warp_ballot(pred):
        return sum(1 << j for j, v in enumerate(_lanes(bool(pred))) if v)

    def warp_shfl(x, src):
        return _lanes(x)[src]

    def warp_any(pred):
        return _block_any(pred)

    def warp_all(pred):
        return not _block_any(not pred)
else:
    @cuda.jit(device=True, inline=True)
    def warp_match(key):
        return np.int64(cuda.match_any_sync(FULL_MASK, key)) & 0xFFFFFFFF

    @cuda.jit(device=True, inline=True)
    def warp_ballot(pred):
        return np.int64(cuda.ballot_sync(FULL_MASK, pred)) & 0xFFFFFFFF

    @cuda.jit(device=True, inline=True)
    def warp_shfl(x, src):
        return cuda.shfl_sync(FULL_MASK, x, src)

    @cuda.jit(device=True, inline=True)
    def warp_any(pred):
        return cuda.any_sync(FULL_MASK, pred)

    @cuda.jit(device=True, inline=True)
    def warp_all(pred):
        return cuda.all_sync(FULL_MASK, pred)


@cuda.jit(device=True, inline=True)
def low_lane(mask):
    """Index of the lowest set bit of a non-zero lane mask."""
    return cuda.popc((mask & -mask) - 1)


@cuda.jit(device=True, inline=True)
def group_sum(grp, lane, nf, a, b, c):
    """Sums of the first nf of (a, b, c) over the lanes in grp (this lane's
    group), added in increasing lane order, so every run gives the same bits.
    All lanes call it; nf is a constant (1 or 3).

    The group's values are pulled one lane per round: as many rounds as the
    largest group; a warp that is one group takes a fixed butterfly instead.
    """
    if warp_all(grp == 0xFFFFFFFF):
        for m in (16, 8, 4, 2, 1):
            src = lane ^ m
            a += warp_shfl(a, src)
            if nf > 1:
                b += warp_shfl(b, src)
                c += warp_shfl(c, src)
        return a, b, c
    rest = grp
    sa = 0.0
    sb = 0.0
    sc = 0.0
    while warp_any(rest != 0):
        src = lane
        if rest != 0:
            src = low_lane(rest)
        va = warp_shfl(a, src)
        vb = 0.0
        vc = 0.0
        if nf > 1:
            vb = warp_shfl(b, src)
            vc = warp_shfl(c, src)
        if rest != 0:
            sa += va
            sb += vb
            sc += vc
            rest &= rest - 1
    return sa, sb, sc


if SIMULATOR:
    # One exchange per call instead of a dozen: the same groups, the same
    # lane-ordered sums and the same single writer as the GPU versions below.
    # (group_sum itself runs in the simulator through tests/backends/test_cuda_sim.py.)
    def _group_rows(key, lane, row):
        lanes = _lanes((key, row))
        mine = [r for k, r in lanes if k == key]
        first = next(j for j, (k, _) in enumerate(lanes) if k == key)
        return (mine if key >= 0 and lane == first else None)

    def bins_add_warp(store, base, nb1, key, lane, pos, ok, p, e, v):
        rows = _group_rows(key, lane, (pos, ok, p, e, v))
        if rows is not None:
            s = base + key
            store[s] += len(rows)
            store[s + nb1] += sum(1 for r in rows if r[0])
            store[s + 2 * nb1] += sum(1 for r in rows if r[1])
            for f in range(3):
                acc = 0.0
                for r in rows:
                    acc += r[2 + f]
                store[s + (3 + f) * nb1] += acc

    def classes_add_warp(store, base, knb, key, lane, lab, q):
        rows = _group_rows(key, lane, (lab, q))
        if rows is not None:
            s = base + key
            store[s] += len(rows)
            store[s + knb] += sum(1 for r in rows if r[0])
            acc = 0.0
            for r in rows:
                acc += r[1]
            store[s + 2 * knb] += acc
else:
    @cuda.jit(device=True, inline=True)
    def bins_add_warp(store, base, nb1, key, lane, pos, ok, p, e, v):
        """Add each lane's row to its warp's bins ``store[base + f * nb1 + key]``
        (f: the BIN_FIELDS); ``key < 0``: nothing to add. All lanes call it."""
        grp = warp_match(key)
        pm = warp_ballot(pos and key >= 0)
        om = warp_ballot(ok and key >= 0)
        sp, se, sv = group_sum(grp, lane, 3, p, e, v)
        if key >= 0 and lane == low_lane(grp):
            s = base + key
            store[s] += np.float64(cuda.popc(grp))
            s += nb1
            store[s] += np.float64(cuda.popc(grp & pm))
            s += nb1
            store[s] += np.float64(cuda.popc(grp & om))
            s += nb1
            store[s] += sp
            s += nb1
            store[s] += se
            s += nb1
            store[s] += sv


    @cuda.jit(device=True, inline=True)
    def classes_add_warp(store, base, knb, key, lane, lab, q):
        """Add each lane's class-k probability q to its warp's class-wise state
        ``store[base + f * knb + key]`` (f: the CLASS_FIELDS; key = k * n_bins + bin,
        < 0 for nothing); ``lab``: the row's label is k. All lanes call it."""
        grp = warp_match(key)
        lm = warp_ballot(lab and key >= 0)
        sq, _, _ = group_sum(grp, lane, 1, q, 0.0, 0.0)
        if key >= 0 and lane == low_lane(grp):
            s = base + key
            store[s] += np.float64(cuda.popc(grp))
            store[s + knb] += np.float64(cuda.popc(grp & lm))
            store[s + 2 * knb] += sq


# -- block reductions: one partial row per block, in a fixed order -------------

@cuda.jit(device=True, inline=True)
def reduce_thread_bins(sh, T, tid, nb1, part_i, part_f, blk):
    """Add the threads' private bins (SLOTS_PER_BIN slot-major slots, packed counts)."""
    for s in range(tid, SLOTS_PER_BIN * nb1, T):
        f = s // nb1
        b = s - f * nb1
        base = s * T
        if f == 0:
            c0 = np.int64(0)
            c1 = np.int64(0)
            c2 = np.int64(0)
            for j in range(T):
                a0, a1, a2 = unpack(sh[base + j])
                c0 += a0
                c1 += a1
                c2 += a2
            part_i[blk, b, 0] = c0
            part_i[blk, b, 1] = c1
            part_i[blk, b, 2] = c2
        else:
            acc = 0.0
            for j in range(T):
                acc += sh[base + j]
            part_f[blk, b, f - 1] = acc


@cuda.jit(device=True, inline=True)
def reduce_warp_bins(store, base0, nw, T, tid, nb1, part_i, part_f, blk):
    """Add the block's warp-private bins (BIN_FIELDS slot-major fields per warp)."""
    size = BIN_FIELDS * nb1
    for s in range(tid, size, T):
        f = s // nb1
        b = s - f * nb1
        acc = 0.0
        for w in range(nw):
            acc += store[base0 + w * size + s]
        if f < 3:
            part_i[blk, b, f] = np.int64(acc)
        else:
            part_f[blk, b, f - 3] = acc


@cuda.jit(device=True, inline=True)
def reduce_totals(sh, T, tid, n_tot, nk, tot, chk, part_t, part_c, blk):
    """Add the threads' totals and merge their checks (counts, smallest first index),
    through shared memory (n_tot + 2 * nk slots per thread)."""
    cuda.syncthreads()
    for k in range(n_tot):
        sh[k * T + tid] = tot[k]
    for k in range(2 * nk):
        sh[(n_tot + k) * T + tid] = np.float64(chk[k])
    cuda.syncthreads()
    for r in range(tid, n_tot + nk, T):
        if r < n_tot:
            acc = 0.0
            for j in range(T):
                acc += sh[r * T + j]
            part_t[blk, r] = acc
        else:
            k = r - n_tot
            cnt = np.int64(0)
            first = np.int64(-1)
            for j in range(T):
                cnt += np.int64(sh[(n_tot + k) * T + j])
                fj = np.int64(sh[(n_tot + nk + k) * T + j])
                if fj >= 0 and (first < 0 or fj < first):
                    first = fj
            part_c[blk, k] = cnt
            part_c[blk, nk + k] = first


@cuda.jit
def sum_rows(a, out):
    """out[j] = a[0, j] + a[1, j] + ... in row order: the blocks' partial rows added
    on the GPU when they are too many to copy (one thread per column)."""
    for j in range(cuda.grid(1), a.shape[1], cuda.gridsize(1)):
        acc = a[0, j]
        for r in range(1, a.shape[0]):
            acc += a[r, j]
        out[j] = acc


@cuda.jit
def cast_rows(src, dst):
    """dst[i] = src[i] in dst's dtype (bool as 0/1, float16 widened): input the
    fills do not read as it is, cast once on the GPU."""
    for i in range(cuda.grid(1), src.shape[0], cuda.gridsize(1)):
        dst[i] = src[i]


@cuda.jit
def cast_rows_2d(src, dst):
    """cast_rows of (n, K) rows."""
    for i in range(cuda.grid(1), src.shape[0], cuda.gridsize(1)):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


@cuda.jit(device=True, inline=True)
def bins_add_thread(sh, T, tid, nb1, b, packed, pv, ev, vv):
    """Add a row to this thread's private bins (SLOTS_PER_BIN slot-major slots)."""
    s = b * T + tid
    sh[s] += packed
    s += nb1 * T
    sh[s] += pv
    s += nb1 * T
    sh[s] += ev
    s += nb1 * T
    sh[s] += vv


@cuda.jit(device=True, inline=True)
def bins_add(sh, store, wbase, T, tid, lane, nb1, warp_bins, use, b, pos, ok, pv, ev, vv):
    """Add a row (or nothing, when not ``use``) to the bins: the warp's, which every
    lane of the warp must call together, or this thread's own."""
    if warp_bins:
        bins_add_warp(store, wbase, nb1, b if use else -1, lane, pos, ok, pv, ev, vv)
    elif use:
        bins_add_thread(sh, T, tid, nb1, b, 1.0 + (PACK if pos else 0.0) + (PACK2 if ok else 0.0),
                        pv, ev, vv)


@cuda.jit(device=True, inline=True)
def totals_start(tot, chk, nk):
    """Zero a thread's totals and check counts; no first row yet (-1)."""
    for k in range(tot.shape[0]):
        tot[k] = 0.0
    for k in range(nk):
        chk[k] = 0
        chk[nk + k] = -1


@cuda.jit(device=True, inline=True)
def totals_add(tot, brier, nll, ecd):
    """Add a row's Brier, NLL and ECD terms to a thread's five totals."""
    tot[0] += brier
    tot[1] += nll
    tot[2] += ecd * ecd
    tot[3] += brier * brier
    tot[4] += nll * nll


@cuda.jit(device=True, inline=True)
def totals_add_within(tot, p2, py):
    """Add a row's p**2 and p*y (K classes: sum_k p_k**2 and p_y) to totals 5 and 6,
    the global sums of the Brier decomposition's within-bin terms."""
    tot[5] += p2
    tot[6] += py


@cuda.jit(device=True, inline=True)
def bins_start(sh, gw, T, tid, nb1, warp_bins, wglobal):
    """Zero this block's bins (per thread, or per warp in shared memory or in the rows
    of gw); returns (store, base of this warp, base of the block's warps)."""
    nw = T // WARP
    size = BIN_FIELDS * nb1
    if not warp_bins:
        for s in range(SLOTS_PER_BIN * nb1):
            sh[s * T + tid] = 0.0
        return sh, 0, 0
    base0 = cuda.blockIdx.x * nw * size if wglobal else 0
    store = gw if wglobal else sh
    for s in range(tid, nw * size, T):
        store[base0 + s] = 0.0
    cuda.syncthreads()
    return store, base0 + (tid // WARP) * size, base0


@cuda.jit(device=True, inline=True)
def bins_finish(sh, store, base0, T, tid, nb1, warp_bins, n_tot, nk, tot, chk, part_i, part_f,
                part_t, part_c):
    """The block's partial row: its bins (as bins_start laid them out), totals and checks."""
    blk = cuda.blockIdx.x
    cuda.syncthreads()
    if warp_bins:
        reduce_warp_bins(store, base0, T // WARP, T, tid, nb1, part_i, part_f, blk)
    else:
        reduce_thread_bins(sh, T, tid, nb1, part_i, part_f, blk)
    reduce_totals(sh, T, tid, n_tot, nk, tot, chk, part_t, part_c, blk)


# -- launch plans ------------------------------------------------------------------

SHARED_LIMIT = 48 * 1024  # dynamic shared memory per block without an opt-in
# Per-warp rows in global memory (bins or class-wise state too big for shared
# memory) take at most this many bytes, unless the row count itself needs more.
GLOBAL_ROWS_BYTES = 256 << 20


class Plan:
    """How a fill kernel is launched: grid, block, shared bytes and where state lives.

    ``warp_bins``: bins per warp (else per thread); ``bins_global`` /
    ``classes_global``: the warp-private copies are rows of a global array of
    ``bins_row`` / ``classes_row`` float64 per warp (else in shared memory).
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def scratch(self, what):
        """The global array for the per-warp rows of ``what`` ("bins" or "classes"),
        one element when they live in shared memory (the kernel zeroes its rows)."""
        on = self.bins_global if what == "bins" else self.classes_global
        row = self.bins_row if what == "bins" else self.classes_row
        return cuda.device_array(self.blocks * (self.threads // WARP) * row if on else 1,
                                 np.float64)


def plan_launch(n_items, n_bins, n_small, class_slots=0):
    """The launch plan for n_items rows, n_bins bins (+ the trash bin), n_small
    per-thread slots for totals and checks, and class_slots float64 of class-wise
    state per warp (0: none).

    Bins stay private per thread while 32 threads' copies fit in shared memory
    (up to 47 bins); beyond that they are private per warp. Threads per block:
    the most of 128, 96, 64, 32 whose state fits in 48 KB; what fits for no
    block size goes to per-warp rows in global memory. Blocks: enough to fill
    every multiprocessor, fewer for small inputs; never so few that a thread
    sees MAX_ROWS_PER_THREAD rows with packed per-thread counters; not more
    per-warp global rows than GLOBAL_ROWS_BYTES unless that minimum needs them.
    """
    nb1 = n_bins + 1
    thread_row = max(SLOTS_PER_BIN * nb1, n_small)
    warp_bins = WARP * SLOTS_PER_BIN * nb1 * 8 > SHARED_LIMIT
    if not SIMULATOR:
        sizes = (128, 96, 64, 32)
    else:  # simulated threads are slow: one warp, two where warps keep state (to test that)
        sizes = (64, 32) if warp_bins or class_slots else (32,)

    def shared(T, bins_global, classes_global):
        nw = T // WARP
        if warp_bins:
            top = max(0 if bins_global else nw * BIN_FIELDS * nb1, n_small * T)
        else:
            top = thread_row * T
        return 8 * (top + (0 if classes_global or not class_slots else nw * class_slots))

    choice = None
    for bins_global, classes_global in ((False, False), (False, True), (True, True)):
        if bins_global and not warp_bins:
            continue
        for T in sizes:
            if shared(T, bins_global, classes_global) <= SHARED_LIMIT:
                choice = (T, bins_global, classes_global)
                break
        if choice:
            break
    if choice is None:
        msg = f"{n_bins} bins with {n_small} per-thread slots do not fit a GPU block"
        raise ValueError(msg)
    T, bins_global, classes_global = choice
    nw = T // WARP
    sh = shared(T, bins_global, classes_global)
    if SIMULATOR:
        n_sm, per_sm = 1, 1
    else:
        dev = cuda.get_current_device()
        n_sm = dev.MULTIPROCESSOR_COUNT
        per_sm = max(1, min(32, 2048 // T, (227 * 1024) // (sh + 1024)))
    blocks = max(1, min(n_sm * per_sm, -(-n_items // (T * 256))))
    row_bytes = 8 * nw * ((BIN_FIELDS * nb1 if bins_global else 0)
                          + (class_slots if classes_global else 0))
    if row_bytes:
        blocks = max(1, min(blocks, GLOBAL_ROWS_BYTES // row_bytes))
    if not warp_bins:
        blocks = max(blocks, -(-n_items // (T * MAX_ROWS_PER_THREAD)))
    return Plan(blocks=blocks, threads=T, shared=sh, warp_bins=warp_bins,
                bins_global=bins_global, classes_global=classes_global,
                bins_row=BIN_FIELDS * nb1, classes_row=class_slots)

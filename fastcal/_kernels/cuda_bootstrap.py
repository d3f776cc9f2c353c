"""GPU bootstrap replicates: ``bootstrap.boot_fill_range`` on the GPU, with the
same Poisson(1) weights (pure functions of seed, global row and replicate).

One thread per replicate: a block's T threads are T replicates (grid.y covers
the rest) and its rows, a contiguous range (grid.x), pass by in tiles staged
in shared memory (bin, value, packed labels, row key), every thread reading
the same row at a time. Each thread keeps its replicate's bins in shared
memory, bin-major so that a warp's lanes hit consecutive words: the three
integer counts packed in one int64 (21 bits each, flushed into the block's
partial row every FLUSH rows) and the sum of weight * value, added in row
order. No atomics: thread r alone writes replicate r's partial row. The
hashes, weights and bins are the CPU kernel's own functions (``bootstrap.py``,
``rows.py``).
"""

import numpy as np

from ._cuda import F64, I64, cuda, plain
from .bootstrap import draw, poisson1, row_key
from .rows import bin_edges

_SHIFT_POS = 21
_SHIFT_OK = 42
_FIELD = (1 << 21) - 1
FLUSH = 1 << 16  # rows between flushes: 12 * 2**16 stays below 2**21
SHARED_BYTES = 48 * 1024


def threads_for(n_bins):
    """Replicates per block whose bins and row tile fit in 48 KB of shared
    memory (64 or 32), or 0 when even 32 do not (then the host fills them)."""
    for t in (64, 32):
        if t * (2 * n_bins + 4) * 8 <= SHARED_BYTES:
            return t
    return 0


@cuda.jit
def boot_fill(p, y, row0, edges, uniform, right, skey, rows_per_block, part_i, part_f):
    """Replicates of rows [bx * rows_per_block, ...) for r = by * T + tid into
    part_i[bx, r] (b, 3) and part_f[bx, r] (b,)."""
    sh_i = cuda.shared.array(0, I64)
    sh_f = cuda.shared.array(0, F64)  # the same memory: disjoint slots of 8 bytes
    T = cuda.blockDim.x
    tid = cuda.threadIdx.x
    bx = cuda.blockIdx.x
    r = cuda.blockIdx.y * T + tid
    n_boot = part_i.shape[1]
    live = r < n_boot
    n = p.shape[0]
    edges = plain(edges)
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    # shared: [packed counts b * T + t] [sum b * T + t] then the tile's rows
    off_f = nb * T
    t_bin = 2 * nb * T
    t_pk = t_bin + T
    t_key = t_pk + T
    t_val = t_key + T
    for b in range(nb):
        sh_i[b * T + tid] = 0
        sh_f[off_f + b * T + tid] = 0.0
        if live:
            part_i[bx, r, b, 0] = 0
            part_i[bx, r, b, 1] = 0
            part_i[bx, r, b, 2] = 0
    start = bx * rows_per_block
    stop = min(start + rows_per_block, n)
    for t0 in range(start, stop, T):
        i = t0 + tid
        b = np.int64(0)
        pk = np.int64(0)
        x = 0.0
        key = np.uint64(0)
        if i < stop:
            x = np.float64(p[i])
            yv = np.float64(y[i])
            if x == x and yv == yv:  # NaN rows (omitted) carry no weight
                b = bin_edges(x, edges, nb, nbf, uniform, right)
                pos = np.int64(yv == 1.0)
                ok = np.int64((x > 0.5) == (yv == 1.0))
                pk = 1 + (pos << _SHIFT_POS) + (ok << _SHIFT_OK)
            else:
                x = 0.0
            # np.uint64(...): under the simulator the CPU functions return Python ints
            key = np.uint64(row_key(skey, row0 + i))
        cuda.syncthreads()  # the previous tile has been read
        sh_i[t_bin + tid] = b
        sh_i[t_pk + tid] = pk
        sh_i[t_key + tid] = np.int64(key)
        sh_f[t_val + tid] = x
        cuda.syncthreads()
        if live:
            for j in range(min(T, stop - t0)):
                w = poisson1(np.uint64(draw(np.uint64(sh_i[t_key + j]), r)))
                s = sh_i[t_bin + j] * T + tid
                sh_i[s] += w * sh_i[t_pk + j]
                sh_f[off_f + s] += w * sh_f[t_val + j]
        if live and ((t0 + T - start) % FLUSH == 0 or t0 + T >= stop):
            for b in range(nb):
                q = sh_i[b * T + tid]
                part_i[bx, r, b, 0] += q & _FIELD
                part_i[bx, r, b, 1] += (q >> _SHIFT_POS) & _FIELD
                part_i[bx, r, b, 2] += (q >> _SHIFT_OK) & _FIELD
                sh_i[b * T + tid] = 0
    if live:
        for b in range(nb):
            part_f[bx, r, b] = sh_f[off_f + b * T + tid]


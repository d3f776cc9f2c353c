"""GPU bootstrap replicates: ``bootstrap.boot_fill_range`` on the GPU, with the
same Poisson(1) weights (pure functions of seed, global row and replicate).

One thread per replicate: a block's T threads are T replicates (grid.y covers
the rest) and its rows, a contiguous range (grid.x), pass by in tiles staged
in shared memory (bin, value, packed labels, row key), every thread reading
the same row at a time. Each thread keeps its replicate's bins in shared
memory, bin-major so that a warp's lanes hit consecutive words: the three
integer counts packed in one int64 (21 bits each, flushed into the block's
partial row every FLUSH rows) and the sum of weight * value, added in row
order. No atomics: thread r alone writes replicate r's partial row.
"""

import numpy as np

from ._cuda import F64, I64, SIMULATOR, cuda, edges_bin
from .bootstrap import POISSON1_CDF

_G = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31, _S32 = (np.uint64(s) for s in (27, 30, 31, 32))
# top 32 bits of the first twelve Poisson(1) thresholds (the CPU's _T0.._T11)
_CDF32 = np.array([int(t) >> 32 for t in POISSON1_CDF[:12]], np.int64)

if SIMULATOR:
    # numpy scalars warn when uint64 arithmetic wraps; the wrap is the point here
    _MASK = (1 << 64) - 1

    def mul64(a, b):
        return np.uint64((int(a) * int(b)) & _MASK)

    def add64(a, b):
        return np.uint64((int(a) + int(b)) & _MASK)
else:
    @cuda.jit(device=True, inline=True)
    def mul64(a, b):
        return a * b

    @cuda.jit(device=True, inline=True)
    def add64(a, b):
        return a + b

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


@cuda.jit(device=True, inline=True)
def mix64(z):
    """splitmix64 finaliser (``bootstrap.mix64``)."""
    z = mul64(z ^ (z >> _S30), _M1)
    z = mul64(z ^ (z >> _S27), _M2)
    return z ^ (z >> _S31)


@cuda.jit(device=True, inline=True)
def poisson1(h, cdf):
    """Poisson(1) variate capped at 12 by inversion of the top 32 bits of h
    against the CPU's twelve thresholds (``bootstrap.poisson1``)."""
    u = np.int64(h >> _S32)
    w = 0
    for k in range(12):
        w += np.int64(u >= cdf[k])
    return w


@cuda.jit
def boot_fill(p, y, row0, edges, uniform, right, skey, rows_per_block, part_i, part_f):
    """Replicates of rows [bx * rows_per_block, ...) for r = by * T + tid into
    part_i[bx, r] (b, 3) and part_f[bx, r] (b,)."""
    sh_i = cuda.shared.array(0, I64)
    sh_f = cuda.shared.array(0, F64)  # the same memory: disjoint slots of 8 bytes
    cdf = cuda.const.array_like(_CDF32)
    T = cuda.blockDim.x
    tid = cuda.threadIdx.x
    bx = cuda.blockIdx.x
    r = cuda.blockIdx.y * T + tid
    n_boot = part_i.shape[1]
    live = r < n_boot
    n = p.shape[0]
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
    g = _G
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
                b = edges_bin(x, edges, nb, nbf, uniform, right)
                pos = np.int64(yv == 1.0)
                ok = np.int64((x > 0.5) == (yv == 1.0))
                pk = 1 + (pos << _SHIFT_POS) + (ok << _SHIFT_OK)
            else:
                x = 0.0
            key = mix64(mix64(mul64(np.uint64(row0 + i), g)) ^ skey)
        cuda.syncthreads()  # the previous tile has been read
        sh_i[t_bin + tid] = b
        sh_i[t_pk + tid] = pk
        sh_i[t_key + tid] = np.int64(key)
        sh_f[t_val + tid] = x
        cuda.syncthreads()
        if live:
            rg = mul64(np.uint64(r + 1), g)
            for j in range(min(T, stop - t0)):
                w = poisson1(mix64(add64(np.uint64(sh_i[t_key + j]), rg)), cdf)
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


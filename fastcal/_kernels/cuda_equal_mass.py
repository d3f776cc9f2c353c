"""GPU kernels of equal-mass bins: the sigmoid of binary logits (the values
they rank; ``cuda_multiclass.confidence_kernel`` gives those of K classes),
and the gather of the rows of the value buckets that hold a group boundary
(``equal_mass.gather_buckets`` on the CPU).

Those rows are few (a few per boundary), so each is appended through one
integer atomic counter, in whatever order the threads arrive, with its row
index; the host sorts them by (slot, row) and gets the CPU's layout and order.
"""

import math

import numpy as np

from ._cuda import cuda
from .mathfn import as_bits


@cuda.jit
def gather_rows(p, y, slot, cap, count, rows, slots, keys, labels):
    """Rows with p in [0, 1], a label that is not NaN and slot[bucket(p)] >= 0:
    row index, slot, key (p's float64 bit pattern, -0.0 as 0) and label (y == 1)
    at position count[0]++ (kept while below cap; the count goes on)."""
    n_buckets = slot.shape[0]
    scale = np.float64(n_buckets)
    top = n_buckets - 1
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        x = np.float64(p[i])
        yv = np.float64(y[i])
        if not ((x >= 0.0) and (x <= 1.0)) or yv != yv:
            continue
        s = slot[min(np.int64(x * scale), top)]
        if s < 0:
            continue
        at = cuda.atomic.add(count, 0, 1)
        if at < cap:
            rows[at] = i
            slots[at] = s
            keys[at] = max(as_bits(x), np.int64(0))
            labels[at] = np.uint8(yv == 1.0)


@cuda.jit
def sigmoid(z, x):
    """x = sigmoid(z) in float64, by ``equal_mass.ranking_pair``'s formula (libdevice's
    exp, which may differ from the host's by an ulp)."""
    for i in range(cuda.grid(1), z.shape[0], cuda.gridsize(1)):
        v = np.float64(z[i])
        if v >= 0.0:
            x[i] = 1.0 / (1.0 + math.exp(-v))
        else:
            e = math.exp(v)
            x[i] = e / (1.0 + e)

"""The grid sums of smooth ECE (Blasiok and Nakkiran, 2023): one pass, mergeable.

Each row's value x in [0, 1] is split between the two grid points around it,
j = floor(x * G) (x = 1 in the last cell) and j + 1, with weights 1 - w and
w, w = x * G - j (relplot's ``smooth_round_to_grid``). Per grid point the
weights (``mass``) and the weighted residuals x - y (``resid``) are summed
in float64; ``n`` counts the rows on the grid (int64). Sums are additive, so
chunks and threads merge by addition. Rows with x outside [0, 1] or NaN, or
y not 0/1, are skipped (the fill has already raised for them or omits them).
"""

import numpy as np

from ._lazy import njit
from ._threads import run_threads, thread_range

# Grid cells on [0, 1] (GRID + 1 points). docs/guide/metrics.md has the
# discretisation error this size gives (below relplot's own at every bandwidth).
GRID = 8192


@njit(nogil=True, error_model="numpy", cache=True)
def fill_grid_range(x, y, start, stop, mass, resid, n):
    """Add rows [start, stop) to ``mass``, ``resid`` (G + 1 points) and ``n[0]``."""
    g = mass.shape[0] - 1
    scale = np.float64(g)
    count = 0
    for i in range(start, stop):
        xv = np.float64(x[i])
        yv = np.float64(y[i])
        if not ((xv >= 0.0) & (xv <= 1.0) & ((yv == 0.0) | (yv == 1.0))):
            continue
        u = xv * scale
        j = min(np.int64(u), g - 1)
        w = u - j
        r = xv - yv
        mass[j] += 1.0 - w
        mass[j + 1] += w
        resid[j] += (1.0 - w) * r
        resid[j + 1] += w * r
        count += 1
    n[0] += count


def fill_grid(x, y, n_threads, mass, resid, n):
    """Add every row to the grid sums: one contiguous range per thread, each
    into its own arrays, added in thread order (when threads pay is the CPU
    backend's choice: ``fastcal.backends.cpu.fill_grid``)."""
    rows = x.shape[0]
    if n_threads == 1:
        fill_grid_range(x, y, 0, rows, mass, resid, n)
        return
    parts = [(np.zeros_like(mass), np.zeros_like(resid), np.zeros(1, np.int64))
             for _ in range(n_threads)]

    def run(t):
        start, stop = thread_range(t, rows, n_threads)
        fill_grid_range(x, y, start, stop, *parts[t])

    run_threads(n_threads, run)
    for m, r, c in parts:
        mass += m
        resid += r
        n += c

"""Bin edges.

Uniform edges are k / n_bins computed in float64 and then rounded to the
probabilities' own dtype, so that a float32 probability equal to
``np.float32(k / n)`` is exactly on the edge and goes to the documented side.
"""

from functools import lru_cache

import numpy as np


def uniform_edges(n_bins, dtype=np.float64):
    """Edges k / n_bins, k = 0..n_bins, rounded to ``dtype`` and returned as float64.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal import uniform_edges
    >>> uniform_edges(4)
    array([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> float(uniform_edges(10, dtype=np.float32)[7])      # 0.7 rounded to float32
    0.699999988079071
    """
    return kernel_edges(n_bins, np.dtype(dtype).str).copy()


@lru_cache(maxsize=64)
def kernel_edges(n_bins, dtype_str):
    """The same edges, shared between calls: for the kernels only, never handed to users
    (the per-call cost matters at small n)."""
    k = np.arange(n_bins + 1, dtype=np.float64)
    return (k / n_bins).astype(np.dtype(dtype_str)).astype(np.float64)


def is_uniform(edges):
    """True if edges equal uniform_edges(len - 1) in float64 or float32 rounding."""
    n = edges.shape[0] - 1
    return (np.array_equal(edges, uniform_edges(n, np.float64))
            or np.array_equal(edges, uniform_edges(n, np.float32)))

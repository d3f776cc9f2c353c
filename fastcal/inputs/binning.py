"""Bin edges, and the bins of an accumulator (:class:`Bins`).

Uniform edges are k / n_bins computed in float64 and then rounded to the
probabilities' own dtype, so that a float32 probability equal to
``np.float32(k / n)`` is exactly on the edge and goes to the documented side.
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fastcal.inputs import validation as v


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


@dataclass(frozen=True, eq=False)
class Bins:
    """The bins on [0, 1] of a state, checked once when made: ``n_bins`` uniform
    bins, or explicit ``edges`` (then ``n_bins`` is ``len(edges) - 1`` and the
    ``n_bins`` given is not used), closed on the ``closed`` side.

    Parameters
    ----------
    n_bins : int, default 10
        Number of uniform bins.
    edges : array-like, optional
        Explicit edges, strictly increasing from 0 to 1 (kept as a float64 copy).
    closed : {"left", "right"}, default "left"
        "left": bins [a, b) with the last bin [a, 1]; "right": bins (a, b]
        with the first bin [0, b].

    Raises
    ------
    ValueError
        The messages of :func:`fastcal.inputs.validation.check_choice`,
        ``check_n_bins`` and ``check_edges``.

    Notes
    -----
    Two bins are equal when their edges and closed side are: the same
    ``n_bins`` when both are uniform, the same values when both are explicit
    (uniform bins never equal explicit ones). States merge only with equal bins.

    Examples
    --------
    >>> from fastcal.inputs.binning import Bins
    >>> bins = Bins(n_bins=4)
    >>> bins.kernel_edges("float64")
    (array([0.  , 0.25, 0.5 , 0.75, 1.  ]), True)
    >>> Bins(edges=[0, 0.3, 1], closed="right").n_bins
    2
    """

    n_bins: int = 10
    edges: object = None
    closed: str = "left"

    def __post_init__(self):
        closed = v.check_choice("closed", self.closed, v.CLOSED)
        if self.edges is None:
            n_bins, edges = v.check_n_bins(self.n_bins), None
        else:
            edges = v.check_edges(self.edges).copy()  # a copy: the caller's array may change
            n_bins = edges.shape[0] - 1
        for name, value in (("n_bins", n_bins), ("edges", edges), ("closed", closed)):
            object.__setattr__(self, name, value)  # frozen: set once, here

    @property
    def right(self):
        """True for bins closed on the right, as the kernels take it."""
        return self.closed == "right"

    def kernel_edges(self, dtype):
        """(edges, uniform) as the kernels take them for values of ``dtype``:
        explicit edges as they are, uniform ones rounded to ``dtype`` (shared
        between calls: never hand them to users)."""
        if self.edges is not None:
            return self.edges, False
        return kernel_edges(self.n_bins, np.dtype(dtype).str), True

    def report_edges(self):
        """The edges as float64, a copy (uniform: k / n_bins)."""
        if self.edges is not None:
            return self.edges.copy()
        return uniform_edges(self.n_bins, np.float64)

    def __eq__(self, other):
        if not isinstance(other, Bins):
            return NotImplemented
        if (self.n_bins, self.closed, self.edges is None) != (
                other.n_bins, other.closed, other.edges is None):
            return False
        return self.edges is None or np.array_equal(self.edges, other.edges)

    def __hash__(self):
        edges = None if self.edges is None else self.edges.tobytes()
        return hash((self.n_bins, self.closed, edges))

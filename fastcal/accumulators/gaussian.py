"""Gaussian state: NEES count and sum per group (see :mod:`fastcal.gaussian`).

Its two arrays are declared in :data:`fastcal.backends.layout.LAYOUTS`
("gaussian"): ``count`` (int64) and ``nees_sum`` (float64, NaN in a group
that met a NaN row under ``nan_policy="propagate"``), shaped like the
accumulator's groups.
"""

from collections import namedtuple
import numbers

import numpy as np

from fastcal import backends
from fastcal.accumulators.base import Mergeable
from fastcal.backends.layout import LAYOUTS, Dims
from fastcal.inputs.validation import show

NAN_POLICIES = ("raise", "propagate", "omit")

GaussianResult = namedtuple("GaussianResult", ["count", "anees", "ecd"])
GaussianResult.__doc__ = """Reduction of a :class:`GaussianAccumulator`.

count : int or ndarray of int64
    Number of error vectors per bin.
anees : float or ndarray
    Average NEES per bin (NaN where count is 0).
ecd : float or ndarray
    Gaussian ECD per bin, ``0.5 * anees - d / 2`` (eq. 10; NaN where count is 0).
"""


def check_nan_policy(nan_policy, allowed):
    if nan_policy not in allowed:
        msg = f"nan_policy must be one of {allowed}, got {show(nan_policy)}"
        raise ValueError(msg)


class GaussianAccumulator(Mergeable):
    """Streaming, mergeable NEES / Gaussian ECD statistics per bin.

    Holds per-bin sufficient statistics: ``count`` (int64) and ``nees_sum``
    (float64). Filling is :meth:`update`; it is mergeable like the other
    accumulators (``a + b``, ``a += b``, ``sum([...])``, ``copy()``, pickle), and
    :meth:`report` reads the result. Merging adds the statistics, so results do
    not depend on how the data was chunked or in which order the parts were
    merged (up to float rounding of the sums).

    Parameters
    ----------
    dim : int
        State dimension ``d`` of every error vector.
    shape : tuple of int, default ()
        Shape of the bins, e.g. ``(n_steps,)`` to keep one statistic per time
        step. Error arrays passed to :meth:`update` have shape
        ``(..., *shape, dim)`` and are reduced over the leading ``...`` axes.

    Notes
    -----
    ``anees = nees_sum / count`` and ``ecd = 0.5 * anees - dim / 2`` (eq. 10-11).
    Empty bins report count 0 and NaN, they are never dropped.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.gaussian import GaussianAccumulator
    >>> e = np.array([[1.0, 0.0], [0.0, 3.0]])
    >>> C = np.broadcast_to(np.eye(2), (2, 2, 2))
    >>> a = GaussianAccumulator(2).update(e[:1], C[:1])
    >>> b = GaussianAccumulator(2).update(e[1:], C[1:])
    >>> (a + b).report()
    GaussianResult(count=2, anees=5.0, ecd=1.5)
    >>> sum([a, b]).report() == (a + b).report()
    True
    """

    kind = "gaussian"
    layout = LAYOUTS["gaussian"]

    def __init__(self, dim, *, shape=()):
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 1:
            msg = f"dim must be an integer >= 1, got {show(dim)}"
            raise ValueError(msg)
        try:
            shape = tuple(int(s) for s in shape)
        except TypeError:
            msg = f"shape must be a tuple of non-negative integers, got {show(shape)}"
            raise ValueError(msg) from None
        if any(s < 0 for s in shape):
            msg = f"shape must be a tuple of non-negative integers, got {show(shape)}"
            raise ValueError(msg)
        self.dim = int(dim)
        self.shape = shape
        for a in self.layout:
            setattr(self, a.name, a.zeros(self._dims()))

    def _dims(self):
        return Dims(groups=self.shape)

    def update(self, errors, covs, *, nan_policy="raise"):
        """Add error vectors and their covariances; return ``self``.

        Parameters
        ----------
        errors : array_like, shape (..., *shape, dim)
        covs : array_like, shape (..., *shape, dim, dim)
        nan_policy : {'raise', 'propagate', 'omit'}, default 'raise'
            Entries with NaN or inf: raise, make their bin NaN, or skip them
            (they are not counted).

        Notes
        -----
        If ``errors`` or ``covs`` is in GPU memory (torch CUDA tensor, CuPy,
        Numba device array) the NEES are computed there
        (the GPU backend, :mod:`fastcal.backends.cuda`) and only the per-bin count and sum
        come back; a host input beside it is copied to the GPU. Counts equal
        the CPU's, sums agree to float rounding. The rows are read in place
        when they reshape to ``(n, dim)`` without a copy (C-contiguous, or
        already 2-D / 3-D with any strides); other strided device arrays are
        copied to the host and scored on the CPU, since Numba device arrays
        cannot be reshaped without a copy. A covariance that is not symmetric
        positive definite, or NaN/inf with ``nan_policy='raise'``, sends the
        inputs to the host so the CPU raises its own message.
        """
        check_nan_policy(nan_policy, NAN_POLICIES)
        return self.update_batch(backends.resolve_gaussian(errors, covs, self.shape),
                                 nan_policy=nan_policy)

    def update_batch(self, batch, *, nan_policy="raise"):
        """``update`` with a batch checked by :func:`fastcal.backends.resolve_gaussian`;
        its backend fills it (count, nees_sum per group)."""
        if batch.d != self.dim:
            msg = (f"errors has dimension d={batch.d} on its last axis; this accumulator "
                   f"expects dim={self.dim}")
            raise ValueError(msg)
        self._add_state(backends.of(batch).fill_nees(batch, self.shape, nan_policy))
        return self

    def _check_compatible(self, other):
        self._check_type(other, "GaussianAccumulator")
        if other.dim != self.dim or other.shape != self.shape:
            msg = (
                f"cannot merge accumulators with dim={other.dim}, shape={other.shape} into "
                f"dim={self.dim}, shape={self.shape}; expected equal dim and shape"
            )
            raise ValueError(msg)

    def __repr__(self):
        return f"GaussianAccumulator(dim={self.dim}, shape={self.shape}, count={int(self.count.sum())})"

    def report(self):
        """Reduce to :class:`GaussianResult` ``(count, anees, ecd)`` per bin.

        Scalars (``int``/``float``) when ``shape == ()``, arrays of ``shape`` otherwise.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            anees = np.where(self.count > 0, self.nees_sum / np.maximum(self.count, 1), np.nan)
        ecd = 0.5 * anees - 0.5 * self.dim
        if self.shape == ():
            return GaussianResult(int(self.count), float(anees), float(ecd))
        return GaussianResult(self.count.copy(), anees, ecd)

    def result(self):
        """The same as :meth:`report` (the name of earlier versions)."""
        return self.report()

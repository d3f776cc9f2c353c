"""The grid of smooth ECE as a part of the binned state (like Bootstrap, ValueBuckets)."""

import numpy as np

from fastcal.inputs import validation as v
from fastcal.accumulators.base import Mergeable
from fastcal._kernels import smooth as ks


class SmoothGridSums(Mergeable):
    """Per grid point j / G (G = ``fastcal._kernels.smooth.GRID``) the summed
    interpolation weights (``mass``) and weighted residuals x - y (``resid``)
    of the (label, value) pairs, and the rows on the grid (``n``, int64); x is
    p, a logit's sigmoid or a K-class row's confidence (y: argmax correct).
    Off (no arrays) unless ``smooth=True``."""

    _adds = ("mass", "resid", "n")

    def __init__(self, smooth):
        self.on = bool(smooth)
        points = ks.GRID + 1 if self.on else 0
        self.mass = np.zeros(points, np.float64)
        self.resid = np.zeros(points, np.float64)
        self.n = np.zeros(1 if self.on else 0, np.int64)

    def fill(self, y, x, threads):
        """Add validated (label, value) pairs; invalid or omitted rows are skipped."""
        if self.on and x.shape[0]:
            ks.fill_grid(x, y, v.check_threads(threads), self.mass, self.resid, self.n)

    def arrays(self):
        """The summed arrays by name (views), none when off."""
        if not self.on:
            return {}
        return {"smooth_mass": self.mass, "smooth_resid": self.resid, "smooth_n": self.n}

    def _check_compatible(self, other):
        if self.on != other.on:
            msg = ("cannot merge accumulators with and without the smooth ECE grid "
                   f"(smooth={self.on} and smooth={other.on})")
            raise ValueError(msg)

    def set_report(self, rep):
        """Put smooth ECE, its bandwidth and the grid on a report (when on)."""
        if self.on:
            rep.set_smooth(self.mass, self.resid)
        return rep

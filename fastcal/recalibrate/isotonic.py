"""Isotonic regression of the label on the value: exact pool-adjacent-violators in
memory, or over ``n_fine`` value bins from a source."""

import numpy as np

from fastcal._kernels import recalibrate as kr
from fastcal.accumulators import equal_mass as em
from fastcal.recalibrate.binned import _Binned
from fastcal.recalibrate.fields import MAX_N_FINE, _array_field, _bool_field, _int_field


class IsotonicCalibration(_Binned):
    """Isotonic regression of the label on the value (binary; top-label for K classes).

    ``fit`` on arrays is exact pool-adjacent-violators over the distinct
    values. It equals scikit-learn's IsotonicRegression with
    ``out_of_bounds="clip"`` (the same thresholds and predictions, to
    rounding) only when no two distinct values lie within 1e-15 of each other:
    scikit-learn pools such near-ties into one threshold, this fit keeps them
    apart. ``fit_source`` is one pass over ``n_fine`` value bins (module
    docstring: resolution 1 / n_fine, exact when each bin holds one distinct
    value). ``transform`` interpolates linearly between the thresholds and
    clips outside them.

    Parameters
    ----------
    logits : bool, default False
    n_fine : int, default 65536
    nan_policy : {"raise", "omit"}, default "raise"

    Attributes
    ----------
    x_, y_ : ndarray
        Thresholds (increasing values) and the fitted probability at each.
    exact_ : bool
        True for a fit on arrays, False for a fit from the fine histogram.
    n_, n_classes_, passes_ : int
    """

    method = "isotonic"

    def __init__(self, *, logits=False, n_fine=65536, nan_policy="raise"):
        self.logits = logits
        self.n_fine = n_fine
        self.nan_policy = nan_policy

    size = ("n_fine", MAX_N_FINE)

    def _fit_map(self, data, in_memory):
        if in_memory:
            y, x = em.ranking_pair(data.batch.y, data.batch.p, kind=data.batch.kind,
                                   logits=self.logits)
            x = np.asarray(x, dtype=np.float64)
            counts, positives, _, n, n_nan = self._values(data, 1)  # checks the rows
            keep = ~(np.isnan(x) | np.isnan(np.asarray(y, np.float64)))
            x, y = x[keep], np.asarray(y, np.float64)[keep]
            order = np.argsort(x, kind="stable")
            x, y = x[order], y[order]
            ux, start = np.unique(x, return_index=True)
            w = np.diff(np.append(start, x.shape[0])).astype(np.float64)
            ymean = np.add.reduceat(y, start) / w
            self.exact_ = True
        else:
            counts, positives, sum_x, n, n_nan = self._values(data, self.n_fine)
            nz = counts > 0
            w = counts[nz].astype(np.float64)
            ux = sum_x[nz] / w
            ymean = positives[nz] / w
            self.exact_ = False
        fit = np.empty_like(ymean)
        kr.pav(ux, ymean, w, fit)
        keep = np.ones(fit.shape[0], bool)  # drop points inside flat runs (as scikit-learn)
        keep[1:-1] = (fit[1:-1] != fit[:-2]) | (fit[1:-1] != fit[2:])
        self.x_, self.y_ = ux[keep], fit[keep]
        return int(n), n_nan

    def _map(self, x, dtype):
        return np.interp(np.clip(x, self.x_[0], self.x_[-1]), self.x_, self.y_)

    def _params(self):
        return {"exact": self.exact_, "n_fine": int(self.n_fine), "x": self.x_.tolist(),
                "y": self.y_.tolist()}

    def _set_params(self, params):
        pre = "params."
        self.exact_ = _bool_field(params, "exact", prefix=pre)
        self.n_fine = _int_field(params, "n_fine", 1, MAX_N_FINE, prefix=pre, default=65536)
        x = _array_field(params, "x", 0.0, 1.0, None, prefix=pre)
        y = _array_field(params, "y", 0.0, 1.0, None, prefix=pre)
        if y.shape != x.shape:
            msg = f"params.x and params.y must have equal lengths; got {x.size} and {y.size}"
            raise ValueError(msg)
        bad = np.flatnonzero(np.diff(x) <= 0)
        if bad.size:
            msg = (f"params.x must be strictly increasing; params.x[{bad[0] + 1}] = "
                   f"{x[bad[0] + 1]!r} follows {x[bad[0]]!r}")
            raise ValueError(msg)
        bad = np.flatnonzero(np.diff(y) < 0)
        if bad.size:
            msg = (f"params.y must be non-decreasing; params.y[{bad[0] + 1}] = "
                   f"{y[bad[0] + 1]!r} follows {y[bad[0]]!r}")
            raise ValueError(msg)
        self.x_, self.y_ = x, y

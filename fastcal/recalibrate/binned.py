"""What isotonic regression and histogram binning share: one pass of value bins,
and the map of the value applied to binary or top-label probabilities."""

import numpy as np

from fastcal.inputs import validation as v
from fastcal.recalibrate.base import _check_common, _Recalibration
from fastcal.recalibrate.fields import _check_size
from fastcal.recalibrate.passes import _edge_dtype, _pass_values


class _Binned(_Recalibration):
    """Shared by isotonic regression and histogram binning: a map of the value
    (p, the sigmoid of the logit, or the top-label confidence)."""

    size = None  # (the option that sizes the value bins, its largest value)

    def _fit(self, data, in_memory):
        self.logits = _check_common(self.logits, self.nan_policy, 1, 1e-12)
        name, most = self.size
        setattr(self, name, _check_size(name, getattr(self, name), most))
        self.n_, self.n_omitted_ = self._fit_map(data, in_memory)
        self.n_classes_ = data._n_classes
        self.passes_ = data.passes

    def _fit_map(self, data, in_memory):
        """Fit the map; returns (rows fitted on, rows omitted)."""
        raise NotImplementedError

    def _values(self, data, n_bins, report_edges=False):
        counts, positives, sum_x, bad = data.map(
            True, _pass_values, (int(n_bins), self.logits, report_edges))
        n = int(counts.sum())
        data.check(bad[0], bad[1], n)
        return counts, positives, sum_x, n, int(bad[0])

    def _map(self, x, dtype):
        """The map of values x (float64); ``dtype``: that of the probabilities they
        came from (the report's edges for them)."""
        raise NotImplementedError

    def transform(self, y_prob):
        """Recalibrated probabilities; K classes: the top-label probability is
        mapped and the others rescaled to share the rest, so that every row sums
        to 1 (float64, to rounding) whatever the input's dtype or its rows' sums.

        The others are divided by their own sum, not by 1 - max p: near max p = 1
        the two differ by the input's rounding, amplified by 1 / (1 - max p).
        A row whose other classes are all 0 shares the rest evenly among them;
        rows stay finite and non-negative whatever that sum is, subnormal
        included (:func:`with_top_label`).
        """
        self._check_fitted()
        p = v.to_array("y_prob", y_prob)
        dtype = _edge_dtype(p, self.logits)
        kind, x = self._input(p)
        q = self._probabilities(kind, x)
        if kind != "multiclass":
            return self._map(q, dtype)
        k = np.argmax(q, axis=1)
        return with_top_label(q, k, self._map(q[np.arange(q.shape[0]), k], dtype))


def with_top_label(q, k, new):
    """K-class rows ``q`` (float64) with class ``k[i]`` of row i set to ``new[i]``
    and the other classes rescaled to share 1 - new[i] in their own ratios.

    Each other class is divided by the others' own sum first (a share in [0, 1]:
    no term exceeds the sum of the non-negative terms it is part of), then
    multiplied by 1 - new: finite whatever that sum is, subnormal included
    (1 - new divided by a subnormal sum overflows to inf, and inf * 0 is NaN).
    A row whose other classes are all 0 shares 1 - new evenly among them.
    Rows stay non-negative and sum to 1 to rounding; a NaN row stays NaN.
    """
    rows = np.arange(q.shape[0])
    out = q.copy()
    out[rows, k] = 0.0
    rest = out.sum(axis=1)  # the other classes' own sum
    flat = rest == 0.0  # a certain row: share the rest evenly
    out /= np.where(flat, 1.0, rest)[:, None]
    if flat.any():
        out[flat] = 1.0 / (q.shape[1] - 1)
    out *= (1.0 - new)[:, None]
    out[rows, k] = new
    return out

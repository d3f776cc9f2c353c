"""Histogram binning: each of the report's bins mapped to its fraction of positives."""

import numpy as np

from fastcal.inputs.binning import kernel_edges
from fastcal.recalibrate.binned import _Binned
from fastcal.recalibrate.fields import MAX_MAP_BINS, _array_field, _field, _int_field


class HistogramBinning(_Binned):
    """Histogram binning: the value's bin (``n_bins`` equal bins of [0, 1], the
    bins of :func:`fastcal.calibration_report`) mapped to its fraction of positives.

    The bins are the report's to the last row: left-closed (the last closed),
    with the edges k / n_bins rounded to float32 for float32 probabilities
    (binary, or K-class top-label) and float64 otherwise (logits: values
    computed in float64), in the fit and in ``transform`` alike.
    Exact from any source (one pass of counts). An empty bin maps to its midpoint.

    Parameters
    ----------
    n_bins : int, default 15
    logits : bool, default False
    nan_policy : {"raise", "omit"}, default "raise"

    Attributes
    ----------
    values_ : ndarray (n_bins,)
    counts_ : ndarray (n_bins,) of int64
    n_, n_classes_, passes_ : int
    """

    method = "histogram"

    def __init__(self, *, n_bins=15, logits=False, nan_policy="raise"):
        self.n_bins = n_bins
        self.logits = logits
        self.nan_policy = nan_policy

    size = ("n_bins", MAX_MAP_BINS)

    def _fit_map(self, data, in_memory):
        counts, positives, _, n, n_nan = self._values(data, self.n_bins, report_edges=True)
        mid = (np.arange(self.n_bins) + 0.5) / self.n_bins
        with np.errstate(invalid="ignore", divide="ignore"):
            self.values_ = np.where(counts > 0, positives / np.maximum(counts, 1), mid)
        self.counts_ = counts
        return int(n), n_nan

    def _map(self, x, dtype):
        nb = self.n_bins
        edges = kernel_edges(nb, np.dtype(dtype).str)  # the report's, as in the fit
        j = np.minimum((np.where(np.isnan(x), 0.0, x) * nb).astype(np.int64), nb - 1)
        j = np.clip(j, 0, nb - 1)
        up = (j < nb - 1) & (x >= edges[np.minimum(j + 1, nb)])
        j = j + up
        down = (j > 0) & (x < edges[j])
        j = j - down
        out = self.values_[np.clip(j, 0, nb - 1)]
        return np.where(np.isnan(x), np.nan, out)

    def _params(self):
        return {"n_bins": int(self.n_bins), "values": self.values_.tolist(),
                "counts": self.counts_.tolist()}

    def _set_params(self, params):
        pre = "params."
        nb = _int_field(params, "n_bins", 1, MAX_MAP_BINS, prefix=pre)
        values = params.get("values")
        if not isinstance(values, list) or len(values) != nb:
            raise _field(pre + "values", values, f"a list of params.n_bins = {nb} numbers")
        counts = params.get("counts")
        if counts is not None:  # optional (what the fit saw); integers >= 0, one per bin
            if not isinstance(counts, list) or len(counts) != nb:
                raise _field(pre + "counts", counts, f"a list of params.n_bins = {nb} integers")
            for i, c in enumerate(counts):
                if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < (1 << 63):
                    raise _field(f"{pre}counts[{i}]", c, "an integer >= 0")
        self.values_ = _array_field(params, "values", 0.0, 1.0, MAX_MAP_BINS, prefix=pre)
        self.n_bins = nb
        self.counts_ = np.asarray(counts if counts is not None else np.zeros(nb), np.int64)

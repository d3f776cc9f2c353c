"""What the four recalibration methods share: fitting from arrays or a source,
checking the input of ``transform``, saving (``to_dict`` / ``to_json``)."""

import json

import numpy as np

from fastcal.inputs import validation as v
from fastcal.inputs.batch import resolve_predictions
from fastcal.inputs.validation import show
from fastcal.recalibrate.passes import PROBABILITIES
from fastcal.recalibrate.sources import _Data
from fastcal.sources.arrays import ArraySource

NAN_POLICIES = ("raise", "omit")


FORMAT_VERSION = 1


class _Recalibration:
    method = None

    def __call__(self, y_prob):
        return self.transform(y_prob)

    def _check_fitted(self):
        if not hasattr(self, "n_"):
            msg = f"this {type(self).__name__} is not fitted yet; call fit or fit_source first"
            raise ValueError(msg)

    def fit(self, y_true, y_prob, *, threads=None):
        """Fit on arrays in memory (labels, probabilities or logits; (N, K) for K classes).

        Returns
        -------
        self
        """
        data = _Data.arrays(y_true, y_prob, logits=self.logits, nan_policy=self.nan_policy,
                            threads=threads)
        self._fit(data, in_memory=True)
        return self

    def fit_source(self, source, *, n_classes=None):
        """Fit from a source of the driver (``fastcal.sources``: a FileSource, a
        DaskSource, an ArraySource), reading it in passes.

        ``n_classes``: K, for a source whose number of classes cannot be read
        before its data (Dask partitions of (N, K) probabilities).
        """
        if isinstance(source, ArraySource):
            return self.fit(source.y_true, source.y_prob)
        data = _Data.of_source(source, logits=self.logits, nan_policy=self.nan_policy,
                               n_classes=n_classes)
        self._fit(data, in_memory=False)
        return self

    def _input(self, y_prob):
        """(kind, float64 values) of the predictions to transform, checked against
        what the map was fitted on; the kind is the gate's."""
        batch = resolve_predictions(y_prob, logits=self.logits)
        p = batch.p
        multi = self.n_classes_ is not None
        if (batch.kind == "multiclass") != multi:
            want = "(N, K) class probabilities" if multi else "one value per row"
            msg = (f"y_prob has shape {p.shape}; this {type(self).__name__} was fitted on "
                   f"{want}")
            raise ValueError(msg)
        if multi and self.n_classes_ > 0 and p.shape[1] != self.n_classes_:
            msg = (f"y_prob has {p.shape[1]} classes; this {type(self).__name__} was fitted on "
                   f"{self.n_classes_}")
            raise ValueError(msg)
        return batch.kind, np.asarray(p, dtype=np.float64)

    def _probabilities(self, kind, p):
        """Probabilities (binary: of class 1; K: rows) of validated input of ``kind``."""
        return PROBABILITIES[kind](p, self.logits)

    def to_dict(self):
        """A JSON-able dict: method, options, fitted parameters."""
        self._check_fitted()
        return {"fastcal_recalibration": FORMAT_VERSION, "method": self.method,
                "logits": self.logits,
                "n_classes": None if self.n_classes_ in (None, -1) else int(self.n_classes_),
                "n": int(self.n_), "params": self._params()}

    def to_json(self, **kwargs):
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def __repr__(self):
        fitted = ", ".join(f"{k}={v!r}" for k, v in self._params().items()
                           if not isinstance(v, list)) if hasattr(self, "n_") else "not fitted"
        return f"{type(self).__name__}({fitted})"


def _check_common(logits, nan_policy, max_passes, tol):
    v.check_choice("nan_policy", nan_policy, NAN_POLICIES)
    if isinstance(max_passes, bool) or not isinstance(max_passes, int) or max_passes < 1:
        msg = f"max_passes must be a positive integer; got {show(max_passes)}"
        raise ValueError(msg)
    if not (isinstance(tol, (int, float)) and 0.0 < tol < 1e-2):
        msg = f"tol must be a number in (0, 0.01); got {show(tol)}"
        raise ValueError(msg)
    return bool(logits)


def _check_both_labels(counts, what):
    """Refuse a binary fit whose rows all have one label (counts: the pass's
    per-label feature histogram): its optimum is at infinity or inverts the ranking."""
    n_pos, n_neg = int(counts[1].sum()), int(counts[0].sum())
    if n_pos == 0 or n_neg == 0:
        label = 1 if n_neg == 0 else 0
        msg = (f"{what} needs rows of both labels; got {n_pos + n_neg} rows, every one "
               f"with label {label}; no map is fitted")
        raise ValueError(msg)

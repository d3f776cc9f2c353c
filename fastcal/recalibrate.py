"""Recalibration judged by ECD: temperature, Platt, isotonic and histogram binning.

Each method is a small fitted object with ``fit(y_true, y_prob)`` (arrays in
memory), ``fit_source(source)`` (any source of the driver: arrays, a file read
in chunks, Dask partitions), ``transform(y_prob)`` (probabilities from the same
kind of input: probabilities or logits, 1-D binary or (N, K)), ``to_dict`` /
:func:`from_dict` for saving. Options are keyword-only and fitted attributes
end in ``_``, as in scikit-learn.

How they are fitted, from any source, in a bounded number of passes:

- **Temperature** (binary or K classes, one scalar T; q = sigmoid(z / T) or
  softmax(z / T)): Newton steps on s = 1 / T, where the NLL is convex. Each
  step is one pass that sums the gradient and Hessian of the NLL (float64,
  mergeable); a step that leaves the bracket known so far is replaced by
  bisection. Stops when the step is below ``tol`` relative (the last step is
  then taken without another pass).
- **Platt** (binary: q = sigmoid(a f + b), f the logit or logit(p)): 2-D
  Newton steps with step halving, one pass per step.
- **Isotonic** (binary; top-label for K classes) and **histogram binning**:
  one pass fills, per bin of the value (p, sigmoid of the logit, or the
  top-label confidence), rows, positives and the sum of the value. Histogram
  binning is exact from it. Isotonic regression from a source pools the rows
  of each of ``n_fine`` bins (2**16 by default: resolution 1.5e-5 in p) at
  their mean value: it is the exact isotonic regression of the data with each
  value replaced by its bin's mean (moved by less than 1 / n_fine), i.e. it
  differs from the exact fit only in that rows inside one fine bin are no
  longer ordered among themselves. It is therefore exact when every fine bin
  holds one distinct value (tests/test_recalibrate.py checks both). In
  memory, ``fit`` is exact pool-adjacent-violators over the distinct values
  (scikit-learn's IsotonicRegression gives the same thresholds only when no two
  distinct values lie within 1e-15 of each other: it pools such near-ties).

The safe target (temperature): the ECD test of the recalibrated
probabilities has z(s) = g(s) / sqrt(h(s)), where g and h are the gradient
and Hessian of the NLL in s = 1 / T (binary: sum (q - y) z and
sum q (1 - q) z^2; K classes: sum E_q z - z_y and sum Var_q z; eq. 12 and 15
give s g and s^2 h, and s cancels). ``target="safe"`` returns the temperature
closest to 1 whose one-sided p-value for over-confidence reaches ``alpha``:
T = 1 if the model is not flagged, otherwise the root of
g(s) - z_(1-alpha) sqrt(h(s)) between the NLL optimum and s = 1, found by
safeguarded Newton steps (its derivative needs the third derivative of the
NLL, summed in the same pass). The NLL optimum is fitted first; the fitted
object keeps both, so the cost of being safe is ``nll_ - nll_at_optimum_``.
"""

import json
import math
import statistics
import warnings

import numpy as np

from fastcal._kernels import recalibrate as kr
from fastcal.accumulators import equal_mass as em
from fastcal.inputs import validation as v
from fastcal.inputs.batch import resolve
from fastcal.inputs.binning import kernel_edges
from fastcal.score import Options, score
from fastcal.sources.arrays import ArraySource

METHODS = ("temperature", "platt", "isotonic", "histogram")
TARGETS = ("nll", "safe")
NAN_POLICIES = ("raise", "omit")
FORMAT_VERSION = 1


# -- passes over a source ---------------------------------------------------------------

def _add(acc, r):
    if acc is None:
        return r
    if isinstance(r, tuple):
        return tuple(a + b for a, b in zip(acc, r))
    return acc + r


def _pass_binary(y, x, logits, a, b, keep_certain):
    out = np.zeros(kr.N_SUMS, np.float64)
    kr.sums_binary(x, y, logits, a, b, keep_certain, out)
    return out


def _pass_binary_hist(y, x, logits, keep_certain):
    """The sums at (a, b) = (1, 0) and the fine histogram of the feature per label
    (``keep_certain``: rows of p = 0 or 1 are fixed points, see ``kr.sums_binary``)."""
    out = np.zeros(kr.N_SUMS, np.float64)
    kr.sums_binary(x, y, logits, 1.0, 0.0, keep_certain, out)
    counts = np.zeros((2, 2, kr.N_FEATURE_BINS), np.float64)
    sum_f = np.zeros((2, 2, kr.N_FEATURE_BINS), np.float64)
    kr.feature_histogram(x, y, logits, keep_certain, counts, sum_f)
    return out, counts, sum_f


def _pass_multiclass_sample(y, x, logits, stride):
    """The sums at s = 1 and every ``stride``-th row of the part (a start for Newton)."""
    return _pass_multiclass(y, x, logits, 1.0), (np.asarray(y[::stride]),
                                                np.asarray(x[::stride]))


def _add_sample(acc, r):
    if acc is None:
        return r
    return acc[0] + r[0], (np.concatenate([acc[1][0], r[1][0]]),
                           np.concatenate([acc[1][1], r[1][1]]))


SAMPLE_ROWS = 1 << 16  # rows of the sample a K-class temperature fit starts from


class _Points:
    """The fine histogram of a binary feature as weighted point masses (f, y, w):
    the sums of the NLL at any (a, b) in memory, to start the exact passes near
    the answer (f within 1/64 relative of the rows it stands for)."""

    def __init__(self, counts, sum_f):
        nz = counts > 0
        self.w = counts[nz]
        self.f = sum_f[nz] / self.w
        self.y = np.broadcast_to(np.array([0.0, 1.0])[:, None, None], counts.shape)[nz]

    def sums(self, a, b):
        t = a * self.f + b
        q = _sigmoid(t)
        w, f = self.w, self.f
        r = w * (q - self.y)
        ww = w * q * (1.0 - q)
        out = np.zeros(kr.N_SUMS, np.float64)
        out[kr.N_ROWS] = w.sum()
        out[kr.NLL] = np.sum(w * np.logaddexp(0.0, np.where(self.y == 1.0, -t, t)))
        out[kr.G_A] = np.sum(r * f)
        out[kr.G_B] = np.sum(r)
        out[kr.H_AA] = np.sum(ww * f * f)
        out[kr.H_AB] = np.sum(ww * f)
        out[kr.H_BB] = np.sum(ww)
        out[kr.T_AAA] = np.sum(ww * f ** 3 * (1.0 - 2.0 * q))
        return out


def _pass_multiclass(y, x, logits, s):
    out = np.zeros(kr.N_SUMS, np.float64)
    kr.sums_multiclass(x, y, logits, s, out)
    return out


def _edge_dtype(p, logits):
    """The dtype whose rounding of k / n_bins the report's uniform edges use for
    these probabilities: float32 for float32 probabilities, else float64 (logits:
    values computed in float64), as ``Binned.kernel_edges``."""
    return np.float32 if (not logits and p.dtype == np.float32) else np.float64


def _pass_values(y, p, n_bins, logits, report_edges):
    """Per value bin: rows, positives, sum of the value (binary p, sigmoid of the
    logit, or top-label confidence). ``report_edges``: the report's edges for
    p's dtype (histogram binning), else float64 edges (isotonic's fine bins)."""
    dtype = _edge_dtype(p, logits) if report_edges else np.float64
    y, x = em.ranking_pair(y, p, logits=logits)
    counts = np.zeros(n_bins, np.int64)
    positives = np.zeros(n_bins, np.int64)
    sum_x = np.zeros(n_bins, np.float64)
    bad = np.zeros(2, np.int64)
    kr.value_sums(x, y, kernel_edges(n_bins, np.dtype(dtype).str), counts, positives, sum_x,
                  bad)
    return counts, positives, sum_x, bad


class _Data:
    """What a fit reads: the parts of a source (raw inputs, or the values that
    isotonic / histogram binning rank), a pass counter, and how to name a bad row."""

    def __init__(self, source, *, logits, nan_policy):
        self.source = source
        self.logits = bool(logits)
        self.nan_policy = nan_policy
        self.passes = 0

    @classmethod
    def arrays(cls, y_true, y_prob, *, logits, nan_policy, threads=None):
        d = cls(ArraySource(y_true, y_prob), logits=logits, nan_policy=nan_policy)
        d.batch = resolve(y_true, y_prob, logits=logits)
        if d.batch.n == 0:
            raise ValueError(ArraySource.empty)
        d.threads = v.check_threads(threads)
        return d

    @property
    def multiclass(self):
        return self._n_classes is not None

    def parts(self, raw):
        pair = dict(logits=self.logits, renormalize=False, eps=None, raw=raw)
        batch = getattr(self, "batch", None)
        if batch is not None:
            y, x = em.ranking_pair(batch.y, batch.p, **pair)
            return em.ArrayParts(y, x, self.threads)
        return self.source.parts(pair)

    def map(self, raw, fn, common, combine=_add):
        self.passes += 1
        return self.parts(raw).map(fn, common, combine=combine)

    def n_rows(self):
        """Rows of the source when known before reading it (arrays, files), else None."""
        batch = getattr(self, "batch", None)
        if batch is not None:
            return batch.n
        reader = getattr(self.source, "reader", None)
        return getattr(reader, "n_rows", None)

    def check(self, n_nan, n_bad, n_rows):
        """Raise on invalid rows (or NaN rows unless omitted), with the driver's message."""
        if n_bad == 0 and (n_nan == 0 or self.nan_policy == "omit") and n_rows > 0:
            return
        # the driver's one pass names the first bad row the way the source counts rows
        score(self.source, Options(n_bins=1, ace=False, logits=self.logits,
                                   nan_policy=self.nan_policy, with_logs=False))
        what = f"{int(n_bad)} invalid rows" if n_bad else f"{int(n_nan)} NaN rows"
        msg = (f"{self.source.prefix}{what} (labels not 0/1 or not a class index, values outside "
               "[0, 1], infinite logits); expected valid rows" if n_rows > 0 else
               f"{self.source.prefix}no rows left to fit on")
        raise ValueError(msg)


def _n_classes_of(data):
    batch = getattr(data, "batch", None)
    if batch is not None:
        return batch.p.shape[1] if batch.p.ndim == 2 else None
    src = data.source
    if hasattr(src, "multi_class"):  # a file: K class columns, or one list column
        if src.multi_class:
            return len(src.names) - 1
        schema = getattr(src.reader, "schema", None)
        try:
            t = schema.field(src.names[0]).type
        except (AttributeError, KeyError, TypeError):
            return None
        if isinstance(t, _list_types()):
            return int(getattr(t, "list_size", -1))
    return None


def _list_types():
    import pyarrow as pa

    return (pa.FixedSizeListType, pa.ListType, pa.LargeListType)


# -- the fitted objects ----------------------------------------------------------------

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
        data._n_classes = data.batch.p.shape[1] if data.batch.p.ndim == 2 else None
        self._fit(data, in_memory=True)
        return self

    def fit_source(self, source, *, n_classes=None):
        """Fit from a source of the driver (``fastcal.sources``: a FileSource, a
        DaskSource, an ArraySource), reading it in passes.

        ``n_classes``: K, for a source whose number of classes cannot be read
        before its data (Dask partitions of (N, K) probabilities).
        """
        data = _Data(source, logits=self.logits, nan_policy=self.nan_policy)
        if isinstance(source, ArraySource):
            return self.fit(source.y_true, source.y_prob)
        data._n_classes = n_classes if n_classes is not None else _n_classes_of(data)
        if getattr(getattr(source, "source", None), "multi", False) and data._n_classes is None:
            data._n_classes = -1  # Dask (N, K) blocks; K is only used as a flag
        self._fit(data, in_memory=False)
        return self

    def _input(self, y_prob):
        p = v.to_array("y_prob", y_prob)
        if p.ndim not in (1, 2):
            msg = f"y_prob must be 1-D or (N, K); got shape {p.shape}"
            raise ValueError(msg)
        multi = self.n_classes_ is not None
        if (p.ndim == 2) != multi:
            want = "(N, K) class probabilities" if multi else "one value per row"
            msg = (f"y_prob has shape {p.shape}; this {type(self).__name__} was fitted on "
                   f"{want}")
            raise ValueError(msg)
        if multi and self.n_classes_ > 0 and p.shape[1] != self.n_classes_:
            msg = (f"y_prob has {p.shape[1]} classes; this {type(self).__name__} was fitted on "
                   f"{self.n_classes_}")
            raise ValueError(msg)
        return np.asarray(p, dtype=np.float64)

    def _probabilities(self, p):
        """Probabilities (binary: of class 1; K: rows) of validated input."""
        if p.ndim == 2:
            if self.logits:
                z = p - np.max(p, axis=1, keepdims=True)
                e = np.exp(z)
                return e / e.sum(axis=1, keepdims=True)
            return p
        return _sigmoid(p) if self.logits else p

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


def _sigmoid(z):
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _logit(p):
    p = np.clip(np.asarray(p, dtype=np.float64), kr.CLIP, 1.0 - kr.CLIP)
    return np.log(p) - np.log1p(-p)


def _check_common(logits, nan_policy, max_passes, tol):
    v.check_choice("nan_policy", nan_policy, NAN_POLICIES)
    if isinstance(max_passes, bool) or not isinstance(max_passes, int) or max_passes < 1:
        msg = f"max_passes must be a positive integer; got {max_passes!r}"
        raise ValueError(msg)
    if not (isinstance(tol, (int, float)) and 0.0 < tol < 1e-2):
        msg = f"tol must be a number in (0, 0.01); got {tol!r}"
        raise ValueError(msg)
    return bool(logits)


class TemperatureScaling(_Recalibration):
    """Temperature scaling: q = sigmoid(z / T) (binary) or softmax(z / T) (K classes).

    Parameters
    ----------
    logits : bool, default False
        The input holds logits (binary: one per row; K classes: (N, K)). With
        probabilities, z = logit(p) (binary, 0 < p < 1 clipped to [1e-15, 1 - 1e-15]) or
        log p (K classes, floored: log max(p, 1e-300), so log 0 = -690.8; a
        RuntimeWarning says how many rows give their true class probability 0).
        Binary p exactly 0 or 1 are fixed points in the fit as in ``transform``
        (logit +-inf scaled by any T > 0): they add nothing to the fit, so
        ``ecd_z_`` and ``p_over_`` are those of the report of the returned
        probabilities. Rows certain and wrong (p = 1, label 0 or p = 0, label
        1) have NLL and ECD +inf at every T: the fit then keeps the NLL
        optimum of the other rows and reports ``nll_`` and ``ecd_z_`` = inf and
        ``n_certain_wrong_``; target="safe" cannot be reached and is refused
        (ValueError).
    target : {"nll", "safe"}, default "nll"
        "nll": the T minimising the NLL. "safe": the T closest to 1 at which
        the one-sided ECD test for over-confidence is not significant at
        ``alpha`` (module docstring).
    alpha : float, default 0.05
    nan_policy : {"raise", "omit"}, default "raise"
    max_passes : int, default 50
        Passes over the data before giving up (ValueError).
    tol : float, default 1e-10
        Relative size of the last Newton step in s = 1 / T (taken without
        another pass, so the error left is about its square plus rounding).

    Attributes
    ----------
    temperature_ : float
    temperature_nll_ : float
        The NLL optimum (equal to ``temperature_`` for target="nll").
    nll_, nll_at_optimum_, nll_before_ : float
        Mean NLL at ``temperature_``, at ``temperature_nll_`` and at T = 1.
    ecd_z_, p_over_ : float
        The ECD test (z, one-sided p-value for over-confidence) at ``temperature_``
        on the fitting data.
    ecd_z_before_, p_over_before_ : float
        The same at T = 1.
    n_certain_wrong_ : int
        Binary probabilities: rows with p = 1 and label 0 or p = 0 and label 1
        (their NLL and ECD are +inf at every T); 0 for K classes.

    Raises
    ------
    ValueError
        Data it cannot fit, in one line: one label only (binary), every p 0 or
        1, an NLL optimum at T <= 0 (the ranking inverted) or outside [1e-6,
        1e6], target="safe" with rows certain and wrong.
    n_, n_classes_, passes_ : int
        Rows fitted on; K (None for binary); passes over the data.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.recalibrate import TemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(0, 3, 100_000)
    >>> y = (rng.random(100_000) < 1 / (1 + np.exp(-z / 2))).astype(np.uint8)
    >>> t = TemperatureScaling(logits=True).fit(y, z)
    >>> round(t.temperature_, 1)
    2.0
    """

    method = "temperature"

    def __init__(self, *, logits=False, target="nll", alpha=0.05, nan_policy="raise",
                 max_passes=50, tol=1e-10):
        self.logits = logits
        self.target = target
        self.alpha = alpha
        self.nan_policy = nan_policy
        self.max_passes = max_passes
        self.tol = tol

    def _evaluate(self, data, s):
        if data.multiclass:
            out = data.map(True, _pass_multiclass, (self.logits, float(s)))
        else:
            out = data.map(True, _pass_binary, (self.logits, float(s), 0.0, True))
        data.check(out[kr.N_NAN], out[kr.N_BAD], out[kr.N_ROWS])
        return out

    def _fit(self, data, in_memory):
        self.logits = _check_common(self.logits, self.nan_policy, self.max_passes, self.tol)
        v.check_choice("target", self.target, TARGETS)
        alpha = _check_alpha(self.alpha)
        seen = {}

        def evaluate(s):
            if data.passes >= self.max_passes:
                msg = (f"temperature scaling did not converge in max_passes={self.max_passes} "
                       f"passes (last 1/T = {s!r}); are the classes separable by the logits?")
                raise ValueError(msg)
            out = self._evaluate(data, s)
            seen[s] = out
            return out

        zc = statistics.NormalDist().inv_cdf(1.0 - alpha)
        start = None
        n_rows = data.n_rows() if data.multiclass else None
        if data.multiclass and n_rows:
            # pass 1: the sums at T = 1 and a strided sample of rows, fitted in memory
            # for a start; the exact passes then polish it
            stride = max(1, n_rows // SAMPLE_ROWS)
            first, (ys, xs) = data.map(True, _pass_multiclass_sample, (self.logits, stride),
                                       combine=_add_sample)
            data.check(first[kr.N_NAN], first[kr.N_BAD], first[kr.N_ROWS])
            seen[1.0] = first

            def on_sample(u):
                out = np.zeros(kr.N_SUMS, np.float64)
                kr.sums_multiclass(xs, ys, self.logits, u, out)
                return out

            s0 = _newton_1d(on_sample, 1.0, 1e-8, max_iter=100)
            if self.target == "safe":
                start = _safe_bisect(on_sample, s0, zc)
            s_nll = _newton_1d(evaluate, s0, self.tol)
        elif data.multiclass:
            s_nll = _newton_1d(evaluate, 1.0, self.tol)
            first = seen[1.0]
        else:
            # pass 1: the sums at T = 1 and a fine histogram of the logits, on which the
            # answer is found in memory; the exact passes then only polish it
            first, counts, sum_f = data.map(True, _pass_binary_hist, (self.logits, True))
            data.check(first[kr.N_NAN], first[kr.N_BAD], first[kr.N_ROWS])
            if counts.sum() == 0:
                msg = (f"temperature scaling: every row has p = 0 or 1 ({int(first[kr.N_ROWS])} "
                       "rows); temperature scaling leaves them unchanged, so there is nothing "
                       "to fit")
                raise ValueError(msg)
            _check_both_labels(counts, "temperature scaling" if self.logits else
                               "temperature scaling (of the rows with 0 < p < 1)")
            seen[1.0] = first
            pts = _Points(counts, sum_f)
            s0 = _newton_1d(lambda u: pts.sums(u, 0.0), 1.0, 1e-10, max_iter=200)
            start = _safe_bisect(lambda u: pts.sums(u, 0.0), s0, zc)
            s_nll = _newton_1d(evaluate, s0, self.tol)
        n = first[kr.N_ROWS]
        n_zero = int(first[kr.N_ZERO_TRUE])
        wrong = 0 if data.multiclass else n_zero  # binary: certain and wrong, kept so
        if wrong and self.target == "safe":
            msg = (f"temperature scaling: {wrong} rows are certain and wrong (p = 1 with label "
                   "0 or p = 0 with label 1); every temperature keeps p = 0 and 1, so their "
                   "ECD term is +inf and no temperature reaches target='safe' at alpha="
                   f"{alpha:g}; use target='nll' (or fit on logits)")
            raise ValueError(msg)
        if data.multiclass and n_zero:
            msg = (f"{n_zero} rows give their true class probability 0; temperature scaling "
                   f"takes log 0 as log({kr.LOG_FLOOR:g}) = {math.log(kr.LOG_FLOOR):.1f}, so "
                   "these rows weigh heavily on T; fit on logits if the model has them")
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
        _check_scale(s_nll)
        s = s_nll
        if self.target == "safe":
            s = _safe_root(evaluate, seen, s_nll, zc, self.tol, start)
        at = seen.get(s)
        if at is None:  # the last Newton step, taken without a pass: evaluate once more
            near = min(seen, key=lambda u: abs(u - s))
            at = seen[near] if abs(near - s) <= 1e-10 * s else evaluate(s)
        at_nll = seen[min(seen, key=lambda u: abs(u - s_nll))]
        self.temperature_ = float(1.0 / s)
        self.temperature_nll_ = float(1.0 / s_nll)
        self.n_ = int(n)
        self.n_omitted_ = int(first[kr.N_NAN])
        self.n_classes_ = data._n_classes
        self.n_certain_wrong_ = wrong
        inf = math.inf if wrong else 0.0  # their NLL and ECD terms, at every T
        self.nll_ = at[kr.NLL] / n + inf
        self.nll_at_optimum_ = at_nll[kr.NLL] / n + inf
        self.nll_before_ = first[kr.NLL] / n + inf
        self.ecd_z_ = _z(at) + inf
        self.ecd_z_before_ = _z(first) + inf
        self.p_over_ = _p_over(self.ecd_z_)
        self.p_over_before_ = _p_over(self.ecd_z_before_)
        self.passes_ = data.passes

    def _params(self):
        return {"temperature": self.temperature_, "target": self.target,
                "alpha": float(self.alpha)}

    def _set_params(self, params):
        pre = "params."
        self.temperature_ = _number_field(params, "temperature", MIN_TEMPERATURE,
                                          MAX_TEMPERATURE, prefix=pre)
        target = params.get("target", "nll")
        if target not in TARGETS:
            raise _field(pre + "target", target, f"one of {list(TARGETS)}")
        self.target = target
        self.alpha = _number_field(params, "alpha", 0.0, 0.5, prefix=pre, open_lo=True,
                                   open_hi=True, default=0.05)

    def transform(self, y_prob):
        """Recalibrated probabilities (binary: of class 1; K classes: (N, K) rows)."""
        self._check_fitted()
        p = self._input(y_prob)
        s = 1.0 / self.temperature_
        if p.ndim == 2:
            z = p if self.logits else np.log(np.maximum(p, 1e-300))
            z = s * z
            z = z - np.max(z, axis=1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=1, keepdims=True)
        z = p if self.logits else _logit(p)
        out = _sigmoid(s * z)
        if not self.logits:
            keep = (p == 0.0) | (p == 1.0)  # certain predictions stay certain
            out[keep] = p[keep]
        return out


def _check_both_labels(counts, what):
    """Refuse a binary fit whose rows all have one label (counts: the pass's
    per-label feature histogram): its optimum is at infinity or inverts the ranking."""
    n_pos, n_neg = int(counts[1].sum()), int(counts[0].sum())
    if n_pos == 0 or n_neg == 0:
        label = 1 if n_neg == 0 else 0
        msg = (f"{what} needs rows of both labels; got {n_pos + n_neg} rows, every one "
               f"with label {label}; no map is fitted")
        raise ValueError(msg)


def _check_scale(s):
    """Refuse an NLL optimum 1 / T outside [1 / MAX_TEMPERATURE, 1 / MIN_TEMPERATURE]."""
    if not 1.0 / MAX_TEMPERATURE <= s <= 1.0 / MIN_TEMPERATURE:
        t = 1.0 / s if s != 0 else math.inf
        why = ("a temperature <= 0 would invert the ranking: the logits rank the labels the "
               "wrong way round" if s <= 0 else "the logits carry next to no information "
               "about the labels" if s < 1.0 / MAX_TEMPERATURE else "the classes are "
               "separated by the logits")
        msg = (f"temperature scaling: the NLL is lowest at T = {t:.6g}, outside "
               f"[{MIN_TEMPERATURE:g}, {MAX_TEMPERATURE:g}]; {why}; no temperature is fitted")
        raise ValueError(msg)


def _z(out):
    h = out[kr.H_AA]
    return float(out[kr.G_A] / math.sqrt(h)) if h > 0 else float("nan")


def _p_over(z):
    return 1.0 - statistics.NormalDist().cdf(z) if z == z else float("nan")


def _check_alpha(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        msg = f"alpha must be a number in (0, 0.5); got {alpha!r}"
        raise ValueError(msg)
    return float(alpha)


def _newton_1d(evaluate, s, tol, max_iter=None):
    """Minimiser of the convex NLL in s = 1 / T by safeguarded Halley steps
    (bisection when a step leaves the bracket the gradients' signs give)."""
    lo, hi = 0.0, math.inf
    it = 0
    while True:
        out = evaluate(s)
        it += 1
        g, h = out[kr.G_A], out[kr.H_AA]
        if g == 0.0:
            return s
        if not h > 0.0:
            msg = "the NLL is flat in the temperature (every logit is 0); nothing to fit"
            raise ValueError(msg)
        if g > 0:
            hi = min(hi, s)
        else:
            lo = max(lo, s)
        # Halley's step (the passes give the third derivative too): cubic convergence,
        # one pass fewer than Newton's from a sample start; Newton's if it misbehaves
        t3 = out[kr.T_AAA]
        den = 2.0 * h * h - g * t3
        new = s - 2.0 * g * h / den if den > h * h else s - g / h
        if abs(new - s) <= tol * s or (max_iter and it >= max_iter):
            return new  # converged (a step below tol is taken without another pass)
        if not lo < new < hi:
            new = 0.5 * (lo + hi) if hi < math.inf else 2.0 * s
        if (hi - lo) <= tol * s:
            return new
        s = new


def _phi(out, zc):
    """g - zc sqrt(h): > 0 where the ECD test flags over-confidence at level alpha."""
    return out[kr.G_A] - zc * math.sqrt(out[kr.H_AA])


def _dphi(out, zc):
    h = out[kr.H_AA]
    return h - zc * out[kr.T_AAA] / (2.0 * math.sqrt(h))


def _safe_bisect(sums, s_nll, zc, iters=60):
    """The safe root on in-memory sums (the histogram's points), by bisection; None
    when T = 1 is not flagged."""
    if _phi(sums(1.0), zc) <= 0.0 or s_nll >= 1.0:
        return None
    lo, hi = s_nll, 1.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if _phi(sums(mid), zc) > 0.0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def _safe_root(evaluate, seen, s_nll, zc, tol, start=None):
    """The s nearest 1 (between the optimum and 1) where the ECD z reaches zc,
    by safeguarded Newton steps from ``start`` (or regula falsi on the bracket)."""
    if _phi(seen[1.0], zc) <= 0.0:
        return 1.0  # not flagged at T = 1: no change is the smallest change
    if s_nll > 1.0:  # phi(1) > 0 means z(1) > zc > 0 = z(s_nll): the optimum is below 1
        msg = "internal: the model is flagged over-confident but the NLL optimum sharpens it"
        raise ValueError(msg)
    # the bracket from what the passes saw: lo safe (phi <= 0), hi flagged
    lo, hi = s_nll, 1.0
    for u, out in seen.items():
        if s_nll < u <= 1.0:
            if _phi(out, zc) > 0:
                hi = min(hi, u)
            else:
                lo = max(lo, u)
    if start is None or not lo < start < hi:
        f_lo = _phi(seen[lo], zc) if lo in seen else -zc
        f_hi = _phi(seen[hi], zc)
        start = lo + (hi - lo) * (-f_lo) / (f_hi - f_lo) if f_hi > f_lo else 0.5 * (lo + hi)
    s = start
    while True:
        out = evaluate(s)
        f = _phi(out, zc)
        if f > 0:
            hi = s
        else:
            lo = s
        d = _dphi(out, zc)
        new = s - f / d if d > 0 else 0.5 * (lo + hi)
        if abs(new - s) <= tol * s:
            return new
        if not lo < new < hi:
            new = 0.5 * (lo + hi)
        if (hi - lo) <= tol * s:
            return new
        s = new


def _newton_2d(evaluate, a, b, tol, *, out=None, max_iter=None):
    """(a, b, sums at them) minimising the NLL of sigmoid(a f + b): Newton steps
    with step halving; the last step, below ``tol``, is taken without evaluating."""
    if out is None:
        out = evaluate(a, b)
    it = 0
    while True:
        g = np.array([out[kr.G_A], out[kr.G_B]])
        H = np.array([[out[kr.H_AA], out[kr.H_AB]], [out[kr.H_AB], out[kr.H_BB]]])
        if not np.linalg.det(H) > 0.0:
            msg = "Platt scaling: the NLL's Hessian is singular (every value the same?)"
            raise ValueError(msg)
        d = -np.linalg.solve(H, g)
        if (abs(d[0]) <= tol * max(1.0, abs(a)) and abs(d[1]) <= tol * max(1.0, abs(b))) or (
                max_iter and it >= max_iter):
            return a + d[0], b + d[1], out
        step = 1.0
        while True:
            new = evaluate(a + step * d[0], b + step * d[1])
            if new[kr.NLL] <= out[kr.NLL] + 1e-15 * abs(out[kr.NLL]) or step < 1e-6:
                break
            step *= 0.5
        a, b, out = a + step * d[0], b + step * d[1], new
        it += 1


class PlattScaling(_Recalibration):
    """Platt scaling (binary): q = sigmoid(a f + b), f the logit (or logit(p)).

    Fitted by Newton steps on the NLL with step halving; targets are the
    labels themselves. scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``
    (checked with 1.9.1) fits Platt's smoothed targets (n+ + 1) / (n+ + 2) and
    1 / (n- + 2) with L-BFGS, so its a, b differ by O(1 / n);
    tests/test_recalibrate.py shows that the smoothing is the whole difference.

    Parameters
    ----------
    logits : bool, default False
    nan_policy : {"raise", "omit"}, default "raise"
    max_passes : int, default 50
    tol : float, default 1e-10
        Convergence tolerance. With probabilities, f = logit(p) with p clipped to
        [1e-15, 1 - 1e-15] in the fit and ``transform`` alike (p = 0 and 1 are
        moved, unlike temperature scaling's fixed points).

    Attributes
    ----------
    a_, b_ : float
    nll_, nll_before_ : float
        Mean NLL after and before (a = 1, b = 0).
    n_, passes_ : int

    Raises
    ------
    ValueError
        Data it cannot fit, in one line: one label only, or an NLL optimum
        with a <= 0 (the ranking inverted).
    """

    method = "platt"

    def __init__(self, *, logits=False, nan_policy="raise", max_passes=50, tol=1e-10):
        self.logits = logits
        self.nan_policy = nan_policy
        self.max_passes = max_passes
        self.tol = tol

    def _fit(self, data, in_memory):
        self.logits = _check_common(self.logits, self.nan_policy, self.max_passes, self.tol)
        if data.multiclass:
            msg = "Platt scaling is binary (one probability or logit per row); got K classes"
            raise ValueError(msg)

        def evaluate(a, b):
            if data.passes >= self.max_passes:
                msg = (f"Platt scaling did not converge in max_passes={self.max_passes} passes "
                       f"(last a = {a!r}, b = {b!r}); are the classes separable?")
                raise ValueError(msg)
            out = data.map(True, _pass_binary, (self.logits, float(a), float(b), False))
            data.check(out[kr.N_NAN], out[kr.N_BAD], out[kr.N_ROWS])
            return out

        first, counts, sum_f = data.map(True, _pass_binary_hist, (self.logits, False))
        data.check(first[kr.N_NAN], first[kr.N_BAD], first[kr.N_ROWS])
        _check_both_labels(counts, "Platt scaling")
        pts = _Points(counts, sum_f)
        a, b, _ = _newton_2d(pts.sums, 1.0, 0.0, 1e-10, max_iter=100)
        out = evaluate(a, b)
        a, b, out = _newton_2d(evaluate, a, b, self.tol, out=out)
        if not (a > 0 and math.isfinite(b)):
            msg = (f"Platt scaling: the NLL is lowest at a = {a:.6g}, b = {b:.6g}; a <= 0 "
                   "would invert the ranking (the values rank the labels the wrong way "
                   "round); no map is fitted")
            raise ValueError(msg)
        n = first[kr.N_ROWS]
        self.a_, self.b_ = float(a), float(b)
        self.n_ = int(n)
        self.n_omitted_ = int(first[kr.N_NAN])
        self.n_classes_ = None
        self.nll_ = out[kr.NLL] / n
        self.nll_before_ = first[kr.NLL] / n
        self.passes_ = data.passes

    def _params(self):
        return {"a": self.a_, "b": self.b_}

    def _set_params(self, params):
        self.a_ = _number_field(params, "a", 0.0, _BIG, prefix="params.", open_lo=True)
        self.b_ = _number_field(params, "b", -_BIG, _BIG, prefix="params.")

    def transform(self, y_prob):
        self._check_fitted()
        p = self._input(y_prob)
        f = p if self.logits else _logit(p)
        return _sigmoid(self.a_ * f + self.b_)


class _Binned(_Recalibration):
    """Shared by isotonic regression and histogram binning: a map of the value
    (p, the sigmoid of the logit, or the top-label confidence)."""

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
        A row whose other classes are all 0 shares the rest evenly among them.
        """
        self._check_fitted()
        p = v.to_array("y_prob", y_prob)
        dtype = _edge_dtype(p, self.logits)
        q = self._probabilities(self._input(p))
        if q.ndim == 1:
            return self._map(q, dtype)
        k = np.argmax(q, axis=1)
        rows = np.arange(q.shape[0])
        conf = q[rows, k]
        new = self._map(conf, dtype)
        out = q.copy()
        out[rows, k] = 0.0
        rest = out.sum(axis=1)  # the other classes' own sum
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(rest > 0, (1.0 - new) / rest, 0.0)
        out *= scale[:, None]
        flat = rest <= 0  # a certain row: share the rest evenly
        if flat.any():
            out[flat] = ((1.0 - new[flat]) / (q.shape[1] - 1))[:, None]
        out[rows, k] = new
        return out


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

    def _fit(self, data, in_memory):
        self.logits = _check_common(self.logits, self.nan_policy, 1, 1e-12)
        self.n_fine = _check_size("n_fine", self.n_fine, MAX_N_FINE)
        if in_memory:
            y, x = em.ranking_pair(data.batch.y, data.batch.p, logits=self.logits)
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
        self.n_ = int(n)
        self.n_omitted_ = n_nan
        self.n_classes_ = data._n_classes
        self.passes_ = data.passes

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

    def _fit(self, data, in_memory):
        self.logits = _check_common(self.logits, self.nan_policy, 1, 1e-12)
        self.n_bins = _check_size("n_bins", self.n_bins, MAX_MAP_BINS)
        counts, positives, _, n, n_nan = self._values(data, self.n_bins, report_edges=True)
        mid = (np.arange(self.n_bins) + 0.5) / self.n_bins
        with np.errstate(invalid="ignore", divide="ignore"):
            self.values_ = np.where(counts > 0, positives / np.maximum(counts, 1), mid)
        self.counts_ = counts
        self.n_ = int(n)
        self.n_omitted_ = n_nan
        self.n_classes_ = data._n_classes
        self.passes_ = data.passes

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


_CLASSES = {"temperature": TemperatureScaling, "platt": PlattScaling,
            "isotonic": IsotonicCalibration, "histogram": HistogramBinning}


def make(method, **options):
    """A fresh recalibration object of ``method`` ("temperature", "platt",
    "isotonic", "histogram") with ``options``."""
    v.check_choice("method", method, METHODS)
    return _CLASSES[method](**options)


# bounds of a saved map, checked on load (and by the fits, which never save outside them)
MIN_TEMPERATURE = 1e-6  # 1 / T must be a normal, finite scale of the logits
MAX_TEMPERATURE = 1e6
MAX_MAP_BINS = v.MAX_BINS  # histogram n_bins (the bins cap of the API and the CLI)
MAX_N_FINE = v.MAX_BINS    # isotonic n_fine: the fit fills that many value bins
_BIG = float(np.finfo(np.float64).max)


def _check_size(name, value, top):
    """A fit's bin count: an integer in [1, top], so that its map loads again."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > top:
        msg = f"{name} must be <= {top:,}; got {int(value):,}"
        raise ValueError(msg)
    try:
        return v.check_n_bins(value)
    except ValueError as exc:  # the same rule, under this option's name
        raise ValueError(str(exc).replace("n_bins", name, 1)) from None


def _field(name, value, expected):
    """The one-line error of a bad map field (``value`` shown short, never recursed into)."""
    if isinstance(value, (list, dict)):
        shown = f"a {type(value).__name__} of {len(value)} items"
    else:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ValueError(f"{name} must be {expected}; got {shown}")


def _int_field(d, name, lo, hi, *, prefix="", default=None, allow_none=False):
    value = d.get(name, default)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _field(prefix + name, value, f"an integer in [{lo}, {hi}]")
    return value


def _number_field(d, name, lo, hi, *, prefix="", open_lo=False, open_hi=False, default=None):
    value = d.get(name, default)
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) \
        and -_BIG <= value <= _BIG  # finite (also a Python int of 400 digits: no overflow)
    if ok:
        value = float(value)
        ok = (lo < value if open_lo else lo <= value) and (value < hi if open_hi else value <= hi)
    if not ok:
        lb, rb = "(" if open_lo else "[", ")" if open_hi else "]"
        raise _field(prefix + name, value, f"a finite number in {lb}{lo:g}, {hi:g}{rb}")
    return value


def _bool_field(d, name, *, prefix="", default=False):
    value = d.get(name, default)
    if not isinstance(value, bool):
        raise _field(prefix + name, value, "a JSON boolean (true or false)")
    return value


def _array_field(d, name, lo, hi, max_len, *, prefix=""):
    """A non-empty list of finite numbers in [lo, hi] (at most ``max_len`` if given),
    as float64 (its length is checked before anything is allocated)."""
    value = d.get(name)
    if not isinstance(value, list) or not 1 <= len(value) <= (max_len or len(value)):
        what = f"1 to {max_len}" if max_len else "1 or more"
        raise _field(prefix + name, value, f"a list of {what} numbers")
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not lo <= x <= hi:
            raise _field(f"{prefix}{name}[{i}]", x, f"a finite number in [{lo:g}, {hi:g}]")
    return np.asarray(value, np.float64)


def from_dict(d):
    """The fitted object saved by ``to_dict`` (or ``to_json``, parsed).

    Every field is checked before anything is built (a map is data, never
    code): one ValueError names the first bad field. Temperature: a finite
    T in [MIN_TEMPERATURE, MAX_TEMPERATURE] = [1e-6, 1e6]; Platt: finite a > 0
    and b (a <= 0 would invert the ranking); isotonic: one knot or more,
    x strictly increasing in [0, 1], y non-decreasing in [0, 1], equal
    lengths; histogram: n_bins in [1, MAX_MAP_BINS] equal to len(values),
    values in [0, 1], counts (optional) non-negative integers; ``n`` an
    integer >= 0, ``n_classes`` null or an integer >= 2, ``logits`` a JSON
    boolean. Sizes are checked before any array is allocated.
    """
    if not isinstance(d, dict) or d.get("fastcal_recalibration") != FORMAT_VERSION \
            or isinstance(d.get("fastcal_recalibration"), bool) \
            or d.get("method") not in METHODS or not isinstance(d.get("params"), dict):
        keys = sorted(map(str, d))[:6] if isinstance(d, dict) else type(d).__name__
        msg = (f"not a fastcal recalibration (expected a dict with fastcal_recalibration="
               f"{FORMAT_VERSION}, a method in {list(METHODS)} and params); got {keys}")
        raise ValueError(msg)
    method = d["method"]
    logits = _bool_field(d, "logits")
    n_classes = _int_field(d, "n_classes", 2, 1 << 31, allow_none=True)
    n = _int_field(d, "n", 0, (1 << 63) - 1, default=0)
    obj = _CLASSES[method](logits=logits)
    obj._set_params(d["params"])
    obj.n_classes_ = n_classes
    obj.n_ = n
    return obj


def load(path):
    """The fitted object saved in a JSON file (``fastcal recalibrate --out``).

    Raises
    ------
    ValueError
        One line naming ``path`` and the first bad field (see :func:`from_dict`),
        or saying why the file is not a map (not UTF-8 JSON, nested too deeply).
    OSError
        The file cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except json.JSONDecodeError as exc:
        msg = f"{path}: not JSON ({exc.msg} at line {exc.lineno})"
        raise ValueError(msg) from None
    except RecursionError:
        msg = f"{path}: not a fastcal recalibration (JSON nested too deeply)"
        raise ValueError(msg) from None
    except (UnicodeDecodeError, ValueError) as exc:  # not UTF-8; an integer of > 4300 digits
        msg = f"{path}: not a fastcal recalibration ({type(exc).__name__}: {exc})"
        raise ValueError(msg[:300]) from None
    try:
        return from_dict(d)
    except ValueError as exc:
        msg = f"{path}: {exc}"
        raise ValueError(msg) from None


# -- fitting from files and Dask -------------------------------------------------------

def fit_file(model, path, *, prob="p", label="y", chunk_rows=None, progress=None, format=None,
             verify_checksums=True):
    """Fit ``model`` from a prediction file read in chunks (as :func:`fastcal.score_file`),
    in ``model.passes_`` passes. Returns the model."""
    from fastcal.sources.files import FileSource
    from fastcal.sources.io import DEFAULT_CHUNK_ROWS

    source = FileSource(path, prob=prob, label=label,
                        chunk_rows=int(chunk_rows or DEFAULT_CHUNK_ROWS), progress=progress,
                        format=format, verify_checksums=verify_checksums)
    return model.fit_source(source)


class _Runner:
    def __init__(self, client):
        self.client = client

    def compute(self, obj):
        if self.client is not None:
            return self.client.gather(self.client.compute(obj))
        import dask

        return dask.compute(obj)[0]


def fit_dask(model, y_true, y_prob, *, client=None, split_every=8):
    """Fit ``model`` from dask arrays, one task per block and pass (on ``client``'s
    cluster, or Dask's default scheduler). Returns the model."""
    from fastcal.sources.dask import DaskSource, _array_source

    source = DaskSource(_array_source(y_true, y_prob), _Runner(client), split_every)
    k = int(y_prob.shape[1]) if y_prob.ndim == 2 else None
    return model.fit_source(source, n_classes=k)


# -- honest evaluation -----------------------------------------------------------------

class Evaluation:
    """Before / after scores of a recalibration, cross-fitted (every row
    recalibrated by a map fitted without it).

    Attributes
    ----------
    before, after : CalibrationReport
        Reports of the original and of the out-of-fold recalibrated probabilities.
    models : list
        The ``cv`` fitted objects (one per fold).
    """

    ROWS = (("ECD", "ecd"), ("ECE", "ece"), ("Brier", "brier"), ("NLL", "nll"),
            ("ECD z", "ecd_z"), ("p(over-confident)", "ecd_p_over"))

    def __init__(self, method, before, after, models, cv):
        self.method = method
        self.before = before
        self.after = after
        self.models = models
        self.cv = cv

    def to_dict(self):
        row = {name: {"before": float(getattr(self.before, attr)),
                      "after": float(getattr(self.after, attr))} for name, attr in self.ROWS}
        row["verdict"] = {"before": self.before.verdict, "after": self.after.verdict}
        return {"method": self.method, "cv": self.cv, "n": int(self.before.n), "metrics": row}

    def to_markdown(self):
        lines = ["| | before | after |", "|---|---:|---:|"]
        for name, attr in self.ROWS:
            lines.append(f"| {name} | {getattr(self.before, attr):.4g} | "
                         f"{getattr(self.after, attr):.4g} |")
        lines.append(f"| verdict | {self.before.verdict} | {self.after.verdict} |")
        return "\n".join(lines)

    def __str__(self):
        return self.to_markdown()

    def plot(self, path=None, *, title=None):
        """Reliability diagrams before and after, side by side (a matplotlib Figure)."""
        return before_after_diagram(self.before, self.after, path, title=title)


def before_after_diagram(before, after, path=None, *, title=None, level=0.95):
    """Two reliability diagrams (fraction of positives against mean p per bin,
    Wilson intervals) with their ECD tests, written atomically to ``path``."""
    from fastcal.reports.plot import _matplotlib, save_atomic, wilson_interval

    Figure, _ = _matplotlib()
    fig = Figure(figsize=(10.0, 4.8))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, rep, name in zip(axes, (before, after), ("before", "after")):
        counts = np.asarray(rep.bins["count"], np.int64)
        conf = np.asarray(rep.bins["conf"], np.float64)
        frac = np.asarray(rep.bins["frac_pos"] if rep.observed == "frac_pos"
                          else rep.bins["accuracy"], np.float64)
        ok = counts > 0
        k = np.rint(frac[ok] * counts[ok])
        lo, hi = wilson_interval(k, counts[ok], level)
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--")
        ax.errorbar(conf[ok], frac[ok], yerr=[frac[ok] - lo, hi - frac[ok]], fmt="o-", ms=4,
                    capsize=2)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("mean predicted probability")
        t = rep.ecd_test()
        ax.set_title(f"{name}: ECD {rep.ecd:.4f}, ECE {rep.ece:.4f}\n"
                     f"z = {t.z:+.2f}, p(over) = {t.p_over:.2g}: {t.verdict}", fontsize=9)
    axes[0].set_ylabel("fraction of positives")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        save_atomic(fig, path)
    return fig


def evaluate(y_true, y_prob, *, method="temperature", cv=5, seed=0, logits=False, n_bins=15,
             threads=None, **options):
    """Cross-fitted before / after evaluation of a recalibration in one call.

    The rows are split into ``cv`` folds (a seeded permutation); the rows of
    each fold are recalibrated by the map fitted on the other folds, and all
    rows are then scored before and after (ECD, ECE, Brier, NLL, the ECD test,
    ``n_bins`` uniform bins). ``options`` go to the method (``target``,
    ``alpha``, ``n_bins`` of histogram binning as ``hist_bins``...).

    Returns
    -------
    Evaluation
    """
    if isinstance(cv, bool) or not isinstance(cv, int) or cv < 2:
        msg = f"cv must be an integer >= 2 (folds); got {cv!r}"
        raise ValueError(msg)
    batch = resolve(y_true, y_prob, logits=logits)
    n = batch.n
    if n < cv:
        msg = f"y_prob has {n} rows; need at least cv={cv}"
        raise ValueError(msg)
    if "hist_bins" in options:
        options["n_bins"] = options.pop("hist_bins")
    fold = np.empty(n, np.int64)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % cv
    y, p = batch.y, batch.p
    after = None
    models = []
    for k in range(cv):
        test = fold == k
        m = make(method, logits=logits, **options).fit(y[~test], p[~test], threads=threads)
        q = m.transform(p[test])
        if after is None:
            after = np.empty((n,) + q.shape[1:], np.float64)
        after[test] = q
        models.append(m)
    opts = dict(n_bins=n_bins, ace=False, threads=threads)
    rep_before = score(ArraySource(y, p), Options(logits=logits, **opts))
    rep_after = score(ArraySource(y, after), Options(**opts))
    return Evaluation(method, rep_before, rep_after, models, cv)


__all__ = ["TemperatureScaling", "PlattScaling", "IsotonicCalibration", "HistogramBinning", "Evaluation",
           "evaluate", "fit_file", "fit_dask", "from_dict", "load", "make", "before_after_diagram"]

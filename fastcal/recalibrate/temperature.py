"""Temperature scaling: Newton (Halley) steps on s = 1 / T, one pass a step, and
the safe target (the temperature closest to 1 that the ECD test does not flag)."""

import math
import statistics
import warnings

import numpy as np

from fastcal._kernels import recalibrate as kr
from fastcal.inputs import validation as v
from fastcal.inputs.validation import show
from fastcal.recalibrate.base import _check_both_labels, _check_common, _Recalibration
from fastcal.recalibrate.fields import MAX_TEMPERATURE, MIN_TEMPERATURE, _field, _number_field
from fastcal.recalibrate.passes import (
    SAMPLE_ROWS,
    _add_sample,
    _logit,
    _pass_binary,
    _pass_binary_hist,
    _pass_multiclass,
    _pass_multiclass_sample,
    _Points,
    _sigmoid,
    _softmax,
    feature_code,
)

TARGETS = ("nll", "safe")


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
            out = data.map(True, _pass_binary, (feature_code(self.logits), float(s), 0.0, True))
        data.check(out[kr.N_NAN], out[kr.N_BAD], out[kr.N_ROWS])
        return out

    def _optimum(self, data, evaluate, seen, zc):
        """(the sums at T = 1, the NLL optimum s = 1 / T, a start for the safe root or
        None): pass 1 finds the answer in memory on a sample or a histogram, then the
        exact passes only polish it."""
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
            first, counts, sum_f = data.map(True, _pass_binary_hist,
                                            (feature_code(self.logits), True))
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
        return first, s_nll, start

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
        first, s_nll, start = self._optimum(data, evaluate, seen, zc)
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
        kind, p = self._input(y_prob)
        return SCALED[kind](p, 1.0 / self.temperature_, self.logits)


def _scaled_probabilities(p, s, logits):
    """sigmoid(s logit(p)); certain predictions stay certain."""
    out = _sigmoid(s * _logit(p))
    keep = (p == 0.0) | (p == 1.0)
    out[keep] = p[keep]
    return out


def _scaled_rows(p, s, logits):
    """softmax(s z) of K-class rows, z the logits or log p."""
    z = p if logits else np.log(np.maximum(p, 1e-300))
    return _softmax(s * z)


# Predictions of each kind at temperature 1 / s
SCALED = {"binary": _scaled_probabilities,
          "logits": lambda z, s, logits: _sigmoid(s * z),
          "multiclass": _scaled_rows}


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
        msg = f"alpha must be a number in (0, 0.5); got {show(alpha)}"
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

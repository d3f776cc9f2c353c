"""Platt scaling (binary): 2-D Newton steps with step halving, one pass a step."""

import math

import numpy as np

from fastcal._kernels import recalibrate as kr
from fastcal.inputs import validation as v
from fastcal.recalibrate.base import _check_both_labels, _check_common, _Recalibration
from fastcal.recalibrate.fields import _BIG, _field, _number_field
from fastcal.recalibrate.passes import _logit, _pass_binary, _pass_binary_hist, _Points, _sigmoid, feature_code

# Platt's feature f: "logit" (logit(p), or the logit itself with logits=True) or "p"
FEATURES = ("logit", "p")


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
        # a step whose predicted decrease of the NLL, -g.d / 2, is below the rounding of
        # its sum (about 1e-13 relative) is taken whole: comparing the NLL cannot judge it
        small = -0.5 * float(g @ d) <= 1e-13 * abs(out[kr.NLL])
        step = 1.0
        while True:
            new = evaluate(a + step * d[0], b + step * d[1])
            if small or new[kr.NLL] <= out[kr.NLL] + 1e-15 * abs(out[kr.NLL]) or step < 1e-6:
                break
            step *= 0.5
        a, b, out = a + step * d[0], b + step * d[1], new
        it += 1


class PlattScaling(_Recalibration):
    """Platt scaling (binary): q = sigmoid(a f + b), f the logit, logit(p) or p.

    Fitted by Newton steps on the NLL with step halving; targets are the
    labels themselves. scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``
    (checked with 1.9.1) fits Platt's smoothed targets (n+ + 1) / (n+ + 2) and
    1 / (n- + 2) with L-BFGS, so its a, b differ by O(1 / n);
    tests/recalibrate/test_recalibrate.py shows that the smoothing is the whole difference.

    Which feature: scikit-learn fits the sigmoid on the model's
    ``decision_function`` when it has one (a logit-like score: pass it with
    ``logits=True``), else on ``predict_proba`` itself, f = p: that is
    ``feature="p"``. The default on probabilities, f = logit(p), is the
    logistic map of the logit, where the identity is a = 1, b = 0; the two are
    different maps and neither is better for every model. A model with many
    p at 0 and 1 (a random forest: leaves of one class) puts those rows at
    logit +-34.5 (p clipped to 1e-15), which pull the slope of f = logit(p)
    down and squeeze the other rows together; f = p keeps them at the ends
    of [0, 1]. Measured on a random forest of 50 trees (scikit-learn's
    make_classification, 100,000 rows to fit, 100,000 to score, 19% of them
    at p = 0 or 1): ECE (15 bins) 0.030 before, 0.068 after f = logit(p),
    0.0035 after f = p, as after scikit-learn's sigmoid calibration.

    Parameters
    ----------
    logits : bool, default False
    feature : {"logit", "p"}, default "logit"
        "logit": f = logit(p) (the logit itself with ``logits=True``). "p":
        f = p, as scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``
        fits ``predict_proba`` (probabilities only: refused with
        ``logits=True``).
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

    def __init__(self, *, logits=False, feature="logit", nan_policy="raise", max_passes=50,
                 tol=1e-10):
        self.logits = logits
        self.feature = feature
        self.nan_policy = nan_policy
        self.max_passes = max_passes
        self.tol = tol

    def _fit(self, data, in_memory):
        self.logits = _check_common(self.logits, self.nan_policy, self.max_passes, self.tol)
        _check_feature(self.feature, self.logits)
        code = feature_code(self.logits, self.feature == "p")
        if data.multiclass:
            msg = "Platt scaling is binary (one probability or logit per row); got K classes"
            raise ValueError(msg)

        def evaluate(a, b):
            if data.passes >= self.max_passes:
                msg = (f"Platt scaling did not converge in max_passes={self.max_passes} passes "
                       f"(last a = {a!r}, b = {b!r}); are the classes separable?")
                raise ValueError(msg)
            out = data.map(True, _pass_binary, (code, float(a), float(b), False))
            data.check(out[kr.N_NAN], out[kr.N_BAD], out[kr.N_ROWS])
            return out

        first, counts, sum_f = data.map(True, _pass_binary_hist, (code, False))
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
        return {"a": self.a_, "b": self.b_, "feature": self.feature}

    def _set_params(self, params):
        self.a_ = _number_field(params, "a", 0.0, _BIG, prefix="params.", open_lo=True)
        self.b_ = _number_field(params, "b", -_BIG, _BIG, prefix="params.")
        feature = params.get("feature", "logit")  # maps saved before the option: logit
        if feature not in FEATURES or (self.logits and feature != "logit"):
            want = "'logit' in a map of logits" if self.logits else f"one of {list(FEATURES)}"
            raise _field("params.feature", feature, want)
        self.feature = feature

    def transform(self, y_prob):
        self._check_fitted()
        kind, p = self._input(y_prob)
        f = _FEATURE_OF[kind, self.feature](p)
        return _sigmoid(self.a_ * f + self.b_)


def _check_feature(feature, logits):
    v.check_choice("feature", feature, FEATURES)
    if logits and feature == "p":
        msg = ("feature='p' fits the sigmoid on probabilities; with logits=True the feature is "
               "the logit itself: use feature='logit' (the default)")
        raise ValueError(msg)


# Platt's feature f of binary predictions of each (kind, feature): logit(p), p, or the logit
_FEATURE_OF = {("binary", "logit"): _logit, ("binary", "p"): lambda p: p,
               ("logits", "logit"): lambda z: z}

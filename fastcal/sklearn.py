"""scikit-learn scorers for ECD and ECE (model selection on calibration).

Lower is better for both, so the scorers are built with
``greater_is_better=False`` and scikit-learn reports the negated value (as
for ``neg_log_loss``). ECD is signed; the scorer uses |ECD|, the distance
from calibrated. Both ask the estimator for ``predict_proba``: scikit-learn
passes the positive-class column for binary problems and the (n, K) matrix
otherwise, in the order of ``estimator.classes_``.

Labels: scikit-learn passes ``y`` as given. If they are not already 0/1
(binary) or 0..K-1 (multi-class), pass ``labels=estimator.classes_`` (the
sorted class values) so they can be turned into column indices.

scikit-learn is imported when a scorer is made (``make_ecd_scorer``, or the
first use of ``ecd_scorer`` / ``ece_scorer``), not with the module: the
metrics here, and the docs built from this module, need no scikit-learn.

Examples
--------
>>> from sklearn.datasets import make_classification
>>> from sklearn.linear_model import LogisticRegression
>>> from sklearn.model_selection import cross_val_score
>>> from fastcal.sklearn import ecd_scorer
>>> X, y = make_classification(n_samples=300, random_state=0)
>>> scores = cross_val_score(LogisticRegression(), X, y, scoring=ecd_scorer, cv=3)
>>> bool((scores <= 0).all())
True
"""

import numpy as np

from fastcal.inputs import validation as v
from fastcal.inputs.batch import resolve_predictions
from fastcal.metrics import ecd, ece

__all__ = ["abs_ecd", "ece_score", "make_ecd_scorer", "make_ece_scorer", "ecd_scorer",
           "ece_scorer"]


def _encode(y_true, y_prob, labels):
    y = v.to_array("y_true", y_true)
    if labels is None:
        return y, v.to_array("y_prob", y_prob)
    batch = resolve_predictions(y_prob)
    p = batch.p
    labels = np.asarray(labels)
    k = p.shape[1] if batch.kind == "multiclass" else 2
    if labels.shape != (k,):
        msg = f"labels must list the {k} classes in column order; got shape {labels.shape}"
        raise ValueError(msg)
    idx = np.full(y.shape[0], -1, np.int64)
    for j, lab in enumerate(labels):
        idx[y == lab] = j
    if (idx < 0).any():
        r = int(np.flatnonzero(idx < 0)[0])
        msg = (f"y_true has a value not in labels: {y[r].item()!r} at row {r}; labels are "
               f"{labels.tolist()}")
        raise ValueError(msg)
    return idx, p


def abs_ecd(y_true, y_prob, *, labels=None, eps=None):
    """|ECD| of binary (1-D) or multi-class (n, K) probabilities; for make_scorer.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels: 0/1 or 0..K-1, or any values listed in ``labels``.
    y_prob : array-like of shape (n,) or (n, K)
    labels : array-like, optional
        The class values in column order (``estimator.classes_``).
    eps : float, optional
        Clip probabilities to [eps, 1 - eps] in the logarithms (estimators
        such as trees predict exact 0 and 1, which give an infinite ECD).

    Returns
    -------
    float
    """
    y, p = _encode(y_true, y_prob, labels)
    return abs(ecd(y, p, eps=eps))


def ece_score(y_true, y_prob, *, labels=None, n_bins=10):
    """ECE (top-label for (n, K)); for make_scorer. Options as in :func:`abs_ecd`."""
    y, p = _encode(y_true, y_prob, labels)
    return ece(y, p, n_bins=n_bins)


def _make_scorer():
    try:
        from sklearn.metrics import make_scorer
    except ImportError as exc:
        msg = "fastcal.sklearn's scorers need scikit-learn: pip install scikit-learn"
        raise ImportError(msg) from exc
    return make_scorer


def make_ecd_scorer(*, labels=None, eps=None):
    """A scorer (estimator, X, y) -> -|ECD| for cross_val_score / GridSearchCV."""
    return _make_scorer()(abs_ecd, greater_is_better=False, response_method="predict_proba",
                          labels=labels, eps=eps)


def make_ece_scorer(*, labels=None, n_bins=10):
    """A scorer (estimator, X, y) -> -ECE for cross_val_score / GridSearchCV."""
    return _make_scorer()(ece_score, greater_is_better=False, response_method="predict_proba",
                          labels=labels, n_bins=n_bins)


_SCORERS = {"ecd_scorer": make_ecd_scorer, "ece_scorer": make_ece_scorer}


def __getattr__(name):
    # ecd_scorer and ece_scorer: made (and scikit-learn imported) on first use, then kept
    if name in _SCORERS:
        scorer = globals()[name] = _SCORERS[name]()
        return scorer
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)

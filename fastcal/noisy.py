"""True accuracy of a model scored against noisy labels (the bounds of the Towards Data
Science posts on model calibration)."""

import math
from typing import NamedTuple

from fastcal.messages import show


class TrueAccuracy(NamedTuple):
    """Bounds and the independent-errors estimate of a model's true accuracy."""

    lower: float
    upper: float
    independent: float


def _check_rate(name, x):
    try:
        x = float(x)
    except (TypeError, ValueError) as exc:
        msg = f"{name} must be a number in [0, 1]; got {x!r}"
        raise ValueError(msg) from exc
    if not (0.0 <= x <= 1.0):
        msg = f"{name} must be in [0, 1]; got {x!r}"
        raise ValueError(msg)
    return x


def true_accuracy(model_accuracy, label_accuracy, *, n_classes=2):
    """Range and independent-errors estimate of accuracy against the true labels.

    Parameters
    ----------
    model_accuracy : float
        Accuracy measured against the noisy labels, A_model.
    label_accuracy : float
        Accuracy of the labels themselves, A_labels (> 1 / n_classes).
    n_classes : int, default 2
        Number of classes, for the independent-errors estimate.

    Returns
    -------
    TrueAccuracy
        ``lower = max(0, A_model - (1 - A_labels))`` (the model's errors
        coincide with the label errors), ``upper = min(1, A_model + (1 -
        A_labels))`` (they never coincide), and ``independent``, the true
        accuracy if model and label errors are independent.

    Raises
    ------
    ValueError
        Rates outside [0, 1], ``label_accuracy <= 1 / n_classes``, or a
        ``model_accuracy`` that independent errors cannot produce.

    Notes
    -----
    With independent errors spread uniformly over the K - 1 wrong classes,
    A_model = A_true A_labels + (1 - A_true)(1 - A_labels) / (K - 1), so

        A_true = (A_model - (1 - A_labels)/(K - 1)) / (A_labels - (1 - A_labels)/(K - 1)),

    which for K = 2 is those posts' (A_model + A_labels - 1) / (2 A_labels - 1).

    Examples
    --------
    The posts' case: a model 90% accurate against labels that are 96% accurate.

    >>> from fastcal.noisy import true_accuracy
    >>> r = true_accuracy(0.90, 0.96)
    >>> round(r.lower, 4), round(r.upper, 4), round(r.independent, 4)
    (0.86, 0.94, 0.9348)
    """
    m = _check_rate("model_accuracy", model_accuracy)
    g = _check_rate("label_accuracy", label_accuracy)
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        msg = f"n_classes must be an integer >= 2; got {show(n_classes)}"
        raise ValueError(msg)
    wrong = (1.0 - g) / (n_classes - 1)  # chance a wrong label is one given wrong class
    denom = g - wrong
    if not denom > 0.0:
        msg = (f"label_accuracy must be above 1/n_classes = {1 / n_classes:.4g} for the "
               f"independent-errors estimate; got {g!r}")
        raise ValueError(msg)
    est = (m - wrong) / denom
    if not (-1e-12 <= est <= 1.0 + 1e-12) or math.isnan(est):
        msg = (f"model_accuracy {m!r} cannot arise from independent errors with label_accuracy "
               f"{g!r} and {n_classes} classes: it must lie between {wrong:.6g} and {g:.6g}")
        raise ValueError(msg)
    est = min(max(est, 0.0), 1.0)  # only rounding is clipped here (checked above)
    return TrueAccuracy(lower=max(0.0, m - (1.0 - g)), upper=min(1.0, m + (1.0 - g)),
                        independent=est)


__all__ = ["TrueAccuracy", "true_accuracy"]

"""Binned calibration measures read off per-bin sums: the L2 and debiased L2
calibration errors and the Brier decomposition.

Each takes the per-bin count, the per-bin count of the observed outcome
(positives, or correct for top-label) and the per-bin sum of p, plus, for the
Brier decomposition, two global sums (sum p**2 and sum p*y). Every input is
a sum over rows, so the measures are exact from merged state whatever the
chunking. Empty bins add nothing.
"""

import math

import numpy as np

NAN = float("nan")

# the fields of brier_decomposition, in the order of the identity
# REL - RES + UNC + WBV - WBC = Brier
BRIER_PARTS = ("brier_reliability", "brier_resolution", "brier_uncertainty",
               "brier_within_variance", "brier_within_covariance")


def _means(count, n_obs, sum_p):
    """(c, w, freq, conf) of the non-empty bins: counts as float, weights
    c / n, observed frequency and mean p."""
    full = count > 0
    c = count[full].astype(np.float64)
    n = c.sum()
    return c, c / n, n_obs[full] / c, sum_p[full] / c


def l2_error(count, n_obs, sum_p):
    """sqrt(sum_b (n_b / n) (freq_b - conf_b)**2): torchmetrics' norm="l2"."""
    if not np.any(count > 0):
        return NAN
    _, w, freq, conf = _means(count, n_obs, sum_p)
    return math.sqrt(float(np.dot(w, (freq - conf) ** 2)))


def debiased_square(count, n_obs, sum_p, n):
    """Kumar, Liang and Ma (2019) debiased estimate of the squared L2 error, before
    the root: sum_b (n_b / n) [(freq_b - conf_b)**2 - freq_b (1 - freq_b) / (n_b - 1)],
    bins with fewer than 2 rows adding 0 (uncertainty-calibration's
    ``unbiased_square_ce``); ``n`` is the number of rows (the weights' total)."""
    if n == 0:
        return NAN
    big = count >= 2
    c = count[big].astype(np.float64)
    freq = n_obs[big] / c
    conf = sum_p[big] / c
    terms = (freq - conf) ** 2 - freq * (1.0 - freq) / (c - 1.0)
    return float(np.dot(c / n, terms))


def debiased_l2(count, n_obs, sum_p):
    """sqrt(max(debiased_square, 0)): the value uncertainty-calibration's
    ``get_calibration_error(..., p=2, debias=True)`` returns."""
    n = int(count.sum())
    sq = debiased_square(count, n_obs, sum_p, n)
    return sq if math.isnan(sq) else math.sqrt(max(sq, 0.0))


def brier_decomposition(count, n_pos, sum_p, sum_p2, sum_py):
    """Murphy (1973) reliability, resolution and uncertainty with the two
    within-bin terms of Stephenson, Coelho and Jolliffe (2008), as a dict of
    :data:`BRIER_PARTS`. Arrays may be (bins,) or (classes, bins): the terms
    of every class are added (the class-wise decomposition of the K-class
    Brier score). ``sum_p2`` and ``sum_py`` are global sums over rows (and
    classes) of p**2 and p*y.

    With n_b rows, mean p p_b and frequency y_b in bin b and y the overall
    frequency: REL = sum_b n_b (p_b - y_b)**2 / n, RES = sum_b n_b (y_b - y)**2 / n,
    UNC = y (1 - y), WBV = (sum p**2 - sum_b n_b p_b**2) / n and
    WBC = 2 (sum p y - sum_b n_b p_b y_b) / n; REL - RES + UNC + WBV - WBC is
    the Brier score (1/n) sum (p - y)**2 exactly (y in {0, 1}).
    """
    count = np.atleast_2d(count)
    n_pos = np.atleast_2d(n_pos).astype(np.float64)
    sum_p = np.atleast_2d(sum_p)
    n = float(count[0].sum())
    if n == 0:
        return dict.fromkeys(BRIER_PARTS, NAN)
    full = count > 0
    c = np.where(full, count, 1).astype(np.float64)
    pos = np.where(full, n_pos, 0.0)
    sp = np.where(full, sum_p, 0.0)
    base = pos.sum(axis=1, keepdims=True) / n  # each class's overall frequency
    rel = np.sum((sp - pos) ** 2 / c) / n
    res = np.sum(np.where(full, c * (pos / c - base) ** 2, 0.0)) / n
    unc = float(np.sum(base * (1.0 - base)))
    wbv = (sum_p2 - np.sum(sp * sp / c)) / n
    wbc = 2.0 * (sum_py - np.sum(sp * pos / c)) / n
    return dict(zip(BRIER_PARTS, (float(rel), float(res), unc, float(wbv), float(wbc))))

"""Binned calibration measures read off per-bin sums: the L2 and debiased L2
calibration errors and the Brier decomposition.

Each takes the per-bin counts (rows, and the observed outcome: positives, or
correct for top-label) and the per-bin sum of p, plus, for the Brier
decomposition, two global sums (sum p**2 and sum p*y). Every input is a sum
over rows, so the measures are exact from merged state whatever the
chunking. Empty bins add nothing. The loop is one compiled kernel
(``binary.binned_measures``): the report is built on every call, and at small
n it costs more than the fill.
"""

import math

import numpy as np

from fastcal._kernels import binary as kb

NAN = float("nan")

# the fields of the Brier decomposition, in the order of the identity
# REL - RES + UNC + WBV - WBC = Brier
BRIER_PARTS = ("brier_reliability", "brier_resolution", "brier_uncertainty",
               "brier_within_variance", "brier_within_covariance")


def binned(counts, col_obs, col_pos, sums, col_p, sum_p2, sum_py):
    """The measures of (K, n_bins, .) counts and sums (K = 1: binary or top-label;
    K classes: the class-wise state) as a dict: ``l2`` (binary: the L2 error
    sqrt(sum_b w_b (o_b - c_b)**2), torchmetrics' norm="l2"), ``debiased``
    (the debiased L2 error of Kumar, Liang and Ma, 2019: the root of the
    clamped debiased square; K classes: the root of the mean over classes of
    the clamped squares, uncertainty-calibration's "marginal" mode) and the
    :data:`BRIER_PARTS`, summed over classes.

    With n_b rows, mean p c_b and frequency y_b in bin b and y the overall
    frequency: REL = sum_b n_b (c_b - y_b)**2 / n, RES = sum_b n_b (y_b - y)**2 / n,
    UNC = y (1 - y), WBV = (sum p**2 - sum_b n_b c_b**2) / n and
    WBC = 2 (sum p y - sum_b n_b c_b y_b) / n; REL - RES + UNC + WBV - WBC is the
    Brier score (1/n) sum (p - y)**2 exactly (y in {0, 1}).
    """
    per_class, dec = kb.binned_measures(counts, col_obs, col_pos, sums, col_p)
    rel, res, unc, s_pp, s_py, n = dec.tolist()
    if n == 0:
        return dict(l2=NAN, debiased=NAN, **dict.fromkeys(BRIER_PARTS, NAN))
    if per_class.shape[0] == 1:
        square = max(float(per_class[0, 1]), 0.0)
    else:
        square = float(np.maximum(per_class[:, 1], 0.0).mean())
    return {"l2": math.sqrt(float(per_class[0, 0])), "debiased": math.sqrt(square),
            "brier_reliability": rel / n, "brier_resolution": res / n,
            "brier_uncertainty": unc, "brier_within_variance": (sum_p2 - s_pp) / n,
            "brier_within_covariance": 2.0 * (sum_py - s_py) / n}


def debiased_kish(counts, col_obs, sum_p, w2):
    """The debiased L2 error of weighted top-label or binary bins: the root of
    max(0, sum_b (W_b / W) [(o_b - c_b)**2 - o_b (1 - o_b) / (n_b - 1)]) with W_b
    the sum of w in bin b (``counts[:, 0]``), o_b its weighted outcome
    (``counts[:, col_obs] / W_b``), c_b its weighted mean p (``sum_p / W_b``) and
    n_b = W_b**2 / sum w**2 Kish's effective rows (``w2`` the sums of w**2); bins
    of at most one effective row add 0. With every weight 1, n_b is the bin's rows
    and this is the unweighted estimate."""
    mass = np.asarray(counts[:, 0], np.float64)
    total = float(mass.sum())
    if not total > 0:
        return NAN
    full = mass > 0
    wb, obs = mass[full], counts[full, col_obs] / mass[full]
    gap = obs - sum_p[full] / wb
    n_b = wb * (wb / np.asarray(w2, np.float64)[full])
    noise = np.zeros(wb.shape)
    many = n_b > 1.0
    noise[many] = obs[many] * (1.0 - obs[many]) / (n_b[many] - 1.0)
    square = float(np.sum(wb / total * np.where(many, gap * gap - noise, 0.0)))
    return math.sqrt(max(square, 0.0))

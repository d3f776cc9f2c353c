"""Multi-class (N, K) probabilities and logits: validation, fill, class-wise ECE.

The public entry points are the ordinary metric functions (``ece``, ``ecd``,
``calibration_report``, ... dispatch here when ``y_prob`` is 2-D or
``logits=True``); :func:`fastcal.classwise_ece` is in fastcal.metrics.
"""


import numpy as np

from fastcal.inputs import validation as v
from fastcal._kernels import _config
from fastcal._kernels import multiclass as km

# Rows of y_prob must sum to 1 within this (absolute) tolerance unless
# renormalize=True. float32 softmax outputs over 1000 classes are within ~1e-6.
SUM_TOL = _config.SUM_TOL

_PARALLEL_MIN_ELEMENTS = 1_000_000


def fill(y, p, edges, uniform, right, eps, logits, renormalize, classwise, threads,
         with_logs=True):
    """Run the multi-class kernel; serial below ~1e6 elements."""
    n, k = p.shape
    n_threads = v.check_threads(threads)
    nb = edges.shape[0] - 1
    rowwise = k >= km.ROWWISE_K  # long rows vectorise along the row
    if n * k < _PARALLEL_MIN_ELEMENTS or n_threads == 1 or n < 2 * n_threads:
        state = km.new_state(nb, k, classwise)
        fill_range = km.fill_rows if rowwise else km.fill_range
        fill_range(p, y, 0, n, edges, uniform, right, eps, logits, renormalize, SUM_TOL,
                   classwise, *state, with_logs)
        return state
    fill_parallel = km.fill_rows_parallel if rowwise else km.fill_parallel
    return fill_parallel(p, y, edges, uniform, right, eps, logits, renormalize, SUM_TOL,
                         classwise, n_threads, with_logs)


def raise_for_checks(checks, nan_policy, y, p, logits, renormalize, offset=0):
    """Clear ValueErrors for the kernel's invalid-row counts (first row is global)."""
    nk = km.N_CHECK_KINDS

    def first(kind):
        return int(checks[nk + kind])

    what = "logits" if logits else "probabilities"
    if nan_policy == "raise" and checks[km.CHECK_NAN_P] > 0:
        msg = (f"y_prob contains NaN in {checks[km.CHECK_NAN_P]} rows (first at row "
               f"{first(km.CHECK_NAN_P) + offset}); pass nan_policy='omit' to drop those rows")
        raise ValueError(msg)
    if nan_policy == "raise" and checks[km.CHECK_NAN_Y] > 0:
        msg = (f"y_true contains {checks[km.CHECK_NAN_Y]} NaN labels (first at row "
               f"{first(km.CHECK_NAN_Y) + offset}); pass nan_policy='omit' to drop those rows")
        raise ValueError(msg)
    if checks[km.CHECK_INF_P] > 0:
        extra = ("+inf, or every logit -inf" if logits else "an infinite value")
        msg = (f"y_prob has {extra} in {checks[km.CHECK_INF_P]} rows (first at row "
               f"{first(km.CHECK_INF_P) + offset}); {what} must be finite")
        raise ValueError(msg)
    if checks[km.CHECK_NEG_P] > 0:
        r = first(km.CHECK_NEG_P)
        msg = (f"y_prob has negative probabilities in {checks[km.CHECK_NEG_P]} rows (first at "
               f"row {r + offset}, min {float(np.min(p[r])):.6g}); probabilities must be >= 0 "
               "(pass logits=True if these are logits)")
        raise ValueError(msg)
    if checks[km.CHECK_SUM_P] > 0:
        r = first(km.CHECK_SUM_P)
        s = float(np.sum(p[r], dtype=np.float64))
        if renormalize:
            msg = (f"y_prob has {checks[km.CHECK_SUM_P]} rows summing to 0 (first at row "
                   f"{r + offset}); they cannot be renormalized")
        else:
            msg = (f"y_prob has {checks[km.CHECK_SUM_P]} rows that do not sum to 1 within "
                   f"{SUM_TOL:g} (first at row {r + offset}, sum {s!r}); pass renormalize=True "
                   "to divide each row by its sum, or logits=True if these are logits")
        raise ValueError(msg)
    if checks[km.CHECK_BAD_Y] > 0:
        r = first(km.CHECK_BAD_Y)
        label = y[r]
        label = label.item() if hasattr(label, "item") else label
        msg = (f"y_true has {checks[km.CHECK_BAD_Y]} labels outside the class indices "
               f"0..{p.shape[1] - 1} (first: label {label!r} at row {r + offset}); labels must "
               f"be integers in [0, K) with K = {p.shape[1]} columns of y_prob")
        raise ValueError(msg)


def class_tables(ccounts, csums, edges):
    """Per-class ECE/ESCE/MCE and reliability columns from the class-wise state.

    Returns (per-class dict of 1-D arrays, per-class-per-bin dict of 2-D arrays).
    """
    count = ccounts[:, :, 0]
    n_true = ccounts[:, :, 1]
    n = count.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = count.astype(np.float64)
        conf = csums / c
        freq = n_true / c
        gap = freq - conf
        w = c / n[:, None]
        esce = np.nansum(np.where(count > 0, w * gap, 0.0), axis=1)
        ece = np.nansum(np.where(count > 0, w * np.abs(gap), 0.0), axis=1)
        mce = np.max(np.where(count > 0, np.abs(gap), -np.inf), axis=1)
        mean_p = csums.sum(axis=1) / n
        frequency = n_true.sum(axis=1) / n
    empty = count == 0
    conf[empty] = np.nan
    freq[empty] = np.nan
    gap[empty] = np.nan
    per_class = {
        "class": np.arange(count.shape[0], dtype=np.int64),
        "support": n_true.sum(axis=1).astype(np.int64),
        "mean_prob": mean_p,
        "frequency": frequency,
        "ece": ece,
        "esce": esce,
        "mce": mce,
    }
    per_bin = {
        "lower": np.asarray(edges[:-1], np.float64),
        "upper": np.asarray(edges[1:], np.float64),
        "count": count.copy(),
        "n_true": n_true.copy(),
        "conf": conf,
        "frequency": freq,
    }
    return per_class, per_bin

"""Soft labels: calibration against human label distributions (seed 003).

``y_true`` has shape (n, K) and holds, per sample, a distribution over the K
classes (for example annotator vote frequencies); ``y_prob`` has the same
shape (probabilities, or logits with ``logits=True``). One compiled pass
gives every measure below (:func:`soft_label_report`):

- EntCE_i = H(y_i) - H(p_i), the human entropy minus the model entropy
  (H = -sum_k p_k log p_k, natural log; positive: the model is more certain
  than the annotators). Reported as mean |EntCE| (``entce``, the blog's
  E[|EntCE|]) and the signed mean (``entce_signed``).
- RankCS = 1/n sum_i 1[argsort(p_i) == argsort(y_i)]: the fraction of
  samples whose classes the model ranks in the annotators' order. Both sorts
  are stable, so tied classes are ordered by index (a tie in y_i is matched
  only by the same tie, or the same index order, in p_i).
- DistCE_i = TVD(p_i, y_i) = 1/2 sum_k |p_ik - y_ik|, reported as its mean.
- Brier = 1/n sum_i sum_k (p_ik - y_ik)^2.
- NLL (cross-entropy) = -1/n sum_i sum_k y_ik log p_ik (terms with y_ik = 0
  are 0; +inf if some y_ik > 0 has p_ik = 0).
- ECD = 1/n sum_i [sum_k p_ik log p_ik - sum_k y_ik log p_ik]: eq. 12 of the
  ECD paper with the observed log-likelihood log p_i,y_i replaced by its
  expectation under the soft label; equal to eq. 12 for one-hot y_i.
"""

from dataclasses import dataclass

import numpy as np

from fastcal.inputs import validation as v
from fastcal.accumulators import classes as mc
from fastcal._kernels import multiclass as km


@dataclass
class SoftLabelReport:
    """Soft-label calibration measures from one pass (see module docstring).

    Attributes
    ----------
    n, n_omitted : int
    entce, entce_signed, rankcs, distce, brier, nll, ecd : float
    ecd_var : float
        Sum over samples of sum_k p_k (log p_k - sum_j p_j log p_j)^2, the
        variance of the summed ECD terms if one-hot labels were drawn from p.
    sums : dict
        The raw sums (mergeable by addition).
    """

    n: int
    n_omitted: int
    entce: float
    entce_signed: float
    rankcs: float
    distce: float
    brier: float
    nll: float
    ecd: float
    ecd_var: float
    sums: dict

    def to_dict(self):
        from fastcal.reports.report import _clean

        out = {k: _clean(getattr(self, k)) for k in (
            "n", "n_omitted", "entce", "entce_signed", "rankcs", "distce", "brier", "nll", "ecd",
            "ecd_var")}
        return out


_SUM_NAMES = ("sum_abs_entce", "sum_entce", "n_rank_match", "sum_distce", "sum_brier", "sum_nll",
              "sum_ecd", "sum_ecd_var", "sum_ecd_sq")


def _check(y_true, y_prob, logits):
    p = v.as_prob_2d(y_prob, logits)
    t = v.to_array("y_true", y_true)
    if t.ndim != 2:
        msg = (f"y_true must have shape (n_samples, n_classes) holding label distributions; "
               f"got shape {t.shape}")
        raise ValueError(msg)
    if t.shape != p.shape:
        msg = f"y_true and y_prob must have the same shape; got {t.shape} and {p.shape}"
        raise ValueError(msg)
    t = v.float_dtype("y_true", t)
    if p.shape[0] == 0:
        msg = "y_true and y_prob are empty; need at least one sample"
        raise ValueError(msg)
    return t, p


def soft_label_report(y_true, y_prob, *, eps=None, logits=False, renormalize=False,
                      nan_policy="raise", threads=None):
    """EntCE, RankCS, DistCE, Brier, cross-entropy and ECD against soft labels.

    Parameters
    ----------
    y_true : array-like of shape (n, K)
        Label distributions: non-negative rows summing to 1 (within 1e-5).
    y_prob : array-like of shape (n, K)
        Predicted probabilities, or logits with ``logits=True``.
    eps : float, optional
        Clip p to [eps, 1 - eps] inside the logarithms.
    logits : bool, default False
        Row softmax inside the kernel.
    renormalize : bool, default False
        Divide rows of ``y_prob`` by their sum instead of rejecting them.
    nan_policy : {"raise", "omit"}, default "raise"
    threads : int, optional

    Returns
    -------
    SoftLabelReport

    Raises
    ------
    ValueError
        Shapes differ or are not 2-D; a y_true row is negative, non-finite
        or does not sum to 1; y_prob rows as for multi-class input (count
        and first row in each message).

    Notes
    -----
    See the module docstring for the formulas (Baan et al.'s human
    uncertainty calibration as summarised in seed 003; ECD from eq. 12).

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.soft import soft_label_report
    >>> y = np.array([[0.6, 0.3, 0.1], [0.0, 0.5, 0.5]])
    >>> p = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3]])
    >>> r = soft_label_report(y, p)
    >>> round(r.distce, 3), r.rankcs
    (0.15, 0.5)
    """
    v.check_choice("nan_policy", nan_policy, v.NAN_POLICIES)
    eps = v.check_eps(eps)
    t, p = _check(y_true, y_prob, logits)
    n, k = p.shape
    n_threads = v.check_threads(threads)
    if n * k < 1_000_000 or n_threads == 1 or n < 2 * n_threads:
        totals = np.zeros(km.N_SOFT, np.float64)
        checks = np.full(2 * km.N_CHECK_KINDS, -1, np.int64)
        checks[: km.N_CHECK_KINDS] = 0
        km.soft_range(p, t, 0, n, eps, bool(logits), bool(renormalize), mc.SUM_TOL, totals,
                      checks)
    else:
        totals, checks = km.soft_parallel(p, t, eps, bool(logits), bool(renormalize),
                                          mc.SUM_TOL, n_threads)
    _raise(checks, nan_policy, t, p, logits, renormalize)
    n_omit = int(checks[km.CHECK_OMITTED])
    m = n - n_omit
    if m == 0:
        msg = f"no samples left: all {n} rows were omitted as NaN"
        raise ValueError(msg)
    mean = totals / m
    sums = {name: float(x) for name, x in zip(_SUM_NAMES, totals)}
    return SoftLabelReport(n=m, n_omitted=n_omit, entce=float(mean[0]),
                           entce_signed=float(mean[1]), rankcs=float(mean[2]),
                           distce=float(mean[3]), brier=float(mean[4]), nll=float(mean[5]),
                           ecd=float(mean[6]), ecd_var=float(totals[7]), sums=sums)


def _raise(checks, nan_policy, t, p, logits, renormalize):
    nk = km.N_CHECK_KINDS
    if nan_policy == "raise" and checks[km.CHECK_NAN_Y] > 0:
        msg = (f"y_true contains NaN in {checks[km.CHECK_NAN_Y]} rows (first at row "
               f"{int(checks[nk + km.CHECK_NAN_Y])}); pass nan_policy='omit' to drop those rows")
        raise ValueError(msg)
    if checks[km.CHECK_BAD_T] > 0:
        r = int(checks[nk + km.CHECK_BAD_T])
        msg = (f"y_true has {checks[km.CHECK_BAD_T]} rows that are not label distributions "
               f"(first at row {r}: min {float(np.min(t[r])):.6g}, sum "
               f"{float(np.sum(t[r], dtype=np.float64))!r}); each row must be non-negative, "
               f"finite and sum to 1 within {mc.SUM_TOL:g}")
        raise ValueError(msg)
    # y_prob checks share the multi-class messages; labels are not indices here.
    c = checks.copy()
    c[km.CHECK_BAD_Y] = 0
    c[km.CHECK_NAN_Y] = 0
    mc.raise_for_checks(c, nan_policy, None, p, logits, renormalize)


def entce(y_true, y_prob, **kwargs):
    """Mean |EntCE| = 1/n sum_i |H(y_i) - H(p_i)| (natural log); options as in
    :func:`soft_label_report`.

    Examples
    --------
    >>> from fastcal.soft import entce
    >>> round(entce([[0.5, 0.5]], [[0.9, 0.1]]), 4)
    0.3681
    """
    return soft_label_report(y_true, y_prob, **kwargs).entce


def rankcs(y_true, y_prob, **kwargs):
    """RankCS: fraction of samples with argsort(p_i) == argsort(y_i) (stable sorts).

    Examples
    --------
    >>> from fastcal.soft import rankcs
    >>> rankcs([[0.6, 0.4], [0.3, 0.7]], [[0.9, 0.1], [0.8, 0.2]])
    0.5
    """
    return soft_label_report(y_true, y_prob, **kwargs).rankcs


def distce(y_true, y_prob, **kwargs):
    """Mean DistCE: 1/n sum_i 1/2 sum_k |p_ik - y_ik| (total variation distance).

    Examples
    --------
    >>> from fastcal.soft import distce
    >>> round(distce([[0.6, 0.4]], [[0.9, 0.1]]), 3)
    0.3
    """
    return soft_label_report(y_true, y_prob, **kwargs).distce


def soft_brier_score(y_true, y_prob, **kwargs):
    """Soft-label Brier score 1/n sum_i sum_k (p_ik - y_ik)^2.

    Examples
    --------
    >>> from fastcal.soft import soft_brier_score
    >>> round(soft_brier_score([[0.6, 0.4]], [[0.9, 0.1]]), 3)
    0.18
    """
    return soft_label_report(y_true, y_prob, **kwargs).brier


def soft_log_loss(y_true, y_prob, **kwargs):
    """Cross-entropy -1/n sum_i sum_k y_ik log p_ik (natural log).

    Examples
    --------
    >>> from fastcal.soft import soft_log_loss
    >>> round(soft_log_loss([[0.5, 0.5]], [[0.5, 0.5]]), 4)
    0.6931
    """
    return soft_label_report(y_true, y_prob, **kwargs).nll


def soft_ecd(y_true, y_prob, **kwargs):
    """Soft-label ECD: 1/n sum_i [sum_k p_ik log p_ik - sum_k y_ik log p_ik].

    Expected log-likelihood under the model minus the observed one under the
    soft label (eq. 12 with log p_y replaced by its soft-label expectation).

    Examples
    --------
    >>> from fastcal.soft import soft_ecd
    >>> soft_ecd([[0.5, 0.5]], [[0.5, 0.5]])
    0.0
    """
    return soft_label_report(y_true, y_prob, **kwargs).ecd

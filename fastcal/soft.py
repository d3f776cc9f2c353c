"""Soft labels: calibration against human label distributions (human-uncertainty calibration, as
in the Towards Data Science posts on model calibration: EntCE, RankCS, DistCE).

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

from fastcal.reports.soft_report import SoftLabelReport
from fastcal.score import Options, score
from fastcal.sources.arrays import ArraySource


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

    The same state fills from files and Dask (``score_file`` and
    ``fastcal.distributed`` with K label columns): see
    :class:`fastcal.accumulators.soft.SoftLabelAccumulator`.

    Raises
    ------
    ValueError
        Shapes differ or are not 2-D; a y_true row is negative, non-finite
        or does not sum to 1; y_prob rows as for multi-class input (count
        and first row in each message).

    Notes
    -----
    See the module docstring for the formulas (Baan et al.'s human
    uncertainty calibration as summarised in the Towards Data Science posts on model calibration;
    ECD from eq. 12 of Sumler et al.).

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
    opts = Options(eps=eps, logits=logits, renormalize=renormalize, nan_policy=nan_policy,
                   threads=threads, ace=False)
    return score(ArraySource(y_true, y_prob, soft=True), opts)


def _measure(name, field, summary, example, shown):
    """The function ``name(y_true, y_prob, **options)``: ``field`` of
    :func:`soft_label_report`, documented by ``summary`` and a worked ``example``."""
    def measure(y_true, y_prob, **kwargs):
        return getattr(soft_label_report(y_true, y_prob, **kwargs), field)

    measure.__name__ = measure.__qualname__ = name
    measure.__doc__ = (f"{summary}\n\nOptions as in :func:`soft_label_report`.\n\n"
                       f"Examples\n--------\n>>> from fastcal.soft import {name}\n"
                       f">>> {example}\n{shown}\n")
    return measure


# One function per measure of the report: name -> (report field, summary, example, its output)
MEASURES = {
    "entce": ("entce", "Mean |EntCE| = 1/n sum_i |H(y_i) - H(p_i)| (natural log).",
              "round(entce([[0.5, 0.5]], [[0.9, 0.1]]), 4)", "0.3681"),
    "rankcs": ("rankcs", "RankCS: fraction of samples with argsort(p_i) == argsort(y_i) "
               "(stable sorts).",
               "rankcs([[0.6, 0.4], [0.3, 0.7]], [[0.9, 0.1], [0.8, 0.2]])", "0.5"),
    "distce": ("distce", "Mean DistCE: 1/n sum_i 1/2 sum_k |p_ik - y_ik| (total variation "
               "distance).", "round(distce([[0.6, 0.4]], [[0.9, 0.1]]), 3)", "0.3"),
    "soft_brier_score": ("brier", "Soft-label Brier score 1/n sum_i sum_k (p_ik - y_ik)^2.",
                         "round(soft_brier_score([[0.6, 0.4]], [[0.9, 0.1]]), 3)", "0.18"),
    "soft_log_loss": ("nll", "Cross-entropy -1/n sum_i sum_k y_ik log p_ik (natural log).",
                      "round(soft_log_loss([[0.5, 0.5]], [[0.5, 0.5]]), 4)", "0.6931"),
    "soft_ecd": ("ecd", "Soft-label ECD: 1/n sum_i [sum_k p_ik log p_ik - sum_k y_ik log p_ik]."
                 "\n\nExpected log-likelihood under the model minus the observed one under "
                 "the soft label (eq. 12 with log p_y replaced by its soft-label expectation).",
                 "soft_ecd([[0.5, 0.5]], [[0.5, 0.5]])", "0.0"),
}

entce, rankcs, distce, soft_brier_score, soft_log_loss, soft_ecd = (
    _measure(name, *spec) for name, spec in MEASURES.items())


__all__ = ["SoftLabelReport", "distce", "entce", "rankcs", "soft_brier_score", "soft_ecd",
           "soft_label_report", "soft_log_loss"]

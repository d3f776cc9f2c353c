"""Public metric functions. Each validates once, fills once, and reads the report."""

import numpy as np

from . import _validation as v
from . import equal_mass as em
from . import multiclass as mc
from . import soft
from ._kernels import binary as kb
from .accumulator import CalibrationAccumulator, fill, raise_for_checks
from .binning import uniform_edges
from .report import CalibrationReport



def _fill_report(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
                 nan_policy="raise", eps=None, threads=None, with_logs=True, n_boot=0, seed=0,
                 logits=False, renormalize=False, classwise=False, ace_buckets=0):
    v.check_choice("observed", observed, v.OBSERVED)
    acc = CalibrationAccumulator(n_bins=n_bins, edges=edges, closed=closed,
                                 nan_policy=nan_policy, eps=eps, threads=threads,
                                 n_boot=n_boot, seed=seed, logits=logits,
                                 renormalize=renormalize, classwise=classwise,
                                 ace_buckets=ace_buckets)
    p = v.to_array("y_prob", y_prob)
    if p.ndim == 2 or logits:
        # Multi-class (N, K) input, or 1-D logits: the accumulator's own paths.
        if p.ndim == 2:
            y, p = mc.check_pair(y_true, p, logits)
        else:
            y, p = v.check_pair(y_true, p)
        if p.shape[0] == 0:
            msg = "y_true and y_prob are empty; need at least one sample"
            raise ValueError(msg)
        acc._with_logs = with_logs  # binned metrics only: skip the logarithms
        acc.update(y, p)
        acc._with_logs = True
        if acc.n == 0:
            msg = f"no samples left: all {p.shape[0]} rows were omitted as NaN"
            raise ValueError(msg)
        return acc, y, p
    y, p = v.check_pair(y_true, p)
    if p.shape[0] == 0:
        msg = "y_true and y_prob are empty; need at least one sample"
        raise ValueError(msg)
    kedges, uniform = acc._kernel_edges(p.dtype)
    counts, sums, totals, checks, *fine = fill(
        y, p, kedges, uniform, acc.closed == "right", acc.nan_policy == "omit", acc.eps,
        with_logs, acc.threads, acc.ace_buckets)
    raise_for_checks(checks, acc.nan_policy)
    if fine:
        acc.fine_counts, acc.fine_p = fine
    acc._fill_boot(y, p, 0)
    acc.counts, acc.sums, acc.totals = counts, sums, totals  # the fresh state of one fill
    acc.n_omitted = int(checks[kb.CHECK_OMITTED])
    acc.n_rows = p.shape[0]
    if acc.n == 0:
        msg = f"no samples left: all {p.shape[0]} rows were omitted as NaN"
        raise ValueError(msg)
    return acc, y, p


def _equal_mass(y, p, acc, *, logits=False, renormalize=False, with_logs=True, hist=None):
    """Per-group state of the exact equal-mass groups of validated arrays
    (fastcal.equal_mass): (counts, sums, totals, lower, upper, passes)."""
    yr, x = em.ranking_pair(y, p, logits=logits, renormalize=renormalize, eps=acc.eps)
    parts = em.ArrayParts(yr, x, v.check_threads(acc.threads))
    return em.groups(parts, acc.n_bins, omit=acc.nan_policy == "omit", eps=acc.eps,
                     with_logs=with_logs, hist=hist)


def calibration_report(y_true, y_prob, *, n_bins=10, edges=None, closed="left",
                       strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
                       ace=True, threads=None, ci=None, n_boot=200, seed=0, logits=False,
                       renormalize=False):
    """Every calibration metric and the per-bin table, from one pass.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels 0/1 (bool, any integer dtype, or float 0.0/1.0); for (n, K)
        ``y_prob``, class indices in [0, K).
    y_prob : array-like of shape (n,) or (n, K)
        Predicted probability of class 1, or (n, K) class probabilities
        (rows sum to 1), or logits with ``logits=True``. Any float or int
        dtype and layout, or a pandas/polars/pyarrow/torch object (see
        :mod:`fastcal.inputs`).
    n_bins : int, default 10
        Number of bins (uniform on [0, 1], or equal-mass for "quantile").
    edges : array-like, optional
        Explicit edges from 0 to 1, strictly increasing (overrides n_bins).
    closed : {"left", "right"}, default "left"
        "left": [a, b) and the last bin [a, 1] (paper, Table I). "right":
        (a, b] and the first bin [0, b] (scikit-learn). A p equal to an edge
        k / n_bins (rounded to p's dtype) goes to that side exactly.
    strategy : {"uniform", "quantile"}, default "uniform"
        "quantile": the table is over equal-mass bins (then ``ece == ace``).
    observed : {"frac_pos", "accuracy"}, default "frac_pos"
        What ECE compares with the mean p of a bin: the fraction of positives
        (paper, eq. 4) or the accuracy of the thresholded label p > 0.5 (the
        worked examples of McCaffrey and Pavlovic).
    nan_policy : {"raise", "omit"}, default "raise"
    eps : float, optional
        Clip p to [eps, 1 - eps] inside the ECD and NLL terms.
    ace : bool, default True
        Also compute ACE. It needs the ranks of the data: one extra stable
        sort, O(n log n); pass False for a strictly single-pass report.
    threads : int, optional
        Threads for the kernel (default: numba's setting).
    ci : float, optional
        Confidence level (e.g. 0.95) of the intervals in ``report.intervals``:
        t-intervals for ECD, Brier and NLL (means of per-sample terms), and
        basic intervals of a Poisson bootstrap for ECE, ESCE and MCE
        (over the uniform or explicit bins; NaN with strategy="quantile").
    n_boot : int, default 200
        Bootstrap replicates when ``ci`` is given (0: analytic intervals only).
        Binary probabilities only: with logits or (n, K) input ``ci`` gives
        the analytic intervals (ECD, Brier, NLL) and NaN for ECE/ESCE/MCE.
    seed : int, default 0
        Seed of the bootstrap weights, which depend only on (seed, row
        index, replicate): the same intervals whatever the chunking.
    logits : bool, default False
        ``y_prob`` holds logits: sigmoid (1-D) or row softmax (2-D) inside
        the kernel, numerically stable, never materialised. Never guessed.
    renormalize : bool, default False
        (n, K) only: divide rows by their sum instead of rejecting rows that
        do not sum to 1 within 1e-5.

    Returns
    -------
    CalibrationReport
        For (n, K) input a :class:`~fastcal.multiclass_report.MulticlassReport`:
        the table is over confidence (max-probability) bins, ``accuracy`` is
        the fraction of argmax == label, plus the per-class table
        ``classes`` and ``classwise_ece``.

    Raises
    ------
    ValueError
        Bad probabilities or labels (count and first index), lengths that
        differ, empty input, bad options.

    Notes
    -----
    ECE = sum_m |B_m|/n |frac_pos(B_m) - conf(B_m)| (eq. 3-5), ESCE the same
    without the absolute value (eq. 6), MCE the largest |.| over non-empty
    bins, ECD = 1/n sum_i (p_i - y_i) log(p_i / (1 - p_i)) (eq. 15) with the
    limits 0 at p = y in {0, 1} and +inf at p = 1 - y in {0, 1}. The report
    also carries the ECD test of calibration (``report.ecd_z``,
    ``report.verdict``; :mod:`fastcal.stats`).

    For (n, K): top-label ECE/ESCE/MCE/ACE over bins of max_k p_k, comparing
    mean confidence with accuracy (Guo et al.); ECD = 1/n sum_i [sum_k p_ik
    log p_ik - log p_i,y_i] (eq. 12, 0 log 0 = 0, +inf if p_i,y_i = 0);
    Brier = 1/n sum_i sum_k (p_ik - 1[y_i = k])^2; NLL = -1/n sum_i log p_i,y_i;
    class-wise ECE = 1/K sum_k ECE(column k vs 1[y = k]).
    ``strategy="quantile"`` is binary-only; for (n, K) the equal-mass
    version of top-label ECE is ``ace``.

    Examples
    --------
    >>> import fastcal
    >>> r = fastcal.calibration_report([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5)
    >>> r.n, round(r.ece, 3)
    (4, 0.25)
    """
    from .stats import check_ci

    v.check_choice("strategy", strategy, v.STRATEGIES)
    if strategy == "quantile" and edges is not None:
        msg = "edges cannot be combined with strategy='quantile'"
        raise ValueError(msg)
    ci = check_ci(ci)
    p_in = v.to_array("y_prob", y_prob)
    if p_in.ndim == 2:
        if strategy == "quantile":
            msg = ("strategy='quantile' is for 1-D y_prob; for (n, K) y_prob the equal-mass "
                   "top-label ECE is the report's ace")
            raise ValueError(msg)
        acc, y, p = _fill_report(y_true, p_in, n_bins=n_bins, edges=edges, closed=closed,
                                 nan_policy=nan_policy, eps=eps, threads=threads, logits=logits,
                                 renormalize=renormalize, classwise=True,
                                 ace_buckets=em.fine_buckets_for(n_bins) if ace else 0)
        rep = acc.report(ci=ci)
        if ace:
            rep.ace = _ace(acc, y, p)
        return rep
    use_boot = ci is not None and strategy == "uniform" and not logits
    with_ace = ace or strategy == "quantile"
    acc, y, p = _fill_report(y_true, p_in, n_bins=n_bins, edges=edges, closed=closed,
                             observed=observed, nan_policy=nan_policy, eps=eps, threads=threads,
                             n_boot=n_boot if use_boot else 0, seed=seed, logits=logits,
                             ace_buckets=em.fine_buckets_for(n_bins) if with_ace else 0)
    if strategy == "quantile":
        counts, sums, totals, lower, upper, _ = _equal_mass(y, p, acc, logits=logits,
                                                           hist=acc.fine_counts[:-1, 0])
        q = CalibrationReport.from_state(
            counts, sums, totals, edges=None, closed=acc.closed, n_omitted=acc.n_omitted,
            observed=observed, strategy="quantile", eps=acc.eps, lower=lower, upper=upper)
        q.ace = q.ece
        if ci is not None:
            q.set_intervals(ci)
        return q
    rep = acc.report(observed=observed, ci=ci)
    if ace:
        rep.ace = _ace(acc, y, p, observed)
    return rep


def _ace(acc, y, p, observed="frac_pos"):
    """ACE from the accumulator's bucket statistics and one more pass over (y, p)."""
    yr, x = em.ranking_pair(y, p, logits=acc.logits, renormalize=acc.renormalize, eps=acc.eps)
    parts = em.ArrayParts(yr, x, v.check_threads(acc.threads))
    value, _ = em.ace(acc.fine_counts, acc.fine_p, acc.n_bins, parts,
                      acc.nan_policy == "omit", observed)
    return value


class _BinnedScalars:
    """ECE, ESCE and MCE read off the binary state (the formulas of
    CalibrationReport.from_state, in one compiled loop) without building the
    per-bin table, which dominates the cost of a call on small inputs."""

    def __init__(self, acc, observed):
        col = 1 if observed == "frac_pos" else 2
        self.ece, self.esce, self.mce = kb.binned_scalars(acc.counts, acc.sums, acc.n_bins, col)


def _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads, logits=False,
            renormalize=False):
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=n_bins, edges=edges, closed=closed,
                             observed=observed, nan_policy=nan_policy, threads=threads,
                             with_logs=False, logits=logits, renormalize=renormalize)
    if acc.n_classes is not None:
        return acc.report()
    return _BinnedScalars(acc, observed)


def ece(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
        nan_policy="raise", threads=None, logits=False, renormalize=False):
    """Expected Calibration Error (eq. 5): sum_m |B_m|/n |frac_pos(B_m) - conf(B_m)|.

    Options as in :func:`calibration_report`. Returns a float. For (n, K)
    ``y_prob`` this is the top-label (confidence) ECE: bins over max_k p_k,
    comparing each bin's mean confidence with its accuracy (argmax == label);
    ``observed`` does not apply there (the two coincide). For the class-wise
    version see :func:`fastcal.classwise_ece`.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.ece([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.25
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads,
                   logits, renormalize).ece


def esce(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
         nan_policy="raise", threads=None, logits=False, renormalize=False):
    """Expected Signed Calibration Error (eq. 6): positive means under-confident.

    Options as in :func:`calibration_report`; (n, K) input gives the
    top-label version (accuracy minus confidence per confidence bin).

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.esce([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.05
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads,
                   logits, renormalize).esce


def mce(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
        nan_policy="raise", threads=None, logits=False, renormalize=False):
    """Maximum Calibration Error: the largest |frac_pos - conf| over non-empty bins.

    Options as in :func:`calibration_report`; (n, K) input gives the
    top-label version.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.mce([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.4
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads,
                   logits, renormalize).mce


def ace(y_true, y_prob, *, n_bins=10, observed="frac_pos", nan_policy="raise", threads=None,
        logits=False, renormalize=False):
    """Adaptive Calibration Error: ECE over equal-mass bins.

    For (n, K) ``y_prob``: top-label ACE, equal-mass bins over max_k p_k.

    The data are sorted by p (stable sort) and cut into n_bins groups whose
    sizes differ by at most one; ties are split by position in the input.
    Each group is weighted by its size, like ECE.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.ace([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=2), 3)
    0.25
    """
    p = v.to_array("y_prob", y_prob)
    if p.ndim == 2:
        return calibration_report(y_true, p, n_bins=n_bins, nan_policy=nan_policy,
                                  threads=threads, logits=logits, renormalize=renormalize,
                                  ace=True).ace
    return calibration_report(y_true, p, n_bins=n_bins, strategy="quantile",
                              observed=observed, nan_policy=nan_policy, threads=threads,
                              logits=logits).ece


def ecd(y_true, y_prob, *, eps=None, nan_policy="raise", threads=None, logits=False,
        renormalize=False):
    """Entropic Calibration Difference: binary form (eq. 15) or K classes (eq. 12).

    ECD = 1/n sum_i (p_i - y_i) log(p_i / (1 - p_i)). Negative means
    under-confident, positive over-confident; 0 at p = 0.5 for either label.
    Never NaN: the term is 0 at p = y in {0, 1} and +inf at p = 1 - y in
    {0, 1}; ``eps`` clips p to [eps, 1 - eps] for a finite score.

    (n, K) ``y_prob`` with labels in [0, K): eq. 12,
    ECD = 1/n sum_i [sum_k p_ik log p_ik - log p_i,y_i] with 0 log 0 = 0 and
    +inf when the true class has probability 0 (equal to eq. 15 for K = 2).
    (n, K) ``y_true`` holding label distributions (soft labels): see
    :func:`fastcal.soft.soft_ecd`. ``logits=True`` applies a sigmoid/softmax
    inside the kernel; log-probabilities then come straight from the logits.

    Examples
    --------
    >>> import fastcal
    >>> fastcal.ecd([1, 0], [0.5, 0.5])
    0.0
    """
    if _is_soft(y_true):
        return soft.soft_ecd(y_true, y_prob, eps=eps, nan_policy=nan_policy, threads=threads,
                             logits=logits, renormalize=renormalize)
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=1, nan_policy=nan_policy, eps=eps,
                             threads=threads, logits=logits, renormalize=renormalize)
    return acc.report().ecd


def brier_score(y_true, y_prob, *, nan_policy="raise", threads=None, logits=False,
                renormalize=False):
    """Brier score: mean of (p - y)^2 (eq. 2).

    (n, K) ``y_prob``: 1/n sum_i sum_k (p_ik - 1[y_i = k])^2 (seed 004's
    ||p - y||^2). For K = 2 this is twice the binary Brier score of p_i1,
    because both columns contribute the same squared error. (n, K)
    ``y_true`` holding label distributions: sum_k (p_ik - y_ik)^2.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.brier_score([0, 1], [0.2, 0.6]), 3)
    0.1
    """
    if _is_soft(y_true):
        return soft.soft_brier_score(y_true, y_prob, nan_policy=nan_policy, threads=threads,
                                     logits=logits, renormalize=renormalize)
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=1, nan_policy=nan_policy, threads=threads,
                             logits=logits, renormalize=renormalize)
    return acc.report().brier


def log_loss(y_true, y_prob, *, eps=None, nan_policy="raise", threads=None, logits=False,
             renormalize=False):
    """Mean negative log-likelihood, natural log: -1/n sum log p(y_i).

    +inf if a true label has probability 0, unless ``eps`` clips p. (n, K)
    ``y_prob``: -1/n sum_i log p_i,y_i. (n, K) ``y_true`` holding label
    distributions: the cross-entropy -1/n sum_i sum_k y_ik log p_ik.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.log_loss([1, 0], [0.5, 0.5]), 4)
    0.6931
    """
    if _is_soft(y_true):
        return soft.soft_log_loss(y_true, y_prob, eps=eps, nan_policy=nan_policy,
                                  threads=threads, logits=logits, renormalize=renormalize)
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=1, nan_policy=nan_policy, eps=eps,
                             threads=threads, logits=logits, renormalize=renormalize)
    return acc.report().nll


def _is_soft(y_true):
    """True if y_true is 2-D (one label distribution per row)."""
    shape = getattr(y_true, "shape", None)
    if shape is None:
        shape = v.to_array("y_true", y_true).shape
    return len(shape) == 2


__all__ = ["calibration_report", "ece", "esce", "mce", "ace", "ecd", "brier_score", "log_loss",
           "uniform_edges", "classwise_ece"]

classwise_ece = mc.classwise_ece

"""Public metric functions. Each validates once, fills once, and reads the report."""

import numpy as np

from . import _validation as v
from ._kernels import binary as kb
from .accumulator import CalibrationAccumulator, fill, raise_for_checks
from .binning import uniform_edges
from .report import CalibrationReport

_ONE_BIN = np.array([0.0, 1.0])


def _fill_report(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
                 nan_policy="raise", eps=None, threads=None, with_logs=True, n_boot=0, seed=0):
    v.check_choice("observed", observed, v.OBSERVED)
    acc = CalibrationAccumulator(n_bins=n_bins, edges=edges, closed=closed,
                                 nan_policy=nan_policy, eps=eps, threads=threads,
                                 n_boot=n_boot, seed=seed)
    y, p = v.check_pair(y_true, y_prob)
    if p.shape[0] == 0:
        msg = "y_true and y_prob are empty; need at least one sample"
        raise ValueError(msg)
    kedges, uniform = acc._kernel_edges(p.dtype)
    counts, sums, totals, checks = fill(y, p, kedges, uniform, acc.closed == "right",
                                        acc.nan_policy == "omit", acc.eps, with_logs,
                                        acc.threads)
    raise_for_checks(checks, acc.nan_policy)
    acc._fill_boot(y, p, 0)
    acc.counts += counts
    acc.sums += sums
    acc.totals += totals
    acc.n_omitted = int(checks[kb.CHECK_OMITTED])
    acc.n_rows = p.shape[0]
    if acc.n == 0:
        msg = f"no samples left: all {p.shape[0]} rows were omitted as NaN"
        raise ValueError(msg)
    return acc, y, p


def _quantile_report(y, p, n_bins, observed, nan_policy, eps, closed):
    """Report over equal-mass bins: the data sorted by p (stable) and cut into
    n_bins groups of sizes floor/ceil(n / n_bins). Ties are split by position in
    the input, so equal probabilities can straddle two neighbouring groups."""
    if nan_policy == "omit":
        keep = ~np.isnan(p)
        if y.dtype.kind == "f":
            keep &= ~np.isnan(y)
        y, p = y[keep], p[keep]
    n = p.shape[0]
    order = np.argsort(p, kind="stable")
    ps = np.ascontiguousarray(p[order])
    ys = np.ascontiguousarray(y[order])
    counts = np.zeros((n_bins, kb.N_COUNTS), np.int64)
    sums = np.zeros((n_bins, kb.N_SUMS), np.float64)
    totals = np.zeros(kb.N_TOTALS, np.float64)
    lower = np.full(n_bins, np.nan)
    upper = np.full(n_bins, np.nan)
    for g in range(n_bins):
        start, stop = (g * n) // n_bins, ((g + 1) * n) // n_bins
        if stop == start:
            continue
        c, s, t, _ = kb.new_state(1)
        kb.fill_range(ps, ys, start, stop, _ONE_BIN, False, closed == "right", False, eps, True,
                      c, s, t, _)
        counts[g], sums[g] = c[0], s[0]
        totals += t
        lower[g], upper[g] = ps[start], ps[stop - 1]
    return CalibrationReport.from_state(
        counts, sums, totals, edges=None, closed=closed, n_omitted=0, observed=observed,
        strategy="quantile", eps=eps, lower=lower, upper=upper)


def calibration_report(y_true, y_prob, *, n_bins=10, edges=None, closed="left",
                       strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
                       ace=True, threads=None, ci=None, n_boot=200, seed=0):
    """Every binary calibration metric and the per-bin table, from one pass.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels 0/1 (bool, any integer dtype, or float 0.0/1.0).
    y_prob : array-like of shape (n,)
        Predicted probability of class 1, float32 or float64.
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
    seed : int, default 0
        Seed of the bootstrap weights, which depend only on (seed, row
        index, replicate): the same intervals whatever the chunking.

    Returns
    -------
    CalibrationReport

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
    use_boot = ci is not None and strategy == "uniform"
    acc, y, p = _fill_report(y_true, y_prob, n_bins=n_bins, edges=edges, closed=closed,
                             observed=observed, nan_policy=nan_policy, eps=eps, threads=threads,
                             n_boot=n_boot if use_boot else 0, seed=seed)
    need_quantile = strategy == "quantile" or ace
    q = (_quantile_report(y, p, acc.n_bins, observed, acc.nan_policy, acc.eps, acc.closed)
         if need_quantile else None)
    if strategy == "quantile":
        q.n_omitted = acc.n_omitted
        q.ace = q.ece
        if ci is not None:
            q.set_intervals(ci)
        return q
    rep = acc.report(observed=observed, ci=ci)
    if q is not None:
        rep.ace = q.ece
    return rep


def _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads):
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=n_bins, edges=edges, closed=closed,
                             observed=observed, nan_policy=nan_policy, threads=threads,
                             with_logs=False)
    return acc.report(observed=observed)


def ece(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
        nan_policy="raise", threads=None):
    """Expected Calibration Error (eq. 5): sum_m |B_m|/n |frac_pos(B_m) - conf(B_m)|.

    Options as in :func:`calibration_report`. Returns a float.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.ece([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.25
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads).ece


def esce(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
         nan_policy="raise", threads=None):
    """Expected Signed Calibration Error (eq. 6): positive means under-confident.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.esce([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.05
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads).esce


def mce(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
        nan_policy="raise", threads=None):
    """Maximum Calibration Error: the largest |frac_pos - conf| over non-empty bins.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.mce([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.4
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads).mce


def ace(y_true, y_prob, *, n_bins=10, observed="frac_pos", nan_policy="raise", threads=None):
    """Adaptive Calibration Error: ECE over equal-mass bins.

    The data are sorted by p (stable sort) and cut into n_bins groups whose
    sizes differ by at most one; ties are split by position in the input.
    Each group is weighted by its size, like ECE.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.ace([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=2), 3)
    0.25
    """
    return calibration_report(y_true, y_prob, n_bins=n_bins, strategy="quantile",
                              observed=observed, nan_policy=nan_policy, threads=threads).ece


def ecd(y_true, y_prob, *, eps=None, nan_policy="raise", threads=None):
    """Entropic Calibration Difference, binary form (eq. 15).

    ECD = 1/n sum_i (p_i - y_i) log(p_i / (1 - p_i)). Negative means
    under-confident, positive over-confident; 0 at p = 0.5 for either label.
    Never NaN: the term is 0 at p = y in {0, 1} and +inf at p = 1 - y in
    {0, 1}; ``eps`` clips p to [eps, 1 - eps] for a finite score.

    Examples
    --------
    >>> import fastcal
    >>> fastcal.ecd([1, 0], [0.5, 0.5])
    0.0
    """
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=1, nan_policy=nan_policy, eps=eps,
                             threads=threads)
    return acc.report().ecd


def brier_score(y_true, y_prob, *, nan_policy="raise", threads=None):
    """Brier score: mean of (p - y)^2 (eq. 2).

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.brier_score([0, 1], [0.2, 0.6]), 3)
    0.1
    """
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=1, nan_policy=nan_policy, threads=threads)
    return acc.report().brier


def log_loss(y_true, y_prob, *, eps=None, nan_policy="raise", threads=None):
    """Mean negative log-likelihood, natural log: -1/n sum log p(y_i).

    +inf if a true label has probability 0, unless ``eps`` clips p.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.log_loss([1, 0], [0.5, 0.5]), 4)
    0.6931
    """
    acc, _, _ = _fill_report(y_true, y_prob, n_bins=1, nan_policy=nan_policy, eps=eps,
                             threads=threads)
    return acc.report().nll


__all__ = ["calibration_report", "ece", "esce", "mce", "ace", "ecd", "brier_score", "log_loss",
           "uniform_edges"]

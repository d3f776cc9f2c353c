"""Tests of calibration on arrays: the ECD test and the ECE consistency-resampling test.

The statistics they read (z from sums, p-values, verdicts, intervals) are in
:mod:`fastcal.reports.stats`; these functions fill the state with the driver
first, so they sit with the other entry points.
"""

from dataclasses import asdict, dataclass

import numpy as np

from fastcal._kernels import bootstrap as kboot
from fastcal.inputs import validation as v
from fastcal.reports._json import clean
from fastcal.reports.stats import (
    ALTERNATIVES,
    CONSISTENT,
    EXACT_MAX_N,
    MAX_SKEWNESS,
    METHODS,
    MISCALIBRATED,
    SIMULATE_BELOW_N,
    ECDTestResult,
    _exact_pvalues,
    check_alpha,
    check_count,
    check_seed,
    normal_pvalues,
    null_resample,
    null_skewness,
    verdict,
    z_from_sums,
)
from fastcal.score import Options, fill_arrays


def ecd_test(y_true, y_prob, *, alpha=0.05, alternative="two-sided", method="auto",
             n_resamples=9999, seed=0, eps=None, nan_policy="raise", threads=None):
    """Test perfect calibration on ECD: is the model over- or under-confident?

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels 0/1.
    y_prob : array-like of shape (n,)
        Predicted probability of class 1.
    alpha : float, default 0.05
        Level of the test for the verdict.
    alternative : {"two-sided", "over", "under"}, default "two-sided"
        Which deviation the verdict looks for (see :func:`verdict`). The
        one-sided "over" is the safety question: is the model over-confident?
    method : {"auto", "normal", "exact", "simulate"}, default "auto"
        How the null law of sum_i T_i is obtained: the normal approximation;
        exact enumeration of the 2^n label vectors (n <= 20 only); or
        ``n_resamples`` label vectors drawn from y* ~ Bernoulli(p_i). "auto":
        exact for n <= 20, simulated for n < 200 or null skewness > 0.1,
        normal otherwise.
    n_resamples : int, default 9999
        Label vectors for method "simulate".
    seed : int, default 0
        Seed of the simulated null (counter-based, reproducible).
    eps : float, optional
        Clip p to [eps, 1 - eps] inside the logit, as in :func:`fastcal.ecd`.
    nan_policy : {"raise", "omit"}, default "raise"
    threads : int, optional

    Returns
    -------
    ECDTestResult

    Raises
    ------
    ValueError
        Bad labels or probabilities (count and first index), empty input,
        bad options, or method="exact" with n > 20.

    Notes
    -----
    T_i = (p_i - y_i) logit(p_i) (eq. 15); under calibration E[T_i] = 0 and
    Var T_i = p_i (1 - p_i) logit(p_i)^2, so z = sum T_i / sqrt(sum Var T_i)
    is approximately N(0, 1). ECD is the binary form of eq. 8/12, whose
    Gaussian form (eq. 10) is (NEES - d) / 2: this z-test plays the role of
    the chi-square test on NEES in tracking (:func:`chi2_nees_test`). A
    p-value of a simulated null is (1 + #{T* >= T}) / (1 + R).

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(100_000, sigma=0.5, seed=1)
    >>> fastcal.ecd_test(y, p, alternative="over").verdict
    'over-confident'
    """
    alpha = check_alpha(alpha)
    v.check_choice("alternative", alternative, ALTERNATIVES)
    v.check_choice("method", method, METHODS)
    n_resamples = check_count("n_resamples", n_resamples, 1)
    seed = check_seed(seed)
    # device="cpu": the null distribution is resampled from the rows on the host
    # (arrays in GPU memory are copied there once)
    acc, batch = fill_arrays(y_true, y_prob, Options(n_bins=1, nan_policy=nan_policy, eps=eps,
                                                     threads=threads, ace=False, device="cpu"))
    y, p = batch.host()
    rep = acc.report()
    eps = acc.eps
    if acc.n_omitted:
        keep = ~np.isnan(p)
        if y.dtype.kind == "f":
            keep &= ~np.isnan(y)
        y, p = y[keep], p[keep]
    n = rep.n
    s, var = rep.sums["sum_ecd"], rep.sums["sum_ecd_var"]
    skew = null_skewness(p, eps=eps)
    chosen = method
    if method == "auto":
        if n <= EXACT_MAX_N:
            chosen = "exact"
        elif n < SIMULATE_BELOW_N or (not np.isnan(skew) and skew > MAX_SKEWNESS):
            chosen = "simulate"
        else:
            chosen = "normal"
    z = z_from_sums(s, var)
    used_resamples = 0
    if np.isinf(s):
        # a wrong prediction made with certainty (p = 1 - y in {0, 1}) is impossible
        # under calibration: P(over) = 0 whatever the method
        chosen = "normal"
    if chosen == "normal":
        p_over, p_under, p_two = normal_pvalues(z)
    elif chosen == "exact":
        if n > EXACT_MAX_N:
            msg = f"method='exact' enumerates 2^n label vectors and needs n <= {EXACT_MAX_N}; got n={n}"
            raise ValueError(msg)
        p_over, p_under = _exact_pvalues(p, s, eps)
        p_two = min(1.0, 2.0 * min(p_over, p_under))
    else:
        _, t_sim = null_resample(y, p, eps=eps, n_resamples=n_resamples, seed=seed,
                                 threads=threads)
        tol = 1e-9 * max(1.0, abs(s))
        p_over = (1.0 + np.sum(t_sim >= s - tol)) / (1.0 + n_resamples)
        p_under = (1.0 + np.sum(t_sim <= s + tol)) / (1.0 + n_resamples)
        p_two = min(1.0, 2.0 * min(p_over, p_under))
        used_resamples = n_resamples
    return ECDTestResult(
        n=n, ecd=rep.ecd, sum_ecd=s, sum_var=var, z=float(z), p_over=float(p_over),
        p_under=float(p_under), p_two_sided=float(p_two),
        verdict=verdict(p_over, p_under, p_two, alpha=alpha, alternative=alternative),
        alpha=alpha, alternative=alternative, method=chosen, skewness=float(skew),
        n_resamples=used_resamples)


@dataclass
class ECETestResult:
    """Outcome of :func:`ece_test`: the observed ECE and its null p-value."""

    n: int
    ece: float
    p_value: float
    verdict: str
    alpha: float
    n_resamples: int

    def to_dict(self):
        return {k: clean(x) for k, x in asdict(self).items()}


def ece_test(y_true, y_prob, *, n_bins=10, edges=None, closed="left", alpha=0.05,
             n_resamples=999, seed=0, nan_policy="raise", threads=None):
    """Consistency-resampling test of calibration on ECE (Bröcker and Smith, 2007).

    Draws ``n_resamples`` label vectors from the predictions themselves
    (y* ~ Bernoulli(p_i): what a calibrated model would see), computes ECE*
    of each with the same bins, and returns p = (1 + #{ECE* >= ECE}) /
    (1 + R). ECE has no sign, so the verdict is only "miscalibrated" or
    "consistent with calibration". Used beside :func:`ecd_test` to compare
    power.

    Parameters
    ----------
    y_true, y_prob : array-like of shape (n,)
    n_bins, edges, closed : as in :func:`fastcal.calibration_report`
    alpha : float, default 0.05
    n_resamples : int, default 999
    seed : int, default 0
    nan_policy : {"raise", "omit"}, default "raise"
    threads : int, optional

    Returns
    -------
    ECETestResult

    Raises
    ------
    ValueError
        Bad input or options.

    Notes
    -----
    ECE = sum_m |B_m|/n |frac_pos(B_m) - conf(B_m)| = 1/n sum_m |pos_m - sum_{i in B_m} p_i|
    (eq. 3-5); ECE* replaces pos_m by the resampled positives.

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(100_000, sigma=0.5, seed=1)
    >>> fastcal.ece_test(y, p, n_resamples=199).verdict
    'miscalibrated'
    """
    alpha = check_alpha(alpha)
    n_resamples = check_count("n_resamples", n_resamples, 1)
    seed = check_seed(seed)
    acc, batch = fill_arrays(y_true, y_prob, Options(
        n_bins=n_bins, edges=edges, closed=closed, nan_policy=nan_policy, threads=threads,
        with_logs=False, ace=False, device="cpu"))  # resampled on the host, as ecd_test
    y, p = batch.host()
    rep = acc.report()
    kedges, uniform = acc.kernel_edges(p.dtype)
    pos = np.zeros((n_resamples, acc.n_bins), np.int64)
    ecd = np.zeros(n_resamples, np.float64)
    kboot.null_fill(p, y, 0, kedges, uniform, acc.closed == "right", 0.0, seed,
                    v.check_threads(threads), pos, ecd)
    sum_p = acc.sums[: acc.n_bins, 0]
    ece_sim = np.abs(pos - sum_p[None, :]).sum(axis=1) / rep.n
    tol = 1e-12 * max(1.0, rep.ece)
    p_value = float((1.0 + np.sum(ece_sim >= rep.ece - tol)) / (1.0 + n_resamples))
    return ECETestResult(n=rep.n, ece=rep.ece, p_value=p_value,
                         verdict=MISCALIBRATED if p_value < alpha else CONSISTENT,
                         alpha=alpha, n_resamples=n_resamples)


__all__ = ["ECETestResult", "ecd_test", "ece_test"]

"""Public metric functions. Each validates once, fills once, and reads the report."""

import dataclasses
import math
from typing import NamedTuple

from fastcal._kernels import binary as kb
from fastcal.accumulators import ecce as ecce_
from fastcal.inputs import validation as v
from fastcal.inputs.binning import uniform_edges
from fastcal.reports import measures
from fastcal.reports.smooth import SmoothGrid, check_sigma
from fastcal.reports.stats import multicalibration_error as _mce
from fastcal.score import ArraySource, Options, fill_arrays, score, score_by


def _arrays(y_true, y_prob, sample_weight=None, **options):
    """(accumulator, batch) of one pass over arrays (fastcal.score.fill_arrays)."""
    return fill_arrays(y_true, y_prob, Options(ace=False, **options), sample_weight)


def calibration_report(y_true, y_prob, *, n_bins=10, edges=None, closed="left",
                       strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
                       ace=None, threads=None, ci=None, n_boot=200, seed=0, logits=False,
                       renormalize=False, device=None, smooth=False, metrics=(),
                       sweep=None, tace_threshold=None, sample_weight=None, by=None,
                       correction=None, alpha=None, max_segments=100_000):
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
    ace : bool, optional
        Also compute ACE (default: True, but False with ``sample_weight``). It
        needs the ranks of the data: one extra stable sort, O(n log n); pass
        False for a strictly single-pass report. ACE's equal-mass bins rank
        rows, not weights: ``ace=True`` with ``sample_weight`` is refused.
    threads : int, optional
        Threads for the kernel (default: numba's setting).
    ci : float, optional
        Confidence level (e.g. 0.95) of the intervals in ``report.intervals``:
        t-intervals for ECD, Brier and NLL (means of per-sample terms), and
        basic intervals of a Poisson bootstrap for ECE, ESCE and MCE
        (over the uniform or explicit bins; with strategy="quantile" ``ci``
        is refused with a ValueError, since equal-mass bins exist only after
        the pass that fills the bootstrap replicates).
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
    device : {None, "cpu", "cuda"}, default None
        Where the fill runs: None where the data is (a torch CUDA tensor,
        CuPy or Numba device array is scored on its GPU without a host copy);
        "cuda" streams host data to the GPU; "cpu" copies device data to the
        host. Needs the ``cuda`` extra for the GPU. The state, and so the
        report, is the same on either. ACE and bootstrap replicates (up to
        94 bins) of device data are computed on the GPU; quantile bins copy
        only the ranked (label, value) pair to the host, never the (n, K) rows.
        Soft labels have no GPU kernel: None scores device arrays of them on
        the host (a copy), "cuda" refuses them.
    smooth : bool, default False
        The same as naming "smece" in ``metrics``: also fill the grid of smooth ECE: ``report.smece`` and
        ``report.smece_sigma`` (see :func:`fastcal.smece`). Data in GPU memory:
        the GPU computes the values (sigmoid, confidence) and the grid is
        filled on the host from that (label, value) pair, 9 bytes a row.
    metrics : tuple of str, optional
        Measures computed only when asked for, each costing more than 10% of
        the fill: "smece" (smooth ECE, ``report.smece`` and ``report.smece_sigma``:
        filled in the same pass; see :func:`fastcal.smece`), "ece_sweep" (ECE-sweep of Roelofs et al., 2022, and its
        bin count, ``report.ece_sweep`` / ``report.ece_sweep_bins``; about
        b* + 1 light passes over the data), "tace" (K classes: TACE of
        Nixon et al., 2019, over ``n_bins`` equal-mass ranges per class; 2-3
        passes per class) and "ecce" (ECCE of Arrieta-Ibarra et al., 2022,
        ``report.ecce``, ``report.ecce_sigma``, ``report.ecce_pvalue``: value
        buckets filled in the same pass, then usually one more pass; see
        :func:`fastcal.ecce`). The names are ``fastcal.score.OPTIONAL_METRICS``.
    sweep : {"quantile", "uniform"}, optional
        The bins ECE-sweep sweeps: equal-mass (the paper's; the default) or
        equal-width. Only with "ece_sweep" in ``metrics``: given without it,
        it is refused (it would change nothing).
    tace_threshold : float, optional
        TACE ranks, per class, only the probabilities above this (default
        1e-3). Only with "tace" in ``metrics``: given without it, refused.
    sample_weight : array-like of shape (n,), optional
        A weight per row: finite, >= 0 and not all 0 (any numeric dtype;
        float64 in the kernel). Every metric is then weighted: per bin the
        sums of w, of w y, of w p, ... in place of the counts and sums
        (N = sum w), so integer weights give the report of the rows repeated
        that many times, and weights all 1 the unweighted report. ``n`` stays
        the rows; ``report.weight_sum`` is sum w and ``report.n_eff`` Kish's
        effective rows (sum w)**2 / sum w**2, which the ECD test (z = sum w T
        / sqrt(sum w V x sum w**2 / sum w)), the per-bin test, the
        t-intervals and the debiased L2 error take in place of the rows (a
        weight is not a count of independent rows). The bootstrap intervals
        of ECE/ESCE/MCE weigh a row by its Poisson(1) draw times w. ECCE takes
        the weights (``metrics=("ecce",)``); equal-mass bins and ACE, smooth
        ECE, ECE-sweep and TACE do not, and are refused with them. Filled on
        the host.
    by : array-like of shape (n,), or a list of them, optional
        A segment key per row (ints, strings, objects; None and NaN are one
        segment of their own, key ``None``), or several key columns (the key is
        then a tuple: their intersections). The result is then a
        :class:`~fastcal.reports.segmented.SegmentedReport`: ``r[key]`` the
        report of that segment's rows alone (every option applies), ``r.overall``
        the whole's, ``r.table()`` and ``r.verdict`` the segments whose ECD test
        fails after the ``correction``. See the guide's page on segments.
    correction : {"holm", "bh"}, optional
        With ``by``: Holm's step-down (family-wise error, the default) or
        Benjamini-Hochberg (false discovery rate) adjustment of the segments'
        ECD p-values.
    alpha : float, optional
        With ``by``: the level of the segments' verdict (default 0.05).
    max_segments : int, default 100,000
        With ``by``: more distinct keys than this are refused before any fill.

    Returns
    -------
    CalibrationReport
        For (n, K) input a :class:`~fastcal.reports.multiclass_report.MulticlassReport`:
        the table is over confidence (max-probability) bins, ``accuracy`` is
        the fraction of argmax == label, plus the per-class table
        ``classes`` and ``classwise_ece``. With ``by``, a
        :class:`~fastcal.reports.segmented.SegmentedReport`.

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
    ``report.verdict``; :mod:`fastcal.reports.stats`).

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
    if ace is None:
        ace = sample_weight is None
    options = Options(n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                      observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                      threads=threads, ci=ci, n_boot=n_boot, seed=seed, logits=logits,
                      renormalize=renormalize, device=device, smooth=smooth,
                      metrics=metrics, sweep=sweep, tace_threshold=tace_threshold)
    if by is not None:
        return score_by(y_true, y_prob, by, options, sample_weight=sample_weight,
                        correction="holm" if correction is None else correction,
                        alpha=0.05 if alpha is None else alpha, max_segments=max_segments)
    for name, value in (("correction", correction), ("alpha", alpha)):
        if value is not None:
            msg = f"{name}={value!r} is for the segments' verdict: pass by= too, or leave {name} out"
            raise ValueError(msg)
    return score(ArraySource(y_true, y_prob, sample_weight=sample_weight), options)


class _BinnedScalars:
    """ECE, ESCE and MCE read off the binary state (the formulas of
    CalibrationReport.from_state, in one compiled loop) without building the
    per-bin table, which dominates the cost of a call on small inputs."""

    def __init__(self, acc, observed):
        col = 1 if observed == "frac_pos" else 2
        self.ece, self.esce, self.mce = kb.binned_scalars(acc.counts, acc.sums, acc.n_bins, col)
        self._state = acc.counts[: acc.n_bins][None], col, acc.sums[: acc.n_bins][None]

    @property
    def ece_l2(self):
        counts, col, sums = self._state
        return measures.binned(counts, col, 1, sums, 0, 0.0, 0.0)["l2"]


def _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads, logits=False,
            renormalize=False, sample_weight=None):
    acc, _ = _arrays(y_true, y_prob, sample_weight, n_bins=n_bins, edges=edges, closed=closed,
                     observed=observed, nan_policy=nan_policy, threads=threads,
                     with_logs=False, logits=logits, renormalize=renormalize, classwise=False)
    if acc.n_classes is not None or acc.weighted:
        return acc.report(observed=observed)
    return _BinnedScalars(acc, observed)


NORMS = ("l1", "l2", "max")


def ece(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
        nan_policy="raise", threads=None, logits=False, renormalize=False, sample_weight=None,
        norm="l1"):
    """Expected Calibration Error (eq. 5): sum_m |B_m|/n |frac_pos(B_m) - conf(B_m)|.

    Parameters
    ----------
    y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads, logits, renormalize
        As in :func:`calibration_report`.
    sample_weight : array-like of shape (n,), optional
        A weight per row, as in :func:`calibration_report`: each bin weighs
        its sum of w, and its gap compares weighted means.
    norm : {"l1", "l2", "max"}, default "l1"
        How the bins' gaps are combined, named as torchmetrics'
        ``binary_calibration_error`` / ``multiclass_calibration_error`` name
        them: "l1" the ECE, "l2" the root-mean-square error (the report's
        ``ece_l2``), "max" the largest gap (the report's ``mce``).

    Returns
    -------
    float
        For (n, K) ``y_prob`` the top-label (confidence) error: bins over
        max_k p_k, comparing each bin's mean confidence with its accuracy
        (argmax == label); ``observed`` does not apply there (the two
        coincide). For the class-wise version see :func:`fastcal.classwise_ece`.

    Raises
    ------
    ValueError
        Bad input (as :func:`calibration_report`) or a ``norm`` not in the list.

    Notes
    -----
    With w_m = |B_m| / n and gap_m = observed(B_m) - conf(B_m) over the
    non-empty bins: l1 = sum_m w_m |gap_m|, l2 = sqrt(sum_m w_m gap_m**2),
    max = max_m |gap_m|. torchmetrics gives the same numbers on float64 input
    (it puts p = 1.0 exactly in a bin of its own; here it is in the last bin).

    Examples
    --------
    >>> import fastcal
    >>> y, p = [0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3]
    >>> round(fastcal.ece(y, p, n_bins=5), 3)
    0.25
    >>> round(fastcal.ece(y, p, n_bins=5, norm="l2"), 4), round(fastcal.ece(y, p, n_bins=5, norm="max"), 3)
    (0.2739, 0.4)
    """
    v.check_choice("norm", norm, NORMS)
    r = _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads,
                logits, renormalize, sample_weight)
    return getattr(r, {"l1": "ece", "l2": "ece_l2", "max": "mce"}[norm])


def esce(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
         nan_policy="raise", threads=None, logits=False, renormalize=False, sample_weight=None):
    """Expected Signed Calibration Error (eq. 6): sum over bins of |B|/n (observed - mean p).

    For one probability column and ``observed="frac_pos"`` the bins cancel
    and ESCE equals mean(y) - mean(p) whatever the binning: positive means
    class 1 is under-predicted on average, negative over-predicted. It does
    not measure confidence: a model whose log-odds are shifted by -1 has
    ESCE +0.098 while its ECD (+0.053) says over-confident. With
    ``observed="accuracy"``, or (n, K) input (top-label: accuracy minus
    confidence per confidence bin), the sign does read as confidence:
    positive under-confident, negative over-confident. Options (``sample_weight``
    too) as in :func:`calibration_report`.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.esce([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.05
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads,
                   logits, renormalize, sample_weight).esce


def mce(y_true, y_prob, *, n_bins=10, edges=None, closed="left", observed="frac_pos",
        nan_policy="raise", threads=None, logits=False, renormalize=False, sample_weight=None):
    """Maximum Calibration Error: the largest |frac_pos - conf| over non-empty bins.

    Options (``sample_weight`` too) as in :func:`calibration_report`; (n, K)
    input gives the top-label version.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.mce([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=5), 3)
    0.4
    """
    return _binned(y_true, y_prob, n_bins, edges, closed, observed, nan_policy, threads,
                   logits, renormalize, sample_weight).mce


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
    return calibration_report(y_true, y_prob, n_bins=n_bins, observed=observed,
                              nan_policy=nan_policy, threads=threads, logits=logits,
                              renormalize=renormalize, ace=True).ace


def ecd(y_true, y_prob, *, eps=None, nan_policy="raise", threads=None, logits=False,
        renormalize=False, sample_weight=None):
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
    ``sample_weight``: the weighted mean sum_i w_i T_i / sum_i w_i (see
    :func:`calibration_report`).

    Examples
    --------
    >>> import fastcal
    >>> fastcal.ecd([1, 0], [0.5, 0.5])
    0.0
    """
    acc, _ = _arrays(y_true, y_prob, sample_weight, n_bins=1, nan_policy=nan_policy, eps=eps,
                     threads=threads, logits=logits, renormalize=renormalize, classwise=False)
    return acc.report().ecd


def brier_score(y_true, y_prob, *, nan_policy="raise", threads=None, logits=False,
                renormalize=False, sample_weight=None):
    """Brier score: mean of (p - y)^2 (eq. 2).

    (n, K) ``y_prob``: 1/n sum_i sum_k (p_ik - 1[y_i = k])^2 (the calibration tutorial's
    ||p - y||^2). For K = 2 this is twice the binary Brier score of p_i1,
    because both columns contribute the same squared error. (n, K)
    ``y_true`` holding label distributions: sum_k (p_ik - y_ik)^2.
    ``sample_weight``: the weighted mean, scikit-learn's
    ``brier_score_loss(..., sample_weight=)``.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.brier_score([0, 1], [0.2, 0.6]), 3)
    0.1
    """
    acc, _ = _arrays(y_true, y_prob, sample_weight, n_bins=1, nan_policy=nan_policy,
                     threads=threads, logits=logits, renormalize=renormalize, classwise=False)
    return acc.report().brier


def log_loss(y_true, y_prob, *, eps=None, nan_policy="raise", threads=None, logits=False,
             renormalize=False, sample_weight=None):
    """Mean negative log-likelihood, natural log: -1/n sum log p(y_i).

    +inf if a true label has probability 0, unless ``eps`` clips p. (n, K)
    ``y_prob``: -1/n sum_i log p_i,y_i. (n, K) ``y_true`` holding label
    distributions: the cross-entropy -1/n sum_i sum_k y_ik log p_ik.
    ``sample_weight``: the weighted mean, scikit-learn's
    ``log_loss(..., sample_weight=)``.

    Examples
    --------
    >>> import fastcal
    >>> round(fastcal.log_loss([1, 0], [0.5, 0.5]), 4)
    0.6931
    """
    acc, _ = _arrays(y_true, y_prob, sample_weight, n_bins=1, nan_policy=nan_policy, eps=eps,
                     threads=threads, logits=logits, renormalize=renormalize, classwise=False)
    return acc.report().nll


__all__ = ["calibration_report", "ece", "esce", "mce", "ace", "ecd", "brier_score", "log_loss",
           "uniform_edges", "classwise_ece", "smece", "ecce", "ECCE"]


def smece(y_true, y_prob, sigma=None, *, nan_policy="raise", threads=None, logits=False,
          renormalize=False, return_sigma=False):
    """Smooth ECE (Blasiok and Nakkiran, 2023): kernel-smoothed calibration error.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels 0/1; for (n, K) ``y_prob``, class indices in [0, K).
    y_prob : array-like of shape (n,) or (n, K)
        Probabilities of class 1 (or logits with ``logits=True``), or (n, K)
        class probabilities: then the top-label version, confidence
        max_k p_k against "argmax equals the label".
    sigma : float, optional
        Bandwidth of the reflected Gaussian kernel, from 0.001 to 1 (relplot's
        ``smECE_sigma``). None: the fixed point sigma = smECE_sigma (relplot's
        ``smECE``), found to about 1e-14 and never below 0.001.
    nan_policy, threads, logits, renormalize
        As in :func:`calibration_report`.
    return_sigma : bool, default False
        Return ``(smece, sigma)``: the bandwidth used as well.

    Returns
    -------
    float, or (float, float) with ``return_sigma``

    Raises
    ------
    ValueError
        Bad probabilities, labels or sigma (one line naming them), or no rows.

    Notes
    -----
    With the reflected Gaussian kernel K_sigma on [0, 1] (eq. 9 of the paper),
    R(t) = sum_i (p_i - y_i) K_sigma(t, p_i) and D(t) = sum_i K_sigma(t, p_i),
    smECE_sigma = int_0^1 |R(t)| dt / int_0^1 D(t) dt. The sums are taken on a
    fixed grid of 8,193 points (each p split between its two neighbours by
    linear interpolation, relplot's ``smooth_round_to_grid``), which is
    mergeable state (``smooth=True`` of :class:`~fastcal.CalibrationAccumulator`),
    and smoothed by FFT. Against the exact kernel sum the grid moves
    smECE_sigma by less than 1e-5 relative at sigma >= 0.01, at least 30
    times less than relplot's own discretisation (docs/guide/metrics.md has
    the figures). relplot also cuts its kernel at |t - x| <= 0.5, which
    moves its value by about 1.5% at sigma = 0.2; fastcal keeps the whole
    reflected kernel, as the paper defines it.

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(10_000, sigma=0.5, seed=0)
    >>> round(fastcal.smece(y, p), 4)
    0.0118
    >>> value, sigma = fastcal.smece(y, p, return_sigma=True)
    >>> round(sigma, 4) == round(value, 4)
    True
    >>> round(fastcal.smece(y, p, sigma=0.05), 4)
    0.007
    """
    sigma = check_sigma(sigma)
    acc, _ = _arrays(y_true, y_prob, nan_policy=nan_policy, threads=threads, logits=logits,
                     renormalize=renormalize, classwise=False, with_logs=False, smooth=True)
    grid = SmoothGrid(*acc.smooth_grid())
    if sigma is None:
        value, sigma = grid.fixed_point()
    else:
        value = grid.smece(sigma)
    return (value, sigma) if return_sigma else value


def classwise_ece(y_true, y_prob, *, n_bins=10, edges=None, closed="left", logits=False,
                  renormalize=False, nan_policy="raise", threads=None, return_per_class=False):
    """Class-wise ECE: the mean over classes of the binary ECE of column k against 1[y = k].

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Class indices in [0, K).
    y_prob : array-like of shape (n, K)
        Probabilities (rows sum to 1) or, with ``logits=True``, scores.
    n_bins, edges, closed, nan_policy, threads
        As in :func:`fastcal.calibration_report`; every class uses the same bins.
    logits : bool, default False
        Apply a softmax to each row inside the kernel.
    renormalize : bool, default False
        Divide each row by its sum instead of rejecting rows that do not sum
        to 1 within 1e-5.
    return_per_class : bool, default False
        Also return the per-class ECE values (array of length K).

    Returns
    -------
    float, or (float, ndarray) with ``return_per_class=True``
        The per-class values, and the per-class reliability tables, are also
        in ``calibration_report(...).classes`` and ``.class_bins``.

    Raises
    ------
    ValueError
        As for :func:`fastcal.ece` with (n, K) input.

    Notes
    -----
    cwECE = 1/K sum_k sum_m |B_mk|/n |freq_k(B_mk) - mean p_k(B_mk)|, where
    B_mk are the rows whose p_k falls in bin m and freq_k the fraction of them
    with label k (class-wise calibration, Riera i Marín and Galdran's tutorial, Part III; a class-wise version of
    eq. 5 of the ECD paper). Every class has all n rows, so the weights are
    |B_mk|/n for each class.

    Examples
    --------
    >>> import numpy as np, fastcal
    >>> p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    >>> round(fastcal.classwise_ece([0, 1, 0], p, n_bins=5), 4)
    0.2667
    """
    rep = calibration_report(y_true, y_prob, n_bins=n_bins, edges=edges, closed=closed,
                             logits=logits, renormalize=renormalize, nan_policy=nan_policy,
                             ace=False, threads=threads)
    if not hasattr(rep, "classwise_ece"):
        msg = "y_prob must have shape (n_samples, n_classes) for classwise_ece; got 1-D input"
        raise ValueError(msg)
    if return_per_class:
        return rep.classwise_ece, rep.classes["ece"].copy()
    return rep.classwise_ece


class ECCE(NamedTuple):
    """What :func:`ecce` returns: ECCE, ECCE in standard deviations under
    calibration, and its p-value."""

    ecce: float
    ecce_sigma: float
    ecce_pvalue: float


def ecce(y_true, y_prob, *, sample_weight=None, nan_policy="raise", threads=None, logits=False,
         renormalize=False):
    """ECCE (Arrieta-Ibarra et al., 2022): a calibration test without bins, exact.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Labels 0/1; for (n, K) ``y_prob``, class indices in [0, K).
    y_prob : array-like of shape (n,) or (n, K)
        Probabilities of class 1 (or logits with ``logits=True``), or (n, K)
        class probabilities: then the top-label version, confidence
        max_k p_k against "argmax equals the label".
    sample_weight : array-like of shape (n,), optional
        A weight per row, finite and >= 0, not all 0 (MCGrad's
        ``sample_weight``). None: every row weighs 1.
    nan_policy, threads, logits, renormalize
        As in :func:`calibration_report` (with ``nan_policy="omit"`` the
        weights of omitted rows are not used).

    Returns
    -------
    ECCE
        A named tuple ``(ecce, ecce_sigma, ecce_pvalue)``.

    Raises
    ------
    ValueError
        Bad probabilities, labels or weights (one line naming them, the count
        and the first index), or no rows.

    Notes
    -----
    With the rows in the order of p and W the sum of the weights,
    C_k = sum_{i <= k} w_i (y_i - p_i) / W (C_0 = 0) are the cumulative
    differences of Arrieta-Ibarra, Gujral, Tannen, Tygert and Xu ("Metrics
    of calibration for probabilistic predictions", JMLR 23, 2022), and

    - ``ecce`` = max_k C_k - min_k C_k, the range of the cumulative
      differences (MCGrad's ``ecce``);
    - ``ecce_sigma`` = ecce / sigma, sigma = sqrt(sum w_i**2 p_i (1 - p_i)) / W
      the standard deviation of C_n under calibration (MCGrad's
      ``ecce_sigma``; inf when sigma is 0 and ecce is not);
    - ``ecce_pvalue`` = P(R > ecce_sigma), R the range of a standard Brownian
      motion on [0, 1], the limit of the scaled cumulative differences under
      calibration (Kuiper-type; :func:`fastcal.reports.stats.ecce_pvalue`).

    Rows with equal p are one step: C is taken only where p changes, so the
    value does not depend on the order of tied rows (MCGrad's sort puts tied
    rows in an arbitrary order and takes C after each of them). Without ties
    the three numbers are MCGrad's to about 1e-15.

    No sort: one pass sums the rows per value bucket (65,536 of them), which
    gives C at every bucket boundary; a second pass gathers the rows of the
    few buckets that can hold the extremes (see
    :mod:`fastcal.accumulators.ecce`). The same is ``metrics=("ecce",)`` of
    :func:`calibration_report`, :func:`score_file` and the Dask functions,
    exact out of core.

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(10_000, sigma=0.5, seed=0)
    >>> r = fastcal.ecce(y, p)
    >>> round(r.ecce, 5), round(r.ecce_sigma, 3), round(r.ecce_pvalue, 4)
    (0.00403, 1.281, 0.7193)
    """
    weighted = sample_weight is not None
    source = ArraySource(y_true, y_prob)
    acc, n_rows = source.fill(Options(
        ace=False, with_logs=False, classwise=False, nan_policy=nan_policy, threads=threads,
        logits=logits, renormalize=renormalize, metrics=() if weighted else ("ecce",)))
    if acc.n == 0:
        msg = f"no samples left: all {n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    parts = source.parts(acc.ranking_options())
    if weighted:
        w = v.check_sample_weight(sample_weight, n_rows)
        parts = ecce_.RowParts(parts.host, w)
        state = ecce_.bucket_state(parts)
        if not state[2][0] > 0.0:
            msg = (f"sample_weight is 0 in all {acc.n} rows left after omitting NaN rows; at "
                   "least one weight must be > 0")
            raise ValueError(msg)
    else:
        state = acc.ecce_state()
    value, scaled, pvalue, _ = ecce_.exact(*state, parts)
    return ECCE(value, scaled, pvalue)


def multicalibration_error(report, *, min_rows=10):
    """The multicalibration error of a segmented report, as MCGrad's
    ``MulticalibrationError`` defines it: the largest ECCE in standard
    deviations over the whole and the segments of at least ``min_rows`` rows.

    Parameters
    ----------
    report : SegmentedReport
        Of :func:`calibration_report` with ``by=`` and ``metrics=("ecce",)``
        (binary probabilities or logits), so that each segment's report has
        ``ecce`` and ``ecce_sigma``.
    min_rows : int, default 10
        Segments of fewer rows take no part (MCGrad's
        ``min_samples_per_segment``); the whole always does.

    Returns
    -------
    Multicalibration
        ``mce_sigma`` (the largest ``ecce_sigma``), ``mce_pvalue`` (its p-value,
        not corrected for the number of segments, as MCGrad's), ``mce`` (in the
        units of a probability: mce_sigma x sigma, sigma the whole's standard
        deviation of ECCE under calibration), ``mde`` (5 sigma, the minimum
        detectable effect), ``mce_relative`` / ``mde_relative`` (in percent of
        min(prevalence, 1 - prevalence)), ``segment``: the key of the segment
        that attains ``mce_sigma`` (None for the whole), and ``n_tested``
        (the whole and the segments tested).

    Raises
    ------
    ValueError
        A report without segments or without ECCE (one line saying what to pass).

    Notes
    -----
    Guy, Haimovich, Linder, Okati, Perini, Tax and Tygert, "Measuring
    multi-calibration" (2025): MCE = max over segments S of ECCE(S) / sigma(S),
    sigma(S) = sqrt(sum_S w**2 p (1 - p)) / sum_S w; the segments are the
    levels of each key (MCGrad's ``max_depth=1`` per column, or the given
    intersections).

    Examples
    --------
    >>> import numpy as np, fastcal
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(4_000); g = rng.integers(0, 4, 4_000)
    >>> y = (rng.random(4_000) < np.where(g == 3, p ** 2, p)).astype(int)
    >>> r = fastcal.calibration_report(y, p, by=g, metrics=("ecce",))
    >>> m = fastcal.multicalibration_error(r, min_rows=100)
    >>> m.segment, round(m.mce_sigma, 2), m.n_tested
    (3, 12.99, 5)
    """
    keys = list(getattr(report, "keys", lambda: ())())
    overall = getattr(report, "overall", None)
    if overall is None:
        msg = (f"report must be a segmented report (calibration_report(..., by=...)); got "
               f"{type(report).__name__}")
        raise ValueError(msg)
    reps = [overall, *(report[k] for k in keys)]
    if getattr(overall, "n_classes", None):
        msg = (f"report holds {overall.n_classes} classes; the multicalibration error is of "
               "binary predictions (one probability or logit per row)")
        raise ValueError(msg)
    if math.isnan(overall.ecce_sigma):
        msg = ("report has no ECCE: pass metrics=('ecce',) to calibration_report(..., by=...) "
               "(binary probabilities or logits)")
        raise ValueError(msg)
    total = overall.weight_sum if overall.weighted else overall.n
    prevalence = overall.sums["n_pos"] / total
    sigma = overall.ecce / overall.ecce_sigma if overall.ecce_sigma else float("nan")
    got = _mce([r.ecce_sigma for r in reps], sigma, [r.n for r in reps], prevalence=prevalence,
               min_rows=min_rows)
    return dataclasses.replace(got, segment=None if got.segment == 0 else keys[got.segment - 1])

"""Is it safe? A test of calibration on ECD, and confidence intervals.

The test
--------
Under perfect calibration, y_i ~ Bernoulli(p_i) given p_i, each ECD term
T_i = (p_i - y_i) logit(p_i) (eq. 15) has mean exactly 0 and variance
V_i = p_i (1 - p_i) logit(p_i)^2. The accumulator keeps sum T_i and sum V_i
(per bin and in total), so

    z = sum_i T_i / sqrt(sum_i V_i)

is available from any report, streamed and merged like every other figure.
z > 0 means over-confident (the unsafe direction), z < 0 under-confident.
The p-values use the normal approximation: P(over) = 1 - Phi(z),
P(under) = Phi(z), two-sided = 2 (1 - Phi(|z|)).

When the normal approximation is poor: T_i is a two-point variable that is
always right-skewed (a rare large positive term when a confident prediction
is wrong), with third central moment -logit(p)^3 p (1 - p) (1 - 2p). The
skewness of the sum, g = sum mu3_i / (sum V_i)^1.5, shrinks like 1/sqrt(n)
but grows with extreme p (p near 0 or 1, where logit(p) is large). By the
Edgeworth expansion the one-sided p-value near the 5% point is off by about
0.03 g, so the normal p-value is trustworthy when n is large and g is small.
Example: 30 predictions all at p = 0.995 (g = 2.56). One wrong label gives
z = 2.2, so the normal test rejects at 5% whenever a label is wrong, which
happens with probability 1 - 0.995^30 = 14% under perfect calibration.
:func:`ecd_test` with ``method="auto"`` checks this on the data:

- n <= 20: the exact null law, by enumerating all 2^n label vectors;
- n < 200 or g > 0.1: a simulated null: R label vectors drawn from the
  predictions themselves (y* ~ Bernoulli(p_i), seeded, counter-based), the
  p-value being (1 + #{T* >= T}) / (1 + R) (exact-size Monte Carlo test);
- otherwise the normal approximation.

A report (streamed) only holds sums, not the skewness: its z and p-values
are always the normal approximation; call :func:`ecd_test` on in-memory data
when n is small or many p are extreme.

The Gaussian case (tracking, regression; eq. 10-11) needs no approximation:
with consistent covariances the summed NEES is chi-square with n d degrees of
freedom, and the Gaussian ECD sum equals (sum NEES - n d) / 2;
:func:`chi2_nees_test` gives the same verdicts from that exact law.

Intervals
---------
ECD, Brier and NLL are means of per-sample terms: their intervals are
t-intervals from the sums and sums of squares the accumulator keeps. ECE,
ESCE and MCE are not means; their intervals come from a streaming Poisson
bootstrap (``CalibrationAccumulator(n_boot=B, seed=...)``): B replicate per-bin
accumulators are filled in the same pass, each row weighted by Poisson(1)
draws that depend only on (seed, global row index, replicate), and the basic
bootstrap interval is read off the B replicate values. See
:func:`report_intervals` for when these intervals can be trusted (not for
ECE or MCE near perfect calibration).
"""

from dataclasses import asdict, dataclass, field
import math
from statistics import NormalDist

import numpy as np

from fastcal._kernels import bootstrap as kboot
from fastcal.inputs import validation as v
from fastcal.inputs.binning import is_uniform
from fastcal.inputs.validation import show
from fastcal.reports._json import clean

ALTERNATIVES = ("two-sided", "over", "under")
METHODS = ("auto", "normal", "exact", "simulate")
OVER = "over-confident"
UNDER = "under-confident"
CONSISTENT = "consistent with calibration"
MISCALIBRATED = "miscalibrated"


def _special():
    """scipy.special, imported when a p-value, critical value or interval is first
    asked for: it takes a third of a cached first report (0.25 s) that needs none."""
    from scipy import special

    return special


# method="auto" thresholds (see the module docstring)
EXACT_MAX_N = 20
SIMULATE_BELOW_N = 200
MAX_SKEWNESS = 0.1
_CHUNK = 1 << 20


# -- checks ----------------------------------------------------------------

def check_alpha(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) \
            or not 0.0 < float(alpha) < 1.0:
        msg = f"alpha must be a number strictly between 0 and 1; got {show(alpha)}"
        raise ValueError(msg)
    return float(alpha)


def check_ci(ci):
    """None, or a confidence level strictly between 0 and 1."""
    if ci is None:
        return None
    if isinstance(ci, bool) or not isinstance(ci, (int, float, np.floating)) \
            or not 0.0 < float(ci) < 1.0:
        msg = f"ci must be None or a confidence level strictly between 0 and 1 (e.g. 0.95); got {show(ci)}"
        raise ValueError(msg)
    return float(ci)


def check_count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        msg = f"{name} must be an integer >= {minimum}; got {show(value)}"
        raise ValueError(msg)
    return int(value)


def check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
        msg = f"seed must be an integer in [0, 2**64); got {show(seed)}"
        raise ValueError(msg)
    return int(seed)


# -- the z-test from sums ----------------------------------------------------

def z_from_sums(sum_ecd, sum_var):
    """z = sum_ecd / sqrt(sum_var), elementwise.

    With zero null variance (every p in {0, 0.5, 1}) the sum is exactly 0
    under calibration: z is then 0 for a zero sum and +-inf otherwise.
    Empty bins (NaN sums) give NaN.
    """
    s = np.asarray(sum_ecd, dtype=np.float64)
    var = np.asarray(sum_var, dtype=np.float64)
    z = np.full(np.broadcast(s, var).shape, np.nan)
    with np.errstate(over="ignore"):  # a sum near 1.8e308 over a tiny sd: z = +-inf, as meant
        np.divide(s, np.sqrt(var), out=z, where=var > 0)
    zero = var == 0
    if zero.any():  # z = 0 for a zero sum, +-inf otherwise; a NaN sum stays NaN
        z = np.where(zero, np.where(s == 0, 0.0, np.copysign(np.inf, s)), z)
        z = np.where(zero & np.isnan(s), np.nan, z)
    return z if z.ndim else float(z)


def ndtr(x):
    """The N(0, 1) distribution function at float ``x``: Cephes' ``ndtr`` (SciPy's)
    on the standard library's ``erf``/``erfc``, so that a report's p-values need no
    SciPy import (a quarter second of a command's start-up). Relative error a few
    ulp, in the far tail too (``erfc`` of the absolute value)."""
    t = x * _SQRT1_2
    a = abs(t)
    if a < _SQRT1_2:
        return 0.5 + 0.5 * math.erf(t)
    y = 0.5 * math.erfc(a)
    return 1.0 - y if t > 0 else y


_SQRT1_2 = math.sqrt(0.5)
# its inv_cdf (Wichura's AS241) is SciPy's ndtri to 1e-15: the bin test's critical
# value without importing SciPy
_NORMAL = NormalDist()


def normal_pvalues(z):
    """(P(over), P(under), two-sided) for a z-score under N(0, 1)."""
    z = float(z)
    if np.isnan(z):
        return float("nan"), float("nan"), float("nan")
    p_over = ndtr(-z)
    p_under = ndtr(z)
    return p_over, p_under, min(1.0, 2.0 * min(p_over, p_under))


def verdict(p_over, p_under, p_two_sided, *, alpha=0.05, alternative="two-sided"):
    """Verdict string of the ECD test at level alpha.

    "two-sided": over- or under-confident when the two-sided p-value is
    below alpha (the direction from the smaller one-sided p-value); "over":
    only the over-confidence test (never says under-confident); "under":
    likewise for under-confidence.
    """
    alpha = check_alpha(alpha)
    v.check_choice("alternative", alternative, ALTERNATIVES)
    if np.isnan(p_two_sided):
        return "undefined (no samples)"
    if alternative == "over":
        return OVER if p_over < alpha else CONSISTENT
    if alternative == "under":
        return UNDER if p_under < alpha else CONSISTENT
    if p_two_sided < alpha:
        return OVER if p_over <= p_under else UNDER
    return CONSISTENT


@dataclass
class ECDTestResult:
    """Outcome of :func:`ecd_test` (or of the report's figures).

    Attributes
    ----------
    n : int
        Samples tested.
    ecd : float
        Mean ECD term (eq. 15).
    sum_ecd, sum_var : float
        sum_i T_i and its null variance sum_i p_i (1 - p_i) logit(p_i)^2.
    z : float
        sum_ecd / sqrt(sum_var).
    p_over, p_under, p_two_sided : float
        p-values for over-confidence (z large), under-confidence, either.
    verdict : str
        "over-confident", "under-confident" or "consistent with calibration".
    alpha : float
    alternative : str
    method : str
        "normal", "exact" or "simulate" (what was used, after "auto").
    skewness : float
        Skewness of the null law of sum_i T_i (NaN when not computed).
    n_resamples : int
        Label vectors drawn for method "simulate" (0 otherwise).
    """

    n: int
    ecd: float
    sum_ecd: float
    sum_var: float
    z: float
    p_over: float
    p_under: float
    p_two_sided: float
    verdict: str
    alpha: float
    alternative: str
    method: str
    skewness: float = float("nan")
    n_resamples: int = 0

    def to_dict(self):
        return {k: clean(x) for k, x in asdict(self).items()}


# -- the per-bin test: miscalibration in any direction --------------------------

# a verdict names at most this many ranges of bins, then says how many more bins there are
MAX_RANGES = 20
# a flagged bin with fewer rows gets a caution in the verdict: below this many rows
# ecd_test(method="auto") does not trust the normal approximation either
MIN_BIN_ROWS = SIMULATE_BELOW_N


def _bin_ranges(bins, counts=None):
    """1-based bin numbers as compact ranges: [1, 2, 3, 5] -> "1-3, 5"; after
    MAX_RANGES ranges, "... and N more bins" (a line, not 1e6 bins of text).

    ``counts`` (rows per bin, indexed by bin - 1) adds each range's rows:
    "1-3 (1,200 rows), 5 (3 rows)".
    """
    runs = []
    for b in bins:
        if runs and b == runs[-1][1] + 1:
            runs[-1][1] = b
        else:
            runs.append([b, b])
    parts = []
    for start, stop in runs[:MAX_RANGES]:
        text = f"{start}" if start == stop else f"{start}-{stop}"
        if counts is not None:
            rows = int(np.sum(np.asarray(counts)[start - 1:stop]))
            text += f" ({rows:,} row{'s' if rows != 1 else ''})"
        parts.append(text)
    if len(runs) <= MAX_RANGES:
        return ", ".join(parts)
    n_shown = sum(stop - start + 1 for start, stop in runs[:MAX_RANGES])
    return ", ".join(parts) + f" and {len(bins) - n_shown} more bins"


@dataclass
class BinTestResult:
    """Outcome of :func:`bin_test`: which bins are miscalibrated, in which direction.

    Attributes
    ----------
    n_bins : int
        Non-empty bins tested (k).
    max_abs_z : float
        Largest |z| over those bins.
    p_value : float
        Sidak-adjusted p-value of the largest |z|: 1 - (1 - p_min)^k, where
        p_min = 2 (1 - Phi(max |z|)).
    critical_z : float
        |z| above which the most extreme bin is flagged at ``alpha``.
    over_bins, under_bins : list of int
        1-based numbers of the bins flagged over-confident (z > 0) and
        under-confident (z < 0) by the Holm-Sidak step-down procedure.
    verdict : str
        "miscalibrated: over-confident in bins 1, 10, under-confident in
        bins 2-9", "no bin miscalibrated", or "undefined (no samples)".
        With the bins' row counts, each range of bins gives its rows, and a
        caution follows when a named bin holds fewer than
        :data:`MIN_BIN_ROWS` rows.
    alpha : float
    few_rows : list of int
        The flagged bins that hold fewer than :data:`MIN_BIN_ROWS` rows
        (empty when the counts were not given).
    """

    n_bins: int
    max_abs_z: float
    p_value: float
    critical_z: float
    over_bins: list
    under_bins: list
    verdict: str
    alpha: float
    few_rows: list = field(default_factory=list)

    def to_dict(self):
        out = {k: clean(x) for k, x in asdict(self).items()}
        for name in ("over_bins", "under_bins", "few_rows"):
            out[name] = [int(b) for b in getattr(self, name)]
        return out


def _sidak(alpha, k):
    """Per-test level 1 - (1 - alpha)^(1/k), without cancellation."""
    return -np.expm1(np.log1p(-alpha) / k)


def bin_test(bin_z, *, alpha=0.05, counts=None):
    """Test of miscalibration in any direction from the per-bin ECD z-scores.

    The net ECD test (:func:`ecd_test`, ``report.ecd_z``) sums the ECD terms
    of all rows, so over-confidence in some bins and under-confidence in
    others can cancel: an S-shaped reliability curve can pass it. This test
    looks at every non-empty bin on its own. Under perfect calibration the
    bins' z = sum_{i in b} T_i / sqrt(sum_{i in b} V_i) are independent (the
    bins hold disjoint rows, and the labels are independent given p) and each
    approximately N(0, 1).

    The statistic is max_b |z_b| over the k non-empty bins, with the Sidak
    correction: p = 1 - (1 - p_min)^k, p_min = 2 (1 - Phi(max |z_b|)), which
    is the exact law of the maximum of k independent |N(0, 1)| (so its size
    is alpha up to the normal approximation of each bin). The bins named in
    the verdict come from the Holm-Sidak step-down procedure, which controls
    the family-wise error rate at alpha: under calibration, the chance that
    any bin is named is at most alpha. A max-|z| test was chosen over a
    chi-square of the sum of z_b^2 because its rejection comes with the bins
    that cause it, so the verdict can say where and in which direction the
    model is miscalibrated; the chi-square is more powerful against many
    small deviations, the max against a few large ones.

    Parameters
    ----------
    bin_z : array-like of shape (n_bins,)
        Per-bin z (``report.bins["ecd_z"]``); NaN marks an empty bin, which
        is skipped. +-inf (a wrong certain prediction, or a non-zero sum of
        terms with zero null variance) is impossible under calibration and
        always flagged.
    alpha : float, default 0.05
        Family-wise level.
    counts : array-like of shape (n_bins,), optional
        Rows per bin (``report.bins["count"]``). With them the verdict
        gives the rows behind each range of bins it names, and cautions
        when a named bin holds fewer than :data:`MIN_BIN_ROWS` (200) rows:
        its z is then a rough normal approximation (see Notes).

    Returns
    -------
    BinTestResult

    Raises
    ------
    ValueError
        alpha not in (0, 1).

    Notes
    -----
    Each bin uses the normal approximation of :func:`ecd_test`: for a bin
    with few rows or extreme p the null law of its sum is skewed and its tail
    probability is too small (the test is then anticonservative); use
    :func:`ece_test` or :func:`ecd_test` on in-memory data for small n.

    Examples
    --------
    >>> r = bin_test([3.5, -0.4, float("nan"), -4.1, 0.9])
    >>> r.over_bins, r.under_bins, r.verdict
    ([1], [4], 'miscalibrated: over-confident in bin 1, under-confident in bin 4')
    """
    alpha = check_alpha(alpha)
    z = np.asarray(bin_z, dtype=np.float64).ravel()
    tested = np.flatnonzero(~np.isnan(z))
    k = int(tested.size)
    if k == 0:
        return BinTestResult(0, float("nan"), float("nan"), float("nan"), [], [],
                             "undefined (no samples)", alpha)
    az = np.abs(z[tested])
    # order by |z| itself: p-values of |z| above about 38 underflow to 0 and tie
    order = np.argsort(-az, kind="stable")
    p_each = 2.0 * np.array([ndtr(-a) for a in az.tolist()])
    max_abs = float(az[order[0]])
    with np.errstate(divide="ignore"):  # a largest |z| of 0 has p 1: log1p(-1) = -inf, p_value 1
        p_value = float(-np.expm1(k * np.log1p(-p_each[order[0]])))
    critical = -_NORMAL.inv_cdf(_sidak(alpha, k) / 2.0)
    flagged = []
    for j, idx in enumerate(order):  # Holm-Sidak step-down
        if p_each[idx] < _sidak(alpha, k - j):
            flagged.append(int(tested[idx]))
        else:
            break
    flagged.sort()
    over = [b + 1 for b in flagged if z[b] > 0]
    under = [b + 1 for b in flagged if z[b] < 0]
    few = []
    if counts is not None:
        counts = np.asarray(counts, dtype=np.int64).ravel()
        few = [b + 1 for b in flagged if counts[b] < MIN_BIN_ROWS]
    if not flagged:
        text = "no bin miscalibrated"
    else:
        parts = []
        for name, bins in ((OVER, over), (UNDER, under)):
            if bins:
                parts.append(f"{name} in bin{'s' if len(bins) > 1 else ''} "
                             f"{_bin_ranges(bins, counts)}")
        text = f"{MISCALIBRATED}: " + ", ".join(parts)
        if few:
            text += (f" (caution: bin{'s' if len(few) > 1 else ''} {_bin_ranges(few)} "
                     f"{'hold' if len(few) > 1 else 'holds'} fewer than {MIN_BIN_ROWS} rows, "
                     f"where a bin's z is a rough normal approximation)")
    return BinTestResult(k, max_abs, p_value, critical, over, under, text, alpha, few)


def combined_verdict(ecd_verdict, bin_result):
    """One answer from both tests: the net ECD verdict and the per-bin test.

    "consistent with calibration" when neither test rejects; "over-confident"
    (or "under-confident") when every rejection points that way (the net
    test, the flagged bins or both); "miscalibrated" when they point both
    ways, for example an S-shaped curve whose over- and under-confident bins
    cancel in the net sum. "undefined (no samples)" without samples.
    """
    if ecd_verdict not in (OVER, UNDER, CONSISTENT):
        return ecd_verdict
    ways = {ecd_verdict} - {CONSISTENT}
    if bin_result.over_bins:
        ways.add(OVER)
    if bin_result.under_bins:
        ways.add(UNDER)
    if not ways:
        return CONSISTENT
    return ways.pop() if len(ways) == 1 else MISCALIBRATED


def overall_verdict(ecd_verdict, bin_result):
    """The net ECD verdict and the per-bin verdict in one line.

    "no net over- or under-confidence; miscalibrated: over-confident in bins
    1, 10, under-confident in bins 2-9", "net over-confident; no bin
    miscalibrated", ...
    """
    net = {OVER: "net over-confident", UNDER: "net under-confident",
           CONSISTENT: "no net over- or under-confidence"}.get(ecd_verdict)
    if net is None:
        return ecd_verdict
    return f"{net}; {bin_result.verdict}"


def _terms(p, eps):
    """ECD outcomes per sample under the null: logit L (of clipped p), T for y=1 and y=0."""
    q = np.clip(p.astype(np.float64), eps, 1.0 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log(q) - np.log1p(-q)
        t1 = np.where(q == 1.0, 0.0, (q - 1.0) * lg)
        t0 = np.where(q == 0.0, 0.0, q * lg)
    return q, lg, t1, t0


def null_skewness(p, *, eps=0.0):
    """Skewness of sum_i T_i under perfect calibration (NaN if its variance is 0).

    mu3_i = -logit(p_i)^3 p_i (1 - p_i) (1 - 2 p_i), Var_i = p_i (1 - p_i) logit(p_i)^2.
    """
    p = np.asarray(p)
    var = mu3 = 0.0
    for lo in range(0, p.shape[0], _CHUNK):  # bounded temporaries for large inputs
        q, lg, _, _ = _terms(p[lo:lo + _CHUNK], eps)
        pq = q * (1.0 - q)
        ok = pq > 0
        var += float(np.sum(pq[ok] * lg[ok] ** 2))
        mu3 += float(np.sum(-(lg[ok] ** 3) * pq[ok] * (1.0 - 2.0 * q[ok])))
    return mu3 / var ** 1.5 if var > 0 else float("nan")


def _exact_pvalues(p, t_obs, eps):
    """P(T >= t_obs), P(T <= t_obs) for the exact null law, by enumeration (n <= 20)."""
    q, _, t1, t0 = _terms(p, eps)
    praw = p.astype(np.float64)
    vals = np.zeros(1)
    probs = np.ones(1)
    for i in range(p.shape[0]):
        vals = np.concatenate([vals + t1[i], vals + t0[i]])
        probs = np.concatenate([probs * praw[i], probs * (1.0 - praw[i])])
        keep = probs > 0
        vals, probs = vals[keep], probs[keep]
    tol = 1e-9 * max(1.0, float(np.max(np.abs(vals))))
    p_over = float(np.sum(probs[vals >= t_obs - tol]))
    p_under = float(np.sum(probs[vals <= t_obs + tol]))
    return min(p_over, 1.0), min(p_under, 1.0)


def null_resample(y, p, *, edges=None, eps=0.0, n_resamples=999, seed=0, threads=None):
    """Draw labels y* ~ Bernoulli(p_i) n_resamples times (the calibrated null).

    Returns (pos, ecd_sum): positives per replicate and bin, shape
    (n_resamples, n_bins), and the summed ECD terms per replicate.
    Counter-based: replicate r of row i depends only on (seed, i, r).
    """
    if edges is None:
        edges = np.array([0.0, 1.0])
    nb = edges.shape[0] - 1
    n_threads = v.check_threads(threads)
    pos = np.zeros((n_resamples, nb), np.int64)
    ecd = np.zeros(n_resamples, np.float64)
    kboot.null_fill(p, y, 0, edges, bool(is_uniform(edges)), False, float(eps), seed,
                    n_threads, pos, ecd)
    return pos, ecd


def chi2_nees_test(sum_nees, dof, *, alpha=0.05, alternative="two-sided"):
    """Exact test of Gaussian consistency: sum of NEES ~ chi-square(dof).

    With consistent (calibrated) Gaussian predictions, NEES_i =
    (x_i - mu_i)^T C_i^-1 (x_i - mu_i) is chi-square with d degrees of
    freedom, so the sum over n samples is chi-square with dof = n d; the
    Gaussian ECD (eq. 10) is (sum NEES - dof) / (2 n). No normal
    approximation is needed.

    Parameters
    ----------
    sum_nees : float
        Sum of the NEES values (eq. 11 times n).
    dof : int
        n times the state dimension d.
    alpha : float, default 0.05
    alternative : {"two-sided", "over", "under"}, default "two-sided"

    Returns
    -------
    ECDTestResult
        ``z`` is the normal score with the same upper-tail probability,
        ``method`` is "chi2", ``ecd`` the Gaussian ECD per sample-dimension
        (sum NEES - dof) / (2 dof), ``sum_var`` the null variance dof / 2.

    Raises
    ------
    ValueError
        dof < 1 or a negative or NaN sum.

    Examples
    --------
    >>> chi2_nees_test(1000.0, 1000).verdict
    'consistent with calibration'
    """
    from scipy import stats as sps  # heavy import, only needed here

    dof = check_count("dof", dof, 1)
    s = float(sum_nees)
    if not s >= 0:
        msg = f"sum_nees must be a number >= 0; got {show(sum_nees)}"
        raise ValueError(msg)
    p_over = float(sps.chi2.sf(s, dof))
    p_under = float(sps.chi2.cdf(s, dof))
    p_two = min(1.0, 2.0 * min(p_over, p_under))
    z = float(sps.norm.isf(p_over)) if p_over > 0 else float("inf")
    return ECDTestResult(
        n=dof, ecd=(s - dof) / (2.0 * dof), sum_ecd=(s - dof) / 2.0, sum_var=dof / 2.0, z=z,
        p_over=p_over, p_under=p_under, p_two_sided=p_two,
        verdict=verdict(p_over, p_under, p_two, alpha=alpha, alternative=alternative),
        alpha=check_alpha(alpha), alternative=alternative, method="chi2")


# -- intervals ---------------------------------------------------------------

def mean_interval(total, total_sq, n, ci, weight=None):
    """t-interval for a population mean from n, sum and sum of squares.

    Returns (lo, hi); NaN for n < 2. Infinite means give (inf, inf).

    Weighted rows (``weight`` the sum of w; ``total`` and ``total_sq`` the sums
    of w x and w x**2): the weighted mean m = total / weight, the weighted
    variance s**2 = total_sq / weight - m**2, and ``n`` Kish's effective rows
    n_eff = (sum w)**2 / sum w**2 in place of the rows: m +- t(n_eff - 1)
    sqrt(s**2 n_eff / (n_eff - 1) / n_eff). Every weight 1 gives the unweighted
    interval.
    """
    if not n >= 2:
        return float("nan"), float("nan")
    mass = n if weight is None else weight
    mean = total / mass
    if not np.isfinite(mean):
        return float(mean), float(mean)
    var = max(total_sq / mass - mean * mean, 0.0) * n / (n - 1)
    half = float(_special().stdtrit(n - 1, 0.5 + ci / 2.0)) * np.sqrt(var / n)
    return float(mean - half), float(mean + half)


def bootstrap_values(bcounts, bsums, observed="frac_pos"):
    """ECE, ESCE and MCE of each bootstrap replicate (arrays of length B).

    A replicate whose weights are all 0 gives NaN (ignored by the intervals).
    """
    c = bcounts[:, :, 0].astype(np.float64)
    target = bcounts[:, :, 1 if observed == "frac_pos" else 2].astype(np.float64)
    diff = target - bsums
    n = c.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ece = np.abs(diff).sum(axis=1) / n
        esce = diff.sum(axis=1) / n
        per_bin = np.where(c > 0, np.abs(diff) / c, -np.inf)
        mce = per_bin.max(axis=1)
    mce = np.where(n > 0, mce, np.nan)
    return {"ece": ece, "esce": esce, "mce": mce}


def basic_interval(estimate, values, ci):
    """Basic (reverse-percentile) bootstrap interval: 2 t - q_hi, 2 t - q_lo.

    q_lo and q_hi are the (1 - ci)/2 and (1 + ci)/2 quantiles of the finite
    replicate values. Unlike the percentile interval (q_lo, q_hi) it removes
    the first-order bias of the replicates, which matters for ECE: its
    replicates are biased upward by about as much as the estimate itself, so
    percentile intervals sit too high (measured: 7% coverage at sigma = 0.5,
    N = 10,000, against 94% for this interval). The raw lower end of an
    ECE or MCE interval may fall below 0; :func:`report_intervals` clips
    every interval to its metric's range (:data:`RANGES`).
    """
    vals = np.asarray(values, dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if vals.size < 2 or not np.isfinite(estimate):
        return float("nan"), float("nan")
    lo, hi = np.quantile(vals, [0.5 - ci / 2.0, 0.5 + ci / 2.0])
    return float(2.0 * estimate - hi), float(2.0 * estimate - lo)


# The range of each metric, for binary reports: ECE and MCE are mean or maximum
# |frac_pos - conf| in [0, 1]; ESCE is their signed form; Brier a mean of (p - y)^2;
# NLL of -log p >= 0; ECD a mean of (p - y) logit(p), whose single-datum minimum is
# -0.27846... at p = 0.78219 (section IV-D), with no upper bound.
ECD_MIN = -0.2784645427610737
RANGES = {"ece": (0.0, 1.0), "mce": (0.0, 1.0), "esce": (-1.0, 1.0), "brier": (0.0, 1.0),
          "nll": (0.0, np.inf), "ecd": (ECD_MIN, np.inf)}
# K classes (top-label bins): Brier sums K squares (at most 2); the eq.-12 ECD of a
# row is bounded below by a K-dependent constant, so only its NLL-like bounds hold.
MULTICLASS_RANGES = dict(RANGES, brier=(0.0, 2.0), ecd=(-np.inf, np.inf))


def clip_interval(interval, bounds):
    """(lo, hi) clipped to bounds (lo_min, hi_max); NaN stays NaN.

    A true value always lies in its metric's range, so clipping never
    removes a covered value: coverage is unchanged and the interval is
    shorter. An interval wholly outside the range collapses onto its edge.
    """
    lo, hi = interval
    a, b = bounds
    return (float(min(max(lo, a), b)) if not np.isnan(lo) else lo,
            float(max(min(hi, b), a)) if not np.isnan(hi) else hi)


def report_intervals(sums, n, ci, bcounts=None, bsums=None, observed="frac_pos", point=None,
                     ranges=None, weight=None):
    """All intervals of a report: analytic for ECD, Brier, NLL; bootstrap for ECE, ESCE, MCE.

    Every interval is clipped to its metric's range (``ranges``, default
    :data:`RANGES`; see :func:`clip_interval`): ECE and MCE never go below
    0, Brier stays in [0, 1], NLL >= 0, ESCE in [-1, 1], binary ECD >= -0.2785.

    ``point`` maps "ece", "esce", "mce" to the report's estimates (needed by
    the basic bootstrap interval). Without bootstrap replicates the binned
    intervals are (NaN, NaN).

    Validity: the t-intervals cover the population mean of the per-sample
    terms as soon as n is large enough for the central limit theorem (heavy
    tails from p near 0 or 1 need more samples for ECD and NLL). The
    bootstrap intervals for ECE and MCE are valid only when every bin's
    miscalibration is large compared with its sampling noise: near perfect
    calibration ECE's bias (of the order of the noise) dominates and no
    bootstrap interval covers the true value, and MCE, a maximum over bins,
    undercovers when two bins are close to the maximum. ESCE is a smooth
    statistic and behaves like a mean.
    """
    out = {
        "ecd": mean_interval(sums["sum_ecd"], sums["sum_ecd_sq"], n, ci, weight),
        "brier": mean_interval(sums["sum_brier"], sums["sum_brier_sq"], n, ci, weight),
        "nll": mean_interval(sums["sum_nll"], sums["sum_nll_sq"], n, ci, weight),
    }
    nan = (float("nan"), float("nan"))
    if bcounts is None or bcounts.shape[0] == 0:
        out.update({"ece": nan, "esce": nan, "mce": nan})
    else:
        vals = bootstrap_values(bcounts, bsums, observed)
        for name in ("ece", "esce", "mce"):
            out[name] = basic_interval(point[name], vals[name], ci)
    ranges = RANGES if ranges is None else ranges
    return {k: clip_interval(x, ranges.get(k, (-np.inf, np.inf))) for k, x in out.items()}


__all__ = ["BinTestResult", "ECDTestResult", "bin_test", "chi2_nees_test",
           "clip_interval", "combined_verdict", "mean_interval", "null_skewness", "overall_verdict", "verdict",
           "z_from_sums"]


# -- ECCE: the range of a Brownian motion ------------------------------------------

# Below this the theta series of the CDF is summed (MCGrad's ``_ecce_cdf``) and the
# p-value is one minus it; from it on, the tail series (no cancellation in 1 - CDF).
_ECCE_TAIL_FROM = 2.0


def ecce_pvalue(x):
    """P(R > x) for R the range (max - min) of a standard Brownian motion on [0, 1]:
    the p-value of ECCE scaled by its standard deviation under calibration
    (``ecce_sigma``; Arrieta-Ibarra et al., 2022, Kuiper-type test).

    Below x = 2: 1 - F(x) with F(x) = sum_{k >= 0} (8 / x**2 + 2 / (pi**2 (k + 1/2)**2))
    exp(-2 pi**2 (k + 1/2)**2 / x**2), summed to machine precision (MCGrad's
    ``_ecce_cdf``, term for term); x below 1e-20 gives 1. From x = 2 on, the
    tail series of Feller (1951), P(R > x) = 4 sum_{k >= 1} (-1)**(k - 1) k
    erfc(k x / sqrt 2), accurate in relative terms far into the tail (MCGrad
    floors it at machine epsilon from x = 8.27). x = inf gives 0.

    Examples
    --------
    >>> from fastcal.reports.stats import ecce_pvalue
    >>> round(ecce_pvalue(1.0), 6), round(ecce_pvalue(3.0), 6)
    (0.936635, 0.010799)
    """
    x = float(x)
    if math.isnan(x):
        return float("nan")
    if x < 1e-20:
        return 1.0
    if x == math.inf:
        return 0.0
    if x >= _ECCE_TAIL_FROM:
        total = 0.0
        for k in range(1, 64):
            term = k * math.erfc(k * x / math.sqrt(2.0))
            if term == 0.0:
                break
            total += term if k % 2 else -term
        return 4.0 * total
    eps = np.finfo(np.float64).eps
    fact = 4.0 / math.sqrt(2.0 * math.pi) * (1.0 / x + x / math.pi ** 2)
    kmax = int(np.ceil(0.5 + x / math.pi / math.sqrt(2.0) * np.sqrt(np.log(fact / eps))))
    k = np.arange(kmax) + 0.5
    terms = (8.0 / x ** 2 + 2.0 / k ** 2 / math.pi ** 2) * np.exp(-2.0 * k ** 2 * math.pi ** 2
                                                                  / x ** 2)
    return float(1.0 - np.sum(terms))


@dataclass(frozen=True)
class Multicalibration:
    """The multicalibration error of a set of segments (see :func:`multicalibration_error`)."""

    mce_sigma: float
    mce_pvalue: float
    mce: float
    mce_relative: float
    mde: float
    mde_relative: float
    segment: object  # index of the segment that attains mce_sigma (0: the whole)
    n_tested: int  # the whole and the segments of at least min_rows rows


def multicalibration_error(ecce_sigma, sigma, rows, *, prevalence, min_rows=10):
    """The multicalibration error (MCE) of Guy, Haimovich, Linder, Okati, Perini,
    Tax and Tygert ("Measuring multi-calibration", 2025) as MCGrad's
    ``MulticalibrationError`` defines it, from each segment's ECCE.

    Parameters
    ----------
    ecce_sigma : array-like of shape (S,)
        ECCE in standard deviations of each segment, the whole data first.
    sigma : float
        The standard deviation of the whole data's ECCE under calibration,
        sqrt(sum w**2 p (1 - p)) / sum w.
    rows : array-like of shape (S,)
        The rows of each segment (the whole data first).
    prevalence : float
        The (weighted) mean label of the whole data.
    min_rows : int, default 10
        Segments with fewer rows take no part (MCGrad's
        ``min_samples_per_segment``); the whole data always does.

    Returns
    -------
    Multicalibration
        ``mce_sigma``: the largest ``ecce_sigma`` over the whole and the
        segments tested; ``mce_pvalue``: its p-value (:func:`ecce_pvalue`; not
        corrected for the number of segments, as MCGrad's); ``mce`` =
        mce_sigma x sigma; ``mde`` = 5 sigma, the minimum detectable effect;
        ``mce_relative`` and ``mde_relative``: both in percent of
        min(prevalence, 1 - prevalence); ``segment``: the index that attains
        ``mce_sigma`` (the first of equals).

    Examples
    --------
    >>> from fastcal.reports.stats import multicalibration_error
    >>> r = multicalibration_error([1.2, 3.5, 0.4], 0.001, [1000, 500, 5], prevalence=0.2)
    >>> r.segment, r.mce_sigma, round(r.mce, 6), r.mde, r.n_tested
    (1, 3.5, 0.0035, 0.005, 2)
    """
    z = np.asarray(ecce_sigma, np.float64)
    n = np.asarray(rows, np.int64)
    tested = n >= min_rows
    tested[0] = True
    at = int(np.flatnonzero(tested)[np.argmax(z[tested])])
    best = float(z[at])
    base = min(float(prevalence), 1.0 - float(prevalence))
    mce = best * float(sigma)
    mde = 5.0 * float(sigma)
    return Multicalibration(best, ecce_pvalue(best), mce, mce / base * 100.0, mde,
                            mde / base * 100.0, at, int(tested.sum()))

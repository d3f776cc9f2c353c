"""The result of one fill: scalars and the per-bin table."""

from dataclasses import dataclass, field, fields
from functools import partial
import json
import math

import numpy as np

from fastcal.inputs import validation as v
from fastcal.reports import measures as _measures
from fastcal.reports import stats as _stats
from fastcal.reports._json import clean as _clean  # _clean: the old name, kept
from fastcal.reports.plot import reliability_diagram, smooth_diagram
from fastcal.reports.provenance import HasProvenance
from fastcal.reports.smooth import SmoothGrid

# Per-bin columns, in table order.
BIN_COLUMNS = ("lower", "upper", "count", "conf", "frac_pos", "accuracy", "ece", "esce",
               "ecd", "ecd_var", "ecd_z")
SCALARS = ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll")
# The binned and binning-free measures, in report and JSON order (ece_sweep: only when asked for).
MEASURES = ("ece_l2", "ece_debiased", *_measures.BRIER_PARTS, "ece_sweep", "ece_sweep_bins")


def certain_wrong(y, p, *, kind="binary", logits=False):
    """Mask of the rows predicted with certainty and wrong, whose NLL and ECD are
    +inf, for validated input of the gate's ``kind``: "binary", p == 1 - y in
    {0, 1}; "multiclass", the true class's probability exactly 0 (``logits``: its
    logit -inf, a masked class). NaN rows never count."""
    y = np.asarray(y)
    p = np.asarray(p)
    if kind == "binary":
        return ((p == 0.0) & (y == 1)) | ((p == 1.0) & (y == 0))
    yf = np.asarray(y, np.float64)
    ok = (yf >= 0) & (yf < p.shape[1]) & ~np.isnan(p).any(axis=1)  # NaN labels fail too
    rows = np.flatnonzero(ok)
    bad = np.zeros(p.shape[0], bool)
    bad[rows] = p[rows, yf[rows].astype(np.int64)] == (-np.inf if logits else 0.0)
    return bad


def count_certain_wrong(y, p, start=0):
    """(count, first global row or None) of the binary rows of :func:`certain_wrong`.

    ``start`` is the global row of ``y[0]``.
    """
    idx = np.flatnonzero(certain_wrong(y, p))
    return int(idx.size), (int(idx[0]) + int(start) if idx.size else None)


def _zcell(z):
    z = float(z)
    return "" if math.isnan(z) else f"{z:+.2f}"


def _pcell(p):
    p = float(p)
    if math.isnan(p):
        return ""
    if p == 0.0:
        return "< 1e-300"  # below the smallest double: the normal tail underflows
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.1e}"


def table_cell(x, digits=4):
    """A Markdown table cell: an integer as it is, a float with ``digits`` decimals,
    NaN empty."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    return "" if math.isnan(x) else f"{x:.{digits}f}"


def _bin_table(counts, sums, observed, edges, lower, upper, rows=None, w2=None):
    """The per-bin table of a report from per-bin counts (n_bins, 3) and sums (n_bins, 3):
    conf, frac_pos, accuracy and ECD as one division, NaN in empty bins.

    Weighted state (``rows`` given): ``counts`` and ``sums`` are the weighted sums
    (the sums of w, of w over positives and correct labels; of w p, w T, w V),
    ``rows`` the rows per bin (the ``count`` column) and ``w2`` the sums of w**2;
    the table gains the column ``weight`` (the sum of w per bin), and ``ecd_var``
    is the variance of Kish (:func:`kish_var`)."""
    if rows is None:
        count = counts[:, 0].astype(np.int64)
        mass = count.astype(np.float64)
    else:
        count = np.asarray(rows).astype(np.int64)
        mass = np.asarray(counts[:, 0], np.float64)
    nb = count.shape[0]
    full = mass > 0
    stacked = np.empty((nb, 4))
    stacked[:, 0] = sums[:, 0]
    stacked[:, 1:3] = counts[:, 1:3]
    stacked[:, 3] = sums[:, 1]
    per_bin = np.full((nb, 4), np.nan)
    np.divide(stacked, mass[:, None], out=per_bin, where=full[:, None])
    conf, frac_pos, accuracy, ecd_b = per_bin.T.copy()
    esce_b = (frac_pos if observed == "frac_pos" else accuracy) - conf
    var = sums[:, 2].copy() if w2 is None else kish_var(sums[:, 2], w2, mass)
    out = {
        "lower": np.asarray(edges[:-1] if lower is None else lower, dtype=np.float64),
        "upper": np.asarray(edges[1:] if upper is None else upper, dtype=np.float64),
        "count": count,
        "conf": conf,
        "frac_pos": frac_pos,
        "accuracy": accuracy,
        "ece": np.abs(esce_b),
        "esce": esce_b,
        "ecd": ecd_b,
        "ecd_var": var,
        "ecd_z": np.where(full, _stats.z_from_sums(sums[:, 1], var), np.nan),
    }
    if rows is not None:
        out["weight"] = mass.copy()
    return out


def kish_var(sum_wv, sum_w2, sum_w):
    """The null variance of a weighted sum of ECD terms sum w T by Kish's effective
    sample size: sum w V x (sum w**2 / sum w), elementwise (0 where sum w is 0).

    The weighted mean ECD, sum w T / sum w, has the null variance V_w / n_eff
    with V_w = sum w V / sum w the weighted mean variance of a term and
    n_eff = (sum w)**2 / sum w**2 the effective rows (Kish); times (sum w)**2
    that is the variance here, so z = sum w T / sqrt(kish_var) is the test's
    statistic. Every weight 1 gives sum V, the unweighted variance, exactly."""
    wv = np.asarray(sum_wv, np.float64)
    w = np.asarray(sum_w, np.float64)
    ratio = np.zeros(np.broadcast(wv, w).shape)
    np.divide(sum_w2, w, out=ratio, where=w > 0)
    out = wv * ratio
    return out if out.ndim else float(out)


def _raw_sums(counts, sums, totals):
    """The report's ``sums``: every total it was read from, as Python numbers."""
    tot_counts = counts.sum(axis=0)
    tot_sums = sums.sum(axis=0)
    # the within-bin sums of the Brier decomposition (totals of 7); state of 5 totals
    # (made before they existed) leaves the two within-bin terms NaN
    within = len(totals) > 6
    return {
        "n_pos": int(tot_counts[1]),
        "n_correct": int(tot_counts[2]),

        "sum_p": float(tot_sums[0]),
        "sum_ecd": float(tot_sums[1]),
        "sum_ecd_var": float(tot_sums[2]),
        "sum_brier": float(totals[0]),
        "sum_nll": float(totals[1]),
        "sum_ecd_sq": float(totals[2]),
        "sum_brier_sq": float(totals[3]),
        "sum_nll_sq": float(totals[4]),
        "sum_p2": float(totals[5]) if within else float("nan"),
        "sum_py": float(totals[6]) if within else float("nan"),
    }


def _weighted_sums(raw, counts, rows, w2, mass):
    """``_raw_sums`` of weighted state: the positives and correct labels are sums of
    w (floats), ``sum_ecd_var`` is Kish's (:func:`kish_var`) and the sums of w and
    w**2 and the effective rows n_eff = (sum w)**2 / sum w**2 are added."""
    sum_w, sum_w2 = float(mass.sum()), float(np.sum(w2))
    raw["n_pos"] = float(counts[:, 1].sum())
    raw["n_correct"] = float(counts[:, 2].sum())
    raw["sum_ecd_var"] = kish_var(raw["sum_ecd_var"], sum_w2, sum_w)
    raw.update(n_rows=int(np.sum(rows)), sum_w=sum_w, sum_w2=sum_w2,
               n_eff=sum_w * (sum_w / sum_w2) if sum_w2 > 0 else float("nan"))
    return raw


@dataclass
class CalibrationReport(HasProvenance):
    """Calibration metrics and per-bin table from one pass over the data.

    Attributes
    ----------
    n, n_omitted : int
        Samples counted, and rows dropped under ``nan_policy="omit"``.
    ece, esce, mce : float
        Expected (signed) and maximum calibration error over the bins
        (eq. 5-6): weighted by |B_m| / n, comparing ``observed`` (fraction of
        positives by default, or accuracy of the thresholded label) with the
        mean predicted probability.
    ace : float
        ECE over equal-mass bins; NaN when not computed (streamed reports).
    ecd : float
        Entropic Calibration Difference, eq. 15; +inf if some p is exactly 0
        or 1 on the wrong side.
    brier, nll : float
        Mean squared error of p against y, and mean negative log-likelihood
        (natural log).
    ecd_var : float
        Sum over samples of p(1 - p) logit(p)^2, the variance of the summed
        ECD terms if the model were perfectly calibrated.
    bins : dict of arrays
        Columns ``lower, upper, count, conf, frac_pos, accuracy, ece, esce,
        ecd, ecd_var, ecd_z``; empty bins have count 0 and NaN statistics.
        ``ecd_z`` is the bin's ECD test statistic sum T_i / sqrt(sum Var_i).
        A dict of NumPy columns here, a list of rows (one dict per bin, NaN as
        None) in :meth:`to_dict`: the two layouts pandas reads as they are,
        ``pandas.DataFrame(r.bins)`` and ``pandas.DataFrame(r.to_dict()["bins"])``
        give the same table (columns in the order above).
    ecd_z, ecd_p_over, ecd_p_under, ecd_p_two_sided, net_verdict : properties
        The net ECD test of perfect calibration (:mod:`fastcal.reports.stats`),
        normal approximation, from the sums: z = sum_ecd / sqrt(sum_ecd_var),
        and its own two-sided verdict at alpha = 0.05 ("over-confident",
        "under-confident" or "consistent with calibration"); see
        :meth:`ecd_test` for other levels and one-sided verdicts.
    verdict : property
        The answer of both tests at alpha = 0.05, the net ECD test and the
        per-bin test (:meth:`bin_test`): "consistent with calibration",
        "over-confident", "under-confident" or "miscalibrated" (see
        :func:`fastcal.reports.stats.combined_verdict`). Until 0.1.0 this was
        the net test alone, now :attr:`net_verdict`.
    overall_verdict : property
        Both tests in one line, naming the flagged bins and their rows.
    ci_level : float
        Confidence level of ``intervals`` (NaN when none were asked for).
    intervals : dict
        Metric name -> (lo, hi) for ece, esce, mce (Poisson bootstrap) and
        ecd, brier, nll (t-intervals), each clipped to its metric's range;
        empty when none were asked for.
    ece_l2 : float
        Root-mean-square calibration error over the bins,
        sqrt(sum_m |B_m|/n (observed - conf)**2) (torchmetrics' norm="l2").
    ece_debiased : float
        The debiased L2 estimate of Kumar, Liang and Ma (2019): the root of
        max(0, sum_m |B_m|/n [(observed - conf)**2 - observed (1 - observed) /
        (|B_m| - 1)]), bins of fewer than 2 rows adding 0.
    brier_reliability, brier_resolution, brier_uncertainty : float
        Murphy's (1973) decomposition of the Brier score over the bins (K
        classes: class-wise, summed over classes; NaN without class-wise state).
    brier_within_variance, brier_within_covariance : float
        The within-bin terms of Stephenson, Coelho and Jolliffe (2008):
        reliability - resolution + uncertainty + within_variance -
        within_covariance = brier.
    ece_sweep, ece_sweep_bins : float, int
        ECE-sweep (Roelofs et al., 2022) and its bin count; NaN / None unless
        asked for (``metrics=("ece_sweep",)``).
    n_certain_wrong, first_certain_wrong_row : int or None
        Rows predicted with certainty and wrong (p exactly 0 with y = 1, or
        exactly 1 with y = 0), which make ECD, NLL and z +inf, and the
        global row of the first. None when not counted (the per-bin sums
        only tell that there is at least one, and in which bins:
        :attr:`certain_wrong_bins`); the driver (``calibration_report``,
        ``score_file``, ``fastcal score``) fills them. :meth:`notes` says so.
    smece, smece_sigma : float
        Smooth ECE (Blasiok and Nakkiran, 2023) and its bandwidth, the fixed
        point sigma = smECE_sigma; NaN unless the smooth ECE grid was filled
        (``smooth=True``). ``smooth_grid`` holds that grid's sums (mass,
        residual) for :func:`fastcal.reports.plot.smooth_diagram`.
    weight_sum, n_eff : float
        Rows with a ``sample_weight``: the sum of the weights, and Kish's
        effective rows (sum w)**2 / sum w**2; NaN without weights
        (:attr:`weighted`). Every metric is then a weighted mean over
        N = sum w, ``bins`` gains the column ``weight`` (the sum of w per
        bin; ``count`` stays the rows) and the ECD tests and the t-intervals
        take n_eff (see :func:`kish_var`).
    ecce, ecce_sigma, ecce_pvalue : float
        ECCE (Arrieta-Ibarra et al., 2022; MCGrad's ``ecce``), the range of the
        cumulative differences of y - p in the order of p, and the same
        scaled by its standard deviation under calibration, with its p-value
        (:func:`fastcal.ecce`); NaN unless asked for (``metrics=("ecce",)``).

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(2_000, sigma=0.5, seed=0)
    >>> r = fastcal.calibration_report(y, p, n_bins=5)
    >>> r.n, r.bins["count"].tolist(), round(r.ecd, 4), r.verdict
    (2000, [705, 189, 149, 195, 762], 0.0241, 'miscalibrated')
    """

    n: int
    n_omitted: int
    ece: float
    esce: float
    mce: float
    ace: float
    ecd: float
    brier: float
    nll: float
    ecd_var: float
    bins: dict
    n_bins: int
    closed: str
    strategy: str
    observed: str
    eps: float = 0.0
    sums: dict = field(default_factory=dict, repr=False)
    ci_level: float = float("nan")
    intervals: dict = field(default_factory=dict)
    n_certain_wrong: object = None
    first_certain_wrong_row: object = None
    ece_l2: float = float("nan")
    ece_debiased: float = float("nan")
    brier_reliability: float = float("nan")
    brier_resolution: float = float("nan")
    brier_uncertainty: float = float("nan")
    brier_within_variance: float = float("nan")
    brier_within_covariance: float = float("nan")
    ece_sweep: float = float("nan")
    ece_sweep_bins: object = None
    smece: float = float("nan")
    smece_sigma: float = float("nan")
    smooth_grid: object = field(default=None, repr=False, compare=False)
    ecce: float = float("nan")
    ecce_sigma: float = float("nan")
    ecce_pvalue: float = float("nan")
    weight_sum: float = float("nan")
    n_eff: float = float("nan")

    @classmethod
    def from_state(cls, counts, sums, totals, *, edges, closed, n_omitted, observed="frac_pos",
                   strategy="uniform", eps=0.0, lower=None, upper=None, ace=float("nan"),
                   n_certain_wrong=None, first_certain_wrong_row=None, rows=None, w2=None):
        """Build a report from per-bin counts (n_bins, 3), sums (n_bins, 3) and totals (7,).

        ``n_certain_wrong`` / ``first_certain_wrong_row``: the accumulator's count of
        rows with p exactly 1 - y in {0, 1} and the global row of the first (-1 or
        None: none / not counted).

        Weighted state (``rows`` given, :func:`weighted_report_state`): ``counts``,
        ``sums`` and ``totals`` are the weighted sums (sums of w in place of row
        counts, of w times each term in place of the terms), ``rows`` the rows per
        bin and ``w2`` the sums of w**2 per bin. Every mean is then a weighted mean
        (N = sum w), ``n`` stays the rows, and the ECD test and the intervals take
        Kish's effective rows n_eff = (sum w)**2 / sum w**2 (:func:`kish_var`).
        """
        v.check_choice("observed", observed, v.OBSERVED)
        # Few, whole-array numpy calls: this runs on every report, and at small n
        # it costs more than the fill itself.
        bins = _bin_table(counts, sums, observed, edges, lower, upper, rows, w2)
        raw = _raw_sums(counts, sums, totals)
        count = bins["count"]
        n = int(count.sum())
        weighted = rows is not None
        mass = bins["weight"] if weighted else count
        total = float(mass.sum()) if weighted else n
        if weighted:
            raw = _weighted_sums(raw, counts, rows, w2, mass)
        if total > 0:
            full = mass > 0
            w = mass[full].astype(np.float64) / total
            ece = float(np.dot(w, bins["ece"][full]))
            esce = float(np.dot(w, bins["esce"][full]))
            mce = float(bins["ece"][full].max())
            ecd = raw["sum_ecd"] / total
            brier = raw["sum_brier"] / total
            nll = raw["sum_nll"] / total
        else:
            ece = esce = mce = ecd = brier = nll = float("nan")
        kind = np.float64 if weighted else np.int64
        extra = _measures.binned(np.ascontiguousarray(counts, kind)[None],
                                 1 if observed == "frac_pos" else 2, 1,
                                 np.ascontiguousarray(sums, np.float64)[None], 0,
                                 raw["sum_p2"], raw["sum_py"])
        extra["ece_l2"] = extra.pop("l2")
        extra["ece_debiased"] = extra.pop("debiased")
        if weighted:
            extra.update(ece_debiased=_measures.debiased_kish(
                counts, 1 if observed == "frac_pos" else 2, sums[:, 0], w2),
                weight_sum=raw["sum_w"], n_eff=raw["n_eff"])
        return cls(n=n, n_omitted=int(n_omitted), ece=ece, esce=esce, mce=mce, ace=float(ace),
                   ecd=ecd, brier=brier, nll=nll, ecd_var=raw["sum_ecd_var"], bins=bins,
                   n_bins=int(count.shape[0]), closed=closed, strategy=strategy,
                   observed=observed, eps=float(eps), sums=raw,
                   n_certain_wrong=None if n_certain_wrong is None else int(n_certain_wrong),
                   first_certain_wrong_row=(None if first_certain_wrong_row is None
                                            or first_certain_wrong_row < 0
                                            else int(first_certain_wrong_row)), **extra)

    @property
    def weighted(self):
        """True if the rows carried a ``sample_weight`` (:attr:`weight_sum` is then
        their sum and :attr:`n_eff` Kish's effective rows)."""
        return not math.isnan(self.weight_sum)

    # -- certain and wrong predictions ---------------------------------------

    @property
    def certain_wrong_bins(self):
        """1-based bins whose ECD is +inf: they hold a certain prediction that was wrong.

        With the default binning that is bin 1 (p = 0, y = 1) and the last
        bin (p = 1, y = 0). Empty when ECD is finite (for example with eps).
        """
        e = np.asarray(self.bins["ecd"], dtype=np.float64)
        return [int(i) + 1 for i in np.flatnonzero(np.isposinf(e))]

    # what a certain-and-wrong row is, in this report's terms
    _CERTAIN_WRONG = "p exactly 0 with y = 1 or exactly 1 with y = 0"

    def certain_wrong_note(self):
        """One sentence on certain-and-wrong rows, or "" when there are none."""
        bins = self.certain_wrong_bins
        if not bins and not self.n_certain_wrong:
            return ""
        if self.n_certain_wrong is None:
            who = "At least one row is"
        else:
            k = int(self.n_certain_wrong)
            who = f"{k} row{'s are' if k != 1 else ' is'}"
        first = ("" if self.first_certain_wrong_row is None
                 else f" (first at row {int(self.first_certain_wrong_row)})")
        where = (f" in bin{'s' if len(bins) > 1 else ''} {_stats._bin_ranges(bins)}"
                 if bins else "")
        return (f"{who} certain and wrong{first}{where}: {self._CERTAIN_WRONG}, impossible "
                f"under calibration, so ECD, NLL and z are +inf by definition. Clip p with eps "
                f"(--eps 1e-6 on the command line, eps=1e-6 in Python) for a finite score.")

    def notes(self):
        """What a reader needs to read the numbers, one sentence each (a list,
        empty when there is nothing to say): rows certain and wrong
        (:meth:`certain_wrong_note`); a K-class report adds its own. The text
        report prints them and :meth:`to_dict` holds them under ``"notes"``."""
        return [note for note in (self.certain_wrong_note(),) if note]

    # -- the ECD test and intervals ----------------------------------------

    @property
    def ecd_z(self):
        """sum_i T_i / sqrt(sum_i p_i (1 - p_i) logit(p_i)^2); > 0 means over-confident."""
        if self.n == 0:
            return float("nan")
        return float(_stats.z_from_sums(self.sums["sum_ecd"], self.sums["sum_ecd_var"]))

    @property
    def ecd_p_over(self):
        """One-sided p-value for over-confidence, 1 - Phi(z)."""
        return _stats.normal_pvalues(self.ecd_z)[0]

    @property
    def ecd_p_under(self):
        """One-sided p-value for under-confidence, Phi(z)."""
        return _stats.normal_pvalues(self.ecd_z)[1]

    @property
    def ecd_p_two_sided(self):
        """Two-sided p-value, 2 (1 - Phi(|z|))."""
        return _stats.normal_pvalues(self.ecd_z)[2]

    @property
    def net_verdict(self):
        """Two-sided verdict of the net ECD test alone at alpha = 0.05.

        Over- and under-confident bins can cancel in its sum; :attr:`verdict`
        also reads the per-bin test.
        """
        return self.ecd_test().verdict

    @property
    def verdict(self):
        """The net ECD test and the per-bin test in one answer, at alpha = 0.05.

        "consistent with calibration", "over-confident", "under-confident" or
        "miscalibrated" (the tests point both ways); see
        :func:`fastcal.reports.stats.combined_verdict`, :attr:`net_verdict`
        for the net test alone and :attr:`overall_verdict` for the bins.
        """
        return _stats.combined_verdict(self.net_verdict, self.bin_test())

    def ecd_test(self, *, alpha=0.05, alternative="two-sided"):
        """The ECD test from this report's sums (normal approximation).

        Returns an :class:`fastcal.reports.stats.ECDTestResult`. For small n or
        extreme probabilities use :func:`fastcal.ecd_test` on the data, which
        switches to an exact or simulated null (see :mod:`fastcal.reports.stats`).
        """
        z = self.ecd_z
        p_over, p_under, p_two = _stats.normal_pvalues(z)
        return _stats.ECDTestResult(
            n=self.n, ecd=self.ecd, sum_ecd=self.sums.get("sum_ecd", float("nan")),
            sum_var=self.ecd_var, z=z, p_over=p_over, p_under=p_under, p_two_sided=p_two,
            verdict=_stats.verdict(p_over, p_under, p_two, alpha=alpha, alternative=alternative),
            alpha=float(alpha), alternative=alternative, method="normal")

    def bin_test(self, *, alpha=0.05):
        """Test of miscalibration in any direction from the per-bin z (max |z|, Sidak).

        The net ECD test can miss an S-shaped miscalibration whose over- and
        under-confident bins cancel; this one cannot. Returns a
        :class:`fastcal.reports.stats.BinTestResult`; see :func:`fastcal.reports.stats.bin_test`.
        """
        return _stats.bin_test(self.bins["ecd_z"], alpha=alpha, counts=self.bins["count"])

    @property
    def overall_verdict(self):
        """Net ECD verdict and per-bin verdict at alpha = 0.05, in one line.

        For example "no net over- or under-confidence; miscalibrated:
        over-confident in bins 1 (4,210 rows), 10 (4,190 rows), under-confident
        in bins 2-9 (91,600 rows)", with a caution when a named bin holds
        fewer than :data:`fastcal.reports.stats.MIN_BIN_ROWS` rows. A model is
        consistent with calibration only when both parts say so.
        """
        return _stats.overall_verdict(self.net_verdict, self.bin_test())

    def with_measures(self, values):
        """The report with the measures in ``values`` (field name -> value), each computed
        apart from the binned state (intervals, smooth ECE, ACE, the optional metrics,
        the certain-and-wrong rows): the one place they are added. A name that is not a
        field of the report is refused, so a measure cannot land beside the report's
        fields, unseen by ``to_dict``."""
        unknown = sorted(set(values) - {f.name for f in fields(self)})
        if unknown:
            msg = f"{type(self).__name__} has no field {', '.join(unknown)}"
            raise TypeError(msg)
        for name, value in values.items():
            setattr(self, name, value)
        return self

    def interval_measures(self, ci, boot_counts=None, boot_sums=None):
        """``ci_level`` and ``intervals`` of this report's sums and bootstrap replicates
        (values for :meth:`with_measures`)."""
        level = _stats.check_ci(ci)
        n, weight = (self.n_eff, self.weight_sum) if self.weighted else (self.n, None)
        return {"ci_level": level, "intervals": _stats.report_intervals(
            self.sums, n, level, boot_counts, boot_sums, self.observed,
            point={"ece": self.ece, "esce": self.esce, "mce": self.mce},
            ranges=_stats.MULTICLASS_RANGES if getattr(self, "n_classes", 0) else _stats.RANGES,
            weight=weight)}

    def plot(self, path=None, *, smooth=False, **kwargs):
        """Reliability diagram with the per-bin ECD panel; see :func:`fastcal.reports.plot.reliability_diagram`.
        ``smooth=True``: the smooth reliability diagram of the smooth ECE grid instead
        (:func:`fastcal.reports.plot.smooth_diagram`)."""
        return (smooth_diagram if smooth else reliability_diagram)(self, path, **kwargs)

    # -- export ----------------------------------------------------------

    def to_dict(self):
        """Plain Python types; NaN becomes None and infinities the strings "inf"/"-inf".

        ``verdict`` is :attr:`verdict` (both tests), ``overall_verdict`` the
        line naming the bins and their rows, ``ecd_test.verdict`` the net
        test alone and ``bin_test`` the per-bin test; ``notes`` the list of
        :meth:`notes` (empty when none). ``bins`` is a list of rows, one dict
        per bin with the keys of :data:`BIN_COLUMNS` (what JSON readers and
        ``pandas.DataFrame`` take as records), where :attr:`bins` holds the
        same table as columns.
        """
        out = {name: _clean(getattr(self, name)) for name in SCALARS + MEASURES}
        out.update({
            "ecd_var": _clean(self.ecd_var),
            "n_bins": self.n_bins,
            "closed": self.closed,
            "strategy": self.strategy,
            "observed": self.observed,
            "eps": self.eps,
        })
        if self.smooth_grid is not None:
            out.update(smece=_clean(self.smece), smece_sigma=_clean(self.smece_sigma))
        if not math.isnan(self.ecce):
            out.update(ecce=_clean(self.ecce), ecce_sigma=_clean(self.ecce_sigma),
                       ecce_pvalue=_clean(self.ecce_pvalue))
        if self.weighted:
            out.update(weight_sum=_clean(self.weight_sum), n_eff=_clean(self.n_eff))
        out["ecd_test"] = {
            "z": _clean(self.ecd_z),
            "p_over": _clean(self.ecd_p_over),
            "p_under": _clean(self.ecd_p_under),
            "p_two_sided": _clean(self.ecd_p_two_sided),
            "alpha": 0.05,
            "verdict": self.net_verdict,
        }
        out["bin_test"] = self.bin_test().to_dict()
        out["verdict"] = self.verdict
        out["overall_verdict"] = self.overall_verdict
        out["notes"] = self.notes()
        note = self.certain_wrong_note()
        if note:
            out["certain_wrong"] = {
                "n": None if self.n_certain_wrong is None else int(self.n_certain_wrong),
                "first_row": (None if self.first_certain_wrong_row is None
                              else int(self.first_certain_wrong_row)),
                "bins": self.certain_wrong_bins,
                "note": note,
            }
        if self.intervals:
            out["ci"] = {"level": self.ci_level}
            out["ci"].update({k: [_clean(a), _clean(b)] for k, (a, b) in self.intervals.items()})
        columns = BIN_COLUMNS + (("weight",) if "weight" in self.bins else ())
        out["bins"] = [
            {col: _clean(self.bins[col][i]) for col in columns} for i in range(self.n_bins)
        ]
        return out

    def to_json(self, **kwargs):
        """The report as a JSON string (strict JSON: no NaN or Infinity literals)."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def to_markdown(self, digits=4):
        """The per-bin table and the weighted sums as a Markdown table."""
        cell = partial(table_cell, digits=digits)
        obs = "frac_pos" if self.observed == "frac_pos" else "accuracy"
        head = ["bin", "range", "count", "conf", obs, "ECE", "ESCE", "ECD", "z"]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        last = self.n_bins - 1
        for i in range(self.n_bins):
            lo, hi = self.bins["lower"][i], self.bins["upper"][i]
            if self.strategy == "quantile":
                rng = f"[{lo:.4g}, {hi:.4g}]"
            elif self.closed == "left":
                rng = f"[{lo:.4g}, {hi:.4g}{']' if i == last else ')'}"
            else:
                rng = f"{'[' if i == 0 else '('}{lo:.4g}, {hi:.4g}]"
            vals = [str(i + 1), rng, cell(self.bins["count"][i]), cell(self.bins["conf"][i]),
                    cell(self.bins[obs][i]), cell(self.bins["ece"][i]), cell(self.bins["esce"][i]),
                    cell(self.bins["ecd"][i]), _zcell(self.bins["ecd_z"][i])]
            rows.append("| " + " | ".join(vals) + " |")
        rows.append("| " + " | ".join(["weighted sum", "", str(self.n), "", "", cell(self.ece),
                                         cell(self.esce), cell(self.ecd),
                                         _zcell(self.ecd_z)]) + " |")
        tail = (f"\nn = {self.n}, omitted = {self.n_omitted}, MCE = {cell(self.mce)}, "
                f"ACE = {cell(self.ace) or 'n/a'}, Brier = {cell(self.brier)}, NLL = {cell(self.nll)}")
        if self.weighted:
            tail += (f"\nWeighted rows: sum of weights = {self.weight_sum:.6g}, effective rows "
                     f"(Kish) = {self.n_eff:.6g}; the metrics are weighted means, the tests "
                     "take the effective rows")
        if self.smooth_grid is not None:
            tail += (f"\nSmooth ECE = {cell(self.smece) or 'n/a'} "
                     f"(bandwidth sigma = {cell(self.smece_sigma) or 'n/a'})")
        tail += self._measures_lines(cell)
        if not math.isnan(self.ecce):
            tail += (f"\nECCE = {cell(self.ecce)} ({self.ecce_sigma:.2f} standard deviations "
                     f"under calibration, p = {_pcell(self.ecce_pvalue)})")
        t = self.ecd_test()
        tail += (f"\nECD test: z = {_zcell(t.z)}, p(over-confident) = {_pcell(t.p_over)}, "
                 f"p(two-sided) = {_pcell(t.p_two_sided)}: {t.verdict} (alpha = 0.05)")
        b = self.bin_test()
        if b.n_bins:
            tail += (f"\nPer-bin test (max |z| = {b.max_abs_z:.2f} over {b.n_bins} bins, Sidak "
                     f"p = {_pcell(b.p_value)}): {b.verdict} (alpha = 0.05)")
        for note in self.notes():
            tail += f"\n{note}"
        tail += f"\nVerdict: {self.verdict} ({self.overall_verdict})"
        if self.intervals:
            lvl = f"{100 * self.ci_level:g}%"
            parts = [f"{name.upper() if name != 'brier' else 'Brier'} [{cell(a) or 'n/a'}, "
                     f"{cell(b) or 'n/a'}]" for name, (a, b) in self.intervals.items()]
            tail += f"\n{lvl} intervals: " + ", ".join(parts)
        return "\n".join(rows) + "\n" + tail

    def _measures_lines(self, cell):
        """The text lines of the L2, debiased, sweep and Brier-decomposition fields."""
        out = (f"\nL2 ECE = {cell(self.ece_l2) or 'n/a'}, debiased L2 ECE = "
               f"{cell(self.ece_debiased) or 'n/a'}")
        if self.ece_sweep_bins is not None:
            out += f", ECE-sweep = {cell(self.ece_sweep)} ({self.ece_sweep_bins} bins)"
        if not math.isnan(self.brier_reliability):
            out += (f"\nBrier decomposition (REL - RES + UNC + WBV - WBC = Brier): reliability "
                    f"{cell(self.brier_reliability)}, resolution {cell(self.brier_resolution)}, "
                    f"uncertainty {cell(self.brier_uncertainty)}, within-bin variance "
                    f"{cell(self.brier_within_variance)}, within-bin covariance "
                    f"{cell(self.brier_within_covariance)}")
        return out

    def __str__(self):
        return self.to_markdown()


def smooth_measures(mass, resid):
    """``smooth_grid``, ``smece`` and ``smece_sigma`` of the smooth ECE grid sums (copied):
    the smooth ECE at its fixed-point bandwidth (values for ``with_measures``)."""
    smece, sigma = SmoothGrid(mass, resid).fixed_point()
    return {"smooth_grid": (mass.copy(), resid.copy()), "smece": smece, "smece_sigma": sigma}


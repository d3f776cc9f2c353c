"""Where is it miscalibrated? One report per segment, and which segments fail the ECD
test once corrected for testing them all."""

import json
import math
from statistics import NormalDist

import numpy as np

from fastcal.inputs import validation as v
from fastcal.reports import plot as _plot
from fastcal.reports._json import clean, json_safe
from fastcal.reports.report import _pcell, _zcell, table_cell
from fastcal.reports.stats import CONSISTENT, OVER, SIMULATE_BELOW_N, UNDER, check_alpha, verdict

CORRECTIONS = ("holm", "bh")
_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg"}
# the verdict names at most this many segments of each kind, then says how many more
MAX_NAMED = 10
TABLE_COLUMNS = ("segment", "n", "ece", "ecd", "ecd_z", "p_value", "p_adjusted", "verdict", "note")
# the table's columns when the reports have ECCE (metrics=("ecce",))
ECCE_COLUMNS = ("ecce", "ecce_sigma", "ecce_pvalue")


def adjust_pvalues(p, method="holm"):
    """p-values adjusted for testing them all: Holm's step-down (family-wise error)
    or Benjamini-Hochberg's step-up (false discovery rate). NaN p-values (untested)
    stay NaN and do not count in the family.

    Holm: with the m p-values sorted, p~(i) = max_{j <= i} min(1, (m - j + 1) p(j)).
    BH: p~(i) = min_{j >= i} min(1, m p(j) / j).

    Examples
    --------
    >>> from fastcal.reports.segmented import adjust_pvalues
    >>> adjust_pvalues([0.01, 0.04, 0.03], "holm").round(4).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust_pvalues([0.01, 0.04, 0.03], "bh").round(4).tolist()
    [0.03, 0.04, 0.04]
    """
    v.check_choice("correction", method, CORRECTIONS)
    p = np.asarray(p, np.float64)
    out = np.full(p.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.shape[0]
    if m == 0:
        return out
    order = tested[np.argsort(p[tested], kind="stable")]
    ranked = p[order]
    i = np.arange(1, m + 1)
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - i + 1) * ranked))
    else:
        adj = np.minimum.accumulate(np.minimum(1.0, m * ranked / i)[::-1])[::-1]
    out[order] = adj
    return out


def key_text(key):
    """A segment's key as text: a tuple's parts joined by ", "."""
    if isinstance(key, tuple):
        return ", ".join(str(k) for k in key)
    return str(key)


def _named(key):
    """A key as the verdict names it: a tuple in parentheses."""
    return f"({key_text(key)})" if isinstance(key, tuple) else key_text(key)


def _rows_text(n):
    return f"{n:,} row{'s' if n != 1 else ''}"


class SegmentedReport:
    """The report of each segment, the whole's, and the segments the ECD test finds
    miscalibrated after a correction for testing them all.

    ``r[key]`` is the :class:`~fastcal.CalibrationReport` of the segment (a tuple
    key for several key columns), ``r.overall`` the whole's; ``r.keys()``,
    ``len(r)`` and iteration go over the keys. Each segment's p-value is its
    report's two-sided ECD test (``ecd_p_two_sided``, the normal approximation of
    z = sum T / sqrt(sum Var)); ``correction`` adjusts them ("holm": Holm's
    step-down, family-wise error at ``alpha``; "bh": Benjamini-Hochberg, false
    discovery rate at ``alpha``), and a segment whose adjusted p-value is below
    ``alpha`` is miscalibrated, over- or under-confident by the sign of z. A
    segment of fewer than 200 rows is tested and named with a caution (the
    normal p-value may be off there; :func:`fastcal.ecd_test` on its rows is
    exact or simulated); a segment with no p-value (no rows left, or a zero
    variance) is untested and takes no part in the correction.

    Examples
    --------
    >>> import numpy as np, fastcal
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(3_000); g = rng.choice(["a", "b", "c"], 3_000)
    >>> y = (rng.random(3_000) < np.where(g == "c", 0.5 + 0.5 * (p - 0.5), p)).astype(int)
    >>> r = fastcal.calibration_report(y, p, by=g)
    >>> r.miscalibrated, r["c"].n == int((g == "c").sum()), r.table()["verdict"][0]
    (['c'], True, 'over-confident')
    """

    def __init__(self, reports, overall, *, correction="holm", alpha=0.05, columns=None):
        v.check_choice("correction", correction, CORRECTIONS)
        self.alpha = check_alpha(alpha)
        self.correction = correction
        self.columns = columns  # the key columns' names (files), or None
        self.overall = overall
        self._reports = dict(reports)
        keys = list(self._reports)
        self._p = np.array([float(self._reports[k].ecd_p_two_sided) for k in keys])
        self._adjusted = adjust_pvalues(self._p, correction)
        self._p_of = {k: (p, a) for k, p, a in zip(keys, self._p, self._adjusted)}

    # -- a mapping of key -> report ---------------------------------------------

    def __getitem__(self, key):
        return self._reports[key]

    def __contains__(self, key):
        return key in self._reports

    def __len__(self):
        return len(self._reports)

    def __iter__(self):
        return iter(self._reports)

    def keys(self):
        return self._reports.keys()

    def items(self):
        return self._reports.items()

    # -- the test -----------------------------------------------------------

    def p_value(self, key):
        """(p-value, adjusted p-value) of a segment's ECD test."""
        return self._p_of[key]

    def segment_verdict(self, key):
        """"over-confident", "under-confident", "consistent" or "untested"."""
        adj = self._p_of[key][1]
        if math.isnan(adj):
            return "untested"
        rep = self._reports[key]  # the report's two-sided verdict, at the adjusted p-value
        word = verdict(rep.ecd_p_over, rep.ecd_p_under, adj, alpha=self.alpha)
        return "consistent" if word == CONSISTENT else word

    def _note(self, key):
        n = self._reports[key].n
        if math.isnan(self._p_of[key][0]):
            return "no ECD test (no rows, or zero variance)"
        if n < SIMULATE_BELOW_N:
            return f"caution: fewer than {SIMULATE_BELOW_N} rows"
        return ""

    @property
    def miscalibrated(self):
        """The keys of the segments miscalibrated after the correction, surest first."""
        return [k for k in self._sorted() if self.segment_verdict(k) in (OVER, UNDER)]

    def _sorted(self):
        keys = list(self._reports)
        adj = np.where(np.isnan(self._adjusted), np.inf, self._adjusted)
        p = np.where(np.isnan(self._p), np.inf, self._p)
        return [keys[i] for i in np.lexsort((np.arange(len(keys)), p, adj))]

    def table(self):
        """One row per segment, surest miscalibration first (adjusted p ascending):
        a dict of columns ``segment`` (keys), ``n`` (rows), ``ece``, ``ecd``,
        ``ecd_z``, ``p_value`` (two-sided ECD test), ``p_adjusted``, ``verdict``
        and ``note`` (a caution for small segments), each a list or an array;
        with ECCE (``metrics=("ecce",)``) also ``ecce``, ``ecce_sigma`` and
        ``ecce_pvalue``."""
        keys = self._sorted()
        reps = [self._reports[k] for k in keys]
        ecce = {c: np.array([getattr(r, c) for r in reps], np.float64)
                for c in ECCE_COLUMNS} if self.has_ecce else {}
        return {
            "segment": keys,
            "n": np.array([r.n for r in reps], np.int64),
            "ece": np.array([r.ece for r in reps], np.float64),
            "ecd": np.array([r.ecd for r in reps], np.float64),
            "ecd_z": np.array([r.ecd_z for r in reps], np.float64),
            "p_value": np.array([self._p_of[k][0] for k in keys], np.float64),
            "p_adjusted": np.array([self._p_of[k][1] for k in keys], np.float64),
            "verdict": [self.segment_verdict(k) for k in keys],
            "note": [self._note(k) for k in keys],
            **ecce,
        }

    @property
    def has_ecce(self):
        """True when the reports carry ECCE (made with ``metrics=("ecce",)``)."""
        return not np.isnan(self.overall.ecce)

    @property
    def verdict(self):
        """One line: the segments miscalibrated after the correction (with their rows
        and direction), or that none is, and a caution naming small segments."""
        how = f"{_NAMES[self.correction]}, alpha = {self.alpha:g}"
        tested = int(np.count_nonzero(~np.isnan(self._p)))
        bad = self.miscalibrated
        if bad:
            named = ", ".join(f"{_named(k)} {self.segment_verdict(k)} "
                              f"({_rows_text(self._reports[k].n)})" for k in bad[:MAX_NAMED])
            more = f" and {len(bad) - MAX_NAMED} more" if len(bad) > MAX_NAMED else ""
            text = f"{len(bad)} of {tested} segments miscalibrated ({how}): {named}{more}"
        else:
            text = f"no segment miscalibrated ({how}; {tested} segments tested)"
        small = [k for k in self._sorted() if self._reports[k].n < SIMULATE_BELOW_N]
        if small:
            named = ", ".join(f"{_named(k)} ({_rows_text(self._reports[k].n)})"
                              for k in small[:MAX_NAMED])
            more = f" and {len(small) - MAX_NAMED} more" if len(small) > MAX_NAMED else ""
            text += (f"; caution: {len(small)} segment{'s' if len(small) > 1 else ''} of fewer "
                     f"than {SIMULATE_BELOW_N} rows, where the normal p-value may be off: "
                     f"{named}{more}")
        return text

    # -- output -----------------------------------------------------------

    def to_dict(self):
        """The table as a list of rows, the whole's figures, the verdict (JSON-safe)."""
        t = self.table()
        columns = TABLE_COLUMNS + (ECCE_COLUMNS if self.has_ecce else ())
        rows = [{c: clean(t[c][i]) if c != "segment" else json_safe(t[c][i])
                 for c in columns} for i in range(len(t["segment"]))]
        o = self.overall
        ecce = {c: clean(getattr(o, c)) for c in ECCE_COLUMNS} if self.has_ecce else {}
        return {
            "correction": self.correction,
            "alpha": self.alpha,
            "columns": self.columns,
            "n_segments": len(self),
            "verdict": self.verdict,
            "miscalibrated": json_safe(self.miscalibrated),
            "overall": {"n": o.n, "ece": clean(o.ece), "ecd": clean(o.ecd),
                        "ecd_z": clean(o.ecd_z), "p_value": clean(o.ecd_p_two_sided),
                        "verdict": o.verdict, **ecce},
            "segments": rows,
        }

    def to_json(self, **kwargs):
        """The report as a JSON string (strict JSON: no NaN or Infinity literals)."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def to_markdown(self, digits=4):
        """The segment table (surest miscalibration first) and the verdict, in Markdown."""
        t = self.table()
        name = ", ".join(self.columns) if self.columns else "segment"
        head = [name, "n", "ECE", "ECD", "z", "p", "p adj.", "verdict"]
        if self.has_ecce:  # ECCE in standard deviations and its p-value
            head[-1:-1] = ["ECCE sigma", "ECCE p"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

        def ecce(sigma, p):
            return [table_cell(sigma, 2), _pcell(p)] if self.has_ecce else []

        for i, key in enumerate(t["segment"]):
            verdict = t["verdict"][i] + (f" ({t['note'][i]})" if t["note"][i] else "")
            cells = [key_text(key), f"{t['n'][i]:,}", table_cell(t["ece"][i], digits),
                     table_cell(t["ecd"][i], digits), _zcell(t["ecd_z"][i]), _pcell(t["p_value"][i]),
                     _pcell(t["p_adjusted"][i]),
                     *(ecce(t["ecce_sigma"][i], t["ecce_pvalue"][i]) if self.has_ecce else []),
                     verdict]
            lines.append("| " + " | ".join(cells) + " |")
        o = self.overall
        cells = ["(all)", f"{o.n:,}", table_cell(o.ece, digits), table_cell(o.ecd, digits),
                 _zcell(o.ecd_z), _pcell(o.ecd_p_two_sided), "", *ecce(o.ecce_sigma, o.ecce_pvalue),
                 o.net_verdict]
        lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + f"\n\nVerdict: {self.verdict}"

    def __str__(self):
        return self.to_markdown()

    def __repr__(self):
        return (f"SegmentedReport(segments={len(self)}, n={self.overall.n}, "
                f"miscalibrated={len(self.miscalibrated)}, correction={self.correction!r})")

    def plot(self, path=None, *, ax=None, max_segments=30, level=0.95):
        """Each segment's ECD with the interval of its null law (ECD +- z_level x its
        standard deviation under calibration), surest miscalibration at the top,
        at most ``max_segments`` of them; miscalibrated segments in colour.
        Returns the figure (drawn into ``ax`` when given); saved when ``path`` is given."""
        Figure, FigureCanvasAgg = _plot._matplotlib()
        t = self.table()
        k = min(len(t["segment"]), int(max_segments))
        if ax is None:
            fig = Figure(figsize=(6.4, 1.2 + 0.3 * k))
            FigureCanvasAgg(fig)
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        zq = NormalDist().inv_cdf((1.0 + level) / 2.0)
        ecd = t["ecd"][:k]
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.where(t["ecd_z"][:k] != 0, np.abs(ecd / t["ecd_z"][:k]), np.nan)
        ypos = np.arange(k)[::-1]
        colours = [_plot.OVER_COLOUR if w == OVER else _plot.UNDER_COLOUR if w == UNDER
                   else "0.5" for w in t["verdict"][:k]]
        ax.errorbar(ecd, ypos, xerr=np.nan_to_num(zq * sd), fmt="none", ecolor="0.6", lw=1)
        ax.scatter(ecd, ypos, c=colours, zorder=3)
        ax.axvline(0.0, color="0.3", lw=0.8)
        ax.set_yticks(ypos, [f"{key_text(s)} ({n:,})" for s, n in zip(t["segment"][:k],
                                                                     t["n"][:k])])
        ax.set_xlabel(f"ECD (bars: {level:.0%} of its law under calibration)")
        ax.set_title(self.verdict if len(self.verdict) < 80 else self.verdict[:77] + "...",
                     fontsize=8)
        if path is not None:
            fig.tight_layout()
            _plot.save_atomic(fig, path)
        return fig


__all__ = ["CORRECTIONS", "SegmentedReport", "adjust_pvalues"]

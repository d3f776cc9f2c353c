"""Honest evaluation of a recalibration: cross-fitted before / after scores and
their reliability diagrams side by side."""

import numpy as np

from fastcal.backends import resolve
from fastcal.inputs.validation import show
from fastcal.recalibrate.methods import make
from fastcal.reports.plot import _matplotlib, save_atomic, wilson_interval
from fastcal.score import Options, score
from fastcal.sources.arrays import ArraySource


class Evaluation:
    """Before / after scores of a recalibration, cross-fitted (every row
    recalibrated by a map fitted without it).

    Attributes
    ----------
    before, after : CalibrationReport
        Reports of the original and of the out-of-fold recalibrated probabilities.
    models : list
        The ``cv`` fitted objects (one per fold).
    """

    ROWS = (("ECD", "ecd"), ("ECE", "ece"), ("Brier", "brier"), ("NLL", "nll"),
            ("ECD z", "ecd_z"), ("p(over-confident)", "ecd_p_over"))

    def __init__(self, method, before, after, models, cv):
        self.method = method
        self.before = before
        self.after = after
        self.models = models
        self.cv = cv

    def to_dict(self):
        row = {name: {"before": float(getattr(self.before, attr)),
                      "after": float(getattr(self.after, attr))} for name, attr in self.ROWS}
        row["verdict"] = {"before": self.before.verdict, "after": self.after.verdict}
        return {"method": self.method, "cv": self.cv, "n": int(self.before.n), "metrics": row}

    def to_markdown(self):
        lines = ["| | before | after |", "|---|---:|---:|"]
        for name, attr in self.ROWS:
            lines.append(f"| {name} | {getattr(self.before, attr):.4g} | "
                         f"{getattr(self.after, attr):.4g} |")
        lines.append(f"| verdict | {self.before.verdict} | {self.after.verdict} |")
        return "\n".join(lines)

    def __str__(self):
        return self.to_markdown()

    def plot(self, path=None, *, title=None):
        """Reliability diagrams before and after, side by side (a matplotlib Figure)."""
        return before_after_diagram(self.before, self.after, path, title=title)


def before_after_diagram(before, after, path=None, *, title=None, level=0.95):
    """Two reliability diagrams (fraction of positives against mean p per bin,
    Wilson intervals) with their ECD tests, written atomically to ``path``."""
    Figure, _ = _matplotlib()
    fig = Figure(figsize=(10.0, 4.8))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, rep, name in zip(axes, (before, after), ("before", "after")):
        counts = np.asarray(rep.bins["count"], np.int64)
        conf = np.asarray(rep.bins["conf"], np.float64)
        frac = np.asarray(rep.bins["frac_pos"] if rep.observed == "frac_pos"
                          else rep.bins["accuracy"], np.float64)
        ok = counts > 0
        k = np.rint(frac[ok] * counts[ok])
        lo, hi = wilson_interval(k, counts[ok], level)
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--")
        ax.errorbar(conf[ok], frac[ok], yerr=[frac[ok] - lo, hi - frac[ok]], fmt="o-", ms=4,
                    capsize=2)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("mean predicted probability")
        t = rep.ecd_test()
        ax.set_title(f"{name}: ECD {rep.ecd:.4f}, ECE {rep.ece:.4f}\n"
                     f"z = {t.z:+.2f}, p(over) = {t.p_over:.2g}: {t.verdict}", fontsize=9)
    axes[0].set_ylabel("fraction of positives")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        save_atomic(fig, path)
    return fig


def evaluate(y_true, y_prob, *, method="temperature", cv=5, seed=0, logits=False, n_bins=10,
             threads=None, **options):
    """Cross-fitted before / after evaluation of a recalibration in one call.

    The rows are split into ``cv`` folds (a seeded permutation); the rows of
    each fold are recalibrated by the map fitted on the other folds, and all
    rows are then scored before and after (ECD, ECE, Brier, NLL, the ECD test,
    ``n_bins`` uniform bins, 10 as in every report). ``options`` go to the method (``target``,
    ``alpha``, ``n_bins`` of histogram binning as ``hist_bins``...).

    Returns
    -------
    Evaluation
    """
    if isinstance(cv, bool) or not isinstance(cv, int) or cv < 2:
        msg = f"cv must be an integer >= 2 (folds); got {show(cv)}"
        raise ValueError(msg)
    batch = resolve(y_true, y_prob, logits=logits, soft=False)  # maps fit hard labels
    n = batch.n
    if n < cv:
        msg = f"y_prob has {n} rows; need at least cv={cv}"
        raise ValueError(msg)
    if "hist_bins" in options:
        options["n_bins"] = options.pop("hist_bins")
    fold = np.empty(n, np.int64)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % cv
    y, p = batch.y, batch.p
    after = None
    models = []
    for k in range(cv):
        test = fold == k
        m = make(method, logits=logits, **options).fit(y[~test], p[~test], threads=threads)
        q = m.transform(p[test])
        if after is None:
            after = np.empty((n,) + q.shape[1:], np.float64)
        after[test] = q
        models.append(m)
    opts = dict(n_bins=n_bins, ace=False, threads=threads)
    rep_before = score(ArraySource(y, p), Options(logits=logits, **opts))
    rep_after = score(ArraySource(y, after), Options(**opts))
    return Evaluation(method, rep_before, rep_after, models, cv)

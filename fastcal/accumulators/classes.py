"""Multi-class state: (N, K) probabilities or logits, top-label and class-wise.

The per-bin arrays are those of the binary state over confidence
(max-probability) bins, "positive" meaning "argmax equals the label"; the
class-wise state keeps K x n_bins counters (``classwise=True``). Bootstrap
replicates, ACE's buckets and the smooth ECE grid are those of the
(confidence, correct) pairs. The arrays are declared in
:data:`fastcal.backends.layout.LAYOUTS`; the class-wise ones are sized when
K is known (``n_classes``, or the first update).
"""

import numpy as np

from fastcal._kernels import _config
from fastcal.accumulators import checks as ck
from fastcal.accumulators.base import Binned
from fastcal.accumulators.settings import KEYWORDS, check_state_size, state_settings
from fastcal.backends.layout import CLASSWISE, LAYOUTS, WCLASS
from fastcal.reports.multiclass_report import MulticlassReport
from fastcal.reports.report import smooth_measures
from fastcal.reports.stats import check_ci

# Rows of y_prob must sum to 1 within this (absolute) tolerance unless
# renormalize=True. float32 softmax outputs over 1000 classes are within ~1e-6.
SUM_TOL = _config.SUM_TOL


class MulticlassAccumulator(Binned):
    """Mergeable top-label and class-wise state of K-class input, made from a
    :class:`~fastcal.accumulators.settings.Settings` or from keyword options
    (``takes``; see :class:`fastcal.CalibrationAccumulator`, the front door).
    K is fixed by ``n_classes`` or by the first update."""

    kind = "multiclass"
    layout = LAYOUTS["multiclass"]

    takes = frozenset(KEYWORDS)  # the keyword options: all of the front door's

    def __init__(self, settings=None, /, **options):
        settings = state_settings(settings, options, self.takes)
        self._init_binned(settings, settings.logits or settings.renormalize)
        self.checks = ck.multiclass_table(self.logits, self.renormalize)
        if settings.n_classes is not None:
            self._set_classes(settings.n_classes)

    logits = property(lambda self: self.spec.logits)
    renormalize = property(lambda self: self.spec.renormalize)
    classwise = property(lambda self: self.spec.classwise)

    def _set_classes(self, k):
        """Fix K: the class-wise arrays get their shapes."""
        self.n_classes = k
        dims = self._dims()
        for a in (*CLASSWISE, WCLASS):
            setattr(self, a.name, a.zeros(dims))

    def _check_batch(self, batch):
        if batch.kind != self.kind:
            msg = (f"y_prob has shape {tuple(batch.p.shape)} but this accumulator holds "
                   f"{self.n_classes}-class state; every update needs shape (n, K)")
            raise ValueError(msg)
        self._check_k(int(batch.p.shape[1]))

    def _add_chunk(self, arrays, batch):
        """Add a checked chunk's arrays; its K columns fix K."""
        if self.n_classes is None:
            self._set_classes(int(batch.p.shape[1]))
        self._add_state(arrays)

    def _check_k(self, k):
        if self.n_classes is None:  # K from the data: the state is sized by the fill
            check_state_size(self.n_bins, k, classwise=self.classwise, n_boot=self.n_boot,
                             ace_buckets=self.ace_buckets, smooth=self.smooth, ecce=self.ecce,
                             what=f"y_prob's {k:,} columns")
        elif k != self.n_classes:
            msg = (f"y_prob has {k} columns but this accumulator holds {self.n_classes}-class "
                   f"state; every update needs shape (n, {self.n_classes})")
            raise ValueError(msg)

    def _unknown_shape(self):
        msg = ("the arrays of a multi-class state need its number of classes: pass "
               "n_classes=K (or classwise=False)")
        raise ValueError(msg)

    def _upgrade(self, state):
        state = super()._upgrade(state)
        for name in ("class_counts", "class_sums"):  # K not known when pickled
            state.setdefault(name, None)
        if state.get("n_classes") is None:
            state.setdefault("wclass", None)
        return state

    # -- merging ---------------------------------------------------------

    def _check_compatible(self, other):
        self._check_type(other, "MulticlassAccumulator")
        self._check_binned(other)
        a, b = self.n_classes, other.n_classes
        if a != b and None not in (a, b):
            msg = f"cannot merge accumulators with different numbers of classes: {a} and {b}"
            raise ValueError(msg)
        if self.classwise != other.classwise:
            msg = "cannot merge accumulators with and without class-wise state (classwise=)"
            raise ValueError(msg)
        if (self.logits, self.renormalize) != (other.logits, other.renormalize):
            msg = ("cannot merge accumulators of logits and probabilities, or with and without "
                   "renormalize")
            raise ValueError(msg)

    def _add(self, other):
        if other.n_classes is not None and self.n_classes is None:
            self._set_classes(other.n_classes)
        super()._add(other)

    # -- reading ---------------------------------------------------------

    def report(self, *, observed="frac_pos", ci=None):
        """The :class:`~fastcal.reports.multiclass_report.MulticlassReport` so far."""
        ci = check_ci(ci)
        edges = self.report_edges()
        per_class = per_bin = None
        ccounts, csums = self.class_counts, self.class_sums
        if self.weighted and self.classwise and self.n_classes is not None:
            ccounts, csums = self.wclass[..., 0:2], self.wclass[..., 2]
        if self.classwise and self.n_classes is not None:
            per_class, per_bin = class_tables(ccounts, csums, edges)
        counts, sums, totals, weights = self.report_state()
        rep = MulticlassReport.from_multiclass_state(
            counts, sums, totals, per_class, per_bin, n_classes=self.n_classes, edges=edges,
            closed=self.closed, n_omitted=self.n_omitted,
            strategy="uniform" if self.edges is None else "edges", eps=self.eps,
            class_state=(ccounts, csums) if per_class else None, **weights)
        if ci is not None:
            # top-label state: "correct" (column 2) is the positive label (column 1)
            boot, boot_sums = self.boot_state()
            boot = boot.copy()
            boot[..., 2] = boot[..., 1]
            rep.with_measures(rep.interval_measures(ci, boot, boot_sums))
        if self.smooth:
            rep.with_measures(smooth_measures(self.smooth_mass, self.smooth_resid))
        return rep

    def describe(self):
        return f"n={self.n}, n_classes={self.n_classes}, n_bins={self.n_bins}, closed={self.closed!r}"

    def __repr__(self):
        return f"MulticlassAccumulator({self.describe()})"


def class_tables(ccounts, csums, edges):
    """Per-class ECE/ESCE/MCE and reliability columns from the class-wise state.

    Returns (per-class dict of 1-D arrays, per-class-per-bin dict of 2-D arrays).
    """
    count = ccounts[:, :, 0]
    n_true = ccounts[:, :, 1]
    n = count.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = count.astype(np.float64)
        conf = csums / c
        freq = n_true / c
        gap = freq - conf
        w = c / n[:, None]
        esce = np.nansum(np.where(count > 0, w * gap, 0.0), axis=1)
        ece = np.nansum(np.where(count > 0, w * np.abs(gap), 0.0), axis=1)
        mce = np.max(np.where(count > 0, np.abs(gap), -np.inf), axis=1)
        mean_p = csums.sum(axis=1) / n
        frequency = n_true.sum(axis=1) / n
    empty = count == 0
    conf[empty] = np.nan
    freq[empty] = np.nan
    gap[empty] = np.nan
    per_class = {
        "class": np.arange(count.shape[0], dtype=np.int64),
        # rows with that label (weighted state: the sum of their weights)
        "support": n_true.sum(axis=1).astype(np.int64 if n_true.dtype.kind in "iu"
                                              else np.float64),
        "mean_prob": mean_p,
        "frequency": frequency,
        "ece": ece,
        "esce": esce,
        "mce": mce,
    }
    per_bin = {
        "lower": np.asarray(edges[:-1], np.float64),
        "upper": np.asarray(edges[1:], np.float64),
        "count": count.copy(),
        "n_true": n_true.copy(),
        "conf": conf,
        "frequency": freq,
    }
    return per_class, per_bin

"""The report of a multi-class fill: the binary report's fields plus per-class tables."""

from dataclasses import dataclass, field
from functools import partial
import math

import numpy as np

from fastcal.inputs.batch import TWO_CLASSES
from fastcal.reports import measures as _measures
from fastcal.reports._json import clean as _clean
from fastcal.reports.report import CalibrationReport, table_cell

CLASS_COLUMNS = ("class", "support", "mean_prob", "frequency", "ece", "esce", "mce")
CLASS_BIN_COLUMNS = ("count", "n_true", "conf", "frequency")


@dataclass
class MulticlassReport(CalibrationReport):
    """Calibration metrics of (n, K) predictions from one pass.

    Everything of :class:`~fastcal.CalibrationReport`, read over *confidence*
    (top-label) bins: a row falls in the bin of its max probability; ``conf``
    is the mean max probability and ``accuracy`` the fraction of rows whose
    argmax is the label (for top-label calibration the "fraction of
    positives" is that same accuracy, so ``frac_pos`` equals ``accuracy``).
    ``ece``/``esce``/``mce`` compare the two (Guo et al.; Riera i Marín and Galdran's tutorial,
    Part III:
    confidence ECE); ``ace`` is the same over equal-mass confidence bins.
    ``ecd`` is eq. 12 of the ECD paper, mean over rows of
    sum_k p_k log p_k - log p_y; ``ecd_var`` sums the per-row variance
    sum_k p_k (log p_k)^2 - (sum_k p_k log p_k)^2 it would have if the
    labels were drawn from p. ``brier`` is mean sum_k (p_k - 1[y = k])^2
    (twice the binary Brier score when K = 2) and ``nll`` mean -log p_y.

    Attributes
    ----------
    n_classes : int
        K.
    classwise_ece : float
        Mean over classes of the binary ECE of column k against 1[y = k]
        (NaN if the class-wise state was not filled).
    classes : dict of arrays, length K
        ``class, support`` (rows with that label), ``mean_prob`` (mean p_k),
        ``frequency`` (support / n), ``ece, esce, mce`` of the class.
    classwise_ece_debiased : float
        The debiased L2 error of Kumar et al. (2019), marginal over classes
        (uncertainty-calibration's ``mode="marginal"``): the root of the mean
        over classes of max(0, debiased squared error of column k).
    sce : float
        Static Calibration Error (Nixon et al., 2019): class-wise ECE over the
        equal-width bins, (1/K) sum_k sum_m |B_mk|/n |freq - conf|; the same
        number as ``classwise_ece``.
    tace : float
        Thresholded Adaptive Calibration Error (Nixon et al., 2019); NaN unless
        asked for (``metrics=("tace",)``), and NaN with a note (:meth:`notes`)
        when no class probability is above the threshold.
    tace_threshold : float or None
        The threshold TACE was computed with (None when it was not asked for).
    class_bins : dict of (K, n_bins) arrays
        ``count`` (rows whose p_k is in the bin), ``n_true`` (of those, label
        k), ``conf`` (mean p_k), ``frequency`` (n_true / count); plus
        ``lower``/``upper`` edges. Empty cells are count 0 and NaN.

    Notes
    -----
    :meth:`notes` adds to the binary report's: (n, 2) predictions (a binary
    model's ``predict_proba``) are scored as K = 2 classes, top-label, not as
    the binary report of class 1 (which bins p_1 from 0 to 1: ``y_prob[:, 1]``);
    TACE undefined.

    Examples
    --------
    >>> import numpy as np, fastcal
    >>> y = np.array([0, 1, 2, 1])
    >>> p = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]])
    >>> r = fastcal.calibration_report(y, p, n_bins=2)
    >>> type(r).__name__, r.n_classes, round(r.ece, 4)
    ('MulticlassReport', 3, 0.15)
    """

    n_classes: int = 0
    classwise_ece: float = float("nan")
    classes: dict = field(default_factory=dict, repr=False)
    class_bins: dict = field(default_factory=dict, repr=False)
    classwise_ece_debiased: float = float("nan")
    sce: float = float("nan")
    tace: float = float("nan")
    tace_threshold: object = None

    _CERTAIN_WRONG = "the true class has probability exactly 0"

    @classmethod
    def from_multiclass_state(cls, counts, sums, totals, per_class, per_bin, *, n_classes,
                              edges, closed, n_omitted, strategy="uniform", eps=0.0,
                              class_state=None, **weights):
        """``class_state``: (class_counts, class_sums) of the class-wise state, for the
        class-wise Brier decomposition and debiased error (NaN without it).
        ``weights``: ``rows`` and ``w2`` of weighted state (see
        :meth:`CalibrationReport.from_state`; the class-wise state is then the
        weighted one, sums of w in place of counts)."""
        rep = CalibrationReport.from_state.__func__(
            cls, counts, sums, totals, edges=edges, closed=closed, n_omitted=n_omitted,
            observed="accuracy", strategy=strategy, eps=eps, **weights)
        rep.n_classes = int(n_classes)
        rep.classes = per_class or {}
        rep.class_bins = per_bin or {}
        if per_class and rep.n > 0:
            rep.classwise_ece = float(np.mean(per_class["ece"]))
            rep.sce = rep.classwise_ece
        # the top-label state has no sum of confidence**2: the decomposition is class-wise
        parts = dict.fromkeys(_measures.BRIER_PARTS, float("nan"))
        if class_state is not None and rep.n > 0 and len(totals) > 6:
            ccounts, csums = class_state
            kind = np.float64 if weights else np.int64
            got = _measures.binned(np.ascontiguousarray(ccounts, kind), 1, 1,
                                   np.ascontiguousarray(csums, np.float64)[:, :, None], 0,
                                   float(totals[5]), float(totals[6]))
            parts = {name: got[name] for name in _measures.BRIER_PARTS}
            rep.classwise_ece_debiased = got["debiased"]
        for name, x in parts.items():
            setattr(rep, name, x)
        return rep

    def notes(self):
        """The binary report's notes, then: K = 2 (how to get the binary report
        of class 1), TACE undefined."""
        out = super().notes()
        if self.n_classes == 2:
            out.append(TWO_CLASSES)
        if self.tace_threshold is not None and math.isnan(self.tace):
            out.append(f"TACE is undefined (NaN): no class probability is above tace_threshold "
                       f"= {self.tace_threshold:g}; lower the threshold (--tace-threshold on the "
                       f"command line, tace_threshold= in Python).")
        return out

    def to_dict(self):
        """Plain Python types: the binary report's keys plus n_classes,
        classwise_ece, ``classes`` (one dict per class, as ``bins``: rows here,
        columns in :attr:`classes`) and ``class_bins`` (each a K x n_bins
        matrix, as K lists of n_bins values, the layout of :attr:`class_bins`)."""
        out = super().to_dict()
        out["n_classes"] = self.n_classes
        out["classwise_ece"] = _clean(self.classwise_ece)
        for name in ("classwise_ece_debiased", "sce", "tace"):
            out[name] = _clean(getattr(self, name))
        out["tace_threshold"] = self.tace_threshold
        out["classes"] = [
            {col: _clean(self.classes[col][k]) for col in CLASS_COLUMNS}
            for k in range(len(self.classes.get("class", ())))
        ]
        out["class_bins"] = {
            col: [[_clean(x) for x in row] for row in self.class_bins[col]]
            for col in CLASS_BIN_COLUMNS if col in self.class_bins
        }
        return out

    def to_markdown(self, digits=4):
        """The confidence-bin table, then the per-class table."""
        cell = partial(table_cell, digits=digits)
        top = super().to_markdown(digits)
        if not self.classes:
            return top
        head = ["class", "support", "mean p", "frequency", "ECE", "ESCE", "MCE"]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for k in range(self.n_classes):
            vals = [str(k), cell(self.classes["support"][k]), cell(self.classes["mean_prob"][k]),
                    cell(self.classes["frequency"][k]), cell(self.classes["ece"][k]),
                    cell(self.classes["esce"][k]), cell(self.classes["mce"][k])]
            rows.append("| " + " | ".join(vals) + " |")
        return (f"Confidence (top-label) bins, K = {self.n_classes} classes:\n\n{top}\n\n"
                f"Per class (class-wise ECE = SCE = {cell(self.classwise_ece)}, debiased L2 = "
                f"{cell(self.classwise_ece_debiased) or 'n/a'}"
                f"{', TACE = ' + cell(self.tace) if not math.isnan(self.tace) else ''}):\n\n"
                + "\n".join(rows))

    def __str__(self):
        return self.to_markdown()

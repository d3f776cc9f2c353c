"""The report of soft labels (see :mod:`fastcal.soft` for the measures)."""

from dataclasses import dataclass

from fastcal.reports._json import clean as _clean
from fastcal.reports.provenance import HasProvenance

SUM_NAMES = ("sum_abs_entce", "sum_entce", "n_rank_match", "sum_distce", "sum_brier", "sum_nll",
             "sum_ecd", "sum_ecd_var", "sum_ecd_sq")


@dataclass
class SoftLabelReport(HasProvenance):
    """Soft-label calibration measures from one pass (see :mod:`fastcal.soft`).

    Attributes
    ----------
    n, n_omitted : int
    n_classes : int
    entce, entce_signed, rankcs, distce, brier, nll, ecd : float
    ecd_var : float
        Sum over samples of sum_k p_k (log p_k - sum_j p_j log p_j)^2, the
        variance of the summed ECD terms if one-hot labels were drawn from p.
    sums : dict
        The raw sums (mergeable by addition).
    """

    n: int
    n_omitted: int
    entce: float
    entce_signed: float
    rankcs: float
    distce: float
    brier: float
    nll: float
    ecd: float
    ecd_var: float
    sums: dict
    n_classes: int | None = None

    @classmethod
    def from_totals(cls, totals, n, n_omitted, n_classes=None):
        """The report of the soft-label sums ``totals`` over ``n`` counted rows."""
        mean = totals / n if n else totals * float("nan")
        sums = {name: float(x) for name, x in zip(SUM_NAMES, totals)}
        return cls(n=int(n), n_omitted=int(n_omitted), entce=float(mean[0]),
                   entce_signed=float(mean[1]), rankcs=float(mean[2]), distce=float(mean[3]),
                   brier=float(mean[4]), nll=float(mean[5]), ecd=float(mean[6]),
                   ecd_var=float(totals[7]), sums=sums, n_classes=n_classes)

    def to_dict(self):
        return {k: _clean(getattr(self, k)) for k in (
            "n", "n_omitted", "n_classes", "entce", "entce_signed", "rankcs", "distce", "brier",
            "nll", "ecd", "ecd_var")}

    def to_markdown(self):
        """A two-column table of the measures."""
        rows = [("n", self.n), ("omitted", self.n_omitted), ("classes", self.n_classes),
                ("ECD (soft, eq. 12)", self.ecd), ("mean abs(EntCE)", self.entce),
                ("EntCE (signed)", self.entce_signed), ("RankCS", self.rankcs),
                ("DistCE", self.distce), ("Brier", self.brier), ("cross-entropy", self.nll)]
        lines = ["| measure | value |", "|---|---:|"]
        for name, value in rows:
            text = f"{value:.6g}" if isinstance(value, float) else str(value)
            lines.append(f"| {name} | {text} |")
        return "\n".join(lines)

"""The result of one fill: scalars and the per-bin table."""

import json
import math
from dataclasses import dataclass, field

import numpy as np

from . import _validation as v

# Per-bin columns, in table order.
BIN_COLUMNS = ("lower", "upper", "count", "conf", "frac_pos", "accuracy", "ece", "esce",
               "ecd", "ecd_var")
SCALARS = ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll")


def _clean(x):
    """A JSON-safe scalar: NaN -> None, +-inf -> "inf" / "-inf", numpy -> Python."""
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    return x


@dataclass
class CalibrationReport:
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
        ecd, ecd_var``; empty bins have count 0 and NaN statistics.
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

    @classmethod
    def from_state(cls, counts, sums, totals, *, edges, closed, n_omitted, observed="frac_pos",
                   strategy="uniform", eps=0.0, lower=None, upper=None, ace=float("nan")):
        """Build a report from per-bin counts (n_bins, 3), sums (n_bins, 3) and totals (5,)."""
        v.check_choice("observed", observed, v.OBSERVED)
        count = counts[:, 0].astype(np.int64)
        n = int(count.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            c = count.astype(np.float64)
            conf = sums[:, 0] / c
            frac_pos = counts[:, 1] / c
            accuracy = counts[:, 2] / c
            target = frac_pos if observed == "frac_pos" else accuracy
            esce_b = target - conf
            ece_b = np.abs(esce_b)
            ecd_b = sums[:, 1] / c
        empty = count == 0
        for col in (conf, frac_pos, accuracy, esce_b, ece_b, ecd_b):
            col[empty] = np.nan
        if n > 0:
            w = c / n
            full = ~empty
            ece = float(np.sum(w[full] * ece_b[full]))
            esce = float(np.sum(w[full] * esce_b[full]))
            mce = float(np.max(ece_b[full]))
            ecd = float(np.sum(sums[:, 1]) / n)
            brier = float(totals[0] / n)
            nll = float(totals[1] / n)
        else:
            ece = esce = mce = ecd = brier = nll = float("nan")
        bins = {
            "lower": np.asarray(edges[:-1] if lower is None else lower, dtype=np.float64),
            "upper": np.asarray(edges[1:] if upper is None else upper, dtype=np.float64),
            "count": count,
            "conf": conf,
            "frac_pos": frac_pos,
            "accuracy": accuracy,
            "ece": ece_b,
            "esce": esce_b,
            "ecd": ecd_b,
            "ecd_var": sums[:, 2].copy(),
        }
        raw = {
            "n_pos": int(counts[:, 1].sum()),
            "n_correct": int(counts[:, 2].sum()),
            "sum_p": float(sums[:, 0].sum()),
            "sum_ecd": float(sums[:, 1].sum()),
            "sum_ecd_var": float(sums[:, 2].sum()),
            "sum_brier": float(totals[0]),
            "sum_nll": float(totals[1]),
            "sum_ecd_sq": float(totals[2]),
            "sum_brier_sq": float(totals[3]),
            "sum_nll_sq": float(totals[4]),
        }
        return cls(n=n, n_omitted=int(n_omitted), ece=ece, esce=esce, mce=mce, ace=float(ace),
                   ecd=ecd, brier=brier, nll=nll, ecd_var=raw["sum_ecd_var"], bins=bins,
                   n_bins=int(count.shape[0]), closed=closed, strategy=strategy,
                   observed=observed, eps=float(eps), sums=raw)

    # -- export ----------------------------------------------------------

    def to_dict(self):
        """Plain Python types; NaN becomes None and infinities the strings "inf"/"-inf"."""
        out = {name: _clean(getattr(self, name)) for name in SCALARS}
        out.update({
            "ecd_var": _clean(self.ecd_var),
            "n_bins": self.n_bins,
            "closed": self.closed,
            "strategy": self.strategy,
            "observed": self.observed,
            "eps": self.eps,
        })
        out["bins"] = [
            {col: _clean(self.bins[col][i]) for col in BIN_COLUMNS} for i in range(self.n_bins)
        ]
        return out

    def to_json(self, **kwargs):
        """The report as a JSON string (strict JSON: no NaN or Infinity literals)."""
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def to_markdown(self, digits=4):
        """The per-bin table and the weighted sums as a Markdown table."""
        fmt = f"{{:.{digits}f}}"

        def cell(x):
            if isinstance(x, (int, np.integer)):
                return str(int(x))
            x = float(x)
            return "" if math.isnan(x) else fmt.format(x)

        obs = "frac_pos" if self.observed == "frac_pos" else "accuracy"
        head = ["bin", "range", "count", "conf", obs, "ECE", "ESCE", "ECD"]
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
                    cell(self.bins["ecd"][i])]
            rows.append("| " + " | ".join(vals) + " |")
        rows.append("| " + " | ".join(["weighted sum", "", str(self.n), "", "", cell(self.ece),
                                         cell(self.esce), cell(self.ecd)]) + " |")
        tail = (f"\nn = {self.n}, omitted = {self.n_omitted}, MCE = {cell(self.mce)}, "
                f"ACE = {cell(self.ace) or 'n/a'}, Brier = {cell(self.brier)}, NLL = {cell(self.nll)}")
        return "\n".join(rows) + "\n" + tail

    def __str__(self):
        return self.to_markdown()

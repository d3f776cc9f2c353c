"""Soft-label state: nine float64 sums over rows (see :mod:`fastcal.soft`).

Each measure of the soft-label report is a mean over rows, so the state is
the row sums plus the row counts, and merging adds them: soft labels score
from files and Dask partitions like every other kind.
"""

import numpy as np

from fastcal import backends
from fastcal.inputs.batch import resolve
from fastcal.reports.soft_report import SoftLabelReport
from fastcal.accumulators import checks as ck
from fastcal.accumulators.base import Mergeable, check_start
from fastcal.accumulators.settings import state_settings
from fastcal._kernels import soft as ks


class SoftLabelAccumulator(Mergeable):
    """Mergeable sums of EntCE, RankCS, DistCE, Brier, cross-entropy and ECD
    against label distributions (y_true (n, K)), probabilities or logits; made
    from a :class:`~fastcal.accumulators.settings.Settings` (its bins are not
    used) or from keyword options (``takes``)."""

    kind = "soft"

    # the keyword options (soft labels have no bins, replicates or buckets)
    takes = frozenset(("eps", "logits", "renormalize", "nan_policy", "threads", "n_classes"))

    def __init__(self, settings=None, /, **options):
        settings = state_settings(settings, options, self.takes)
        self.eps = settings.eps
        self.logits = settings.logits
        self.renormalize = settings.renormalize
        self.nan_policy = settings.nan_policy
        self.threads = settings.threads
        self.n_classes = settings.n_classes
        self.checks = ck.multiclass_table(self.logits, self.renormalize, soft=True)
        self.totals = np.zeros(ks.N_SOFT, np.float64)
        self.n_rows = 0
        self.n_omitted = 0

    @property
    def n(self):
        """Rows counted (omitted ones excluded)."""
        return self.n_rows - self.n_omitted

    def update(self, y_true, y_prob, *, start=None, device=None):
        """Add label distributions (n, K) and (n, K) predictions; returns self
        (``device="cuda"`` is refused: soft labels have no GPU kernel)."""
        batch = resolve(y_true, y_prob, logits=self.logits, device=device)
        return self.update_batch(batch, start=start)

    def update_batch(self, batch, *, start=None):
        if batch.kind != "soft":
            msg = (f"y_true must have shape (n_samples, n_classes) holding label distributions; "
                   f"got shape {batch.y.shape}")
            raise ValueError(msg)
        t, p = batch.y, batch.p
        row0 = self.n_rows if start is None else check_start(start)
        k = p.shape[1]
        if self.n_classes is not None and k != self.n_classes:
            msg = (f"y_prob has {k} columns but this accumulator holds {self.n_classes}-class "
                   f"soft-label state; every update needs shape (n, {self.n_classes})")
            raise ValueError(msg)
        totals, checks = backends.of(batch).fill(self, batch)
        ck.raise_for(self.checks, checks, self.nan_policy, row0, **batch.context())
        self.n_classes = k
        self.totals += totals
        self.n_omitted += ck.omitted(self.checks, checks)
        self.n_rows += p.shape[0]
        return self

    def _check_compatible(self, other):
        self._check_type(other, "SoftLabelAccumulator")
        if (self.eps, self.logits, self.renormalize) != (other.eps, other.logits,
                                                         other.renormalize):
            msg = ("cannot merge soft-label accumulators with different eps, logits or "
                   f"renormalize: {self!r} and {other!r}")
            raise ValueError(msg)
        if None not in (self.n_classes, other.n_classes) and self.n_classes != other.n_classes:
            msg = ("cannot merge accumulators with different numbers of classes: "
                   f"{self.n_classes} and {other.n_classes}")
            raise ValueError(msg)

    def _add(self, other):
        self.n_classes = self.n_classes or other.n_classes
        self.totals += other.totals
        self.n_rows += other.n_rows
        self.n_omitted += other.n_omitted

    def report(self, *, observed="frac_pos", ci=None):
        """The :class:`~fastcal.reports.soft_report.SoftLabelReport` so far
        (``observed`` has no meaning without bins; ``ci`` is refused)."""
        if ci is not None:
            msg = "confidence intervals (ci=) are not available for soft labels"
            raise ValueError(msg)
        return SoftLabelReport.from_totals(self.totals, self.n, self.n_omitted, self.n_classes)

    def describe(self):
        return f"n={self.n}, n_classes={self.n_classes}"

    def __repr__(self):
        return f"SoftLabelAccumulator({self.describe()})"

"""Soft-label state: nine float64 sums over rows (see :mod:`fastcal.soft`).

Each measure of the soft-label report is a mean over rows, so the state is
the row sums plus the row counts, and merging adds them: soft labels score
from files and Dask partitions like every other kind.
"""

from fastcal import backends
from fastcal.accumulators import checks as ck
from fastcal.accumulators.base import Mergeable, check_start
from fastcal.accumulators.settings import state_settings
from fastcal.backends.layout import LAYOUTS
from fastcal.backends.spec import FillSpec
from fastcal.reports.soft_report import SoftLabelReport


class SoftLabelAccumulator(Mergeable):
    """Mergeable sums of EntCE, RankCS, DistCE, Brier, cross-entropy and ECD
    against label distributions (y_true (n, K)), probabilities or logits; made
    from a :class:`~fastcal.accumulators.settings.Settings` (its bins are not
    used) or from keyword options (``takes``)."""

    kind = "soft"
    layout = LAYOUTS["soft"]

    # the keyword options (soft labels have no bins, replicates or buckets)
    takes = frozenset(("eps", "logits", "renormalize", "nan_policy", "threads", "n_classes"))

    def __init__(self, settings=None, /, **options):
        settings = state_settings(settings, options, self.takes)
        self.spec = FillSpec.of(settings, self.kind)
        self.n_classes = settings.n_classes
        self.checks = ck.multiclass_table(self.logits, self.renormalize, soft=True)
        self.totals = self.layout[0].zeros(self._dims())
        self.n_rows = 0
        self.n_omitted = 0

    eps = property(lambda self: self.spec.eps)
    logits = property(lambda self: self.spec.logits)
    renormalize = property(lambda self: self.spec.renormalize)
    nan_policy = property(lambda self: self.spec.nan_policy)
    threads = property(lambda self: self.spec.threads)

    def _upgrade(self, state):
        # pickled before its spec: its options were attributes
        if "spec" not in state:
            options = {name: state.pop(name) for name in ("eps", "logits", "renormalize",
                                                          "nan_policy", "threads")
                       if name in state}
            state["spec"] = FillSpec("soft", **options)
        return state

    @property
    def n(self):
        """Rows counted (omitted ones excluded)."""
        return self.n_rows - self.n_omitted

    def update(self, y_true, y_prob, *, start=None, device=None):
        """Add label distributions (n, K) and (n, K) predictions; returns self
        (``device="cuda"`` is refused: soft labels have no GPU kernel)."""
        batch = backends.resolve(y_true, y_prob, logits=self.logits, device=device)
        return self.update_batch(batch, start=start)

    def update_batch(self, batch, *, start=None):
        if batch.kind != "soft":
            msg = (f"y_true must have shape (n_samples, n_classes) holding label distributions; "
                   f"got shape {batch.y.shape}")
            raise ValueError(msg)
        p = batch.p
        row0 = self.n_rows if start is None else check_start(start)
        k = p.shape[1]
        if self.n_classes is not None and k != self.n_classes:
            msg = (f"y_prob has {k} columns but this accumulator holds {self.n_classes}-class "
                   f"soft-label state; every update needs shape (n, {self.n_classes})")
            raise ValueError(msg)
        filled = backends.of(batch).fill(batch, self.spec)
        checks = filled["checks"]
        ck.raise_for(self.checks, checks, self.nan_policy, row0, **batch.context())
        self.n_classes = k
        self._add_state(filled)
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
        super()._add(other)

    def _check_arrays(self, got):
        if int(got["n_omitted"]) > int(got["n_rows"]):
            msg = (f"arrays['n_omitted'] is {int(got['n_omitted'])} but arrays['n_rows'] is "
                   f"{int(got['n_rows'])}; the rows omitted are some of the rows of a state")
            raise ValueError(msg)

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

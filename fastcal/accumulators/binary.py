"""Binary state: probabilities of class 1, or their logits (a subclass).

Per bin the count, positives and correct thresholded labels (int64) and the
sums of p, of the ECD terms and of their variance under calibration
(float64); globally the Brier and NLL sums and the sums of squares of the
intervals. Parts: bootstrap replicates, ACE's value buckets and the smooth
ECE grid. The arrays are declared in :data:`fastcal.backends.layout.LAYOUTS`.
"""

from fastcal.accumulators import checks as ck
from fastcal.accumulators.base import Binned
from fastcal.accumulators.settings import BINNED, state_settings
from fastcal.backends.layout import LAYOUTS
from fastcal.reports.report import CalibrationReport, smooth_measures
from fastcal.reports.stats import check_ci


class BinaryAccumulator(Binned):
    """Mergeable per-bin state of binary probabilities, made from a
    :class:`~fastcal.accumulators.settings.Settings` or from keyword options
    (``takes``; see :class:`fastcal.CalibrationAccumulator`, the front door)."""

    kind = "binary"
    layout = LAYOUTS["binary"]
    checks = ck.BINARY
    logits = False
    renormalize = False
    classwise = False

    takes = BINNED  # the keyword options: the front door's, less those of K classes

    def __init__(self, settings=None, /, **options):
        settings = state_settings(settings, options, self.takes)
        self._init_binned(settings, self.logits, logits=self.logits)

    def _check_batch(self, batch):
        if batch.kind != self.kind:
            msg = (f"y_prob is {batch.kind} input (shape {tuple(batch.p.shape)}) but this "
                   f"accumulator holds {self.kind} state of {self.n_rows} rows")
            raise ValueError(msg)

    # -- merging ---------------------------------------------------------

    def _check_compatible(self, other):
        self._check_type(other, type(self).__name__)
        self._check_binned(other)

    # -- reading ---------------------------------------------------------

    def report(self, *, observed="frac_pos", ci=None):
        """The :class:`~fastcal.CalibrationReport` of everything added so far
        (ACE is NaN: it needs equal-mass bins, see fastcal.score)."""
        ci = check_ci(ci)
        counts, sums, totals, weights = self.report_state()
        rep = CalibrationReport.from_state(
            counts, sums, totals, edges=self.report_edges(), closed=self.closed,
            n_omitted=self.n_omitted, observed=observed,
            strategy="uniform" if self.edges is None else "edges", eps=self.eps, **weights)
        if ci is not None:
            rep.with_measures(rep.interval_measures(ci, *self.boot_state()))
        if self.smooth:
            rep.with_measures(smooth_measures(self.smooth_mass, self.smooth_resid))
        return rep

    def describe(self):
        boot = f", n_boot={self.n_boot}, seed={self.seed}" if self.n_boot else ""
        return f"n={self.n}, n_bins={self.n_bins}, closed={self.closed!r}{boot}"

    def __repr__(self):
        return f"{type(self).__name__}({self.describe()})"


class BinaryLogitAccumulator(BinaryAccumulator):
    """Binary state from logits of class 1: the sigmoid is taken inside the
    kernel (float64), never materialised; bins use float64 edges."""

    kind = "logits"
    layout = LAYOUTS["logits"]
    checks = ck.BINARY_LOGITS
    logits = True

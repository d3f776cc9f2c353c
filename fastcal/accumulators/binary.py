"""Binary state: probabilities of class 1, or their logits (a subclass).

Per bin the count, positives and correct thresholded labels (int64) and the
sums of p, of the ECD terms and of their variance under calibration
(float64); globally the Brier and NLL sums and the sums of squares of the
intervals. Parts: bootstrap replicates and ACE's value buckets.
"""

import numpy as np

from fastcal.inputs import validation as v
from fastcal.inputs.batch import resolve
from fastcal.accumulators import checks as ck
from fastcal.accumulators.base import Binned, Bootstrap, ValueBuckets, check_start
from fastcal.accumulators.equal_mass import ranking_pair
from fastcal._kernels import binary as kb
from fastcal._kernels import logits as kl

# Below this many rows one thread is faster than starting the thread pool.
_PARALLEL_MIN_ROWS = 200_000


class BinaryAccumulator(Binned):
    """Mergeable per-bin state of binary probabilities (see
    :class:`fastcal.CalibrationAccumulator`, the front door, for the options)."""

    kind = "binary"
    checks = ck.BINARY
    n_classes = None
    logits = False
    renormalize = False
    classwise = False

    def __init__(self, *, n_bins=10, edges=None, closed="left", nan_policy="raise", eps=None,
                 threads=None, n_boot=0, seed=0, ace_buckets=0, with_logs=True):
        self._init_bins(n_bins, edges, closed, eps, nan_policy, threads, self.logits)
        self.counts, self.sums, self.totals, _ = kb.new_state(self.n_bins)
        self.boot = Bootstrap(n_boot, seed, self.n_bins)
        self.buckets = ValueBuckets(ace_buckets)
        self.with_logs = bool(with_logs)  # False: binned metrics only (no logarithms)

    def update(self, y_true, y_prob, *, start=None):
        """Add one chunk of labels and probabilities; returns self (see
        :meth:`fastcal.CalibrationAccumulator.update`)."""
        return self.update_batch(resolve(y_true, y_prob, logits=self.logits), start=start)

    def update_batch(self, batch, *, start=None):
        """``update`` with a batch resolved by :func:`fastcal.inputs.batch.resolve`."""
        if batch.kind != self.kind:
            msg = (f"y_prob is {batch.kind} input (shape {batch.p.shape}) but this accumulator "
                   f"holds {self.kind} state of {self.n_rows} rows")
            raise ValueError(msg)
        row0 = self.n_rows if start is None else check_start(start)
        counts, sums, totals, checks = self._fill(batch.y, batch.p, row0)
        self._add_fill(counts, sums, totals, checks, batch.p.shape[0])
        return self

    def _fill(self, y, p, row0):
        """One chunk's state; ACE's buckets and the bootstrap are filled here
        (the state is left unchanged on invalid input)."""
        self._fix_dtype(p.dtype)
        edges, uniform = self.kernel_edges(p.dtype)
        counts, sums, totals, checks, *fine = fill(
            y, p, edges, uniform, self.closed == "right", self.nan_policy == "omit",
            self.eps, self.with_logs, self.threads, self.ace_buckets)
        ck.raise_for(self.checks, checks, self.nan_policy, row0, p=p)
        self.boot.fill(y, p, row0, edges, uniform, self.closed == "right", self.threads)
        if fine:
            self.buckets.counts += fine[0]
            self.buckets.p += fine[1]
        return counts, sums, totals, checks

    def _add_fill(self, counts, sums, totals, checks, n_rows):
        self.counts += counts
        self.sums += sums
        self.totals += totals
        self.n_omitted += ck.omitted(self.checks, checks)
        self.n_rows += n_rows

    def update_device(self, y, p, row0, host):
        """Add a chunk in GPU memory (see :meth:`fastcal.CalibrationAccumulator.update_device`):
        ``y`` and ``p`` are device (or host) arrays, ``host()`` copies them to the host."""
        from fastcal import cuda

        dtype = cuda._dtype(p)
        self._fix_dtype(dtype)
        edges, uniform = self.kernel_edges(dtype)
        counts, sums, totals, checks = self._fill_device(cuda, y, p, edges, uniform)
        ck.raise_for(self.checks, checks, self.nan_policy, row0, p=lambda: host()[1])
        self._add_parts_device(y, p, row0, host, invalid=counts[self.n_bins, 0] > 0)
        self._add_fill(counts, sums, totals, checks, int(p.shape[0]))
        return self

    def _fill_device(self, cuda, y, p, edges, uniform):
        return cuda.fill_binary(y, p, edges, uniform, self.closed == "right",
                                self.nan_policy == "omit", self.eps, self.with_logs)

    def _add_parts(self, y, p, row0):
        """ACE's buckets and the bootstrap replicates of validated host rows."""
        self._add_ranked(y, p, row0, p.dtype)

    # -- merging ---------------------------------------------------------

    def _check_compatible(self, other):
        self._check_type(other, type(self).__name__)
        self._check_binned(other)

    def _add(self, other):
        self._add_binned(other)

    # -- reading ---------------------------------------------------------

    def report(self, *, observed="frac_pos", ci=None):
        """The :class:`~fastcal.CalibrationReport` of everything added so far
        (ACE is NaN: it needs equal-mass bins, see fastcal.score)."""
        from fastcal.reports.report import CalibrationReport
        from fastcal.reports.stats import check_ci

        ci = check_ci(ci)
        rep = CalibrationReport.from_state(
            self.counts[: self.n_bins], self.sums[: self.n_bins], self.totals,
            edges=self.report_edges(), closed=self.closed, n_omitted=self.n_omitted,
            observed=observed, strategy="uniform" if self.edges is None else "edges",
            eps=self.eps)
        if ci is not None:
            rep.set_intervals(ci, self.boot.counts, self.boot.sums)
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
    checks = ck.BINARY_LOGITS
    logits = True

    def _fill(self, y, z, row0):
        edges, uniform = self.kernel_edges(np.float64)
        counts, sums, totals, checks = kb.new_state(self.n_bins)
        kinds = np.array([kb.CHECK_NAN_P, kb.CHECK_RANGE_P, kb.CHECK_BAD_Y, kb.CHECK_NAN_Y,
                          kb.CHECK_OMITTED], np.int64)
        kl.fill_binary_logits_range(z, y, 0, z.shape[0], edges, uniform, self.closed == "right",
                                    self.eps, counts, sums, totals, checks, kinds)
        ck.raise_for(self.checks, checks, self.nan_policy, row0)
        self._add_parts(y, z, row0)
        return counts, sums, totals, checks

    def _fill_device(self, cuda, y, p, edges, uniform):
        edges, uniform = self.kernel_edges(np.float64)
        return cuda.fill_binary_logits(y, p, edges, uniform, self.closed == "right", self.eps)

    def _add_parts(self, y, z, row0):
        if not (self.ace_buckets or self.n_boot):
            return
        yr, x = ranking_pair(y, z, logits=True, eps=self.eps)
        super()._add_parts(yr, x, row0)


def fill(y, p, edges, uniform, right, omit, eps, with_logs, threads, n_fine=0):
    """Run the fill kernel on validated arrays; serial for small inputs.

    With ``n_fine`` > 0 the value-bucket statistics of ACE are filled too and
    returned as two more arrays (see ``binary.fill_range_fine``).
    """
    n = p.shape[0]
    n_threads = v.check_threads(threads)
    if n < _PARALLEL_MIN_ROWS or n_threads == 1:
        counts, sums, totals, checks = kb.new_state(edges.shape[0] - 1)
        rows = n_fine + 1 if n_fine else 0
        fine_counts = np.zeros((rows, kb.N_COUNTS), np.int64)
        fine_p = np.zeros(rows, np.float64)
        kb.fill_range_fine(p, y, 0, n, edges, uniform, right, omit, eps, with_logs,
                           counts, sums, totals, checks, fine_counts, fine_p)
        state = counts, sums, totals, checks, fine_counts, fine_p
    else:
        state = kb.fill_parallel_fine(p, y, edges, uniform, right, omit, eps, with_logs,
                                      n_threads, n_fine)
    return state if n_fine else state[:4]

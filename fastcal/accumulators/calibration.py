"""Mergeable per-bin state for binary calibration metrics."""

import numpy as np

from fastcal.inputs import validation as v
from fastcal.accumulators import classes as mc
from fastcal._kernels import binary as kb
from fastcal._kernels import multiclass as km
from fastcal._kernels import bootstrap as kboot
from fastcal._kernels import equal_mass as kem
from fastcal.accumulators import equal_mass as em
from fastcal.inputs.batch import resolve
from fastcal.inputs.binning import kernel_edges, uniform_edges

# Below this many rows one thread is faster than starting the thread pool.
_PARALLEL_MIN_ROWS = 200_000
# Below this many bootstrap draws (rows x replicates) the bootstrap fill runs serially.
_PARALLEL_MIN_DRAWS = 5_000_000


class CalibrationAccumulator:
    """Per-bin sufficient statistics, filled chunk by chunk and merged exactly.

    Every metric of :func:`fastcal.calibration_report` is read off this state:
    per bin the count, positives and correct thresholded labels (int64), and
    the sums of p, of the ECD terms and of their variance under perfect
    calibration (float64); globally the Brier and NLL sums and the sums of
    squares used for confidence intervals.

    Parameters
    ----------
    n_bins : int, default 10
        Number of uniform bins on [0, 1]. Ignored when ``edges`` is given.
    edges : array-like, optional
        Explicit bin edges, strictly increasing from 0 to 1.
    closed : {"left", "right"}, default "left"
        "left": bins [a, b) with the last bin [a, 1] (the paper's Table I).
        "right": bins (a, b] with the first bin [0, b] (scikit-learn's).
    nan_policy : {"raise", "omit"}, default "raise"
        "omit" drops a row whose probability or label is NaN and counts it
        in ``n_omitted``; "raise" raises ValueError.
    eps : float, optional
        Clip p to [eps, 1 - eps] in the ECD and NLL terms only (for a finite
        score when some p are exactly 0 or 1). Binning and Brier use raw p.
    threads : int, optional
        Threads for the parallel kernel (default: numba's current setting,
        which follows ``NUMBA_NUM_THREADS``).
    n_boot : int, default 0
        Bootstrap replicates kept for the ECE, ESCE and MCE intervals
        (``report(ci=0.95)``). Each row gets Poisson(1) weights that depend
        only on (seed, global row index, replicate), so the replicates are the
        same whatever the chunking. Costs about n_boot cheap passes per chunk.
    seed : int, default 0
        Seed of the bootstrap weights.
    logits : bool, default False
        ``y_prob`` holds logits: a sigmoid (1-D) or a row softmax (2-D) is
        applied inside the kernel, never materialised.
    renormalize : bool, default False
        Multi-class only: divide each row of ``y_prob`` by its sum instead of
        rejecting rows that do not sum to 1 within 1e-5.
    n_classes : int, optional
        Multi-class only: K. By default taken from the first (n, K) update;
        every later update must have K columns.
    classwise : bool, default True
        Multi-class only: also keep the per-class, per-bin state of
        class-wise ECE (K x n_bins counters, one more pass over each row).
    ace_buckets : int, default 0
        Also keep, per value bucket floor(x * ace_buckets) (a power of two),
        the rows, positives, correct labels and sum of x, x being p, the
        sigmoid of a logit or a K-class row's confidence: the statistics
        that ACE is read from with one more pass over the data
        (:func:`fastcal.accumulators.equal_mass.ace`). For binary probabilities they are
        filled by the same compiled pass.

    Notes
    -----
    ``a + b`` and ``a += b`` add the state arrays: counts exactly, float sums
    to rounding, so any chunking and merge order give the numbers of a single
    call on all the data to about 1e-12 relative. Instances pickle.

    Multi-class (n, K) updates fill the same per-bin arrays over confidence
    (max-probability) bins, "positive" meaning "argmax equals the label", plus
    the class-wise state; ``report()`` then returns a
    :class:`~fastcal.reports.multiclass_report.MulticlassReport`. Binary and
    multi-class chunks cannot be mixed in one accumulator. Bootstrap
    replicates (``n_boot``) are for binary probabilities only.

    The bootstrap weights of a row depend on its global index: ``update``
    numbers rows from ``n_rows`` on, or from ``start`` when given. When
    partitions are filled in separate accumulators and merged (Dask), pass
    each partition's global offset as ``start``; otherwise partitions reuse
    the same weights (the point estimates are unaffected, the intervals are
    not independent across partitions).

    Examples
    --------
    >>> import numpy as np, fastcal
    >>> acc = fastcal.CalibrationAccumulator(n_bins=10)
    >>> acc.update(np.array([0, 1, 1]), np.array([0.2, 0.7, 0.9]))
    CalibrationAccumulator(n=3, n_bins=10, closed='left')
    >>> round(acc.report().ece, 4)
    0.2
    """

    def __init__(self, *, n_bins=10, edges=None, closed="left", nan_policy="raise",
                 eps=None, threads=None, n_boot=0, seed=0, logits=False, renormalize=False,
                 n_classes=None, classwise=True, ace_buckets=0):
        from fastcal.reports.stats import check_count, check_seed

        self.closed = v.check_choice("closed", closed, v.CLOSED)
        self.nan_policy = v.check_choice("nan_policy", nan_policy, v.NAN_POLICIES)
        self.eps = v.check_eps(eps)
        self.threads = threads if threads is None else v.check_threads(threads)
        if edges is None:
            self.n_bins = v.check_n_bins(n_bins)
            self.edges = None
        else:
            self.edges = v.check_edges(edges)
            self.n_bins = self.edges.shape[0] - 1
        self.counts, self.sums, self.totals, _ = kb.new_state(self.n_bins)
        self.n_omitted = 0
        self.n_rows = 0  # rows passed to update, omitted ones included
        self.n_boot = check_count("n_boot", n_boot, 0)
        self.seed = check_seed(seed)
        self.boot_counts = np.zeros((self.n_boot, self.n_bins, 3), np.int64)
        self.boot_sums = np.zeros((self.n_boot, self.n_bins), np.float64)
        self.logits = bool(logits)
        self.renormalize = bool(renormalize)
        self.classwise = bool(classwise)
        self.n_classes = None
        self.class_counts = self.class_sums = None
        n_classes = v.check_n_classes(n_classes)
        if n_classes is not None:
            self._set_classes(n_classes)
        self.ace_buckets = _check_buckets(ace_buckets)
        rows = self.ace_buckets + 1 if self.ace_buckets else 0
        self.fine_counts = np.zeros((rows, kb.N_COUNTS), np.int64)
        self.fine_p = np.zeros(rows, np.float64)
        self._with_logs = True  # False: binned metrics only (no logarithms)
        self.edge_dtype = None  # float width of the data, fixed by the first update

    def _set_classes(self, k):
        self.n_classes = k
        _, _, _, self.class_counts, self.class_sums, _ = km.new_state(
            self.n_bins, k, self.classwise)

    # -- filling ---------------------------------------------------------

    def _kernel_edges(self, dtype):
        if self.edges is not None:
            return self.edges, False
        if self.logits or self.renormalize:
            dtype = np.float64  # probabilities are computed in float64
        return kernel_edges(self.n_bins, np.dtype(dtype).str), True

    def _bin_dtype(self, dtype):
        """Fix the dtype whose rounding of k / n_bins the uniform edges use: the
        first update's. A later chunk of another float width would bin by other
        edges (0.3 is not float32(0.3)), so it is refused, not mixed in."""
        if self.edges is not None or self.logits or self.renormalize:
            return
        name = np.dtype(dtype).name if np.dtype(dtype).kind == "f" else "float64"
        if self.edge_dtype is None:
            self.edge_dtype = name
        elif name != self.edge_dtype:
            msg = (f"y_prob is {name} but this accumulator holds {self.edge_dtype} data, binned "
                   f"by {self.edge_dtype} edges; cast every chunk to one dtype (e.g. "
                   "astype('float64')) so that all rows share the same bins")
            raise ValueError(msg)

    def update(self, y_true, y_prob, *, start=None):
        """Add one chunk of labels and probabilities; returns self.

        ``start`` is the global index of the chunk's first row (default: the
        rows seen so far); it numbers error messages and fixes the bootstrap
        weights.

        Raises
        ------
        ValueError
            On NaN (under nan_policy="raise"), infinite or out-of-range
            probabilities, labels other than 0/1, or mismatched lengths. The
            message gives the count and the first row, counted from the first
            row this accumulator was given. The state is unchanged on error.
            Multi-class: negative probabilities, rows not summing to 1,
            labels outside [0, K) (value and row), K differing between updates.
        """
        batch = resolve(y_true, y_prob, logits=self.logits,
                        multiclass=self.n_classes is not None)
        return self.update_batch(batch, start=start)

    def update_batch(self, batch, *, start=None):
        """``update`` with a batch already resolved by :func:`fastcal.inputs.batch.resolve`."""
        row0 = self.n_rows if start is None else _check_start(start)
        if batch.kind == "multiclass":
            return self._update_multiclass(batch.y, batch.p, row0)
        if batch.kind == "logits":
            return self._update_binary_logits(batch.y, batch.p, row0)
        if batch.kind != "binary":
            msg = f"{batch.kind} input has no CalibrationAccumulator state"
            raise ValueError(msg)
        y, p = batch.y, batch.p
        self._bin_dtype(p.dtype)
        edges, uniform = self._kernel_edges(p.dtype)
        counts, sums, totals, checks, *fine = fill(
            y, p, edges, uniform, self.closed == "right", self.nan_policy == "omit",
            self.eps, self._with_logs, self.threads, self.ace_buckets)
        raise_for_checks(checks, self.nan_policy, row0)
        self._fill_boot(y, p, row0)
        if fine:
            self.fine_counts += fine[0]
            self.fine_p += fine[1]
        self.counts += counts
        self.sums += sums
        self.totals += totals
        self.n_omitted += int(checks[kb.CHECK_OMITTED])
        self.n_rows += p.shape[0]
        return self

    def _update_multiclass(self, y, p, row0):
        self._bin_dtype(p.dtype)
        k = p.shape[1]
        if self.n_classes is None:
            if self.n_rows > 0:
                msg = (f"y_prob has shape {p.shape} but this accumulator already holds "
                       f"{self.n_rows} rows of binary (1-D) data")
                raise ValueError(msg)
        elif k != self.n_classes:
            msg = (f"y_prob has {k} columns but this accumulator holds {self.n_classes}-class "
                   f"state; every update needs shape (n, {self.n_classes})")
            raise ValueError(msg)
        edges, uniform = self._kernel_edges(p.dtype)
        counts, sums, totals, ccounts, csums, checks = mc.fill(
            y, p, edges, uniform, self.closed == "right", self.eps, self.logits,
            self.renormalize, self.classwise, self.threads, self._with_logs)
        mc.raise_for_checks(checks, self.nan_policy, y, p, self.logits, self.renormalize, row0)
        if self.n_classes is None:
            self._set_classes(k)
        self._add_ranked(y, p, row0)
        self.counts += counts
        self.sums += sums
        self.totals += totals
        self.class_counts += ccounts
        self.class_sums += csums
        self.n_omitted += int(checks[km.CHECK_OMITTED])
        self.n_rows += p.shape[0]
        return self

    def _update_binary_logits(self, y, z, row0):
        edges, uniform = self._kernel_edges(np.float64)
        counts, sums, totals, checks = kb.new_state(self.n_bins)
        kinds = np.array([kb.CHECK_NAN_P, kb.CHECK_RANGE_P, kb.CHECK_BAD_Y, kb.CHECK_NAN_Y,
                          kb.CHECK_OMITTED], np.int64)
        km.fill_binary_logits_range(z, y, 0, z.shape[0], edges, uniform, self.closed == "right",
                                    self.eps, counts, sums, totals, checks, kinds)
        if checks[kb.CHECK_RANGE_P] > 0:
            first = int(checks[kb.N_CHECK_KINDS + kb.CHECK_RANGE_P]) + row0
            msg = (f"y_prob (logits) contains {checks[kb.CHECK_RANGE_P]} infinite values (first "
                   f"at index {first}); logits must be finite")
            raise ValueError(msg)
        raise_for_checks(checks, self.nan_policy, row0)
        self._add_ranked(y, z, row0)
        self.counts += counts
        self.sums += sums
        self.totals += totals
        self.n_omitted += int(checks[kb.CHECK_OMITTED])
        self.n_rows += z.shape[0]
        return self

    def update_device(self, y_true, y_prob, *, start=None):
        """``update`` for predictions in GPU memory, filled there (fastcal.cuda).

        ``y_prob`` (and ``y_true``, or a host array) may be a torch CUDA tensor,
        a CuPy array or a Numba device array: the fill reads them in place and
        the state is the CPU's, so it merges, pickles and reports the same. The
        same checks give the same messages (the offending rows are copied to the
        host only to word them). ACE's bucket statistics and bootstrap
        replicates, when kept, are filled from a host copy (no GPU kernel yet).
        """
        from fastcal import cuda

        row0 = self.n_rows if start is None else _check_start(start)
        def on_device(name, x):  # host arrays are streamed to the GPU by the fill
            return cuda.as_device_array(name, x) if cuda.is_device_array(x) else \
                v.to_array(name, x)

        p, y = on_device("y_prob", y_prob), on_device("y_true", y_true)
        if p.ndim not in (1, 2) or y.ndim != 1 or y.shape[0] != p.shape[0]:
            msg = (f"y_true must be 1-D and y_prob 1-D or (n, K) with the same number of rows; "
                   f"got shapes {tuple(y.shape)} and {tuple(p.shape)}")
            raise ValueError(msg)
        dtype = cuda._dtype(p)
        self._bin_dtype(dtype)
        right = self.closed == "right"
        n = int(p.shape[0])

        def host():
            return tuple(a.copy_to_host() if hasattr(a, "copy_to_host") else a for a in (y, p))

        if p.ndim == 2:
            k = int(p.shape[1])
            if self.n_classes not in (None, k) or (self.n_classes is None and self.n_rows):
                msg = f"y_prob has {k} columns, which does not match this accumulator's state"
                raise ValueError(msg)
            edges, uniform = self._kernel_edges(dtype)
            counts, sums, totals, ccounts, csums, checks = cuda.fill_multiclass(
                y, p, edges, uniform, right, self.eps, self.logits, self.renormalize,
                self.classwise, self._with_logs)
            if checks[: km.N_CHECK_KINDS].any():
                yh, ph = host()
                mc.raise_for_checks(checks, self.nan_policy, yh, ph, self.logits,
                                    self.renormalize, row0)
            if self.n_classes is None:
                self._set_classes(k)
            self.class_counts += ccounts
            self.class_sums += csums
            omitted = int(checks[km.CHECK_OMITTED])
        else:
            if self.logits:
                edges, uniform = self._kernel_edges(np.float64)
                counts, sums, totals, checks = cuda.fill_binary_logits(
                    y, p, edges, uniform, right, self.eps)
            else:
                edges, uniform = self._kernel_edges(dtype)
                counts, sums, totals, checks = cuda.fill_binary(
                    y, p, edges, uniform, right, self.nan_policy == "omit", self.eps,
                    self._with_logs)
            if self.logits and checks[kb.CHECK_RANGE_P] > 0:
                first = int(checks[kb.N_CHECK_KINDS + kb.CHECK_RANGE_P]) + row0
                msg = (f"y_prob (logits) contains {checks[kb.CHECK_RANGE_P]} infinite values "
                       f"(first at index {first}); logits must be finite")
                raise ValueError(msg)
            raise_for_checks(checks, self.nan_policy, row0)
            omitted = int(checks[kb.CHECK_OMITTED])
        if self.ace_buckets or self.n_boot:
            yh, ph = host()
            if p.ndim == 1 and not self.logits:
                if self.ace_buckets:
                    kem.bucket_stats(ph, yh, self.nan_policy == "omit", self.fine_counts,
                                     self.fine_p)
                self._fill_boot(yh, ph, row0)
            else:
                self._add_ranked(yh, ph, row0)
        self.counts += counts
        self.sums += sums
        self.totals += totals
        self.n_omitted += omitted
        self.n_rows += n
        return self

    def _add_ranked(self, y, p, row0):
        """For validated logits or (n, K) rows: ACE's bucket statistics and the
        bootstrap replicates, over the values that binary probabilities have
        directly (the sigmoid of a logit; a row's confidence, its label being
        1 where the argmax is the true class). A second, light pass."""
        if not (self.ace_buckets or self.n_boot):
            return
        yr, x = em.ranking_pair(y, p, logits=self.logits, renormalize=self.renormalize,
                                eps=self.eps)
        if self.ace_buckets:
            kem.bucket_stats(x, yr, self.nan_policy == "omit", self.fine_counts, self.fine_p)
        self._fill_boot(yr, x, row0, p.dtype)

    def _fill_boot(self, y, p, row0, dtype=None):
        """Add validated rows to the bootstrap replicates (no-op when n_boot == 0);
        binned with the edges of ``dtype`` (default p's), those of the state."""
        if self.n_boot == 0 or p.shape[0] == 0:
            return
        edges, uniform = self._kernel_edges(p.dtype if dtype is None else dtype)
        right = self.closed == "right"
        n_threads = v.check_threads(self.threads)
        if n_threads == 1 or p.shape[0] * self.n_boot < _PARALLEL_MIN_DRAWS:
            kboot.boot_fill_range(p, y, row0, edges, uniform, right, self.seed, 0, self.n_boot,
                                  self.boot_counts, self.boot_sums)
        else:
            kboot.boot_fill_parallel(p, y, row0, edges, uniform, right, self.seed, n_threads,
                                     self.boot_counts, self.boot_sums)

    # -- merging ---------------------------------------------------------

    def _check_compatible(self, other):
        if not isinstance(other, CalibrationAccumulator):
            msg = f"can only merge a CalibrationAccumulator; got {type(other).__name__}"
            raise TypeError(msg)
        same_edges = (self.edges is None and other.edges is None and self.n_bins == other.n_bins) or (
            self.edges is not None and other.edges is not None
            and np.array_equal(self.edges, other.edges))
        if not same_edges or self.closed != other.closed or self.eps != other.eps:
            msg = ("cannot merge accumulators with different bins, closed side or eps: "
                   f"{self!r} and {other!r}")
            raise ValueError(msg)
        a, b = self.n_classes, other.n_classes
        if a != b and not ((a is None and self.n_rows == 0) or (b is None and other.n_rows == 0)):
            msg = f"cannot merge accumulators with different numbers of classes: {a} and {b}"
            raise ValueError(msg)
        if a is not None and b is not None and self.classwise != other.classwise:
            msg = "cannot merge accumulators with and without class-wise state (classwise=)"
            raise ValueError(msg)
        if None not in (self.edge_dtype, other.edge_dtype) and \
                self.edge_dtype != other.edge_dtype:
            msg = (f"cannot merge accumulators of {self.edge_dtype} and {other.edge_dtype} data: "
                   "their uniform bins have different edges; cast to one dtype")
            raise ValueError(msg)
        if self.ace_buckets != other.ace_buckets:
            msg = ("cannot merge accumulators with different ACE bucket statistics: "
                   f"ace_buckets={self.ace_buckets} and {other.ace_buckets}")
            raise ValueError(msg)
        if self.n_boot != other.n_boot or self.seed != other.seed:
            msg = ("cannot merge accumulators with different bootstrap settings: "
                   f"n_boot={self.n_boot}, seed={self.seed} and n_boot={other.n_boot}, "
                   f"seed={other.seed}")
            raise ValueError(msg)

    def __iadd__(self, other):
        self._check_compatible(other)
        if other.n_classes is not None:
            if self.n_classes is None:
                self.classwise = other.classwise
                self._set_classes(other.n_classes)
            self.class_counts += other.class_counts
            self.class_sums += other.class_sums
        self.counts += other.counts
        self.sums += other.sums
        self.totals += other.totals
        self.boot_counts += other.boot_counts
        self.boot_sums += other.boot_sums
        self.fine_counts += other.fine_counts
        self.fine_p += other.fine_p
        self.edge_dtype = self.edge_dtype or other.edge_dtype
        self.n_omitted += other.n_omitted
        self.n_rows += other.n_rows
        return self

    def __add__(self, other):
        self._check_compatible(other)
        out = self.copy()
        out += other
        return out

    def __radd__(self, other):
        """``0 + acc`` is a copy of acc, so that ``sum(accumulators)`` works."""
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool) and other == 0:
            return self.copy()
        return NotImplemented

    def copy(self):
        out = CalibrationAccumulator.__new__(CalibrationAccumulator)
        out.__dict__.update(self.__dict__)
        out.counts = self.counts.copy()
        out.sums = self.sums.copy()
        out.totals = self.totals.copy()
        out.boot_counts = self.boot_counts.copy()
        out.boot_sums = self.boot_sums.copy()
        out.fine_counts = self.fine_counts.copy()
        out.fine_p = self.fine_p.copy()
        if self.n_classes is not None:
            out.class_counts = self.class_counts.copy()
            out.class_sums = self.class_sums.copy()
        return out

    # -- reading ---------------------------------------------------------

    @property
    def n(self):
        """Number of samples counted (omitted rows excluded)."""
        return int(self.counts[: self.n_bins, 0].sum())

    def report_edges(self):
        """Bin edges as float64 (uniform: k / n_bins)."""
        if self.edges is not None:
            return self.edges.copy()
        return uniform_edges(self.n_bins, np.float64)

    def report(self, *, observed="frac_pos", ci=None):
        """The :class:`~fastcal.CalibrationReport` of everything added so far.

        ACE is not part of a streamed report (it needs equal-mass bins, i.e.
        the ranks of all the data); its field is NaN here. ``ci`` (e.g. 0.95)
        adds confidence intervals: analytic for ECD, Brier and NLL, bootstrap
        for ECE, ESCE and MCE (NaN unless ``n_boot > 0``).
        """
        from fastcal.reports.report import CalibrationReport
        from fastcal.reports.stats import check_ci

        ci = check_ci(ci)
        if self.n_classes is not None:
            rep = self._report_multiclass()
            if ci is not None:
                # top-label state: "correct" (column 2) is the positive label (column 1)
                boot = self.boot_counts.copy()
                boot[..., 2] = boot[..., 1]
                rep.set_intervals(ci, boot, self.boot_sums)
            return rep
        rep = CalibrationReport.from_state(
            self.counts[: self.n_bins], self.sums[: self.n_bins], self.totals,
            edges=self.report_edges(), closed=self.closed, n_omitted=self.n_omitted,
            observed=observed, strategy="uniform" if self.edges is None else "edges",
            eps=self.eps)
        if ci is not None:
            rep.set_intervals(ci, self.boot_counts, self.boot_sums)
        return rep

    def _report_multiclass(self):
        from fastcal.reports.multiclass_report import MulticlassReport

        edges = self.report_edges()
        per_class = per_bin = None
        if self.classwise:
            per_class, per_bin = mc.class_tables(self.class_counts, self.class_sums, edges)
        return MulticlassReport.from_multiclass_state(
            self.counts[: self.n_bins], self.sums[: self.n_bins], self.totals, per_class,
            per_bin, n_classes=self.n_classes, edges=edges, closed=self.closed,
            n_omitted=self.n_omitted, strategy="uniform" if self.edges is None else "edges",
            eps=self.eps)

    def __repr__(self):
        if self.n_classes is not None:
            return (f"CalibrationAccumulator(n={self.n}, n_classes={self.n_classes}, "
                    f"n_bins={self.n_bins}, closed={self.closed!r})")
        boot = f", n_boot={self.n_boot}, seed={self.seed}" if self.n_boot else ""
        return (f"CalibrationAccumulator(n={self.n}, n_bins={self.n_bins}, "
                f"closed={self.closed!r}{boot})")


def _check_buckets(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 or (
            n and (n & (n - 1) or n < 16 or n > 1 << 24)):
        msg = f"ace_buckets must be 0 or a power of two from 16 to 2**24; got {n!r}"
        raise ValueError(msg)
    return int(n)


def _check_start(start):
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
        msg = f"start must be an integer >= 0 (the global index of the chunk's first row); got {start!r}"
        raise ValueError(msg)
    return int(start)


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


def raise_for_checks(checks, nan_policy, offset=0):
    """Turn the kernel's invalid-input counts into a clear ValueError."""
    k = kb.N_CHECK_KINDS

    def first(kind):
        return int(checks[k + kind]) + offset

    if nan_policy == "raise" and checks[kb.CHECK_NAN_P] > 0:
        msg = (f"y_prob contains {checks[kb.CHECK_NAN_P]} NaN values (first at index "
               f"{first(kb.CHECK_NAN_P)}); pass nan_policy='omit' to drop them")
        raise ValueError(msg)
    if nan_policy == "raise" and checks[kb.CHECK_NAN_Y] > 0:
        msg = (f"y_true contains {checks[kb.CHECK_NAN_Y]} NaN values (first at index "
               f"{first(kb.CHECK_NAN_Y)}); pass nan_policy='omit' to drop them")
        raise ValueError(msg)
    if checks[kb.CHECK_RANGE_P] > 0:
        msg = (f"y_prob contains {checks[kb.CHECK_RANGE_P]} values outside [0, 1] or infinite "
               f"(first at index {first(kb.CHECK_RANGE_P)}); probabilities must be in [0, 1]")
        raise ValueError(msg)
    if checks[kb.CHECK_BAD_Y] > 0:
        msg = (f"y_true contains {checks[kb.CHECK_BAD_Y]} labels other than 0 and 1 (first at "
               f"index {first(kb.CHECK_BAD_Y)}); binary labels must be 0/1 or bool")
        raise ValueError(msg)

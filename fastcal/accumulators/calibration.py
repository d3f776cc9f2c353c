"""The public front door of the accumulators: it picks the state's class.

``CalibrationAccumulator(...)`` holds binary state until its first update
says otherwise: (n, K) rows make it multi-class and (n, K) label
distributions soft-label, while it is still empty. The classes behind it
(:class:`~fastcal.accumulators.binary.BinaryAccumulator`,
:class:`~fastcal.accumulators.binary.BinaryLogitAccumulator`,
:class:`~fastcal.accumulators.classes.MulticlassAccumulator`,
:class:`~fastcal.accumulators.soft.SoftLabelAccumulator`) each fill one
kind of input and takes the front door's
:class:`~fastcal.accumulators.settings.Settings` whole;
:func:`accumulator_for` makes one from a kind and keyword options.
"""

from fastcal import backends
from fastcal.accumulators.base import Binned, Mergeable, check_start
from fastcal.accumulators.binary import BinaryAccumulator, BinaryLogitAccumulator
from fastcal.accumulators.classes import MulticlassAccumulator
from fastcal.accumulators.settings import Settings
from fastcal.accumulators.soft import SoftLabelAccumulator
from fastcal.inputs.batch import declared_kind
from fastcal.inputs.binning import Bins

CLASSES = {"binary": BinaryAccumulator, "logits": BinaryLogitAccumulator,
           "multiclass": MulticlassAccumulator, "soft": SoftLabelAccumulator}


def accumulator_for(kind, **options):
    """A fresh accumulator of ``kind`` ("binary", "logits", "multiclass" or
    "soft") from keyword options of every kind (the front door's): those
    another kind takes but this one does not (n_bins for soft labels) are not
    used; a keyword no kind takes is a TypeError."""
    return CLASSES[kind](Settings.of(options))


class CalibrationAccumulator(Mergeable):
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
        A state of more than ``MAX_STATE_BYTES`` (1 GiB: these counters take
        K x n_bins x 24 bytes, bootstrap replicates n_boot x n_bins x 32) is
        refused in one line before it is allocated
        (:func:`fastcal.accumulators.settings.check_state_size`).
    ace_buckets : int, default 0
        Also keep, per value bucket floor(x * ace_buckets) (a power of two),
        the rows, positives, correct labels and sum of x, x being p, the
        sigmoid of a logit or a K-class row's confidence: the statistics
        that ACE is read from with one more pass over the data
        (:func:`fastcal.accumulators.equal_mass.ace`). For binary probabilities they are
        filled by the same compiled pass.
    with_logs : bool, default True
        False keeps the binned metrics only (ECE, ESCE, MCE): no logarithms.
    smooth : bool, default False
        Also keep the grid sums of smooth ECE (8,193 grid points: the
        interpolation weights and weighted residuals of p, a logit's sigmoid
        or a K-class row's confidence), so that ``report()`` has ``smece``
        and ``smece_sigma`` (:func:`fastcal.smece`).
    ecce : bool, default False
        Also keep ECCE's value buckets (65,536 of them, 2 MiB: per bucket
        the rows and the sums of y (1 - x), (1 - y) x and y - x, x being p, a
        logit's sigmoid or a K-class row's confidence), from which the
        driver reads ECCE exactly with one more pass over the few buckets
        that can hold its extremes (:func:`fastcal.ecce`,
        ``metrics=("ecce",)``).
    weighted : bool, default False
        Keep the weighted sums of rows with a ``sample_weight`` from the
        start (``update(..., sample_weight=w)``; rows without weights weigh
        1). Without it the first weighted update switches them on; with it
        the names of :meth:`to_arrays` are fixed before any data, as a
        framework that reduces the arrays by name needs (the torch metric's
        ``weighted=True``).

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
    replicates of logits and K classes are those of the (sigmoid or
    confidence, correct) pairs. A 2-D ``y_true`` (label distributions) makes
    a soft-label state whose report is a
    :class:`~fastcal.reports.soft_report.SoftLabelReport`.

    The state lives in one accumulator per kind (``.state``); this class
    picks it and is the name to use.

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
                 n_classes=None, classwise=True, ace_buckets=0, with_logs=True, smooth=False,
                 ecce=False, weighted=False):
        self._start(Settings(
            Bins(n_bins, edges, closed), nan_policy=nan_policy, eps=eps, threads=threads,
            n_boot=n_boot, seed=seed, logits=logits, renormalize=renormalize,
            n_classes=n_classes, classwise=classwise, ace_buckets=ace_buckets,
            with_logs=with_logs, smooth=smooth, ecce=ecce, weighted=weighted))

    @classmethod
    def of(cls, settings):
        """The accumulator of ``settings``, a
        :class:`~fastcal.accumulators.settings.Settings` (the driver's
        :meth:`fastcal.score.Options.accumulator`), kept as it is."""
        out = cls.__new__(cls)
        out._start(settings)
        return out

    def _start(self, settings):
        self._options = settings  # the state of another kind is made from the same settings
        self._state = CLASSES[declared_kind(logits=settings.logits,
                                            n_classes=settings.n_classes)](settings)

    @property
    def state(self):
        """The accumulator of one kind behind this front door."""
        return self._state

    def __getattr__(self, name):
        # everything else is the state's: counts, sums, n, n_classes, report_edges, ...
        if name.startswith("__") or name in ("_state", "_options"):
            raise AttributeError(name)
        return getattr(self._state, name)

    def _state_for(self, kind):
        """The state for a batch of ``kind``: an empty binary one is replaced."""
        state = self._state
        if state.kind == kind:
            return state
        if state.n_rows == 0 and state.kind in ("binary", "logits") and kind in (
                "multiclass", "soft"):
            self._state = CLASSES[kind](self._options)
            return self._state
        if state.kind in ("binary", "logits") and kind in ("multiclass", "soft"):
            msg = (f"y_prob has shape (n, K) but this accumulator already holds "
                   f"{state.n_rows} rows of binary (1-D) data")
            raise ValueError(msg)
        return state  # the state's own update refuses the batch with its message

    def update(self, y_true, y_prob, *, start=None, device=None, sample_weight=None):
        """Add one chunk of labels and probabilities; returns self.

        ``start`` is the global index of the chunk's first row (default: the
        rows seen so far); it numbers error messages and fixes the bootstrap
        weights. ``device``: None fills where ``y_prob`` is (a torch CUDA
        tensor, a CuPy or Numba device array on its GPU, in place), "cpu"
        copies GPU data to the host, "cuda" fills on the GPU and streams host
        data to it (see :func:`fastcal.backends.resolve`). Either way the
        state is the CPU's: it merges, pickles and reports the same, and the
        same checks give the same messages (offending GPU rows are copied to
        the host only to word them).

        ``sample_weight``: a weight per row (finite, >= 0, not all 0; filled
        on the host). The first weighted chunk makes the state weighted: the
        rows before it, and later chunks without weights, weigh 1 each, and
        the report's metrics are weighted means (see
        :func:`fastcal.calibration_report` and the user guide's page on
        sample weights; bootstrap replicates weigh a row by its Poisson(1)
        draw times w). Not with ``ace_buckets`` or ``smooth`` (refused in one
        line).

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
        return self.update_batch(self.resolve(y_true, y_prob, start=start, device=device,
                                              sample_weight=sample_weight), start=start)

    def ranking_options(self):
        """The options of the pair that the passes after the fill rank
        (``backends.of(batch).ranked(batch, options)``: ACE, ECCE, TACE)."""
        return dict(logits=self.logits, renormalize=self.renormalize, eps=self.eps)

    def resolve(self, y_true, y_prob, *, start=None, device=None, sample_weight=None):
        """The gate's batch of a chunk for this state (:func:`fastcal.backends.resolve`
        with this state's options), as ``update`` fills it: checked for shapes and
        types, not yet for values (``update_batch`` checks those as it fills)."""
        return backends.resolve(y_true, y_prob, logits=self._options.logits,
                                multiclass=self._state.kind == "multiclass", device=device,
                                sample_weight=sample_weight,
                                first_row=self.n_rows if start is None else check_start(start))

    def update_batch(self, batch, *, start=None):
        """``update`` with a batch already resolved by :func:`fastcal.backends.resolve`."""
        self._state_for(batch.kind).update_batch(batch, start=start)
        return self

    def update_device(self, y_true, y_prob, *, start=None):
        """``update(y_true, y_prob, start=start, device="cuda")``: the chunk is
        filled on the GPU (kept for code written before ``device=``)."""
        return self.update(y_true, y_prob, start=start, device="cuda")

    # -- merging ---------------------------------------------------------

    def _check_compatible(self, other):
        if not isinstance(other, (CalibrationAccumulator, *CLASSES.values())):
            msg = f"can only merge a CalibrationAccumulator; got {type(other).__name__}"
            raise TypeError(msg)
        theirs = getattr(other, "_state", other)
        mine = self._state
        if mine.kind != theirs.kind:
            empty = (mine.n_rows == 0 and mine.kind in ("binary", "logits")) or (
                theirs.n_rows == 0 and theirs.kind in ("binary", "logits"))
            if not empty:
                msg = (f"cannot merge {mine.kind} state ({mine.describe()}) with {theirs.kind} "
                       f"state ({theirs.describe()}): different numbers of classes or kinds "
                       "of input")
                raise ValueError(msg)
            if isinstance(mine, Binned) and isinstance(theirs, Binned):
                mine._check_binned(theirs)  # an empty state still has bins and parts
            return
        mine._check_compatible(theirs)

    def _add(self, other):
        theirs = getattr(other, "_state", other)
        if theirs.kind != self._state.kind:
            if theirs.n_rows == 0 and theirs.kind in ("binary", "logits"):
                return
            self._state = CLASSES[theirs.kind](self._options)
            self._state._check_compatible(theirs)
        self._state._add(theirs)

    def __setstate__(self, state):
        # pickled before the settings were one value: a dict of every keyword
        if isinstance(state.get("_options"), dict):
            state = dict(state, _options=Settings.of(state["_options"]))
        self.__dict__.update(state)

    def to_arrays(self):
        """The state's arrays (see :meth:`fastcal.accumulators.base.Mergeable.to_arrays`)."""
        return self._state.to_arrays()

    def add_arrays(self, arrays):
        """Add arrays of :meth:`to_arrays` to the state (see
        :meth:`fastcal.accumulators.base.Mergeable.add_arrays`); returns self."""
        self._state.add_arrays(arrays)
        return self

    def copy(self):
        out = CalibrationAccumulator.__new__(CalibrationAccumulator)
        out._options = self._options
        out._state = self._state.copy()
        return out

    # -- reading ---------------------------------------------------------

    def report(self, *, observed="frac_pos", ci=None):
        """The :class:`~fastcal.CalibrationReport` of everything added so far.

        ACE is not part of a streamed report (it needs equal-mass bins, i.e.
        the ranks of all the data); its field is NaN here. ``ci`` (e.g. 0.95)
        adds confidence intervals: analytic for ECD, Brier and NLL, bootstrap
        for ECE, ESCE and MCE (NaN unless ``n_boot > 0``). Multi-class state
        gives a MulticlassReport, soft labels a SoftLabelReport.
        """
        return self._state.report(observed=observed, ci=ci)

    def __repr__(self):
        return f"CalibrationAccumulator({self._state.describe()})"

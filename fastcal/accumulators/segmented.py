"""One accumulator per segment, plus the whole: exactly mergeable by key."""

import numpy as np

from fastcal import backends
from fastcal._kernels import segments as ks
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.accumulators.ecce import SegmentBuckets
from fastcal.accumulators.settings import MAX_STATE_BYTES, Settings, state_bytes
from fastcal.backends.cpu import PARALLEL_MIN_ROWS
from fastcal.backends.layout import EDGE_DTYPES
from fastcal.inputs.batch import check_hard_labels
from fastcal.inputs.convert import to_numpy
from fastcal.inputs.segments import (
    MAX_SEGMENTS,
    TooManySegments,
    check_max_segments,
    factorize,
    slices,
    sorted_keys,
    too_many,
)
from fastcal.inputs.validation import check_threads
from fastcal.reports.segmented import SegmentedReport


def _rows(x, index):
    return None if x is None else x[index]


def _host(name, x):
    """A host numpy array (the rows of a segment are taken by fancy indexing)."""
    return None if x is None else to_numpy(name, x)


class SegmentedAccumulator:
    """The state of :class:`~fastcal.CalibrationAccumulator` for every segment
    key and for the whole, filled chunk by chunk and merged by key.

    Parameters
    ----------
    max_segments : int, default 100,000
        More distinct keys than this (over all updates and merges) are refused
        in one line before the chunk that brings them is filled.
    ecce : bool, default False
        Keep every segment's ECCE value buckets (an
        :class:`~fastcal.accumulators.ecce.SegmentBuckets`: 1,024 a segment, 32
        KiB, fewer each past 2,048 segments, 64 MiB together at most), read by
        :meth:`ecce_state`; the segments' and the whole's ECCE take one more pass
        over the rows (:func:`fastcal.accumulators.ecce.exact`), which
        ``fastcal.score_file(..., by=..., metrics=("ecce",))`` makes. The
        segments' accumulators keep no ECCE buckets of their own.
    **options
        The options of :class:`~fastcal.CalibrationAccumulator` (``n_bins``,
        ``edges``, ``nan_policy``, ``n_boot``, ...), the same for every segment.

    Notes
    -----
    ``update`` factorizes the chunk's keys. Binary probabilities without
    weights, in a state that keeps only its bins (no replicates, value buckets
    or grids), fill every segment in one pass over the chunk: a state of
    segments x bins, one row per segment
    (:func:`fastcal._kernels.segments.fill_binary_segments`, in threads for
    large chunks), added to each segment's accumulator when the segments are
    read (``acc[key]``, ``items``, ``report``, ``copy``, a merge, a pickle);
    the whole gets the sum of the chunk's segments when every row is valid, and
    is filled from the chunk as it is otherwise, so that its checks name a bad
    row by its index in the chunk before any segment is touched. Other chunks
    fill the whole first, then are grouped by segment (a stable counting sort,
    so each segment's rows keep their order) and each segment's accumulator's
    ``update`` fills its rows. Memory: (segments + 1) x one accumulator's
    state: for 10 binary bins about 0.6 KiB of arrays a segment (about 1.4 KiB
    with the Python objects around them, as pickled; the one-pass state takes
    0.6 KiB more until it is read), and K x n_bins x 24 bytes more for K
    classes (the class-wise state); bootstrap replicates (n_boot x n_bins x 32
    bytes), ECCE buckets (2 MiB) or the smooth ECE grid take that much more per
    segment. ``max_segments`` bounds it.

    A segment numbers its rows in the order it is given them (its bootstrap
    weights depend on that number): accumulators filled from separate chunks
    and merged give the same point estimates as one update, but their
    bootstrap replicates are not those of one update.

    Merging (``a + b``, ``a += b``, ``sum``) adds the states of equal keys; a
    key on one side only is kept (a copy). Any chunking and merge order give
    the state of one update on all the rows, to float rounding. Instances pickle.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.accumulators.segmented import SegmentedAccumulator
    >>> acc = SegmentedAccumulator(n_bins=5)
    >>> _ = acc.update([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], by=["a", "b", "a", "b"])
    >>> sorted(acc.keys()), acc.overall.n, acc["a"].n
    (['a', 'b'], 4, 2)
    """

    def __init__(self, *, max_segments=MAX_SEGMENTS, ecce=False, **options):
        self.max_segments = check_max_segments(max_segments)
        self._options = options
        self.overall = CalibrationAccumulator(**options)
        self._segments = {}
        self.n_columns = None  # key columns: 1, or k for tuples of k; None before any update
        self._ecce = SegmentBuckets() if ecce else None

    @classmethod
    def of(cls, settings, *, max_segments=MAX_SEGMENTS, ecce=False):
        """The segmented accumulator of ``settings`` (a
        :class:`~fastcal.accumulators.settings.Settings`, as the driver makes)."""
        out = cls.__new__(cls)
        out.max_segments = check_max_segments(max_segments)
        out._options = settings
        out.overall = CalibrationAccumulator.of(settings)
        out._segments = {}
        out.n_columns = None
        out._ecce = SegmentBuckets() if ecce else None
        return out

    _pending = None  # the dense state of the segments not yet added (see _settle)
    _ecce = None  # the segments' ECCE buckets (ecce=True)

    def _fresh(self):
        if isinstance(self._options, Settings):
            return CalibrationAccumulator.of(self._options)
        return CalibrationAccumulator(**self._options)

    # -- filling -----------------------------------------------------------

    def update(self, y_true, y_prob, *, by, sample_weight=None, start=None,
               segment_starts=None):
        """Add one chunk; ``by`` holds a segment key per row (or a list of key
        columns: the key is then a tuple). Returns self.

        ``start``: the whole's number of the chunk's first row; ``segment_starts``
        ({key: rows of that segment before this chunk}): each segment's number of
        its first row here (a segment numbers its own rows; bootstrap weights hang
        on the number), for chunks filled apart (Dask partitions) whose replicates
        must be those of one update. Without it a segment goes on from the rows it
        has seen.

        The whole's accumulator checks the chunk first (its message names the
        row in the chunk); a ``by`` of another length, or keys that would make
        more than ``max_segments`` segments, are refused before anything is
        filled.
        """
        check_hard_labels(y_true)
        y, p = _host("y_true", y_true), _host("y_prob", y_prob)
        w = _host("sample_weight", sample_weight)
        n = p.shape[0] if p.shape else None  # the rows, for the length of by
        codes, keys = factorize(by, n, max_segments=self.max_segments,
                                threads=check_threads(self.overall.threads))
        self.check_keys(keys)
        batch = self.overall.resolve(y, p, sample_weight=w, start=start)
        if self._dense(batch):
            self._fill_dense(batch, codes, keys, start)
        else:
            self.overall.update_batch(batch, start=start)
            self._new_keys(keys)
            self._settle()
            order, bounds = slices(codes, len(keys))
            ys, ps, ws = y[order], p[order], _rows(w, order)  # each segment's rows: one slice
            for k, key in enumerate(keys):
                rows = slice(int(bounds[k]), int(bounds[k + 1]))
                first = None if segment_starts is None else segment_starts.get(key, 0)
                self._segments[key].update(ys[rows], ps[rows], sample_weight=_rows(ws, rows),
                                           start=first)
        if self._ecce is not None:  # after the fills, which refuse a bad chunk
            yr, xr = backends.of(batch).ranked(batch, self.ranking_options())
            self._ecce.fill(yr, xr, batch.w, codes, keys)
        return self

    def ranking_options(self):
        """The options of the ranked pair (``backends.of(batch).ranked``) whose
        values the ECCE buckets hold."""
        return self.overall.ranking_options()

    def ecce_state(self):
        """((counts, sums, totals) of the segments in the order of ``keys()``, the
        same of the whole), the ECCE value buckets kept with ``ecce=True``
        (:func:`fastcal.accumulators.ecce.exact` reads them); None without."""
        return None if self._ecce is None else self._ecce.state(list(self._segments))

    def ecce_rows(self):
        """A :class:`KeyRows` of the ECCE state: a chunk's keys to their rows there,
        for the passes after the fill (picklable and small: the keys, not the state)."""
        return KeyRows(self._ecce.index, self.max_segments)

    def _dense(self, batch):
        return one_pass(self.overall, batch)

    def _new_keys(self, keys):
        for key in keys:
            if key not in self._segments:
                self._segments[key] = self._fresh()

    def _fill_dense(self, batch, codes, keys, start):
        """Fill the chunk's segments in one pass, then the whole: the sum of the
        segments' states when every row is valid (the same state as its own fill,
        to rounding; its float width checked first), else its own fill, whose
        checks refuse the chunk (before any segment is touched) or omit its NaN
        rows. The segments' states are added to their accumulators when read
        (:meth:`_settle`)."""
        a = self.overall
        counts, sums, totals, bad, width = fill_one_pass(a, batch, codes, len(keys))
        n = batch.n
        if bad or n == 0 or a.edge_dtype not in (None, width):
            a.update_batch(batch, start=start)  # its checks, in its words
        else:
            one_hot = np.zeros(len(EDGE_DTYPES), np.int64)
            if width is not None:
                one_hot[EDGE_DTYPES.index(width)] = 1
            a.add_arrays({"counts": counts.sum(axis=0), "sums": sums.sum(axis=0),
                          "totals": totals.sum(axis=0),
                          "n_rows": np.array(n, np.int64),
                          "n_omitted": np.array(0, np.int64), "edge_dtype": one_hot})
        self._new_keys(keys)
        if self._pending is None:
            self._pending = _Dense(a.counts.shape, a.totals.shape[0])
        dense = self._pending
        rows = dense.rows_of(keys)
        dense.counts[rows] += counts
        dense.sums[rows] += sums
        dense.totals[rows] += totals
        dense.width = a.edge_dtype

    def _settle(self):
        """Add the dense state of the segments (if any) to their accumulators."""
        dense, self._pending = self._pending, None
        if dense is None:
            return
        width = np.zeros(len(EDGE_DTYPES), np.int64)
        if dense.width is not None:
            width[EDGE_DTYPES.index(dense.width)] = 1
        rows = dense.counts[:, :, 0].sum(axis=1)
        omitted = dense.counts[:, -1, 0]  # the trash row's
        for key, r in dense.index.items():
            if rows[r]:
                self._segments[key].add_arrays({
                    "counts": dense.counts[r], "sums": dense.sums[r],
                    "totals": dense.totals[r], "n_rows": np.array(rows[r], np.int64),
                    "n_omitted": np.array(omitted[r], np.int64), "edge_dtype": width})

    def check_keys(self, keys):
        """Refuse keys that would make more than ``max_segments`` segments, or keys of
        another number of columns than those already held (before any fill)."""
        new = sum(1 for k in keys if k not in self._segments)
        count = len(self._segments) + new
        if count > self.max_segments:
            raise TooManySegments(too_many(count, self.max_segments))
        self._check_memory(count)
        columns = _columns(keys[0]) if keys else None
        if columns is not None and self.n_columns not in (None, columns):
            msg = (f"by has {columns} key column(s); this accumulator holds keys of "
                   f"{self.n_columns}")
            raise ValueError(msg)
        if columns is not None:
            self.n_columns = columns

    def _check_memory(self, count):
        """Refuse segments whose states would take more than MAX_STATE_BYTES together."""
        a = self.overall
        if not hasattr(a, "n_bins"):  # soft labels: a few sums, no bins
            return
        parts = state_bytes(a.n_bins, a.n_classes, classwise=a.classwise, n_boot=a.n_boot,
                            ace_buckets=a.ace_buckets, smooth=a.smooth, ecce=a.ecce)
        each = sum(parts.values())
        if (count + 1) * each > MAX_STATE_BYTES:
            largest = max(parts, key=parts.get)
            msg = (f"by has {count:,} segments of {each / 1024:,.1f} KiB of state each (mostly "
                   f"{largest}): {(count + 1) * each / 2 ** 30:,.3g} GiB, more than the "
                   f"{MAX_STATE_BYTES / 2 ** 30:g} GiB a state may take "
                   "(fastcal.accumulators.settings.MAX_STATE_BYTES); use fewer segments, "
                   "replicates or bins")
            raise TooManySegments(msg)

    # -- reading -----------------------------------------------------------

    def __getitem__(self, key):
        self._settle()
        return self._segments[key]

    def __contains__(self, key):
        return key in self._segments

    def __len__(self):
        return len(self._segments)

    def __iter__(self):
        return iter(self._segments)

    def keys(self):
        return self._segments.keys()

    def items(self):
        self._settle()
        return self._segments.items()

    def report(self, *, observed="frac_pos", ci=None, correction="holm", alpha=0.05,
               columns=None):
        """The :class:`~fastcal.reports.segmented.SegmentedReport` of the state: each
        segment's report (``accumulator.report``: no ACE, a streamed report) and
        the whole's, with the segments' verdict after ``correction``. The segments
        come in the order of :func:`fastcal.calibration_report` with ``by``
        (sorted keys, nulls last), whatever order the chunks brought them in."""
        self._settle()
        reports = {k: self._segments[k].report(observed=observed, ci=ci)
                   for k in sorted_keys(self._segments)}
        return SegmentedReport(reports, self.overall.report(observed=observed, ci=ci),
                               correction=correction, alpha=alpha, columns=columns)

    # -- merging -----------------------------------------------------------

    def copy(self):
        self._settle()
        out = SegmentedAccumulator.__new__(SegmentedAccumulator)
        out.max_segments = self.max_segments
        out._options = self._options
        out.overall = self.overall.copy()
        out._segments = {k: a.copy() for k, a in self._segments.items()}
        out.n_columns = self.n_columns
        out._ecce = None if self._ecce is None else self._ecce.copy()
        return out

    def merge(self, other):
        """Add ``other``'s state by key (in place); returns self."""
        if not isinstance(other, SegmentedAccumulator):
            msg = f"can only merge a SegmentedAccumulator; got {type(other).__name__}"
            raise TypeError(msg)
        self.check_keys(list(other.keys()))
        if (self._ecce is None) != (other._ecce is None):
            msg = "can only merge segmented accumulators that both keep ECCE buckets or neither"
            raise ValueError(msg)
        self._settle()
        if self._ecce is not None:
            self._ecce.merge(other._ecce)
        self.overall += other.overall
        for key, acc in other.items():
            mine = self._segments.get(key)
            if mine is None:
                self._segments[key] = acc.copy()
            else:
                mine += acc
        return self

    def __iadd__(self, other):
        return self.merge(other)

    def __add__(self, other):
        return self.copy().merge(other)

    def __radd__(self, other):
        if isinstance(other, int) and other == 0:  # sum() starts from 0
            return self.copy()
        return NotImplemented

    def __getstate__(self):
        self._settle()
        return self.__dict__

    def __repr__(self):
        return f"SegmentedAccumulator(segments={len(self)}, n={self.overall.n})"


class KeyRows:
    """``rows(by, n)``: the rows of a chunk's segment keys ``by`` (``n`` rows) in a
    state whose ``index`` maps each key to its row; a key it does not hold is an
    error (the data changed between passes)."""

    def __init__(self, index, max_segments):
        self.index = dict(index)
        self.max_segments = max_segments

    def __call__(self, by, n):
        codes, keys = factorize(by, n, max_segments=self.max_segments)
        missing = [k for k in keys if k not in self.index]
        if missing:
            msg = (f"the data changed between passes: segment {missing[0]!r} was not there in "
                   "the first pass")
            raise ValueError(msg)
        rows = np.array([self.index[k] for k in keys], np.int64)
        return rows[codes] if rows.size else np.zeros(codes.shape[0], np.int64)


def one_pass(acc, batch):
    """True if the segments of ``batch`` (resolved by ``acc``, a
    :class:`~fastcal.CalibrationAccumulator`) are filled by one pass into a state of
    all of them (:func:`fill_one_pass`): binary probabilities (the gate's float32 or
    float64) without weights, in a state that keeps no part beyond the bins
    (replicates, value buckets, grids)."""
    return (batch.kind == "binary" and batch.w is None and acc.kind == "binary"
            and not acc.weighted and acc.n_boot == 0 and not acc.smooth and not acc.ecce
            and acc.ace_buckets == 0)


def fill_one_pass(acc, batch, codes, n_keys):
    """One pass of a batch that :func:`one_pass` takes into the state of ``n_keys``
    segments, row i into segment ``codes[i]``
    (:func:`fastcal._kernels.segments.fill_segments_threads`): (counts, sums,
    totals) of shape (n_keys, ...) as ``acc``'s own fill of each segment's rows
    keeps them (to rounding), the rows not valid (the caller's own fill must then
    check or omit them: they went to the trash row nb), and the float width of
    the edges (None for explicit edges)."""
    y, p = batch.host()
    edges, uniform = acc.kernel_edges(p.dtype)
    counts = np.zeros((n_keys, *acc.counts.shape), np.int64)
    sums = np.zeros((n_keys, *acc.sums.shape), np.float64)
    totals = np.zeros((n_keys, acc.totals.shape[0]), np.float64)
    # threads where the rows outnumber the cells each thread's own state adds
    big = p.shape[0] >= max(PARALLEL_MIN_ROWS, 2 * counts.size)
    bad = ks.fill_segments_threads(p, y, np.ascontiguousarray(codes, np.int64),
                                   np.arange(n_keys, dtype=np.int64), edges, uniform,
                                   acc.closed == "right", float(acc.eps or 0.0), acc.with_logs,
                                   counts, sums, totals, check_threads(acc.threads) if big else 1)
    width = None if acc.edges is not None else p.dtype.name
    return counts, sums, totals, bad, width


class _Dense:
    """The binary per-bin state of many segments, one row each: counts (S, nb + 1, 3),
    sums (S, nb + 1, 3) and totals (S, T), the omitted rows in the trash row nb;
    ``index`` maps a key to its row, ``width`` the float width of the data (the
    edges' rounding)."""

    def __init__(self, bins_shape, n_totals):
        self.bins_shape, self.n_totals = tuple(bins_shape), n_totals
        self.index = {}
        self.width = None
        self._grow(0)

    def _grow(self, n):
        old = getattr(self, "counts", None)
        fresh = dict(counts=np.zeros((n, *self.bins_shape), np.int64),
                     sums=np.zeros((n, *self.bins_shape), np.float64),
                     totals=np.zeros((n, self.n_totals), np.float64))
        for name, x in fresh.items():
            if old is not None:
                x[: old.shape[0]] = getattr(self, name)
            setattr(self, name, x)

    def rows_of(self, keys):
        """The rows of ``keys`` (int64), new keys getting new rows."""
        new = [k for k in keys if k not in self.index]
        if new:
            size = len(self.index) + len(new)
            if size > self.counts.shape[0]:
                self._grow(max(size, 2 * self.counts.shape[0]))
            for k in new:
                self.index[k] = len(self.index)
        return np.array([self.index[k] for k in keys], np.int64)


def _columns(key):
    return len(key) if isinstance(key, tuple) else 1


__all__ = ["SegmentedAccumulator", "fill_one_pass", "one_pass"]

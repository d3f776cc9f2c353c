"""Dask collections as a source of the driver: one accumulator per partition, on the workers.

Dask is imported inside the functions, so importing this module never needs it.
"""

from dataclasses import dataclass

import numpy as np

from fastcal import backends
from fastcal.accumulators import equal_mass as em
from fastcal.inputs.batch import check_hard_labels, lazy_kind
from fastcal.inputs.segments import (
    TooManySegments,
    check_key_shape,
    factorize,
    is_columns,
    key_column,
)
from fastcal.inputs.validation import show
from fastcal.sources.files import _reword, check_by, key_columns, resolve_columns, stack_columns
from fastcal.sources.readers import where as where_
from fastcal.sources.readers.base import (
    Chunk,
    _arrow_to_any,
    _arrow_to_numpy,
    _check_unique,
    _fail,
    _one_line,
    _widen,
)
from fastcal.sources.readers.parquet import _REMOTE_BUFFER, ParquetReader

ROWS_PER_PARTITION = 1 << 22


@dataclass
class _Source:
    """The partitions of one input: loaders for tasks, and how to name a partition.

    ``parts[k]`` is a tuple ``(loader, *args)``; ``loader(*args)`` runs on a
    worker and returns the numpy arrays (y_true, y_prob, sample_weight or None,
    segment keys or None) of partition k; the keys are one column, or a list of
    them (tuple keys), as :meth:`SegmentedAccumulator.update` takes them. Delayed
    objects among the args are computed by Dask first. ``reword(k, text)``
    turns the single-process message about partition k into the final one.
    """

    parts: list
    reword: object
    offsets: object = None  # global row of each partition's first row, if known
    n_classes: int | None = None  # K of (N, K) arrays, known from their shape; None otherwise
    weighted: bool = False  # the loaders return the rows' weights
    by: str | None = None  # the keys' argument as messages name it ("by='country'"); None: no keys


def _rows(y, p, w=None, *keys):
    return y, p, w, key_columns(keys)


def _by_label(by):
    """How messages name the key columns ``by``: ``by='country'``, ``by=['a', 'b']``."""
    return f"by={by[0]!r}" if len(by) == 1 else f"by={list(by)!r}"


def _frame_columns(frame, label_cols, prob_cols, weight=None, by=()):
    cols = list(frame.columns)
    for name in frame.columns.unique():
        # the partition holds the selected columns; a name the dataframe holds
        # k times comes k times
        k = cols.count(name)
        if k > 1:
            msg = (f"the dataframe has column {name!r} {k} times; expected each column name "
                   "once (rename the duplicates)")
            raise ValueError(msg)

    y = stack_columns([frame[c].to_numpy() for c in label_cols])
    p = stack_columns([frame[c].to_numpy() for c in prob_cols])
    w = None if weight is None else frame[weight].to_numpy()
    return y, p, w, key_columns(frame[c] for c in by)


def _read_row_groups(path, row_groups, label_cols, prob_cols, dtypes, verify_checksums=True,
                     constants=None, weight=None, by=()):
    """Columns (labels, probabilities, weights or None, keys or None) of some row
    groups of one file (a local path, or a URL that the worker opens with its own
    environment's credentials); ``dtypes`` holds each column's dtype over the
    dataset (``ParquetReader.dtype``), to which a narrower file is widened so that
    every partition is binned alike; ``constants``: {name: Arrow scalar} of the
    file's partition columns; ``weight``: the column of the rows' weights; ``by``:
    the columns of the segment keys, read as they are (as :func:`fastcal.score_file`
    reads them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    constants = constants or {}
    weights = [] if weight is None else [weight]
    names = [n for n in dict.fromkeys([*label_cols, *prob_cols, *weights, *by])
             if n not in constants]
    remote = where_.is_url(path)
    src = where_.open_file(path) if remote else path
    try:
        pf = pq.ParquetFile(src, page_checksum_verification=verify_checksums,
                            **({"pre_buffer": False, "buffer_size": _REMOTE_BUFFER}
                               if remote else {}))
    except (OSError, ArithmeticError, IndexError, KeyError, TypeError, ValueError) as exc:
        if remote:
            src.close()
        _fail(path, f"not a readable Parquet file: {_one_line(exc)}")
    _check_unique(path, names, pf.schema_arrow.names)
    try:
        table = pf.read_row_groups(row_groups, columns=names)
    except (OSError, ArithmeticError, IndexError, KeyError, TypeError, ValueError) as exc:
        text = (where_.reason(exc, where_.url_scheme(path)) if remote and isinstance(exc, OSError)
                else _one_line(exc))
        _fail(path, f"cannot read Parquet row groups {row_groups[0]}-{row_groups[-1]}: {text}")
    finally:
        if remote:
            pf.close()
            src.close()  # ParquetFile closes only what it opened itself

    def column(c):
        if c in constants:
            return pa.repeat(constants[c], table.num_rows)
        return table.column(c)

    def columns(names):
        return stack_columns([_widen(_arrow_to_numpy(column(c)), dtypes[c]) for c in names])

    w = None if weight is None else columns([weight])
    return (columns(label_cols), columns(prob_cols), w,
            key_columns(_arrow_to_any(column(c)) for c in by))


def _key_blocks(by, y_prob):
    """The delayed blocks of each key column of ``by`` (a column, or a list of them;
    dask arrays or in-memory arrays), chunked as the rows of ``y_prob``."""
    import dask.array as da

    n = int(y_prob.shape[0])
    blocks = []
    for col in (list(by) if is_columns(by) else [by]):
        if not isinstance(col, da.Array):
            col = da.from_array(key_column("by", col, n), chunks=(y_prob.chunks[0],))
        elif col.ndim == 1 and any(np.isnan(c) for c in col.chunks[0]):
            msg = ("by has unknown chunk sizes; call .compute_chunk_sizes() first so that its "
                   "chunks can be aligned with y_prob's")
            raise ValueError(msg)
        else:
            check_key_shape("by", col.shape, n)
            col = col.rechunk({0: y_prob.chunks[0]})
        blocks.append(col.to_delayed().ravel())
    return blocks


def _array_source(y_true, y_prob, sample_weight=None, by=None):
    import dask.array as da

    if not isinstance(y_true, da.Array) or not isinstance(y_prob, da.Array):
        msg = (f"y_true and y_prob must be dask arrays; got {type(y_true).__name__} and "
               f"{type(y_prob).__name__} (use score_dataframe for a dask dataframe)")
        raise ValueError(msg)
    kind = lazy_kind(y_true, y_prob)
    if any(np.isnan(c) for c in y_prob.chunks[0]) or any(np.isnan(c) for c in y_true.chunks[0]):
        msg = ("y_true and y_prob have unknown chunk sizes; call .compute_chunk_sizes() first "
               "so that partitions can be aligned")
        raise ValueError(msg)
    if y_true.shape[0] != y_prob.shape[0]:
        msg = f"y_true and y_prob have different lengths: {y_true.shape[0]} and {y_prob.shape[0]}"
        raise ValueError(msg)
    n_classes = None if kind in ("binary", "logits") else int(y_prob.shape[1])
    if n_classes is not None and len(y_prob.chunks[1]) > 1:
        y_prob = y_prob.rechunk({1: -1})  # one block holds all K classes of its rows
    if kind == "soft" and len(y_true.chunks[1]) > 1:
        y_true = y_true.rechunk({1: -1})
    if y_true.chunks[0] != y_prob.chunks[0]:
        y_true = y_true.rechunk({0: y_prob.chunks[0]})
    yb = y_true.to_delayed().ravel()
    pb = y_prob.to_delayed().ravel()
    wb = [None] * len(pb)
    if sample_weight is not None:
        if not isinstance(sample_weight, da.Array) or sample_weight.ndim != 1 \
                or sample_weight.shape[0] != y_prob.shape[0]:
            msg = (f"sample_weight must be a 1-D dask array of one weight per row "
                   f"({y_prob.shape[0]} rows); got {type(sample_weight).__name__} of shape "
                   f"{getattr(sample_weight, 'shape', None)}")
            raise ValueError(msg)
        wb = sample_weight.rechunk({0: y_prob.chunks[0]}).to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(y_prob.chunks[0])]).astype(np.int64)
    keys = []
    if by is not None:
        check_hard_labels(y_true)
        keys = _key_blocks(by, y_prob)

    def reword(k, text):
        return f"{text} [in chunk {k} of {len(pb)}, rows {starts[k]}-{starts[k + 1] - 1}]"

    parts = [(_rows, yb[k], pb[k], wb[k], *(kb[k] for kb in keys)) for k in range(len(pb))]
    return _Source(parts, reword, offsets=[int(a) for a in starts[:-1]], n_classes=n_classes,
                   weighted=sample_weight is not None, by=None if by is None else "by")


def _hard_labels(label_cols, by):
    """Refuse K label-distribution columns (soft labels) with ``by``, on the client."""
    if by and len(label_cols) > 1:
        check_hard_labels(np.empty((0, len(label_cols))))


def _frame_source(df, label, prob, weight=None, by=()):
    prob_cols, label_cols = resolve_columns("the dataframe", prob, label, list(df.columns))
    names = list(dict.fromkeys([*label_cols, *prob_cols, *([] if weight is None else [weight])]))
    missing = [c for c in names if c not in df.columns]
    if missing:
        msg = (f"the dataframe has no column {missing[0]!r}; its columns are "
               f"{list(df.columns)} (pass label= and prob= to name them)")
        raise ValueError(msg)
    by = check_by("the dataframe", by, names)
    missing = [c for c in by if c not in df.columns]
    if missing:
        msg = (f"{_by_label(by)} names no column {missing[0]!r} of the dataframe; its columns "
               f"are {list(df.columns)}")
        raise ValueError(msg)
    _hard_labels(label_cols, by)
    parts = df[[*names, *by]].to_delayed()

    def reword(k, text):
        return f"{text} [in partition {k} of {len(parts)}]"

    return _Source([(_frame_columns, parts[k], label_cols, prob_cols, weight, by)
                    for k in range(len(parts))], reword, weighted=weight is not None,
                   by=_by_label(by) if by else None)


def _dataset_source(path, label, prob, rows_per_partition, verify_checksums=True, where=None,
                    weight=None, by=()):
    """Partitions of whole row groups. The client reads each file's footer; the
    files, their order, the column checks and the messages are those of
    :func:`fastcal.score_file` (``where``: its filter on the partition columns;
    ``by``: the columns of the segment keys)."""
    import pyarrow as pa

    reader = ParquetReader(path, verify_checksums=verify_checksums, where=where)
    prob_cols, label_cols = resolve_columns(path, prob, label, reader.columns)
    weights = [] if weight is None else [weight]
    by = check_by(where_.shown(path), by, (*prob_cols, *label_cols, *weights))
    reader.check([*prob_cols, *label_cols, *weights, *by], by)
    _hard_labels(label_cols, by)
    # each column's widest dtype over the files: one rule for binning
    dtypes = {c: reader.dtype(c) for c in (*prob_cols, *label_cols, *weights)}
    parts, chunks = [], []
    first_row = 0
    keys = reader.partitions
    for i, f in enumerate(reader.files):
        meta = reader.footers[i]  # the footer the reader read
        constants = {n: pa.scalar(keys.values[i][k], keys.types[k])
                     for k, n in enumerate(keys.names) if n in (*label_cols, *prob_cols,
                                                                 *weights, *by)}
        group, rows, start = [], 0, 0
        for g in range(meta.num_row_groups):
            group.append(g)
            rows += meta.row_group(g).num_rows
            if rows >= rows_per_partition or g == meta.num_row_groups - 1:
                parts.append((_read_row_groups, f, group, label_cols, prob_cols, dtypes,
                              verify_checksums, constants, weight, by))
                chunks.append(Chunk((), f, first_row + start, start))
                start += rows
                group, rows = [], 0
        first_row += meta.num_rows

    def reword(k, text):
        return _reword(ValueError(text), chunks[k], prob, label, weight)

    return _Source(parts, reword, offsets=[c.start for c in chunks], weighted=weight is not None,
                   by=f"{where_.shown(path)}: {_by_label(by)}" if by else None)


def _length(loader, *args):
    return int(np.shape(loader(*args)[1])[0])


def _key_counts(max_segments, loader, *args):
    """(rows, {key: rows}) of a partition; None for the counts when its keys are more
    than ``max_segments`` (the fill refuses them)."""
    _, p, _, keys = loader(*args)
    n = int(np.shape(p)[0])
    try:
        codes, names = factorize(keys, n, max_segments=max_segments)
    except TooManySegments:
        return n, None
    counts = np.bincount(codes, minlength=len(names))
    return n, dict(zip(names, counts.tolist()))


def _segment_starts(counted):
    """Per partition, {key: rows of that key in the partitions before it}."""
    seen = {}
    out = []
    for _, counts in counted:
        if counts is None:
            return [None] * len(counted)
        out.append({k: seen.get(k, 0) for k in counts})
        for k, c in counts.items():
            seen[k] = seen.get(k, 0) + c
    return out


# ---------------------------------------------------------------------------
# Pass 1: fill one accumulator per partition, merge in order
# ---------------------------------------------------------------------------

@dataclass
class _Filled:
    """State of a contiguous run of partitions."""

    acc: object        # CalibrationAccumulator or SegmentedAccumulator, None once one failed
    n_rows: int        # rows of the run, bad and omitted rows included
    bad: int = -1      # first partition of the run whose update raised
    bad_offset: int = 0  # rows before that partition within the run
    # too many segments: the message of partition ``bad``'s own keys, or (bad < 0) of a merge
    refused: str | None = None


def _read(options, loader, *args):
    """A partition's (y_true, y_prob, sample_weight, keys), ``options.transform`` applied."""
    y, p, w, keys = loader(*args)
    if options.transform is not None:
        p = options.transform(p)
    return y, p, w, keys


def _filled(options, max_segments, start, device, y, p, w, keys, segment_starts=None):
    """A partition's accumulator: ``options.accumulator()``, or with ``max_segments``
    ``options.segmented(max_segments)`` keyed by the partition's keys; rows
    numbered from ``start`` (each segment's from ``segment_starts[key]``)."""
    if max_segments is None:
        return options.accumulator().update(y, p, start=start, device=device, sample_weight=w)
    return options.segmented(max_segments).update(y, p, by=keys, start=start, sample_weight=w,
                                                  segment_starts=segment_starts)


def _fill_part(index, options, start, max_segments, segment_starts, loader, *args):
    rows = _read(options, loader, *args)
    n = int(np.shape(rows[1])[0])
    try:
        acc = _filled(options, max_segments, start, options.device, *rows, segment_starts)
    except TooManySegments as exc:
        return _Filled(None, n, bad=index, refused=str(exc))
    except ValueError:
        # Located and reported with its global row once all offsets are known.
        return _Filled(None, n, bad=index)
    return _Filled(acc, n)


def _merge_filled(*runs):
    out = runs[0]
    for r in runs[1:]:
        n = out.n_rows + r.n_rows
        if out.bad >= 0:
            out = _Filled(None, n, out.bad, out.bad_offset, out.refused)
        elif r.bad >= 0:
            out = _Filled(None, n, r.bad, out.n_rows + r.bad_offset, r.refused)
        elif out.acc is None or r.acc is None:  # a merge refused too many segments
            out = _Filled(None, n, refused=out.refused or r.refused)
        else:
            try:
                out = _Filled(out.acc + r.acc, n)
            except TooManySegments as exc:
                out = _Filled(None, n, refused=str(exc))
    return out


def _message(options, offset, max_segments, loader, *args):
    """Re-run the failing partition's update with its global offset: the message
    of the single-process path, rows counted from the first row of all data."""
    try:
        _filled(options, max_segments, offset, None, *_read(options, loader, *args))
    except ValueError as exc:
        return str(exc)
    return "the partition raised on its first read but not on the second"


def _tree(tasks, merge, split_every):
    """Merge delayed results in a tree, keeping partition order."""
    import dask

    level = list(tasks)
    while len(level) > 1:
        level = [dask.delayed(merge, pure=True)(*level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    return level[0]


# ---------------------------------------------------------------------------
# Equal-mass bins: the partitions as parts of fastcal.accumulators.equal_mass
# ---------------------------------------------------------------------------

class _DaskParts:
    """Every pass of fastcal.accumulators.equal_mass is one task per partition, results in
    partition order (the tie counters of equal values need that order)."""

    def __init__(self, source, runner, pair, transform=None, weights=False, codes=None):
        self.transform = transform
        # with weights or codes: each part's weights (float64, empty when every row
        # weighs 1) and segment rows (``codes(keys, n)``, sent to the workers; empty
        # without) follow its ranked pair
        self.rows = (weights, codes)
        self.source = source
        self.weighted = source.weighted  # rows with weights (fastcal.score.check_weighted)
        self.runner = runner
        self.pair = pair  # options of the backend's ranked
        self.n_parts = len(source.parts)
        self.passes = 1
        self.gather = None  # the passes map over the parts

    def map(self, fn, common, per_part=None, combine=None):
        import dask

        task = dask.delayed(_on_part, pure=True)
        tasks = [task(fn, common, per_part[k] if per_part else (), self.pair, self.transform,
                      self.rows, *part)
                 for k, part in enumerate(self.source.parts)]
        self.passes += 1
        client = getattr(self.runner, "client", None)
        if combine is None or client is None or len(tasks) <= 2:
            return em.fold(self.runner.compute(tasks), combine)
        # fold the results in partition order as they come, one at a time, so
        # that the client never holds every partition's result (a histogram
        # of 2**22 buckets per partition for a million bins)
        futures = client.compute(tasks)
        acc = None
        try:
            for k, future in enumerate(futures):
                acc = combine(acc, future.result())
                futures[k] = None
                future.release()
        finally:
            left = [f for f in futures if f is not None]
            if left:
                client.cancel(left)
        return acc


def _on_part(fn, common, extra, pair, transform, rows, loader, *args):
    y, p, w, keys = loader(*args)
    if transform is not None:
        p = transform(p)
    weights, codes = rows
    batch = backends.resolve(y, p, logits=pair["logits"], soft=False,  # passes rank hard labels
                             sample_weight=w if weights else None)
    y, x = backends.of(batch).ranked(batch, pair)
    if weights or codes is not None:
        extra = (*extra, _NONE if batch.w is None else batch.w,
                 _NO_CODES if codes is None else codes(keys, batch.n))
    return fn(y, x, *common, *extra)


_NONE = np.zeros(0, np.float64)
_NO_CODES = np.zeros(0, np.int64)


class DaskSource:
    """Dask partitions as the driver's source: one accumulator per partition on
    the workers, merged in a tree in partition order."""

    prefix = ""
    what = "y_prob"
    over = "the partitions"  # what one pass reads (the messages of by=)
    empty = "y_true and y_prob are empty; need at least one sample"

    def __init__(self, source, runner, split_every, provenance=None):
        if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
            msg = f"split_every must be an integer >= 2; got {show(split_every)}"
            raise ValueError(msg)
        if not source.parts:
            msg = "the input has no partitions; need at least one sample"
            raise ValueError(msg)
        self.source = source
        self.runner = runner
        self.split_every = split_every
        self.provenance = dict(provenance or {})  # the dataset and cluster, as the caller names them

    def fill(self, opts):
        opts.accumulator()  # checks the options on the client
        return self._fill(opts, None)

    def fill_segments(self, opts, max_segments):
        """One pass into a :class:`~fastcal.accumulators.segmented.SegmentedAccumulator`
        per partition, keyed by its rows' keys, merged in the tree in partition
        order. More than ``max_segments`` distinct keys are refused in one line,
        raised here on the client: checked in each partition (its own keys,
        before they are filled) and at every merge of the tree (the keys of the
        partitions merged so far), so the count named is the first one past
        ``max_segments``, not always the total. A partition that fails (a bad
        value, or too many keys of its own) is reported before a merge's refusal;
        of several, the first in partition order."""
        opts.segmented(max_segments)  # checks the options on the client
        return self._fill(opts, max_segments)

    def _fill(self, opts, max_segments):
        import dask

        offsets = self.source.offsets
        n_parts = len(self.source.parts)
        starts = [None] * n_parts
        boot = opts.ci is not None and opts.n_boot
        if boot and max_segments is not None:
            # each segment numbers its rows (bootstrap weights hang on the numbers): one
            # light pass for each partition's rows of each key
            task = dask.delayed(_key_counts, pure=True)
            counted = self.runner.compute([task(max_segments, *part)
                                           for part in self.source.parts])
            starts = _segment_starts(counted)
            lengths = [n for n, _ in counted]
            offsets = [int(a) for a in np.concatenate([[0], np.cumsum(lengths)[:-1]])]
        elif offsets is None and boot:
            # bootstrap weights hang on global rows: one light pass for the lengths
            task = dask.delayed(_length, pure=True)
            lengths = self.runner.compute([task(*part) for part in self.source.parts])
            offsets = [int(a) for a in np.concatenate([[0], np.cumsum(lengths)[:-1]])]
        if offsets is None:
            offsets = [None] * n_parts
        self.transform = opts.transform
        fill = dask.delayed(_fill_part, pure=True)
        tasks = [fill(k, opts, offsets[k], max_segments, starts[k], *part)
                 for k, part in enumerate(self.source.parts)]
        run = self.runner.compute(_tree(tasks, _merge_filled, self.split_every))
        if run.refused is not None:
            # the keys' argument named: "by has 7 distinct segments" -> "by='g' has ..."
            text = run.refused
            msg = self.source.by + text[2:] if text.startswith("by ") else text
            raise ValueError(msg)
        if run.bad >= 0:
            offset = offsets[run.bad] if offsets[run.bad] is not None else run.bad_offset
            text = self.runner.compute(dask.delayed(_message, pure=True)(
                opts, offset, max_segments, *self.source.parts[run.bad]))
            msg = self.source.reword(run.bad, text)
            raise ValueError(msg)
        return run.acc, run.n_rows

    def known_rows(self):
        """None: partitions' lengths are known only once they are computed."""
        return None

    def known_classes(self):
        """K of (N, K) Dask arrays; None for dataframes and datasets, whose K is
        known only from the data (``fit_source(n_classes=K)`` gives it)."""
        return self.source.n_classes

    @property
    def weighted(self):
        """True if the rows carry weights (``sample_weight`` or a ``weight`` column)."""
        return self.source.weighted

    # the parts carry each row's weight and segment (fastcal.score._ecce, _segments_ecce)
    row_weights = True
    segment_parts = True

    def parts(self, pair, *, weights=False, codes=None):
        """The partitions again as :class:`_DaskParts`; with ``weights`` each
        part's weights and with ``codes`` (``codes(keys, n)``: a partition's
        segment keys to rows of a state, picklable) its segment rows follow its
        ranked pair."""
        return _DaskParts(self.source, self.runner, pair, getattr(self, "transform", None),
                          weights=weights, codes=codes)



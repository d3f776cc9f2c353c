"""Dask collections as a source of the driver: one accumulator per partition, on the workers.

Dask is imported inside the functions, so importing this module never needs it.
"""

from dataclasses import dataclass

import numpy as np

from fastcal import backends
from fastcal.accumulators import equal_mass as em
from fastcal.inputs.batch import lazy_kind
from fastcal.inputs.validation import show
from fastcal.sources.files import _reword, resolve_columns, stack_columns
from fastcal.sources.readers import where as where_
from fastcal.sources.readers.base import Chunk, _arrow_to_numpy, _check_unique, _fail, _one_line, _widen
from fastcal.sources.readers.parquet import _REMOTE_BUFFER, ParquetReader

ROWS_PER_PARTITION = 1 << 22


@dataclass
class _Source:
    """The partitions of one input: loaders for tasks, and how to name a partition.

    ``parts[k]`` is a tuple ``(loader, *args)``; ``loader(*args)`` runs on a
    worker and returns the numpy pair (y_true, y_prob) of partition k. Delayed
    objects among the args are computed by Dask first. ``reword(k, text)``
    turns the single-process message about partition k into the final one.
    """

    parts: list
    reword: object
    offsets: object = None  # global row of each partition's first row, if known
    n_classes: int | None = None  # K of (N, K) arrays, known from their shape; None otherwise
    weighted: bool = False  # the loaders return (y_true, y_prob, sample_weight)


def _pair(y, p, w=None):
    return (y, p) if w is None else (y, p, w)


def _frame_columns(frame, label_cols, prob_cols, weight=None):
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
    return (y, p) if weight is None else (y, p, frame[weight].to_numpy())


def _read_row_groups(path, row_groups, label_cols, prob_cols, dtypes, verify_checksums=True,
                     constants=None, weight=None):
    """Columns (labels, probabilities) of some row groups of one file (a local path,
    or a URL that the worker opens with its own environment's credentials);
    ``dtypes`` holds each column's dtype over the dataset (``ParquetReader.dtype``),
    to which a narrower file is widened so that every partition is binned alike;
    ``constants``: {name: Arrow scalar} of the file's partition columns; ``weight``:
    the column of the rows' weights, returned third."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    constants = constants or {}
    weights = [] if weight is None else [weight]
    names = [n for n in dict.fromkeys([*label_cols, *prob_cols, *weights]) if n not in constants]
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

    if weight is not None:
        return columns(label_cols), columns(prob_cols), columns([weight])
    return columns(label_cols), columns(prob_cols)


def _array_source(y_true, y_prob, sample_weight=None):
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

    def reword(k, text):
        return f"{text} [in chunk {k} of {len(pb)}, rows {starts[k]}-{starts[k + 1] - 1}]"

    parts = [(_pair, yb[k], pb[k]) if sample_weight is None else (_pair, yb[k], pb[k], wb[k])
             for k in range(len(pb))]
    return _Source(parts, reword, offsets=[int(a) for a in starts[:-1]], n_classes=n_classes,
                   weighted=sample_weight is not None)


def _frame_source(df, label, prob, weight=None):
    prob_cols, label_cols = resolve_columns("the dataframe", prob, label, list(df.columns))
    names = list(dict.fromkeys([*label_cols, *prob_cols, *([] if weight is None else [weight])]))
    missing = [c for c in names if c not in df.columns]
    if missing:
        msg = (f"the dataframe has no column {missing[0]!r}; its columns are "
               f"{list(df.columns)} (pass label= and prob= to name them)")
        raise ValueError(msg)
    parts = df[names].to_delayed()

    def reword(k, text):
        return f"{text} [in partition {k} of {len(parts)}]"

    return _Source([(_frame_columns, parts[k], label_cols, prob_cols, weight)
                    for k in range(len(parts))], reword, weighted=weight is not None)


def _dataset_source(path, label, prob, rows_per_partition, verify_checksums=True, where=None,
                    weight=None):
    """Partitions of whole row groups. The client reads each file's footer; the
    files, their order, the column checks and the messages are those of
    :func:`fastcal.score_file` (``where``: its filter on the partition columns)."""
    import pyarrow as pa

    reader = ParquetReader(path, verify_checksums=verify_checksums, where=where)
    prob_cols, label_cols = resolve_columns(path, prob, label, reader.columns)
    weights = [] if weight is None else [weight]
    reader.check([*prob_cols, *label_cols, *weights])
    # each column's widest dtype over the files: one rule for binning
    dtypes = {c: reader.dtype(c) for c in (*prob_cols, *label_cols, *weights)}
    parts, chunks = [], []
    first_row = 0
    keys = reader.partitions
    for i, f in enumerate(reader.files):
        meta = reader.footers[i]  # the footer the reader read
        constants = {n: pa.scalar(keys.values[i][k], keys.types[k])
                     for k, n in enumerate(keys.names) if n in (*label_cols, *prob_cols,
                                                                 *weights)}
        group, rows, start = [], 0, 0
        for g in range(meta.num_row_groups):
            group.append(g)
            rows += meta.row_group(g).num_rows
            if rows >= rows_per_partition or g == meta.num_row_groups - 1:
                parts.append((_read_row_groups, f, group, label_cols, prob_cols, dtypes,
                              verify_checksums, constants, weight))
                chunks.append(Chunk((), f, first_row + start, start))
                start += rows
                group, rows = [], 0
        first_row += meta.num_rows

    def reword(k, text):
        return _reword(ValueError(text), chunks[k], prob, label, weight)

    return _Source(parts, reword, offsets=[c.start for c in chunks], weighted=weight is not None)


def _length(loader, *args):
    return int(np.shape(loader(*args)[1])[0])


# ---------------------------------------------------------------------------
# Pass 1: fill one accumulator per partition, merge in order
# ---------------------------------------------------------------------------

@dataclass
class _Filled:
    """State of a contiguous run of partitions."""

    acc: object        # CalibrationAccumulator, None once a partition failed
    n_rows: int        # rows of the run, bad and omitted rows included
    bad: int = -1      # first partition of the run whose update raised
    bad_offset: int = 0  # rows before that partition within the run


def _fill_part(index, options, start, loader, *args):
    y, p, *w = loader(*args)
    if options.transform is not None:
        p = options.transform(p)
    acc = options.accumulator()
    n = int(np.shape(p)[0])
    try:
        acc.update(y, p, start=start, device=options.device, sample_weight=w[0] if w else None)
    except ValueError:
        # Located and reported with its global row once all offsets are known.
        return _Filled(None, n, bad=index)
    return _Filled(acc, n)


def _merge_filled(*runs):
    out = runs[0]
    for r in runs[1:]:
        if out.bad >= 0:
            out = _Filled(None, out.n_rows + r.n_rows, out.bad, out.bad_offset)
        elif r.bad >= 0:
            out = _Filled(None, out.n_rows + r.n_rows, r.bad, out.n_rows + r.bad_offset)
        else:
            out = _Filled(out.acc + r.acc, out.n_rows + r.n_rows)
    return out


def _message(options, offset, loader, *args):
    """Re-run the failing partition's update with its global offset: the message
    of the single-process path, rows counted from the first row of all data."""
    y, p, *w = loader(*args)
    if options.transform is not None:
        p = options.transform(p)
    acc = options.accumulator()
    try:
        acc.update(y, p, start=offset, sample_weight=w[0] if w else None)
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

    def __init__(self, source, runner, pair, transform=None):
        self.transform = transform
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
                      *part)
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


def _on_part(fn, common, extra, pair, transform, loader, *args):
    y, p = loader(*args)[:2]
    if transform is not None:
        p = transform(p)
    batch = backends.resolve(y, p, logits=pair["logits"], soft=False)  # passes rank hard labels
    y, x = backends.of(batch).ranked(batch, pair)
    return fn(y, x, *common, *extra)


class DaskSource:
    """Dask partitions as the driver's source: one accumulator per partition on
    the workers, merged in a tree in partition order."""

    prefix = ""
    what = "y_prob"
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
        import dask

        opts.accumulator()  # checks the options on the client
        offsets = self.source.offsets
        if offsets is None and opts.ci is not None and opts.n_boot:
            # bootstrap weights hang on global rows: one light pass for the lengths
            task = dask.delayed(_length, pure=True)
            lengths = self.runner.compute([task(*part) for part in self.source.parts])
            offsets = [int(a) for a in np.concatenate([[0], np.cumsum(lengths)[:-1]])]
        if offsets is None:
            offsets = [None] * len(self.source.parts)
        self.transform = opts.transform
        fill = dask.delayed(_fill_part, pure=True)
        tasks = [fill(k, opts, offsets[k], *part) for k, part in enumerate(self.source.parts)]
        run = self.runner.compute(_tree(tasks, _merge_filled, self.split_every))
        if run.bad >= 0:
            offset = offsets[run.bad] if offsets[run.bad] is not None else run.bad_offset
            text = self.runner.compute(dask.delayed(_message, pure=True)(
                opts, offset, *self.source.parts[run.bad]))
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

    def parts(self, pair):
        return _DaskParts(self.source, self.runner, pair, getattr(self, "transform", None))



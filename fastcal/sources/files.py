"""Files as a source of the driver: chunks read by a thread, rows named by file and global row."""

import os
import queue
import re
import threading

import numpy as np

from fastcal import backends
from fastcal.inputs.segments import TooManySegments
from fastcal.progress import Progress
from fastcal.sources.io import open_reader
from fastcal.sources.readers import where as where_


class _ChunkError:
    def __init__(self, exc):
        self.exc = exc


_END = object()


def _threaded(make_iter, depth=2):
    """Iterate ``make_iter()`` in a reader thread, at most ``depth`` chunks ahead.

    pyarrow decodes without the GIL, so reading the next chunk overlaps with
    scoring the current one. Errors in the reader are raised in the caller.
    """
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run():
        try:
            for item in make_iter():
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # handed to the caller, not lost in the thread
            put(_ChunkError(exc))

    t = threading.Thread(target=run, name="fastcal-reader", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, _ChunkError):
                raise item.exc
            yield item
    finally:
        stop.set()
        t.join()


def _where(chunk, global_row):
    """'at row R' with the file's own row number when a directory has several files."""
    local = global_row - chunk.start + chunk.file_start
    if local != global_row:
        return f"at row {global_row} (row {local} of this file)"
    return f"at row {global_row}"


def _reword(exc, chunk, prob, label, weight=None):
    """The core's message about arrays, reworded for a file: file, column names, row."""
    text = str(exc)
    text = text.replace("y_prob", f"column {prob!r}").replace("y_true", f"column {label!r}")
    if weight is not None:
        text = text.replace("sample_weight", f"weight column {weight!r}")
    text = re.sub(r"at index (\d+)", lambda m: _where(chunk, int(m.group(1))), text)
    text = text.replace("pass nan_policy='omit'", "use nan_policy='omit' (--nan-policy omit)")
    return f"{chunk.file}: {text} (rows counted from 0)"


def coalesced(chunks, chunk_rows):
    """The reader's ``chunks`` with consecutive small ones of a file joined, up to
    ``chunk_rows`` rows (a copy of their columns, in the reader thread).

    A format's own blocks can be smaller than a chunk: an Arrow writer's record
    batches (pyarrow's Feather: 131,072 rows at most), Parquet row groups of
    another writer. Each chunk costs the driver its call and the fill its threads'
    start, and a chunk under ``backends.cpu.PARALLEL_MIN_ROWS`` is filled on one
    thread. Chunks with a column other than a NumPy array (segment keys read as
    Arrow) are passed on as they are. Memory stays bounded by the chunk: the
    parts held and the joined chunk are at most ``chunk_rows`` rows each.
    """
    held, rows = [], 0
    for chunk in chunks:
        n = len(chunk.columns[0])
        small = n < chunk_rows and all(isinstance(c, np.ndarray) for c in chunk.columns)
        if held and (not small or rows + n > chunk_rows or chunk.file != held[0].file
                     or chunk.start != held[0].start + rows):
            yield _joined(held)
            held, rows = [], 0
        if not small:
            yield chunk
            continue
        held.append(chunk)
        rows += n
    if held:
        yield _joined(held)


def _joined(chunks):
    """One chunk of consecutive chunks of a file (itself when there is one)."""
    if len(chunks) == 1:
        return chunks[0]
    first = chunks[0]
    cols = tuple(np.concatenate(parts) for parts in zip(*(c.columns for c in chunks)))
    return type(first)(cols, first.file, first.start, first.file_start)


class _FileParts:
    """The chunks of a file source as the parts of fastcal.accumulators.equal_mass:
    every pass reads the file again (with the reader thread), in the same chunks;
    ``pair``: the options of the backend's ``ranked``."""

    def __init__(self, source, pair, weights=False, codes=None):
        self.source = source
        self.pair = pair
        self.n_parts = source.n_chunks  # None: parts read before any fill
        self.passes = 1
        self.gather = None  # the passes map over the parts
        # with weights or codes: each part's weights (float64, empty when every row
        # weighs 1) and segment rows (``codes(keys, n)``, empty without) come last
        self.weights, self.codes = weights, codes

    def map(self, fn, common, per_part=None, combine=None):
        src = self.source
        self.passes += 1
        label = f"{os.path.basename(src.path)} pass {self.passes}"
        bar = Progress(src.reader.n_rows, label=label, enabled=src.progress)
        chunks = src._chunks()
        results = []
        acc = None
        k = 0
        try:
            for chunk in chunks:
                p, y, w = src._arrays(chunk)
                if src.transform is not None:
                    p = src.transform(p)
                # the gate checks the chunk as the first pass did; the passes rank hard labels
                batch = backends.resolve(y, p, logits=self.pair["logits"], soft=False,
                                         sample_weight=w if self.weights else None)
                y, x = backends.of(batch).ranked(batch, self.pair)
                r = fn(y, x, *common, *(per_part[k] if per_part else ()),
                       *self._rows_extra(batch, chunk))
                if combine is None:
                    results.append(r)
                else:
                    acc = combine(acc, r)
                bar.update(p.shape[0])
                k += 1
        finally:
            chunks.close()
            bar.close()
        if self.n_parts is not None and k != self.n_parts:
            msg = f"{src.path}: the file changed between passes ({self.n_parts} chunks, then {k})"
            raise ValueError(msg)
        self.n_parts = k
        return results if combine is None else acc


    def _rows_extra(self, batch, chunk):
        if not self.weights and self.codes is None:
            return ()
        w = _NONE if batch.w is None else batch.w
        g = _NONE_CODES if self.codes is None else self.codes(self.source._keys(chunk),
                                                             batch.n)
        return w, g


_NONE = np.zeros(0, np.float64)
_NONE_CODES = np.zeros(0, np.int64)


def stack_columns(arrays):
    """One column as it is (1-D, or the (rows, K) of a fixed-size-list column),
    K columns as (rows, K)."""
    return arrays[0] if len(arrays) == 1 else np.column_stack(arrays)


def _chunk_arrays(chunk, n_prob):
    """(probabilities, labels) of a chunk whose first ``n_prob`` columns hold
    probabilities: (rows, K) for K class columns (or one fixed-size-list
    column); labels (rows, K) for K label-distribution columns (soft labels)."""
    cols = chunk.columns
    return stack_columns(cols[:n_prob]), stack_columns(cols[n_prob:])


def _prob_columns(path, prob, label, available, name="prob"):
    """The probability column names: one (binary) or K (a list, or every match of
    'prefix*'); with ``name="label"``, the label columns the same way (K of them:
    soft labels, one label distribution per row). ``label``: names to leave out."""
    others = [label] if isinstance(label, str) else list(label or ())
    if isinstance(prob, str) and prob.endswith("*"):
        prefix = prob[:-1]
        cols = [c for c in available if c.startswith(prefix) and c not in others]
        if len(cols) < 2:
            msg = (f"{path}: {name}={prob!r} matches {len(cols)} column(s) {cols}; a prefix "
                   f"needs at least 2 class columns; the file has columns: {list(available)}")
            raise ValueError(msg)
        return cols
    if isinstance(prob, str):
        return [prob]
    cols = list(prob)
    if len(cols) < 2:
        msg = (f"{name} lists {len(cols)} column(s); give one name or at least 2 (one per "
               "class)")
        raise ValueError(msg)
    if len(set(cols)) != len(cols) or set(cols) & set(others):
        other = "the label column" if name == "prob" else "a probability column"
        msg = f"{name} lists a column twice or {other}: {cols}"
        raise ValueError(msg)
    return cols


def _label_columns(path, label, prob, available):
    """The label column, or K label-distribution columns (soft labels) after the
    probability columns ``prob``, whose class order they must follow."""
    cols = _prob_columns(path, label, prob, available, name="label")
    if len(cols) > 1 and len(cols) != len(prob):
        msg = (f"{path}: soft labels need one label column per class: label= gives "
               f"{len(cols)} columns {cols} but prob= gives {len(prob)} {list(prob)}")
        raise ValueError(msg)
    return cols


def soft_labels(label):
    """True when ``label`` names K label-distribution columns (a list, or
    'prefix*'), False for one label column."""
    return not isinstance(label, str) or label.endswith("*")


def resolve_columns(where, prob, label, available):
    """(probability columns, label columns) named by ``prob`` and ``label``: one
    or K (a list, or 'prefix*') probability columns, and one label column or K
    label-distribution columns (soft labels). ``where`` starts the messages."""
    soft = soft_labels(label)
    prob_cols = _prob_columns(where, prob, () if soft else label, available)
    label_cols = _label_columns(where, label, prob_cols, available) if soft else [label]
    return prob_cols, label_cols


def by_names(by):
    """The ``by=`` of a file, dataframe or dataset as a list of column names ([] for
    None): a column name or a list of them."""
    if by is None:
        return []
    if not (isinstance(by, str) or (isinstance(by, (list, tuple))
                                    and all(isinstance(c, str) for c in by))):
        msg = f"by must be a column name or a list of column names; got {by!r}"
        raise ValueError(msg)
    return [by] if isinstance(by, str) else list(by)


def check_by(where, by, names):
    """The key columns ``by`` (a tuple), none named twice nor among ``names`` (the
    probability, label and weight columns); ``where`` starts the message."""
    by = tuple(by)
    clash = [c for c in by if c in names]
    if clash or len(set(by)) != len(by):
        msg = (f"{where}: by={list(by)!r} names "
               f"{'a column twice' if not clash else repr(clash[0])}"
               f"{'' if not clash else ', a probability, label or weight column'}; name "
               "the columns of the segment keys")
        raise ValueError(msg)
    return by


def key_columns(columns):
    """The segment keys of a chunk from its key columns: the one column, or a list of
    them (tuple keys, the intersections); None without key columns."""
    columns = list(columns)
    if not columns:
        return None
    return columns[0] if len(columns) == 1 else columns


class FileSource:
    """A prediction file read in chunks with a reader thread (the driver's source)."""

    transform = None  # the fill's recalibration map, applied again by every pass
    n_chunks = None  # chunks of the last fill

    def __init__(self, path, *, prob, label, chunk_rows, progress=None, format=None,
                 verify_checksums=True, where=None, weight=None, by=()):
        self.path = where_.local(os.fspath(path))  # a file:// URL is its local path
        self.reader, self.format = open_reader(self.path, format,
                                               verify_checksums=verify_checksums, where=where)
        self.prob, self.label = prob, label
        prob_cols, label_cols = resolve_columns(self.path, prob, label, self.reader.columns)
        self.multi_class = len(prob_cols) > 1
        self.n_prob = len(prob_cols)
        self.names = (*prob_cols, *label_cols)
        self.weight = weight  # the column of the rows' weights (sample_weight), or None
        if weight is not None:
            if weight in self.names:
                msg = (f"{where_.shown(self.path)}: weight={weight!r} is a probability or "
                       "label column; name the column of the rows' weights")
                raise ValueError(msg)
            self.names = (*self.names, weight)
        self.n_label = len(label_cols)
        # the columns of the rows' segment keys (any type), or ()
        self.by = check_by(where_.shown(self.path), by, self.names)
        self.names = (*self.names, *self.by)
        self.reader.check(self.names, self.by)
        self.chunk_rows = chunk_rows
        self.progress = progress
        self.prefix = f"{where_.shown(self.path)}: "
        self.what = repr(prob)
        self.empty = f"{where_.shown(self.path)}: no data rows"

    @property
    def provenance(self):
        return {"source": where_.shown(self.path), "format": self.format}

    @property
    def weighted(self):
        """True if the rows carry weights (a ``weight`` column)."""
        return self.weight is not None

    def _arrays(self, chunk):
        """(probabilities, labels, weights or None) of a chunk."""
        cols = chunk.columns
        a, b = self.n_prob, self.n_prob + self.n_label
        w = cols[b] if self.weight is not None else None
        return stack_columns(cols[:a]), stack_columns(cols[a:b]), w

    def _keys(self, chunk):
        """The chunk's segment keys: the ``by`` column, or a list of them (tuple keys)."""
        return key_columns(chunk.columns[len(chunk.columns) - len(self.by):])

    def _chunks(self):
        return _threaded(lambda: coalesced(
            self.reader.chunks(self.names, self.chunk_rows, self.by), self.chunk_rows))

    def fill(self, opts, segmented=None):
        """One pass into ``opts.accumulator()``, or into ``segmented`` (a
        :class:`~fastcal.accumulators.segmented.SegmentedAccumulator`, keyed by the
        ``by`` columns). Returns (accumulator, rows read)."""
        acc = opts.accumulator() if segmented is None else segmented
        label = os.path.basename(self.path) + (" pass 1" if opts.equal_mass else "")
        bar = Progress(self.reader.n_rows, label=label, enabled=self.progress)
        chunks = self._chunks()
        self.n_chunks = 0
        self.transform = opts.transform
        try:
            for chunk in chunks:
                p_col, y_col, w_col = self._arrays(chunk)
                if opts.transform is not None:
                    p_col = opts.transform(p_col)
                try:
                    if self.by:
                        acc.update(y_col, p_col, by=self._keys(chunk), sample_weight=w_col)
                    else:
                        acc.update(y_col, p_col, device=opts.device, sample_weight=w_col)
                except TooManySegments as exc:
                    raise ValueError(f"{self.prefix}{exc}") from None
                except ValueError as exc:
                    raise ValueError(_reword(exc, chunk, self.prob, self.label,
                                             self.weight)) from None
                bar.update(p_col.shape[0])
                self.n_chunks += 1
        finally:
            chunks.close()  # stops the reader thread now, also on error
            bar.close()
        return acc, (acc.n_rows if segmented is None else acc.overall.n_rows)

    def fill_segments(self, opts, max_segments):
        """One pass into a state per segment key of the ``by`` columns."""
        return self.fill(opts, opts.segmented(max_segments))

    def known_rows(self):
        """The file's rows when its format says so before reading (None for CSV)."""
        return self.reader.n_rows

    def known_classes(self):
        """K when the columns give it before any row is read: K class columns, or one
        fixed-size-list column (-1 for a list column of unknown size); else None."""
        if self.multi_class:
            return len(self.names) - 1 - (self.weight is not None) - len(self.by)
        if self.reader.schema is None:  # NPY: K class columns or one value per row
            return None
        try:
            t = self.reader.schema.field(self.names[0]).type
        except (KeyError, TypeError):
            return None
        import pyarrow as pa

        if isinstance(t, pa.FixedSizeListType):
            return int(t.list_size)
        if isinstance(t, (pa.ListType, pa.LargeListType)):
            return -1
        return None

    # the parts carry each row's weight and segment (fastcal.score._ecce, _segments_ecce)
    row_weights = True
    segment_parts = True

    def parts(self, pair, *, weights=False, codes=None):
        """The chunks again as :class:`_FileParts`; with ``weights`` each part's
        weights and with ``codes`` (``codes(keys, n)``: a chunk's segment keys to
        rows of a state) its segment rows follow its ranked pair."""
        return _FileParts(self, pair, weights=weights, codes=codes)

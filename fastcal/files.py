"""Out-of-core scoring: a file of predictions read chunk by chunk into one accumulator."""

import os
import queue
import re
import threading

import numpy as np

from . import _validation as v
from . import equal_mass as em
from . import multiclass as mc
from .io import DEFAULT_CHUNK_ROWS, open_reader
from .progress import Progress
from .score import Options, score

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


def _reword(exc, chunk, prob, label):
    """The core's message about arrays, reworded for a file: file, column names, row."""
    text = str(exc)
    text = text.replace("y_prob", f"column {prob!r}").replace("y_true", f"column {label!r}")
    text = re.sub(r"at index (\d+)", lambda m: _where(chunk, int(m.group(1))), text)
    text = text.replace("pass nan_policy='omit'", "use nan_policy='omit' (--nan-policy omit)")
    return f"{chunk.file}: {text} (rows counted from 0)"


class _FileParts:
    """The chunks of a file as the parts of fastcal.equal_mass: every pass reads
    the file again (with the reader thread), in the same chunks."""

    def __init__(self, reader, names, chunk_rows, multi_class, options, progress, path):
        self.reader = reader
        self.names = names
        self.chunk_rows = chunk_rows
        self.multi_class = multi_class
        self.options = options
        self.progress = progress
        self.path = path
        self.n_parts = None
        self.passes = 1

    def map(self, fn, common, per_part=None, combine=None):
        self.passes += 1
        label = f"{os.path.basename(self.path)} pass {self.passes}"
        bar = Progress(self.reader.n_rows, label=label, enabled=self.progress)
        chunks = _threaded(lambda: self.reader.chunks(self.names, self.chunk_rows))
        results = []
        acc = None
        k = 0
        try:
            for chunk in chunks:
                p, y = _chunk_arrays(chunk, self.multi_class)
                y, x = em.ranking_pair(*_checked(y, p), **self.options)
                r = fn(y, x, *common, *(per_part[k] if per_part else ()))
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
            msg = f"{self.path}: the file changed between passes ({self.n_parts} chunks, then {k})"
            raise ValueError(msg)
        self.n_parts = k
        return results if combine is None else acc


def _chunk_arrays(chunk, multi_class):
    """(probabilities, labels) of a chunk: (rows, K) for K class columns."""
    if multi_class:
        return np.column_stack(chunk.columns[:-1]), chunk.columns[-1]
    return chunk.columns  # p is (rows, K) for a fixed-size-list column


def _checked(y, p):
    if p.ndim == 2:
        return mc.check_pair(y, p, False)
    return v.check_pair(y, p)


def _prob_columns(path, prob, label, available):
    """The probability column names: one (binary) or K (a list, or every match of 'prefix*')."""
    if isinstance(prob, str) and prob.endswith("*"):
        prefix = prob[:-1]
        cols = [c for c in available if c.startswith(prefix) and c != label]
        if len(cols) < 2:
            msg = (f"{path}: prob={prob!r} matches {len(cols)} column(s) {cols}; a prefix needs "
                   f"at least 2 class columns; the file has columns: {list(available)}")
            raise ValueError(msg)
        return cols
    if isinstance(prob, str):
        return [prob]
    cols = list(prob)
    if len(cols) < 2:
        msg = f"prob lists {len(cols)} column(s); give one name (binary) or at least 2 (classes)"
        raise ValueError(msg)
    if len(set(cols)) != len(cols) or label in cols:
        msg = f"prob lists a column twice or the label column: {cols}"
        raise ValueError(msg)
    return cols


def score_file(path, *, prob="p", label="y", n_bins=10, edges=None, closed="left",
               strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
               ace=False, chunk_rows=None, progress=None, format=None, threads=None,
               logits=False, renormalize=False, ci=None, n_boot=200, seed=0,
               verify_checksums=True, device=None):
    """Calibration report of a prediction file, read in chunks (memory bounded by the chunk).

    Parameters
    ----------
    path : str or os.PathLike
        A Parquet, Arrow IPC / Feather, NPY or CSV file, or a directory of
        such files (a Parquet dataset; NPY: one file per column). See
        :mod:`fastcal.io` for the layouts.
    prob : str or list of str, default "p"
        The probability column of class 1 (binary). For K classes: a list of
        K column names in class order, a prefix ending in ``*`` (``"p_*"``:
        every column whose name starts with ``p_``, in file order), or one
        fixed-size-list column of K values per row (Parquet, Feather).
    label : str, default "y"
        The label column: 0/1, or the class index in [0, K).
    logits : bool, default False
        The probability columns hold logits (sigmoid for one column, softmax
        across K columns), applied inside the kernel.
    n_bins, edges, closed, observed, nan_policy, eps, renormalize, ci, n_boot, seed
        As in :func:`fastcal.calibration_report` (one driver, fastcal.score,
        serves both). The bootstrap weights of a row depend on its global
        row, so intervals do not depend on ``chunk_rows``.
    strategy : {"uniform", "quantile"}, default "uniform"
        "quantile": equal-mass bins, exact (the same groups as the in-memory
        stable sort), from a second pass over the file.
    ace : bool, default False
        With strategy="uniform", also compute ACE (equal-mass ECE) by the
        same second pass. Off by default so that a plain run reads the file
        once.
    chunk_rows : int, optional
        Rows per chunk (default 2**18). Results do not depend on it; memory
        grows with it (a few chunks are alive at once: one scored, two read ahead).
    progress : bool, optional
        Progress bar on stderr (default: only if stderr is a terminal).
    format : {"parquet", "feather", "npy", "csv"}, optional
        Default: from the extension (or the files of a directory).
    verify_checksums : bool, default True
        Parquet: check every data page against the checksum stored in the
        file (when it has them); a corrupt page is an error, not a score.
    device : {None, "cpu", "cuda"}, default None
        "cuda": every chunk is copied to the GPU and filled there (the
        ``cuda`` extra); the state and report are the CPU's.
    threads : int, optional
        Threads for the fill kernel (default: numba's thread count minus one,
        leaving a core to the reader thread).

    Returns
    -------
    CalibrationReport
        With extra attributes ``source`` (the path), ``format``, ``n_rows``
        (rows read, omitted ones included) and ``passes`` (1, or 2 or more
        for equal-mass bins).

    Raises
    ------
    ValueError
        A one-line message naming the file: missing column (with the file's
        columns), non-numeric column (with its type), NaN or out-of-range
        value (with the global 0-based row, and the row within the file for a
        directory), empty, truncated or corrupt file, bad options.

    Notes
    -----
    Every metric is a sum over bins of per-bin statistics (eq. 3-6, 15), so
    filling one accumulator chunk by chunk gives the numbers of
    :func:`fastcal.calibration_report` on the whole column in memory, to
    1e-12 relative, whatever the chunk size. A reader thread decodes the next
    chunk while the current one is scored.

    Equal-mass bins (and ACE) are exact (the groups of the in-memory report:
    rows sorted by p, ties in file order, cut at g * n // n_bins) and take
    more passes over the file, with memory bounded whatever the ties (see
    :mod:`fastcal.equal_mass`): ACE one more pass, which gathers only the
    rows of the buckets holding a group boundary; ``strategy="quantile"``
    one or more probe passes, then one pass that fills the groups.

    Examples
    --------
    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> from fastcal.files import score_file
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "pred.parquet")
    >>> pq.write_table(pa.table({"p": [0.1, 0.8, 0.6, 0.3], "y": [0, 1, 1, 0]}), f)
    >>> r = score_file(f, prob="p", label="y", n_bins=5)
    >>> r.n, round(r.ece, 3)
    (4, 0.25)
    """
    if chunk_rows is None:
        chunk_rows = DEFAULT_CHUNK_ROWS
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) \
            or chunk_rows < 1:
        msg = f"chunk_rows must be a positive integer; got {chunk_rows!r}"
        raise ValueError(msg)
    if not isinstance(label, str) or not (
            isinstance(prob, str)
            or (isinstance(prob, (list, tuple)) and all(isinstance(c, str) for c in prob))):
        msg = (f"prob must be a column name, a list of column names or a 'prefix*', and label a "
               f"column name; got prob={prob!r} and label={label!r}")
        raise ValueError(msg)
    if threads is None:
        # Leave one core to the reader thread (pyarrow decodes while the kernel runs).
        threads = max(1, v.check_threads(None) - 1)
    options = Options(n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                      observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                      threads=threads, ci=ci, n_boot=n_boot, seed=seed, logits=logits,
                      renormalize=renormalize, device=device).checked()
    source = FileSource(path, prob=prob, label=label, chunk_rows=int(chunk_rows),
                        progress=progress, format=format, verify_checksums=verify_checksums)
    out = score(source, options)
    out.source = source.path
    out.format = source.format
    return out


class FileSource:
    """A prediction file read in chunks with a reader thread (the driver's source)."""

    def __init__(self, path, *, prob, label, chunk_rows, progress=None, format=None,
                 verify_checksums=True):
        self.path = os.fspath(path)
        self.reader, self.format = open_reader(self.path, format,
                                               verify_checksums=verify_checksums)
        self.prob, self.label = prob, label
        prob_cols = _prob_columns(self.path, prob, label, self.reader.columns)
        self.multi_class = len(prob_cols) > 1
        self.names = (*prob_cols, label)
        self.reader.check(self.names)
        self.chunk_rows = chunk_rows
        self.progress = progress
        self.prefix = f"{self.path}: "
        self.what = repr(prob)
        self.empty = f"{self.path}: no data rows"

    def fill(self, opts):
        acc = opts.accumulator()
        label = os.path.basename(self.path) + (" pass 1" if opts.equal_mass else "")
        bar = Progress(self.reader.n_rows, label=label, enabled=self.progress)
        chunks = _threaded(lambda: self.reader.chunks(self.names, self.chunk_rows))
        self.n_chunks = 0
        update = acc.update_device if opts.device == "cuda" else acc.update
        try:
            for chunk in chunks:
                p_col, y_col = _chunk_arrays(chunk, self.multi_class)
                try:
                    update(y_col, p_col)
                except ValueError as exc:
                    raise ValueError(_reword(exc, chunk, self.prob, self.label)) from None
                bar.update(p_col.shape[0])
                self.n_chunks += 1
        finally:
            chunks.close()  # stops the reader thread now, also on error
            bar.close()
        return acc, acc.n_rows

    def parts(self, pair):
        parts = _FileParts(self.reader, self.names, self.chunk_rows, self.multi_class, pair,
                           self.progress, self.path)
        parts.n_parts = self.n_chunks
        return parts

"""Out-of-core scoring: a file of predictions read chunk by chunk into one accumulator."""

import os
import queue
import re
import threading

import numpy as np

from . import _validation as v
from ._kernels import binary as kb
from .accumulator import CalibrationAccumulator
from .io import DEFAULT_CHUNK_ROWS, open_reader
from .progress import Progress
from .report import CalibrationReport

# Equal-mass bins from a file (strategy="quantile") -------------------------
#
# Pass 1 (the ordinary fill) also counts the probabilities per "bucket": the
# float64 bit pattern of p keeps its exponent and top 14 mantissa bits, so a
# bucket spans 2**-14 of its octave (values below 2**-40 share bucket 0). The
# bit pattern of a non-negative float orders like the float, so the cumulative
# counts give the rank range of every bucket. Each equal-mass group starts at
# rank g * n // n_bins (as in the in-memory report: a stable sort by p, ties
# kept in file order); a bucket whose rank range holds no group start strictly
# inside belongs to one group whole. Pass 2 bins those rows with edges at the
# bucket boundaries, and ranks the rows of the few "split" buckets exactly:
# a bucket holding a single value ranks its rows in file order with a counter;
# a bucket holding several values keeps its rows (p, y) and sorts them at the
# end. Memory of pass 2 is the rows of the split buckets (at most n_bins - 1
# buckets of relative width 2**-14), not the file.
_MANT_BITS = 14
_SHIFT = 52 - _MANT_BITS
_LOW_EXP = 1023 - 40
_BASE = (_LOW_EXP << _MANT_BITS) - 1
N_BUCKETS = ((1023 << _MANT_BITS) - _BASE) + 1
_ONE_BIN = np.array([0.0, 1.0])


def bucket_of(p):
    """Bucket index of each probability (float32 or float64 array in [0, 1])."""
    bits = np.asarray(p, dtype=np.float64).view(np.int64) >> _SHIFT
    return np.clip(bits - _BASE, 0, N_BUCKETS - 1)


def bucket_lower(k):
    """Smallest float64 value in bucket k."""
    if k == 0:
        return 0.0
    return float(np.array((int(k) + _BASE) << _SHIFT, dtype=np.int64).view(np.float64))


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


def _valid(y, p, omit):
    """Rows kept by the fill (all rows under nan_policy='raise')."""
    if not omit:
        return None
    keep = ~np.isnan(p)
    if y.dtype.kind == "f":
        keep &= ~np.isnan(y)
    return None if keep.all() else keep


class _QuantilePlan:
    """What pass 2 needs, computed from the bucket counts of pass 1."""

    def __init__(self, hist, multi, n, n_bins):
        self.n_bins = n_bins
        self.starts = np.array([(g * n) // n_bins for g in range(n_bins)], dtype=np.int64)
        stops = np.append(self.starts[1:], n)
        cum = np.cumsum(hist)
        below = cum - hist  # rank of each bucket's first row
        self.below = below

        def bucket_at(rank):
            return int(np.searchsorted(cum, rank, side="right"))

        edges = [0.0]
        split = set()
        for g in range(1, n_bins):
            k = bucket_at(self.starts[g])
            edges.append(bucket_lower(k))
            if below[k] < self.starts[g]:
                split.add(k)
        edges.append(1.0)
        self.edges = np.array(edges, dtype=np.float64)
        self.split = sorted(split)
        self.single = {k: not multi[k] for k in self.split}
        self.is_split = np.zeros(N_BUCKETS, dtype=np.bool_)
        self.is_split[self.split] = True
        # Ranks whose values are each group's lower and upper end.
        self.targets = {}
        for g in range(n_bins):
            if stops[g] > self.starts[g]:
                self.targets[int(self.starts[g])] = bucket_at(self.starts[g])
                self.targets[int(stops[g] - 1)] = bucket_at(stops[g] - 1)
        self.watch = sorted({k for k in self.targets.values() if k not in split})
        self.is_watch = np.zeros(N_BUCKETS, dtype=np.bool_)
        self.is_watch[self.watch] = True
        self.value_at = {}
        self.bucket_min = {}
        self.bucket_max = {}
        self.seen = {k: 0 for k in self.split}  # rows of single-valued split buckets so far
        self.kept = {k: ([], []) for k in self.split if not self.single[k]}


def _quantile_pass(chunks, plan, state, omit, eps, progress):
    counts, sums, totals = state
    n_bins = plan.n_bins
    for chunk in chunks:
        y, p = v.check_pair(chunk.columns[1], chunk.columns[0])
        keep = _valid(y, p, omit)
        if keep is not None:
            y, p = y[keep], p[keep]
        key = bucket_of(p)
        in_split = plan.is_split[key]
        if in_split.any():
            ys, ps = y[~in_split], p[~in_split]
        else:
            ys, ps = y, p
        c, s, t, chk = kb.new_state(n_bins)
        kb.fill_range(ps, ys, 0, ps.shape[0], plan.edges, False, False, False, eps, True,
                      c, s, t, chk)
        counts += c[:n_bins]
        sums += s[:n_bins]
        totals += t
        # Lower / upper ends of groups in whole buckets: min / max of their bucket.
        w = plan.is_watch[key]
        if w.any():
            kw, pw = key[w], p[w]
            for k in np.unique(kw):
                vals = pw[kw == k]
                lo, hi = float(vals.min()), float(vals.max())
                k = int(k)
                plan.bucket_min[k] = min(plan.bucket_min.get(k, lo), lo)
                plan.bucket_max[k] = max(plan.bucket_max.get(k, hi), hi)
        if in_split.any():
            ks, psp, ysp = key[in_split], p[in_split], y[in_split]
            for k in np.unique(ks):
                k = int(k)
                sel = ks == k
                pk, yk = psp[sel], ysp[sel]
                if plan.single[k]:
                    ranks = plan.below[k] + plan.seen[k] + np.arange(pk.shape[0])
                    plan.seen[k] += pk.shape[0]
                    _fill_ranked(pk, yk, ranks, plan, state, eps)
                else:
                    plan.kept[k][0].append(pk.copy())
                    plan.kept[k][1].append(yk.copy())
        if progress is not None:
            progress.update(chunk.columns[0].shape[0])
    for k, (pl, yl) in plan.kept.items():
        pk = np.concatenate(pl)
        yk = np.concatenate(yl)
        order = np.argsort(pk, kind="stable")
        pk = np.ascontiguousarray(pk[order])
        yk = np.ascontiguousarray(yk[order])
        ranks = plan.below[k] + np.arange(pk.shape[0])
        _fill_ranked(pk, yk, ranks, plan, state, eps)


def _fill_ranked(p, y, ranks, plan, state, eps):
    """Add rows of known rank to their groups; note the values at the groups' ends."""
    counts, sums, totals = state
    group = np.searchsorted(plan.starts, ranks, side="right") - 1
    for g in np.unique(group):
        sel = group == g
        pg = np.ascontiguousarray(p[sel])
        yg = np.ascontiguousarray(y[sel])
        c, s, t, chk = kb.new_state(1)
        kb.fill_range(pg, yg, 0, pg.shape[0], _ONE_BIN, False, False, False, eps, True,
                      c, s, t, chk)
        counts[g] += c[0]
        sums[g] += s[0]
        totals += t
    # ranks are consecutive and all in one bucket
    for r in plan.targets:
        if ranks.shape[0] and ranks[0] <= r <= ranks[-1]:
            plan.value_at[r] = float(p[r - ranks[0]])


def _group_ends(plan, n):
    """Smallest and largest p of each equal-mass group (NaN for an empty group)."""
    lower = np.full(plan.n_bins, np.nan)
    upper = np.full(plan.n_bins, np.nan)
    stops = np.append(plan.starts[1:], n)
    for g in range(plan.n_bins):
        start, stop = int(plan.starts[g]), int(stops[g])
        if stop > start:
            lower[g] = _value(plan, start, first=True)
            upper[g] = _value(plan, stop - 1, first=False)
    return lower, upper


def _value(plan, rank, first):
    k = plan.targets[rank]
    if rank in plan.value_at:
        return plan.value_at[rank]
    return plan.bucket_min[k] if first else plan.bucket_max[k]


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
               logits=False):
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
    n_bins, edges, closed, observed, nan_policy, eps
        As in :func:`fastcal.calibration_report`.
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
    threads : int, optional
        Threads for the fill kernel (default: numba's thread count minus one,
        leaving a core to the reader thread).

    Returns
    -------
    CalibrationReport
        With extra attributes ``source`` (the path), ``format``, ``n_rows``
        (rows read, omitted ones included) and ``passes`` (1, or 2 for
        equal-mass bins).

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

    Equal-mass bins (and ACE) take a second pass and give exactly the groups
    of the in-memory report (rows sorted by p, ties in file order, cut at
    g * n // n_bins). Pass 1 counts p per bucket (2**-14 of each binary
    octave); pass 2 bins every row of a bucket that lies inside one group
    directly and ranks the rows of the at most n_bins - 1 buckets that hold a
    group boundary: by a counter if the bucket holds a single value (ties),
    else by keeping those rows and sorting them. Extra memory is those rows,
    small unless many rows share a few distinct, nearly equal values.

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
    v.check_choice("strategy", strategy, v.STRATEGIES)
    v.check_choice("observed", observed, v.OBSERVED)
    if strategy == "quantile" and edges is not None:
        msg = "edges cannot be combined with strategy='quantile'"
        raise ValueError(msg)
    if chunk_rows is None:
        chunk_rows = DEFAULT_CHUNK_ROWS
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) \
            or chunk_rows < 1:
        msg = f"chunk_rows must be a positive integer; got {chunk_rows!r}"
        raise ValueError(msg)
    chunk_rows = int(chunk_rows)
    if not isinstance(label, str) or not (
            isinstance(prob, str)
            or (isinstance(prob, (list, tuple)) and all(isinstance(c, str) for c in prob))):
        msg = (f"prob must be a column name, a list of column names or a 'prefix*', and label a "
               f"column name; got prob={prob!r} and label={label!r}")
        raise ValueError(msg)
    if threads is None:
        # Leave one core to the reader thread (pyarrow decodes while the kernel runs).
        threads = max(1, v.check_threads(None) - 1)
    acc = CalibrationAccumulator(n_bins=n_bins, edges=edges, closed=closed,
                                 nan_policy=nan_policy, eps=eps, threads=threads, logits=logits)
    path = os.fspath(path)
    reader, fmt = open_reader(path, format)
    prob_cols = _prob_columns(path, prob, label, reader.columns)
    multi_class = len(prob_cols) > 1
    names = (*prob_cols, label)
    reader.check(names)
    omit = acc.nan_policy == "omit"
    second = strategy == "quantile" or ace
    if second and (multi_class or logits):
        msg = (f"{path}: equal-mass bins (strategy='quantile' or ace=True) from files take one "
               "probability column, not logits or K class columns")
        raise ValueError(msg)
    passes = 2 if second else 1

    hist = multi = rep = None
    if second:
        hist = np.zeros(N_BUCKETS, dtype=np.int64)
        multi = np.zeros(N_BUCKETS, dtype=np.bool_)
        rep = np.full(N_BUCKETS, np.nan)

    label1 = f"{os.path.basename(path)}" + (" pass 1/2" if second else "")
    bar = Progress(reader.n_rows, label=label1, enabled=progress)
    chunks = _threaded(lambda: reader.chunks(names, chunk_rows))
    try:
        for chunk in chunks:
            if multi_class:
                # (rows, K) for the multi-class kernel; a copy of one chunk only
                p_col, y_col = np.column_stack(chunk.columns[:-1]), chunk.columns[-1]
            else:
                p_col, y_col = chunk.columns  # p_col is (rows, K) for a fixed-size-list column
            if second and p_col.ndim == 2:
                msg = (f"{path}: equal-mass bins (strategy='quantile' or ace=True) from files "
                       f"take one probability column; {prob!r} holds {p_col.shape[1]} classes")
                raise ValueError(msg)
            try:
                acc.update(y_col, p_col)
            except ValueError as exc:
                raise ValueError(_reword(exc, chunk, prob, label)) from None
            if second:
                y, p = v.check_pair(y_col, p_col)
                keep = _valid(y, p, omit)
                if keep is not None:
                    p = p[keep]
                key = bucket_of(p)
                if key.shape[0] > N_BUCKETS // 16:
                    hist += np.bincount(key, minlength=N_BUCKETS)
                else:
                    np.add.at(hist, key, 1)  # small chunk: no pass over all buckets
                seen = rep[key]
                new = np.isnan(seen)
                if new.any():
                    rep[key[new]] = p[new]
                    seen = rep[key]
                differ = p != seen
                if differ.any():
                    multi[key[differ]] = True
            bar.update(p_col.shape[0])
    finally:
        chunks.close()  # stops the reader thread now, also on error
        bar.close()
    if acc.n_rows == 0:
        msg = f"{path}: no data rows"
        raise ValueError(msg)
    if acc.n == 0:
        msg = f"{path}: no samples left: all {acc.n_rows} rows were omitted as NaN"
        raise ValueError(msg)

    rep_uniform = acc.report(observed=observed)
    if second:
        plan = _QuantilePlan(hist, multi, acc.n, acc.n_bins)
        state = (np.zeros((acc.n_bins, kb.N_COUNTS), np.int64),
                 np.zeros((acc.n_bins, kb.N_SUMS), np.float64),
                 np.zeros(kb.N_TOTALS, np.float64))
        bar = Progress(reader.n_rows, label=f"{os.path.basename(path)} pass 2/2",
                       enabled=progress)
        chunks = _threaded(lambda: reader.chunks(names, chunk_rows))
        try:
            _quantile_pass(chunks, plan, state, omit, acc.eps, bar)
        finally:
            chunks.close()
            bar.close()
        counts, sums, totals = state
        if int(counts[:, 0].sum()) != acc.n:
            msg = (f"{path}: the file changed between the two passes ({acc.n} rows counted in "
                   f"pass 1, {int(counts[:, 0].sum())} in pass 2)")
            raise ValueError(msg)
        lower, upper = _group_ends(plan, acc.n)
        q = CalibrationReport.from_state(
            counts, sums, totals, edges=None, closed=acc.closed, n_omitted=acc.n_omitted,
            observed=observed, strategy="quantile", eps=acc.eps, lower=lower, upper=upper)
        q.ace = q.ece
        if strategy == "quantile":
            out = q
        else:
            out = rep_uniform
            out.ace = q.ece
    else:
        out = rep_uniform
    out.source = path
    out.format = fmt
    out.n_rows = acc.n_rows
    out.passes = passes
    return out

"""Scoring on a Dask cluster: one accumulator per partition, merged exactly.

Needs the optional extra ``dask`` (``pip install fastcal[dask]``). Dask is
imported inside the functions, so ``import fastcal`` never needs it.

Each partition of the data (a chunk of a ``dask.array``, a partition of a
``dask.dataframe`` or a group of Parquet row groups) is read and filled into
its own :class:`~fastcal.CalibrationAccumulator` on a worker; the small states
are then merged in a tree, in partition order. Merging adds integer counts
exactly and float sums to rounding, so the report equals
:func:`fastcal.calibration_report` on all the data to about 1e-12 relative,
whatever the partitioning.

Equal-mass bins (``strategy="quantile"`` and ACE) are exact, not approximate:
see :func:`score_dask` (Notes) for the method.
"""

import os
from dataclasses import dataclass

import numpy as np

from . import _validation as v
from ._kernels import binary as kb
from ._kernels import ranks as kr
from .accumulator import CalibrationAccumulator
from .report import CalibrationReport

# First pass of the equal-mass search: a histogram of p over 2**16 equal
# value buckets. The bucket of p is floor(p * 2**16), exact in floating point.
_VALUE_BUCKETS = 1 << 16
# A bucket holding at most this many rows is gathered to the client and sorted;
# a bigger one is split again into 2**_SPLIT_BITS sub-ranges of float64 bit
# patterns, pass after pass, until it is small enough or a single value.
_GATHER_MAX = 1 << 18
_SPLIT_BITS = 10
_ONE_BIN = np.array([0.0, 1.0])

# Row groups are grouped into partitions of about this many rows.
ROWS_PER_PARTITION = 1 << 22


# ---------------------------------------------------------------------------
# Partitions: where the rows come from, for tasks and for error messages
# ---------------------------------------------------------------------------

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
    multi: bool = False  # (N, K) probabilities


def _pair(y, p):
    return y, p


def _frame_columns(frame, label, prob):
    return frame[label].to_numpy(), frame[prob].to_numpy()


def _read_row_groups(path, row_groups, label, prob):
    import pyarrow.parquet as pq

    from .io import _arrow_to_numpy, _fail, _one_line

    try:
        table = pq.ParquetFile(path).read_row_groups(row_groups, columns=[label, prob])
    except (OSError, ArithmeticError, IndexError, KeyError, TypeError, ValueError) as exc:
        _fail(path, f"cannot read Parquet row groups {row_groups[0]}-{row_groups[-1]}: "
                    f"{_one_line(exc)}")
    return _arrow_to_numpy(table.column(label)), _arrow_to_numpy(table.column(prob))


def _array_source(y_true, y_prob):
    import dask.array as da

    if not isinstance(y_true, da.Array) or not isinstance(y_prob, da.Array):
        msg = (f"y_true and y_prob must be dask arrays; got {type(y_true).__name__} and "
               f"{type(y_prob).__name__} (use score_dataframe for a dask dataframe)")
        raise ValueError(msg)
    if y_prob.ndim not in (1, 2):
        msg = f"y_prob must be 1-D or (N, K); got shape {y_prob.shape}"
        raise ValueError(msg)
    if y_true.ndim != 1:
        msg = f"y_true must be 1-D with one label per sample; got shape {y_true.shape}"
        raise ValueError(msg)
    if any(np.isnan(c) for c in y_prob.chunks[0]) or any(np.isnan(c) for c in y_true.chunks[0]):
        msg = ("y_true and y_prob have unknown chunk sizes; call .compute_chunk_sizes() first "
               "so that partitions can be aligned")
        raise ValueError(msg)
    if y_true.shape[0] != y_prob.shape[0]:
        msg = f"y_true and y_prob have different lengths: {y_true.shape[0]} and {y_prob.shape[0]}"
        raise ValueError(msg)
    if y_prob.ndim == 2 and len(y_prob.chunks[1]) > 1:
        y_prob = y_prob.rechunk({1: -1})  # one block holds all K classes of its rows
    if y_true.chunks[0] != y_prob.chunks[0]:
        y_true = y_true.rechunk({0: y_prob.chunks[0]})
    yb = y_true.to_delayed().ravel()
    pb = y_prob.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(y_prob.chunks[0])]).astype(np.int64)

    def reword(k, text):
        return f"{text} [in chunk {k} of {len(pb)}, rows {starts[k]}-{starts[k + 1] - 1}]"

    return _Source([(_pair, yb[k], pb[k]) for k in range(len(pb))], reword,
                   multi=y_prob.ndim == 2)


def _frame_source(df, label, prob):
    missing = [c for c in (label, prob) if c not in df.columns]
    if missing:
        msg = (f"the dataframe has no column {missing[0]!r}; its columns are "
               f"{list(df.columns)} (pass label= and prob= to name them)")
        raise ValueError(msg)
    parts = df[[label, prob]].to_delayed()

    def reword(k, text):
        return f"{text} [in partition {k} of {len(parts)}]"

    return _Source([(_frame_columns, parts[k], label, prob) for k in range(len(parts))], reword)


def _dataset_source(path, label, prob, rows_per_partition):
    """Partitions of whole row groups. The client reads each file's footer; the
    files, their order, the column checks and the messages are those of
    :func:`fastcal.score_file`."""
    import pyarrow.parquet as pq

    from .files import _reword
    from .io import Chunk, ParquetReader

    reader = ParquetReader(path)
    reader.check([prob, label])
    parts, chunks = [], []
    first_row = 0
    for f in reader.files:
        meta = pq.ParquetFile(f).metadata
        group, rows, start = [], 0, 0
        for g in range(meta.num_row_groups):
            group.append(g)
            rows += meta.row_group(g).num_rows
            if rows >= rows_per_partition or g == meta.num_row_groups - 1:
                parts.append((_read_row_groups, f, group, label, prob))
                chunks.append(Chunk((), f, first_row + start, start))
                start += rows
                group, rows = [], 0
        first_row += meta.num_rows

    def reword(k, text):
        return _reword(ValueError(text), chunks[k], prob, label)

    return _Source(parts, reword)


# ---------------------------------------------------------------------------
# Pass 1: fill one accumulator per partition, merge in order
# ---------------------------------------------------------------------------

@dataclass
class _Filled:
    """State of a contiguous run of partitions."""

    acc: object        # CalibrationAccumulator, None once a partition failed
    n_rows: int        # rows of the run, bad and omitted rows included
    hist: object       # value histogram of the run (quantile only) or None
    bad: int = -1      # first partition of the run whose update raised
    bad_offset: int = 0  # rows before that partition within the run


def _fill_part(index, options, with_hist, loader, *args):
    y, p = loader(*args)
    acc = CalibrationAccumulator(**options)
    n = int(np.shape(p)[0])
    try:
        acc.update(y, p)
    except ValueError:
        # Located and reported with its global row once all offsets are known.
        return _Filled(None, n, None, bad=index)
    hist = _value_hist(y, p, acc.nan_policy) if with_hist else None
    return _Filled(acc, n, hist)


def _merge_filled(*runs):
    out = runs[0]
    for r in runs[1:]:
        if out.bad >= 0:
            out = _Filled(None, out.n_rows + r.n_rows, None, out.bad, out.bad_offset)
        elif r.bad >= 0:
            out = _Filled(None, out.n_rows + r.n_rows, None, r.bad, out.n_rows + r.bad_offset)
        else:
            hist = None if out.hist is None else out.hist + r.hist
            out = _Filled(out.acc + r.acc, out.n_rows + r.n_rows, hist)
    return out


def _message(options, offset, loader, *args):
    """Re-run the failing partition's update with its global offset: the message
    of the single-process path, rows counted from the first row of all data."""
    y, p = loader(*args)
    acc = CalibrationAccumulator(**options)
    acc.n_rows = offset
    try:
        acc.update(y, p)
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
# Equal-mass bins
# ---------------------------------------------------------------------------

def _key(value):
    """Sort key of a probability in [0, 1]: its float64 bit pattern, which orders
    like the value (-0.0 gets the key of 0.0)."""
    return max(int(np.array(value, np.float64).view(np.int64)), 0)


def _value_hist(y, p, nan_policy):
    y, p = v.check_pair(y, p)
    return kr.value_histogram(p, y, nan_policy == "omit", _VALUE_BUCKETS)


def _bucket_keys(b):
    """Inclusive key range of value bucket b: [b / 2**16, (b + 1) / 2**16)."""
    lo = _key(b / _VALUE_BUCKETS)
    if b == _VALUE_BUCKETS - 1:
        return lo, _key(1.0)
    return lo, _key((b + 1) / _VALUE_BUCKETS) - 1


def _probe_part(specs, nan_policy, loader, *args):
    """Per spec (lo, hi, shift) over the keys in [lo, hi]: their count (lo == hi),
    the sorted keys (shift < 0) or a histogram of (key - lo) >> shift."""
    y, p = loader(*args)
    y, p = v.check_pair(y, p)
    lo = np.array([s[0] for s in specs], np.int64)
    hi = np.array([s[1] for s in specs], np.int64)
    shift = np.array([max(s[2], 0) for s in specs], np.int64)
    mode = np.array([0 if s[0] == s[1] else (1 if s[2] < 0 else 2) for s in specs], np.int64)
    sizes = np.where(mode == 2, ((hi - lo) >> shift) + 1, 0)
    count, keys, key_start, hist, hist_start = kr.probe_ranges(
        p, y, nan_policy == "omit", lo, hi, shift, mode, sizes)
    out = []
    for s in range(len(specs)):
        if mode[s] == 0:
            out.append(int(count[s]))
        elif mode[s] == 1:
            out.append(np.sort(keys[key_start[s]:key_start[s + 1]]))
        else:
            out.append(hist[hist_start[s]:hist_start[s + 1]].copy())
    return out


@dataclass
class _Cut:
    """One boundary between equal-mass groups, narrowed pass by pass."""

    rank: int         # global rank (0-based, stable sorted order) of the first row above it
    lo: int           # inclusive key range known to hold the row of that rank
    hi: int
    before: int       # rows with key < lo
    m: int            # rows with key in [lo, hi]
    key: int = -1     # resolved: key of the row of that rank
    below: int = 0    # resolved: rows with that key that go below the cut
    ties: object = None  # resolved: rows with that key in each partition


def _find_cuts(hist, n, n_bins, probe):
    """Exact order statistics at ranks c * n // n_bins, c = 1..n_bins-1.

    ``probe(specs)`` runs :func:`_probe_part` on every partition and returns
    the per-partition lists of results.
    """
    cum = np.cumsum(hist)
    cuts = []
    for c in range(1, n_bins):
        r = (c * n) // n_bins
        b = int(np.searchsorted(cum, r, side="right"))
        lo, hi = _bucket_keys(b)
        cuts.append(_Cut(r, lo, hi, int(cum[b] - hist[b]), int(hist[b])))
    while True:
        open_ = [c for c in cuts if c.key < 0]
        if not open_:
            return cuts
        sizes = {(c.lo, c.hi): c.m for c in open_}
        specs = []
        for (lo, hi), m in sorted(sizes.items()):
            if lo == hi:
                specs.append((lo, hi, 0))  # one key: count it per partition
            elif m <= _GATHER_MAX:
                specs.append((lo, hi, -1))  # gather the keys
            else:
                specs.append((lo, hi, max(0, (hi - lo).bit_length() - _SPLIT_BITS)))
        per_part = probe(specs)
        for s, (lo, hi, shift) in enumerate(specs):
            results = [r[s] for r in per_part]
            for c in open_:
                if (c.lo, c.hi) != (lo, hi):
                    continue
                local = c.rank - c.before
                if lo == hi:
                    c.key, c.below = lo, local
                    c.ties = np.array(results, np.int64)
                elif shift < 0:
                    keys = np.sort(np.concatenate(results))
                    c.key = int(keys[local])
                    c.below = local - int(np.searchsorted(keys, c.key, side="left"))
                    c.ties = np.array([np.count_nonzero(a == c.key) for a in results], np.int64)
                else:
                    sub = np.sum(results, axis=0)
                    scum = np.cumsum(sub)
                    j = int(np.searchsorted(scum, local, side="right"))
                    c.before += int(scum[j] - sub[j])
                    c.lo, c.hi = lo + (j << shift), min(hi, lo + ((j + 1) << shift) - 1)
                    c.m = int(sub[j])


@dataclass
class _Groups:
    counts: np.ndarray
    sums: np.ndarray
    totals: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def _group_part(cut_values, cut_below, cut_prior, n_bins, options, loader, *args):
    """Fill the equal-mass groups from one partition (see ranks.group_rows)."""
    y, p = loader(*args)
    y, p = v.check_pair(y, p)
    ps, ys, bounds, lower, upper = kr.group_rows(
        p, y, options["nan_policy"] == "omit", cut_values, cut_below, cut_prior, n_bins)
    counts = np.zeros((n_bins, kb.N_COUNTS), np.int64)
    sums = np.zeros((n_bins, kb.N_SUMS), np.float64)
    totals = np.zeros(kb.N_TOTALS, np.float64)
    eps = v.check_eps(options["eps"])
    right = options["closed"] == "right"
    for b in range(n_bins):
        start, stop = int(bounds[b]), int(bounds[b + 1])
        if stop == start:
            continue
        c, s, t, chk = kb.new_state(1)
        kb.fill_range(ps, ys, start, stop, _ONE_BIN, False, right, False, eps, True, c, s, t, chk)
        counts[b], sums[b] = c[0], s[0]
        totals += t
    return _Groups(counts, sums, totals, lower, upper)


def _merge_groups(*parts):
    out = parts[0]
    for r in parts[1:]:
        out = _Groups(out.counts + r.counts, out.sums + r.sums, out.totals + r.totals,
                      np.fmin(out.lower, r.lower), np.fmax(out.upper, r.upper))
    return out


# ---------------------------------------------------------------------------
# Scheduler
# ---------------------------------------------------------------------------

class _Runner:
    """Computes delayed objects on a Client, or on Dask's default scheduler.

    ``scheduler`` connects to a running scheduler (closed afterwards);
    ``workers`` starts a LocalCluster of that many single-threaded worker
    processes on 127.0.0.1 (closed afterwards).
    """

    def __init__(self, client=None, scheduler=None, workers=None, timeout=10.0):
        given = [name for name, x in (("client", client), ("scheduler", scheduler),
                                      ("workers", workers)) if x is not None]
        if len(given) > 1:
            msg = f"pass at most one of client, scheduler and workers; got {', '.join(given)}"
            raise ValueError(msg)
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 1):
            msg = f"workers must be a positive integer; got {workers!r}"
            raise ValueError(msg)
        self.client = client
        self.scheduler = scheduler
        self.workers = workers
        self.timeout = float(timeout)
        self._own = []

    def __enter__(self):
        if self.scheduler is not None:
            self.client = connect(self.scheduler, timeout=self.timeout)
            self._own.append(self.client)
        elif self.workers is not None:
            from distributed import Client, LocalCluster

            import logging

            # workers' own log lines (and their tracebacks of failed tasks) stay out of
            # the caller's stderr: the error reaches the caller as an exception
            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                   silence_logs=logging.ERROR)
            self._own.append(cluster)
            self.client = Client(cluster, set_as_default=False)
            self._own.append(self.client)
        return self

    def __exit__(self, *exc):
        # close everything we opened, client first; a failure to close must not hide
        # the error that ended the run (nor leave a Client for __del__ to complain about)
        for x in reversed(self._own):
            try:
                x.close()
            except Exception:
                if exc[0] is None:
                    raise
        self._own.clear()
        return False

    def compute(self, obj):
        if self.client is not None:
            return self.client.gather(self.client.compute(obj))
        import dask

        return dask.compute(obj)[0]


def _one_line_reason(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


async def _probe(address):
    """Open a comm to ``address``, ask for its identity, close; the caller bounds the time.

    distributed's own ``connect`` bounds the TCP connection but not the
    handshake that follows, so a peer that accepts and never answers would
    block it for ever; the caller wraps this in ``asyncio.wait_for``.
    """
    from distributed.comm import connect as comm_connect

    comm = None
    try:
        comm = await comm_connect(address, timeout=None)
        await comm.write({"op": "identity", "reply": True})
        info = await comm.read()
    finally:
        if comm is not None:
            comm.abort()
    if not isinstance(info, dict) or info.get("type") != "Scheduler":
        kind = info.get("type") if isinstance(info, dict) else type(info).__name__
        msg = f"the peer answered but is not a Dask scheduler (type {kind!r})"
        raise ConnectionError(msg)
    return info


def _in_thread(fn, timeout):
    """Run ``fn()`` in a daemon thread; (done, result, exception) after at most ``timeout`` s."""
    import threading

    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed back to the caller
            box["exc"] = exc

    t = threading.Thread(target=target, name="fastcal-connect", daemon=True)
    t.start()
    t.join(max(timeout, 0.0))
    return not t.is_alive(), box.get("result"), box.get("exc")


def connect(address, *, timeout=10.0):
    """A ``distributed.Client`` on the scheduler at ``address``, within ``timeout`` seconds.

    The limit holds for the whole handshake: the TCP connection, the comm
    handshake and the client's registration. A peer that accepts the
    connection and never answers, or answers with something that is not a
    Dask scheduler, gives a ``ConnectionError`` after at most ``timeout``
    seconds (plus about a second to close the half-made client, which is
    closed, never left running).

    Parameters
    ----------
    address : str
        ``tcp://host:port`` (any scheme distributed knows).
    timeout : float, default 10
        Seconds, > 0.

    Returns
    -------
    distributed.Client
        Not set as the default client; close it when done.

    Raises
    ------
    ValueError
        ``timeout`` is not a positive number.
    ConnectionError
        One line, when the scheduler cannot be reached or does not complete
        the handshake within ``timeout`` seconds (instead of Dask's default
        of retrying for 30 s or more, or waiting for ever on a silent peer).
    """
    import asyncio
    import math
    import time

    from distributed import Client

    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not (timeout > 0 and math.isfinite(timeout)):
        msg = f"timeout must be a positive number of seconds; got {timeout!r}"
        raise ValueError(msg)
    deadline = time.monotonic() + timeout

    def fail(reason):
        msg = (f"could not reach the Dask scheduler at {address!r} within {timeout:g} s "
               f"({reason})")
        return ConnectionError(msg)

    def probe():
        return asyncio.run(asyncio.wait_for(_probe(address), timeout))

    done, _, exc = _in_thread(probe, timeout + 1.0)
    if not done or isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        raise fail("no Dask handshake: nothing listening there, or a peer that does not "
                   "answer") from None
    if isinstance(exc, ConnectionError):
        raise fail(_one_line_reason(exc)) from None
    if exc is not None:  # bytes that are not Dask's protocol
        raise fail(f"the peer does not speak Dask's protocol: {_one_line_reason(exc)}") from None

    before = set(Client._instances)
    left = max(deadline - time.monotonic(), 0.1)
    done, client, exc = _in_thread(
        lambda: Client(address, timeout=left, set_as_default=False), left + 0.5)
    if done and exc is None:
        return client
    for c in set(Client._instances) - before:  # the half-made client, if any
        _in_thread(lambda c=c: c.close(timeout=1), 2.0)
    if not done or isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        raise fail("no answer to the client's registration") from None
    raise fail(_one_line_reason(exc)) from None


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------

def _score(source, *, n_bins, edges, closed, strategy, observed, nan_policy, eps, ace,
           threads, split_every, runner):
    import dask

    v.check_choice("strategy", strategy, v.STRATEGIES)
    v.check_choice("observed", observed, v.OBSERVED)
    if strategy == "quantile" and edges is not None:
        msg = "edges cannot be combined with strategy='quantile'"
        raise ValueError(msg)
    if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
        msg = f"split_every must be an integer >= 2; got {split_every!r}"
        raise ValueError(msg)
    options = dict(n_bins=n_bins, edges=edges, closed=closed, nan_policy=nan_policy, eps=eps,
                   threads=threads)
    checked = CalibrationAccumulator(**options)  # checks the options on the client
    if not source.parts:
        msg = "the input has no partitions; need at least one sample"
        raise ValueError(msg)
    need_quantile = strategy == "quantile" or ace
    if need_quantile and source.multi:
        msg = ("strategy='quantile' and ACE are computed for 1-D probabilities only; for (N, K) "
               "probabilities pass strategy='uniform' and ace=False")
        raise ValueError(msg)
    fill = dask.delayed(_fill_part, pure=True)
    tasks = [fill(k, options, need_quantile, *part) for k, part in enumerate(source.parts)]
    run = runner.compute(_tree(tasks, _merge_filled, split_every))
    if run.bad >= 0:
        text = runner.compute(dask.delayed(_message, pure=True)(
            options, run.bad_offset, *source.parts[run.bad]))
        msg = source.reword(run.bad, text)
        raise ValueError(msg)
    acc = run.acc
    passes = 1
    if run.n_rows == 0:
        msg = "y_true and y_prob are empty; need at least one sample"
        raise ValueError(msg)
    if acc.n == 0:
        msg = f"no samples left: all {run.n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    if not need_quantile:
        return _tag(acc.report(observed=observed), run.n_rows, passes)

    def probe(specs):
        nonlocal passes
        passes += 1
        t = dask.delayed(_probe_part, pure=True)
        return runner.compute([t(specs, nan_policy, *part) for part in source.parts])

    n_groups = checked.n_bins
    cuts = _find_cuts(run.hist, acc.n, n_groups, probe)
    values = np.array([c.key for c in cuts], np.int64).view(np.float64)
    below = np.array([c.below for c in cuts], np.int64)
    prior = (np.array([np.cumsum(c.ties) - c.ties for c in cuts], np.int64).reshape(
        len(cuts), len(source.parts)))
    group = dask.delayed(_group_part, pure=True)
    tasks = [group(values, below, prior[:, k].copy(), n_groups, options, *part)
             for k, part in enumerate(source.parts)]
    gr = runner.compute(_tree(tasks, _merge_groups, split_every))
    passes += 1
    q = CalibrationReport.from_state(
        gr.counts, gr.sums, gr.totals, edges=None, closed=acc.closed, n_omitted=acc.n_omitted,
        observed=observed, strategy="quantile", eps=acc.eps, lower=gr.lower, upper=gr.upper)
    if strategy == "quantile":
        q.ace = q.ece
        return _tag(q, run.n_rows, passes)
    rep = acc.report(observed=observed)
    rep.ace = q.ece
    return _tag(rep, run.n_rows, passes)


def _tag(rep, n_rows, passes):
    """Attributes also set by fastcal.score_file: rows read and passes over the data."""
    rep.n_rows = n_rows
    rep.passes = passes
    return rep


_OPTIONS_DOC = """
    n_bins, edges, closed, strategy, observed, nan_policy, eps
        As in :func:`fastcal.calibration_report`.
    ace : bool, default False
        With strategy="uniform", also compute ACE (equal-mass ECE), exactly,
        from two more passes over the data. Off by default so that a plain
        run reads the data once, as :func:`fastcal.score_file`.
    threads : int, default 1
        Numba threads per partition. Dask already runs partitions in
        parallel; raise this only for workers with one Dask thread and
        several cores.
    split_every : int, default 8
        Fan-in of the merge tree.
    client : distributed.Client, optional
        Run on this client's cluster.
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``); connects, runs
        and disconnects.
    workers : int, optional
        Start a LocalCluster of this many single-threaded worker processes
        on 127.0.0.1 for this call.
    timeout : float, default 10
        Seconds to wait for ``scheduler`` before giving up.
        Pass at most one of client, scheduler and workers; with none, Dask's
        default scheduler runs the tasks (a Client made default in this
        process, otherwise the local threaded scheduler).
"""


def score_dask(y_true, y_prob, *, n_bins=10, edges=None, closed="left", strategy="uniform",
               observed="frac_pos", nan_policy="raise", eps=None, ace=False, threads=1,
               split_every=8, client=None, scheduler=None, workers=None, timeout=10.0):
    """Calibration report of dask arrays, one accumulator per chunk.

    Parameters
    ----------
    y_true : dask.array.Array of shape (n,)
        Labels 0/1.
    y_prob : dask.array.Array of shape (n,) or (n, K)
        Probabilities, chunked along the rows (a chunking along K is undone).
        (n, K) arrays are passed through unchanged to
        :meth:`CalibrationAccumulator.update`.
    {options}
    Returns
    -------
    CalibrationReport
        Equal to ``fastcal.calibration_report`` on the computed arrays, to
        about 1e-12 relative, whatever the chunking. Also holds ``n_rows``
        (rows read, omitted ones included) and ``passes`` (over the data).

    Raises
    ------
    ValueError
        Bad options or inputs; a chunk holding a bad value gives the message
        of the single-process path for that chunk, with rows counted from the
        first row of all the data, followed by the chunk.
    ConnectionError
        ``scheduler`` cannot be reached within ``timeout`` seconds.

    Notes
    -----
    Uniform or explicit bins take one pass over the data: every chunk fills
    its own accumulator on a worker and the accumulators are merged in a
    tree of fan-in ``split_every``, in chunk order (counts add exactly, float
    sums to rounding).

    Equal-mass bins (``strategy="quantile"``, and ACE with ``ace=True``)
    need the values at ranks c * n // n_bins of the stable sort by p, and the
    single-process path splits ties by position in the input. The method is
    exact: the first pass also builds a histogram of p over 2**16 equal
    buckets (floor(p * 2**16) is exact); the bucket holding each cut rank is
    then either gathered to the client and sorted (at most 2**18 rows) or
    split again over the float64 bit patterns of its values, until the value
    at each cut rank is known, with the number of rows equal to it that lie
    below the cut and how many such rows each partition holds. A last pass
    puts each row in its group by (value, global row) order and fills the
    groups. Typical data need 3 passes in all; heavily concentrated values a
    few more. Every pass reads the data again.

    Examples
    --------
    >>> import dask.array as da, numpy as np, fastcal
    >>> from fastcal.distributed import score_dask
    >>> y, p = fastcal.simulate(10_000, sigma=0.5, seed=1)
    >>> rep = score_dask(da.from_array(y, chunks=2_500), da.from_array(p, chunks=2_500))
    >>> ref = fastcal.calibration_report(y, p)
    >>> bool(np.isclose(rep.ece, ref.ece, rtol=1e-12)), rep.n
    (True, 10000)
    """
    source = _array_source(y_true, y_prob)
    with _Runner(client, scheduler, workers, timeout) as runner:
        return _score(source, n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                      observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                      threads=threads, split_every=split_every, runner=runner)


def score_dataframe(df, *, prob="p", label="y", n_bins=10, edges=None, closed="left",
                    strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
                    ace=False, threads=1, split_every=8, client=None, scheduler=None,
                    workers=None, timeout=10.0):
    """Calibration report of two columns of a dask dataframe, one accumulator per partition.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        For example ``dd.read_parquet(directory)``.
    prob, label : str, default "p" and "y"
        Column names of the probabilities and the 0/1 labels.
    {options}
    Returns
    -------
    CalibrationReport
        Equal to ``fastcal.calibration_report`` on the two columns of
        ``df.compute()``, to about 1e-12 relative. Also holds ``n_rows`` and
        ``passes`` as :func:`score_dask`.

    Raises
    ------
    ValueError
        Missing columns, bad options; a partition holding a bad value gives
        the single-process message with the global row (rows of earlier
        partitions counted), followed by the partition number.
    ConnectionError
        ``scheduler`` cannot be reached within ``timeout`` seconds.

    Notes
    -----
    As :func:`score_dask`. Partition lengths need not be known in advance:
    each merge carries the row count of its partitions, which gives the
    global row of a bad value.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd, fastcal
    >>> from fastcal.distributed import score_dataframe
    >>> y, p = fastcal.simulate(1_000, seed=2)
    >>> df = dd.from_pandas(pd.DataFrame({{"y": y, "p": p}}), npartitions=4)
    >>> score_dataframe(df).n
    1000
    """
    source = _frame_source(df, label, prob)
    with _Runner(client, scheduler, workers, timeout) as runner:
        return _score(source, n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                      observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                      threads=threads, split_every=split_every, runner=runner)


def score_dataset(path, *, prob="p", label="y", n_bins=10, edges=None,
                  closed="left", strategy="uniform", observed="frac_pos", nan_policy="raise",
                  eps=None, ace=False, threads=1, split_every=8, client=None, scheduler=None,
                  workers=None, timeout=10.0, rows_per_partition=ROWS_PER_PARTITION):
    """Calibration report of a Parquet file or dataset directory, scored with Dask.

    Parameters
    ----------
    path : str
        A Parquet file, or a directory whose Parquet files (searched
        recursively in sorted path order, as :func:`fastcal.score_file` does)
        hold the rows in that order. Workers must see the same path.
    prob, label : str, default "p" and "y"
        Column names of the probabilities and the 0/1 labels.
    {options}
    rows_per_partition : int, default 2**22
        Whole row groups of one file are grouped into partitions of about
        this many rows (one row group is never split).

    Returns
    -------
    CalibrationReport
        Equal to ``fastcal.calibration_report`` on the files' rows
        concatenated in that order, to about 1e-12 relative. Also holds
        ``source``, ``format``, ``n_rows`` and ``passes``, like the report of
        :func:`fastcal.score_file`.

    Raises
    ------
    ValueError
        Missing path or columns, bad options; a bad value gives the message
        of :func:`fastcal.score_file`: the file, the column and the global
        row (and the row within the file).
    ConnectionError
        ``scheduler`` cannot be reached within ``timeout`` seconds.

    Notes
    -----
    The client reads each file's footer (row groups and row counts) to plan
    the partitions; the workers read the two columns of their row groups with
    pyarrow. Otherwise as :func:`score_dask`.

    Examples
    --------
    >>> from fastcal.distributed import score_dataset
    >>> rep = score_dataset("predictions/", prob="p", label="y", workers=2)  # doctest: +SKIP
    """
    if (isinstance(rows_per_partition, bool) or not isinstance(rows_per_partition, int)
            or rows_per_partition < 1):
        msg = f"rows_per_partition must be a positive integer; got {rows_per_partition!r}"
        raise ValueError(msg)
    source = _dataset_source(os.fspath(path), label, prob, rows_per_partition)
    with _Runner(client, scheduler, workers, timeout) as runner:
        rep = _score(source, n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                     observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                     threads=threads, split_every=split_every, runner=runner)
    rep.source = os.fspath(path)
    rep.format = "parquet"
    rep.dask = _describe(client, scheduler, workers)
    return rep


def _describe(client, scheduler, workers):
    if client is not None:
        return f"client of {client.scheduler.address}"
    if scheduler is not None:
        return f"scheduler {scheduler}"
    if workers is not None:
        return f"local cluster of {workers} workers"
    return "default scheduler"


for _f in (score_dask, score_dataframe, score_dataset):
    _f.__doc__ = _f.__doc__.format(options=_OPTIONS_DOC.strip() + "\n")
del _f

__all__ = ["connect", "score_dask", "score_dataframe", "score_dataset"]

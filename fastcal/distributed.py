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
from . import equal_mass as em
from . import multiclass as mc
from .score import Options, score

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
    offsets: object = None  # global row of each partition's first row, if known


def _pair(y, p):
    return y, p


def _frame_columns(frame, label, prob):
    cols = list(frame.columns)
    asked = (label, prob)
    for name in dict.fromkeys(asked):
        # The partition holds the columns selected as [label, prob]; a name the
        # dataframe holds k times comes k times per selection.
        k = cols.count(name) // asked.count(name)
        if k > 1:
            msg = (f"the dataframe has column {name!r} {k} times; expected each column name "
                   "once (rename the duplicates)")
            raise ValueError(msg)
    return frame[label].to_numpy(), frame[prob].to_numpy()


def _read_row_groups(path, row_groups, label, prob, prob_dtype=None, verify_checksums=True):
    """Columns (label, prob) of some row groups of one file; ``prob_dtype`` is the
    dataset's dtype of ``prob`` (``ParquetReader.dtype``), to which a narrower
    file is widened so that every partition is binned alike."""
    import pyarrow.parquet as pq

    from .io import _arrow_to_numpy, _check_unique, _fail, _one_line, _widen

    try:
        pf = pq.ParquetFile(path, page_checksum_verification=verify_checksums)
    except (OSError, ArithmeticError, IndexError, KeyError, TypeError, ValueError) as exc:
        _fail(path, f"not a readable Parquet file: {_one_line(exc)}")
    _check_unique(path, [label, prob], pf.schema_arrow.names)
    try:
        table = pf.read_row_groups(row_groups, columns=list(dict.fromkeys([label, prob])))
    except (OSError, ArithmeticError, IndexError, KeyError, TypeError, ValueError) as exc:
        _fail(path, f"cannot read Parquet row groups {row_groups[0]}-{row_groups[-1]}: "
                    f"{_one_line(exc)}")
    p = _widen(_arrow_to_numpy(table.column(prob)), prob_dtype)
    return _arrow_to_numpy(table.column(label)), p


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
                   multi=y_prob.ndim == 2, offsets=[int(a) for a in starts[:-1]])


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


def _dataset_source(path, label, prob, rows_per_partition, verify_checksums=True):
    """Partitions of whole row groups. The client reads each file's footer; the
    files, their order, the column checks and the messages are those of
    :func:`fastcal.score_file`."""
    import pyarrow.parquet as pq

    from .files import _reword
    from .io import Chunk, ParquetReader

    reader = ParquetReader(path, verify_checksums=verify_checksums)
    reader.check([prob, label])
    prob_dtype = reader.dtype(prob)  # the widest over the files: one rule for binning
    parts, chunks = [], []
    first_row = 0
    for f in reader.files:
        meta = pq.ParquetFile(f).metadata
        group, rows, start = [], 0, 0
        for g in range(meta.num_row_groups):
            group.append(g)
            rows += meta.row_group(g).num_rows
            if rows >= rows_per_partition or g == meta.num_row_groups - 1:
                parts.append((_read_row_groups, f, group, label, prob, prob_dtype,
                              verify_checksums))
                chunks.append(Chunk((), f, first_row + start, start))
                start += rows
                group, rows = [], 0
        first_row += meta.num_rows

    def reword(k, text):
        return _reword(ValueError(text), chunks[k], prob, label)

    return _Source(parts, reword, offsets=[c.start for c in chunks])


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
    y, p = loader(*args)
    acc = options.accumulator()
    n = int(np.shape(p)[0])
    update = acc.update_device if options.device == "cuda" else acc.update
    try:
        update(y, p, start=start)
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
    y, p = loader(*args)
    acc = options.accumulator()
    try:
        acc.update(y, p, start=offset)
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
# Equal-mass bins: the partitions as parts of fastcal.equal_mass
# ---------------------------------------------------------------------------

class _DaskParts:
    """Every pass of fastcal.equal_mass is one task per partition, results in
    partition order (the tie counters of equal values need that order)."""

    def __init__(self, source, runner, pair):
        self.source = source
        self.runner = runner
        self.pair = pair  # options of em.ranking_pair
        self.n_parts = len(source.parts)
        self.passes = 1

    def map(self, fn, common, per_part=None, combine=None):
        import dask

        task = dask.delayed(_on_part, pure=True)
        tasks = [task(fn, common, per_part[k] if per_part else (), self.pair, *part)
                 for k, part in enumerate(self.source.parts)]
        self.passes += 1
        return em.fold(self.runner.compute(tasks), combine)


def _on_part(fn, common, extra, pair, loader, *args):
    y, p = loader(*args)
    y, p = mc.check_pair(y, p, pair["logits"]) if np.ndim(p) == 2 else v.check_pair(y, p)
    y, x = em.ranking_pair(y, p, **pair)
    return fn(y, x, *common, *extra)


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

            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address="127.0.0.1:0")
            self._own.append(cluster)
            self.client = Client(cluster, set_as_default=False)
            self._own.append(self.client)
        return self

    def __exit__(self, *exc):
        for x in reversed(self._own):
            x.close()
        return False

    def compute(self, obj):
        if self.client is not None:
            return self.client.gather(self.client.compute(obj))
        import dask

        return dask.compute(obj)[0]


def connect(address, *, timeout=10.0):
    """A ``distributed.Client`` on the scheduler at ``address``.

    Raises
    ------
    ConnectionError
        One line, when the scheduler cannot be reached within ``timeout``
        seconds (instead of Dask's default of retrying for 30 s or more).
    """
    from distributed import Client

    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        msg = (f"could not reach the Dask scheduler at {address!r} within {timeout:g} s "
               f"({reason})")
        raise ConnectionError(msg) from None


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------

class DaskSource:
    """Dask partitions as the driver's source: one accumulator per partition on
    the workers, merged in a tree in partition order."""

    prefix = ""
    what = "y_prob"
    empty = "y_true and y_prob are empty; need at least one sample"

    def __init__(self, source, runner, split_every):
        if isinstance(split_every, bool) or not isinstance(split_every, int) or split_every < 2:
            msg = f"split_every must be an integer >= 2; got {split_every!r}"
            raise ValueError(msg)
        if not source.parts:
            msg = "the input has no partitions; need at least one sample"
            raise ValueError(msg)
        self.source = source
        self.runner = runner
        self.split_every = split_every

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

    def parts(self, pair):
        return _DaskParts(self.source, self.runner, pair)


def _score(source, *, runner, split_every, **options):
    return score(DaskSource(source, runner, split_every), Options(**options))


_OPTIONS_DOC = """
    n_bins, edges, closed, strategy, observed, nan_policy, eps
        As in :func:`fastcal.calibration_report`.
    ace : bool, default False
        With strategy="uniform", also compute ACE (equal-mass ECE), exactly,
        from one more pass over the data. Off by default so that a plain run
        reads the data once, as :func:`fastcal.score_file`.
    logits, renormalize, ci, n_boot, seed, device
        As in :func:`fastcal.calibration_report` (one driver, fastcal.score,
        serves every entry point). Bootstrap weights hang on global rows: a
        dataframe, whose partition lengths are unknown, costs one light pass
        to count them when ``ci`` is given.
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
               split_every=8, client=None, scheduler=None, workers=None, timeout=10.0,
               logits=False, renormalize=False, ci=None, n_boot=200, seed=0, device=None):
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
    are exact and use the algorithm of every entry point,
    :mod:`fastcal.equal_mass`, with the partitions as its parts (ties split
    by global row, as in the single-process stable sort): ACE takes one more
    pass, ``strategy="quantile"`` usually two more. Every pass reads the
    data again.

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
                      threads=threads, split_every=split_every, runner=runner,
                      logits=logits, renormalize=renormalize, ci=ci, n_boot=n_boot,
                      seed=seed, device=device)


def score_dataframe(df, *, prob="p", label="y", n_bins=10, edges=None, closed="left",
                    strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
                    ace=False, threads=1, split_every=8, client=None, scheduler=None,
                    workers=None, timeout=10.0, logits=False, renormalize=False, ci=None, n_boot=200, seed=0, device=None):
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
                      threads=threads, split_every=split_every, runner=runner,
                      logits=logits, renormalize=renormalize, ci=ci, n_boot=n_boot,
                      seed=seed, device=device)


def score_dataset(path, *, prob="p", label="y", n_bins=10, edges=None,
                  closed="left", strategy="uniform", observed="frac_pos", nan_policy="raise",
                  eps=None, ace=False, threads=1, split_every=8, client=None, scheduler=None,
                  workers=None, timeout=10.0, rows_per_partition=ROWS_PER_PARTITION,
                  logits=False, renormalize=False, ci=None, n_boot=200, seed=0, device=None,
                  verify_checksums=True):
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
    verify_checksums : bool, default True
        As in :func:`fastcal.score_file`.

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
    source = _dataset_source(os.fspath(path), label, prob, rows_per_partition,
                             verify_checksums)
    with _Runner(client, scheduler, workers, timeout) as runner:
        rep = _score(source, n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                     observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                     threads=threads, split_every=split_every, runner=runner,
                      logits=logits, renormalize=renormalize, ci=ci, n_boot=n_boot,
                      seed=seed, device=device)
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

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

from fastcal.inputs import validation as v
from fastcal.inputs.segments import MAX_SEGMENTS, check_max_segments
from fastcal.inputs.validation import show
from fastcal.reports.segmented import CORRECTIONS
from fastcal.reports.stats import check_alpha
from fastcal.score import Options, score, score_segments
from fastcal.sources.dask import ROWS_PER_PARTITION, DaskSource, _array_source, _dataset_source, _frame_source
from fastcal.sources.files import by_names
from fastcal.sources.readers import where as where_

# ---------------------------------------------------------------------------
# Partitions: where the rows come from, for tasks and for error messages
# ---------------------------------------------------------------------------

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
            msg = f"workers must be a positive integer; got {show(workers)}"
            raise ValueError(msg)
        self.client = client
        self.scheduler = scheduler
        self.workers = workers
        self.timeout = float(timeout)
        self._own = []
        self.description = _describe(client, scheduler, workers)  # what reports name

    def __enter__(self):
        if self.scheduler is not None:
            self.client = connect(self.scheduler, timeout=self.timeout)
            self._own.append(self.client)
        elif self.workers is not None:
            import logging

            from distributed import Client, LocalCluster

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
        msg = f"timeout must be a positive number of seconds; got {show(timeout)}"
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

# The keywords each entry point here hands to the driver unchanged.
_DRIVER_KEYWORDS = ("n_bins", "edges", "closed", "strategy", "observed", "nan_policy", "eps",
                    "ace", "threads", "split_every", "logits", "renormalize", "ci", "n_boot",
                    "seed", "device", "transform", "smooth", "metrics", "sweep",
                    "tace_threshold")


def _driver_options(arguments):
    """The driver's keywords out of an entry point's ``locals()`` (its arguments)."""
    return {k: arguments[k] for k in _DRIVER_KEYWORDS}


def _segments(arguments, columns=None):
    """``score_segments``' keywords out of an entry point's ``locals()``, checked
    before any cluster is started: ``correction``, ``alpha``, ``max_segments`` and
    the key ``columns`` (None for arrays)."""
    v.check_choice("correction", arguments["correction"], CORRECTIONS)
    return {"correction": arguments["correction"], "alpha": check_alpha(arguments["alpha"]),
            "max_segments": check_max_segments(arguments["max_segments"]), "columns": columns}


def _run(source, connection, options, provenance=None, segments=None):
    """Score ``source`` on the cluster that ``connection`` (client, scheduler, workers,
    timeout) names, with the driver's ``options``; by segment (``score_segments``
    with the keywords ``segments``) when the source has keys."""
    with _Runner(*connection) as runner:
        return _score(source, runner=runner, provenance=provenance, segments=segments,
                      **options)


def _score(source, *, runner, split_every, provenance=None, segments=None, **options):
    provenance = {"dask": runner.description, **(provenance or {})}
    dask_source = DaskSource(source, runner, split_every, provenance)
    if source.by is not None:
        return score_segments(dask_source, Options(**options), **segments)
    return score(dask_source, Options(**options))


_COLUMNS_DOC = """
    prob, label : str or list of str, default "p" and "y"
        Column names of the probabilities and the labels, as in
        :func:`fastcal.score_file`: one probability column (binary), or K class
        columns as a list or a prefix ``"p_*"``; one label column, or K
        label-distribution columns (soft labels) as a list or a prefix.
"""

_OPTIONS_DOC = """
    n_bins, edges, closed, strategy, observed, nan_policy, eps
        As in :func:`fastcal.calibration_report`.
    ace : bool, default False
        With strategy="uniform", also compute ACE (equal-mass ECE), exactly,
        from one more pass over the data. Off by default so that a plain run
        reads the data once, as :func:`fastcal.score_file`.
    logits, renormalize, ci, n_boot, seed, device, smooth
        As in :func:`fastcal.calibration_report` (one driver, fastcal.score,
        serves every entry point). Bootstrap weights hang on global rows: a
        dataframe, whose partition lengths are unknown, costs one light pass
        to count them when ``ci`` is given.
    metrics, sweep, tace_threshold
        As in :func:`fastcal.calibration_report`.
    transform : callable, optional
        A fitted recalibration (:mod:`fastcal.recalibrate`), applied on the
        workers to every partition's probabilities (or logits) before they
        are scored, as in :func:`fastcal.score_file`; it travels to the
        workers with the task.
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

_SEGMENTS_DOC = """
    correction, alpha, max_segments
        With ``by``: as in :func:`fastcal.score_file` ("holm" or "bh"; the
        verdict's level; more distinct keys than ``max_segments`` over all the
        partitions are refused in one line, checked in each partition and at
        each merge of the tree).
"""

_SEGMENTED_RETURN = """With ``by``, a :class:`~fastcal.reports.segmented.SegmentedReport` (as
        :func:`fastcal.score_file` with ``by=``): each segment's report equal
        to that of its rows alone, whatever the partitioning; its ``overall``
        holds ``n_rows`` and ``passes``."""


def score_dask(y_true, y_prob, *, n_bins=10, edges=None, closed="left", strategy="uniform",
               observed="frac_pos", nan_policy="raise", eps=None, ace=False, threads=1,
               split_every=8, client=None, scheduler=None, workers=None, timeout=10.0,
               logits=False, renormalize=False, ci=None, n_boot=200, seed=0, device=None,
               transform=None, smooth=False, metrics=(), sweep=None,
               tace_threshold=None, sample_weight=None, by=None, correction="holm",
               alpha=0.05, max_segments=MAX_SEGMENTS):
    """Calibration report of dask arrays, one accumulator per chunk.

    Parameters
    ----------
    y_true : dask.array.Array of shape (n,)
        Labels 0/1.
    y_prob : dask.array.Array of shape (n,) or (n, K)
        Probabilities, chunked along the rows (a chunking along K is undone).
        (n, K) arrays are passed through unchanged to
        :meth:`CalibrationAccumulator.update`.
    sample_weight : dask.array.Array of shape (n,), optional
        A weight per row, as in :func:`fastcal.calibration_report` (rechunked
        as ``y_prob``).
    by : dask.array.Array or array-like of shape (n,), or a list of them, optional
        A segment key per row (any type; nulls are one segment, key ``None``),
        as ``by`` of :func:`fastcal.calibration_report`; several columns give
        tuple keys (their intersections). Rechunked as ``y_prob``; an array in
        memory is cut into ``y_prob``'s chunks. Each chunk fills a state per
        key in the same one pass (so without ACE, equal-mass bins or the
        ``metrics`` that take more passes: those are refused).
    {segments}
    {options}
    Returns
    -------
    CalibrationReport
        Equal to ``fastcal.calibration_report`` on the computed arrays, to
        about 1e-12 relative, whatever the chunking. Also holds ``n_rows``
        (rows read, omitted ones included) and ``passes`` (over the data).
        {segmented}

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
    :mod:`fastcal.accumulators.equal_mass`, with the partitions as its parts (ties split
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
    options = _driver_options(locals())
    segments = _segments(locals())
    source = _array_source(y_true, y_prob, sample_weight, by)
    return _run(source, (client, scheduler, workers, timeout), options, segments=segments)


def score_dataframe(df, *, prob="p", label="y", n_bins=10, edges=None, closed="left",
                    strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
                    ace=False, threads=1, split_every=8, client=None, scheduler=None,
                    workers=None, timeout=10.0, logits=False, renormalize=False, ci=None,
                    n_boot=200, seed=0, device=None, transform=None, smooth=False,
                    metrics=(), sweep=None, tace_threshold=None, weight=None, by=None,
                    correction="holm", alpha=0.05, max_segments=MAX_SEGMENTS):
    """Calibration report of two columns of a dask dataframe, one accumulator per partition.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        For example ``dd.read_parquet(directory)``.
    {columns}
    weight : str, optional
        The column of the rows' weights, as ``sample_weight`` of
        :func:`fastcal.calibration_report`.
    by : str or list of str, optional
        The column(s) of the rows' segment keys, as in
        :func:`fastcal.score_file` (nulls are one segment, key ``None``;
        several columns give tuple keys), read with the partitions.
    {segments}
    {options}
    Returns
    -------
    CalibrationReport
        Equal to ``fastcal.calibration_report`` on the two columns of
        ``df.compute()``, to about 1e-12 relative. Also holds ``n_rows`` and
        ``passes`` as :func:`score_dask`.
        {segmented}

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
    options = _driver_options(locals())
    columns = by_names(by)
    segments = _segments(locals(), columns)
    source = _frame_source(df, label, prob, weight, columns)
    return _run(source, (client, scheduler, workers, timeout), options, segments=segments)


def score_dataset(path, *, prob="p", label="y", n_bins=10, edges=None,
                  closed="left", strategy="uniform", observed="frac_pos", nan_policy="raise",
                  eps=None, ace=False, threads=1, split_every=8, client=None, scheduler=None,
                  workers=None, timeout=10.0, rows_per_partition=ROWS_PER_PARTITION,
                  logits=False, renormalize=False, ci=None, n_boot=200, seed=0, device=None,
                  verify_checksums=True, transform=None, smooth=False,
                  metrics=(), sweep=None, tace_threshold=None, where=None, weight=None,
                  by=None, correction="holm", alpha=0.05, max_segments=MAX_SEGMENTS):
    """Calibration report of a Parquet file or dataset directory, scored with Dask.

    Parameters
    ----------
    path : str
        A Parquet file, or a directory whose Parquet files (searched
        recursively in sorted path order, as :func:`fastcal.score_file` does)
        hold the rows in that order; or a URL of one, as
        :func:`fastcal.score_file` takes (``s3://bucket/prefix/``, ...). Workers
        must see the same path: a URL is opened by each worker with the
        credentials of its own environment.
    {columns}
    {options}
    rows_per_partition : int, default 2**22
        Whole row groups of one file are grouped into partitions of about
        this many rows (one row group is never split).
    verify_checksums : bool, default True
        As in :func:`fastcal.score_file`.
    where : str or pyarrow.compute.Expression, optional
        As in :func:`fastcal.score_file`: a filter on the partition columns of
        a Hive-partitioned dataset; the other files are not read.
    weight : str, optional
        The column of the rows' weights, as in :func:`fastcal.score_file`.
    by : str or list of str, optional
        The column(s) of the rows' segment keys, as in
        :func:`fastcal.score_file` (any type; nulls are one segment, key
        ``None``; several columns give tuple keys), read with the row groups.
    {segments}
    Returns
    -------
    CalibrationReport
        Equal to ``fastcal.calibration_report`` on the files' rows
        concatenated in that order, to about 1e-12 relative. Also holds
        ``source``, ``format``, ``n_rows`` and ``passes``, like the report of
        :func:`fastcal.score_file`.
        {segmented}

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
    options = _driver_options(locals())
    if (isinstance(rows_per_partition, bool) or not isinstance(rows_per_partition, int)
            or rows_per_partition < 1):
        msg = f"rows_per_partition must be a positive integer; got {show(rows_per_partition)}"
        raise ValueError(msg)
    columns = by_names(by)
    segments = _segments(locals(), columns)
    path = where_.local(os.fspath(path))  # a file:// URL is its local path
    source = _dataset_source(path, label, prob, rows_per_partition, verify_checksums, where,
                             weight, columns)
    return _run(source, (client, scheduler, workers, timeout), options,
                provenance={"source": where_.shown(path), "format": "parquet"},
                segments=segments)


def _describe(client, scheduler, workers):
    if client is not None:
        return f"client of {client.scheduler.address}"
    if scheduler is not None:
        return f"scheduler {scheduler}"
    if workers is not None:
        return f"local cluster of {workers} workers"
    return "default scheduler"


for _f in (score_dask, score_dataframe, score_dataset):
    _f.__doc__ = _f.__doc__.format(options=_OPTIONS_DOC.strip() + "\n",
                                   columns=_COLUMNS_DOC.strip(),
                                   segments=_SEGMENTS_DOC.strip() + "\n",
                                   segmented=_SEGMENTED_RETURN)
del _f

__all__ = ["connect", "score_dask", "score_dataframe", "score_dataset"]

"""Out-of-core scoring: a file of predictions read chunk by chunk into one accumulator."""

from dataclasses import replace

import numpy as np

from fastcal.inputs import validation as v
from fastcal.inputs.segments import MAX_SEGMENTS
from fastcal.inputs.validation import show
from fastcal.score import Options, score, score_segments
from fastcal.sources.files import FileSource, by_names
from fastcal.sources.io import DEFAULT_CHUNK_ROWS


def score_file(path, *, prob="p", label="y", n_bins=10, edges=None, closed="left",
               strategy="uniform", observed="frac_pos", nan_policy="raise", eps=None,
               ace=False, chunk_rows=None, progress=None, format=None, threads=None,
               logits=False, renormalize=False, ci=None, n_boot=200, seed=0,
               verify_checksums=True, device=None, transform=None, smooth=False,
               metrics=(), sweep=None, tace_threshold=None, where=None, weight=None, by=None,
               correction="holm", alpha=0.05, max_segments=MAX_SEGMENTS):
    """Calibration report of a prediction file, read in chunks (memory bounded by the chunk).

    Parameters
    ----------
    path : str or os.PathLike
        A Parquet, Arrow IPC / Feather, NPY or CSV file, or a directory of
        such files (a Parquet dataset; NPY: one file per column). See
        :mod:`fastcal.sources.io` for the layouts. Or a URL of the same:
        ``s3://``, ``gs://``, ``az://`` / ``abfs://``, ``hf://``,
        ``http(s)://`` or ``file://``, read by ranged requests with the
        credentials of each store's own environment (see the guide's page on
        files); a prefix of objects is a dataset as a directory is.
    prob : str or list of str, default "p"
        The probability column of class 1 (binary). For K classes: a list of
        K column names in class order, a prefix ending in ``*`` (``"p_*"``:
        every column whose name starts with ``p_``, in file order), or one
        fixed-size-list column of K values per row (Parquet, Feather).
    label : str or list of str, default "y"
        The label column: 0/1, or the class index in [0, K). Soft labels: K
        columns holding a label distribution per row (a list in class order,
        or a prefix ending in ``*``), one per probability column; the report
        is then a :class:`~fastcal.reports.soft_report.SoftLabelReport`.
    logits : bool, default False
        The probability columns hold logits (sigmoid for one column, softmax
        across K columns), applied inside the kernel.
    n_bins, edges, closed, observed, nan_policy, eps, renormalize, ci, n_boot, seed, smooth
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
        leaving a core to the reader thread, for Parquet and CSV, which it
        decodes; all of them for NPY and Arrow IPC / Feather, read without
        decoding).
    transform : callable, optional
        A fitted recalibration (:mod:`fastcal.recalibrate`) applied to the
        probability (or, with ``logits=True``, logit) columns of every chunk
        before it is scored.
    where : str or pyarrow.compute.Expression, optional
        A Parquet dataset in Hive layout (directories named ``KEY=VALUE``,
        whose keys are then columns): score only the files whose partition
        values pass this filter, written as text (``"model = 'v3'"``,
        ``"model in ('v2', 'v3') and day >= '2024-05-01'"``) or as a pyarrow
        expression (``pyarrow.compute.field("model") == "v3"``). The other
        files are not opened.
    weight : str, optional
        The column of the rows' weights: the report is weighted as
        :func:`fastcal.calibration_report` with ``sample_weight`` (the same
        numbers as the whole columns in memory, to 1e-12). A weight that is
        negative, NaN or infinite is refused naming the file, the column and
        the row.
    by : str or list of str, optional
        The column(s) of the rows' segment keys (any type: numbers, text,
        dates; nulls are one segment, key ``None``), read with the chunks: the
        result is a :class:`~fastcal.reports.segmented.SegmentedReport` (as
        :func:`fastcal.calibration_report` with ``by=``), each segment's report
        read off its own state in the same one pass (so without ACE, equal-mass
        bins or the ``metrics`` that take more passes: those are refused).
    correction, alpha, max_segments
        With ``by``: as in :func:`fastcal.calibration_report` ("holm" or "bh";
        the verdict's level; more distinct keys than ``max_segments`` are
        refused in one line, before the chunk that brings them is filled).

    Returns
    -------
    CalibrationReport
        With extra attributes ``source`` (the path), ``format``, ``n_rows``
        (rows read, omitted ones included) and ``passes`` (1, or 2 or more
        for equal-mass bins). With ``by``, a
        :class:`~fastcal.reports.segmented.SegmentedReport` whose ``overall``
        has them.

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
    :mod:`fastcal.accumulators.equal_mass`): ACE one more pass, which gathers only the
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
        msg = f"chunk_rows must be a positive integer; got {show(chunk_rows)}"
        raise ValueError(msg)
    if not (_names(prob) and _names(label)):
        msg = (f"prob and label must each be a column name, a list of column names or a "
               f"'prefix*'; got prob={prob!r} and label={label!r}")
        raise ValueError(msg)
    options = Options(n_bins=n_bins, edges=edges, closed=closed, strategy=strategy,
                      observed=observed, nan_policy=nan_policy, eps=eps, ace=ace,
                      threads=threads, ci=ci, n_boot=n_boot, seed=seed, logits=logits,
                      renormalize=renormalize, device=device, transform=transform,
                      smooth=smooth, metrics=metrics, sweep=sweep,
                      tace_threshold=tace_threshold).checked()
    columns = by_names(by)
    source = FileSource(path, prob=prob, label=label, chunk_rows=int(chunk_rows),
                        progress=progress, format=format, verify_checksums=verify_checksums,
                        where=where, weight=weight, by=columns)
    if threads is None:  # the format's default, once the file is opened
        options = replace(options, threads=default_threads(source.format))
    if columns:
        return score_segments(source, options, correction=correction, alpha=alpha,
                              max_segments=max_segments, columns=columns)
    return score(source, options)


def default_threads(format):
    """The fill's threads for a file of ``format`` when ``threads`` is not given: all
    of numba's but one, left to the reader thread, where the reader decodes (Parquet,
    CSV); all of them where it copies bytes without decoding them (NPY; Arrow IPC,
    whose compressed batches are the exception). 1e8 float32 rows, 2-core machine:
    NPY 0.54 -> 0.38 s, Feather 0.56 -> 0.48 s with its batches joined into chunks
    (``fastcal.sources.files.coalesced``)."""
    n = v.check_threads(None)
    return n if format in ("npy", "feather") else max(1, n - 1)


def _names(x):
    """A column name or a list of them."""
    return isinstance(x, str) or (isinstance(x, (list, tuple))
                                  and all(isinstance(c, str) for c in x))


__all__ = ["score_file"]

"""Chunked readers for prediction files: Parquet, Arrow IPC / Feather, NPY and CSV.

Every reader yields the requested columns as 1-D numpy arrays, one chunk of at
most ``chunk_rows`` rows at a time, so memory is bounded by the chunk size,
never by the file:

* Parquet: one file or a directory dataset (all ``*.parquet`` files under it,
  in sorted path order; in Hive layout, ``KEY=VALUE`` directories, the keys
  are columns and ``where=`` chooses files by them: see
  :mod:`fastcal.sources.readers.hive`), read with pyarrow one row group at a
  time, in batches of ``chunk_rows`` rows, only the requested columns, through
  a 1 MiB read buffer, so a row group of any size is never held whole. An
  object's row group is fetched by concurrent ranged requests of the columns
  asked for when they take at most 64 MiB (else as 8 MiB ranged reads). Page checksums
  (written by ``write_page_checksum=True``) are verified by default; a page
  that fails its checksum is an error naming the file (``verify_checksums=False``
  skips the check).
* Arrow IPC / Feather v2: never memory-mapped. For a file, the footer and
  each record batch's metadata are parsed from bytes read with ``os.pread``,
  then each chunk's rows of the columns asked for (numeric, bool or
  fixed-size lists of them) are read as byte ranges, so memory is one chunk
  whatever the batch's size. A batch that is compressed, or a column of
  another type (dictionary, null), is read whole by pyarrow from a plain file
  handle (memory: one batch of the columns asked for). A stream (``.arrows``)
  is read batch by batch from a plain file handle (memory: one record batch).
  A file that shrinks while it is read (checked before each chunk, and any
  short read) is an error naming the file and the first row not read, never
  a SIGBUS.
* NPY (``allow_pickle=False`` always): a structured array (one column per
  field), a 1-D array, a 2-D ``(N, K)`` array (columns ``"0"`` .. ``"K-1"``),
  or a directory of ``.npy`` files with one column per file (named by the file
  stem; a 2-D file ``scores.npy`` gives columns ``"scores:0"`` ..). The header
  is checked with exact integers against the file size before anything else
  is done (a file shorter or longer than its header says is refused), and each
  chunk is read with ordinary reads (never memory-mapped), so
  a file truncated while it is read is an error naming the file and the first
  missing row, not a SIGBUS.
* CSV (``.csv``, or gzip-compressed ``.csv.gz``; a directory may mix both):
  pyarrow's streaming reader, comma-separated; numeric columns are parsed as
  float64. A plain CSV file that does not end in a newline is read with a
  ``UserWarning`` that its last line may be cut (some writers leave the
  newline out, so it is not refused).

Where the files live: a local path, or a URL (``s3://``, ``gs://``, ``az://`` /
``abfs://``, ``hf://``, ``http(s)://``, ``file://``) whose object or prefix is read
by ranged requests through :mod:`fastcal.sources.readers.where`; a prefix is a
directory. Memory maps are never used, locally or not.

A directory is read as one dataset of one format. Its files of other extensions
are not read and a ``UserWarning`` names them (names starting with ``.`` or
``_`` are skipped silently); files of two data formats are an error naming
both unless ``format`` picks one.

Data types. A column has one dtype for the whole dataset: the widest of its
dtypes over the files (``numpy.result_type``; float32 and float64 give
float64), returned by ``reader.dtype(name)``. Chunks of files that store the
column in a narrower dtype are widened to it (exact for float32 to float64), so
every row of a dataset is binned by the same rule, as if the files had been
concatenated. A chunk of an integer column that holds nulls is float64 (nulls
become NaN), as is any column with nulls in a dtype that has no NaN.

Duplicate column names are refused when a duplicated name is asked for.

Errors are ``ValueError`` with a one-line message that names the file, what
was found and what was expected.
"""

import os

from fastcal.sources.readers import where as where_
from fastcal.sources.readers.base import DEFAULT_CHUNK_ROWS, MAX_COLUMNS, Chunk, _check_flag, _stat
from fastcal.sources.readers.csv import CsvReader
from fastcal.sources.readers.feather import FeatherReader
from fastcal.sources.readers.npy import NpyReader
from fastcal.sources.readers.parquet import ParquetReader
from fastcal.sources.readers.paths import FORMATS, detect_format

_READERS = {"parquet": ParquetReader, "feather": FeatherReader, "csv": CsvReader,
            "npy": NpyReader}


def open_reader(path, format=None, *, verify_checksums=True, where=None):
    """A reader for ``path`` (file or directory); format from the extension unless given.

    Parameters
    ----------
    path : str or os.PathLike
        A data file, or a directory of data files of one format.
    format : {"parquet", "feather", "npy", "csv"}, optional
        Default: from the extension (or the files of a directory).
    verify_checksums : bool, default True
        Parquet: check every page against the checksum stored with it (files
        written with ``write_page_checksum=True``); a mismatch is an error.
        Other formats carry no page checksums and ignore it.
    where : str or pyarrow.compute.Expression, optional
        Parquet: a filter on the partition columns of a Hive-partitioned
        directory (see :mod:`fastcal.sources.readers.hive`); the files it leaves
        out are not opened.

    Returns
    -------
    (reader, format)
        ``reader.columns``, ``reader.n_rows`` (None if unknown before reading),
        ``reader.check(names)``, ``reader.dtype(name)`` (the dataset's dtype of
        a column) and ``reader.chunks(names, chunk_rows)`` (:class:`Chunk` s of
        at most ``chunk_rows`` rows).
    """
    path = where_.local(os.fspath(path))  # a file:// URL is its local path
    _check_flag("verify_checksums", verify_checksums)
    if format is not None:
        detect_format(path, format)  # checks the choice before touching the file
    _stat(path)
    fmt = detect_format(path, format)
    if fmt == "parquet":
        return ParquetReader(path, verify_checksums=verify_checksums, where=where), fmt
    if where is not None:
        msg = (f"{where_.shown(path)}: where= filters the partitions of a Parquet dataset; "
               f"this is {fmt} data")
        raise ValueError(msg)
    return _READERS[fmt](path), fmt


__all__ = ["DEFAULT_CHUNK_ROWS", "FORMATS", "MAX_COLUMNS", "Chunk", "CsvReader", "FeatherReader",
           "NpyReader", "ParquetReader", "detect_format", "open_reader"]

"""Reading and writing data files the way fastcal does: the public door for other packages.

Reading: :func:`open_table` opens a table file (Parquet, Feather / Arrow IPC,
NPY, CSV, or a directory of files of one of them; where it lives: a local path
or a URL of an object store or a web server, ``s3://``, ``gs://``, ``az://``,
``abfs://``, ``hf://``, ``http(s)://``, ``file://``) and reads named columns in
chunks of bounded size, each chunk with its global row number and the file and
row it comes from; :func:`open_arrays` opens named arrays of any shape (an
``.npz`` archive, a directory of ``.npy`` files, one ``.npy`` file) and reads
them whole or in chunks of rows. Both apply every format rule of fastcal's
readers (see :mod:`fastcal.sources.io`): an NPY header is checked against the
bytes that hold it before anything is allocated, a file shorter or longer than
its header says is refused, a CSV file without a final newline is read with a
``UserWarning`` that its last line may be cut, Parquet page checksums are
verified, a file that shrinks while it is read is named, and so on. Every
error is one ``ValueError`` line naming the file, what was found and what was
expected.

Columns are read as numbers (float, integer, bool; nulls become NaN) unless
named in ``any_type``: those keep their own type (text and bytes as object
arrays, timestamps and dates as ``datetime64``), as ids need.

Writing: :func:`write_atomically` and :func:`commit` write files whole or not at
all (a temporary file, then a rename), :func:`remove_temporaries` removes what an
interrupted write left, and :func:`json_text` writes JSON as fastcal's reports
do (NaN as null, infinities as ``"inf"`` / ``"-inf"``).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from fastcal.io import open_table
>>> path = os.path.join(tempfile.mkdtemp(), "t.npy")
>>> np.save(path, np.arange(10.0).reshape(5, 2))
>>> table = open_table(path)
>>> table.columns, table.n_rows
(['0', '1'], 5)
>>> [(c.start, c.columns[0].tolist()) for c in table.chunks(["1"], chunk_rows=2)]
[(0, [1.0, 3.0]), (2, [5.0, 7.0]), (4, [9.0])]
"""

import os

from fastcal import _atomic
from fastcal.reports._json import json_text

__all__ = ["ARRAY_FORMATS", "DEFAULT_CHUNK_ROWS", "FORMATS", "Arrays", "Chunk", "Table",
           "commit", "detect_format", "exists", "is_dir", "is_special", "json_text",
           "open_arrays", "open_table", "read_columns", "remove_temporaries",
           "write_atomically"]

#: Formats :func:`open_arrays` reads.
ARRAY_FORMATS = ("npz", "npy")

# The readers are imported on first use: writing a file or JSON needs none of them.
_FROM_READERS = ("Chunk", "DEFAULT_CHUNK_ROWS", "FORMATS", "detect_format")


def __getattr__(name):
    if name in _FROM_READERS:
        from fastcal.sources import io as readers

        value = getattr(readers, name)
        globals()[name] = value
        return value
    msg = f"module 'fastcal.io' has no attribute {name!r}"
    raise AttributeError(msg)

#: :func:`read_columns` reads at most this many rows unless told otherwise.
MAX_WHOLE_ROWS = 1 << 26


def _chunk_rows(chunk_rows):
    if chunk_rows is None:
        from fastcal.sources.io import DEFAULT_CHUNK_ROWS

        return DEFAULT_CHUNK_ROWS
    if not isinstance(chunk_rows, int) or isinstance(chunk_rows, bool) or chunk_rows < 1:
        msg = f"chunk_rows must be an integer >= 1, got {chunk_rows!r}"
        raise ValueError(msg)
    return chunk_rows


def _names(names, what="names"):
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not all(isinstance(n, str) for n in names):
        msg = f"{what} must be column names (strings), got {names!r}"
        raise ValueError(msg)
    return names


class Table:
    """A table file (or a directory of them) opened by :func:`open_table`.

    Attributes
    ----------
    path : str
        The path given.
    format : str
        One of :data:`FORMATS`.
    columns : list of str
        The column names of the (first) file.
    n_rows : int or None
        Rows in all files, or None where unknown before reading (CSV, Arrow streams).
    """

    def __init__(self, reader, format):
        self._reader = reader
        self.path = reader.path
        self.format = format
        self.columns = list(reader.columns)
        self.n_rows = reader.n_rows

    def __repr__(self):
        return f"Table({self.path!r}, format={self.format!r}, columns={len(self.columns)})"

    def check(self, names, *, any_type=()):
        """Every name is a column of every file, once; numeric unless in ``any_type``.

        Raises ValueError (one line naming the file) otherwise.
        """
        names, any_type = _names(names), set(_names(any_type, "any_type"))
        self._reader.check(names, any_type)

    def dtype(self, name):
        """The numpy dtype the chunks of numeric column ``name`` have (widest over the files)."""
        return self._reader.dtype(name)

    def chunks(self, names, chunk_rows=None, *, any_type=()):
        """The columns ``names`` in :class:`Chunk` s of at most ``chunk_rows`` rows (default
        :data:`DEFAULT_CHUNK_ROWS`), in file order.

        Each chunk's ``columns`` are 1-D numpy arrays in the order of ``names``;
        ``start`` is the global row number (from 0) of its first row, ``file``
        and ``file_start`` the file and its row there. The columns are checked
        first (:meth:`check`).
        """
        names, any_type = _names(names), set(_names(any_type, "any_type"))
        chunk_rows = _chunk_rows(chunk_rows)
        self._reader.check(names, any_type)
        return self._reader.chunks(names, chunk_rows, any_type)


def open_table(path, format=None, *, verify_checksums=True, where=None):
    """Open a table file, or a directory of files of one format, for reading in chunks.

    Parameters
    ----------
    path : str or os.PathLike
        A Parquet, Feather / Arrow IPC, NPY or CSV (``.csv``, ``.csv.gz``) file,
        or a directory of files of one of these formats; or a URL of one
        (``s3://``, ``gs://``, ``az://`` / ``abfs://``, ``hf://``, ``http(s)://``,
        ``file://``; a prefix of objects is a directory). The partition columns
        of a Parquet dataset in Hive layout (directories named ``KEY=VALUE``)
        are columns too.
    format : {"parquet", "feather", "npy", "csv"}, optional
        Default: from the extension (or the files of a directory).
    verify_checksums : bool, default True
        Parquet: check each page against the checksum stored with it.
    where : str or pyarrow.compute.Expression, optional
        A Parquet dataset in Hive layout: only the files whose partition values
        pass this filter (``"model = 'v3'"``) are read.

    Returns
    -------
    Table

    Raises
    ------
    ValueError
        One line naming the file: no such file, a format that cannot be told,
        a file that does not read as its format says, and every format rule of
        fastcal's readers.
    """
    from fastcal.sources.io import open_reader

    reader, fmt = open_reader(path, format, verify_checksums=verify_checksums, where=where)
    return Table(reader, fmt)


def read_columns(table, names, *, any_type=(), max_rows=MAX_WHOLE_ROWS):
    """The columns ``names`` of ``table`` (a :class:`Table` or a path) whole, as a dict.

    Bounded: a table with more than ``max_rows`` rows is refused, before
    reading when its row count is known, else as soon as the rows read pass it.
    """
    if not isinstance(table, Table):
        table = open_table(table)
    names = _names(names)
    if table.n_rows is not None and table.n_rows > max_rows:
        msg = f"{table.path}: {table.n_rows} rows; at most {max_rows} are read whole"
        raise ValueError(msg)
    import numpy as np

    parts = {n: [] for n in names}
    seen = 0
    for ch in table.chunks(names, min(_chunk_rows(None), max(max_rows, 1)), any_type=any_type):
        seen += len(ch.columns[0])
        if seen > max_rows:
            msg = f"{table.path}: more than {max_rows} rows; at most {max_rows} are read whole"
            raise ValueError(msg)
        for n, c in zip(names, ch.columns):
            parts[n].append(c)
    return {n: (np.concatenate(p) if p else np.empty(0)) for n, p in parts.items()}


class Arrays:
    """Named arrays opened by :func:`open_arrays`.

    Attributes
    ----------
    path : str
        The path given.
    format : str
        ``"npz"`` (an archive) or ``"npy"`` (a file or a directory of files).
    shapes : dict
        ``{name: shape}`` read from the headers, in the archive's or the
        directory's order.
    dtypes : dict
        ``{name: numpy dtype}`` from the headers.
    """

    def __init__(self, arrays):
        self._arrays = arrays
        self.path = arrays.path
        self.format = arrays.format
        self.shapes = {n: info.shape for n, info in arrays.arrays.items()}
        self.dtypes = {n: info.dtype for n, info in arrays.arrays.items()}

    def __repr__(self):
        return f"Arrays({self.path!r}, {', '.join(self.shapes)})"

    def where(self, name):
        """How messages name array ``name``'s file (and member)."""
        return self._arrays.arrays[name].where

    def read(self, name, *, max_bytes=1 << 30):
        """Array ``name`` whole (native byte order); more than ``max_bytes`` is refused
        before anything is allocated."""
        return self._arrays.read(name, max_bytes)

    def chunks(self, names, chunk_rows=None):
        """The arrays ``names`` (one length along the first axis) in :class:`Chunk` s of at
        most ``chunk_rows`` rows (default :data:`DEFAULT_CHUNK_ROWS`): ``columns`` holds each
        array's rows a..b, ``start`` is a."""
        names = _names(names)
        return self._arrays.chunks(names, _chunk_rows(chunk_rows))


def open_arrays(path, format=None):
    """Open named arrays: a ``.npz`` archive, a directory of ``.npy`` files, one ``.npy`` file.

    Every header is read and checked (see the module's notes); no data is read.

    Parameters
    ----------
    path : str or os.PathLike
        A local path, or a URL as :func:`open_table` takes.
    format : {"npz", "npy"}, optional
        Default: ``npz`` for a ``.npz`` file, else ``npy``.

    Returns
    -------
    Arrays
    """
    from fastcal.sources.readers.arrays import NpyArrays

    return Arrays(NpyArrays(os.fspath(path), format))


def exists(path):
    """Whether a local path (``os.path.lexists``) or a URL's object or prefix exists.

    A URL's store is asked (one request); its faults (access denied, no connection)
    are one ``ValueError`` line naming the URL.
    """
    from fastcal.sources.readers import where

    path = where.local(os.fspath(path))
    if not where.is_url(path):
        return os.path.lexists(path)
    from pyarrow import fs as pafs

    return where.info(path).type != pafs.FileType.NotFound


def is_dir(path):
    """Whether a local path or a URL is a directory (for a URL: a prefix of objects)."""
    from fastcal.sources.readers import where

    return where.isdir(where.local(os.fspath(path)))


def write_atomically(path, write, *, mode="wb"):
    """Create ``path`` by calling ``write(fh)`` on a temporary file beside it, then a rename.

    A reader never sees a partial file; a failed write leaves none and an
    existing file untouched. FIFOs and devices are written through; a symbolic
    link is followed (the link stays); an existing file keeps its mode.
    """
    return _atomic.write_atomically(path, write, mode=mode)


def commit(outputs):
    """Write ``[(path, bytes)]`` all together, or none of them (``"-"`` is standard output,
    written last, as are FIFOs and devices)."""
    _atomic.commit(outputs)


def remove_temporaries():
    """Remove the temporary files of writes that an error or a signal interrupted."""
    _atomic.cleanup()


def is_special(path):
    """True for an existing FIFO, character or block device (written through, not replaced)."""
    return _atomic.is_special(path)

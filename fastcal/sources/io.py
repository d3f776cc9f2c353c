"""Chunked readers for prediction files: Parquet, Arrow IPC / Feather, NPY and CSV.

Every reader yields the requested columns as 1-D numpy arrays, one chunk of at
most ``chunk_rows`` rows at a time, so memory is bounded by the chunk size,
never by the file:

* Parquet: one file or a directory dataset (all ``*.parquet`` files under it,
  in sorted path order; hive partition keys in directory names are not
  columns), read with pyarrow one row group at a time, in batches of
  ``chunk_rows`` rows, only the requested columns, through a 1 MiB read
  buffer, so a row group of any size is never held whole. Page checksums
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
  is done (a file shorter or longer than its header says is refused), and each chunk is read with ordinary reads (never memory-mapped), so
  a file truncated while it is read is an error naming the file and the first
  missing row, not a SIGBUS.
* CSV (``.csv``, or gzip-compressed ``.csv.gz``; a directory may mix both):
  pyarrow's streaming reader, comma-separated; numeric columns are parsed as
  float64. A plain CSV file that does not end in a newline is read with a
  ``UserWarning`` that its last line may be cut (some writers leave the
  newline out, so it is not refused).

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

import errno
import math
import os
import re
import struct
from dataclasses import dataclass

import numpy as np

FORMATS = ("parquet", "feather", "npy", "csv")

_EXTENSIONS = {
    ".parquet": "parquet", ".pq": "parquet", ".parq": "parquet",
    ".feather": "feather", ".arrow": "feather", ".ipc": "feather", ".arrows": "feather",
    ".npy": "npy",
    ".csv": "csv", ".csv.gz": "csv",
}

DEFAULT_CHUNK_ROWS = 1 << 18  # 256Ki rows: a chunk stays in cache between reader and kernel

# An NPY (N, K) array gives K columns; more than this is refused before any is listed.
MAX_COLUMNS = 1 << 16
# Parquet: pages are read through a buffer of this size, not a whole column chunk at once.
_PARQUET_BUFFER = 1 << 20
# NPY: a 2-D C-order window is read in pieces of about this many bytes.
_NPY_PIECE = 8 << 20


@dataclass
class Chunk:
    """One chunk: the columns asked for, where it comes from, and its first row."""

    columns: tuple   # 1-D numpy arrays, in the order requested
    file: str        # the file the rows come from
    start: int       # global row number (0-based) of the chunk's first row
    file_start: int  # row number of the first row within ``file``


def _fail(path, what):
    msg = f"{path}: {what}"
    raise ValueError(msg)


def _one_line(exc):
    """The first line of an exception's message, stripped."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _is_data_file(name):
    return not name.startswith((".", "_"))


def _walk_error(exc):
    raise exc


def _list_dir(path):
    out = []
    try:
        for root, dirs, files in os.walk(path, onerror=_walk_error):
            dirs[:] = sorted(d for d in dirs if _is_data_file(d))
            out.extend(os.path.join(root, f) for f in sorted(files) if _is_data_file(f))
    except OSError as exc:
        _fail_os(exc.filename or path, exc, "list this directory")
    return out


def _fail_os(path, exc, doing):
    """One line for an OSError met while trying to ``doing`` ``path``."""
    code = getattr(exc, "errno", None)
    if code == errno.ELOOP:
        _fail(path, f"symlink loop: cannot {doing} (too many levels of symbolic links); "
                    "expected a link that ends at a file or directory")
    if code in (errno.EACCES, errno.EPERM):
        _fail(path, f"permission denied: cannot {doing}; expected read permission")
    if code == errno.ENOENT:
        if os.path.islink(path):
            _fail(path, f"broken symlink: it points to {os.readlink(path)!r}, which does not "
                        "exist")
        _fail(path, "no such file or directory")
    reason = exc.strerror or _one_line(exc)
    _fail(path, f"cannot {doing}: {reason}")


def _stat(path):
    """``os.stat(path)``, any failure one line (no such file, symlink loop, permission)."""
    try:
        return os.stat(path)
    except OSError as exc:
        _fail_os(path, exc, "read it")


def _ext(name):
    """The extension that decides a file's format: ``.csv.gz`` as one, else the last one."""
    low = name.lower()
    if low.endswith(".csv.gz"):
        return ".csv.gz"
    return os.path.splitext(low)[1]


def _by_format(files):
    """{format: [files]} for the data files among ``files``, and the other files."""
    found, other = {}, []
    for f in files:
        fmt = _EXTENSIONS.get(_ext(f))
        if fmt is None:
            other.append(f)
        else:
            found.setdefault(fmt, []).append(f)
    return found, other


def _some(path, files, k=3):
    """Up to ``k`` file names relative to ``path``, then how many more."""
    names = [os.path.relpath(f, path) for f in files[:k]]
    more = f" and {len(files) - k} more" if len(files) > k else ""
    return ", ".join(names) + more


def detect_format(path, format=None):
    """The format of ``path``: explicit, from the extension, or from a directory's files."""
    if format is not None:
        if format not in FORMATS:
            msg = f"format must be one of {', '.join(repr(f) for f in FORMATS)}; got {format!r}"
            raise ValueError(msg)
        return format
    if os.path.isdir(path):
        found, _ = _by_format(_list_dir(path))
        if not found:
            _fail(path, "directory holds no data files (.parquet, .feather/.arrow, .npy, .csv "
                        "or .csv.gz)")
        if len(found) > 1:
            kinds = "; ".join(f"{len(fs)} {fmt} ({_some(path, fs)})"
                              for fmt, fs in sorted(found.items()))
            _fail(path, f"directory mixes formats: {kinds}; expected one format (pass format= "
                        "to choose one; the other files are then ignored)")
        return next(iter(found))
    ext = _ext(path)
    if ext not in _EXTENSIONS:
        _fail(path, f"cannot tell the format from the extension {ext!r}; pass format= "
                    f"(one of {', '.join(FORMATS)})")
    return _EXTENSIONS[ext]


def _files_of(path, format):
    """The data files of a file or directory path, for a given format.

    Files of a directory in other formats or with other extensions are not
    read: a ``UserWarning`` names them (names starting with ``.`` or ``_``,
    such as ``_SUCCESS``, are skipped silently as dataset metadata).
    """
    import stat
    import warnings

    if not stat.S_ISDIR(_stat(path).st_mode):
        return [path]
    found, other = _by_format(_list_dir(path))
    files = found.pop(format, [])
    if not files:
        _fail(path, f"directory holds no {format} data files")
    ignored = sorted(other + [f for fs in found.values() for f in fs])
    if ignored:
        what = "1 file that is" if len(ignored) == 1 else f"{len(ignored)} files that are"
        warnings.warn(f"{path}: ignored {what} not {format} data: {_some(path, ignored)}",
                      UserWarning, stacklevel=2)
    for f in files:
        _stat(f)  # a symlink loop or a broken link among them: one line naming it
    return files


# -- type checks -------------------------------------------------------------

TEXT_HINT = "; text labels such as 'yes'/'no' must be written as 0/1 (or bool) first"


def _check_arrow_type(path, name, typ):
    import pyarrow as pa

    if pa.types.is_fixed_size_list(typ) and (pa.types.is_floating(typ.value_type)
                                             or pa.types.is_integer(typ.value_type)):
        return  # K class probabilities (or logits) per row
    if (pa.types.is_floating(typ) or pa.types.is_integer(typ) or pa.types.is_boolean(typ)
            or pa.types.is_null(typ)):
        return
    if pa.types.is_dictionary(typ) and (pa.types.is_floating(typ.value_type)
                                        or pa.types.is_integer(typ.value_type)):
        return
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        _fail(path, f"column {name!r} has type {typ}; expected a numeric (float, integer or "
                    f"bool) column{TEXT_HINT}")
    _fail(path, f"column {name!r} has type {typ}; expected a numeric (float, integer or bool) "
                "column")


def _check_numpy_type(path, name, dtype):
    if dtype.kind in "fiub":
        return
    _fail(path, f"column {name!r} has dtype {dtype}; expected a numeric (float, integer or bool) "
                "column" + (TEXT_HINT if dtype.kind in "USO" else ""))


def _missing(path, missing, available):
    cols = ", ".join(repr(c) for c in available)
    what = "column" if len(missing) == 1 else "columns"
    _fail(path, f"no {what} {', '.join(repr(m) for m in missing)}; the file has columns: {cols}")


def _check_unique(path, names, available):
    """No name asked for appears more than once among the file's columns."""
    available = list(available)
    for n in dict.fromkeys(names):
        k = available.count(n)
        if k > 1:
            _fail(path, f"column {n!r} appears {k} times; expected each column name once "
                        "(rename the duplicates)")


def _check_schema(path, names, schema):
    """Every name is a column of the Arrow schema, once, of a numeric type."""
    missing = [n for n in names if n not in schema.names]
    if missing:
        _missing(path, missing, schema.names)
    _check_unique(path, names, schema.names)
    for n in names:
        _check_arrow_type(path, n, schema.field(n).type)


def _numpy_dtype(typ):
    """The numpy dtype a chunk of an Arrow column of type ``typ`` has (without nulls)."""
    import pyarrow as pa

    if pa.types.is_fixed_size_list(typ) or pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_boolean(typ):
        return np.dtype(np.uint8)
    if pa.types.is_null(typ):
        return np.dtype(np.float64)
    return np.dtype(_NUMPY_OF_ARROW.get(str(typ), np.float64))


def _widest(dtypes):
    """The dtype every file's values fit in: float32 and float64 give float64."""
    return np.result_type(*dtypes)


def _widen(col, dtype):
    """A chunk's column in the dataset's dtype (a no-op when it already is)."""
    if dtype is None or col.dtype == dtype:
        return col
    return col.astype(np.result_type(col.dtype, dtype))


_NUMPY_OF_ARROW = {
    "halffloat": np.float16, "float": np.float32, "double": np.float64,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
}


def _arrow_to_numpy(arr):
    """An Arrow array or chunked array as a numpy array; nulls become NaN.

    A numeric array without nulls is viewed in place (zero copy, read-only).
    Conversion goes through the buffers rather than ``to_numpy`` because that
    imports pandas, a second of start-up for a small file.
    """
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_fixed_size_list(arr.type):
        # (rows, K): the child values of this slice, one row per list
        if arr.null_count:
            msg = f"{arr.null_count} rows of a list column are null; every row needs K values"
            raise ValueError(msg)
        k = arr.type.list_size
        return _arrow_to_numpy(arr.flatten()).reshape(len(arr), k)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_null(arr.type):
        return np.full(len(arr), np.nan)
    if pa.types.is_boolean(arr.type) or arr.null_count:
        import pyarrow.compute as pc  # only here: a tenth of a second to import

    if pa.types.is_boolean(arr.type):
        arr = pc.cast(arr, pa.uint8())
    if arr.null_count:
        if not pa.types.is_floating(arr.type) or pa.types.is_float16(arr.type):
            arr = pc.cast(arr, pa.float64())
        arr = pc.fill_null(arr, float("nan"))
    dtype = np.dtype(_NUMPY_OF_ARROW[str(arr.type)])
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr),
                         offset=arr.offset * dtype.itemsize)


# -- readers -----------------------------------------------------------------

class _Reader:
    """Base: ``columns`` lists the available names; ``chunks(names, rows)`` yields Chunks."""

    def __init__(self, path):
        self.path = path
        self.columns = []
        self.n_rows = None  # None if unknown before reading (CSV)

    def check(self, names):
        missing = [n for n in names if n not in self.columns]
        if missing:
            _missing(self.path, missing, self.columns)

    def dtype(self, name):
        """The dtype of column ``name`` for the whole dataset: the widest over its files."""
        self.check([name])
        return self._dtype(name)

    def _dtype(self, name):
        raise NotImplementedError

    def chunks(self, names, chunk_rows):
        raise NotImplementedError


class ParquetReader(_Reader):
    """A Parquet file or dataset directory.

    ``verify_checksums`` (default True) checks every page against the CRC the
    writer stored with it (``write_page_checksum=True``); pages written without
    one are read as they are.
    """

    def __init__(self, path, *, verify_checksums=True):
        super().__init__(path)
        import pyarrow.parquet as pq

        self.verify_checksums = _check_flag("verify_checksums", verify_checksums)
        self.files = _files_of(path, "parquet")
        self._meta = []
        self._schemas = []
        for f in self.files:
            if os.path.getsize(f) == 0:
                _fail(f, "file is empty (0 bytes)")
            try:
                pf = pq.ParquetFile(f)
            except Exception as exc:
                _fail(f, f"not a readable Parquet file: {_one_line(exc)}")
            self._schemas.append(pf.schema_arrow)
            self._meta.append(pf.metadata.num_rows)
            pf.close()
        self.schema = self._schemas[0]
        self.columns = list(self.schema.names)
        self.n_rows = int(sum(self._meta))

    def check(self, names):
        super().check(names)
        for f, s in zip(self.files, self._schemas):
            _check_schema(f, names, s)

    def _dtype(self, name):
        return _widest([_numpy_dtype(s.field(name).type) for s in self._schemas
                        if name in s.names])

    def _open(self, f):
        import pyarrow.parquet as pq

        # No pre-buffering and a small read buffer: pages are read as they are decoded,
        # not a whole column chunk of the row group at once.
        return pq.ParquetFile(f, pre_buffer=False, buffer_size=_PARQUET_BUFFER,
                              page_checksum_verification=self.verify_checksums)

    def chunks(self, names, chunk_rows):
        wanted = list(dict.fromkeys(names))
        dtypes = {n: self._dtype(n) if len(self.files) > 1 else None for n in wanted}
        start = 0
        for f, schema in zip(self.files, self._schemas):
            _check_unique(f, names, schema.names)
            file_start = 0
            try:
                pf = self._open(f)
                # One row group at a time, in batches of chunk_rows: iter_batches over the
                # whole file keeps what it has read (pyarrow 26), one row group does not.
                for g in range(pf.metadata.num_row_groups):
                    for batch in pf.iter_batches(batch_size=chunk_rows, row_groups=[g],
                                                 columns=wanted, use_threads=True):
                        idx = {n: batch.schema.get_field_index(n) for n in wanted}
                        cols = tuple(_widen(_arrow_to_numpy(batch.column(idx[n])), dtypes[n])
                                     for n in names)
                        n = batch.num_rows
                        batch = None
                        yield Chunk(cols, f, start, file_start)
                        start += n
                        file_start += n
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{f}:"):
                    raise
                text = _one_line(exc)
                if "checksum" in text.lower():
                    _fail(f, f"corrupt data page near row {file_start}: {text}; expected the "
                             "page checksums stored in the file to match (verify_checksums="
                             "False, --no-verify-checksums, reads it anyway)")
                _fail(f, f"cannot read Parquet data near row {file_start}: {text}")
            if file_start != pf.metadata.num_rows:
                _fail(f, f"read {file_start} rows but the footer says {pf.metadata.num_rows}")


# -- Arrow IPC files: layout parsed from bytes read with ordinary reads ------------------
#
# An IPC file is "ARROW1" + padding, the messages (schema, dictionaries, record batches),
# a flatbuffer footer listing every batch as a Block (offset, metadata length, body
# length), the footer's length and "ARROW1". A record batch message's metadata lists
# one FieldNode (length, null count) per field and one Buffer (offset, length in the
# body) per buffer, depth first over the schema. Reading these few hundred bytes with
# os.pread, and then only the byte ranges of the rows and columns of one chunk, keeps
# memory bounded by the chunk without a memory map: a file cut while it is read gives a
# short read (a message), never a SIGBUS.

_IPC_MAGIC = b"ARROW1"
_BLOCK = struct.Struct("<qi4xq")   # Block: offset, metaDataLength, (pad), bodyLength
_PAIR = struct.Struct("<qq")       # FieldNode (length, null_count); Buffer (offset, length)
_RECORD_BATCH = 3                  # MessageHeader union: RecordBatch


class _Corrupt(Exception):
    """The IPC layout does not parse: the caller falls back to pyarrow's own reader."""


def _unpack(fmt, buf, pos):
    if pos < 0 or pos + fmt.size > len(buf):
        raise _Corrupt
    return fmt.unpack_from(buf, pos)


_U16, _U32, _I32 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<i")
_I64, _I16, _U8 = struct.Struct("<q"), struct.Struct("<h"), struct.Struct("<B")


class _Table:
    """A flatbuffer table: scalars, sub-tables and vectors of structs by field number."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        self.vt = pos - _unpack(_I32, buf, pos)[0]
        self.vlen = _unpack(_U16, buf, self.vt)[0]

    def _off(self, k):
        i = 4 + 2 * k
        return _unpack(_U16, self.buf, self.vt + i)[0] if i + 2 <= self.vlen else 0

    def scalar(self, k, fmt, default=0):
        o = self._off(k)
        return _unpack(fmt, self.buf, self.pos + o)[0] if o else default

    def _target(self, k):
        o = self._off(k)
        if not o:
            return None
        p = self.pos + o
        return p + _unpack(_U32, self.buf, p)[0]

    def table(self, k):
        p = self._target(k)
        return None if p is None else _Table(self.buf, p)

    def structs(self, k, fmt):
        p = self._target(k)
        if p is None:
            return []
        n = _unpack(_U32, self.buf, p)[0]
        if p + 4 + n * fmt.size > len(self.buf):
            raise _Corrupt
        return [fmt.unpack_from(self.buf, p + 4 + i * fmt.size) for i in range(n)]


def _root(buf, start=0):
    return _Table(buf, start + _unpack(_U32, buf, start)[0])


def _pread_all(fd, n, pos):
    """Exactly ``n`` bytes at ``pos`` into a new uint8 array, or None on a short read."""
    out = np.empty(n, dtype=np.uint8)
    view = memoryview(out)
    got = 0
    while got < n:
        k = os.preadv(fd, [view[got:]], pos + got)
        if k == 0:
            return None
        got += k
    return out


def _ipc_blocks(fd, size):
    """The record batch Blocks (offset, metadata length, body length) of an IPC file, and
    whether its schema is big-endian (read by pyarrow then, which swaps the bytes)."""
    if size < 8 + 10:
        raise _Corrupt
    tail = _pread_all(fd, 10, size - 10)
    if tail is None or tail[4:].tobytes() != _IPC_MAGIC:
        raise _Corrupt
    n = int(_I32.unpack_from(tail, 0)[0])
    if n <= 0 or n > size - 18:
        raise _Corrupt
    footer = _pread_all(fd, n, size - 10 - n)
    if footer is None:
        raise _Corrupt
    root = _root(footer.tobytes())
    schema = root.table(1)
    big_endian = schema is None or schema.scalar(0, _I16) != 0
    blocks = root.structs(3, _BLOCK)
    for off, meta, body in root.structs(2, _BLOCK) + blocks:  # dictionaries and batches
        if off < 8 or meta <= 0 or body < 0 or off + meta + body > size:
            raise _Corrupt
    return blocks, big_endian


def _ipc_batch(fd, block):
    """(rows, nodes, buffers, compressed, body offset) of one record batch, from its metadata."""
    off, meta, body = block
    head = _pread_all(fd, meta, off)
    if head is None:
        raise _Corrupt
    head = head.tobytes()
    start = 8 if head[:4] == b"\xff\xff\xff\xff" else 4  # continuation marker (format >= 0.15)
    msg = _root(head, start)
    if msg.scalar(1, _U8) != _RECORD_BATCH or msg.scalar(3, _I64) != body:
        raise _Corrupt
    _verify_message(head, msg)
    rb = msg.table(2)
    if rb is None:
        raise _Corrupt
    rows = rb.scalar(0, _I64)
    nodes, bufs = rb.structs(1, _PAIR), rb.structs(2, _PAIR)
    for b_off, b_len in bufs:
        if b_off < 0 or b_len < 0 or b_off + b_len > body:
            raise _Corrupt
    return rows, nodes, bufs, rb.table(3) is not None, off + meta


def _verify_message(head, msg):
    """pyarrow's checks of a message's metadata (flatbuffer verifier, metadata version,
    lengths), run on the metadata alone: a copy whose body length is set to 0."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    data = bytearray(head)
    o = msg._off(3)
    if o:
        data[msg.pos + o:msg.pos + o + 8] = bytes(8)
    try:
        m = ipc.read_message(pa.py_buffer(bytes(data)))
    except Exception:
        raise _Corrupt from None
    if m.type != "record batch":
        raise _Corrupt


def _lengths_agree(typ, nodes, ni, rows):
    """Whether the field at node ``ni`` (and a fixed-size list's values) holds ``rows`` rows,
    with a null count in range; else pyarrow's own reader judges the batch."""
    import pyarrow as pa

    if ni >= len(nodes):
        return False
    length, nulls = nodes[ni]
    if length != rows or not 0 <= nulls <= length:
        return False
    if pa.types.is_fixed_size_list(typ):
        return _lengths_agree(typ.value_type, nodes, ni + 1, rows * typ.list_size)
    return True


def _type_layout(typ):
    """(field nodes, buffers) that a column of ``typ`` takes in a record batch, children
    included; None for a type whose layout is not listed here (read by pyarrow instead)."""
    import pyarrow as pa

    t = pa.types
    if t.is_null(typ):
        return 1, 0
    if (t.is_boolean(typ) or t.is_integer(typ) or t.is_floating(typ) or t.is_decimal(typ)
            or t.is_temporal(typ) or t.is_fixed_size_binary(typ) or t.is_dictionary(typ)):
        return 1, 2
    if t.is_string(typ) or t.is_binary(typ) or t.is_large_string(typ) or t.is_large_binary(typ):
        return 1, 3
    own = None
    if t.is_list(typ) or t.is_large_list(typ) or t.is_map(typ):
        own = (1, 2)
    elif t.is_fixed_size_list(typ) or t.is_struct(typ):
        own = (1, 1)
    if own is None:
        return None
    nodes, bufs = own
    for i in range(typ.num_fields):
        sub = _type_layout(typ.field(i).type)
        if sub is None:
            return None
        nodes, bufs = nodes + sub[0], bufs + sub[1]
    return nodes, bufs


def _direct(typ):
    """Whether the reader builds chunks of a column of ``typ`` from byte ranges itself."""
    import pyarrow as pa

    t = pa.types
    if t.is_fixed_size_list(typ):
        typ = typ.value_type
    return t.is_boolean(typ) or t.is_integer(typ) or t.is_floating(typ)


def _open_plain(f):
    import pyarrow as pa

    try:
        return pa.OSFile(f, "rb")
    except Exception as exc:
        _fail(f, f"cannot open: {_one_line(exc)}")


def _size_now(f):
    """The file's size now (0 if it is gone)."""
    try:
        return os.path.getsize(f)
    except OSError:
        return 0


def _check_size(f, now, size, row):
    """A file that shrank since it was opened: one line with the first row not read."""
    if now < size:
        _fail(f, f"file shrank while being read: it had {size} bytes, now {now}; rows from "
                 f"{row} on cannot be read (expected a file that does not change while it "
                 "is scored)")


class FeatherReader(_Reader):
    def __init__(self, path):
        super().__init__(path)
        self.files = _files_of(path, "feather")
        import pyarrow as pa

        self._schemas = []
        self._sizes = []    # each file's size when opened: a file that shrinks is named
        self._streams = []  # whether each file is an IPC stream (else an IPC file)
        n_rows = 0
        for f in self.files:
            reader, handle = self._open(f)
            try:
                self._sizes.append(handle.size())
                self._schemas.append(reader.schema)
                self._schemas[-1].names  # noqa: B018 - names that are not UTF-8 fail here
                self._streams.append(not isinstance(reader, pa.ipc.RecordBatchFileReader))
                if n_rows is not None and not self._streams[-1]:
                    n_rows += self._count_rows(f, reader)
                else:
                    n_rows = None  # stream format: unknown until read
            except Exception as exc:
                _fail(f, f"not a readable Arrow IPC / Feather file: {_one_line(exc)}")
            finally:
                handle.close()
        self.schema = self._schemas[0]
        self.columns = list(self.schema.names)
        self.n_rows = n_rows

    @staticmethod
    def _open(f):
        """(reader, handle): an IPC file or, failing that, an IPC stream, over a plain file
        handle (never a memory map); opening reads the footer and schema, no batch."""
        import pyarrow.ipc as ipc

        if os.path.getsize(f) == 0:
            _fail(f, "file is empty (0 bytes)")
        for opener in (ipc.open_file, ipc.open_stream):
            handle = _open_plain(f)
            try:
                return opener(handle), handle
            except Exception as exc:
                handle.close()
                error = exc
        with open(f, "rb") as fh:
            if fh.read(4) == b"FEA1":
                _fail(f, "a Feather V1 file (a format pyarrow has deprecated); expected Feather "
                         "V2 / Arrow IPC: rewrite it with pyarrow.feather.write_feather("
                         "pyarrow.feather.read_table(path), new_path)")
        _fail(f, f"not a readable Arrow IPC / Feather file: {_one_line(error)}")

    @staticmethod
    def _count_rows(f, reader):
        """Rows of an IPC file from its batches' metadata (read with ordinary reads)."""
        fd = os.open(f, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            return sum(_ipc_batch(fd, b)[0] for b in _ipc_blocks(fd, size)[0])
        except _Corrupt:
            return reader.count_rows()
        finally:
            os.close(fd)

    def check(self, names):
        super().check(names)
        for f, s in zip(self.files, self._schemas):
            _check_schema(f, names, s)

    def _dtype(self, name):
        return _widest([_numpy_dtype(s.field(name).type) for s in self._schemas
                        if name in s.names])

    def chunks(self, names, chunk_rows):
        dtypes = {n: self._dtype(n) if len(self.files) > 1 else None for n in names}
        start = 0
        for f, schema, size, stream in zip(self.files, self._schemas, self._sizes,
                                           self._streams):
            _check_unique(f, names, schema.names)
            parts = (self._stream_parts if stream else self._file_parts)(f, schema, size,
                                                                        names, chunk_rows)
            file_start = 0
            try:
                for part in parts:
                    cols = tuple(_widen(c, dtypes[n]) for c, n in zip(part, names))
                    yield Chunk(cols, f, start, file_start)
                    start += len(cols[0])
                    file_start += len(cols[0])
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{f}:"):
                    raise
                _check_size(f, _size_now(f), size, file_start)  # cut since it was opened?
                _fail(f, f"cannot read Arrow data near row {file_start}: {_one_line(exc)}")
            finally:
                parts.close()

    @staticmethod
    def _columns(part, names):
        idx = [part.schema.get_field_index(n) for n in names]
        return tuple(_arrow_to_numpy(part.column(i)) for i in idx)

    def _stream_parts(self, f, schema, size, names, chunk_rows):
        """An IPC stream, batch by batch from a file handle (memory: one batch)."""
        import pyarrow.ipc as ipc

        row = 0
        handle = _open_plain(f)
        try:
            _check_size(f, handle.size(), size, row)
            try:
                reader = ipc.open_stream(handle)
            except Exception as exc:
                _check_size(f, handle.size(), size, row)
                _fail(f, f"not a readable Arrow IPC / Feather file: {_one_line(exc)}")
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except Exception:
                    _check_size(f, os.path.getsize(f), size, row)
                    raise
                for off in range(0, batch.num_rows, chunk_rows):
                    part = batch.slice(off, chunk_rows)
                    yield self._columns(part, names)
                    row += part.num_rows
        finally:
            handle.close()

    @staticmethod
    def _layout(schema, names):
        """{name: (node, buffer) index of its field} and the schema's (nodes, buffers) total,
        or None when a field's layout is not known here."""
        at, nodes, bufs = {}, 0, 0
        for field in schema:
            sub = _type_layout(field.type)
            if sub is None:
                return None
            if field.name in names:
                at[field.name] = (nodes, bufs)
            nodes, bufs = nodes + sub[0], bufs + sub[1]
        return at, (nodes, bufs)

    def _file_parts(self, f, schema, opened, names, chunk_rows):
        """An IPC file, read chunk by chunk with ordinary reads (never a memory map).

        For each record batch the reader reads its metadata, then for each chunk only the
        bytes of the chunk's rows of the columns asked for, so memory is bounded by the
        chunk whatever the batch's size. The file's size is checked before each chunk,
        and a read that comes back short (the file was cut during it) is the same
        message: rows from the chunk's first on cannot be read. A batch that is
        compressed, holds a column of another type (dictionary, null) or does not parse
        here is read whole by pyarrow, again with ordinary reads (memory: one batch of
        the columns asked for).
        """
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError as exc:
            _fail_os(f, exc, "open it")
        row = 0
        whole = None  # pyarrow's reader over a plain handle, for batches read whole
        try:
            size = opened
            _check_size(f, os.fstat(fd).st_size, size, row)
            layout = self._layout(schema, names)
            try:
                blocks, big_endian = _ipc_blocks(fd, size)
            except _Corrupt:
                blocks, big_endian = None, True
            direct = (layout is not None and not big_endian
                      and all(_direct(schema.field(n).type) for n in names))

            def shrank(now):
                _check_size(f, now, size, row)
                _fail(f, f"a read came back short at {now} of {size} bytes; rows from {row} "
                         "on cannot be read")

            n_batches = len(blocks) if blocks is not None else None
            if n_batches is None:
                whole = self._whole(f, schema, names)
                n_batches = whole[0].num_record_batches
            for i in range(n_batches):
                batch = None
                if direct:
                    try:
                        rows, nodes, bufs, compressed, body = _ipc_batch(fd, blocks[i])
                        by_pyarrow = compressed
                    except _Corrupt:
                        by_pyarrow = True
                    if not by_pyarrow and ((len(nodes), len(bufs)) != layout[1] or not all(
                            _lengths_agree(schema.field(n).type, nodes, layout[0][n][0], rows)
                            for n in names)):
                        by_pyarrow = True  # not the layout expected: let pyarrow judge it
                if not direct or by_pyarrow:
                    if whole is None:
                        whole = self._whole(f, schema, names)
                    batch = whole[0].get_batch(i)
                    rows = batch.num_rows
                for a in range(0, rows, chunk_rows):
                    b = min(a + chunk_rows, rows)
                    _check_size(f, os.fstat(fd).st_size, size, row)
                    if batch is not None:
                        cols = self._columns(batch.slice(a, b - a), names)
                    else:
                        cols = tuple(self._ipc_column(fd, schema.field(n).type, nodes, bufs,
                                                      *layout[0][n], body, a, b, shrank)
                                     for n in names)
                    row += b - a
                    yield cols
                batch = None
        except _Corrupt:
            _check_size(f, os.fstat(fd).st_size, size, row)
            _fail(f, f"corrupt Arrow IPC record batch near row {row}: a field or buffer is "
                     "shorter than the batch's rows; expected a file written by an Arrow "
                     "writer")
        finally:
            os.close(fd)
            if whole is not None:
                whole[1].close()

    @staticmethod
    def _whole(f, schema, names):
        """(reader, handle): pyarrow's IPC file reader over a plain handle, only ``names``."""
        import pyarrow.ipc as ipc

        idx = sorted({schema.get_field_index(n) for n in names})
        handle = _open_plain(f)
        try:
            opts = ipc.IpcReadOptions(included_fields=idx)
            return ipc.open_file(handle, options=opts), handle
        except Exception:
            handle.close()
            raise

    @staticmethod
    def _ipc_column(fd, typ, nodes, bufs, ni, bi, body, a, b, shrank):
        """Rows a..b of the column whose field is node ``ni``, buffers from ``bi``, as numpy:
        its validity, values (and a list's child values) read from the file."""
        a8 = a - a % 8  # bitmaps are read from a whole byte
        arr = FeatherReader._ipc_array(fd, typ, nodes, bufs, ni, bi, body, a8, b, shrank)
        return _arrow_to_numpy(arr.slice(a - a8, b - a))

    @staticmethod
    def _ipc_array(fd, typ, nodes, bufs, ni, bi, body, a8, b, shrank):
        import pyarrow as pa

        if ni >= len(nodes) or bi + 1 >= len(bufs):
            raise _Corrupt
        length, nulls = nodes[ni]
        if b > length:
            raise _Corrupt

        def read(k, lo, hi):
            off, blen = bufs[k]
            if hi > blen:
                raise _Corrupt
            data = _pread_all(fd, hi - lo, body + off + lo)
            if data is None:
                shrank(os.fstat(fd).st_size)
            return pa.py_buffer(data)

        n = b - a8
        validity = read(bi, a8 // 8, (b + 7) // 8) if nulls else None
        if pa.types.is_fixed_size_list(typ):
            k = typ.list_size
            child = FeatherReader._ipc_array(fd, typ.value_type, nodes, bufs, ni + 1, bi + 1,
                                             body, a8 * k, b * k, shrank)
            return pa.Array.from_buffers(typ, n, [validity], children=[child])
        if pa.types.is_boolean(typ):
            data = read(bi + 1, a8 // 8, (b + 7) // 8)
        else:
            w = typ.bit_width // 8
            data = read(bi + 1, a8 * w, b * w)
        return pa.Array.from_buffers(typ, n, [validity, data])


def _gzip_rows(f):
    """Complete, non-blank lines after the header in the part of a gzip file that
    decompresses (members one after the other), read once more to word an error:
    the data rows before the point where the stream ends or breaks. A field
    holding a quoted line break would count twice (fastcal's columns are numbers)."""
    import zlib

    lines = blank = 0
    tail = b""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with open(f, "rb") as fh:
        block = fh.read(1 << 16)
        while block:
            try:
                out = d.decompress(block)
            except zlib.error:
                break
            text = tail + out
            lines += out.count(b"\n")
            blank += text.count(b"\n\n") + text.count(b"\n\r\n")
            blank -= tail.count(b"\n\n") + tail.count(b"\n\r\n")
            tail = text[-2:]
            if d.eof:  # the next member, if any, starts in unused_data
                block = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                if block:
                    continue
            block = fh.read(1 << 16)
    return max(lines - blank - 1, 0)


def _warn_if_cut(f):
    """Warn (one line) when a plain CSV file does not end in a newline: its last line is
    likely cut (an interrupted copy or write). The file is still read: some writers
    leave the newline out, so this is a warning, not an error."""
    if f.lower().endswith(".gz"):
        return  # the gzip stream's own checks catch a cut file
    try:
        with open(f, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            last = fh.read(1)
    except OSError:
        return
    if last not in (b"\n", b"\r"):
        import warnings

        warnings.warn(f"{f}: does not end in a newline, so its last line may be cut (an "
                      f"interrupted copy or write?); read as it is", UserWarning, stacklevel=3)


class CsvReader(_Reader):
    def __init__(self, path):
        super().__init__(path)
        self.files = _files_of(path, "csv")
        for f in self.files:
            if os.path.getsize(f) == 0:
                _fail(f, "file is empty (0 bytes)")
            _warn_if_cut(f)
        self.schema = self._schema(self.files[0])
        self.columns = list(self.schema.names)

    def _fail_csv(self, f, exc, file_start, start):
        # Single-threaded parsing makes pyarrow number the rows: "Row #302: ..." counts
        # from 1 with the header as row 1 (blank lines not counted), so data row = # - 2.
        text = _one_line(exc)
        m = re.search(r"Row #(\d+): Expected (\d+) columns, got (\d+): ?(.*)", text)
        if m:
            hint = ""
            if m.group(2) == "1":
                head = self._first_line(f)
                seps = [s for s in (";", "\t", "|") if s in head]
                if seps:
                    hint = (f"; the header {head[:80]!r} looks separated by {seps[0]!r}, but "
                            "fastcal reads comma-separated files only")
            _fail(f, f"CSV line {m.group(1)}: expected {m.group(2)} fields, got {m.group(3)}: "
                     f"{m.group(4)[:80]!r}{hint}")
        m = re.search(r"In CSV column #(\d+): Row #(\d+): CSV conversion error to (\w+): "
                      r"invalid value '(.*)'", text)
        if m:
            k, row, value = int(m.group(1)), int(m.group(2)) - 2, m.group(4)
            try:
                name = repr(self._schema(f).names[k])
            except (ValueError, IndexError):
                name = f"number {k} (from 0)"
            if row >= file_start:
                local = start + row
                where = (f"at row {local}" if start == 0
                         else f"at row {local} (row {row} of this file)")
            else:  # not the numbering expected: name the block instead
                where = f"in the rows after row {start + file_start}"
            _fail(f, f"column {name} {where} holds {value[:80]!r}; expected a number (or an "
                     "empty field, NA, NaN or null for a missing value) (rows counted from 0)")
        low = text.lower()
        gz = f.lower().endswith(".gz")
        if gz and any(w in low for w in ("zlib", "gzip", "compressed", "inflate")):
            # pyarrow reads ahead, so the rows it had passed on when the error came vary
            # from run to run; the rows the stream holds do not
            where = f"at or after data row {start + max(file_start, _gzip_rows(f))}"
            if "truncated" in low:
                _fail(f, f"the gzip stream ends early {where} (a truncated file: {text}); "
                         "expected a complete gzip-compressed CSV file")
            _fail(f, f"not valid gzip data {where} ({text}); expected a gzip-compressed CSV "
                     "file for a .gz name (name a plain CSV file .csv)")
        if "empty csv" in low:
            _fail(f, "holds no header line" + (" once decompressed" if gz else "") +
                     " (empty or blank lines only); expected a first line naming the columns, "
                     "such as p,y")
        _fail(f, f"CSV error after data row {file_start}: {text}")

    @staticmethod
    def _first_line(f):
        """The file's first line (decompressed for .gz), or "" if it cannot be read."""
        import pyarrow as pa

        try:
            with pa.input_stream(f, compression="detect") as s:
                return s.read(4096).split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        except Exception:  # only a hint for a message
            return ""

    def _schema(self, f):
        import pyarrow.csv as pcsv

        try:
            reader = pcsv.open_csv(f, read_options=pcsv.ReadOptions(use_threads=False))
        except Exception as exc:
            self._fail_csv(f, exc, 0, 0)
        schema = reader.schema
        reader.close()
        return schema

    def check(self, names):
        super().check(names)
        import pyarrow as pa

        for f in self.files:
            s = self.schema if f == self.files[0] else self._schema(f)
            for n in names:
                if s.names.count(n) == 1 and pa.types.is_binary(s.field(n).type):
                    _fail(f, f"column {n!r} holds bytes that are not UTF-8 text; expected "
                             "numbers in a UTF-8 (or ASCII) CSV file")
            _check_schema(f, names, s)

    def _dtype(self, name):
        return np.dtype(np.float64)  # every column asked for is parsed as float64

    def chunks(self, names, chunk_rows):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        start = 0
        # Rows per block are unknown up front; aim at chunk_rows of ~20-byte lines.
        block = int(min(max(chunk_rows * 24, 1 << 16), 1 << 28))
        for f in self.files:
            _check_unique(f, names, self.schema.names if f == self.files[0]
                          else self._schema(f).names)
            file_start = 0
            try:
                # One parsing thread: pyarrow then numbers the lines of bad rows.
                reader = pcsv.open_csv(
                    f, read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
                    convert_options=pcsv.ConvertOptions(
                        include_columns=list(dict.fromkeys(names)),
                        column_types={n: pa.float64() for n in names}))
                for batch in reader:
                    for off in range(0, batch.num_rows, chunk_rows):
                        part = batch.slice(off, chunk_rows)
                        cols = tuple(_arrow_to_numpy(part.column(n)) for n in names)
                        yield Chunk(cols, f, start, file_start)
                        start += part.num_rows
                        file_start += part.num_rows
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{f}:"):
                    raise
                self._fail_csv(f, exc, file_start, start - file_start)


class NpyReader(_Reader):
    """NPY columns: a structured / 1-D / 2-D file, or a directory of column files."""

    def __init__(self, path):
        super().__init__(path)
        self.sources = {}  # column name -> (file, dtype, offset, shape, fortran, field, k)
        files = _files_of(path, "npy")
        single = not os.path.isdir(path)
        n_rows = None
        for f in files:
            dtype, shape, fortran, offset = self._header(f)  # validated: sizes, columns
            stem = os.path.splitext(os.path.basename(f))[0]
            if dtype.names is not None:
                cols = [((name if single else f"{stem}:{name}"), name, None)
                        for name in dtype.names]
            elif len(shape) == 1:
                cols = [(stem, None, None)]
            else:
                cols = [((str(k) if single else f"{stem}:{k}"), None, k)
                        for k in range(shape[1])]
            for col, field, k in cols:
                if col in self.sources:
                    other = os.path.basename(self.sources[col][0])
                    _fail(path, f"column {col!r} comes from two files, {other} and "
                                f"{os.path.basename(f)}; expected one file per column name")
                self.sources[col] = (f, dtype, offset, shape, fortran, field, k)
            if len(self.sources) > MAX_COLUMNS:
                _fail(path, f"the files give {len(self.sources)} columns; at most "
                            f"{MAX_COLUMNS} are read")
            if n_rows is not None and shape[0] != n_rows:
                _fail(path, f"column files have different lengths: {os.path.basename(f)} has "
                            f"{shape[0]} rows, an earlier file has {n_rows}")
            n_rows = shape[0]
        self.columns = list(self.sources)
        self.n_rows = int(n_rows)

    @staticmethod
    def _header(f):
        """dtype, shape, Fortran order and data offset of an NPY file, checked against its size.

        Sizes are exact Python integers (an int64 product can wrap to 0), and the
        column count is capped, before anything is built per row or per column.
        """
        fmt = np.lib.format
        size = os.path.getsize(f)
        if size == 0:
            _fail(f, "file is empty (0 bytes)")
        try:
            with open(f, "rb") as fh:
                version = fmt.read_magic(fh)
                if version == (1, 0):
                    shape, fortran, dtype = fmt.read_array_header_1_0(fh)
                elif version == (2, 0):
                    shape, fortran, dtype = fmt.read_array_header_2_0(fh)
                else:
                    shape, fortran, dtype = fmt._read_array_header(fh, version)
                offset = fh.tell()
        except Exception as exc:
            _fail(f, f"not a readable NPY file: {_one_line(exc)}")
        if dtype.hasobject:
            _fail(f, "array holds Python objects; only numeric arrays are read "
                     "(allow_pickle=False)")
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            _fail(f, f"header gives a negative dimension in shape {shape}; expected sizes >= 0")
        if len(shape) == 0 or len(shape) > 2:
            _fail(f, f"array has shape {shape}; expected 1-D (N,) or 2-D (N, K)")
        if dtype.names is not None and len(shape) != 1:
            _fail(f, f"structured array has shape {shape}; expected 1-D")
        data = math.prod(shape) * dtype.itemsize  # Python ints: no wrap-around
        if size < offset + data:
            _fail(f, f"file is truncated: the header promises shape {shape} of {dtype.str}, "
                     f"{data} bytes of data after its {offset} bytes, expected a file of "
                     f"{offset + data} bytes; the file has {size}")
        if size > offset + data:  # NPY's size is exact: anything more is damage
            _fail(f, f"file is longer than its header says: shape {shape} of {dtype.str} is "
                     f"{data} bytes of data after its {offset} bytes, expected a file of "
                     f"{offset + data} bytes; the file has {size} ({size - offset - data} "
                     f"bytes appended or a range duplicated?)")
        n_cols = len(dtype.names) if dtype.names is not None else (
            shape[1] if len(shape) == 2 else 1)
        if n_cols > MAX_COLUMNS:
            _fail(f, f"array has {n_cols} columns; at most {MAX_COLUMNS} are read (expected "
                     "an (N, K) array with K a number of classes)")
        return dtype, shape, bool(fortran), offset

    def check(self, names):
        super().check(names)
        for n in names:
            f, dtype, _, _, _, field, _ = self.sources[n]
            dt = dtype[field] if field is not None else dtype
            _check_numpy_type(f, n, dt)

    def _dtype(self, name):
        _, dtype, _, _, _, field, _ = self.sources[name]
        dt = dtype[field] if field is not None else dtype
        return np.dtype(np.uint8) if dt == np.bool_ else dt.newbyteorder("=")

    @staticmethod
    def _pread(fd, f, out, pos, row0, row_bytes, need):
        """Fill ``out`` (a numpy array) with the file's bytes from ``pos``; a short read is
        a file truncated since its header was read: one line with the first missing row."""
        view = memoryview(out).cast("B")
        got = 0
        while got < view.nbytes:
            k = os.preadv(fd, [view[got:]], pos + got)
            if k == 0:
                now = os.fstat(fd).st_size
                _fail(f, f"file is truncated: it now has {now} bytes, so row "
                         f"{row0 + got // row_bytes} is missing; the header promised "
                         f"{need} bytes (expected a file that does not change while it is "
                         "scored)")
            got += k

    @staticmethod
    def _native(out):
        if out.dtype.byteorder not in ("=", "|"):
            out = out.astype(out.dtype.newbyteorder("="))
        if out.dtype == np.bool_:
            out = out.view(np.uint8)
        return out

    def _read(self, fds, names, a, b):
        """Rows a..b of the columns ``names``, with ordinary reads (never a memory map)."""
        out = {}
        by_file = {}
        for n in dict.fromkeys(names):
            by_file.setdefault(self.sources[n][0], []).append(n)
        for f, cols in by_file.items():
            _, dtype, offset, shape, fortran, _, _ = self.sources[cols[0]]
            fd = fds[f]
            need = offset + math.prod(shape) * dtype.itemsize
            isz = dtype.itemsize
            if len(shape) == 1:  # plain or structured: one read of the window
                buf = np.empty(b - a, dtype=dtype)
                self._pread(fd, f, buf, offset + a * isz, a, isz, need)
                for n in cols:
                    field = self.sources[n][5]
                    col = np.ascontiguousarray(buf[field]) if field is not None else buf
                    out[n] = self._native(col)
            elif fortran:  # each column is contiguous in the file
                for n in cols:
                    k = self.sources[n][6]
                    col = np.empty(b - a, dtype=dtype)
                    self._pread(fd, f, col, offset + (k * shape[0] + a) * isz, a, isz, need)
                    out[n] = self._native(col)
            else:  # C order: whole rows, in pieces, the columns asked for kept
                width = shape[1]
                row_bytes = width * isz
                res = {n: np.empty(b - a, dtype=dtype) for n in cols}
                step = max(1, _NPY_PIECE // max(row_bytes, 1))
                for r in range(a, b, step):
                    s = min(r + step, b)
                    piece = np.empty((s - r, width), dtype=dtype)
                    self._pread(fd, f, piece, offset + r * row_bytes, r, row_bytes, need)
                    for n in cols:
                        res[n][r - a:s - a] = piece[:, self.sources[n][6]]
                for n in cols:
                    out[n] = self._native(res[n])
        return tuple(out[n] for n in names)

    def chunks(self, names, chunk_rows):
        files = list(dict.fromkeys(self.sources[n][0] for n in names))
        fds = {}
        try:
            for f in files:
                try:
                    fds[f] = os.open(f, os.O_RDONLY)
                except OSError as exc:
                    _fail_os(f, exc, "open it")
            for a in range(0, self.n_rows, chunk_rows):
                b = min(a + chunk_rows, self.n_rows)
                try:
                    cols = self._read(fds, names, a, b)
                except ValueError:
                    raise
                except Exception as exc:
                    _fail(files[0], f"cannot read rows {a}..{b - 1}: {_one_line(exc)}")
                # Errors in the values name the path given (a directory of column files).
                yield Chunk(cols, self.path, a, a)
        finally:
            for fd in fds.values():
                os.close(fd)


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        msg = f"{name} must be True or False; got {value!r}"
        raise ValueError(msg)
    return bool(value)


_READERS = {"parquet": ParquetReader, "feather": FeatherReader, "csv": CsvReader,
            "npy": NpyReader}


def open_reader(path, format=None, *, verify_checksums=True):
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

    Returns
    -------
    (reader, format)
        ``reader.columns``, ``reader.n_rows`` (None if unknown before reading),
        ``reader.check(names)``, ``reader.dtype(name)`` (the dataset's dtype of
        a column) and ``reader.chunks(names, chunk_rows)`` (:class:`Chunk` s of
        at most ``chunk_rows`` rows).
    """
    path = os.fspath(path)
    _check_flag("verify_checksums", verify_checksums)
    if format is not None:
        detect_format(path, format)  # checks the choice before touching the file
    _stat(path)
    fmt = detect_format(path, format)
    if fmt == "parquet":
        return ParquetReader(path, verify_checksums=verify_checksums), fmt
    return _READERS[fmt](path), fmt

"""What every reader shares: the chunk, the base class, one-line errors, the
column type checks and the conversion of Arrow arrays to numpy.

Errors are ``ValueError`` with a one-line message that names the file, what
was found and what was expected.
"""

from dataclasses import dataclass
import errno
import os

import numpy as np

from fastcal.inputs.validation import show
from fastcal.sources.readers import where

DEFAULT_CHUNK_ROWS = 1 << 18  # 256Ki rows: a chunk stays in cache between reader and kernel

# An NPY (N, K) array gives K columns; more than this is refused before any is listed.
MAX_COLUMNS = 1 << 16


@dataclass
class Chunk:
    """One chunk: the columns asked for, where it comes from, and its first row."""

    columns: tuple   # 1-D numpy arrays, in the order requested
    file: str        # the file the rows come from
    start: int       # global row number (0-based) of the chunk's first row
    file_start: int  # row number of the first row within ``file``


def _fail(path, what):
    msg = f"{where.shown(path)}: {what}"
    raise ValueError(msg)


def _one_line(exc):
    """The first line of an exception's message, stripped."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# Where a path lives (a local path or a URL), answered once for every reader.
_url_scheme = where.url_scheme


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
    """``os.stat(path)``, any failure one line (no such file, symlink loop, permission);
    for a URL, its object's or prefix's type and size (no such object, access denied,
    connection failed: one line)."""
    if where.is_url(path):
        return where.stat(path)
    try:
        return os.stat(path)
    except OSError as exc:
        _fail_os(path, exc, "read it")


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


def _check_schema(path, names, schema, any_type=()):
    """Every name is a column of the Arrow schema, once, of a numeric type (of a type
    :func:`_arrow_to_any` converts, for the names in ``any_type``)."""
    missing = [n for n in names if n not in schema.names]
    if missing:
        _missing(path, missing, schema.names)
    _check_unique(path, names, schema.names)
    for n in names:
        if n in any_type:
            _check_any_arrow_type(path, n, schema.field(n).type)
        else:
            _check_arrow_type(path, n, schema.field(n).type)


ANY_TYPES = "numbers, bool, text, bytes, timestamps or dates"


def _check_any_arrow_type(path, name, typ):
    """A column read as it is (ids): numbers, bool, text, bytes, timestamps, dates, durations
    (or a dictionary of them); not lists, structs or other nested types."""
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(typ):
        typ = typ.value_type
    if (t.is_integer(typ) or t.is_floating(typ) or t.is_boolean(typ) or t.is_null(typ)
            or t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ)
            or t.is_large_binary(typ) or t.is_fixed_size_binary(typ) or t.is_timestamp(typ)
            or t.is_date(typ) or t.is_duration(typ)):
        return
    _fail(path, f"column {name!r} has type {typ}; expected one value per row: {ANY_TYPES}")


def _check_any_numpy_type(path, name, dtype):
    if dtype.names is not None or dtype.subdtype is not None or dtype.kind not in "fiubUSMm":
        _fail(path, f"column {name!r} has dtype {dtype}; expected one value per row: {ANY_TYPES}")


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


def _texts(arr):
    """An Arrow text or bytes array as an object array of ``str`` / ``bytes``, None where
    null, from its buffers (``to_pylist`` imports pandas, a second of start-up)."""
    import pyarrow as pa

    typ, n = arr.type, len(arr)
    bufs = arr.buffers()
    out = np.empty(n, dtype=object)
    if pa.types.is_fixed_size_binary(typ):
        w = typ.byte_width
        data = bytes(bufs[1])[arr.offset * w:(arr.offset + n) * w] if bufs[1] is not None else b""
        out[:] = [data[i * w:(i + 1) * w] for i in range(n)]
    else:
        wide = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
        dt = np.dtype(np.int64 if wide else np.int32)
        offs = np.frombuffer(bufs[1], dtype=dt, count=n + 1, offset=arr.offset * dt.itemsize)
        data = bytes(bufs[2]) if bufs[2] is not None else b""
        vals = [data[a:b] for a, b in zip(offs[:-1].tolist(), offs[1:].tolist())]
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            vals = [v.decode("utf-8") for v in vals]
        out[:] = vals
    if arr.null_count:
        valid = np.unpackbits(np.frombuffer(bufs[0], dtype=np.uint8), bitorder="little")
        out[valid[arr.offset:arr.offset + n] == 0] = None
    return out


def _arrow_to_any(arr):
    """An Arrow array of any type :func:`_check_any_arrow_type` admits, as numpy:
    numbers as :func:`_arrow_to_numpy` gives them; text and bytes as object arrays of
    ``str`` / ``bytes`` (None where null); timestamps, dates and durations as
    ``datetime64`` / ``timedelta64`` of their unit (NaT where null). Without pandas."""
    import pyarrow as pa

    t = pa.types
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if t.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    typ = arr.type
    if (t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ)
            or t.is_fixed_size_binary(typ)):
        return _texts(arr)
    if t.is_timestamp(typ) or t.is_date(typ) or t.is_duration(typ):
        import pyarrow.compute as pc

        if t.is_date32(typ):
            unit, kind = "D", "M8"
        elif t.is_date64(typ):
            unit, kind = "ms", "M8"
        else:
            unit, kind = typ.unit, ("m8" if t.is_duration(typ) else "M8")
        ints = arr.view(pa.int32()).cast(pa.int64()) if t.is_date32(typ) else arr.view(pa.int64())
        if ints.null_count:
            ints = pc.fill_null(ints, np.iinfo(np.int64).min)  # NaT
        return _arrow_to_numpy(ints).view(f"{kind}[{unit}]")
    return _arrow_to_numpy(arr)


class _Reader:
    """Base: ``columns`` lists the available names; ``chunks(names, rows)`` yields Chunks.

    ``check(names, any_type)`` and ``chunks(names, rows, any_type)``: the names in
    ``any_type`` are read as they are (ids: text, timestamps, numbers, see
    :func:`_arrow_to_any`), the others as numbers.
    """

    def __init__(self, path):
        self.path = path
        self.columns = []
        self.n_rows = None  # None if unknown before reading (CSV)
        self.schema = None  # the first file's Arrow schema (Parquet, Feather, CSV)

    def check(self, names, any_type=()):
        missing = [n for n in names if n not in self.columns]
        if missing:
            _missing(self.path, missing, self.columns)

    def dtype(self, name):
        """The dtype of column ``name`` for the whole dataset: the widest over its files."""
        self.check([name])
        return self._dtype(name)

    def _dtype(self, name):
        raise NotImplementedError

    def chunks(self, names, chunk_rows, any_type=()):
        raise NotImplementedError


class _ArrowFiles(_Reader):
    """Base of the readers of Arrow-typed files (Parquet, Feather): ``files`` and
    their ``_schemas``, each checked, and a column's dtype the widest over them."""

    def check(self, names, any_type=()):
        super().check(names)
        for f, s in zip(self.files, self._schemas):
            _check_schema(f, names, s, any_type)

    def _dtype(self, name):
        return _widest([_numpy_dtype(s.field(name).type) for s in self._schemas
                        if name in s.names])


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        msg = f"{name} must be True or False; got {show(value)}"
        raise ValueError(msg)
    return bool(value)

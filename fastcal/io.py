"""Chunked readers for prediction files: Parquet, Arrow IPC / Feather, NPY and CSV.

Every reader yields the requested columns as 1-D numpy arrays, one chunk at a
time, so memory is bounded by the chunk size, never by the file:

* Parquet: one file or a directory dataset (all ``*.parquet`` files under it,
  in sorted path order; hive partition keys in directory names are not
  columns), read with pyarrow row group by row group, only the requested
  columns (memory: one row group of those columns, plus a few chunks).
* Arrow IPC / Feather v2: read record batch by record batch from a plain file
  handle (not memory-mapped, so resident memory stays bounded).
* NPY (``allow_pickle=False`` always): a structured array (one column per
  field), a 1-D array, a 2-D ``(N, K)`` array (columns ``"0"`` .. ``"K-1"``),
  or a directory of ``.npy`` files with one column per file (named by the file
  stem; a 2-D file ``scores.npy`` gives columns ``"scores:0"`` ..). Each chunk
  is memory-mapped on its own window and unmapped after use.
* CSV: pyarrow's streaming reader; numeric columns are parsed as float64.

Errors are ``ValueError`` with a one-line message that names the file.
"""

import os
import re
from dataclasses import dataclass

import numpy as np

FORMATS = ("parquet", "feather", "npy", "csv")

_EXTENSIONS = {
    ".parquet": "parquet", ".pq": "parquet", ".parq": "parquet",
    ".feather": "feather", ".arrow": "feather", ".ipc": "feather", ".arrows": "feather",
    ".npy": "npy",
    ".csv": "csv",
}

DEFAULT_CHUNK_ROWS = 1 << 18  # 256Ki rows: a chunk stays in cache between reader and kernel


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


def _list_dir(path):
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if _is_data_file(d))
        out.extend(os.path.join(root, f) for f in sorted(files) if _is_data_file(f))
    return out


def detect_format(path, format=None):
    """The format of ``path``: explicit, from the extension, or from a directory's files."""
    if format is not None:
        if format not in FORMATS:
            msg = f"format must be one of {', '.join(repr(f) for f in FORMATS)}; got {format!r}"
            raise ValueError(msg)
        return format
    if os.path.isdir(path):
        found = sorted({_EXTENSIONS[os.path.splitext(f)[1].lower()] for f in _list_dir(path)
                        if os.path.splitext(f)[1].lower() in _EXTENSIONS})
        if not found:
            _fail(path, "directory holds no data files (.parquet, .feather/.arrow, .npy or .csv)")
        if len(found) > 1:
            _fail(path, f"directory mixes formats {found}; pass format= to choose one")
        return found[0]
    ext = os.path.splitext(path)[1].lower()
    if ext not in _EXTENSIONS:
        _fail(path, f"cannot tell the format from the extension {ext!r}; pass format= "
                    f"(one of {', '.join(FORMATS)})")
    return _EXTENSIONS[ext]


def _files_of(path, format):
    """The data files of a file or directory path, for a given format."""
    if not os.path.exists(path):
        _fail(path, "no such file or directory")
    if not os.path.isdir(path):
        return [path]
    exts = {e for e, f in _EXTENSIONS.items() if f == format}
    files = [f for f in _list_dir(path) if os.path.splitext(f)[1].lower() in exts]
    if not files:
        _fail(path, f"directory holds no {format} data files")
    return files


# -- type checks -------------------------------------------------------------

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
    _fail(path, f"column {name!r} has type {typ}; expected a numeric (float, integer or bool) "
                "column")


def _check_numpy_type(path, name, dtype):
    if dtype.kind in "fiub":
        return
    _fail(path, f"column {name!r} has dtype {dtype}; expected a numeric (float, integer or bool) "
                "column")


def _missing(path, missing, available):
    cols = ", ".join(repr(c) for c in available)
    what = "column" if len(missing) == 1 else "columns"
    _fail(path, f"no {what} {', '.join(repr(m) for m in missing)}; the file has columns: {cols}")


def _check_schema(path, names, schema):
    """Every name is a column of the Arrow schema, of a numeric type."""
    missing = [n for n in names if n not in schema.names]
    if missing:
        _missing(path, missing, schema.names)
    for n in names:
        _check_arrow_type(path, n, schema.field(n).type)


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

    def chunks(self, names, chunk_rows):
        raise NotImplementedError


class ParquetReader(_Reader):
    def __init__(self, path):
        super().__init__(path)
        import pyarrow.parquet as pq

        self.files = _files_of(path, "parquet")
        self._meta = []
        schema = None
        for f in self.files:
            if os.path.getsize(f) == 0:
                _fail(f, "file is empty (0 bytes)")
            try:
                pf = pq.ParquetFile(f)
            except Exception as exc:
                _fail(f, f"not a readable Parquet file: {_one_line(exc)}")
            s = pf.schema_arrow
            if schema is None:
                schema = s
            self._meta.append(pf.metadata.num_rows)
            pf.close()
        self.schema = schema
        self.columns = list(schema.names)
        self.n_rows = int(sum(self._meta))

    def check(self, names):
        super().check(names)
        import pyarrow.parquet as pq

        for f in self.files:
            try:
                s = self.schema if f == self.files[0] else pq.read_schema(f)
            except Exception as exc:
                _fail(f, f"not a readable Parquet file: {_one_line(exc)}")
            _check_schema(f, names, s)

    def chunks(self, names, chunk_rows):
        import pyarrow.parquet as pq

        start = 0
        for f in self.files:
            file_start = 0
            try:
                pf = pq.ParquetFile(f)
                # Row group by row group: ParquetFile.iter_batches keeps what it has read
                # (its memory grows with the file), read_row_group does not.
                for g in range(pf.metadata.num_row_groups):
                    table = pf.read_row_group(g, columns=list(dict.fromkeys(names)),
                                              use_threads=True)
                    for off in range(0, table.num_rows, chunk_rows):
                        part = table.slice(off, chunk_rows)
                        cols = tuple(_arrow_to_numpy(part.column(n)) for n in names)
                        n = part.num_rows
                        yield Chunk(cols, f, start, file_start)
                        start += n
                        file_start += n
                    table = part = None
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{f}:"):
                    raise
                _fail(f, f"cannot read Parquet data near row {file_start}: {_one_line(exc)}")
            if file_start != pf.metadata.num_rows:
                _fail(f, f"read {file_start} rows but the footer says {pf.metadata.num_rows}")


class FeatherReader(_Reader):
    def __init__(self, path):
        super().__init__(path)
        self.files = _files_of(path, "feather")
        import pyarrow as pa

        schema = None
        n_rows = 0
        for f in self.files:
            reader, handle = self._open(f)
            try:
                if schema is None:
                    schema = reader.schema
                if n_rows is not None and isinstance(reader, pa.ipc.RecordBatchFileReader):
                    n_rows += reader.count_rows()
                else:
                    n_rows = None  # stream format: unknown until read
            except Exception as exc:
                _fail(f, f"not a readable Arrow IPC / Feather file: {_one_line(exc)}")
            finally:
                handle.close()
        self.schema = schema
        self.columns = list(schema.names)
        self.n_rows = n_rows

    @staticmethod
    def _open(f):
        import pyarrow as pa
        import pyarrow.ipc as ipc

        if os.path.getsize(f) == 0:
            _fail(f, "file is empty (0 bytes)")
        handle = pa.OSFile(f, "rb")
        try:
            try:
                return ipc.open_file(handle), handle
            except Exception:
                handle.seek(0)
                return ipc.open_stream(handle), handle
        except Exception as exc:
            handle.close()
            _fail(f, f"not a readable Arrow IPC / Feather file: {_one_line(exc)}")

    def check(self, names):
        super().check(names)
        for f in self.files:
            reader, handle = self._open(f)
            try:
                s = reader.schema
            finally:
                handle.close()
            _check_schema(f, names, s)

    def chunks(self, names, chunk_rows):
        import pyarrow as pa

        start = 0
        for f in self.files:
            reader, handle = self._open(f)
            file_start = 0
            idx = [reader.schema.get_field_index(n) for n in names]
            try:
                if isinstance(reader, pa.ipc.RecordBatchFileReader):
                    batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
                else:
                    batches = iter(reader)
                for batch in batches:
                    for off in range(0, max(batch.num_rows, 1), chunk_rows):
                        part = batch.slice(off, chunk_rows)
                        if part.num_rows == 0:
                            continue
                        cols = tuple(_arrow_to_numpy(part.column(i)) for i in idx)
                        yield Chunk(cols, f, start, file_start)
                        start += part.num_rows
                        file_start += part.num_rows
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{f}:"):
                    raise
                _fail(f, f"cannot read Arrow data near row {file_start}: {_one_line(exc)}")
            finally:
                handle.close()


class CsvReader(_Reader):
    def __init__(self, path):
        super().__init__(path)
        self.files = _files_of(path, "csv")
        for f in self.files:
            if os.path.getsize(f) == 0:
                _fail(f, "file is empty (0 bytes)")
        self.schema = self._schema(self.files[0])
        self.columns = list(self.schema.names)

    @staticmethod
    def _fail_csv(f, exc, file_start):
        # Single-threaded parsing makes pyarrow number the line: "Row #302: Expected 2
        # columns, got 3: <text>" (lines counted from 1, the header included).
        text = _one_line(exc)
        m = re.search(r"Row #(\d+): Expected (\d+) columns, got (\d+): ?(.*)", text)
        if m:
            _fail(f, f"CSV line {m.group(1)}: expected {m.group(2)} fields, got {m.group(3)}: "
                     f"{m.group(4)[:80]!r}")
        _fail(f, f"CSV error after data row {file_start}: {text}")

    def _schema(self, f):
        import pyarrow.csv as pcsv

        try:
            reader = pcsv.open_csv(f, read_options=pcsv.ReadOptions(use_threads=False))
        except Exception as exc:
            self._fail_csv(f, exc, 0)
        schema = reader.schema
        reader.close()
        return schema

    def check(self, names):
        super().check(names)
        for f in self.files:
            s = self.schema if f == self.files[0] else self._schema(f)
            _check_schema(f, names, s)

    def chunks(self, names, chunk_rows):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        start = 0
        # Rows per block are unknown up front; aim at chunk_rows of ~20-byte lines.
        block = int(min(max(chunk_rows * 24, 1 << 16), 1 << 28))
        for f in self.files:
            file_start = 0
            try:
                # One parsing thread: pyarrow then numbers the lines of bad rows.
                reader = pcsv.open_csv(
                    f, read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
                    convert_options=pcsv.ConvertOptions(
                        include_columns=list(names),
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
                self._fail_csv(f, exc, file_start)


class NpyReader(_Reader):
    """NPY columns: a structured / 1-D / 2-D file, or a directory of column files."""

    def __init__(self, path):
        super().__init__(path)
        self.sources = {}  # column name -> (file, dtype, offset, shape, fortran, field, k)
        files = _files_of(path, "npy")
        single = not os.path.isdir(path)
        n_rows = None
        for f in files:
            dtype, shape, fortran, offset = self._header(f)
            stem = os.path.splitext(os.path.basename(f))[0]
            if len(shape) == 0 or len(shape) > 2:
                _fail(f, f"array has shape {shape}; expected 1-D (N,) or 2-D (N, K)")
            if dtype.names is not None:
                if len(shape) != 1:
                    _fail(f, f"structured array has shape {shape}; expected 1-D")
                for name in dtype.names:
                    col = name if single else f"{stem}:{name}"
                    self.sources[col] = (f, dtype, offset, shape, fortran, name, None)
            elif len(shape) == 1:
                col = stem
                self.sources[col] = (f, dtype, offset, shape, fortran, None, None)
            else:
                for k in range(shape[1]):
                    col = str(k) if single else f"{stem}:{k}"
                    self.sources[col] = (f, dtype, offset, shape, fortran, None, k)
            if n_rows is not None and shape[0] != n_rows:
                _fail(path, f"column files have different lengths: {os.path.basename(f)} has "
                            f"{shape[0]} rows, an earlier file has {n_rows}")
            n_rows = shape[0]
        self.columns = list(self.sources)
        self.n_rows = int(n_rows)

    @staticmethod
    def _header(f):
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
        need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size < need:
            _fail(f, f"file is truncated: the header promises {need} bytes, the file has {size}")
        return dtype, tuple(int(s) for s in shape), bool(fortran), offset

    def check(self, names):
        super().check(names)
        for n in names:
            f, dtype, _, _, _, field, _ = self.sources[n]
            dt = dtype[field] if field is not None else dtype
            _check_numpy_type(f, n, dt)

    def _window(self, name, a, b):
        f, dtype, offset, shape, fortran, field, k = self.sources[name]
        if len(shape) == 1:
            mm = np.memmap(f, dtype=dtype, mode="r", offset=offset + a * dtype.itemsize,
                           shape=(b - a,))
            col = mm[field] if field is not None else mm
        elif fortran:
            base = offset + (k * shape[0] + a) * dtype.itemsize
            col = np.memmap(f, dtype=dtype, mode="r", offset=base, shape=(b - a,))
        else:
            mm = np.memmap(f, dtype=dtype, mode="r", offset=offset + a * shape[1] * dtype.itemsize,
                           shape=(b - a, shape[1]))
            col = mm[:, k]
        out = np.array(col, copy=True)  # own the memory; the window is unmapped when dropped
        if out.dtype.byteorder not in ("=", "|"):
            out = out.astype(out.dtype.newbyteorder("="))
        if out.dtype == np.bool_:
            out = out.view(np.uint8)
        return out

    def chunks(self, names, chunk_rows):
        f = self.sources[names[0]][0]
        for a in range(0, self.n_rows, chunk_rows):
            b = min(a + chunk_rows, self.n_rows)
            try:
                cols = tuple(self._window(n, a, b) for n in names)
            except Exception as exc:  # e.g. the file shrank since the header was read
                _fail(f, f"cannot read rows {a}..{b}: {_one_line(exc)}")
            # Errors in the values name the path given (a directory of column files).
            yield Chunk(cols, self.path, a, a)


_READERS = {"parquet": ParquetReader, "feather": FeatherReader, "csv": CsvReader,
            "npy": NpyReader}


def open_reader(path, format=None):
    """A reader for ``path`` (file or directory); format from the extension unless given."""
    path = os.fspath(path)
    if format is not None:
        detect_format(path, format)  # checks the choice before touching the file
    if not os.path.exists(path):
        _fail(path, "no such file or directory")
    fmt = detect_format(path, format)
    return _READERS[fmt](path), fmt

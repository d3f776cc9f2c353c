"""Arrow IPC / Feather v2 files and streams, never memory-mapped: the chunks of an
IPC file are read as byte ranges of the columns asked for (see :mod:`fastcal.sources.io`)."""

import os

from fastcal.sources.readers import where
from fastcal.sources.readers._ipc import (
    _Corrupt,
    _direct,
    _ipc_batch,
    _ipc_blocks,
    _lengths_agree,
    _pread_all,
    _type_layout,
)
from fastcal.sources.readers.base import (
    Chunk,
    _arrow_to_any,
    _arrow_to_numpy,
    _ArrowFiles,
    _check_unique,
    _fail,
    _fail_os,
    _one_line,
    _widen,
)
from fastcal.sources.readers.paths import _files_of


def _open_plain(f):
    import pyarrow as pa

    if where.is_url(f):
        return where.open_file(f)  # one ranged request per read
    try:
        return pa.OSFile(f, "rb")
    except Exception as exc:
        _fail(f, f"cannot open: {_one_line(exc)}")


def _size_now(f):
    """The file's size now (0 if it is gone); an object does not change."""
    if where.is_url(f):
        return 1 << 62
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


class FeatherReader(_ArrowFiles):
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

        if where.size(f) == 0:
            _fail(f, "file is empty (0 bytes)")
        for opener in (ipc.open_file, ipc.open_stream):
            handle = _open_plain(f)
            try:
                return opener(handle), handle
            except Exception as exc:
                handle.close()
                error = exc
        if where.is_url(f):
            with where.open_file(f) as fh:
                head = fh.read_at(4, 0)
        else:
            with open(f, "rb") as fh:
                head = fh.read(4)
        if head == b"FEA1":
            _fail(f, "a Feather V1 file (a format pyarrow has deprecated); expected Feather "
                     "V2 / Arrow IPC: rewrite it with pyarrow.feather.write_feather("
                     "pyarrow.feather.read_table(path), new_path)")
        _fail(f, f"not a readable Arrow IPC / Feather file: {_one_line(error)}")

    @staticmethod
    def _count_rows(f, reader):
        """Rows of an IPC file from its batches' metadata (read with ordinary reads)."""
        fd = where.open_handle(f)
        try:
            size = where.handle_size(fd)
            return sum(_ipc_batch(fd, b)[0] for b in _ipc_blocks(fd, size)[0])
        except _Corrupt:
            return reader.count_rows()
        finally:
            where.close_handle(fd)

    def chunks(self, names, chunk_rows, any_type=()):
        dtypes = {n: self._dtype(n) if len(self.files) > 1 and n not in any_type else None
                  for n in names}
        start = 0
        for f, schema, size, stream in zip(self.files, self._schemas, self._sizes,
                                           self._streams):
            _check_unique(f, names, schema.names)
            parts = (self._stream_parts if stream else self._file_parts)(f, schema, size,
                                                                        names, chunk_rows,
                                                                        any_type)
            file_start = 0
            try:
                for part in parts:
                    cols = tuple(_widen(c, dtypes[n]) for c, n in zip(part, names))
                    yield Chunk(cols, f, start, file_start)
                    start += len(cols[0])
                    file_start += len(cols[0])
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{where.shown(f)}:"):
                    raise
                if where.is_url(f) and isinstance(exc, OSError):
                    _fail(f, f"cannot read Arrow data near row {file_start}: "
                             f"{where.reason(exc, where.url_scheme(f))}")
                _check_size(f, _size_now(f), size, file_start)  # cut since it was opened?
                _fail(f, f"cannot read Arrow data near row {file_start}: {_one_line(exc)}")
            finally:
                parts.close()

    @staticmethod
    def _columns(part, names, any_type=()):
        idx = [part.schema.get_field_index(n) for n in names]
        return tuple((_arrow_to_any if n in any_type else _arrow_to_numpy)(part.column(i))
                     for n, i in zip(names, idx))

    def _stream_parts(self, f, schema, size, names, chunk_rows, any_type=()):
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
                    _check_size(f, _size_now(f), size, row)
                    raise
                for off in range(0, batch.num_rows, chunk_rows):
                    part = batch.slice(off, chunk_rows)
                    yield self._columns(part, names, any_type)
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

    @staticmethod
    def _direct_batch(fd, block, schema, names, layout):
        """(rows, nodes, buffers, body offset) of a record batch read here by byte ranges,
        or None when pyarrow reads it (compressed, or not the layout expected: let
        pyarrow judge it)."""
        try:
            rows, nodes, bufs, compressed, body = _ipc_batch(fd, block)
        except _Corrupt:
            return None
        if compressed or (len(nodes), len(bufs)) != layout[1] or not all(
                _lengths_agree(schema.field(n).type, nodes, layout[0][n][0], rows)
                for n in names):
            return None
        return rows, nodes, bufs, body

    def _file_parts(self, f, schema, opened, names, chunk_rows, any_type=()):
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
            fd = where.open_handle(f)
        except OSError as exc:
            _fail_os(f, exc, "open it")
        row = 0
        whole = None  # pyarrow's reader over a plain handle, for batches read whole
        try:
            size = opened
            _check_size(f, where.handle_size(fd), size, row)
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
                planned = (self._direct_batch(fd, blocks[i], schema, names, layout)
                           if direct else None)
                if planned is not None:
                    rows, nodes, bufs, body = planned
                else:
                    if whole is None:
                        whole = self._whole(f, schema, names)
                    batch = whole[0].get_batch(i)
                    rows = batch.num_rows
                for a in range(0, rows, chunk_rows):
                    b = min(a + chunk_rows, rows)
                    _check_size(f, where.handle_size(fd), size, row)
                    if batch is not None:
                        cols = self._columns(batch.slice(a, b - a), names, any_type)
                    else:
                        cols = tuple(self._ipc_column(fd, schema.field(n).type, nodes, bufs,
                                                      *layout[0][n], body, a, b, shrank)
                                     for n in names)
                    row += b - a
                    yield cols
                batch = None
        except _Corrupt:
            _check_size(f, where.handle_size(fd), size, row)
            _fail(f, f"corrupt Arrow IPC record batch near row {row}: a field or buffer is "
                     "shorter than the batch's rows; expected a file written by an Arrow "
                     "writer")
        finally:
            where.close_handle(fd)
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
                shrank(where.handle_size(fd))
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

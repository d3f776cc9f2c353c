"""NPY columns (``allow_pickle=False`` always): a structured, 1-D or 2-D file, or a
directory of column files, read with ordinary reads after the header is checked
against the file size (see :mod:`fastcal.sources.io`)."""

import io
import math
import os

import numpy as np

from fastcal.sources.readers import where
from fastcal.sources.readers._npyheader import HEADER_BYTES, check_items, check_size, native, parse_header, pread_into
from fastcal.sources.readers.base import (
    MAX_COLUMNS,
    Chunk,
    _check_any_numpy_type,
    _check_numpy_type,
    _fail,
    _fail_os,
    _one_line,
    _Reader,
)
from fastcal.sources.readers.paths import _files_of

# NPY: a 2-D C-order window is read in pieces of about this many bytes.
_NPY_PIECE = 8 << 20


class NpyReader(_Reader):
    """NPY columns: a structured / 1-D / 2-D file, or a directory of column files."""

    def __init__(self, path):
        super().__init__(path)
        self.sources = {}  # column name -> (file, dtype, offset, shape, fortran, field, k)
        files = _files_of(path, "npy")
        single = files == [path]  # a file, not a directory of column files
        n_rows = None
        for f in files:
            dtype, shape, fortran, offset = self._header(f)  # validated: sizes, columns
            stem = os.path.splitext(os.path.basename(where.name_of(f)))[0]
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
        size = where.size(f)
        if size == 0:
            _fail(f, "file is empty (0 bytes)")
        if where.is_url(f):  # the header's bytes in one ranged read
            with where.open_file(f) as fh:
                head = io.BytesIO(fh.read_at(min(size, HEADER_BYTES), 0))
            dtype, shape, fortran, offset = parse_header(head, f)
        else:
            try:
                with open(f, "rb") as fh:
                    dtype, shape, fortran, offset = parse_header(fh, f)
            except OSError as exc:
                _fail_os(f, exc, "read it")
        check_items(f, dtype, shape)
        if len(shape) == 0 or len(shape) > 2:
            _fail(f, f"array has shape {shape}; expected 1-D (N,) or 2-D (N, K)")
        if dtype.names is not None and len(shape) != 1:
            _fail(f, f"structured array has shape {shape}; expected 1-D")
        check_size(f, dtype, shape, offset, size)
        n_cols = len(dtype.names) if dtype.names is not None else (
            shape[1] if len(shape) == 2 else 1)
        if n_cols > MAX_COLUMNS:
            _fail(f, f"array has {n_cols} columns; at most {MAX_COLUMNS} are read (expected "
                     "an (N, K) array with K a number of classes)")
        return dtype, shape, fortran, offset

    def check(self, names, any_type=()):
        super().check(names)
        for n in names:
            f, dtype, _, _, _, field, _ = self.sources[n]
            dt = dtype[field] if field is not None else dtype
            if n in any_type:
                _check_any_numpy_type(f, n, dt)
            else:
                _check_numpy_type(f, n, dt)

    def _dtype(self, name):
        _, dtype, _, _, _, field, _ = self.sources[name]
        dt = dtype[field] if field is not None else dtype
        return np.dtype(np.uint8) if dt == np.bool_ else dt.newbyteorder("=")

    @staticmethod
    def _pread(fd, f, out, pos, row0, row_bytes, need):
        pread_into(fd, f, out, pos, row0, row_bytes, need)

    @staticmethod
    def _native(out):
        out = native(out)
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

    def chunks(self, names, chunk_rows, any_type=()):
        files = list(dict.fromkeys(self.sources[n][0] for n in names))
        fds = {}
        try:
            for f in files:
                try:
                    fds[f] = where.open_handle(f)
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
                where.close_handle(fd)

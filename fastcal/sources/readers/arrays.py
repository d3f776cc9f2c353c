"""Named arrays of any shape: the members of a ``.npz`` archive, the ``.npy`` files of a
directory, or one ``.npy`` file, read in pieces of rows (along the first axis).

The NPY rules of :mod:`fastcal.sources.readers.npy` hold for every array: the
header must parse (any failure is one line naming the file and member), it
may not hold Python objects, and its shape and dtype must give exactly the
bytes that hold the array (a file or member shorter or longer than its header
says is refused), all checked with exact integers before anything is
allocated. An ``.npz`` archive adds its own: members stored or deflated (what
``numpy.savez`` and ``numpy.savez_compressed`` write), not encrypted, inside the
file, and a deflated member may not claim more bytes than deflate can make of
its compressed ones. Rows of ``.npy`` files are read with ordinary reads at their
offsets (never a memory map); a member's rows are read through its zip stream,
whose CRC is checked once the member has been read to its end.
"""

import io
import math
import os
import stat
from typing import NamedTuple
import zipfile

import numpy as np

from fastcal.sources.readers import where
from fastcal.sources.readers._npyheader import HEADER_BYTES as _HEADER_BYTES
from fastcal.sources.readers._npyheader import check_items, check_size, native, parse_header, pread_into
from fastcal.sources.readers.base import Chunk, _fail, _fail_os, _one_line, _stat
from fastcal.sources.readers.paths import _files_of

# Deflate makes at most 1032 bytes of one compressed byte (RFC 1951's longest match).
_DEFLATE_RATIO = 1032
# A Fortran-order array in an archive is read whole (its rows are not contiguous in the
# stream): at most this many bytes.
_WHOLE_MAX = 1 << 30
# Rows skipped in a member's stream are read in pieces of this many bytes.
_SKIP_PIECE = 8 << 20


class ArrayInfo(NamedTuple):
    """Where an array lives and what its header says."""

    where: str       # how messages name it: "FILE" or "ARCHIVE: member NAME.npy"
    file: str        # the file on disk (the archive for a member)
    member: object   # the archive's ZipInfo, or None for a .npy file
    dtype: np.dtype
    shape: tuple
    fortran: bool
    offset: int      # bytes before the data (the header), in the file or the member

    @property
    def row_items(self):
        return math.prod(self.shape[1:]) if self.shape else 1

    @property
    def nbytes(self):
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def strided(self):
        """Rows are not contiguous: Fortran order with more than one item per row."""
        return self.fortran and len(self.shape) >= 2 and self.row_items > 1


class NpyArrays:
    """The named arrays of a ``.npz`` archive, a directory of ``.npy`` files or one ``.npy`` file.

    ``arrays`` maps each name (a member or file name without ``.npy``) to its
    :class:`ArrayInfo`; ``chunks(names, rows)`` reads arrays of one length
    together, ``read(name)`` one array whole.
    """

    def __init__(self, path, format=None):
        path = where.local(path)  # a file:// URL is its local path
        self.path = path
        self.arrays = {}
        if format not in (None, "npz", "npy"):
            msg = f"format must be 'npz' or 'npy' for arrays; got {format!r}"
            raise ValueError(msg)
        if stat.S_ISDIR(_stat(path).st_mode):
            self.format = "npy"
            for f in _files_of(path, "npy"):
                self._add(_stem(f), self._file_info(f))
        elif format == "npz" or (format is None and where.name_of(path).lower().endswith(".npz")):
            self.format = "npz"
            self._read_archive()
        else:
            self.format = "npy"
            self._add(_stem(path), self._file_info(path))

    def _add(self, name, info):
        if name in self.arrays:
            _fail(self.path, f"array {name!r} comes from two places, {self.arrays[name].where} and "
                             f"{info.where}; expected one array per name")
        self.arrays[name] = info

    @staticmethod
    def _file_info(f):
        size = where.size(f)
        if size == 0:
            _fail(f, "file is empty (0 bytes)")
        if where.is_url(f):  # the header's bytes in one ranged read
            with where.open_file(f) as fh:
                head = io.BytesIO(fh.read_at(min(size, _HEADER_BYTES), 0))
            dtype, shape, fortran, offset = parse_header(head, f)
        else:
            try:
                with open(f, "rb") as fh:
                    dtype, shape, fortran, offset = parse_header(fh, f)
            except OSError as exc:
                _fail_os(f, exc, "read it")
        check_items(f, dtype, shape)
        check_size(f, dtype, shape, offset, size)
        return ArrayInfo(f, f, None, dtype, shape, fortran, offset)

    def _read_archive(self):
        path = self.path
        size = where.size(path)
        if size == 0:
            _fail(path, "file is empty (0 bytes)")
        try:
            with zipfile.ZipFile(_zip_source(path)) as z:
                for info in z.infolist():
                    if info.filename.endswith(".npy"):
                        self._add(info.filename[:-4], self._member_info(z, info, size))
        except ValueError as exc:
            if str(exc).startswith(path):
                raise
            _fail(path, f"not a readable .npz archive: {_one_line(exc)}")
        except Exception as exc:  # zipfile's BadZipFile, OSError, EOFError, ...
            _fail(path, f"not a readable .npz archive: {_one_line(exc)}")

    def _member_info(self, z, info, size):
        where = f"{self.path}: member {info.filename}"
        if info.flag_bits & 0x1:
            _fail(where, "is encrypted; expected the members numpy.savez writes")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            _fail(where, f"is compressed with zip method {info.compress_type}; expected stored or "
                         "deflate (what numpy.savez and numpy.savez_compressed write)")
        if info.header_offset + info.compress_size > size:
            _fail(where, f"archive is truncated: the member's {info.compress_size} bytes from byte "
                         f"{info.header_offset} end past the file's {size} bytes")
        if info.file_size == 0:
            _fail(where, "member is empty (0 bytes)")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            _fail(where, f"member is stored uncompressed but the archive gives it {info.file_size} "
                         f"bytes and {info.compress_size} stored bytes; expected the same size "
                         "(a damaged archive)")
        if (info.compress_type == zipfile.ZIP_DEFLATED
                and info.file_size > _DEFLATE_RATIO * info.compress_size + 64):
            _fail(where, f"member claims {info.file_size} bytes once decompressed, more than "
                         f"deflate makes of its {info.compress_size} compressed bytes (at most "
                         f"{_DEFLATE_RATIO} to 1); a damaged archive")
        try:  # the header's bytes (zip's own errors, a bad CRC of a small member, named as such)
            with z.open(info) as fh:
                head = fh.read(min(info.file_size, _HEADER_BYTES))
        except Exception as exc:
            _fail(where, f"cannot be read: {_one_line(exc)}")
        dtype, shape, fortran, offset = parse_header(io.BytesIO(head), where)
        check_items(where, dtype, shape)
        check_size(where, dtype, shape, offset, info.file_size, noun="member")
        return ArrayInfo(where, self.path, info, dtype, shape, fortran, offset)

    def _info(self, name):
        if name not in self.arrays:
            have = ", ".join(repr(n) for n in self.arrays) or "(none)"
            _fail(self.path, f"no array {name!r}; the arrays are: {have}")
        return self.arrays[name]

    def read(self, name, max_bytes=_WHOLE_MAX):
        """Array ``name`` whole; one that needs more than ``max_bytes`` bytes is refused
        (before anything is allocated)."""
        info = self._info(name)
        if info.nbytes > max_bytes:
            _fail(info.where, f"array of shape {info.shape} needs {info.nbytes} bytes; at most "
                              f"{max_bytes} are read whole")
        rows = info.shape[0] if info.shape else 1
        with _rows_of(info) as reader:
            out = reader.read(0, rows)
        return out.reshape(info.shape)

    def chunks(self, names, chunk_rows):
        """:class:`Chunk` s of the arrays ``names`` (one length along the first axis), at most
        ``chunk_rows`` rows each: ``columns`` holds each array's rows, ``start`` the first."""
        infos = [self._info(n) for n in names]
        for n, info in zip(names, infos):
            if not info.shape:
                _fail(info.where, f"array {n!r} has shape (); expected an array with rows")
        lengths = {info.shape[0] for info in infos}
        if len(lengths) > 1:
            listing = ", ".join(f"{n} {info.shape}" for n, info in zip(names, infos))
            _fail(self.path, f"arrays read together have different lengths: {listing}; expected "
                             "one number of rows")
        n_rows = lengths.pop() if lengths else 0
        readers = {}
        try:
            for n, info in zip(names, infos):
                if n not in readers:
                    readers[n] = _rows_of(info)
            for a in range(0, n_rows, chunk_rows):
                b = min(a + chunk_rows, n_rows)
                yield Chunk(tuple(readers[n].read(a, b) for n in names), self.path, a, a)
        finally:
            for r in readers.values():
                r.close()


def _stem(f):
    return os.path.splitext(os.path.basename(where.name_of(f)))[0]


def _zip_source(path):
    """What ``zipfile`` opens: a local path, or an object read ahead in large ranges (zip
    reads a few KiB at a time: one request each would be slow)."""
    return where.open_buffered(path) if where.is_url(path) else path


def _rows_of(info):
    return _FileRows(info) if info.member is None else _MemberRows(info)


class _Rows:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _out(self, a, b):
        shape = self.info.shape
        return np.empty((b - a,) + tuple(shape[1:]), dtype=self.info.dtype)


class _FileRows(_Rows):
    """Rows of a ``.npy`` file, with ``os.preadv`` at their offsets (never a memory map)."""

    def __init__(self, info):
        self.info = info
        try:
            self.fd = where.open_handle(info.file)
        except OSError as exc:
            _fail_os(info.file, exc, "open it")

    def read(self, a, b):
        info = self.info
        isz = info.dtype.itemsize
        need = info.offset + info.nbytes
        if not info.strided:
            out = self._out(a, b)
            row_bytes = info.row_items * isz
            pread_into(self.fd, info.file, out, info.offset + a * row_bytes, a, row_bytes, need)
            return native(out)
        # Fortran order: each item of a row is a column of the file, contiguous over the rows
        n_all, m = info.shape[0], info.row_items
        buf = np.empty((m, b - a), dtype=info.dtype)
        for j in range(m):
            pread_into(self.fd, info.file, buf[j], info.offset + (j * n_all + a) * isz, a, isz, need)
        out = buf.T.reshape((b - a,) + tuple(info.shape[1:]), order="F")
        return native(np.ascontiguousarray(out))

    def close(self):
        if self.fd is not None:
            where.close_handle(self.fd)
            self.fd = None


class _MemberRows(_Rows):
    """Rows of an archive's member, read forward through its zip stream."""

    def __init__(self, info):
        self.info = info
        self.zip = None
        self.fh = None
        self.pos = 0       # the next row the stream gives
        self.whole = None  # a Fortran-order array, read whole

    def _open(self):
        self.close()
        info = self.info
        try:
            self.zip = zipfile.ZipFile(_zip_source(info.file))
            self.fh = self.zip.open(info.member)
        except Exception as exc:
            _fail(info.where, f"cannot be read: {_one_line(exc)}")
        self.pos = 0
        self._fill(np.empty(info.offset, dtype=np.uint8), 0, 0)  # past the header

    def _fill(self, out, row0, row_bytes):
        view = memoryview(out.reshape(-1).view(np.uint8))
        got = 0
        try:
            while got < view.nbytes:
                k = self.fh.readinto(view[got:])
                if not k:
                    _fail(self.info.where, f"member is truncated: its data ends before row "
                                           f"{row0 + got // max(row_bytes, 1)}; the header promised "
                                           f"{self.info.offset + self.info.nbytes} bytes")
                got += k
        except ValueError:
            raise
        except Exception as exc:  # zipfile's BadZipFile (CRC), zlib.error, EOFError, OSError
            rows = view.nbytes // max(row_bytes, 1)
            what = "in its header" if row_bytes == 0 else f"in rows {row0}..{row0 + rows - 1}"
            _fail(self.info.where, f"damaged data {what}: {_one_line(exc)}")

    def read(self, a, b):
        info = self.info
        if info.strided:
            if self.whole is None:
                if info.nbytes > _WHOLE_MAX:
                    _fail(info.where, f"array of shape {info.shape} is in Fortran order and "
                                      f"compressed, so it is read whole, and it needs "
                                      f"{info.nbytes} bytes; at most {_WHOLE_MAX} (save it in C "
                                      "order: numpy.ascontiguousarray)")
                self._open()
                flat = np.empty(math.prod(info.shape), dtype=info.dtype)
                self._fill(flat, 0, info.row_items * info.dtype.itemsize)
                self._check_end()
                self.whole = flat.reshape(info.shape, order="F")
            return native(np.ascontiguousarray(self.whole[a:b]))
        row_bytes = info.row_items * info.dtype.itemsize
        if self.fh is None or a < self.pos:
            self._open()
        while self.pos < a:  # rows not asked for: read and dropped, a piece at a time
            k = min(a - self.pos, max(1, _SKIP_PIECE // max(row_bytes, 1)))
            self._fill(self._out(self.pos, self.pos + k), self.pos, row_bytes)
            self.pos += k
        out = self._out(a, b)
        self._fill(out, a, row_bytes)
        self.pos = b
        if b == (info.shape[0] if info.shape else 1):
            self._check_end()
        return native(out)

    def _check_end(self):
        """At the member's end: one more read makes zipfile check the CRC."""
        try:
            extra = self.fh.read(1)
        except Exception as exc:
            _fail(self.info.where, f"damaged data at its end: {_one_line(exc)}")
        if extra:
            _fail(self.info.where, "member holds more data than its header says")

    def close(self):
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        if self.zip is not None:
            self.zip.close()
            self.zip = None

"""The NPY format's rules, shared by the reader of ``.npy`` columns and the reader of
named arrays (``.npy`` files and ``.npz`` members): the header parsed and checked
with exact integers against the bytes that hold the array, before anything is
allocated, and reads that come back short named with the first missing row."""

import math
import os

import numpy as np

from fastcal.sources.readers.base import _fail, _one_line

# A header is parsed from a file's first bytes: numpy refuses headers over 10000 bytes.
HEADER_BYTES = 10000 + 16


def parse_header(fh, where):
    """``(dtype, shape, fortran, offset)`` of the NPY header at the start of ``fh``.

    Any failure (a bad magic string, a header that is not a Python literal, a
    tokenizer error, a short read) is one line naming ``where``.
    """
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            shape, fortran, dtype = fmt._read_array_header(fh, version)
        offset = fh.tell()
    except Exception as exc:
        _fail(where, f"not a readable NPY file: {_one_line(exc)}")
    return dtype, tuple(int(s) for s in shape), bool(fortran), offset


def check_items(where, dtype, shape):
    """No Python objects (``allow_pickle=False`` always) and no negative dimension."""
    if dtype.hasobject:
        _fail(where, "array holds Python objects; only numeric arrays are read "
                     "(allow_pickle=False)")
    if any(s < 0 for s in shape):
        _fail(where, f"header gives a negative dimension in shape {shape}; expected sizes >= 0")


def check_size(where, dtype, shape, offset, size, noun="file"):
    """The header's shape and dtype give exactly ``size`` bytes with the header's ``offset``.

    Sizes are Python integers (an int64 product can wrap to 0). ``noun`` says
    what ``size`` measures: a ``"file"`` or an archive's ``"member"``.
    """
    data = math.prod(shape) * dtype.itemsize
    if size < offset + data:
        _fail(where, f"{noun} is truncated: the header promises shape {shape} of {dtype.str}, "
                     f"{data} bytes of data after its {offset} bytes, expected a {noun} of "
                     f"{offset + data} bytes; the {noun} has {size}")
    if size > offset + data:  # NPY's size is exact: anything more is damage
        _fail(where, f"{noun} is longer than its header says: shape {shape} of {dtype.str} is "
                     f"{data} bytes of data after its {offset} bytes, expected a {noun} of "
                     f"{offset + data} bytes; the {noun} has {size} ({size - offset - data} "
                     f"bytes appended or a range duplicated?)")
    return data


def pread_into(fd, where, out, pos, row0, row_bytes, need):
    """Fill ``out`` (a numpy array) with the file's bytes from ``pos``; a short read is
    a file truncated since its header was read: one line with the first missing row."""
    view = memoryview(out.reshape(-1).view(np.uint8))  # any dtype, datetimes included
    got = 0
    while got < view.nbytes:
        if isinstance(fd, int):
            k = os.preadv(fd, [view[got:]], pos + got)
        else:  # an object's random-access file: one ranged read
            data = fd.read_at(view.nbytes - got, pos + got)
            k = len(data)
            view[got:got + k] = data
        if k == 0:
            now = os.fstat(fd).st_size if isinstance(fd, int) else fd.size()
            _fail(where, f"file is truncated: it now has {now} bytes, so row "
                         f"{row0 + got // max(row_bytes, 1)} is missing; the header promised "
                         f"{need} bytes (expected a file that does not change while it is "
                         "scored)")
        got += k


def native(out):
    """``out`` in the machine's byte order (a copy only when it is not)."""
    if out.dtype.byteorder not in ("=", "|") and out.dtype.names is None:
        out = out.astype(out.dtype.newbyteorder("="))
    return out

"""The layout of Arrow IPC files, parsed from bytes read with ``os.pread``: the
footer's record batch blocks and each batch's field nodes and buffers (no memory map)."""

import os
import struct

import numpy as np

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
    """Exactly ``n`` bytes at ``pos`` into a new uint8 array, or None on a short read.
    ``fd``: a local file's descriptor, or an object's random-access file (one ranged
    read; see :mod:`fastcal.sources.readers.where`)."""
    if not isinstance(fd, int):
        data = fd.read_at(n, pos)
        return np.frombuffer(data, dtype=np.uint8) if len(data) == n else None
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

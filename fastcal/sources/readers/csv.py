"""CSV (``.csv``, or gzip-compressed ``.csv.gz``): pyarrow's streaming reader,
comma-separated, every column asked for parsed as float64 (see :mod:`fastcal.sources.io`)."""

import os
import re

import numpy as np

from fastcal.sources.readers import where
from fastcal.sources.readers.base import (
    Chunk,
    _arrow_to_any,
    _arrow_to_numpy,
    _check_schema,
    _check_unique,
    _fail,
    _one_line,
    _Reader,
)
from fastcal.sources.readers.paths import _files_of


def _gzip_rows(f):
    """Complete, non-blank lines after the header in the part of a gzip file that
    decompresses (members one after the other), read once more to word an error:
    the data rows before the point where the stream ends or breaks. A field
    holding a quoted line break would count twice (fastcal's columns are numbers)."""
    import zlib

    lines = blank = 0
    tail = b""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with (where.open_stream(f) if where.is_url(f) else open(f, "rb")) as fh:
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
    if _gz(f):
        return  # the gzip stream's own checks catch a cut file
    try:
        if where.is_url(f):
            with where.open_file(f) as fh:
                last = fh.read_at(1, fh.size() - 1)
        else:
            with open(f, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                last = fh.read(1)
    except (OSError, ValueError):  # only a warning: the read that follows names the fault
        return
    if last not in (b"\n", b"\r"):
        import warnings

        warnings.warn(f"{f}: does not end in a newline, so its last line may be cut (an "
                      f"interrupted copy or write?); read as it is", UserWarning, stacklevel=3)


def _gz(f):
    return where.name_of(f).lower().endswith(".gz")


def _source(f):
    """What pyarrow's CSV reader opens: a local path (pyarrow decompresses a .gz name),
    or an object's stream (decompressed here)."""
    if not where.is_url(f):
        return f
    return where.open_stream(f, "gzip" if _gz(f) else None)


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


class CsvReader(_Reader):
    def __init__(self, path):
        super().__init__(path)
        self.files = _files_of(path, "csv")
        for f in self.files:
            if where.size(f) == 0:
                _fail(f, "file is empty (0 bytes)")
            _warn_if_cut(f)
        self.schema = self._schema(self.files[0])
        self.columns = list(self.schema.names)

    def _fail_csv(self, f, exc, file_start, start, any_type=()):
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
                col = self._schema(f).names[k]
                name = repr(col)
            except (ValueError, IndexError):
                col, name = None, f"number {k} (from 0)"
            if row >= file_start:
                local = start + row
                where = (f"at row {local}" if start == 0
                         else f"at row {local} (row {row} of this file)")
            else:  # not the numbering expected: name the block instead
                where = f"in the rows after row {start + file_start}"
            if col in any_type:
                _fail(f, f"column {name} {where} holds {value[:80]!r}, not a value of type "
                         f"{m.group(3)} as the first rows of the file are; expected one kind of "
                         "value in a column (rows counted from 0)")
            _fail(f, f"column {name} {where} holds {value[:80]!r}; expected a number (or an "
                     "empty field, NA, NaN or null for a missing value) (rows counted from 0)")
        low = text.lower()
        gz = _gz(f)
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

    def _fail_header(self, missing):
        """Columns asked for are not in the header: say so when the header is probably
        not a header (a file separated by ';', tabs or '|', or a file without a header
        line, whose first row of numbers was taken for the names)."""
        f, names = self.files[0], self.columns
        what = (f"no column {missing[0]!r}" if len(missing) == 1
                else f"no columns {', '.join(repr(m) for m in missing)}")
        head = self._first_line(f)
        seps = [s for s in (";", "\t", "|") if len(names) == 1 and s in names[0]]
        if seps:
            _fail(f, f"{what}: its first line {head[:80]!r} looks separated by {seps[0]!r}, "
                     "but CSV files are read comma-separated; write the file with commas")
        if names and all(_is_number(n) for n in names):
            _fail(f, f"{what}: its first line {head[:80]!r} holds numbers, not column names "
                     "(a file without a header line?); expected a first line naming the "
                     "columns, such as p,y")

    @staticmethod
    def _first_line(f):
        """The file's first line (decompressed for .gz), or "" if it cannot be read."""
        import pyarrow as pa

        try:
            stream = (where.open_stream(f, "gzip" if _gz(f) else None) if where.is_url(f)
                      else pa.input_stream(f, compression="detect"))
            with stream as s:
                return s.read(4096).split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        except Exception:  # only a hint for a message
            return ""

    def _schema(self, f):
        import pyarrow.csv as pcsv

        src = _source(f)
        try:
            reader = pcsv.open_csv(src, read_options=pcsv.ReadOptions(use_threads=False))
        except Exception as exc:
            if where.is_url(f) and isinstance(exc, OSError):
                _fail(f, f"cannot read the CSV header: {where.reason(exc, where.url_scheme(f))}")
            self._fail_csv(f, exc, 0, 0)
        finally:
            if src is not f:
                src.close()
        schema = reader.schema
        reader.close()
        return schema

    def check(self, names, any_type=()):
        missing = [n for n in names if n not in self.columns]
        if missing:
            self._fail_header(missing)
        super().check(names)
        import pyarrow as pa

        for f in self.files:
            s = self.schema if f == self.files[0] else self._schema(f)
            for n in names:
                if (n not in any_type and s.names.count(n) == 1
                        and pa.types.is_binary(s.field(n).type)):
                    _fail(f, f"column {n!r} holds bytes that are not UTF-8 text; expected "
                             "numbers in a UTF-8 (or ASCII) CSV file")
            _check_schema(f, names, s, any_type)

    def _dtype(self, name):
        return np.dtype(np.float64)  # every column asked for is parsed as float64

    def chunks(self, names, chunk_rows, any_type=()):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        start = 0
        # Rows per block are unknown up front; aim at chunk_rows of ~20-byte lines.
        block = int(min(max(chunk_rows * 24, 1 << 16), 1 << 28))
        for f in self.files:
            _check_unique(f, names, self.schema.names if f == self.files[0]
                          else self._schema(f).names)
            file_start = 0
            src = None
            try:
                src = _source(f)
                # One parsing thread: pyarrow then numbers the lines of bad rows.
                reader = pcsv.open_csv(
                    src, read_options=pcsv.ReadOptions(block_size=block, use_threads=False),
                    convert_options=pcsv.ConvertOptions(
                        include_columns=list(dict.fromkeys(names)),
                        column_types={n: pa.float64() for n in names if n not in any_type}))
                for batch in reader:
                    for off in range(0, batch.num_rows, chunk_rows):
                        part = batch.slice(off, chunk_rows)
                        cols = tuple((_arrow_to_any if n in any_type else _arrow_to_numpy)(
                            part.column(n)) for n in names)
                        yield Chunk(cols, f, start, file_start)
                        start += part.num_rows
                        file_start += part.num_rows
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{where.shown(f)}:"):
                    raise
                if where.is_url(f) and isinstance(exc, OSError):
                    _fail(f, f"cannot read CSV data after data row {file_start}: "
                             f"{where.reason(exc, where.url_scheme(f))}")
                self._fail_csv(f, exc, file_start, start - file_start, any_type)
            finally:
                if src is not None and src is not f:
                    src.close()

"""Parquet: one file or a directory dataset, read one row group at a time in
batches of ``chunk_rows`` rows through a read buffer (1 MiB for a local file; for an
object, the row group's columns fetched together by concurrent ranged requests when
they take at most 64 MiB, else 8 MiB ranged reads), page checksums verified by default (see
:mod:`fastcal.sources.io`). A directory in Hive layout gives its partition columns
(:mod:`fastcal.sources.readers.hive`), and ``where=`` chooses its files by them."""

import os

from fastcal.sources.readers import hive
from fastcal.sources.readers import where as _where
from fastcal.sources.readers.base import (
    Chunk,
    _arrow_to_any,
    _arrow_to_numpy,
    _ArrowFiles,
    _check_flag,
    _check_unique,
    _fail,
    _one_line,
    _widen,
)
from fastcal.sources.readers.paths import _files_of

# Parquet: pages are read through a buffer of this size, not a whole column chunk at once.
_PARQUET_BUFFER = 1 << 20
# An object is read by ranged requests of this size: each request costs a round trip,
# so they are larger than a local file's reads (memory: one buffer per column read).
_REMOTE_BUFFER = 8 << 20
# ...or, when the columns asked for take at most this many bytes in every row group, a
# row group's column chunks are fetched together, by concurrent requests (pyarrow's
# pre-buffering): fewer round trips, and memory still bounded, by this size.
_REMOTE_PREFETCH = 64 << 20


class ParquetReader(_ArrowFiles):
    """A Parquet file or dataset directory (or an object or prefix of a store).

    ``verify_checksums`` (default True) checks every page against the CRC the
    writer stored with it (``write_page_checksum=True``); pages written without
    one are read as they are. ``where``: a filter on the partition columns of a
    Hive-partitioned directory (see :mod:`fastcal.sources.readers.hive`); only the
    files it keeps are opened.
    """

    def __init__(self, path, *, verify_checksums=True, where=None):
        super().__init__(path)
        self.verify_checksums = _check_flag("verify_checksums", verify_checksums)
        self.files = _files_of(path, "parquet")
        is_dir = self.files != [path]  # a directory's files (a file is itself)
        parts = hive.discover(path, self.files) if is_dir else hive.Partitions([], [], [()])
        if where is not None:
            keep = hive.select(path, parts, where)
            self.files = [self.files[i] for i in keep]
            parts = parts.take(keep)
        self.footers = []  # each file's footer (FileMetaData; an object's is not read again)
        file_schemas = []
        for f in self.files:
            pf, src = self._first_open(f)
            file_schemas.append(pf.schema_arrow)
            self.footers.append(pf.metadata)
            pf.close()
            if src is not f:
                src.close()  # ParquetFile closes only what it opened itself
        # a partition key that is also a column of a file is the file's column
        self.partitions = parts.without({n for s in file_schemas for n in s.names})
        self._schemas = [self._with_partitions(s) for s in file_schemas]
        self._meta = [m.num_rows for m in self.footers]
        self.schema = self._schemas[0]
        self.columns = list(self.schema.names)
        self.n_rows = int(sum(self._meta))

    def _with_partitions(self, schema):
        for field in self.partitions.fields():
            schema = schema.append(field)
        return schema

    def _first_open(self, f):
        import pyarrow.parquet as pq

        if _where.is_url(f):
            src = _where.open_file(f)
            empty = src.size() == 0
        else:
            src, empty = f, os.path.getsize(f) == 0
        if empty:
            _fail(f, "file is empty (0 bytes)")
        try:
            return pq.ParquetFile(src), src
        except Exception as exc:
            if src is not f:
                src.close()
                if isinstance(exc, OSError):  # the store's fault, not the file's
                    _fail(f, f"cannot read the Parquet footer: "
                             f"{_where.reason(exc, _where.url_scheme(f))}")
            _fail(f, f"not a readable Parquet file: {_one_line(exc)}")

    def _open(self, i, names):
        import pyarrow.parquet as pq

        f = self.files[i]
        # No pre-buffering and a small read buffer: pages are read as they are decoded,
        # not a whole column chunk of the row group at once.
        if _where.is_url(f):
            src = _where.open_file(f)
            whole = _largest_group(self.footers[i], names) <= _REMOTE_PREFETCH
            return pq.ParquetFile(src, metadata=self.footers[i], pre_buffer=whole,
                                  buffer_size=0 if whole else _REMOTE_BUFFER,
                                  page_checksum_verification=self.verify_checksums), src
        return pq.ParquetFile(f, pre_buffer=False, buffer_size=_PARQUET_BUFFER,
                              page_checksum_verification=self.verify_checksums), None

    def chunks(self, names, chunk_rows, any_type=()):
        wanted = list(dict.fromkeys(names))
        in_files = [n for n in wanted if n not in self.partitions.names]
        dtypes = {n: self._dtype(n) if len(self.files) > 1 and n not in any_type else None
                  for n in wanted}
        convert = {n: _arrow_to_any if n in any_type else _arrow_to_numpy for n in wanted}
        start = 0
        for i, (f, schema) in enumerate(zip(self.files, self._schemas)):
            _check_unique(f, names, schema.names)
            file_start = 0
            pf = src = None
            try:
                pf, src = self._open(i, in_files)
                # One row group at a time, in batches of chunk_rows: iter_batches over the
                # whole file keeps what it has read (pyarrow 26), one row group does not.
                for g in range(pf.metadata.num_row_groups):
                    for batch in pf.iter_batches(batch_size=chunk_rows, row_groups=[g],
                                                 columns=in_files,
                                                 use_threads=_decode_threads()):
                        n = batch.num_rows
                        arrays = {m: batch.column(batch.schema.get_field_index(m))
                                  for m in in_files}
                        for m in wanted:
                            if m not in arrays:
                                arrays[m] = self.partitions.array(i, m, n)
                        cols = tuple(_widen(convert[m](arrays[m]), dtypes[m]) for m in names)
                        arrays = batch = None
                        yield Chunk(cols, f, start, file_start)
                        start += n
                        file_start += n
            except Exception as exc:  # any reader failure becomes one ValueError naming the file
                if isinstance(exc, ValueError) and str(exc).startswith(f"{_where.shown(f)}:"):
                    raise
                if _where.is_url(f) and isinstance(exc, OSError):
                    _fail(f, f"cannot read Parquet data near row {file_start}: "
                             f"{_where.reason(exc, _where.url_scheme(f))}")
                text = _one_line(exc)
                if "checksum" in text.lower():
                    _fail(f, f"corrupt data page near row {file_start}: {text}; expected the "
                             "page checksums stored in the file to match (verify_checksums="
                             "False, --no-verify-checksums, reads it anyway)")
                _fail(f, f"cannot read Parquet data near row {file_start}: {text}")
            finally:
                if src is not None:
                    pf.close()
                    src.close()
            if file_start != pf.metadata.num_rows:
                _fail(f, f"read {file_start} rows but the footer says {pf.metadata.num_rows}")


def _decode_threads():
    """Whether pyarrow decodes a batch's columns on its own threads: only with more
    than two cores. On two, the fill takes one core and the reader thread the other,
    and pyarrow's threads beside them made ``score_file`` slower: 1e8 float32 rows,
    alternated, 0.63-0.67 s with them against 0.53-0.54 s without."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        cores = os.cpu_count() or 1
    return cores > 2


def _largest_group(meta, names):
    """The largest compressed bytes of the columns ``names`` in one row group of a file."""
    idx = [k for k in range(meta.num_columns)
           if meta.schema.column(k).path.split(".")[0] in names]
    return max((sum(meta.row_group(g).column(k).total_compressed_size for k in idx)
                for g in range(meta.num_row_groups)), default=0)

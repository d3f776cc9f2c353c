"""Parquet: one file or a directory dataset, read one row group at a time in
batches of ``chunk_rows`` rows through a 1 MiB read buffer, page checksums verified
by default (see :mod:`fastcal.sources.io`)."""

import os

from fastcal.sources.readers.base import (Chunk, _ArrowFiles, _arrow_to_any, _arrow_to_numpy,
                                          _check_flag, _check_unique, _fail, _one_line, _widen)
from fastcal.sources.readers.paths import _files_of


# Parquet: pages are read through a buffer of this size, not a whole column chunk at once.
_PARQUET_BUFFER = 1 << 20


class ParquetReader(_ArrowFiles):
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

    def _open(self, f):
        import pyarrow.parquet as pq

        # No pre-buffering and a small read buffer: pages are read as they are decoded,
        # not a whole column chunk of the row group at once.
        return pq.ParquetFile(f, pre_buffer=False, buffer_size=_PARQUET_BUFFER,
                              page_checksum_verification=self.verify_checksums)

    def chunks(self, names, chunk_rows, any_type=()):
        wanted = list(dict.fromkeys(names))
        dtypes = {n: self._dtype(n) if len(self.files) > 1 and n not in any_type else None
                  for n in wanted}
        convert = {n: _arrow_to_any if n in any_type else _arrow_to_numpy for n in wanted}
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
                        cols = tuple(_widen(convert[n](batch.column(idx[n])), dtypes[n])
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

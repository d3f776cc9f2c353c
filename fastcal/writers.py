"""Simulated predictions written to a file, chunk by chunk: :func:`simulate_file`
(what ``fastcal simulate`` and ``make demo`` write) and one writer per format
(Parquet, Feather, CSV or gzip-compressed CSV, a directory of NPY columns).

A file is written to a temporary name beside it and renamed at the end, so a
failed or interrupted run leaves the old file (or none) in place; a FIFO or
device is written through. Bad arguments are a one-line ``ValueError``.
"""

from collections import deque
from concurrent.futures import ThreadPoolExecutor
import os
import shutil

import numpy as np

from fastcal import _atomic
from fastcal.inputs.validation import show
from fastcal.progress import Progress
from fastcal.simulate import simulate

SIM_FORMATS = ("parquet", "npy", "csv", "feather")


SIM_CHUNK_ROWS = 1 << 20


def _check_folder(path):
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        msg = f"{path}: the directory {d} does not exist"
        raise ValueError(msg)


def write_text_atomic(path, text):
    """Write ``text`` to ``path`` via a temporary file and a rename (FIFOs written through)."""
    _check_folder(path)
    _atomic.write_atomically(path, lambda fh: fh.write(text), mode="w")


def _one_line(exc):
    try:
        text = " ".join(str(exc).split())
    except Exception:  # a broken __str__ must not hide the error
        text = ""
    return text or type(exc).__name__


def _bytes_per_row(fmt, dt):
    """About how many bytes a row takes on disk (for the free-space check)."""
    if fmt == "csv":
        return 26 if dt.itemsize == 8 else 15  # shortest decimals, comma, label, newline
    return dt.itemsize + 1


def _check_disk(out, n, fmt, dt, compressed):
    if compressed:
        return
    need = n * _bytes_per_row(fmt, dt)
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(out))).free
    if need > free:
        msg = (f"{out}: {n:,} rows need about {need / 1e9:.3g} GB and only "
               f"{free / 1e9:.3g} GB are free there; lower --n or choose another place")
        raise ValueError(msg)


def _chunks(n, sigma, seed, dtype, chunk_rows):
    """Simulated (y, p) chunks in order; up to two are generated ahead in worker threads."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        ahead = deque()
        for a in range(0, n, chunk_rows):
            ahead.append(pool.submit(simulate, min(chunk_rows, n - a), sigma=sigma, seed=seed,
                                     start=a, dtype=dtype))
            if len(ahead) > 2:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def simulate_file(out, *, n, sigma=0.0, seed=0, format="parquet", dtype="float64",
                  chunk_rows=SIM_CHUNK_ROWS, progress=None):
    """Write rows [0, n) of :func:`fastcal.simulate` to ``out`` as columns p and y.

    Written chunk by chunk to a temporary name next to ``out`` and renamed at
    the end. ``format="npy"`` writes a directory ``out`` with ``p.npy`` and
    ``y.npy`` (and refuses to replace an existing directory).
    """
    if format not in SIM_FORMATS:
        msg = f"format must be one of {', '.join(SIM_FORMATS)}; got {show(format)}"
        raise ValueError(msg)
    if n < 1:
        msg = f"n must be >= 1; got {n}"
        raise ValueError(msg)
    if chunk_rows < 1:
        msg = f"chunk_rows must be >= 1; got {chunk_rows}"
        raise ValueError(msg)
    if not sigma >= 0:
        msg = f"sigma must be >= 0; got {sigma}"
        raise ValueError(msg)
    dt = np.dtype(dtype)
    out = os.fspath(out)
    if os.path.isdir(out):
        msg = f"{out}: is an existing directory; remove it or choose another name"
        raise ValueError(msg)
    if format == "npy" and _atomic.is_special(out):
        msg = f"{out}: NPY output is a directory; a FIFO or device cannot hold it"
        raise ValueError(msg)
    _check_folder(out)
    compressed = out.lower().endswith(".gz")
    special = _atomic.is_special(out)
    if compressed and format != "csv":
        msg = f"{out}: a .gz name is for gzip-compressed CSV; got format {format!r}"
        raise ValueError(msg)
    if not special:
        _atomic.sweep(_atomic.resolve(out))  # what a killed earlier run left behind
    _check_disk(out, n, format, dt, compressed or special)
    bar = Progress(n, label=os.path.basename(out), enabled=progress)
    chunks = _chunks(n, sigma, seed, dt, chunk_rows)
    try:
        if format == "npy":
            _write_npy_dir(out, n, dt, chunks, bar)
        elif _atomic.is_special(out):  # a FIFO or device: written through, never replaced
            try:
                _WRITERS[format](out, dt, chunks, bar, chunk_rows, compressed)
            except OSError as exc:
                msg = f"{out}: could not write ({exc.strerror or _one_line(exc)})"
                raise OSError(exc.errno, msg) from None
        else:
            _write_replacing(out, format, dt, chunks, bar, chunk_rows, compressed)
    finally:
        chunks.close()
        bar.close()


def _write_replacing(out, format, dt, chunks, bar, chunk_rows, compressed):
    """Write to a temporary name beside ``out`` (keeping the mode of the file it
    replaces), then rename it to ``out``; on any failure remove it."""
    real = _atomic.resolve(out)
    tmp = _temp_in_folder(out, real, _atomic.temp_near, suffix=os.path.splitext(out)[1])
    try:
        _WRITERS[format](tmp, dt, chunks, bar, chunk_rows, compressed)
        keep = _atomic.existing_mode(real)
        if keep is not None:
            os.chmod(tmp, keep)
        _atomic.rename(tmp, real)
    except OSError as exc:
        _atomic.remove(tmp)
        msg = f"{out}: could not write ({exc.strerror or _one_line(exc)})"
        raise OSError(exc.errno, msg) from None
    except BaseException:
        _atomic.remove(tmp)
        raise


def _temp_in_folder(out, real, make, **kw):
    """``make(real, **kw)``: a temporary file or directory beside ``real``; an error
    names the directory (not the temporary name, which the user never chose)."""
    try:
        return make(real, **kw)
    except OSError as exc:
        folder = os.path.dirname(os.path.abspath(real))
        msg = (f"{out}: cannot create a file in the directory {folder} "
               f"({exc.strerror or _one_line(exc)})")
        raise OSError(exc.errno, msg) from None


def _arrow_schema(dt):
    import pyarrow as pa

    return pa.schema([("p", pa.from_numpy_dtype(dt)), ("y", pa.uint8())])


def _batch(schema, y, p):
    import pyarrow as pa

    return pa.record_batch([pa.array(p), pa.array(y)], schema=schema)


def _write_parquet(tmp, dt, chunks, bar, chunk_rows, compressed=False):
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema(dt)
    with pa.OSFile(tmp, "wb") as sink, pq.ParquetWriter(sink, schema) as w:
        for y, p in chunks:
            w.write_batch(_batch(schema, y, p), row_group_size=chunk_rows)
            bar.update(p.shape[0])


def _write_feather(tmp, dt, chunks, bar, chunk_rows, compressed=False):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    schema = _arrow_schema(dt)
    with pa.OSFile(tmp, "wb") as sink, ipc.new_file(sink, schema) as w:
        for y, p in chunks:
            w.write_batch(_batch(schema, y, p))
            bar.update(p.shape[0])


def _write_csv(tmp, dt, chunks, bar, chunk_rows, compressed=False):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    schema = _arrow_schema(dt)
    sink = pa.CompressedOutputStream(tmp, "gzip") if compressed else pa.OSFile(tmp, "wb")
    with sink, pcsv.CSVWriter(sink, schema) as w:
        for y, p in chunks:
            w.write_batch(_batch(schema, y, p))
            bar.update(p.shape[0])


_WRITERS = {"parquet": _write_parquet, "feather": _write_feather, "csv": _write_csv}


def _write_npy_dir(out, n, dt, chunks, bar):
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        msg = f"{out}: the directory {parent} does not exist"
        raise ValueError(msg)
    _check_disk(out, n, "npy", dt, False)
    tmp = _temp_in_folder(out, out, _atomic.temp_dir_near)
    try:
        files = {}
        for name, dtype in (("p", dt), ("y", np.dtype(np.uint8))):
            fh = open(os.path.join(tmp, f"{name}.npy"), "wb")
            files[name] = fh
            header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                      "shape": (n,)}
            np.lib.format.write_array_header_1_0(fh, header)
        try:
            for y, p in chunks:
                files["p"].write(np.ascontiguousarray(p, dtype=dt).tobytes())
                files["y"].write(np.ascontiguousarray(y, dtype=np.uint8).tobytes())
                bar.update(p.shape[0])
        finally:
            for fh in files.values():
                fh.close()
        _atomic.rename(tmp, out)
    except BaseException:
        _atomic.remove(tmp)
        raise

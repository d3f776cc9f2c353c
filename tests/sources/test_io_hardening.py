"""Reader hardening (issue 12): crafted NPY headers, duplicate columns, files that shrink
while read, Parquet page checksums, memory bounded by the chunk, CSV conversion errors
with the global row, symlink loops and unreadable directories, mixed dtypes in a dataset.

Every failure must be one ValueError line that names the file, what was found and what
was expected."""

import errno
import json
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.files import score_file
from fastcal.sources import io as fio
from fastcal.sources.io import open_reader
from fastcal.sources.readers import base as readers_base
from fastcal.sources.readers import feather as feather_reader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_line(exc_info, path):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(str(path)), msg
    return msg


def write_feather(path, table, max_chunksize=None):
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=max_chunksize):
            w.write_batch(b)


# -- 1. crafted NPY headers: exact sizes, nothing allocated per column before the check --

_HEADER_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    # A runaway allocation must fail here, not exhaust the machine.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))
    sys.path.insert(0, sys.argv[1])
    from fastcal.sources.io import open_reader
    out = []
    for f in sys.argv[2:]:
        try:
            r, _ = open_reader(f)
            out.append("opened " + repr(r.columns[:3]))
        except ValueError as exc:
            out.append(str(exc))
        except BaseException as exc:
            out.append(type(exc).__name__)
    print(json.dumps(out))
""")


def write_header(path, shape, descr="<f8", fortran=False, payload=b""):
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": descr, "fortran_order": fortran, "shape": shape})
        fh.write(payload)
    return str(path)


def test_crafted_npy_headers_are_refused_without_allocating(tmp_path):
    cases = {
        # element count 2**64 wraps to 0 in int64: the old size check passed
        "wrap.npy": dict(shape=(2**32, 2**32)),
        "wrap_fortran.npy": dict(shape=(2**32, 2**32), fortran=True),
        "huge1d.npy": dict(shape=(2**62,), descr="|u1"),
        "struct.npy": dict(shape=(2**33,), descr=[("p", "<f8"), ("y", "|u1")]),
        # no rows but 2**40 columns: the file is "big enough" (0 bytes of data)
        "cols.npy": dict(shape=(0, 2**40)),
        "negative.npy": dict(shape=(-1, 2)),
    }
    files = [write_header(tmp_path / name, **kw) for name, kw in cases.items()]
    res = subprocess.run([sys.executable, "-c", _HEADER_SCRIPT, ROOT, *files],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    msgs = dict(zip(cases, json.loads(res.stdout)))
    for name, msg in msgs.items():
        assert msg.startswith(str(tmp_path / name)), (name, msg)
        assert "\n" not in msg
    for name in ("wrap.npy", "wrap_fortran.npy", "huge1d.npy", "struct.npy"):
        assert "truncated" in msgs[name], msgs[name]
    # exact Python integers: the promised size is named in full
    assert str(2**64 * 8) in msgs["wrap.npy"], msgs["wrap.npy"]
    assert str(2**33 * 9) in msgs["struct.npy"], msgs["struct.npy"]
    assert "columns" in msgs["cols.npy"] and str(2**40) in msgs["cols.npy"], msgs["cols.npy"]
    assert "negative" in msgs["negative.npy"], msgs["negative.npy"]


def test_npy_column_count_is_capped_with_a_message(tmp_path):
    k = fio.MAX_COLUMNS + 1
    f = write_header(tmp_path / "wide.npy", (1, k), descr="|u1", payload=bytes(k))
    with pytest.raises(ValueError) as e:
        open_reader(f)
    msg = one_line(e, f)
    assert f"{k} columns" in msg and str(fio.MAX_COLUMNS) in msg, msg


# -- 4. duplicate column names ----------------------------------------------------------

def dup_table():
    return pa.Table.from_arrays(
        [pa.array([0.1, 0.2, 0.9]), pa.array([0, 0, 1]), pa.array([0.5, 0.5, 0.5])],
        names=["p", "y", "p"])


@pytest.mark.parametrize("fmt", ["parquet", "feather", "csv"])
def test_duplicate_column_is_named(tmp_path, fmt):
    t = dup_table()
    f = tmp_path / f"d.{fmt}"
    if fmt == "parquet":
        pq.write_table(t, f)
    elif fmt == "feather":
        write_feather(f, t)
    else:
        f.write_text("p,y,p\n0.1,0,0.5\n0.2,0,0.5\n0.9,1,0.5\n")
    with pytest.raises(ValueError) as e:
        score_file(f)
    msg = one_line(e, f)
    assert "'p'" in msg and "2 times" in msg, msg
    # a duplicated column that is not asked for is harmless
    r, _ = open_reader(f)
    r.check(["y"])
    (chunk,) = list(r.chunks(["y"], 10))
    np.testing.assert_array_equal(chunk.columns[0], [0, 0, 1])


def test_duplicate_npy_column_in_a_directory(tmp_path):
    d = tmp_path / "cols"
    d.mkdir()
    np.save(d / "p.npy", np.array([0.1, 0.9]))
    with open(d / "p.NPY", "wb") as fh:  # np.save would append ".npy"
        np.save(fh, np.array([0.2, 0.8]))
    np.save(d / "y.npy", np.array([0, 1], np.uint8))
    with pytest.raises(ValueError) as e:
        open_reader(d)
    msg = one_line(e, d)
    assert "'p'" in msg and "p.npy" in msg and "p.NPY" in msg, msg


def test_duplicate_column_dask_dataframe_and_dataset(tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from fastcal.distributed import score_dataframe, score_dataset

    pdf = pd.DataFrame(np.array([[0.1, 0, 0.5], [0.9, 1, 0.5]]), columns=["p", "y", "p"])
    with pytest.raises(ValueError) as e:
        score_dataframe(dd.from_pandas(pdf, npartitions=1))
    msg = str(e.value)
    assert "\n" not in msg and "'p'" in msg and "2 times" in msg, msg

    d = tmp_path / "ds"
    d.mkdir()
    pq.write_table(pa.table({"p": [0.1, 0.9], "y": [0, 1]}), d / "a.parquet")
    pq.write_table(dup_table(), d / "b.parquet")
    with pytest.raises(ValueError) as e:
        score_dataset(str(d))
    msg = one_line(e, d / "b.parquet")
    assert "'p'" in msg and "2 times" in msg, msg


# -- 6. an NPY file that shrinks while it is read -----------------------------------------

def npy_layouts(tmp_path, n):
    rng = np.random.default_rng(6)
    p = rng.random(n)
    y = (rng.random(n) < p).astype(np.uint8)
    s = np.zeros(n, dtype=[("p", "<f8"), ("y", "|u1")])
    s["p"], s["y"] = p, y
    out = {}
    np.save(tmp_path / "s.npy", s)
    out["struct"] = (tmp_path / "s.npy", tmp_path / "s.npy", ("p", "y"))
    np.save(tmp_path / "c.npy", np.stack([p, y.astype(np.float64)], axis=1))
    out["2d"] = (tmp_path / "c.npy", tmp_path / "c.npy", ("0", "1"))
    np.save(tmp_path / "f.npy", np.asfortranarray(np.stack([p, y.astype(np.float64)], axis=1)))
    out["fortran"] = (tmp_path / "f.npy", tmp_path / "f.npy", ("0", "1"))
    d = tmp_path / "dir"
    d.mkdir()
    np.save(d / "p.npy", p)
    np.save(d / "y.npy", y)
    out["dir"] = (d, d / "p.npy", ("p", "y"))
    return p, y, out


@pytest.mark.parametrize("layout", ["struct", "2d", "fortran", "dir"])
def test_npy_truncated_between_chunks_names_file_and_row(tmp_path, layout):
    n, rows = 1_000, 300
    p, _, layouts = npy_layouts(tmp_path, n)
    path, victim, names = layouts[layout]
    r, _ = open_reader(path)
    it = r.chunks(list(names), rows)
    first = next(it)
    np.testing.assert_array_equal(first.columns[0], p[:rows])
    size = os.path.getsize(victim)
    os.truncate(victim, size - 1000)  # a writer cuts the file while we read it
    data = size - 1000 - 128  # bytes of data left after the 128-byte header
    first_missing = {"struct": data // 9, "2d": data // 16, "fortran": n - 1000 // 8,
                     "dir": data // 8}[layout]
    with pytest.raises(ValueError) as e:
        for _ in it:
            pass
    msg = str(e.value)
    assert "\n" not in msg and str(victim) in msg, msg
    assert "truncated" in msg and f"{size - 1000} bytes" in msg, msg
    assert f"row {first_missing} is missing" in msg, msg


def test_npy_reads_without_memory_mapping(tmp_path, monkeypatch):
    """A memory map turns a file truncated while it is read into SIGBUS (a signal death):
    the NPY reader must read its windows with ordinary reads."""
    n = 1_000
    p, y, layouts = npy_layouts(tmp_path, n)

    def refuse(*args, **kwargs):
        raise AssertionError("the NPY reader memory-maps the file")

    monkeypatch.setattr(np, "memmap", refuse)
    monkeypatch.setattr(mmap, "mmap", refuse)
    for layout, (path, _, names) in layouts.items():
        r, _ = open_reader(path)
        got = [c.columns for c in r.chunks(list(names), 333)]
        np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), p, err_msg=layout)
        np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), y, err_msg=layout)


def test_feather_file_shrinking_between_chunks_is_an_error_not_sigbus(tmp_path):
    """The Feather reader slices a memory map: it checks the file's size before each slice,
    so a file cut between chunks is a message, never a touch of a page past the end."""
    n, rows = 100_000, 10_000
    p = np.random.default_rng(7).random(n)
    f = tmp_path / "one.feather"
    write_feather(f, pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)}))
    r, _ = open_reader(f)
    it = r.chunks(["p", "y"], rows)
    next(it)
    size = os.path.getsize(f)
    os.truncate(f, size // 2)
    with pytest.raises(ValueError) as e:
        next(it)
    msg = one_line(e, f)
    assert "shrank" in msg and f"{size} bytes" in msg and f"now {size // 2}" in msg, msg
    assert f"rows from {rows} on" in msg, msg


# -- 8. Parquet page checksums --------------------------------------------------------

def flip_value_byte(path, value):
    """Flip the lowest mantissa byte of one float64 stored in the file (a silent change)."""
    data = bytearray(path.read_bytes())
    pat = np.float64(value).tobytes()
    pos = data.find(pat)
    assert pos > 0 and data.find(pat, pos + 1) < 0
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))


def test_parquet_page_checksums_are_verified_by_default(tmp_path):
    rng = np.random.default_rng(8)
    p = rng.random(1_000)
    y = (rng.random(1_000) < p).astype(np.uint8)
    f = tmp_path / "ck.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, write_page_checksum=True,
                   compression="none", use_dictionary=False)
    flip_value_byte(f, p[500])
    with pytest.raises(ValueError) as e:
        score_file(f)
    msg = one_line(e, f)
    assert "checksum" in msg.lower(), msg
    # and an explicit opt-out reads the damaged value
    r, _ = open_reader(f, verify_checksums=False)
    got = np.concatenate([c.columns[0] for c in r.chunks(["p"], 256)])
    assert got[500] != p[500] and np.array_equal(np.delete(got, 500), np.delete(p, 500))
    with pytest.raises(ValueError) as e:
        list(open_reader(f, verify_checksums=True)[0].chunks(["p"], 256))
    one_line(e, f)


def test_verify_checksums_is_checked(tmp_path):
    f = tmp_path / "a.parquet"
    pq.write_table(pa.table({"p": [0.5], "y": [1]}), f)
    with pytest.raises(ValueError, match="verify_checksums"):
        open_reader(f, verify_checksums="no")


# -- 10. memory bounded by the chunk ----------------------------------------------------

def peak_arrow_bytes(reader, names, chunk_rows):
    """Largest pyarrow allocation alive while the chunks are handed out, and the chunk sizes."""
    peak, sizes = 0, []
    for c in reader.chunks(names, chunk_rows):
        peak = max(peak, pa.total_allocated_bytes())
        sizes.append(len(c.columns[0]))
    return peak, sizes


def test_one_big_parquet_row_group_is_read_in_chunks(tmp_path):
    n, rows = 2_000_000, 10_000
    p = np.random.default_rng(10).random(n)
    f = tmp_path / "one.parquet"
    pq.write_table(pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)}), f, row_group_size=n)
    r, _ = open_reader(f)
    before = pa.total_allocated_bytes()
    peak, sizes = peak_arrow_bytes(r, ["p", "y"], rows)
    assert max(sizes) <= rows and sum(sizes) == n
    # the row group is 18 MB; pages (1 MiB each, and a dictionary page) are what may be
    # alive, whatever the row group's size (measured: 3.6 MB at 2e6 rows, 3.4 MB at 4e5)
    assert peak - before < n * 9 // 3, peak - before


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_one_big_feather_batch_is_read_in_chunks(tmp_path, compression):
    n, rows = 400_000, 10_000
    p = np.random.default_rng(11).random(n)
    t = pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)})
    f = tmp_path / "one.feather"
    with pa.OSFile(str(f), "wb") as sink, ipc.new_file(
            sink, t.schema, options=ipc.IpcWriteOptions(compression=compression)) as w:
        w.write_batch(t.to_batches()[0])
    r, _ = open_reader(f)
    before = pa.total_allocated_bytes()
    peak, sizes = peak_arrow_bytes(r, ["p", "y"], rows)
    assert max(sizes) <= rows and sum(sizes) == n
    got = np.concatenate([c.columns[0] for c in r.chunks(["p"], rows)])
    np.testing.assert_array_equal(got, p)
    if compression is None:  # byte ranges of each chunk: no copy of the batch
        assert peak - before < n * 9 // 4, peak - before


# -- 11. messages: CSV conversion errors, symlink loops, unreadable directories -----------

def write_csv_with_bad_value(path, n, bad_row, column):
    rng = np.random.default_rng(12)
    p = np.round(rng.random(n), 6)
    y = (rng.random(n) < p).astype(int)
    lines = ["id,y,p"]
    for i in range(n):
        pv, yv = str(p[i]), str(y[i])
        if i == bad_row:
            if column == "p":
                pv = "oops"
            else:
                yv = "x"
        lines.append(f"{i},{yv},{pv}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("column", ["p", "y"])
def test_csv_conversion_error_gives_global_row_and_column_name(tmp_path, column):
    n, bad = 200_000, 150_017  # past the first block, so the header's schema says float
    f = tmp_path / "c.csv"
    write_csv_with_bad_value(f, n, bad, column)
    msgs = set()
    for chunk_rows in (7, 1_000, 100_000):
        with pytest.raises(ValueError) as e:
            score_file(f, chunk_rows=chunk_rows)
        msgs.add(one_line(e, f))
    assert len(msgs) == 1, msgs  # the message does not depend on chunk_rows
    msg = msgs.pop()
    assert f"row {bad}" in msg and f"column {column!r}" in msg and "#" not in msg, msg
    assert ("'oops'" if column == "p" else "'x'") in msg, msg


def test_csv_conversion_error_in_second_file_of_a_directory(tmp_path):
    d = tmp_path / "csvs"
    d.mkdir()
    write_csv_with_bad_value(d / "a.csv", 1_000, -1, "p")
    write_csv_with_bad_value(d / "b.csv", 200_000, 123_456, "y")
    with pytest.raises(ValueError) as e:
        score_file(d, chunk_rows=5_000)
    msg = one_line(e, d / "b.csv")
    assert "row 124456" in msg and "row 123456 of this file" in msg, msg
    assert "column 'y'" in msg


def test_symlink_loop_is_named(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    os.symlink(b, a)
    os.symlink(a, b)
    with pytest.raises(ValueError) as e:
        open_reader(a)
    assert "symlink loop" in one_line(e, a)
    d = tmp_path / "d"
    d.mkdir()
    pq.write_table(pa.table({"p": [0.5], "y": [1]}), d / "ok.parquet")
    os.symlink(d / "loop.parquet", d / "loop.parquet")
    with pytest.raises(ValueError) as e:
        open_reader(d)
    assert "symlink loop" in one_line(e, d / "loop.parquet")


def test_unreadable_directory_says_permission_denied(tmp_path, monkeypatch):
    d = tmp_path / "locked"
    d.mkdir()
    sub = d / "part"
    sub.mkdir()
    pq.write_table(pa.table({"p": [0.5], "y": [1]}), sub / "a.parquet")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(sub):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real(path)

    # Tests may run as root, which reads any directory: the refusal is simulated.
    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(ValueError) as e:
        open_reader(d)
    msg = one_line(e, sub)
    assert "permission denied" in msg.lower(), msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_unreadable_directory_for_real(tmp_path):
    d = tmp_path / "locked"
    d.mkdir()
    pq.write_table(pa.table({"p": [0.5], "y": [1]}), d / "a.parquet")
    os.chmod(d, 0)
    try:
        with pytest.raises(ValueError) as e:
            open_reader(d)
        assert "permission denied" in one_line(e, d).lower()
    finally:
        os.chmod(d, 0o755)


# -- 12. mixed dtypes in one dataset: the widest dtype is the dataset's ----------------

@pytest.mark.parametrize("fmt", ["parquet", "feather"])
def test_mixed_float_dtypes_use_the_widest(tmp_path, fmt):
    rng = np.random.default_rng(13)
    d = tmp_path / "mixed"
    d.mkdir()
    ps, ys = [], []
    for i, dtype in enumerate([np.float32, np.float64, np.float32]):
        p = rng.random(3_000).astype(dtype)
        # values on and next to the float32 edges, where the two dtypes' edges disagree
        p[:20] = np.repeat(np.arange(1, 11) / 10, 2).astype(dtype)
        y = (rng.random(3_000) < p).astype(np.int8 if i == 0 else np.int64)
        t = pa.table({"p": p, "y": y})
        if fmt == "parquet":
            pq.write_table(t, d / f"part{i}.parquet", row_group_size=1_000)
        else:
            write_feather(d / f"part{i}.feather", t, max_chunksize=1_000)
        ps.append(p)
        ys.append(y)
    r, _ = open_reader(d)
    assert r.dtype("p") == np.float64 and r.dtype("y") == np.int64
    for c in r.chunks(["p", "y"], 700):
        assert c.columns[0].dtype == np.float64 and c.columns[1].dtype == np.int64
    p_all = np.concatenate([p.astype(np.float64) for p in ps])
    y_all = np.concatenate(ys).astype(np.int64)
    got = score_file(d, chunk_rows=700)
    ref = fastcal.calibration_report(y_all, p_all)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    np.testing.assert_allclose(got.ece, ref.ece, rtol=1e-12)


def test_single_file_dtype_is_its_own(tmp_path):
    f = tmp_path / "a.parquet"
    pq.write_table(pa.table({"p": np.array([0.25, 0.75], np.float32), "y": [0, 1]}), f)
    r, _ = open_reader(f)
    assert r.dtype("p") == np.float32
    (c,) = list(r.chunks(["p"], 10))
    assert c.columns[0].dtype == np.float32
    d = tmp_path / "n"
    d.mkdir()
    np.save(d / "p.npy", np.array([0.25, 0.75], np.float32))
    np.save(d / "y.npy", np.array([0, 1], np.uint8))
    r, _ = open_reader(d)
    assert r.dtype("p") == np.float32 and r.dtype("y") == np.uint8
    csv = tmp_path / "a.csv"
    pcsv.write_csv(pa.table({"p": [0.25], "y": [1]}), csv)
    assert open_reader(csv)[0].dtype("p") == np.float64


# -- 2. .csv.gz files inside directories; what a directory's stray files become --

def write_csv_gz(path, table):
    with pa.CompressedOutputStream(str(path), "gzip") as sink:
        pcsv.write_csv(table, sink)


def three_tables(n=500):
    rng = np.random.default_rng(12)
    out = []
    for _ in range(3):
        p = rng.random(n)
        out.append(pa.table({"p": p, "y": (rng.random(n) < p).astype(np.uint8)}))
    return out


@pytest.mark.parametrize("layout", ["gz", "mixed"])
def test_directory_of_csv_gz_is_csv_and_every_file_is_read(tmp_path, layout):
    tables = three_tables()
    d = tmp_path / "preds"
    d.mkdir()
    for i, t in enumerate(tables):
        if layout == "mixed" and i == 1:
            pcsv.write_csv(t, str(d / f"part{i}.csv"))
        else:
            write_csv_gz(d / f"part{i}.csv.gz", t)
    assert fio.detect_format(str(d)) == "csv"
    reader, fmt = open_reader(str(d))
    assert fmt == "csv" and [os.path.basename(f) for f in reader.files] == [
        "part0.csv.gz", "part1.csv" if layout == "mixed" else "part1.csv.gz", "part2.csv.gz"]
    whole = pa.concat_tables(tables)
    rep = score_file(str(d), prob="p", label="y", chunk_rows=200)
    ref = fastcal.calibration_report(whole["y"].to_numpy(), whole["p"].to_numpy(), ace=False)
    assert rep.n == 1500
    assert rep.ece == pytest.approx(ref.ece, rel=1e-12)
    assert np.array_equal(rep.bins["count"], ref.bins["count"])


def test_single_csv_gz_is_detected_in_python(tmp_path):
    t = three_tables()[0]
    f = tmp_path / "one.csv.gz"
    write_csv_gz(f, t)
    assert fio.detect_format(str(f)) == "csv"
    rep = score_file(str(f), prob="p", label="y")
    assert rep.n == 500


def test_stray_files_of_a_parquet_directory_are_named(tmp_path):
    tables = three_tables()
    d = tmp_path / "ds"
    d.mkdir()
    for i, t in enumerate(tables):
        pq.write_table(t, d / f"part{i}.parquet")
    (d / "README.txt").write_text("notes")
    (d / "_SUCCESS").write_text("")  # dataset metadata: skipped without a word
    with pytest.warns(UserWarning) as rec:
        rep = score_file(str(d), prob="p", label="y")
    assert rep.n == 1500
    msgs = [str(w.message) for w in rec]
    assert msgs == [f"{d}: ignored 1 file that is not parquet data: README.txt"]
    # a file of another data format makes the directory ambiguous: both named
    pcsv.write_csv(tables[0], str(d / "notes.csv"))
    with pytest.raises(ValueError) as err:
        score_file(str(d), prob="p", label="y")
    msg = one_line(err, d)
    assert "mixes formats: 1 csv (notes.csv); 3 parquet (part0.parquet, part1.parquet, " \
           "part2.parquet)" in msg and "format=" in msg
    # choosing the format reads the Parquet files and names both others as ignored
    with pytest.warns(UserWarning, match=r"ignored 2 files that are not parquet data: "
                                         r"README.txt, notes.csv"):
        assert score_file(str(d), prob="p", label="y", format="parquet").n == 1500


# -- 4. what a new user meets with CSV files: bad gzip, empty, truncated, other separators --

def test_csv_gz_faults_are_one_line_each(tmp_path):
    import gzip

    cases = {
        "notgzip.csv.gz": (b"p,y\n0.1,0\n", "not valid gzip data at or after data row 0"),
        "empty.csv.gz": (gzip.compress(b""), "holds no header line once decompressed"),
        "blank.csv": (b"\n\n\n", "holds no header line (empty or blank lines only)"),
        "junk.csv.gz": (gzip.compress(b"p,y\n0.1,0\n") + b"trailing junk",
                        "not valid gzip data"),
        "semi.csv": (b"p;y\n0,2;0\n0,7;1\n", "looks separated by ';', but fastcal reads "
                                             "comma-separated files only"),
        "latin1.csv": (b"p,y\n0.2,0\n\xff\xfe,1\n", "column 'p' holds bytes that are not "
                                                   "UTF-8 text"),
    }
    for name, (data, want) in cases.items():
        f = tmp_path / name
        f.write_bytes(data)
        with pytest.raises(ValueError) as err:
            score_file(str(f), prob="p", label="y")
        assert want in one_line(err, f), (name, str(err.value))


def test_truncated_csv_gz_names_the_row_reached(tmp_path):
    import gzip

    rng = np.random.default_rng(3)
    rows = "".join(f"{a:.6f},{int(b)}\n" for a, b in zip(rng.random(300_000),
                                                           rng.random(300_000) < 0.5))
    whole = gzip.compress(("p,y\n" + rows).encode(), 1)
    f = tmp_path / "cut.csv.gz"
    f.write_bytes(whole[: len(whole) * 3 // 4])
    with pytest.raises(ValueError) as err:
        score_file(str(f), prob="p", label="y", chunk_rows=10_000)
    msg = one_line(err, f)
    assert "the gzip stream ends early at or after data row " in msg
    row = int(msg.split("data row ")[1].split()[0])
    assert 0 < row < 300_000
    # the complete rows the cut stream holds, whatever pyarrow had read ahead
    import zlib
    assert row == zlib.decompressobj(31).decompress(f.read_bytes()).count(b"\n") - 1


def test_truncated_csv_gz_counts_rows_across_members_and_blank_lines(tmp_path):
    # two gzip members, blank lines (LF and CRLF), the second member's 8-byte
    # trailer cut off: all 7 data rows decompress, the stream then ends early
    import gzip

    first = gzip.compress(b"p,y\n0.1,1\n\n0.2,0\n")
    second = gzip.compress(b"0.3,1\r\n\r\n0.4,0\r\n" + b"0.5,1\n" * 2 + b"0.6,0\n")
    f = tmp_path / "two.csv.gz"
    f.write_bytes(first + second[:-8])
    with pytest.raises(ValueError) as err:
        score_file(str(f), prob="p", label="y")
    msg = one_line(err, f)
    assert "the gzip stream ends early at or after data row " in msg
    assert int(msg.split("data row ")[1].split()[0]) == 7


def test_directory_whose_files_have_different_columns(tmp_path):
    d = tmp_path / "cols"
    d.mkdir()
    pcsv.write_csv(pa.table({"p": [0.1, 0.2], "y": [0, 1]}), str(d / "a.csv"))
    write_csv_gz(d / "b.csv.gz", pa.table({"q": [0.1, 0.2], "y": [0, 1]}))
    with pytest.raises(ValueError) as err:
        score_file(str(d), prob="p", label="y")
    assert "no column 'p'; the file has columns: 'q', 'y'" in one_line(err, d / "b.csv.gz")
    # the same columns in another order, or with an extra column, are read by name
    (d / "b.csv.gz").unlink()
    write_csv_gz(d / "b.csv.gz", pa.table({"y": [1, 0], "extra": [5, 6], "p": [0.9, 0.3]}))
    rep = score_file(str(d), prob="p", label="y")
    ref = fastcal.calibration_report(np.array([0, 1, 1, 0]), np.array([0.1, 0.2, 0.9, 0.3]),
                                     ace=False)
    assert rep.n == 4 and rep.ece == pytest.approx(ref.ece, rel=1e-12)


# -- 1b. Arrow IPC files are read with ordinary reads: a file cut at any moment is a message --

_RACE_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from fastcal.sources.io import open_reader
    for path in sys.stdin:
        path = path.strip()
        r, _ = open_reader(path)
        print("go", flush=True)
        rows = 0
        try:
            for c in r.chunks(["p", "y"], 1 << 17):
                rows += len(c.columns[0])
            print("ok", rows, flush=True)
        except ValueError as exc:
            print("error", str(exc).replace("\\n", "\\\\n"), flush=True)
""")


def test_feather_file_cut_while_chunks_are_copied_never_kills_the_process(tmp_path):
    """A child reads a one-batch Feather file while this process truncates it, 40 times at
    a random size: every read ends complete or with one line naming the file and the row,
    and the child is never killed by a signal (a memory map gave SIGBUS here)."""
    import shutil

    n = 1_000_000
    rng = np.random.default_rng(20)
    p = rng.random(n)
    template = tmp_path / "template.feather"
    write_feather(template, pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)}))
    size = os.path.getsize(template)
    f = tmp_path / "victim.feather"
    child = subprocess.Popen([sys.executable, "-c", _RACE_CHILD, ROOT], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outcomes = []
    try:
        for _ in range(40):
            shutil.copyfile(template, f)
            child.stdin.write(f"{f}\n")
            child.stdin.flush()
            assert child.stdout.readline() == "go\n"
            os.truncate(f, int(rng.integers(0, size)))  # while the child reads its chunks
            line = child.stdout.readline()
            assert line, f"child died: status {child.wait()}, {child.stderr.read()[-500:]}"
            outcomes.append(line.rstrip("\n"))
    finally:
        child.stdin.close()
        status = child.wait(timeout=60)
    err = child.stderr.read()
    child.stdout.close()  # warnings are errors: no unclosed pipe
    child.stderr.close()
    assert status == 0, (status, err[-500:])
    for out in outcomes:
        if out.startswith("ok"):
            assert out == f"ok {n}", out
            continue
        assert out.startswith(f"error {f}: file shrank while being read: it had {size} bytes, "
                              "now "), out
        assert "\\n" not in out and "cannot be read" in out, out
        row = int(out.split("rows from ")[1].split()[0])
        assert 0 <= row < n and row % (1 << 17) == 0, out


def test_feather_file_cut_between_opening_and_reading_names_row_0(tmp_path):
    p = np.random.default_rng(21).random(10_000)
    f = tmp_path / "a.feather"
    write_feather(f, pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)}), max_chunksize=3_000)
    size = os.path.getsize(f)
    for cut in (size - 1, size // 2, 100, 0):
        r, _ = open_reader(f)
        os.truncate(f, cut)
        with pytest.raises(ValueError) as e:
            next(r.chunks(["p", "y"], 1_000))
        msg = one_line(e, f)
        assert msg == (f"{f}: file shrank while being read: it had {size} bytes, now {cut}; "
                       "rows from 0 on cannot be read (expected a file that does not change "
                       "while it is scored)"), msg
        write_feather(f, pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)}),
                      max_chunksize=3_000)


def test_feather_read_that_comes_back_short_names_the_chunk(tmp_path, monkeypatch):
    """The file is cut during the reads of one chunk (after its p values, before its y
    values): the short read is the same message, with that chunk's first row."""
    p = np.random.default_rng(22).random(50_000)
    f = tmp_path / "a.feather"
    write_feather(f, pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)}))
    size = os.path.getsize(f)
    real = feather_reader._pread_all
    calls = []

    def cut_on_third_p_read(fd, n, pos):
        calls.append(n)
        if calls.count(80_000) == 3 and n == 80_000:  # the p values of rows 20,000..29,999
            os.truncate(f, pos)  # this read then finds nothing left
        return real(fd, n, pos)

    r, _ = open_reader(f)
    monkeypatch.setattr(feather_reader, "_pread_all", cut_on_third_p_read)
    it = r.chunks(["p", "y"], 10_000)
    got = [next(it).columns for _ in range(2)]
    with pytest.raises(ValueError) as e:
        next(it)
    msg = one_line(e, f)
    assert f"file shrank while being read: it had {size} bytes, now " in msg, msg
    assert "rows from 20000 on cannot be read" in msg, msg
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), p[:20_000])


def mixed_type_table(n, rng):
    """Columns of many types around the numeric ones read, with nulls, as pyarrow writes them."""
    def nulls(arr):
        mask = rng.random(n) < 0.1
        return pa.array(arr, mask=mask)

    k = 3
    flat = rng.random(n * k).astype(np.float32)
    lists = pa.FixedSizeListArray.from_arrays(pa.array(flat), k)
    child_nulls = pa.array(flat, mask=rng.random(n * k) < 0.1)
    lists_nulls = pa.FixedSizeListArray.from_arrays(child_nulls, k)  # null values, no null rows
    return pa.table({
        "name": pa.array([f"r{i}" if i % 7 else None for i in range(n)]),
        "ragged": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
        "rec": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
        "nothing": pa.nulls(n),
        "when": pa.array(np.arange(n).astype("datetime64[ms]")),
        "big": pa.array([str(i) * 3 for i in range(n)], pa.large_string()),
        "p64": pa.array(rng.random(n)),
        "p32n": nulls(rng.random(n).astype(np.float32)),
        "i64n": nulls(rng.integers(-5, 5, n)),
        "u8": pa.array(rng.integers(0, 2, n).astype(np.uint8)),
        "flag": pa.array(rng.random(n) < 0.5),
        "flagn": nulls(rng.random(n) < 0.5),
        "half": pa.array(rng.random(n).astype(np.float16)),
        "k3": lists,
        "k3n": lists_nulls,
        "dict": pa.array(rng.integers(0, 3, n).astype(np.float64)).dictionary_encode(),
    })


DIRECT = ["p64", "p32n", "i64n", "u8", "flag", "flagn", "half", "k3", "k3n"]


@pytest.mark.parametrize("chunk_rows", [1, 7, 13, 1_000, 5_000])
def test_feather_chunks_read_by_byte_ranges_equal_pyarrow(tmp_path, monkeypatch, chunk_rows):
    """Numeric, bool and fixed-size-list columns (with nulls, after columns of other types)
    are read by byte ranges, never by pyarrow's batch reader, and equal pyarrow's values;
    batches of 777 rows, so chunks start at any bit of the bitmaps."""
    n = 2_345 if chunk_rows > 1 else 300
    rng = np.random.default_rng(23)
    t = mixed_type_table(n, rng)
    f = tmp_path / "m.feather"
    write_feather(f, t, max_chunksize=777)
    whole = t.combine_chunks()
    want = {c: readers_base._arrow_to_numpy(whole.column(c)) for c in DIRECT + ["dict"]}

    def no_batch_reader(*args, **kwargs):
        raise AssertionError("a numeric column was read through pyarrow's batch reader")

    r, _ = open_reader(f)
    assert r.n_rows == n
    with monkeypatch.context() as m:
        m.setattr(fio.FeatherReader, "_whole", staticmethod(no_batch_reader))
        chunks = list(r.chunks(DIRECT, chunk_rows))
    assert all(len(c.columns[0]) <= chunk_rows for c in chunks)
    sizes = [len(c.columns[0]) for c in chunks]
    assert [c.start for c in chunks] == list(np.cumsum([0] + sizes[:-1])) and sum(sizes) == n
    for i, name in enumerate(DIRECT):
        got = np.concatenate([c.columns[i] for c in chunks])
        assert got.dtype == want[name].dtype, name
        np.testing.assert_array_equal(got, want[name], err_msg=name)
    # a dictionary column is read by pyarrow's batch reader (plain reads, too)
    got = np.concatenate([c.columns[1] for c in r.chunks(["p64", "dict"], chunk_rows)])
    np.testing.assert_array_equal(got, want["dict"])


def test_feather_reader_never_memory_maps(tmp_path, monkeypatch):
    p = np.random.default_rng(24).random(5_000)
    t = pa.table({"p": p, "y": (p > 0.5).astype(np.uint8)})
    files = {"file": tmp_path / "a.feather", "lz4": tmp_path / "c.feather",
             "stream": tmp_path / "s.arrows"}
    write_feather(files["file"], t, max_chunksize=1_000)
    with pa.OSFile(str(files["lz4"]), "wb") as sink, ipc.new_file(
            sink, t.schema, options=ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(t)
    with pa.OSFile(str(files["stream"]), "wb") as sink, ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)

    def refuse(*args, **kwargs):
        raise AssertionError("the Feather reader memory-maps the file")

    monkeypatch.setattr(pa, "memory_map", refuse)
    monkeypatch.setattr(mmap, "mmap", refuse)
    for kind, f in files.items():
        r, _ = open_reader(f)
        got = [c.columns for c in r.chunks(["p", "y"], 999)]
        np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), p, err_msg=kind)


def test_feather_v1_file_is_named_as_such(tmp_path):
    import warnings

    import pyarrow.feather as feather

    f = tmp_path / "old.feather"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        feather.write_feather(pa.table({"p": [0.1, 0.9], "y": [0, 1]}), str(f), version=1)
    with pytest.raises(ValueError) as e:
        score_file(str(f), prob="p", label="y")
    assert "a Feather V1 file" in one_line(e, f) and "write_feather" in str(e.value)

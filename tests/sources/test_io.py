"""fastcal.io, the public reading door: tables in chunks with global rows and ids of any
type, named arrays of any shape (.npz members, .npy files) with the NPY format's rules,
every failure one ValueError line naming the file."""

import io
import struct
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from fastcal import io as fio


def one_line(exc_info, path):
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(str(path)), msg
    return msg


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def with_header(raw, old, new):
    """NPY bytes whose header text has ``old`` replaced by ``new`` (same header length)."""
    end = raw.index(b"\n") + 1
    head = raw[10:end].replace(old.encode(), new.encode())
    head = head.rstrip(b" \n")
    head = head + b" " * (end - 10 - len(head) - 1) + b"\n"
    return raw[:10] + head + raw[end:]


# -- tables ----------------------------------------------------------------------------------

def test_a_directory_of_tables_reads_in_chunks_with_global_and_file_rows(tmp_path):
    t = np.array(["2024-01-01T00:00:00", "2024-01-01T00:00:05"] * 3, dtype="datetime64[us]")
    tables = [pa.table({"run": ["a", "b", None], "t": t[:3], "raw": [b"x", b"\xff", b"z"],
                        "v": pa.array([1.5, None, 3.0])}),
              pa.table({"run": ["c", "d", "e"], "t": t[3:], "raw": [b"u", b"v", b"w"],
                        "v": pa.array([4.0, 5.0, 6.0])})]
    (tmp_path / "d").mkdir()
    for i, tab in enumerate(tables):
        pq.write_table(tab, tmp_path / "d" / f"part{i}.parquet", row_group_size=2)
    table = fio.open_table(tmp_path / "d")
    assert (table.format, table.columns, table.n_rows) == ("parquet", ["run", "t", "raw", "v"], 6)
    ids = ["run", "t", "raw"]
    chunks = list(table.chunks(["v", *ids], 2, any_type=ids))
    assert [(c.start, c.file_start, c.file.endswith(f"part{k}.parquet"))
            for c, k in zip(chunks, [0, 0, 1, 1])] == [(0, 0, True), (2, 2, True), (3, 0, True), (5, 2, True)]
    got = [np.concatenate([c.columns[j] for c in chunks]) for j in range(4)]
    np.testing.assert_array_equal(got[0], [1.5, np.nan, 3.0, 4.0, 5.0, 6.0])
    assert got[1].tolist() == ["a", "b", None, "c", "d", "e"]
    np.testing.assert_array_equal(got[2], t)
    assert got[3].tolist() == [b"x", b"\xff", b"z", b"u", b"v", b"w"]
    # read as a number, the text column is refused with one line naming the file
    with pytest.raises(ValueError, match=r"column 'run' has type string; expected a numeric") as e:
        table.check(["run"])
    one_line(e, tmp_path / "d" / "part0.parquet")


@pytest.mark.parametrize("fmt", ["feather", "csv", "npy"])
def test_ids_keep_their_type_in_every_format(tmp_path, fmt):
    run = np.array(["r1", "r2", "r3", "r4", "r5"])
    step = np.array([0, 1, 2, 3, 4])
    v = np.array([0.5, 1.5, 2.5, 3.5, 4.5])
    if fmt == "npy":
        (tmp_path / "cols").mkdir()
        for name, a in (("run", run), ("step", step), ("v", v)):
            np.save(tmp_path / "cols" / f"{name}.npy", a)
        path = tmp_path / "cols"
    else:
        path = tmp_path / f"t.{fmt}"
        tab = pa.table({"run": run, "step": step, "v": v})
        feather.write_feather(tab, path) if fmt == "feather" else pcsv.write_csv(tab, path)
    chunks = list(fio.open_table(path).chunks(["run", "step", "v"], 3, any_type=["run", "step"]))
    assert [c.start for c in chunks] == [0, 3]
    cols = [np.concatenate([c.columns[j] for c in chunks]) for j in range(3)]
    assert [str(x) for x in cols[0]] == run.tolist() and cols[1].tolist() == step.tolist()
    assert cols[2].dtype == np.float64 and cols[2].tolist() == v.tolist()


def test_a_nested_column_is_refused_even_as_an_id(tmp_path):
    pq.write_table(pa.table({"run": [[1, 2], [3]], "v": [1.0, 2.0]}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"column 'run' has type list<.*>; expected one value per "
                                         r"row: numbers, bool, text") as e:
        fio.open_table(tmp_path / "n.parquet").chunks(["run"], any_type=["run"])
    one_line(e, tmp_path / "n.parquet")


def test_read_columns_is_bounded(tmp_path):
    pq.write_table(pa.table({"v": np.arange(10.0)}), tmp_path / "v.parquet")
    assert fio.read_columns(tmp_path / "v.parquet", ["v"])["v"].tolist() == list(range(10))
    with pytest.raises(ValueError, match=r"v.parquet: 10 rows; at most 9 are read whole"):
        fio.read_columns(tmp_path / "v.parquet", ["v"], max_rows=9)
    pcsv.write_csv(pa.table({"v": np.arange(10.0)}), tmp_path / "v.csv")  # rows unknown up front
    with pytest.raises(ValueError, match=r"v.csv: more than 4 rows; at most 4 are read whole"):
        fio.read_columns(tmp_path / "v.csv", ["v"], max_rows=4)


# -- arrays ----------------------------------------------------------------------------------

def test_arrays_of_every_storage_read_as_numpy_loads_them(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"x": rng.normal(size=(5, 3, 2)),
              "P": np.asfortranarray(rng.normal(size=(5, 3, 2, 2))),     # rows not contiguous
              "big": rng.normal(size=(5, 4)).astype(">f8"),              # another byte order
              "run": np.array(["a", "bb", "c", "d", "e"]),
              "when": np.arange(5).astype("datetime64[s]")}
    np.savez(tmp_path / "a.npz", **arrays)
    np.savez_compressed(tmp_path / "c.npz", **arrays)
    (tmp_path / "dir").mkdir()
    for name, a in arrays.items():
        np.save(tmp_path / "dir" / f"{name}.npy", a)
    for path in (tmp_path / "a.npz", tmp_path / "c.npz", tmp_path / "dir"):
        opened = fio.open_arrays(path)
        assert opened.shapes == {k: v.shape for k, v in arrays.items()}
        for name, a in arrays.items():
            np.testing.assert_array_equal(opened.read(name), a)
        names = list(arrays)
        for chunk_rows in (1, 2, 5):
            chunks = list(opened.chunks(names, chunk_rows))
            assert [c.start for c in chunks] == list(range(0, 5, chunk_rows))
            for c in chunks:
                for name, part in zip(names, c.columns):
                    np.testing.assert_array_equal(part, arrays[name][c.start:c.start + chunk_rows])
                    assert part.dtype.isnative
        # rows asked for out of order (a member's stream is reopened)
        first, again = next(opened.chunks(["x"], 2)), next(opened.chunks(["x"], 2))
        np.testing.assert_array_equal(first.columns[0], again.columns[0])


def _zip(path, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=method) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_damaged_npy_files_and_npz_members_are_one_line_naming_them(tmp_path):
    x = np.arange(24.0).reshape(2, 3, 4)
    raw = npy_bytes(x)
    cases = []
    # a file or member longer than its header says
    (tmp_path / "long").mkdir()
    (tmp_path / "long" / "x.npy").write_bytes(raw + b"\0" * 8)
    cases.append((tmp_path / "long", "x", r"long/x.npy: file is longer than its header says: shape "
                                          r"\(2, 3, 4\) of <f8 is 192 bytes .* the file has 328"))
    _zip(tmp_path / "long.npz", {"x.npy": raw + b"\0" * 8})
    cases.append((tmp_path / "long.npz", "x", r"long.npz: member x.npy: member is longer than its header says"))
    # a header whose shape is far larger than the file: refused before any allocation
    huge = with_header(raw, "(2, 3, 4)", "(20000000000, 3, 4)")
    for method, tag in ((zipfile.ZIP_STORED, "s"), (zipfile.ZIP_DEFLATED, "d")):
        _zip(tmp_path / f"huge_{tag}.npz", {"x.npy": huge}, method)
        cases.append((tmp_path / f"huge_{tag}.npz", "x",
                      r"member x.npy: member is truncated: the header promises shape \(20000000000, 3, 4\) of "
                      r"<f8, 1920000000000 bytes of data"))
    (tmp_path / "huge").mkdir()
    (tmp_path / "huge" / "x.npy").write_bytes(huge)
    cases.append((tmp_path / "huge", "x", r"huge/x.npy: file is truncated: the header promises shape"))
    # a header that does not tokenize (an unclosed bracket: tokenize.TokenError, not ValueError)
    untok = with_header(raw, "(2, 3, 4)", "(2, 3, 4 ")
    _zip(tmp_path / "token.npz", {"x.npy": untok})
    cases.append((tmp_path / "token.npz", "x", r"token.npz: member x.npy: not a readable NPY file"))
    (tmp_path / "token").mkdir()
    (tmp_path / "token" / "x.npy").write_bytes(untok)
    cases.append((tmp_path / "token", "x", r"token/x.npy: not a readable NPY file"))
    # archive rules: methods numpy does not write, sizes deflate cannot make, a cut archive, a bad CRC
    _zip(tmp_path / "bz.npz", {"x.npy": raw}, zipfile.ZIP_BZIP2)
    cases.append((tmp_path / "bz.npz", "x", r"member x.npy: is compressed with zip method 12; expected "
                                            r"stored or deflate"))
    _zip(tmp_path / "ratio.npz", {"x.npy": raw}, zipfile.ZIP_DEFLATED)
    data = bytearray((tmp_path / "ratio.npz").read_bytes())
    cd = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, cd + 24, 0xFFFF0000)  # central directory: uncompressed size
    (tmp_path / "ratio.npz").write_bytes(bytes(data))
    cases.append((tmp_path / "ratio.npz", "x", r"member x.npy: member claims 4294901760 bytes once "
                                               r"decompressed, more than deflate makes"))
    _zip(tmp_path / "cut.npz", {"x.npy": raw})
    (tmp_path / "cut.npz").write_bytes((tmp_path / "cut.npz").read_bytes()[:300])
    cases.append((tmp_path / "cut.npz", "x", r"cut.npz: not a readable .npz archive"))
    for size, tag in ((24, "small"), (3000, "large")):  # the CRC is checked at a member's end
        big = npy_bytes(np.arange(size, dtype=np.float64))
        _zip(tmp_path / f"crc_{tag}.npz", {"x.npy": big})
        data = bytearray((tmp_path / f"crc_{tag}.npz").read_bytes())
        data[data.index(big[-16:]) + 3] ^= 0x40  # a value byte: only the CRC can tell
        (tmp_path / f"crc_{tag}.npz").write_bytes(bytes(data))
        cases.append((tmp_path / f"crc_{tag}.npz", "x", r"member x.npy: (cannot be read|damaged data in rows "
                                                        r"0..2999|damaged data at its end): Bad CRC-32"))
    for path, name, needle in cases:
        with pytest.raises(ValueError, match=needle) as e:
            fio.open_arrays(path).read(name)
        one_line(e, path)


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_every_byte_of_a_header_flipped_reads_as_numpy_does_or_is_one_line(tmp_path, kind):
    x = np.arange(12.0).reshape(2, 3, 2)
    raw = npy_bytes(x)
    end = raw.index(b"\n") + 1
    outcomes = {"read": 0, "error": 0}
    for pos in range(end):
        for value in (0x00, 0x20, 0xFF):  # a space is harmless in the padding
            if raw[pos] == value:
                continue
            data = bytearray(raw)
            data[pos] = value
            if kind == "npy":
                path = tmp_path / f"f{pos}_{value}.npy"
                path.write_bytes(bytes(data))
            else:
                path = tmp_path / f"f{pos}_{value}.npz"
                _zip(path, {"x.npy": bytes(data)})
            try:
                got = fio.open_arrays(path).read(path.stem if kind == "npy" else "x")
            except ValueError as exc:
                assert str(exc).startswith(str(path)) and "\n" not in str(exc), str(exc)
                outcomes["error"] += 1
                continue
            ref = np.load(io.BytesIO(bytes(data)), allow_pickle=False)  # the damage was harmless
            np.testing.assert_array_equal(got, ref)
            outcomes["read"] += 1
    assert outcomes["error"] > 100 and outcomes["read"] > 0, outcomes


def test_chunks_need_one_length_and_reads_are_bounded(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros((3, 2)), y=np.zeros(4), s=np.float64(1.0))
    arrays = fio.open_arrays(tmp_path / "a.npz")
    with pytest.raises(ValueError, match=r"a.npz: arrays read together have different lengths: x \(3, 2\), "
                                         r"y \(4,\); expected one number of rows"):
        list(arrays.chunks(["x", "y"], 2))
    with pytest.raises(ValueError, match=r"a.npz: member y.npy: array of shape \(4,\) needs 32 bytes; at most "
                                         r"16 are read whole"):
        arrays.read("y", max_bytes=16)
    assert arrays.read("s") == 1.0
    with pytest.raises(ValueError, match=r"a.npz: no array 'z'; the arrays are: 'x', 'y', 's'"):
        arrays.read("z")

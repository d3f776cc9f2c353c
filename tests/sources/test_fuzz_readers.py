"""Truncated and byte-flipped files into every reader: a clean ValueError naming the file,
or, when the damaged file still reads, exactly the numbers of an independent full read."""

import os
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.cli import main
from fastcal.files import score_file

N = 2_000


def build(fmt, d):
    y, p = fastcal.simulate(N, sigma=0.5, seed=2, dtype=np.float32)
    t = pa.table({"p": p, "y": y})
    if fmt == "parquet":
        f = d / "f.parquet"
        pq.write_table(t, f, row_group_size=600)
    elif fmt == "parquet-ck":
        # page checksums, plain values: a flipped value byte is caught only by the checksum
        f = d / "f.parquet"
        pq.write_table(t, f, row_group_size=600, write_page_checksum=True, compression="none",
                       use_dictionary=False)
    elif fmt == "feather":
        f = d / "f.feather"
        with pa.OSFile(str(f), "wb") as sink, ipc.new_file(sink, t.schema) as w:
            for b in t.to_batches(max_chunksize=600):
                w.write_batch(b)
    elif fmt == "arrows":
        f = d / "f.arrows"
        with pa.OSFile(str(f), "wb") as sink, ipc.new_stream(sink, t.schema) as w:
            for b in t.to_batches(max_chunksize=600):
                w.write_batch(b)
    elif fmt == "csv":
        f = d / "f.csv"
        pcsv.write_csv(t, f)
    elif fmt == "npy":
        f = d / "f.npy"
        arr = np.zeros(N, dtype=[("p", "<f4"), ("y", "u1")])
        arr["p"], arr["y"] = p, y
        np.save(f, arr)
    elif fmt == "npy2d":
        f = d / "g.npy"
        np.save(f, np.stack([p.astype(np.float64), y.astype(np.float64)], axis=1))
    return f


COLS = {"npy2d": ("0", "1")}


def full_read(fmt, f):
    """Independent whole-file read with the libraries alone (None if they refuse it)."""
    try:
        if fmt == "parquet":
            t = pq.read_table(f, columns=["p", "y"])
        elif fmt == "parquet-ck":
            t = pq.ParquetFile(f, page_checksum_verification=True).read(columns=["p", "y"])
        elif fmt in ("feather", "arrows"):
            with pa.OSFile(str(f), "rb") as fh:
                t = (ipc.open_file(fh) if fmt == "feather" else ipc.open_stream(fh)).read_all()
        elif fmt == "csv":
            t = pcsv.read_csv(f, convert_options=pcsv.ConvertOptions(
                include_columns=["p", "y"], column_types={"p": pa.float64(), "y": pa.float64()}))
        elif fmt == "npy":
            a = np.load(f, allow_pickle=False)
            return a["p"], a["y"]
        else:
            a = np.load(f, allow_pickle=False)
            return a[:, 0], a[:, 1]
        cols = []
        for name in ("p", "y"):
            c = t[name]
            if c.null_count:
                c = c.cast(pa.float64())
            cols.append(c.to_numpy())
        return cols
    except Exception:
        return None


def check(fmt, f, chunk_rows):
    prob, label = COLS.get(fmt, ("p", "y"))
    try:
        got = score_file(str(f), prob=prob, label=label, chunk_rows=chunk_rows, format={
            "arrows": "feather", "npy2d": "npy", "parquet-ck": "parquet"}.get(fmt, fmt))
    except ValueError as exc:
        msg = str(exc)
        assert msg.startswith(str(f)), msg
        assert "\n" not in msg, msg
        return "error"
    ref_cols = full_read(fmt, f)
    assert ref_cols is not None, f"{f}: score_file read a file the libraries reject"
    p, y = ref_cols
    ref = fastcal.calibration_report(y, p, ace=False)
    for k in ("n", "ece", "esce", "mce", "ecd", "brier", "nll"):
        np.testing.assert_allclose(getattr(got, k), getattr(ref, k), rtol=1e-12, atol=0,
                                   err_msg=k)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    return "ok"


FORMATS = ["parquet", "parquet-ck", "feather", "arrows", "csv", "npy", "npy2d"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_files(tmp_path, fmt):
    f = build(fmt, tmp_path)
    data = f.read_bytes()
    cuts = sorted({0, 1, 4, 8, 16, 64, 100, 127, 128, 129, len(data) // 3, len(data) // 2,
                   len(data) - 100, len(data) - 8, len(data) - 1})
    outcomes = []
    for cut in cuts:
        g = tmp_path / f"cut{cut}{f.suffix}"
        g.write_bytes(data[:cut])
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            outcomes.append(check(fmt, g, chunk_rows=333))
        if fmt == "csv" and cut and not data[:cut].endswith(b"\n"):  # a cut inside a line
            assert any("does not end in a newline" in str(w.message) for w in seen), cut
        os.remove(g)
    # Every cut must be caught, except where the damaged file is still a valid shorter file
    # (then check() has verified the numbers): a CSV cut at a line end, or an Arrow stream
    # cut just before its 8-byte end-of-stream marker.
    allowed = {"csv": 4, "arrows": 1}.get(fmt, 0)
    assert outcomes.count("error") >= len(cuts) - allowed


@pytest.mark.parametrize("fmt", FORMATS)
def test_byte_flipped_files(tmp_path, fmt):
    f = build(fmt, tmp_path)
    data = bytearray(f.read_bytes())
    rng = np.random.default_rng([ord(c) for c in fmt])  # fixed per format
    # The header, the footer, and random positions in the body.
    positions = list(range(0, min(len(data), 80), 7)) + list(range(len(data) - 60, len(data), 5))
    positions += rng.integers(0, len(data), 40).tolist()
    seen = set()
    for pos in positions:
        g = tmp_path / f"flip{pos}{f.suffix}"
        bad = bytearray(data)
        bad[pos] ^= 0xFF if pos % 2 else 0x10
        g.write_bytes(bytes(bad))
        seen.add(check(fmt, g, chunk_rows=500))
        os.remove(g)
    assert "error" in seen  # some flips must be caught


def test_cli_exit_2_on_damaged_file(tmp_path, capsys):
    f = build("parquet", tmp_path)
    data = f.read_bytes()
    g = tmp_path / "half.parquet"
    g.write_bytes(data[: len(data) // 2])
    out = tmp_path / "r.json"
    assert main(["score", str(g), "--prob", "p", "--label", "y", "--json", "--output",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert str(g) in err and err.count("\n") == 1 and not out.exists()


def test_flipped_values_under_page_checksums_are_all_caught(tmp_path):
    """With page checksums, changing one stored value (its lowest byte: a silent, in-range
    change) must be an error for every row tried, in every row group."""
    f = build("parquet-ck", tmp_path)
    data = f.read_bytes()
    y, p = fastcal.simulate(N, sigma=0.5, seed=2, dtype=np.float32)
    for row in (0, 17, 599, 600, 1234, N - 1):
        pos = data.find(p[row].tobytes())
        assert pos > 0
        bad = bytearray(data)
        bad[pos] ^= 0x01
        g = tmp_path / f"v{row}.parquet"
        g.write_bytes(bytes(bad))
        assert check("parquet-ck", g, chunk_rows=250) == "error", row
        os.remove(g)


def test_feather_metadata_flips_are_caught_or_read_exactly(tmp_path):
    """The Feather reader parses the footer and each batch's metadata itself (to read byte
    ranges without a memory map): every byte of the footer and of the first batch's
    metadata, flipped, must give a clean error or exactly the numbers pyarrow reads."""
    from fastcal.sources.readers import _ipc as fio

    f = build("feather", tmp_path)
    data = f.read_bytes()
    fd = os.open(f, os.O_RDONLY)
    try:
        blocks, _ = fio._ipc_blocks(fd, len(data))
    finally:
        os.close(fd)
    off, meta, _ = blocks[0]
    footer = len(data) - 10 - int.from_bytes(data[-10:-6], "little")
    positions = list(range(off, off + meta)) + list(range(footer, len(data)))
    seen = []
    for pos in positions:
        g = tmp_path / f"m{pos}.feather"
        bad = bytearray(data)
        bad[pos] ^= 0x01 if pos % 2 else 0xFF
        g.write_bytes(bytes(bad))
        seen.append(check("feather", g, chunk_rows=500))
        os.remove(g)
    assert seen.count("error") > 50 and seen.count("ok") > 50

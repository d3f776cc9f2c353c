"""score_file against calibration_report on the same data in memory, for every format."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.files import score_file

SCALARS = ("n", "n_omitted", "ece", "esce", "mce", "ecd", "brier", "nll")
BIN_COLS = ("lower", "upper", "count", "conf", "frac_pos", "accuracy", "ece", "esce", "ecd",
            "ecd_var")


# Signed means (ESCE, ECD, per bin too) can be near zero, where a relative
# tolerance means nothing: chunked sums of O(1) terms agree to ~1e-16 absolute.
# atol matches the core tests (tests/api/test_core.py).
ATOL = 1e-13


def assert_same(got, ref, ace=False):
    names = SCALARS + (("ace",) if ace else ())
    for name in names:
        a, b = getattr(got, name), getattr(ref, name)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=ATOL, err_msg=name)
    for col in BIN_COLS:
        np.testing.assert_allclose(got.bins[col], ref.bins[col], rtol=1e-12, atol=ATOL,
                                   equal_nan=True, err_msg=col)
    assert got.strategy == ref.strategy


def make_data(n, seed, dtype=np.float32, ties=True):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 0.7, n).astype(dtype)
    if ties and n > 20:
        p[rng.integers(0, n, n // 5)] = dtype(0.3)  # a tied value on a quantile edge
        p[rng.integers(0, n, n // 50)] = 0.0
        p[rng.integers(0, n, n // 50)] = 1.0
        p[rng.integers(0, n, n // 20)] = dtype(0.7)
        p[rng.integers(0, n, n // 20)] = np.nextafter(dtype(0.7), dtype(1))  # same bucket
    y = (rng.random(n) < p).astype(np.uint8)
    return p, y


# -- writers: the same arrays in every format --------------------------------------------

def write(fmt, tmp_path, p, y, name="pred", rows_per_group=None):
    rows_per_group = rows_per_group or max(len(p) // 3, 1)
    table = pa.table({"id": np.arange(len(p)), "p": p, "y": y})
    if fmt == "parquet":
        f = tmp_path / f"{name}.parquet"
        pq.write_table(table, f, row_group_size=rows_per_group)
    elif fmt == "feather":
        f = tmp_path / f"{name}.feather"
        with pa.OSFile(str(f), "wb") as sink, ipc.new_file(sink, table.schema) as w:
            for b in table.to_batches(max_chunksize=rows_per_group):
                w.write_batch(b)
    elif fmt == "csv":
        f = tmp_path / f"{name}.csv"
        pcsv.write_csv(table, f)
    elif fmt == "npy-dir":
        f = tmp_path / name
        f.mkdir()
        np.save(f / "p.npy", p)
        np.save(f / "y.npy", y)
    elif fmt == "npy-struct":
        f = tmp_path / f"{name}.npy"
        arr = np.zeros(len(p), dtype=[("p", p.dtype), ("id", np.int64), ("y", np.uint8)])
        arr["p"], arr["y"], arr["id"] = p, y, np.arange(len(p))
        np.save(f, arr)
    elif fmt == "npy-2d":
        f = tmp_path / name
        f.mkdir()
        np.save(f / "probs.npy", np.stack([1 - p, p], axis=1))
        np.save(f / "labels.npy", y)
    elif fmt == "npy-2d-fortran":
        f = tmp_path / name
        f.mkdir()
        np.save(f / "probs.npy", np.asfortranarray(np.stack([1 - p, p], axis=1)))
        np.save(f / "labels.npy", y)
    else:
        raise AssertionError(fmt)
    return str(f)


COLS = {"npy-2d": ("probs:1", "labels"), "npy-2d-fortran": ("probs:1", "labels")}
FORMATS = ("parquet", "feather", "csv", "npy-dir", "npy-struct", "npy-2d", "npy-2d-fortran")


def in_memory(fmt, path, p, y):
    """The columns as the whole file would be read into memory."""
    if fmt == "csv":
        t = pcsv.read_csv(path)
        return t["p"].to_numpy(), t["y"].to_numpy()
    if fmt in COLS:
        return np.load(os.path.join(path, "probs.npy"))[:, 1], y
    return p, y


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_every_format_matches_in_memory(tmp_path, fmt, strategy):
    p, y = make_data(5_003, seed=1, dtype=np.float64 if fmt.startswith("npy-2d") else np.float32)
    path = write(fmt, tmp_path, p, y)
    prob, label = COLS.get(fmt, ("p", "y"))
    pm, ym = in_memory(fmt, path, p, y)
    ref = fastcal.calibration_report(ym, pm, n_bins=10, strategy=strategy)
    for chunk_rows in (1, 777, 5_003, None):
        if chunk_rows == 1 and strategy == "quantile":
            continue  # one row per chunk is slow in pass 2 and adds nothing over 777
        ace = chunk_rows != 1  # the second pass at one row per chunk is slow
        got = score_file(path, prob=prob, label=label, strategy=strategy, chunk_rows=chunk_rows,
                         ace=ace)
        assert_same(got, ref, ace=ace)
        # ACE: one more pass (boundary buckets); quantile: a probe pass, then the groups
        assert got.passes == (3 if strategy == "quantile" else 2 if ace else 1)
        assert got.n_rows == len(p)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3_000), chunk_rows=st.integers(1, 4_000), n_bins=st.integers(1, 15),
       seed=st.integers(0, 2**32 - 1), closed=st.sampled_from(["left", "right"]),
       strategy=st.sampled_from(["uniform", "quantile"]))
def test_chunk_size_does_not_change_results(tmp_path_factory, n, chunk_rows, n_bins, seed, closed,
                                            strategy):
    tmp = tmp_path_factory.mktemp("prop")
    p, y = make_data(n, seed)
    path = write("parquet", tmp, p, y, rows_per_group=max(n // 4, 1))
    ref = fastcal.calibration_report(y, p, n_bins=n_bins, closed=closed, strategy=strategy)
    got = score_file(path, prob="p", label="y", n_bins=n_bins, closed=closed, strategy=strategy,
                     chunk_rows=max(chunk_rows // 8, 1), ace=strategy == "uniform")
    assert_same(got, ref, ace=True)


def naive_quantile_groups(p, y, n_bins):
    """Equal-mass groups by hand: rows ordered by (p, position), cut at g * n // n_bins."""
    order = sorted(range(len(p)), key=lambda i: (float(p[i]), i))
    n = len(p)
    out = []
    for g in range(n_bins):
        rows = order[(g * n) // n_bins:((g + 1) * n) // n_bins]
        out.append((len(rows), sum(int(y[i]) for i in rows), sum(float(p[i]) for i in rows)))
    return out


@pytest.mark.parametrize("values", [
    [0.5] * 40,                                   # every row tied
    [0.0] * 13 + [1.0] * 17,                      # only the two ends
    [0.3, 0.3000001, 0.29999998, 0.3] * 11,       # several values in one bucket
])
def test_quantile_ties_match_hand_reference(tmp_path, values):
    rng = np.random.default_rng(5)
    p = np.array(values, dtype=np.float32)
    y = (rng.random(len(p)) < 0.5).astype(np.uint8)
    path = write("parquet", tmp_path, p, y, rows_per_group=7)
    got = score_file(path, prob="p", label="y", n_bins=7, strategy="quantile", chunk_rows=5)
    ref = naive_quantile_groups(p, y, 7)
    np.testing.assert_array_equal(got.bins["count"], [r[0] for r in ref])
    pos = np.array([r[1] for r in ref], dtype=float)
    cnt = np.array([r[0] for r in ref], dtype=float)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(got.bins["frac_pos"], pos / cnt, rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(got.bins["conf"], [r[2] for r in ref] / cnt, rtol=1e-12,
                                   equal_nan=True)


def test_directory_dataset_is_one_file(tmp_path):
    p, y = make_data(9_000, seed=3)
    d = tmp_path / "ds"
    d.mkdir()
    for i, (a, b) in enumerate([(0, 1000), (1000, 5000), (5000, 9000)]):
        pq.write_table(pa.table({"p": p[a:b], "y": y[a:b]}), d / f"part-{i}.parquet",
                       row_group_size=700)
    (d / "_SUCCESS").write_text("")
    ref = fastcal.calibration_report(y, p)
    got = score_file(str(d), prob="p", label="y", chunk_rows=1234)
    assert_same(got, ref)
    assert got.format == "parquet"


def test_nan_omit_counts_rows_and_matches(tmp_path):
    p, y = make_data(4_000, seed=4, ties=False)
    p = p.astype(np.float64)
    p[[5, 1500, 3999]] = np.nan
    yf = y.astype(np.float64)
    yf[[7, 2000]] = np.nan
    path = write("parquet", tmp_path, p, yf)
    for strategy in ("uniform", "quantile"):
        ref = fastcal.calibration_report(yf, p, nan_policy="omit", strategy=strategy)
        got = score_file(path, prob="p", label="y", nan_policy="omit", strategy=strategy,
                         chunk_rows=333)
        assert got.n_omitted == 5
        assert_same(got, ref)


def test_nulls_are_missing_values(tmp_path):
    p = pa.array([0.1, None, 0.8, 0.6], type=pa.float32())
    y = pa.array([0, 1, None, 1], type=pa.int8())
    f = tmp_path / "n.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f)
    got = score_file(str(f), prob="p", label="y", nan_policy="omit", chunk_rows=2)
    ref = fastcal.calibration_report(np.array([0, 1, np.nan, 1]),
                                     np.array([0.1, np.nan, 0.8, 0.6], dtype=np.float32),
                                     nan_policy="omit")
    assert got.n_omitted == 2 and got.n == 2
    assert_same(got, ref)
    with pytest.raises(ValueError, match=r"column 'p' contains 1 NaN values \(first at row 1\)"):
        score_file(str(f), prob="p", label="y", chunk_rows=2)


def test_other_options_pass_through(tmp_path):
    p, y = make_data(3_000, seed=6, ties=False)
    path = write("feather", tmp_path, p, y)
    edges = [0.0, 0.05, 0.2, 0.5, 0.9, 1.0]
    ref = fastcal.calibration_report(y, p, edges=edges, closed="right", observed="accuracy",
                                     eps=1e-6, ace=False)
    got = score_file(path, prob="p", label="y", edges=edges, closed="right",
                     observed="accuracy", eps=1e-6, chunk_rows=100)
    assert_same(got, ref)
    assert np.isnan(got.ace) and got.passes == 1


# -- bad input: one-line messages naming the file and the global row ----------------------

def test_bad_value_reports_global_row(tmp_path):
    p, y = make_data(10_000, seed=7, ties=False)
    p[7_321] = 1.5
    path = write("parquet", tmp_path, p, y)
    for chunk_rows in (100, 4_000, 20_000):
        with pytest.raises(ValueError) as err:
            score_file(path, prob="p", label="y", chunk_rows=chunk_rows)
        msg = str(err.value)
        assert msg.startswith(path) and "column 'p'" in msg and "at row 7321" in msg
        assert "\n" not in msg


def test_bad_label_in_directory_names_file_and_both_rows(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    pq.write_table(pa.table({"p": [0.2] * 50, "y": [0] * 50}), d / "a.parquet")
    y = [1] * 30
    y[12] = 3
    pq.write_table(pa.table({"p": [0.7] * 30, "y": y}), d / "b.parquet")
    with pytest.raises(ValueError) as err:
        score_file(str(d), prob="p", label="y", chunk_rows=8)
    msg = str(err.value)
    assert msg.startswith(str(d / "b.parquet"))
    assert "column 'y'" in msg and "at row 62 (row 12 of this file)" in msg


def test_nan_global_row_in_csv(tmp_path):
    p, y = make_data(2_000, seed=8, ties=False)
    p = p.astype(np.float64)
    p[1_999] = np.nan
    path = write("csv", tmp_path, p, y)
    with pytest.raises(ValueError, match="at row 1999"):
        score_file(path, prob="p", label="y", chunk_rows=64)


def test_missing_column_lists_columns(tmp_path):
    p, y = make_data(100, seed=9)
    for fmt in ("parquet", "feather", "csv", "npy-dir", "npy-struct"):
        path = write(fmt, tmp_path / fmt if False else tmp_path, p, y, name=f"m{fmt}")
        with pytest.raises(ValueError) as err:
            score_file(path, prob="prob", label="y")
        msg = str(err.value)
        assert msg.startswith(path) and "'prob'" in msg and "'p'" in msg and "'y'" in msg


def test_string_column_names_its_type(tmp_path):
    f = tmp_path / "s.parquet"
    pq.write_table(pa.table({"p": ["0.1", "0.2"], "y": [0, 1]}), f)
    with pytest.raises(ValueError, match=r"s.parquet: column 'p' has type string"):
        score_file(str(f), prob="p", label="y")
    c = tmp_path / "s.csv"
    c.write_text("p,y\n0.1,yes\n0.4,no\n")
    with pytest.raises(ValueError, match=r"s.csv: column 'y' has type string"):
        score_file(str(c), prob="p", label="y")
    n = tmp_path / "u.npy"
    np.save(n, np.array([("a", 1)], dtype=[("p", "U1"), ("y", "u1")]))
    with pytest.raises(ValueError, match=r"u.npy: column 'p' has dtype <U1"):
        score_file(str(n), prob="p", label="y")


def test_empty_and_degenerate_files(tmp_path):
    for name in ("e.parquet", "e.feather", "e.csv", "e.npy"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(ValueError, match=rf"{name}: file is empty"):
            score_file(str(tmp_path / name), prob="p", label="y")
    f = tmp_path / "zero.parquet"
    pq.write_table(pa.table({"p": pa.array([], pa.float32()), "y": pa.array([], pa.uint8())}), f)
    with pytest.raises(ValueError, match="zero.parquet: no data rows"):
        score_file(str(f), prob="p", label="y")
    c = tmp_path / "header.csv"
    c.write_text("p,y\n")
    with pytest.raises(ValueError, match="header.csv"):
        score_file(str(c), prob="p", label="y")
    d = tmp_path / "nothing"
    d.mkdir()
    (d / "README.txt").write_text("hi")
    with pytest.raises(ValueError, match="nothing: directory holds no data files"):
        score_file(str(d), prob="p", label="y")
    with pytest.raises(ValueError, match="no such file"):
        score_file(str(tmp_path / "absent.parquet"), prob="p", label="y")
    with pytest.raises(ValueError, match="cannot tell the format"):
        score_file(str(tmp_path / "nothing" / "README.txt"), prob="p", label="y")


def test_all_omitted_is_an_error(tmp_path):
    f = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"p": [np.nan, np.nan], "y": [0.0, 1.0]}), f)
    with pytest.raises(ValueError, match="all 2 rows were omitted"):
        score_file(str(f), prob="p", label="y", nan_policy="omit")


def test_csv_wrong_field_count_names_file(tmp_path):
    c = tmp_path / "bad.csv"
    lines = ["p,y"] + [f"0.{i % 9 + 1},{i % 2}" for i in range(500)]
    lines[301] = "0.5,1,7"
    c.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as err:
        score_file(str(c), prob="p", label="y", chunk_rows=50)
    msg = str(err.value)
    assert msg.startswith(str(c)) and "\n" not in msg
    assert "line 302: expected 2 fields, got 3: '0.5,1,7'" in msg  # header is line 1
    # the same row far beyond the first block (read while streaming)
    lines = ["p,y"] + [f"0.{i % 9 + 1},{i % 2}" for i in range(300_000)]
    lines[250_001] = "0.5,1,7"
    c.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"bad.csv: CSV line 250002: expected 2 fields, got 3"):
        score_file(str(c), prob="p", label="y", chunk_rows=5_000)


def test_truncated_parquet_names_file(tmp_path):
    p, y = make_data(20_000, seed=10)
    path = write("parquet", tmp_path, p, y)
    with open(path, "rb") as fh:
        data = fh.read()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut.parquet: not a readable Parquet file"):
        score_file(str(cut), prob="p", label="y")


def test_option_errors():
    with pytest.raises(ValueError, match="strategy must be one of"):
        score_file("x.parquet", strategy="kmeans")
    with pytest.raises(ValueError, match="chunk_rows must be a positive integer"):
        score_file("x.parquet", chunk_rows=0)
    with pytest.raises(ValueError, match="format must be one of"):
        score_file("x.parquet", format="xlsx")


def test_docstring_example_runs():
    import doctest

    import fastcal.files

    result = doctest.testmod(fastcal.files)
    assert result.attempted > 0 and result.failed == 0


def test_reader_thread_stops_on_error(tmp_path):
    import threading

    p, y = make_data(50_000, seed=12, ties=False)
    p[100] = 2.0
    path = write("parquet", tmp_path, p, y, rows_per_group=1_000)
    with pytest.raises(ValueError, match="at row 100"):
        score_file(path, prob="p", label="y", chunk_rows=50)
    assert not [t for t in threading.enumerate() if t.name == "fastcal-reader"]


def test_compressed_feather_with_bool_labels(tmp_path):
    import pyarrow.feather as feather

    y, p = fastcal.simulate(50_000, sigma=2.0, seed=1, dtype=np.float32)
    f = tmp_path / "lz4.feather"
    feather.write_feather(pa.table({"p": p, "b": y.astype(bool)}), f, chunksize=7_000,
                          compression="lz4")
    got = score_file(str(f), prob="p", label="b", chunk_rows=3_000)
    assert_same(got, fastcal.calibration_report(y.astype(bool), p))


# -- small blocks joined into chunks (fastcal.sources.files.coalesced) --------------------

def test_small_record_batches_are_joined_into_chunks(tmp_path):
    """A file of record batches (row groups) smaller than a chunk is read in whole
    chunks: the batches of a file joined in order, at most chunk_rows rows, the same
    report, and a bad row named by its global row wherever it falls in a joined chunk."""
    from fastcal.sources.files import FileSource, coalesced

    p, y = make_data(10_000, seed=21, ties=False)
    for fmt in ("feather", "parquet"):
        path = write(fmt, tmp_path, p, y, name=f"small-{fmt}", rows_per_group=700)
        source = FileSource(path, prob="p", label="y", chunk_rows=3_000)
        raw = list(source.reader.chunks(source.names, 3_000))
        assert {len(c.columns[0]) for c in raw[:-1]} == {700}  # the file's own batches
        joined = list(coalesced(iter(raw), 3_000))
        assert [len(c.columns[0]) for c in joined] == [2_800, 2_800, 2_800, 1_600]
        assert [c.start for c in joined] == [0, 2_800, 5_600, 8_400]
        assert all(c.file == path for c in joined)
        np.testing.assert_array_equal(np.concatenate([c.columns[0] for c in joined]), p)
        np.testing.assert_array_equal(np.concatenate([c.columns[1] for c in joined]), y)
        rep = score_file(path, prob="p", label="y", chunk_rows=3_000)
        assert_same(rep, fastcal.calibration_report(y, p, ace=False))
        assert_same(score_file(path, prob="p", label="y", chunk_rows=3_000, ace=True),
                    fastcal.calibration_report(y, p), ace=True)  # the second pass: same chunks
    bad = p.copy()
    bad[4_321] = 1.5  # in the third batch of the second joined chunk
    path = write("feather", tmp_path, bad, y, name="bad", rows_per_group=700)
    with pytest.raises(ValueError) as err:
        score_file(path, prob="p", label="y", chunk_rows=3_000)
    assert "column 'p'" in str(err.value) and "at row 4321" in str(err.value)


def test_chunks_of_two_files_are_not_joined(tmp_path):
    from fastcal.sources.files import FileSource, coalesced

    d = tmp_path / "ds"
    d.mkdir()
    p, y = make_data(1_000, seed=22, ties=False)
    for name, rows in (("a", slice(0, 300)), ("b", slice(300, 1_000))):
        pq.write_table(pa.table({"p": p[rows], "y": y[rows]}), d / f"{name}.parquet",
                       row_group_size=100)
    source = FileSource(str(d), prob="p", label="y", chunk_rows=250)
    joined = list(coalesced(source.reader.chunks(source.names, 250), 250))
    assert [(os.path.basename(c.file), c.start, len(c.columns[0])) for c in joined] == [
        ("a.parquet", 0, 200), ("a.parquet", 200, 100), ("b.parquet", 300, 200),
        ("b.parquet", 500, 200), ("b.parquet", 700, 200), ("b.parquet", 900, 100)]
    y[712] = 4  # the second file's row 412: both rows named, as before
    pq.write_table(pa.table({"p": p[300:], "y": y[300:]}), d / "b.parquet", row_group_size=100)
    with pytest.raises(ValueError) as err:
        score_file(str(d), prob="p", label="y", chunk_rows=250)
    assert "at row 712 (row 412 of this file)" in str(err.value)


def test_formats_read_without_decoding_fill_on_every_thread():
    import numba

    from fastcal.files import default_threads

    n = numba.get_num_threads()
    assert default_threads("npy") == default_threads("feather") == n
    assert default_threads("parquet") == default_threads("csv") == max(1, n - 1)

"""Multi-class and logit columns from files: same numbers as the in-memory report."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.files import score_file

K = 4


def make_multiclass(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, K)) * 2.0
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(n)[:, None]
    y = (u > np.cumsum(p, axis=1)).sum(axis=1).clip(0, K - 1)
    return z, p, y


def write(fmt, tmp_path, z, p, y):
    cols = {f"p_{k}": p[:, k] for k in range(K)}
    cols.update({f"z_{k}": z[:, k] for k in range(K)})
    cols["label"] = y
    table = pa.table(cols)
    f = tmp_path / f"mc.{ {'parquet': 'parquet', 'feather': 'feather', 'csv': 'csv'}[fmt] }"
    if fmt == "parquet":
        pq.write_table(table, f, row_group_size=700)
    elif fmt == "feather":
        feather.write_feather(table, f, chunksize=700)
    else:
        pcsv.write_csv(table, f)
    return f


def assert_same(got, ref):
    assert type(got) is type(ref) and got.n == ref.n
    for name in ("ece", "esce", "mce", "ecd", "brier", "nll", "classwise_ece"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12, atol=1e-13,
                                   err_msg=name)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])


@pytest.mark.parametrize("fmt", ["parquet", "feather", "csv"])
@pytest.mark.parametrize("chunk_rows", [1, 333, 100_000])
def test_class_columns_match_in_memory(tmp_path, fmt, chunk_rows):
    n = 2_500 if chunk_rows > 1 else 300
    z, p, y = make_multiclass(n, seed=chunk_rows)
    f = write(fmt, tmp_path, z, p, y)
    # CSV is parsed as float64 text; compare with what was written, read back
    ref = fastcal.calibration_report(y, p, n_bins=10, ace=False)
    by_prefix = score_file(f, prob="p_*", label="label", chunk_rows=chunk_rows)
    by_list = score_file(f, prob=[f"p_{k}" for k in range(K)], label="label",
                         chunk_rows=chunk_rows)
    if fmt == "csv":
        back = pcsv.read_csv(f)
        pb = np.column_stack([back[f"p_{k}"].to_numpy() for k in range(K)])
        ref = fastcal.calibration_report(y, pb, n_bins=10, ace=False)
    assert_same(by_prefix, ref)
    assert_same(by_list, ref)


def test_logit_columns_match_in_memory(tmp_path):
    z, p, y = make_multiclass(3_000, seed=5)
    f = write("parquet", tmp_path, z, p, y)
    got = score_file(f, prob="z_*", label="label", logits=True, chunk_rows=512)
    assert_same(got, fastcal.calibration_report(y, z, logits=True, n_bins=10, ace=False))
    # one logit column: binary sigmoid path
    yb = (y == 0).astype(np.uint8)
    pq.write_table(pa.table({"z": z[:, 0], "y": yb}), tmp_path / "b.parquet")
    got = score_file(tmp_path / "b.parquet", prob="z", label="y", logits=True, chunk_rows=100)
    ref = fastcal.calibration_report(yb, z[:, 0], logits=True, n_bins=10, ace=False)
    np.testing.assert_allclose(got.ecd, ref.ecd, rtol=1e-12)
    np.testing.assert_allclose(got.ece, ref.ece, rtol=1e-12)


def test_bad_class_columns(tmp_path):
    z, p, y = make_multiclass(200, seed=1)
    f = write("parquet", tmp_path, z, p, y)
    with pytest.raises(ValueError, match=r"prob='q_\*' matches 0 column\(s\).*the file has columns"):
        score_file(f, prob="q_*", label="label")
    with pytest.raises(ValueError, match="lists a column twice or the label column"):
        score_file(f, prob=["p_0", "label"], label="label")
    with pytest.raises(ValueError, match="equal-mass bins .* take one probability column"):
        score_file(f, prob="p_*", label="label", strategy="quantile")
    y_bad = y.copy()
    y_bad[150] = K
    pq.write_table(pa.table({**{f"p_{k}": p[:, k] for k in range(K)}, "label": y_bad}),
                   tmp_path / "bad.parquet", row_group_size=64)
    with pytest.raises(ValueError, match=r"bad\.parquet.*150"):
        score_file(tmp_path / "bad.parquet", prob="p_*", label="label", chunk_rows=50)


def test_cli_comma_list_and_prefix(tmp_path):
    z, p, y = make_multiclass(1_000, seed=2)
    f = write("parquet", tmp_path, z, p, y)
    ref = fastcal.calibration_report(y, p, n_bins=10, ace=False)
    for prob in (",".join(f"p_{k}" for k in range(K)), "p_*"):
        out = subprocess.run([sys.executable, "-m", "fastcal", "score", str(f), "--prob", prob,
                              "--label", "label", "--json"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        d = json.loads(out.stdout)
        np.testing.assert_allclose(d["ece"], ref.ece, rtol=1e-12)
        assert d["n"] == 1_000
    if importlib.util.find_spec("distributed") is not None:
        # K class columns on Dask workers too (--workers once refused them)
        out = subprocess.run([sys.executable, "-m", "fastcal", "score", str(f), "--prob", "p_*",
                              "--label", "label", "--workers", "1", "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        np.testing.assert_allclose(json.loads(out.stdout)["ece"], ref.ece, rtol=1e-12)


@pytest.mark.parametrize("fmt", ["parquet", "feather"])
def test_fixed_size_list_column(tmp_path, fmt):
    z, p, y = make_multiclass(2_000, seed=9)
    col = pa.FixedSizeListArray.from_arrays(pa.array(p.ravel()), K)
    table = pa.table({"probs": col, "label": y})
    f = tmp_path / f"list.{fmt}"
    if fmt == "parquet":
        pq.write_table(table, f, row_group_size=600)
    else:
        feather.write_feather(table, f, chunksize=600)
    got = score_file(f, prob="probs", label="label", chunk_rows=250)
    assert_same(got, fastcal.calibration_report(y, p, n_bins=10, ace=False))
    with pytest.raises(ValueError, match="take one probability column; 'probs' holds 4 classes"):
        score_file(f, prob="probs", label="label", strategy="quantile")


def test_fixed_size_list_with_null_rows_is_a_clear_error(tmp_path):
    col = pa.array([[0.2, 0.8], None, [0.5, 0.5]], type=pa.list_(pa.float64(), 2))
    pq.write_table(pa.table({"probs": col, "label": [1, 0, 0]}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"n\.parquet: .*1 rows of a list column are null"):
        score_file(tmp_path / "n.parquet", prob="probs", label="label")


def test_ace_of_class_columns_and_logits_matches_in_memory(tmp_path):
    """Equal-mass bins from files now take K class columns and logits (the
    same algorithm as in memory), with a second pass."""
    z, p, y = make_multiclass(3_001, seed=4)
    f = write("parquet", tmp_path, z, p, y)
    got = score_file(f, prob="p_*", label="label", ace=True, chunk_rows=700)
    ref = fastcal.calibration_report(y, p, n_bins=10)
    np.testing.assert_allclose(got.ace, ref.ace, rtol=1e-12)
    assert got.passes == 2
    got = score_file(f, prob="z_*", label="label", logits=True, ace=True, chunk_rows=333)
    np.testing.assert_allclose(got.ace, fastcal.calibration_report(y, z, logits=True).ace,
                               rtol=1e-12)
    yb = (y == 0).astype(np.uint8)
    pq.write_table(pa.table({"z": z[:, 0], "y": yb}), tmp_path / "b.parquet")
    for strategy in ("uniform", "quantile"):
        got = score_file(tmp_path / "b.parquet", prob="z", label="y", logits=True, ace=True,
                         strategy=strategy, chunk_rows=400)
        ref = fastcal.calibration_report(yb, z[:, 0], logits=True, strategy=strategy)
        np.testing.assert_allclose(got.ace, ref.ace, rtol=1e-12)
        np.testing.assert_allclose(got.ece, ref.ece, rtol=1e-12)


def test_soft_labels_from_files_equal_the_in_memory_report(tmp_path):
    """K label-distribution columns (a prefix or a list) make a soft-label file."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from fastcal.soft import soft_label_report

    rng = np.random.default_rng(4)
    t = rng.dirichlet(np.ones(3), 4_000)
    p = rng.dirichlet(np.ones(3) * 2, 4_000)
    table = pa.table({"t_0": t[:, 0], "p_0": p[:, 0], "t_1": t[:, 1], "p_1": p[:, 1],
                      "t_2": t[:, 2], "p_2": p[:, 2]})
    pq.write_table(table, tmp_path / "soft.parquet", row_group_size=900)
    pcsv.write_csv(table, tmp_path / "soft.csv")
    ref = soft_label_report(t, p)
    for f, label in ((tmp_path / "soft.parquet", "t_*"),
                     (tmp_path / "soft.csv", ["t_0", "t_1", "t_2"])):
        rep = score_file(f, prob="p_*", label=label, chunk_rows=333)
        assert rep.n == 4_000 and rep.n_classes == 3
        for name in ("entce", "rankcs", "distce", "brier", "nll", "ecd"):
            assert getattr(rep, name) == pytest.approx(getattr(ref, name), rel=1e-12), name
    with pytest.raises(ValueError, match=r"one label column per class: label= gives 2"):
        score_file(tmp_path / "soft.parquet", prob="p_*", label=["t_0", "t_1"])
    with pytest.raises(ValueError, match="soft labels .* have no bins"):
        score_file(tmp_path / "soft.parquet", prob="p_*", label="t_*", strategy="quantile")
    t[2500] = [0.7, 0.7, 0.0]
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"p_0": p[:, 0], "p_1": p[:, 1], "p_2": p[:, 2], "t_0": t[:, 0],
                             "t_1": t[:, 1], "t_2": t[:, 2]}), bad, row_group_size=900)
    with pytest.raises(ValueError, match=r"bad.parquet: .*1 rows that are not label "
                                         r"distributions \(first at row 2500"):
        score_file(bad, prob="p_*", label="t_*", chunk_rows=333)

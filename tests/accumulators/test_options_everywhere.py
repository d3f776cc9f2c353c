"""Every option through every entry point: arrays, files, Dask (one driver).

Each case scores the same data with calibration_report, score_file (small
chunks) and score_dask (several partitions) and asserts the same numbers:
counts exactly, everything else to 1e-12 relative.
"""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.files import score_file

da = pytest.importorskip("dask.array")
fd = pytest.importorskip("fastcal.distributed")

SCALARS = ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll", "smece",
           "smece_sigma")
K = 4


def data(kind, n=4_000, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "binary":
        p = rng.random(n)
        y = (rng.random(n) < p).astype(np.float64)
        p[::211] = np.nan  # only used with nan_policy="omit"
        return y, p
    if kind == "logits":
        z = rng.normal(size=n) * 2
        return (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.uint8), z
    z = rng.normal(size=(n, K))
    if kind == "multiclass-logits":
        return rng.integers(0, K, n), z
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    if kind == "unnormalised":
        p = p * 1.01
    return rng.integers(0, K, n), p


def write(tmp_path, y, p):
    cols = {"y": y}
    if p.ndim == 2:
        cols.update({f"p_{k}": p[:, k] for k in range(K)})
    else:
        cols["p"] = p
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table(cols), path, row_group_size=900)
    return str(path), ("p_*" if p.ndim == 2 else "p")


CASES = {
    "defaults": ("binary", dict(nan_policy="omit")),
    "ci + bootstrap": ("binary", dict(nan_policy="omit", ci=0.9, n_boot=30, seed=5)),
    "quantile": ("binary", dict(nan_policy="omit", strategy="quantile", n_bins=7)),
    "accuracy, right, eps": ("binary", dict(nan_policy="omit", observed="accuracy",
                                            closed="right", eps=1e-3)),
    "edges": ("binary", dict(nan_policy="omit", edges=[0, 0.1, 0.5, 0.55, 1])),
    "logits": ("logits", dict(logits=True)),
    "logits ci": ("logits", dict(logits=True, ci=0.95, n_boot=20)),
    "logits quantile": ("logits", dict(logits=True, strategy="quantile", n_bins=6)),
    "multiclass": ("multiclass", dict()),
    "multiclass ci": ("multiclass", dict(ci=0.95, n_boot=20, seed=2)),
    "multiclass logits": ("multiclass-logits", dict(logits=True, n_bins=12)),
    "renormalize": ("unnormalised", dict(renormalize=True)),
    "smooth ECE": ("binary", dict(nan_policy="omit", smooth=True)),
    "smooth ECE quantile": ("binary", dict(nan_policy="omit", smooth=True, strategy="quantile")),
    "smooth ECE logits": ("logits", dict(logits=True, smooth=True)),
    "smooth ECE multiclass": ("multiclass-logits", dict(logits=True, smooth=True)),
    "ECCE multiclass": ("multiclass-logits", dict(logits=True, metrics=("ecce",))),
}


def assert_same(got, ref):
    for name in SCALARS:
        a, b = getattr(got, name), getattr(ref, name)
        if name in ("n", "n_omitted"):
            assert a == b, name
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    assert set(got.intervals) == set(ref.intervals)
    for name, (lo, hi) in ref.intervals.items():
        np.testing.assert_allclose(got.intervals[name], (lo, hi), rtol=1e-12, atol=1e-15,
                                   err_msg=name)


@pytest.mark.parametrize("case", list(CASES))
def test_option_reaches_every_entry_point(tmp_path, case):
    kind, options = CASES[case]
    y, p = data(kind)
    ref = fastcal.calibration_report(y, p, ace=True, **options)
    path, prob = write(tmp_path, y, p)
    got_file = score_file(path, prob=prob, label="y", ace=True, chunk_rows=700, **options)
    assert_same(got_file, ref)
    chunks = (1_100, K) if p.ndim == 2 else 1_100
    got_dask = fd.score_dask(da.from_array(y, chunks=1_100), da.from_array(p, chunks=chunks),
                             ace=True, **options)
    assert_same(got_dask, ref)
    assert np.isfinite(ref.smece) == bool(options.get("smooth"))
    assert np.isfinite(ref.ecce) == ("ecce" in options.get("metrics", ()))
    for got in (got_file, got_dask):
        np.testing.assert_allclose([got.ecce, got.ecce_sigma], [ref.ecce, ref.ecce_sigma],
                                   rtol=1e-12)
        # far in the tail (p ~ 1e-251 here) d log p / d log sigma is about sigma**2: the
        # p-value is held to 1e-15 absolute, as small p-values are
        np.testing.assert_allclose(got.ecce_pvalue, ref.ecce_pvalue, rtol=1e-12, atol=1e-15)
    if options.get("ci"):
        assert all(np.isfinite(v).all() for v in ref.intervals.values()) or kind != "binary"


def test_mixed_dtype_dataset_bins_by_its_widest_dtype(tmp_path):
    """A Parquet dataset of a float32 and a float64 file is binned by one rule
    (the widest dtype), by score_file and by Dask alike, like the concatenated
    float64 columns in memory."""
    rng = np.random.default_rng(3)
    root = tmp_path / "ds"
    root.mkdir()
    p32 = (rng.integers(0, 10, 500) / 10).astype(np.float32)  # values on edges
    p64 = rng.random(500)
    y = (rng.random(1_000) < 0.5).astype(np.uint8)
    pq.write_table(pa.table({"p": p32, "y": y[:500]}), root / "a.parquet")
    pq.write_table(pa.table({"p": p64, "y": y[500:]}), root / "b.parquet")
    ref = fastcal.calibration_report(y, np.concatenate([p32.astype(np.float64), p64]))
    assert_same(score_file(root, ace=True), ref)
    assert_same(fd.score_dataset(root, ace=True), ref)

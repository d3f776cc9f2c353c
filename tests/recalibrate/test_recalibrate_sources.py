"""Recalibration fitted from files (real Parquet) and Dask (a real LocalCluster)
equals the fit in memory; the fitted map applied per chunk by the driver
(Options.transform, score_file, fastcal score --recalibration); the CLI."""

import importlib.util
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import special

import fastcal
from fastcal import cli
from fastcal import recalibrate as rc
from fastcal.files import score_file
from fastcal.score import Options, score


def _data(n=60_000, seed=0, temperature=1.7):
    rng = np.random.default_rng(seed)
    z = rng.normal(0.2, 3.0, n).astype(np.float32)
    y = (rng.random(n) < special.expit(z / temperature)).astype(np.uint8)
    return y, z


@pytest.fixture(scope="module")
def pfile(tmp_path_factory):
    y, z = _data()
    p = special.expit(z.astype(np.float64)).astype(np.float32)
    rng = np.random.default_rng(1)
    K = 3
    L = rng.normal(0, 2, (len(y), K))
    lab = (special.softmax(L / 1.4, axis=1).cumsum(1) > rng.random(len(y))[:, None]).argmax(1)
    cols = {"z": z, "p": p, "y": y, "g": np.round(p.astype(np.float64), 3), "c": lab}
    cols.update({f"l_{k}": L[:, k] for k in range(K)})
    path = tmp_path_factory.mktemp("recal") / "pred.parquet"
    pq.write_table(pa.table(cols), path, row_group_size=7_000)
    return path, cols


CASES = [
    ("temperature", dict(logits=True), "z", "y"),
    ("temperature", dict(logits=True, target="safe"), "z", "y"),
    ("temperature", dict(), "p", "y"),
    ("platt", dict(logits=True), "z", "y"),
    ("histogram", dict(n_bins=12), "p", "y"),
    ("temperature", dict(logits=True), ["l_0", "l_1", "l_2"], "c"),
    ("temperature", dict(logits=True, target="safe"), ["l_0", "l_1", "l_2"], "c"),
]


def _params(m):
    d = m.to_dict()["params"]
    return np.array([v for v in d.values() if isinstance(v, float)]
                    + [x for v in d.values() if isinstance(v, list) for x in v], np.float64)


@pytest.mark.parametrize("method, opts, prob, label", CASES)
def test_file_fit_equals_memory_fit(pfile, method, opts, prob, label):
    path, cols = pfile
    x = np.column_stack([cols[c] for c in prob]) if isinstance(prob, list) else cols[prob]
    mem = rc.make(method, **opts).fit(cols[label], x)
    for chunk_rows in (5_000, 1 << 20):
        f = rc.fit_file(rc.make(method, **opts), path, prob=prob, label=label,
                        chunk_rows=chunk_rows)
        np.testing.assert_allclose(_params(f), _params(mem), rtol=1e-10, atol=1e-12)
        assert f.n_ == mem.n_ == len(cols[label])
    if method in ("temperature", "platt") and not isinstance(prob, list):
        assert f.passes_ <= (5 if opts.get("target") == "safe" else 3)


def test_isotonic_from_file_equals_exact_fit_on_a_grid(pfile):
    path, cols = pfile
    mem = rc.IsotonicCalibration().fit(cols["y"], cols["g"])
    f = rc.fit_file(rc.IsotonicCalibration(), path, prob="g", label="y", chunk_rows=9_000)
    assert mem.exact_ and not f.exact_ and f.passes_ == 1
    np.testing.assert_allclose(f.x_, mem.x_, rtol=1e-12)
    np.testing.assert_allclose(f.y_, mem.y_, rtol=1e-12)


def test_score_file_with_transform_equals_memory(pfile):
    path, cols = pfile
    m = rc.TemperatureScaling(logits=True, target="safe").fit(cols["y"], cols["z"])
    rep = score_file(path, prob="z", label="y", logits=True, transform=m, chunk_rows=6_000,
                     ace=True)
    ref = fastcal.calibration_report(cols["y"], m.transform(cols["z"]), ace=True)
    for k in ("ecd", "ece", "brier", "nll", "ace", "ecd_z"):
        assert getattr(rep, k) == pytest.approx(getattr(ref, k), rel=1e-12, abs=1e-15), k
    assert rep.ecd_p_over == pytest.approx(0.05, rel=1e-6)


def test_file_errors_name_file_and_row(tmp_path):
    y, z = _data(1000)
    p = special.expit(z.astype(np.float64))
    p[700] = np.nan
    f = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, row_group_size=300)
    with pytest.raises(ValueError, match=r"bad\.parquet.*NaN.*row 700"):
        rc.fit_file(rc.TemperatureScaling(), f, prob="p", label="y", chunk_rows=256)
    m = rc.fit_file(rc.TemperatureScaling(nan_policy="omit"), f, prob="p", label="y")
    assert m.n_ == 999


# -- Dask -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                  silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        yield c


@pytest.mark.parametrize("method, opts", [("temperature", dict(logits=True)),
                                          ("temperature", dict(logits=True, target="safe")),
                                          ("platt", dict(logits=True)),
                                          ("histogram", dict(logits=True))])
def test_dask_fit_equals_memory_fit(client, method, opts):
    da = pytest.importorskip("dask.array")
    y, z = _data(40_000, seed=3)
    mem = rc.make(method, **opts).fit(y, z)
    d = rc.fit_dask(rc.make(method, **opts), da.from_array(y, chunks=9_000),
                    da.from_array(z, chunks=9_000), client=client)
    np.testing.assert_allclose(_params(d), _params(mem), rtol=1e-10, atol=1e-12)


def test_dask_multiclass_and_transform_in_the_driver(client):
    da = pytest.importorskip("dask.array")
    from fastcal.sources.dask import DaskSource, _array_source

    rng = np.random.default_rng(4)
    L = rng.normal(0, 2, (20_000, 4))
    y = (special.softmax(L / 1.3, axis=1).cumsum(1) > rng.random(20_000)[:, None]).argmax(1)
    mem = rc.TemperatureScaling(logits=True).fit(y, L)
    dy, dL = da.from_array(y, chunks=6_000), da.from_array(L, chunks=(6_000, 4))
    d = rc.fit_dask(rc.TemperatureScaling(logits=True), dy, dL, client=client)
    assert d.temperature_ == pytest.approx(mem.temperature_, rel=1e-10)
    # the driver applies a fitted map on the workers (Options.transform)
    source = DaskSource(_array_source(dy, dL), rc._Runner(client), 8)
    rep = score(source, Options(logits=True, ace=True, transform=mem))
    ref = fastcal.calibration_report(y, mem.transform(L), ace=True)
    for k in ("ecd", "ece", "nll", "ace"):
        assert getattr(rep, k) == pytest.approx(getattr(ref, k), rel=1e-12), k


# -- the command line ---------------------------------------------------------------------

def test_cli_recalibrate_then_score(pfile, tmp_path, capsys):
    path, cols = pfile
    out = tmp_path / "t.json"
    code = cli.main(["recalibrate", str(path), "--prob", "z", "--label", "y", "--logits",
                     "--target", "safe", "--out", str(out), "--json", "--quiet"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    m = rc.load(out)
    mem = rc.TemperatureScaling(logits=True, target="safe").fit(cols["y"], cols["z"])
    assert m.temperature_ == pytest.approx(mem.temperature_, rel=1e-10)
    assert res["passes"] <= 5
    t = res["table"]
    assert t["verdict"]["before"] == "over-confident"
    assert t["p(over-confident)"]["after"] == pytest.approx(0.05, rel=1e-6)
    assert t["NLL"]["after"] >= t["NLL"]["NLL optimum"]  # the cost of being safe
    code = cli.main(["score", str(path), "--prob", "z", "--label", "y", "--logits",
                     "--recalibration", str(out), "--json", "--quiet"])
    assert code == 0
    rep = json.loads(capsys.readouterr().out)
    ref = fastcal.calibration_report(cols["y"], m.transform(cols["z"]), ace=False)
    assert rep["ecd"] == pytest.approx(ref.ecd, rel=1e-12)
    assert rep["nll"] == pytest.approx(t["NLL"]["after"], rel=1e-12)
    if importlib.util.find_spec("distributed") is not None:
        # the same map applied on Dask workers (the map travels with the tasks)
        code = cli.main(["score", str(path), "--prob", "z", "--label", "y", "--logits",
                         "--recalibration", str(out), "--workers", "1", "--json", "--quiet"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        on_dask = json.loads(captured.out)
        for name in ("ecd", "ece", "brier", "nll"):
            assert on_dask[name] == pytest.approx(rep[name], rel=1e-12), name


def test_dask_sources_apply_the_map(pfile):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    from fastcal import distributed as fd

    _, cols = pfile
    m = rc.TemperatureScaling(logits=True).fit(cols["y"], cols["z"])
    ref = fastcal.calibration_report(cols["y"], m.transform(cols["z"]), n_bins=12, ace=True)
    df = dd.from_pandas(pd.DataFrame({"z": cols["z"], "y": cols["y"]}), npartitions=5)
    rep = fd.score_dataframe(df, prob="z", label="y", logits=True, transform=m, n_bins=12,
                             ace=True)
    for name in ("ece", "ace", "ecd", "brier", "nll"):
        assert getattr(rep, name) == pytest.approx(getattr(ref, name), rel=1e-12), name
    np.testing.assert_array_equal(rep.bins["count"], ref.bins["count"])


def test_cli_recalibrate_text_and_plot(pfile, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, _ = pfile
    png = tmp_path / "ba.png"
    code = cli.main(["recalibrate", str(path), "--prob", "p", "--label", "y", "--method",
                     "isotonic", "--plot", str(png), "--quiet"])
    assert code == 0
    text = capsys.readouterr().out
    assert "| ECD |" in text and "isotonic" in text
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, words", [
    (["--prob", "nope", "--label", "y"], "no column 'nope'"),
    (["--prob", "z", "--label", "y", "--method", "platt", "--target", "safe"],
     "--target safe is for --method temperature"),
    (["--prob", "z", "--label", "y", "--alpha", "0.7"], "--alpha"),
])
def test_cli_recalibrate_errors_one_line(pfile, capsys, argv, words):
    path, _ = pfile
    code = cli.main(["recalibrate", str(path), "--quiet", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1


def test_cli_score_bad_recalibration_file(pfile, tmp_path, capsys):
    path, _ = pfile
    bad = tmp_path / "bad.json"
    bad.write_text('{"method": "temperature"}')
    code = cli.main(["score", str(path), "--prob", "p", "--label", "y", "--recalibration",
                     str(bad), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "not a fastcal recalibration" in err
    assert len(err.strip().splitlines()) == 1
    code = cli.main(["score", str(path), "--prob", "p", "--label", "y", "--recalibration",
                     str(tmp_path / "missing.json"), "--quiet"])
    assert code == 2 and "missing.json" in capsys.readouterr().err


def test_example_recalibrate_safe(tmp_path):
    import os
    from pathlib import Path
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(root / "examples" / "recalibrate_safe.py"),
                           str(tmp_path), "--small"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / "recalibrate.json").read_text())
    assert 1.0 < res["T_safe"] < res["T_nll"]
    assert res["in_sample"]["before"]["verdict"] == "over-confident"
    assert res["in_sample"]["after (safe T)"]["ecd_p_over"] == pytest.approx(0.05, rel=1e-6)
    assert res["cost_of_safe"]["nll"] > 0
    assert res["passes"]["nll"] <= 3 and res["passes"]["safe"] <= 5
    assert rc.load(tmp_path / "temperature.json").temperature_ == res["T_safe"]
    assert (tmp_path / "before_after.png").stat().st_size > 0
    assert not (tmp_path / "preds.parquet").exists()


def test_file_with_one_list_column_of_k_logits(tmp_path):
    rng = np.random.default_rng(6)
    L = rng.normal(0, 2, (5000, 3))
    y = (special.softmax(L / 1.3, axis=1).cumsum(1) > rng.random(5000)[:, None]).argmax(1)
    f = tmp_path / "list.parquet"
    pq.write_table(pa.table({"l": pa.FixedSizeListArray.from_arrays(pa.array(L.ravel()), 3),
                             "y": y}), f)
    got = rc.fit_file(rc.TemperatureScaling(logits=True), f, prob="l", label="y",
                      chunk_rows=1500)
    mem = rc.TemperatureScaling(logits=True).fit(y, L)
    assert got.n_classes_ == 3
    assert got.temperature_ == pytest.approx(mem.temperature_, rel=1e-10)


def test_npy_files_say_their_classes_without_a_schema(tmp_path):
    """NPY readers have no Arrow schema: a binary column file and an (N, K) array
    are told apart by their columns alone (FileSource.known_classes)."""
    rng = np.random.default_rng(7)
    z = rng.normal(0, 3, 4000)
    y = (rng.random(4000) < special.expit(z / 1.5)).astype(np.uint8)
    d = tmp_path / "binary"
    d.mkdir()
    np.save(d / "z.npy", z)
    np.save(d / "y.npy", y)
    got = rc.fit_file(rc.TemperatureScaling(logits=True), d, prob="z", label="y",
                      chunk_rows=1500)
    mem = rc.TemperatureScaling(logits=True).fit(y, z)
    assert got.n_classes_ is None
    assert got.temperature_ == pytest.approx(mem.temperature_, rel=1e-10)
    L = rng.normal(0, 2, (4000, 3))
    c = (special.softmax(L / 1.3, axis=1).cumsum(1) > rng.random(4000)[:, None]).argmax(1)
    k = tmp_path / "classes"
    k.mkdir()
    np.save(k / "l.npy", L)
    np.save(k / "c.npy", c)
    got = rc.fit_file(rc.TemperatureScaling(logits=True), k, prob=["l:0", "l:1", "l:2"],
                      label="c", chunk_rows=1500)
    mem = rc.TemperatureScaling(logits=True).fit(c, L)
    assert got.n_classes_ == 3
    assert got.temperature_ == pytest.approx(mem.temperature_, rel=1e-10)

"""tracking score: a file of another tracker's estimates (here filterpy's) scores as fastcal.nees says."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from fastcal.gaussian import anees_bounds, nees
from tracking.cli import main
from tracking.score import score_file

pytest.importorskip("filterpy")
from filterpy.kalman import KalmanFilter  # noqa: E402

KEYS = {"runs", "steps", "dim", "anees", "ecd", "bounds", "mean_anees", "mean_ecd", "inside_fraction"}


def filterpy_output(runs=6, steps=9, seed=2):
    """A 2-D constant-velocity Kalman filter from filterpy on seeded data."""
    rng = np.random.default_rng(seed)
    F = np.array([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1.0]])
    H = np.array([[1, 0, 0, 0], [0, 0, 1, 0.0]])
    Q = np.eye(4) * 0.01
    Rm = np.eye(2) * 0.5
    xs = np.empty((runs, steps, 4))
    Ps = np.empty((runs, steps, 4, 4))
    ts = np.empty((runs, steps, 4))
    for r in range(runs):
        kf = KalmanFilter(dim_x=4, dim_z=2)
        kf.F, kf.H, kf.Q, kf.R = F, H, Q, Rm
        truth = np.array([0.0, 1.0, 0.0, 0.5])
        kf.x = truth + rng.normal(size=4)
        kf.P = np.eye(4)
        for k in range(steps):
            truth = F @ truth + rng.multivariate_normal(np.zeros(4), Q)
            kf.predict()
            kf.update(H @ truth + rng.normal(size=2) * np.sqrt(0.5))
            xs[r, k], Ps[r, k], ts[r, k] = kf.x, kf.P, truth
    return xs, Ps, ts


def table(xs, Ps, ts, order=None):
    runs, steps, d = xs.shape
    rr, kk = np.meshgrid(np.arange(runs), np.arange(steps), indexing="ij")
    cols = {"run": rr.ravel(), "step": kk.ravel()}
    for i in range(d):
        cols[f"x_{i}"] = xs[..., i].ravel()
    for i in range(d):
        cols[f"t_{i}"] = ts[..., i].ravel()
    for i in range(d):
        for j in range(d):
            cols[f"P_{i}{j}"] = Ps[..., i, j].ravel()
    if order is not None:
        cols = {k: v[order] for k, v in cols.items()}
    return pa.table(cols)


@pytest.mark.parametrize("fmt", ["parquet", "feather", "csv"])
def test_score_of_a_filterpy_file_equals_fastcal_nees(tmp_path, fmt):
    xs, Ps, ts = filterpy_output()
    order = np.random.default_rng(0).permutation(xs.shape[0] * xs.shape[1])  # rows in any order
    t = table(xs, Ps, ts, order)
    path = tmp_path / f"est.{fmt}"
    {"parquet": lambda: pq.write_table(t, path, row_group_size=7),
     "feather": lambda: feather.write_feather(t, path, chunksize=5),
     "csv": lambda: pcsv.write_csv(t, path)}[fmt]()
    rep = score_file(path, chunk_rows=4)
    per = nees(ts - xs, Ps)  # (runs, steps)
    np.testing.assert_allclose(rep["anees"], per.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(rep["ecd"], 0.5 * per.mean(axis=0) - 2.0, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rep["nees_per_run"], per.mean(axis=1), rtol=1e-12)
    assert (rep["runs"], rep["steps"], rep["dim"]) == (6, 9, 4)
    assert tuple(rep["bounds"]["anees"]) == anees_bounds(6, 4)
    assert set(rep) >= KEYS


def test_npy_directory_and_cli_json_plot(tmp_path, capsys):
    xs, Ps, ts = filterpy_output(runs=4, steps=5)
    t = table(xs, Ps, ts)
    d = tmp_path / "npy"
    d.mkdir()
    for name in t.column_names:
        np.save(d / f"{name}.npy", t.column(name).to_numpy())
    plot = tmp_path / "score.png"
    assert main(["score", str(d), "--json", "--plot", str(plot)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert set(rep) >= KEYS
    np.testing.assert_allclose(rep["anees"], nees(ts - xs, Ps).mean(axis=0), rtol=1e-12)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert main(["score", str(d)]) == 0
    out = capsys.readouterr().out
    assert "mean ANEES" in out and "steps inside the band" in out


def test_compare_and_score_json_share_the_per_filter_keys(capsys):
    assert main(["compare", "--scenario", "radar-3d", "--runs", "5", "--steps", "3", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    for name in ("ekf", "ukf"):
        assert set(rep["filters"][name]) >= KEYS
        assert rep["filters"][name]["dim"] == 6


def write(tmp_path, t):
    path = tmp_path / "bad.parquet"
    pq.write_table(t, path)
    return str(path)


@pytest.mark.parametrize("edit,needle", [
    (lambda c: c["x_1"].__setitem__(7, np.nan), r"row 7 \(run 0, step 7\): estimate column 'x_1' is nan"),
    (lambda c: c["P_00"].__setitem__(12, -3.0),
     r"row 12 \(run 1, step 3\): the covariance .* is not positive definite"),
    (lambda c: c["P_01"].__setitem__(3, 0.7), r"row 3 \(run 0, step 3\): the covariance .* is not symmetric"),
    (lambda c: c["step"].__setitem__(10, 0),
     r"row 10 \(run 1, step 0\): the pair \(run 1, step 0\) appears again \(first at global row 9\)"),
])
def test_bad_rows_are_one_line_naming_file_row_run_and_step(tmp_path, edit, needle, capsys):
    xs, Ps, ts = filterpy_output(runs=3, steps=9)
    cols = {k: v.to_numpy().copy() for k, v in zip(table(xs, Ps, ts).column_names, table(xs, Ps, ts).columns)}
    edit(cols)
    path = write(tmp_path, pa.table(cols))
    with pytest.raises(ValueError, match=needle) as exc:
        score_file(path, chunk_rows=5)
    assert str(exc.value).startswith(path)
    with pytest.raises(SystemExit) as stop:
        main(["score", path])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and path in err


def test_missing_step_and_bad_columns(tmp_path):
    xs, Ps, ts = filterpy_output(runs=3, steps=4)
    t = table(xs, Ps, ts)
    path = write(tmp_path, t.filter(pa.array([i != 5 for i in range(t.num_rows)])))
    rep = score_file(path)  # ragged runs: scored over the runs each step has, the gap named and counted
    assert rep["missing_pairs"] == {"count": 1, "first": {"run": 1, "step": 1}}
    assert rep["runs_per_step"] == [3, 2, 3, 3]
    per = nees(ts - xs, Ps)
    np.testing.assert_allclose(rep["anees"][1], per[[0, 2], 1].mean(), rtol=1e-12)
    assert tuple(np.array(rep["bounds_per_step"]["anees"])[:, 1]) == anees_bounds(2, 4)
    with pytest.raises(ValueError, match=r"--cov has 3 columns; expected d\*d = 16"):
        score_file(path, cov="P_00,P_01,P_02")
    with pytest.raises(ValueError, match=r"--estimate 'y_\*' matches no column"):
        score_file(path, estimate="y_*")


def test_plot_checked_before_reading(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["score", str(tmp_path / "does-not-exist.parquet"), "--plot", str(tmp_path / "x.nope")])
    assert stop.value.code == 2
    assert "cannot tell the image format" in capsys.readouterr().err


def test_the_verdict_judges_the_mean_by_the_band_of_the_mean(tmp_path):
    # Every NEES is 1.1 (d = 1): each step's ANEES lies inside its band over 50 runs, but the
    # mean over all 50 x 100 run-steps is chi-square(5000)/5000 under consistency, whose band
    # [0.961, 1.040] it lies far above. The per-step share is reported beside the verdict.
    from tracking.compare import verdict
    from tracking.consistency import evaluate
    from tracking.filters import FilterRun
    from tracking.score import format_score

    runs, steps = 50, 100
    truth = np.zeros((runs, steps, 1))
    x = np.full((runs, steps, 1), np.sqrt(1.1))
    P = np.ones((runs, steps, 1, 1))
    np.savez(tmp_path / "a.npz", x=x, t=truth, P=P)
    rep = score_file(tmp_path / "a.npz", estimate="x", truth="t", cov="P")
    assert rep["inside_fraction"] == 1.0 and rep["nees_count"] == 5000
    assert tuple(rep["bounds"]["mean_anees"]) == anees_bounds(5000, 1)
    assert rep["verdict"] == "above (over-confident)"
    text = format_score(rep)
    assert "95% band of the mean ANEES over all 5000 run-steps: [0.961, 1.040]" in text
    assert "mean ANEES 1.100, mean ECD 0.050; 100% of steps inside the band; mean ANEES vs band of the mean: " \
           "above (over-confident)" in text
    # the filters' consistency (tracking compare) judges the same way
    run = FilterRun(x, P, np.zeros((runs, steps, 1)), np.ones((runs, steps, 1, 1)),
                    np.zeros((runs, steps), np.int8), None)
    c = evaluate(run, truth)
    assert c.inside_fraction == 1.0 and c.mean_bounds == anees_bounds(5000, 1) and c.nees_count == 5000
    np.testing.assert_allclose(c.mean_nees, 1.1, rtol=1e-12)
    assert verdict(c.mean_nees, c.mean_bounds) == "above (over-confident)"
    assert verdict(1.0, c.mean_bounds) == "inside" and verdict(0.9, c.mean_bounds) == "below (under-confident)"

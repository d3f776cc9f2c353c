"""tracking score reads the layouts people have: the same data scores the same (1e-12) in each."""

import datetime
import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from fastcal.gaussian import anees_bounds, nees
from tracking.cli import main
from tracking.score import format_score, score_file

R, T, D = 5, 4, 2
TOL = dict(rtol=1e-12, atol=1e-14)


def results(seed=0, runs=R, steps=T, d=D, scale=1.0):
    """Estimates, covariances and truths of two filters ('ekf' and 'ukf') on one truth."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(runs, steps, d))
    out = {}
    for k, name in enumerate(("ekf", "ukf")):
        A = rng.normal(size=(runs, steps, d, d))
        P = A @ np.swapaxes(A, -1, -2) + (0.5 + k) * np.eye(d)
        x = truth + scale * rng.normal(size=(runs, steps, d))
        out[name] = (x, P)
    return truth, out


def long_columns(truth, x, P, run_ids=None, step_ids=None):
    runs, steps, d = truth.shape
    run_ids = np.arange(runs) if run_ids is None else np.asarray(run_ids)
    step_ids = np.arange(steps) if step_ids is None else np.asarray(step_ids)
    cols = {"run": np.repeat(run_ids, steps), "step": np.tile(step_ids, runs)}
    cols.update({f"x_{i}": x[..., i].ravel() for i in range(d)})
    cols.update({f"t_{i}": truth[..., i].ravel() for i in range(d)})
    cols.update({f"P_{i}{j}": P[..., i, j].ravel() for i in range(d) for j in range(d)})
    return cols


def expected(truth, x, P):
    per = nees(truth - x, P)
    return per.mean(axis=0), per.mean(axis=1)


def check(rep, truth, x, P):
    anees, per_run = expected(truth, x, P)
    np.testing.assert_allclose(rep["anees"], anees, **TOL)
    np.testing.assert_allclose(rep["nees_per_run"], per_run, **TOL)
    np.testing.assert_allclose(rep["ecd"], 0.5 * anees - D / 2, **TOL)
    assert tuple(rep["bounds"]["anees"]) == anees_bounds(truth.shape[0], truth.shape[2])
    assert rep["missing_pairs"]["count"] == 0 and rep["skipped_rows"]["count"] == 0


@pytest.fixture(scope="module")
def data():
    return results()


def test_same_data_in_every_layout_scores_the_same(tmp_path, data):
    truth, fl = data
    x, P = fl["ekf"]
    order = np.random.default_rng(1).permutation(R * T)
    long = pa.table({k: v[order] for k, v in long_columns(truth, x, P).items()})
    reps = {}
    pq.write_table(long, tmp_path / "long.parquet", row_group_size=3)
    reps["parquet"] = score_file(tmp_path / "long.parquet", chunk_rows=4)
    pcsv.write_csv(long, tmp_path / "long.csv")
    reps["csv"] = score_file(tmp_path / "long.csv", chunk_rows=7)
    feather.write_feather(long, tmp_path / "long.feather", chunksize=6)
    reps["feather"] = score_file(tmp_path / "long.feather")
    np.savez(tmp_path / "arrays.npz", x=x, t=truth, P=P)
    reps["npz"] = score_file(tmp_path / "arrays.npz", estimate="x", truth="t", cov="P", chunk_rows=3)
    (tmp_path / "npy").mkdir()
    for name, a in (("est", x), ("truth", truth), ("cov", P)):
        np.save(tmp_path / "npy" / f"{name}.npy", a)
    reps["npy"] = score_file(tmp_path / "npy", estimate="est", truth="truth", cov="cov")
    for kind, rep in reps.items():
        check(rep, truth, x, P)
        assert rep["run_ids"] == list(range(R)) and rep["step_ids"] == list(range(T)), kind
    assert reps["npz"]["layout"] == "arrays" and reps["parquet"]["layout"] == "long table"
    assert reps["npz"]["columns"]["estimate"] == "x"


def test_two_filters_wide_filter_column_and_npz_agree(tmp_path, data):
    truth, fl = data
    # wide: both filters' columns beside one truth
    cols = long_columns(truth, *fl["ekf"])
    ukf = long_columns(truth, *fl["ukf"])
    wide = dict(cols)
    for k in list(cols):
        if k[0] in "xP":
            wide[k.replace("_", "_ekf_", 1)] = wide.pop(k)
            wide[k.replace("_", "_ukf_", 1)] = ukf[k]
    pq.write_table(pa.table(wide), tmp_path / "wide.parquet")
    rw = score_file(tmp_path / "wide.parquet", estimate={"ekf": "x_ekf_*", "ukf": "x_ukf_*"},
                    cov={"ekf": "P_ekf_*", "ukf": "P_ukf_*"})
    # long with a 'filter' column (rows interleaved)
    both = {k: np.concatenate([cols[k], ukf[k]]) for k in cols}
    both["filter"] = np.array(["ekf"] * (R * T) + ["ukf"] * (R * T))
    order = np.random.default_rng(2).permutation(2 * R * T)
    pq.write_table(pa.table({k: v[order] for k, v in both.items()}), tmp_path / "by_filter.parquet")
    rf = score_file(tmp_path / "by_filter.parquet", chunk_rows=5)
    # filterpy-style npz: one array per filter, names by what follows the prefix
    np.savez(tmp_path / "fp.npz", truth=truth, xs_ekf=fl["ekf"][0], Ps_ekf=fl["ekf"][1],
             xs_ukf=fl["ukf"][0], Ps_ukf=fl["ukf"][1])
    rn = score_file(tmp_path / "fp.npz", estimate="xs_*", cov="Ps_*", truth="truth")
    for rep, layout in ((rw, "wide table"), (rf, "long table with a filter column"), (rn, "arrays")):
        assert rep["layout"] == layout
        assert sorted(rep["filters"]) == ["ekf", "ukf"]
        for name in ("ekf", "ukf"):
            check(rep["filters"][name], truth, *fl[name])
    text = format_score(rf)
    assert text.index("ekf ") < text.index("ukf ") and "mean ANEES" in text


def test_filterpy_npz_scores_both_filters_side_by_side_from_the_cli(tmp_path, capsys):
    pytest.importorskip("filterpy")
    from filterpy.kalman import ExtendedKalmanFilter, MerweScaledSigmaPoints, UnscentedKalmanFilter

    runs, steps = 4, 6
    F = np.array([[1.0, 1.0], [0.0, 1.0]])
    rng = np.random.default_rng(5)
    truth = np.empty((runs, steps, 2))
    out = {n: (np.empty((runs, steps, 2)), np.empty((runs, steps, 2, 2))) for n in ("ekf", "ukf")}
    for r in range(runs):
        ekf = ExtendedKalmanFilter(dim_x=2, dim_z=1)
        ukf = UnscentedKalmanFilter(dim_x=2, dim_z=1, dt=1.0, fx=lambda s, dt: F @ s, hx=lambda s: s[:1],
                                    points=MerweScaledSigmaPoints(2, alpha=0.5, beta=2.0, kappa=1.0))
        for f in (ekf, ukf):
            f.x, f.P, f.Q, f.R = np.zeros(2), np.eye(2), 0.01 * np.eye(2), np.eye(1) * 0.25
        ekf.F = F
        s = rng.normal(size=2)
        for k in range(steps):
            s = F @ s + rng.normal(scale=0.1, size=2)
            z = s[:1] + rng.normal(scale=0.5, size=1)
            ekf.predict()
            ekf.update(z, HJacobian=lambda _: np.array([[1.0, 0.0]]), Hx=lambda v: v[:1])
            ukf.predict()
            ukf.update(z)
            truth[r, k] = s
            for name, f in (("ekf", ekf), ("ukf", ukf)):
                out[name][0][r, k], out[name][1][r, k] = f.x, f.P
    path = tmp_path / "res.npz"
    np.savez(path, truth=truth, est_ekf=out["ekf"][0], P_ekf=out["ekf"][1], est_ukf=out["ukf"][0],
             P_ukf=out["ukf"][1])
    assert main(["score", str(path), "--truth", "truth", "--estimate", "ekf=est_ekf", "--estimate", "ukf=est_ukf",
                 "--cov", "ekf=P_ekf", "--cov", "ukf=P_ukf", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    for name in ("ekf", "ukf"):
        f = rep["filters"][name]
        assert {"mean_anees", "mean_ecd", "anees", "ecd", "bounds", "inside_fraction", "verdict"} <= set(f)
        np.testing.assert_allclose(f["anees"], nees(truth - out[name][0], out[name][1]).mean(axis=0), **TOL)


def test_stone_soup_style_track_table_string_ids_and_timestamps(tmp_path, data):
    truth, fl = data
    x, P = fl["ukf"]
    t0 = datetime.datetime(2024, 1, 1)
    ids = np.array([f"track-{c}" for c in "qwert"])  # UUID-like strings, not in sort order of creation
    times = np.array([t0 + datetime.timedelta(seconds=5 * k) for k in range(T)], dtype="datetime64[us]")
    cols = long_columns(truth, x, P, run_ids=ids, step_ids=times)
    table = {"track_id": cols.pop("run"), "timestamp": cols.pop("step")}
    for k, v in cols.items():
        table[{"x": "state_", "t": "truth_", "P": "covar_"}[k[0]] + k.split("_")[1]] = v
    pq.write_table(pa.table(table), tmp_path / "tracks.parquet")
    rep = score_file(tmp_path / "tracks.parquet", run="track_id", step="timestamp", estimate="state_*",
                     truth="truth_*", cov="covar_*")
    order = np.argsort(ids)
    np.testing.assert_allclose(rep["anees"], expected(truth, x, P)[0], **TOL)
    np.testing.assert_allclose(rep["nees_per_run"], expected(truth, x, P)[1][order], **TOL)
    assert rep["run_ids"] == sorted(ids.tolist())
    assert rep["step_ids"][1] == "2024-01-01T00:00:05.000000"


def test_sparse_and_huge_run_ids_are_mapped_not_indexed(tmp_path, data):
    truth, fl = data
    x, P = fl["ekf"]
    ids = [0, 10**6, 10**7, 10**12, 2**62]  # a dense runs x steps grid would need exabytes
    pq.write_table(pa.table(long_columns(truth, x, P, run_ids=ids, step_ids=[0, 10**9, 10**10, 10**15])),
                   tmp_path / "sparse.parquet")
    rep = score_file(tmp_path / "sparse.parquet")
    check(rep, truth, x, P)
    assert rep["run_ids"] == ids and rep["step_ids"][-1] == 10**15


def test_ragged_runs_nan_rows_and_missing_steps_are_named_and_counted(tmp_path, data):
    truth, fl = data
    x, P = (a.copy() for a in fl["ekf"])
    x[3, 2:] = np.nan  # run 3 ends after 2 steps: padded with NaN, as saved arrays are
    P[3, 2:] = np.nan
    np.savez(tmp_path / "ragged.npz", x=x, t=truth, P=P)
    rep = score_file(tmp_path / "ragged.npz", estimate="x", truth="t", cov="P")
    assert rep["skipped_rows"]["count"] == 2
    assert rep["skipped_rows"]["first"].endswith("[3, 2] of the arrays (run 3, step 2)")
    assert rep["missing_pairs"] == {"count": 2, "first": {"run": 3, "step": 2}}
    assert rep["runs_per_step"] == [5, 5, 4, 4]
    per = nees(truth - fl["ekf"][0], fl["ekf"][1])
    keep = np.ones((R, T), bool)
    keep[3, 2:] = False
    np.testing.assert_allclose(rep["anees"], [per[keep[:, k], k].mean() for k in range(T)], **TOL)
    lo, hi = rep["bounds_per_step"]["anees"]
    assert (lo[2], hi[2]) == anees_bounds(4, D) and (lo[0], hi[0]) == anees_bounds(5, D)
    # the same run as a long table without those rows: same numbers
    cols = long_columns(truth, *fl["ekf"])
    rows = ~((cols["run"] == 3) & (cols["step"] >= 2))
    pq.write_table(pa.table({k: v[rows] for k, v in cols.items()}), tmp_path / "ragged.parquet")
    rep2 = score_file(tmp_path / "ragged.parquet")
    np.testing.assert_allclose(rep2["anees"], rep["anees"], **TOL)
    assert rep2["missing_pairs"] == rep["missing_pairs"]
    text = format_score(rep)
    assert "2 (run, step) pairs have no row (first: run 3, step 2)" in text and "2 rows skipped" in text


@pytest.mark.parametrize("make,args,needle", [
    (lambda p, tr, x, P: np.savez(p / "a.npz", x=x[0], t=tr, P=P), ["--estimate", "x", "--truth", "t", "--cov", "P"],
     r"a.npz: arrays 'x' \(4, 2\), 'P' \(5, 4, 2, 2\), 't' \(5, 4, 2\); "
     r"expected estimate and truth \(runs, steps, d\)"),
    (lambda p, tr, x, P: np.savez(p / "a.npz", x=x, t=tr, P=P), ["--estimate", "est"],
     r"a.npz: --estimate 'est' matches no array; the file holds x \(5, 4, 2\), t \(5, 4, 2\), P \(5, 4, 2, 2\); "
     r"expected one array for the arrays layout"),
    (lambda p, tr, x, P: np.save(p / "a.npy", x), [],
     r"a.npy: a single .npy file holds one array; expected a .npz or a directory of .npy files"),
    (lambda p, tr, x, P: pq.write_table(pa.table({"x_0": [1.0]}), p / "a.parquet"), [],
     r"a.parquet: no run column 'run'; the file has 'x_0'; expected a long table \(one row per run and step\) "
     r"or arrays shaped \(runs, steps, d\) in a .npz"),
    (lambda p, tr, x, P: np.savez(p / "a.npz", x=x, t=tr, P=P), ["--estimate", "ekf=x", "--cov", "P"],
     r"--estimate names filters ekf and --cov \(none\); expected the same filters in both"),
])
def test_wrong_layout_is_one_line_saying_what_was_expected(tmp_path, data, capsys, make, args, needle):
    truth, fl = data
    make(tmp_path, truth, *fl["ekf"])
    path = next(tmp_path.iterdir())
    with pytest.raises(SystemExit) as stop:
        main(["score", str(path), *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    import re

    assert re.search(needle, err), err


def test_verdict_first_and_per_run_table_only_on_request(tmp_path, data, capsys):
    truth, fl = data
    np.savez(tmp_path / "a.npz", x=fl["ekf"][0], t=truth, P=fl["ekf"][1])
    base = ["score", str(tmp_path / "a.npz"), "--estimate", "x", "--truth", "t", "--cov", "P"]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "mean ANEES vs band" in out and "at each step" not in out and "of each run" not in out
    assert len(out.splitlines()) < 8
    assert main([*base, "--per-run", "--per-step"]) == 0
    out = capsys.readouterr().out
    assert out.index("mean ANEES vs band") < out.index("at each step:") < out.index("of each run:")
    assert len(out.splitlines()) > R + T

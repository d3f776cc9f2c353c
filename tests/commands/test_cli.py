"""The fastcal command line: score and simulate, exit codes, atomic output."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.cli import main
from fastcal.progress import Progress
from fastcal.reports.report import CalibrationReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRACT = {"n", "n_omitted", "ece", "esce", "mce", "ecd", "brier", "nll", "bins"}
BIN_CONTRACT = {"lower", "upper", "count", "conf", "frac_pos", "ece", "esce", "ecd"}


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def pred(tmp_path):
    y, p = fastcal.simulate(3_000, sigma=2.0, seed=11, dtype=np.float32)
    f = tmp_path / "pred.parquet"
    pq.write_table(pa.table({"score": p, "label": y}), f, row_group_size=1_000)
    return str(f), y, p


def test_json_contract_and_numbers(pred, capsys):
    path, y, p = pred
    code, out, err = run(["score", path, "--prob", "score", "--label", "label", "--json",
                          "--bins", "15", "--chunk-rows", "700"], capsys)
    assert code == 0 and err == ""
    d = json.loads(out)
    assert CONTRACT <= set(d)
    assert len(d["bins"]) == 15 and all(BIN_CONTRACT <= set(b) for b in d["bins"])
    ref = fastcal.calibration_report(y, p, n_bins=15)
    for k in ("ece", "esce", "mce", "ecd", "brier", "nll"):
        assert d[k] == pytest.approx(getattr(ref, k), rel=1e-12, abs=0)
    assert d["n"] == 3_000 and d["n_omitted"] == 0
    assert [b["count"] for b in d["bins"]] == ref.bins["count"].tolist()
    assert d["file"] == path and d["format"] == "parquet" and d["passes"] == 1


def test_empty_bins_are_null_in_json(tmp_path, capsys):
    f = tmp_path / "two.csv"
    f.write_text("p,y\n0.05,0\n0.95,1\n")
    code, out, _ = run(["score", str(f), "--prob", "p", "--label", "y", "--json"], capsys)
    assert code == 0
    bins = json.loads(out)["bins"]
    assert bins[0]["count"] == 1 and bins[0]["conf"] == pytest.approx(0.05)
    for b in bins[1:9]:
        assert b["count"] == 0
        assert all(b[k] is None for k in ("conf", "frac_pos", "ece", "esce", "ecd"))


def test_text_table_and_quantile_note(pred, capsys):
    path, y, p = pred
    code, out, _ = run(["score", path, "--prob", "score", "--label", "label",
                        "--strategy", "quantile"], capsys)
    assert code == 0
    k = dict(fastcal.score_file(path, prob="score", label="label",
                                strategy="quantile").pass_steps)["equal-mass bins"]
    at = "a second pass" if k == 1 else f"passes 2-{1 + k}"  # issue 23, item 12
    assert f"Equal-mass bins: exact, from {at} over the file." in out
    ref = fastcal.calibration_report(y, p, strategy="quantile")
    assert f"| weighted sum |  | 3000 |  |  | {ref.ece:.4f} |" in out
    assert out.count("\n| ") >= 11


def test_output_is_written_atomically(pred, tmp_path, capsys):
    path, y, p = pred
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    code, out, _ = run(["score", path, "--prob", "score", "--label", "label", "--json",
                        "--output", str(target)], capsys)
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["n"] == 3_000
    # A failing run leaves the old file as it was and no temporary file behind.
    before = target.read_text()
    code, _, err = run(["score", path, "--prob", "nope", "--label", "label", "--json",
                        "--output", str(target)], capsys)
    assert code == 2 and "no column 'nope'" in err
    assert target.read_text() == before
    assert os.listdir(target.parent) == ["report.json"]
    fresh = tmp_path / "out" / "fresh.txt"
    code, _, _ = run(["score", path, "--prob", "score", "--label", "bad", "--output",
                      str(fresh)], capsys)
    assert code == 2 and not fresh.exists()


def test_failure_mid_file_writes_nothing(tmp_path, capsys):
    y, p = fastcal.simulate(5_000, seed=1)
    p[4_500] = -0.25
    f = tmp_path / "late.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, row_group_size=1_000)
    target = tmp_path / "r.json"
    code, out, err = run(["score", str(f), "--prob", "p", "--label", "y", "--json",
                          "--output", str(target), "--chunk-rows", "512"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "at row 4500" in err and str(f) in err
    assert not target.exists() and os.listdir(tmp_path) == ["late.parquet"]


def test_bad_usage_exits_2_with_one_line(pred, capsys):
    path, _, _ = pred
    code, _, err = run(["score", path, "--prob", "score", "--label", "label", "--bins", "0"],
                       capsys)
    assert code == 2 and err.count("\n") == 1 and "--bins must be >= 1" in err
    with pytest.raises(SystemExit) as e:
        main(["score", path, "--prob", "score", "--label", "label", "--strategy", "kmeans"])
    assert e.value.code == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["score", path, "--label", "label"])  # --prob is required
    assert e.value.code == 2
    capsys.readouterr()
    assert main([]) == 2


def test_debug_shows_the_exception(pred):
    path, _, _ = pred
    with pytest.raises(ValueError, match="no column 'nope'"):
        main(["score", path, "--prob", "nope", "--label", "label", "--debug"])


def test_plot_option(pred, tmp_path, capsys):
    path, _, _ = pred
    png = tmp_path / "rel.png"
    code, _, err = run(["score", path, "--prob", "score", "--label", "label", "--plot",
                        str(png)], capsys)
    if hasattr(CalibrationReport, "plot"):
        assert code == 0 and png.stat().st_size > 0
    else:
        assert code == 2 and "plotting is not available" in err and "plot extra" in err
        assert not png.exists()


# -- simulate ---------------------------------------------------------------------------

def read_back(path, fmt):
    if fmt == "parquet":
        t = pq.read_table(path)
    elif fmt == "feather":
        with pa.OSFile(path, "rb") as fh:
            t = ipc.open_file(fh).read_all()
    elif fmt == "csv":
        t = pcsv.read_csv(path)
    else:
        return np.load(os.path.join(path, "p.npy")), np.load(os.path.join(path, "y.npy"))
    return t["p"].to_numpy(), t["y"].to_numpy()


@pytest.mark.parametrize("fmt", ["parquet", "feather", "npy", "csv"])
def test_simulate_is_reproducible_whatever_the_chunk(tmp_path, fmt, capsys):
    n = 150_001
    y_ref, p_ref = fastcal.simulate(n, sigma=0.5, seed=3, dtype=np.float32)
    outs = []
    for chunk in (65_536, 100_000, 7_777):
        out = str(tmp_path / f"sim{chunk}.{fmt}")
        code, _, err = run(["simulate", out, "--n", str(n), "--sigma", "0.5", "--seed", "3",
                            "--format", fmt, "--dtype", "float32", "--chunk-rows", str(chunk)],
                           capsys)
        assert code == 0, err
        p, y = read_back(out, fmt)
        outs.append((p, y))
    for p, y in outs:
        np.testing.assert_array_equal(y, y_ref)
        if fmt == "csv":  # text holds the float32 value's shortest decimal
            np.testing.assert_array_equal(p.astype(np.float32), p_ref)
        else:
            assert p.dtype == np.float32
            np.testing.assert_array_equal(p, p_ref)
    assert sorted(os.listdir(tmp_path)) == sorted(f"sim{c}.{fmt}" for c in (65_536, 100_000,
                                                                               7_777))


def test_simulate_then_score_is_the_paper_table(tmp_path, capsys):
    out = str(tmp_path / "s2.parquet")
    assert run(["simulate", out, "--n", "20000", "--sigma", "2", "--seed", "0"], capsys)[0] == 0
    code, text, _ = run(["score", out, "--prob", "p", "--label", "y", "--json"], capsys)
    y, p = fastcal.simulate(20_000, sigma=2.0, seed=0)
    ref = fastcal.calibration_report(y, p)
    d = json.loads(text)
    assert d["ecd"] == pytest.approx(ref.ecd, rel=1e-12) and d["ece"] == pytest.approx(ref.ece,
                                                                                       rel=1e-12)


def test_simulate_bad_input(tmp_path, capsys):
    code, _, err = run(["simulate", str(tmp_path / "x.parquet"), "--n", "0"], capsys)
    assert code == 2 and "--n must be >= 1" in err
    d = tmp_path / "exists"
    d.mkdir()
    code, _, err = run(["simulate", str(d), "--n", "10", "--format", "npy"], capsys)
    assert code == 2 and "existing directory" in err
    code, _, err = run(["simulate", str(tmp_path / "no" / "x.parquet"), "--n", "10"], capsys)
    assert code == 2 and "does not exist" in err
    assert sorted(os.listdir(tmp_path)) == ["exists"]


# -- progress and the installed entry point -------------------------------------------------

class TtyBuffer(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_only_on_a_terminal():
    tty = TtyBuffer()
    bar = Progress(1_000, label="f.parquet", stream=tty, interval=0.0)
    bar.update(250)
    bar.close()
    text = tty.getvalue()
    assert "f.parquet" in text and "250/1.00k rows" in text and "rows/s" in text
    assert "ETA" in text and text.endswith("\n")
    plain = io.StringIO()
    bar = Progress(1_000, stream=plain, interval=0.0)
    bar.update(1_000)
    bar.close()
    assert plain.getvalue() == ""


def test_entry_point_version_and_no_traceback(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "fastcal.cli", "--version"], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == f"fastcal {fastcal.__version__}"
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet PAR1")
    r = subprocess.run([sys.executable, "-m", "fastcal.cli", "score", str(bad), "--prob", "p",
                        "--label", "y"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and str(bad) in r.stderr


def test_demo_scores_simulated_files_out_of_core(capsys):
    from fastcal import demo

    demo.main(["--n", "3000", "--chunk-rows", "1000"])
    out = capsys.readouterr().out
    head = out.splitlines()[:3]
    assert [h.split(":")[0] for h in head] == ["ECD", "ESCE", "z"]  # one line each
    assert "mean(y) - mean(p)" in head[1]
    assert out.count("first timing includes compiling") == 1
    for sigma in (0.0, 0.5, 2.0):
        y, p = fastcal.simulate(3_000, sigma=sigma, seed=0)
        ref = fastcal.calibration_report(y, p)
        section = out.split(f"sigma = {sigma}\n")[1]
        assert f"| weighted sum |  | 3000 |  |  | {ref.ece:.4f} | {ref.esce:.4f} | {ref.ecd:.4f} |" \
            in section
        assert f"ACE = {ref.ace:.4f}" in section


def test_outputs_get_the_usual_permissions(pred, tmp_path, capsys):
    path, _, _ = pred
    old = os.umask(0o022)
    try:
        out = tmp_path / "r.txt"
        assert run(["score", path, "--prob", "score", "--label", "label", "--output", str(out)],
                   capsys)[0] == 0
        sim = tmp_path / "s.parquet"
        assert run(["simulate", str(sim), "--n", "10"], capsys)[0] == 0
        npy = tmp_path / "s_npy"
        assert run(["simulate", str(npy), "--n", "10", "--format", "npy"], capsys)[0] == 0
    finally:
        os.umask(old)
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)
    assert oct(sim.stat().st_mode & 0o777) == oct(0o644)
    assert oct(npy.stat().st_mode & 0o777) == oct(0o755)


def test_every_scoring_option_reaches_the_command_line(tmp_path, capsys):
    """--ci, --n-boot, --seed, --renormalize, --logits with --workers, and the
    checksum switch give the numbers of the Python entry points."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(8)
    p = rng.random(3_000)
    y = (rng.random(3_000) < p).astype(np.uint8)
    f = tmp_path / "d.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, write_page_checksum=True)
    ref = fastcal.calibration_report(y, p, ci=0.9, n_boot=25, seed=4, ace=False)
    assert main(["score", str(f), "--prob", "p", "--label", "y", "--json", "--ci", "0.9",
                 "--n-boot", "25", "--seed", "4", "--no-verify-checksums"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["ci"]["level"] == 0.9
    np.testing.assert_allclose(got["ci"]["ece"], ref.intervals["ece"], rtol=1e-12)
    K = 3
    P = rng.dirichlet(np.ones(K), size=500) * 1.01
    yk = rng.integers(0, K, 500)
    g = tmp_path / "k.parquet"
    pq.write_table(pa.table({**{f"p_{k}": P[:, k] for k in range(K)}, "y": yk}), g)
    assert main(["score", str(g), "--prob", "p_*", "--label", "y", "--json",
                 "--renormalize"]) == 0
    got = json.loads(capsys.readouterr().out)
    ref = fastcal.calibration_report(yk, P, renormalize=True, ace=False)
    np.testing.assert_allclose(got["ece"], ref.ece, rtol=1e-12)


def test_score_soft_label_columns(tmp_path, capsys):
    """K label columns (a prefix or a comma list) score soft labels, as in Python."""
    from fastcal.soft import soft_label_report

    rng = np.random.default_rng(8)
    t = rng.dirichlet(np.ones(3), 2_000)
    p = rng.dirichlet(np.ones(3) * 2, 2_000)
    f = tmp_path / "soft.parquet"
    pq.write_table(pa.table({**{f"p{k}": p[:, k] for k in range(3)},
                             **{f"t{k}": t[:, k] for k in range(3)}}), f)
    code, out, _ = run(["score", str(f), "--prob", "p*", "--label", "t0,t1,t2", "--json"], capsys)
    d = json.loads(out)
    ref = soft_label_report(t, p)
    assert code == 0 and d["n_classes"] == 3 and d["n_rows"] == 2_000
    assert d["ecd"] == pytest.approx(ref.ecd, rel=1e-12)
    assert d["distce"] == pytest.approx(ref.distce, rel=1e-12)
    code, out, _ = run(["score", str(f), "--prob", "p*", "--label", "t*"], capsys)
    assert code == 0 and "of soft labels over 3 classes" in out and "| RankCS |" in out
    code, _, err = run(["score", str(f), "--prob", "p*", "--label", "t*", "--plot",
                        str(tmp_path / "x.png")], capsys)
    assert code == 2 and "soft labels" in err and not (tmp_path / "x.png").exists()

"""tracking's CLI: its name, bare help, outputs never onto inputs, JSON with inf, signals, bounded sizes."""

import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracking.cli import main

ROOT = Path(__file__).resolve().parents[2]


def tracking(*args, **kw):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-m", "tracking", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def long_table(path, runs=3, steps=2, err=0.5):
    rr, kk = np.meshgrid(np.arange(runs), np.arange(steps), indexing="ij")
    n = runs * steps
    cols = {"run": rr.ravel(), "step": kk.ravel(), "x_0": np.full(n, err), "t_0": np.zeros(n), "P_0": np.ones(n)}
    pq.write_table(pa.table(cols), path)
    return path


def test_bare_command_prints_help_and_exits_2_under_its_own_name():
    p = tracking()
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and out == ""
    assert err.startswith("usage: tracking ") and "compare" in err and "score" in err


def test_plot_onto_the_input_is_refused_and_the_input_kept(tmp_path, capsys):
    src = long_table(tmp_path / "est.png")  # a Parquet file with an image name, as in the report
    before = src.read_bytes()
    (tmp_path / "link.png").symlink_to(src)
    for target in (src, tmp_path / "link.png"):
        with pytest.raises(SystemExit) as stop:
            main(["score", str(src), "--format", "parquet", "--plot", str(target)])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "refusing to overwrite an input" in err and err.count("\n") == 1
        assert src.read_bytes() == before


def test_json_with_inf_is_written_as_fastcal_writes_it_and_the_plot_too(tmp_path, capsys):
    src = long_table(tmp_path / "est.parquet", err=1e200)  # NEES overflows to inf
    plot = tmp_path / "p.png"
    assert main(["score", str(src), "--json", "--plot", str(plot)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["mean_anees"] == "inf" and rep["anees"] == ["inf", "inf"]
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_a_failed_run_prints_no_json_and_leaves_the_plot_as_it_was(tmp_path, capsys):
    src = long_table(tmp_path / "est.parquet", runs=1)  # one run: no bands
    plot = tmp_path / "p.png"
    plot.write_bytes(b"old")
    with pytest.raises(SystemExit) as stop:
        main(["score", str(src), "--json", "--plot", str(plot)])
    assert stop.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "expected >= 2 runs" in captured.err
    assert plot.read_bytes() == b"old" and sorted(os.listdir(tmp_path)) == ["est.parquet", "p.png"]


@pytest.mark.parametrize("args,needle", [
    (["--runs", "100000000", "--steps", "100000000"], "covariance values; expected at most"),
    (["--sigma-r", "1e308"], "sigma_r is 1e+308; expected |sigma_r| <= 1e+100"),
    (["--ukf-alpha", "1e-10"], "--ukf-alpha must be in [1e-4, 100], got 1e-10"),
])
def test_sizes_and_option_ranges_are_checked_before_anything_runs(args, needle, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["compare", *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def _loaded(pid, name):
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see when the run is under way")
@pytest.mark.parametrize("sig,code,word", [(signal.SIGTERM, 143, "stopped by SIGTERM"),
                                           (signal.SIGINT, 130, "interrupted")])
def test_a_signal_ends_with_one_line_and_no_temporary_file(tmp_path, sig, code, word):
    p = tracking("compare", "--runs", "4000", "--steps", "400", "--plot", str(tmp_path / "c.png"), cwd=tmp_path)
    deadline = time.monotonic() + 120
    # matplotlib is loaded once --plot has been checked, inside the command's error handling
    while not _loaded(p.pid, "matplotlib") and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    assert err.strip().splitlines() == [f"tracking compare: {word}; temporary files removed"]
    assert out == "" and os.listdir(tmp_path) == []


def test_legends_sit_outside_the_curves():
    from tracking.score import plot_score

    steps = list(range(20))
    rep = {"file": "x.parquet", "layout": "long table",
           "filters": {n: {"dim": 2, "runs": 5, "steps": 20, "confidence": 0.95, "bounds": {"anees": [1.0, 3.0]},
                           "anees": [2.0 + 3 * (k / 19) + i for k in steps], "step_ids": steps,
                           "run_ids": list(range(5)), "nees_per_run": [2.0] * 5} for i, n in enumerate("ab")}}
    fig = plot_score(rep)
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        leg = ax.get_legend()
        if leg is None:
            continue
        box, area = leg.get_window_extent(), ax.get_window_extent()
        assert box.y0 >= area.y1 - 1  # above the plotting area, never over the highest part of a curve


def test_compare_plot_legends_sit_outside_the_curves():
    from tracking.compare import plot_report

    f = {"anees": [4.0, 9.0, 6.0], "nis": [2.0, 5.0, 2.5]}
    rep = {"filters": {"ekf": f, "ukf": f}, "bounds": {"anees": [3.0, 5.0], "nis": [1.0, 3.0]},
           "scenario": {"state_dim": 4, "measurement_dim": 2, "steps": 3, "confidence": 0.95, "name": "t", "runs": 9}}
    fig = plot_report(rep)
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        box, area = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert box.y0 >= area.y1 - 1

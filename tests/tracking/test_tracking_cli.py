"""Tests for ``python -m tracking compare``: JSON contract, exit codes, plot."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from tracking.cli import main

ROOT = Path(__file__).resolve().parents[2]
FILTER_KEYS = {"anees", "ecd", "nis", "inside_fraction", "mean_anees", "mean_ecd", "rmse"}


def run_module(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "tracking", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_json_keys_are_the_contract(capsys):
    assert main(["compare", "--runs", "5", "--steps", "7", "--seed", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"filters", "bounds", "scenario"}
    assert set(report["filters"]) == {"ekf", "ukf"}
    for name in ("ekf", "ukf"):
        f = report["filters"][name]
        assert set(f) >= FILTER_KEYS
        assert len(f["anees"]) == len(f["ecd"]) == len(f["nis"]) == 7
        assert 0.0 <= f["inside_fraction"] <= 1.0
        assert f["mean_ecd"] == pytest.approx(0.5 * f["mean_anees"] - 2.0)
    lo, hi = report["bounds"]["anees"]
    elo, ehi = report["bounds"]["ecd"]
    assert lo < 4.0 < hi and elo < 0.0 < ehi
    sc = report["scenario"]
    for key in ("runs", "steps", "seed", "dt", "q", "sigma_r", "sigma_theta_deg", "sensor_x", "sensor_y",
                "range0", "speed", "p0_pos", "p0_vel", "missing", "alpha", "ukf_alpha", "ukf_beta", "ukf_kappa"):
        assert key in sc
    assert (sc["runs"], sc["steps"], sc["seed"]) == (5, 7, 3)


def test_table_by_default(capsys):
    assert main(["compare", "--runs", "4", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "mean ANEES" in out and "\nEKF " in out and "\nUKF " in out


def test_plot_is_written_as_png(tmp_path, capsys):
    path = tmp_path / "consistency.png"
    assert main(["compare", "--runs", "4", "--steps", "5", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["consistency.png"]  # no temp file left


@pytest.mark.parametrize("args,needle", [
    (["compare", "--runs", "1"], "runs must be >= 2"),
    (["compare", "--sigma-r", "0"], "sigma_r must be > 0"),
    (["compare", "--dt", "-1"], "dt must be > 0"),
    (["compare", "--steps", "ten"], "invalid int value"),
    (["compare", "--plot", "out.xyz"], "cannot tell the image format from the extension .xyz"),
    (["compare", "--scenario", "nope"], "--scenario must be one of range-bearing, radar-3d, turn"),
    (["compare", "--scenario", "turn", "--sigma-r", "1"], "--sigma-r only apply to --scenario range-bearing"),
])
def test_bad_input_exits_2_with_one_line(args, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_module_entry_point_json_and_exit_code():
    ok = run_module("compare", "--runs", "3", "--steps", "4", "--json")
    assert ok.returncode == 0, ok.stderr
    assert set(json.loads(ok.stdout)["filters"]["ukf"]) >= FILTER_KEYS
    bad = run_module("compare", "--runs", "0")
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("tracking compare: error:")


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("--runs", "--steps", "--seed", "--json", "--plot", "--sigma-theta-deg"):
        assert option in out
    # each default said once, and none for flags or options without one
    flat = " ".join(out.split())
    assert "(default 3 - n)" in flat and "(default: None)" not in flat
    assert "(default: False)" not in flat and "(default: 0)" in flat


def test_example_small_writes_plot_and_json(tmp_path, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ekf_vs_ukf", ROOT / "examples" / "ekf_vs_ukf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(tmp_path / "out"), "--small"]) == 0
    report = json.loads((tmp_path / "out" / "ekf_vs_ukf.json").read_text())
    assert report["scenario"]["runs"] == 10 and set(report["filters"]) == {"ekf", "ukf"}
    assert (tmp_path / "out" / "ekf_vs_ukf.png").read_bytes()[:4] == b"\x89PNG"
    assert "UKF" in capsys.readouterr().out


def test_compare_loads_only_what_it_needs():
    # start-up of `tracking compare` (issue 26): a linear model's Jacobian is its own
    # cached kernel, not jacobian_f (which takes functions: compiled in every process),
    # and the chi-square bands do not import scipy.stats (0.5 s)
    code = ("import contextlib, os, sys\n"
            "from tracking import cli\n"
            "from tracking.kernels import blocks\n"
            "with open(os.devnull, 'w') as out, contextlib.redirect_stdout(out):\n"
            "    assert cli.main(['compare', '--runs', '3', '--steps', '4', '--json']) == 0\n"
            "print(len(blocks.jacobian_f.signatures), 'scipy.stats' in sys.modules)\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["0", "False"]


def test_chi_square_quantiles_are_scipy_stats_ones():
    from scipy import stats

    from fastcal.gaussian import _chi2_ppf

    for dof in (1, 4, 40, 4_000):
        for q in (1e-10, 0.025, 0.5, 0.975):
            assert _chi2_ppf(q, dof) == stats.chi2.ppf(q, dof)


def test_help_names_each_default_once_and_version(capsys):
    import re

    import fastcal
    from tracking.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "score" in a.choices)
    for name, p in sub.choices.items():
        formatter = p._get_formatter()
        for a in p._actions:
            if a.help and a.help != "==SUPPRESS==":
                text = formatter._expand_help(a)  # the help line as --help prints it
                assert text.count("default") <= 1, (name, a.option_strings, text)
        assert "(default: None)" not in re.sub(r"\s+", " ", p.format_help())
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"tracking {fastcal.__version__}\n"

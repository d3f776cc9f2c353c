"""examples/coverage_table.py: exact population values, and the table it writes (--small)."""

import importlib.util
import json
from pathlib import Path

import pytest

import fastcal

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("coverage_table",
                                                  ROOT / "examples" / "coverage_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("sigma, shift", [(0.0, 1.0), (0.5, 0.0)])
def test_population_values_match_a_large_sample(sigma, shift):
    ct = load()
    truth = ct.population(sigma, shift, k=200)
    assert truth["mass_total"] == pytest.approx(1.0, abs=1e-9)
    y, p = ct.sample(7, 1_000_000, sigma, shift)
    rep = fastcal.calibration_report(y, p, ace=False)
    for m, tol in (("ece", 2e-3), ("esce", 2e-3), ("ecd", 3e-3), ("brier", 1e-3), ("nll", 3e-3)):
        assert getattr(rep, m) == pytest.approx(truth[m], abs=tol), m
    # calibrated data: every binned population figure is exactly 0
    zero = ct.population(0.0, 0.0, k=200)
    assert zero["ece"] == pytest.approx(0.0, abs=1e-12) and zero["ecd"] == pytest.approx(0, abs=1e-12)


def test_small_table_is_written(tmp_path, capsys):
    ct = load()
    ct.main([str(tmp_path), "--small"])
    data = json.loads((tmp_path / "coverage.json").read_text())
    assert len(data["rows"]) == 3
    for row in data["rows"]:
        assert row["seeds"] == 40 and set(row["coverage"]) == set(ct.METRICS)
        for m in ct.METRICS:
            c = row["coverage"][m]
            assert 0.0 <= c["coverage"] <= 1.0 and c["mean_width"] >= 0.0
    assert "Monte Carlo standard error" in (tmp_path / "coverage.md").read_text()
    assert "| shift +1" in capsys.readouterr().out

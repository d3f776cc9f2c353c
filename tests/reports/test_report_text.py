"""The header of `fastcal score`'s text report says what each pass over the file was."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.cli import main
from fastcal.commands.score import _pass_lines


@pytest.fixture
def certain_wrong(tmp_path):
    y, p = fastcal.simulate(2_000, sigma=0.5, seed=2)
    p = p.astype(np.float64)
    p[5], y[5] = 1.0, 0  # one certain-and-wrong row: a light extra pass counts it
    f = tmp_path / "cw.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f)
    return str(f)


def header(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    return out[:out.index("| bin |")]


def test_a_certain_and_wrong_count_is_not_called_ace(certain_wrong, capsys):
    """Issue 23, item 12: the second pass only counted certain-and-wrong rows (ACE = n/a)."""
    head = header(["score", certain_wrong, "--prob", "p", "--label", "y"], capsys)
    assert "ACE:" not in head
    assert "Certain-and-wrong rows: counted in a second pass over the file." in head


def test_three_passes_or_more_are_each_named(certain_wrong, capsys):
    head = header(["score", certain_wrong, "--prob", "p", "--label", "y", "--strategy",
                   "quantile"], capsys)
    rep = fastcal.score_file(certain_wrong, prob="p", label="y", strategy="quantile")
    steps = dict(rep.pass_steps)
    assert rep.passes == sum(steps.values()) and steps["certain-and-wrong rows"] == 1
    k = steps["equal-mass bins"]
    at = "a second pass" if k == 1 else f"passes 2-{1 + k}"
    last = {3: "a third pass", 4: "a fourth pass"}[rep.passes]
    assert f"Equal-mass bins: exact, from {at} over the file." in head
    assert f"Certain-and-wrong rows: counted in {last} over the file." in head
    assert "second pass" not in head or k == 1


def test_pass_lines_number_every_step():
    steps = [("fill", 1), ("ACE", 1), ("certain-and-wrong rows", 1)]
    assert _pass_lines(steps, "the data") == [
        "ACE: exact equal-mass bins, from a second pass over the data.",
        "Certain-and-wrong rows: counted in a third pass over the data."]
    assert _pass_lines([("fill", 1), ("equal-mass bins", 6), ("certain-and-wrong rows", 1)],
                       "the file")[1] == "Certain-and-wrong rows: counted in pass 8 over the file."
    assert _pass_lines([("fill", 1)], "the file") == []

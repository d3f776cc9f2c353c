"""The command line, round 2 of hardening (issue 23: outputs, JSON, damaged files,
signals, Dask logs, messages, help and warnings)."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err):
    return err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture
def pred(tmp_path):
    y, p = fastcal.simulate(600, sigma=0.5, seed=4)
    f = tmp_path / "pred.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f)
    return str(f)


def score(path, *extra):
    return ["score", path, "--prob", "p", "--label", "y", "--quiet", *extra]


def recal(path, *extra):
    return ["recalibrate", path, "--prob", "p", "--label", "y", "--quiet", *extra]


# -- item 1: no output replaces an input or another output ---------------------------------

def test_no_output_replaces_the_map_or_another_output(pred, tmp_path, capsys):
    model = tmp_path / "map.json"
    assert run(recal(pred, "--out", str(model), "--no-table"), capsys)[0] == 0
    before = model.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(model)
    for target in (model, link):
        code, out, err = run(score(pred, "--recalibration", str(model), "--json",
                                   "--output", str(target)), capsys)
        assert code == 2 and one_line(err) and "--recalibration map" in err, err
        assert "refusing to overwrite an input" in err
    assert model.read_bytes() == before
    x = tmp_path / "x"
    xlink = tmp_path / "xlink"
    xlink.symlink_to(x)
    for argv in (recal(pred, "--out", str(x), "--plot", str(x)),
                 recal(pred, "--out", str(x), "--plot", str(xlink)),
                 recal(pred, "--out", "-"),
                 score(pred, "--output", str(xlink), "--plot", str(x))):
        code, out, err = run(argv, capsys)
        assert code == 2 and one_line(err) and "are the same file" in err, (argv, err)
    assert not x.exists()


# -- item 5: one JSON convention for infinities, every command -------------------------------

def test_json_with_an_infinity_is_the_same_convention_everywhere(tmp_path, capsys):
    y, p = fastcal.simulate(400, sigma=0.5, seed=2)
    p[0], y[0] = 1.0, 0  # certain and wrong: NLL and ECD are infinite
    f = tmp_path / "cw.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f)
    code, out, err = run(recal(str(f), "--json"), capsys)
    assert code == 0, err
    rec = json.loads(out)
    assert rec["table"]["NLL"]["before"] == "inf"
    code, out, err = run(score(str(f), "--json"), capsys)
    assert code == 0, err
    assert json.loads(out)["nll"] == "inf"
    assert cli.json_text({"a": np.float64("-inf"), "b": [np.nan, np.int64(3)]}) == \
        '{"a": "-inf", "b": [null, 3]}\n'

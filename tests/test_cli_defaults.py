"""One default number of bins for every report (API and commands)."""

import inspect
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal import cli, distributed, files, metrics, recalibrate, significance, sklearn
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.inputs.validation import DEFAULT_N_BINS
from fastcal.score import Options


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def pred(tmp_path_factory):
    y, p = fastcal.simulate(3_000, sigma=0.8, seed=5)
    f = tmp_path_factory.mktemp("defaults") / "pred.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f)
    return str(f)


# -- bins ----------------------------------------------------------------------------------

def test_score_and_recalibrate_bin_the_same_file_the_same_way(pred, capsys):
    code, out, _ = run(["score", pred, "--prob", "p", "--label", "y", "--quiet", "--json"],
                       capsys)
    assert code == 0
    scored = json.loads(out)
    code, out, _ = run(["recalibrate", pred, "--prob", "p", "--label", "y", "--quiet",
                        "--json"], capsys)
    assert code == 0
    before = json.loads(out)["table"]["ECE"]["before"]
    assert len(scored["bins"]) == DEFAULT_N_BINS
    assert before == scored["ece"]


# every public function or class that bins a report, by its n_bins (HistogramBinning's
# n_bins are the map's own bins, --hist-bins: not a report's)
BINNING = [metrics.calibration_report, metrics.ece, metrics.esce, metrics.mce, metrics.ace,
           metrics.classwise_ece, files.score_file, significance.ece_test, CalibrationAccumulator,
           distributed.score_dask, distributed.score_dataframe, distributed.score_dataset,
           sklearn.ece_score, sklearn.make_ece_scorer, recalibrate.evaluate, Options]


@pytest.mark.parametrize("f", BINNING, ids=lambda f: f.__qualname__)
def test_every_report_of_the_api_has_the_default_bins(f):
    assert inspect.signature(f).parameters["n_bins"].default == DEFAULT_N_BINS


def test_the_commands_say_their_default_bins():
    sub = cli._parser()._subparsers._group_actions[0].choices
    for name in ("score", "recalibrate"):
        action = next(a for a in sub[name]._actions if a.dest == "bins")
        assert action.default == DEFAULT_N_BINS and f"({DEFAULT_N_BINS}" in action.help

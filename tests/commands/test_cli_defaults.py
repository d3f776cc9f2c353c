"""One default number of bins for every report (API and commands), and the options of an
optional measure refused, in one line, when the measure is not asked for."""

import inspect
import json

import numpy as np
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


# -- options of a measure not asked for --------------------------------------------------

@pytest.mark.parametrize("kw, text", [
    (dict(sweep="uniform"), "sweep='uniform' is for ECE-sweep, which is not asked for: pass "
                            "metrics=['ece_sweep'] too, or leave sweep out"),
    (dict(sweep="quantile", metrics=["smece"]),
     "sweep='quantile' is for ECE-sweep, which is not asked for: pass metrics=['ece_sweep'] "
     "too, or leave sweep out"),
    (dict(tace_threshold=0.01), "tace_threshold=0.01 is for TACE, which is not asked for: pass "
                                "metrics=['tace'] too, or leave tace_threshold out"),
])
def test_an_option_of_a_measure_not_asked_for_is_refused(kw, text):
    with pytest.raises(ValueError) as info:
        Options(**kw)
    assert str(info.value) == text
    y, p = fastcal.simulate(100, seed=1)
    with pytest.raises(ValueError) as info:
        fastcal.calibration_report(y, p, **kw)
    assert str(info.value) == text


def test_an_option_of_a_measure_asked_for_is_taken():
    assert Options(metrics=["ece_sweep"]).sweep == "quantile"
    assert Options(metrics=["ece_sweep"], sweep="uniform").sweep == "uniform"
    assert Options(metrics=["tace"]).tace_threshold == 1e-3
    assert Options(metrics=["tace"], tace_threshold=0.01).tace_threshold == 0.01
    assert (Options().sweep, Options().tace_threshold) == (None, None)


@pytest.mark.parametrize("argv, text", [
    (["--sweep", "uniform"], "--sweep uniform is for ECE-sweep, which is not asked for: pass "
                             "--metrics ece_sweep too, or leave --sweep out"),
    (["--tace-threshold", "0.01", "--metrics", "smece"],
     "--tace-threshold 0.01 is for TACE, which is not asked for: pass --metrics tace too, or "
     "leave --tace-threshold out"),
])
def test_the_command_refuses_them_in_one_line(pred, argv, text, capsys):
    code, out, err = run(["score", pred, "--prob", "p", "--label", "y", "--quiet", *argv],
                         capsys)
    assert (code, out, err) == (2, "", f"fastcal score: error: {text}\n")


def test_the_command_takes_them_with_their_measure(pred, capsys):
    code, out, _ = run(["score", pred, "--prob", "p", "--label", "y", "--quiet", "--json",
                        "--metrics", "ece_sweep", "--sweep", "uniform"], capsys)
    y, p = np.asarray(pq.read_table(pred)["y"]), np.asarray(pq.read_table(pred)["p"])
    ref = fastcal.calibration_report(y, p, metrics=["ece_sweep"], sweep="uniform", ace=False)
    assert code == 0 and json.loads(out)["ece_sweep"] == ref.ece_sweep

"""What a report says beside its numbers (``notes()``, the text report, the JSON
``notes``): (n, 2) predictions scored as 2 classes, K-class rows certain and
wrong, TACE undefined; and the per-bin table as columns and as rows."""

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.cli import main
from fastcal.inputs.batch import TWO_CLASSES


def cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.fixture(scope="module")
def two_columns():
    """A binary model's predict_proba: (n, 2) rows [1 - p, p]."""
    y, p = fastcal.simulate(4_000, sigma=0.5, seed=4)
    return y, np.column_stack([1.0 - p, p])


# -- (n, 2) predictions -------------------------------------------------------------------

def test_two_columns_are_two_classes_top_label_and_the_report_says_how_to_get_binary(
        two_columns):
    y, P = two_columns
    two = fastcal.calibration_report(y, P, ace=False)
    one = fastcal.calibration_report(y, P[:, 1], ace=False)
    assert two.n_classes == 2 and two.ece != pytest.approx(one.ece, rel=1e-3)
    assert two.notes() == [TWO_CLASSES]
    assert "y_prob[:, 1]" in TWO_CLASSES and "--prob with that one column" in TWO_CLASSES
    assert TWO_CLASSES in two.to_markdown()
    assert json.loads(two.to_json())["notes"] == [TWO_CLASSES]
    assert one.notes() == [] and json.loads(one.to_json())["notes"] == []
    # the note comes with the state, whatever fills it: an accumulator alone too
    acc = fastcal.CalibrationAccumulator(n_bins=10).update(y, P)
    assert acc.report().notes() == [TWO_CLASSES]
    three = np.column_stack([P * 0.5, 0.5 * np.ones(len(y))])
    assert TWO_CLASSES not in fastcal.calibration_report(y, three, ace=False).notes()


def test_cli_prints_the_two_class_note(two_columns, tmp_path, capsys):
    y, P = two_columns
    f = tmp_path / "two.parquet"
    pq.write_table(pa.table({"p0": P[:, 0], "p1": P[:, 1], "y": y}), f)
    out = cli(["score", str(f), "--prob", "p0,p1", "--label", "y"], capsys)
    assert TWO_CLASSES in out
    d = json.loads(cli(["score", str(f), "--prob", "p0,p1", "--label", "y", "--json"], capsys))
    assert d["notes"] == [TWO_CLASSES]
    d = json.loads(cli(["score", str(f), "--prob", "p1", "--label", "y", "--json"], capsys))
    assert d["notes"] == [] and d["ece"] == pytest.approx(
        fastcal.calibration_report(y, P[:, 1], ace=False).ece, rel=1e-12)


# -- K-class rows certain and wrong -------------------------------------------------------

def _k_class(n=900, k=3, seed=5):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(k), n)
    y = (p.cumsum(1) > rng.random(n)[:, None]).argmax(1)
    p[[40, 500, 700]] = [[0.0, 0.5, 0.5], [0.2, 0.8, 0.0], [0.0, 1.0, 0.0]]
    y[[40, 500, 700]] = [0, 2, 1]  # rows 40 and 500 are certain and wrong, 700 right
    return y, p


def test_k_class_rows_certain_and_wrong_are_counted_and_explained(tmp_path, capsys):
    y, p = _k_class()
    rep = fastcal.calibration_report(y, p, ace=False)
    assert math.isinf(rep.nll) and math.isinf(rep.ecd)
    assert (rep.n_certain_wrong, rep.first_certain_wrong_row) == (2, 40)
    assert dict(rep.pass_steps)["certain-and-wrong rows"] == 1
    note = rep.certain_wrong_note()
    assert note.startswith("2 rows are certain and wrong (first at row 40) in bin")
    assert "the true class has probability exactly 0" in note and "NLL" in note
    assert "with y = 0" not in note  # not the binary wording
    assert rep.notes() == [note] and note in rep.to_markdown()
    assert json.loads(rep.to_json())["certain_wrong"]["n"] == 2
    # from a file in chunks: global rows
    f = tmp_path / "k.parquet"
    pq.write_table(pa.table({"p_0": p[:, 0], "p_1": p[:, 1], "p_2": p[:, 2], "y": y}), f)
    got = fastcal.score_file(f, prob="p_*", label="y", chunk_rows=128, ace=False)
    assert (got.n_certain_wrong, got.first_certain_wrong_row) == (2, 40)
    out = cli(["score", str(f), "--prob", "p_*", "--label", "y", "--chunk-rows", "128"], capsys)
    assert "2 rows are certain and wrong (first at row 40)" in out
    # logits: a masked class (-inf) that is the label
    z = np.log(np.where(p > 0, p, 1.0))
    z[p == 0] = -np.inf
    lg = fastcal.calibration_report(y, z, logits=True, ace=False)
    assert (lg.n_certain_wrong, lg.first_certain_wrong_row) == (2, 40)
    # eps: finite, nothing to say
    assert fastcal.calibration_report(y, p, ace=False, eps=1e-6).notes() == []


# -- TACE undefined ------------------------------------------------------------------------

def test_tace_with_no_probability_above_its_threshold_is_nan_with_a_note():
    rng = np.random.default_rng(6)
    p = rng.dirichlet(np.ones(4) * 50, 400)  # every p in about (0.1, 0.45)
    y = rng.integers(0, 4, 400)
    assert p.max() < 0.6
    rep = fastcal.calibration_report(y, p, metrics=("tace",), tace_threshold=0.6, ace=False)
    assert math.isnan(rep.tace) and rep.tace_threshold == 0.6
    note = ("TACE is undefined (NaN): no class probability is above tace_threshold = 0.6; "
            "lower the threshold (--tace-threshold on the command line, tace_threshold= in "
            "Python).")
    assert rep.notes() == [note] and note in rep.to_markdown()
    d = json.loads(rep.to_json())
    assert d["tace"] is None and d["tace_threshold"] == 0.6 and d["notes"] == [note]
    ok = fastcal.calibration_report(y, p, metrics=("tace",), ace=False)
    assert 0 < ok.tace < 1 and ok.notes() == []
    assert fastcal.calibration_report(y, p, ace=False).tace_threshold is None


# -- the per-bin table: columns here, rows in JSON -----------------------------------------

def test_bins_as_columns_and_as_rows_are_one_table_for_pandas(two_columns):
    y, P = two_columns
    for rep in (fastcal.calibration_report(y, P[:, 1], n_bins=8),
                fastcal.calibration_report(y, P, n_bins=8)):
        rows = rep.to_dict()["bins"]
        assert isinstance(rep.bins, dict) and isinstance(rows, list) and len(rows) == 8
        pd.testing.assert_frame_equal(pd.DataFrame(rep.bins),
                                      pd.DataFrame(rows).astype(pd.DataFrame(rep.bins).dtypes))
    pd.testing.assert_frame_equal(pd.DataFrame(rep.classes),
                                  pd.DataFrame(rep.to_dict()["classes"]), check_dtype=False)


def test_measures_are_added_by_name_and_only_as_fields():
    y, p = fastcal.simulate(2_000, sigma=0.5, seed=5)
    rep = fastcal.calibration_report(y, p, ace=False)
    assert rep.with_measures({"ace": 0.25, "ece_sweep": 0.01}) is rep
    assert (rep.ace, rep.ece_sweep) == (0.25, 0.01)
    assert rep.to_dict()["ace"] == 0.25
    with pytest.raises(TypeError, match="^CalibrationReport has no field acee, tce$"):
        rep.with_measures({"tce": 0.1, "acee": 0.2, "ece": 0.0})
    assert rep.ece != 0.0  # nothing set when one name is refused

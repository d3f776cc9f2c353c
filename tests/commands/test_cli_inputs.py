"""What a path names and what a CSV header says, for every entry point: a URL given as an
output or a recalibration map is refused in one line (not "no such file or directory"),
and a CSV file separated by ';' or without a header line is named as such (not "the file
has columns: 'p;y'")."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal import cli


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def pred(tmp_path_factory):
    rng = np.random.default_rng(3)
    f = tmp_path_factory.mktemp("inputs") / "pred.parquet"
    pq.write_table(pa.table({"p": rng.random(200), "y": rng.integers(0, 2, 200)}), f)
    return str(f)


# -- CSV headers -------------------------------------------------------------------------

@pytest.mark.parametrize("text, what", [
    ("p;y\n0.2;0\n0.9;1\n", "its first line 'p;y' looks separated by ';', but CSV files are "
                            "read comma-separated; write the file with commas"),
    ("p\ty\n0.2\t0\n", "its first line 'p\\ty' looks separated by '\\t', but CSV files are "
                       "read comma-separated; write the file with commas"),
    ("0.2,0\n0.9,1\n", "its first line '0.2,0' holds numbers, not column names (a file "
                       "without a header line?); expected a first line naming the columns, "
                       "such as p,y"),
])
def test_a_csv_header_that_is_not_one_is_named(tmp_path, capsys, text, what):
    f = tmp_path / "pred.csv"
    f.write_text(text)
    expected = f"{f}: no columns 'p', 'y': {what}"
    with pytest.raises(ValueError) as info:
        fastcal.score_file(f, prob="p", label="y")
    assert str(info.value) == expected
    code, out, err = run(["score", str(f), "--prob", "p", "--label", "y", "--quiet"], capsys)
    assert (code, out, err) == (2, "", f"fastcal score: error: {expected}\n")


def test_a_missing_column_of_a_good_header_is_still_named_so(tmp_path):
    f = tmp_path / "pred.csv"
    f.write_text("p,q\n0.2,0\n")
    with pytest.raises(ValueError, match=r"pred.csv: no column 'y'; the file has columns: "
                                         r"'p', 'q'$"):
        fastcal.score_file(f, prob="p", label="y")


# -- URLs --------------------------------------------------------------------------------

def test_a_url_is_refused_by_every_option_that_writes_or_reads_a_map(pred, tmp_path, capsys):
    # the data's path may be a URL (tests/sources/test_object_stores.py); outputs and maps may not
    cases = [
        (["score", pred, "--prob", "p", "--label", "y", "--output", "s3://b/r.txt"],
         "fastcal score: error: --output s3://b/r.txt: s3:// URLs are not written yet; give a "
         "local file name\n"),
        (["score", pred, "--prob", "p", "--label", "y", "--plot", "https://h/d.png"],
         "fastcal score: error: --plot https://h/d.png: https:// URLs are not written yet; give "
         "a local file name\n"),
        (["score", pred, "--prob", "p", "--label", "y", "--recalibration", "s3://b/map.json"],
         "fastcal score: error: --recalibration s3://b/map.json: s3:// URLs are not read yet; "
         "copy the file to a local path and pass that\n"),
        (["recalibrate", pred, "--prob", "p", "--label", "y", "--out", "gs://b/map.json"],
         "fastcal recalibrate: error: --out gs://b/map.json: gs:// URLs are not written yet; "
         "give a local file name\n"),
        (["simulate", "s3://b/sim.parquet", "--n", "10"],
         "fastcal simulate: error: OUT s3://b/sim.parquet: s3:// URLs are not written yet; "
         "give a local file name\n"),
    ]
    for argv, text in cases:
        assert run(argv + ["--quiet"], capsys) == (2, "", text)

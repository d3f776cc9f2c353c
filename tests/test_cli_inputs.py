"""What a CSV header says: a CSV file separated by ';' or without a header line is named
as such (not "the file has columns: 'p;y'")."""

import pytest

import fastcal
from fastcal import cli


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


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

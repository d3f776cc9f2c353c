"""tracking score reads files through fastcal.io, with fastcal's format rules: damaged array
files are one line and exit 2 (never an internal error), a CSV cut without its final newline
is noted, bytes ids are UTF-8 text, and a * anywhere in a column pattern matches."""

import io
import json
import warnings
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from fastcal.gaussian import nees
from tracking.cli import main
from tracking.score import score_file

R, T, D = 6, 3, 2
ARGS = ["--estimate", "x", "--truth", "t", "--cov", "P"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    truth = rng.normal(size=(R, T, D))
    x = truth + rng.normal(size=(R, T, D))
    P = np.broadcast_to(np.eye(D) * 1.5, (R, T, D, D)).copy()
    return truth, x, P


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def with_header(raw, old, new):
    end = raw.index(b"\n") + 1
    head = raw[10:end].replace(old.encode(), new.encode()).rstrip(b" \n")
    return raw[:10] + head + b" " * (end - 11 - len(head)) + b"\n" + raw[end:]


def long_table(truth, x, P, run=None):
    rr, kk = np.meshgrid(np.arange(R), np.arange(T), indexing="ij")
    cols = {"run": rr.ravel() if run is None else run, "step": kk.ravel()}
    cols.update({f"x_{i}": x[..., i].ravel() for i in range(D)})
    cols.update({f"t_{i}": truth[..., i].ravel() for i in range(D)})
    cols.update({f"P_{i}{j}": P[..., i, j].ravel() for i in range(D) for j in range(D)})
    return cols


def run_cli(args, capsys):
    try:
        code = main(["score", *args])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def test_damaged_array_files_exit_2_with_one_line_naming_the_file(tmp_path, data, capsys):
    truth, x, P = data
    parts = {"x": npy_bytes(x), "t": npy_bytes(truth), "P": npy_bytes(P)}
    cases = []

    def npz(name, **change):
        path = tmp_path / f"{name}.npz"
        with zipfile.ZipFile(path, "w") as z:
            for k, raw in {**parts, **change}.items():
                z.writestr(f"{k}.npy", raw)
        return path

    def npy_dir(name, **change):
        path = tmp_path / name
        path.mkdir()
        for k, raw in {**parts, **change}.items():
            (path / f"{k}.npy").write_bytes(raw)
        return path

    # a header that does not tokenize: tokenize.TokenError, an internal error (exit 1) before
    untok = with_header(parts["x"], f"({R}, {T}, {D})", f"({R}, {T}, {D} ")
    cases += [(npz("token", x=untok), "token.npz: member x.npy: not a readable NPY file"),
              (npy_dir("token_dir", x=untok), "token_dir/x.npy: not a readable NPY file")]
    # shapes consistent with each other, far larger than the file: a MemoryError before
    big = R * 10**9
    huge = {k: with_header(raw, f"({R}, ", f"({big}, ") for k, raw in parts.items()}
    cases += [(npz("huge", **huge), "huge.npz: member x.npy: member is truncated: the header promises "
                                    f"shape ({big}, {T}, {D})"),
              (npy_dir("huge_dir", **huge), "huge_dir/P.npy: file is truncated")]
    # a file or member longer than its header: scored silently before
    cases += [(npz("longer", x=parts["x"] + bytes(8)), "longer.npz: member x.npy: member is longer than its "
                                                       "header says"),
              (npy_dir("longer_dir", x=parts["x"] + bytes(8)), "longer_dir/x.npy: file is longer than its "
                                                               "header says")]
    for path, needle in cases:
        code, out, err = run_cli([str(path), *ARGS], capsys)
        assert (code, out) == (2, ""), (path, err)
        assert err.count("\n") == 1 and needle in err and "internal error" not in err, err


def test_bytes_ids_are_utf8_text_in_json_and_one_line_when_not(tmp_path, data, capsys):
    truth, x, P = data
    runs = [f"track-{r}".encode() for r in range(R) for _ in range(T)]
    pq.write_table(pa.table(long_table(truth, x, P, pa.array(runs, pa.binary()))), tmp_path / "b.parquet")
    code, out, err = run_cli([str(tmp_path / "b.parquet"), "--json"], capsys)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["run_ids"] == [f"track-{r}" for r in range(R)]
    np.testing.assert_allclose(rep["nees_per_run"], nees(truth - x, P).mean(axis=1), rtol=1e-12)
    runs[T + 1] = b"track-\xff"  # run 1's second row
    pq.write_table(pa.table(long_table(truth, x, P, pa.array(runs, pa.binary()))), tmp_path / "bad.parquet")
    code, out, err = run_cli([str(tmp_path / "bad.parquet"), "--json"], capsys)
    assert (code, out) == (2, "")
    assert err == (f"tracking score: error: {tmp_path / 'bad.parquet'}: row {T + 1}: run id b'track-\\xff' is "
                   "not UTF-8 text (invalid start byte at byte 6); expected ids that are numbers, timestamps or "
                   "UTF-8 text\n")


def test_a_csv_file_cut_without_its_final_newline_is_noted(tmp_path, data, capsys):
    truth, x, P = data
    path = tmp_path / "cut.csv"
    pcsv.write_csv(pa.table(long_table(truth, x, P)), path)
    text = path.read_bytes()
    lines = text.split(b"\n")
    path.write_bytes(b"\n".join(lines[:1 + 2 * T]))  # the first two runs; the copy stopped there
    with pytest.warns(UserWarning, match=r"cut.csv: does not end in a newline, so its last line may be cut"):
        rep = score_file(path)
    assert rep["runs"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)  # as outside the tests: the CLI prints a note
        code, out, err = run_cli([str(path)], capsys)
    assert code == 0 and "2 runs x 3 steps" in out
    assert err == (f"tracking score: note: {path}: does not end in a newline, so its last line may be cut "
                   "(an interrupted copy or write?); read as it is\n")


def test_a_star_anywhere_in_a_pattern_matches(tmp_path, data):
    truth, x, P = data
    cols = long_table(truth, x, P)
    named = {(f"{k[2:]}_est" if k.startswith("x_") else k): v for k, v in cols.items()}
    pq.write_table(pa.table(named), tmp_path / "suffix.parquet")
    rep = score_file(tmp_path / "suffix.parquet", estimate="*_est")
    assert rep["columns"]["estimate"] == ["0_est", "1_est"]
    np.testing.assert_allclose(rep["anees"], nees(truth - x, P).mean(axis=0), rtol=1e-12)
    # arrays: one filter per array, named by what the * stands for
    np.savez(tmp_path / "a.npz", t=truth, ekf_x=x, ekf_P=P, ukf_x=x + 0.1, ukf_P=P)
    rep = score_file(tmp_path / "a.npz", estimate="*_x", cov="*_P", truth="t")
    assert sorted(rep["filters"]) == ["ekf", "ukf"]
    np.testing.assert_allclose(rep["filters"]["ukf"]["anees"], nees(truth - x - 0.1, P).mean(axis=0),
                               rtol=1e-12)
    with pytest.raises(ValueError, match=r"--estimate '\*_y' matches no column; the file has 'run'"):
        score_file(tmp_path / "suffix.parquet", estimate="*_y")

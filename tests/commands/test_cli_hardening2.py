"""The command line, round 2 of hardening (issue 23: outputs, JSON, damaged files,
signals, Dask logs, messages, help and warnings)."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal import cli
from fastcal.commands import on_dask
from fastcal.reports._json import json_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    assert json_text({"a": np.float64("-inf"), "b": [np.nan, np.int64(3)]}) == \
        '{"a": "-inf", "b": [null, 3]}\n'


# -- item 16: messages that point the right way ---------------------------------------------

def test_cuda_without_a_gpu_is_one_value_error_line(pred, capsys):
    from fastcal import cuda

    if cuda.is_available():
        pytest.skip("a GPU (or the simulator) is here")
    with pytest.raises(ValueError, match="no CUDA GPU or driver was found") as info:
        fastcal.calibration_report(np.array([0, 1]), np.array([0.2, 0.8]), device="cuda")
    assert "\n" not in str(info.value)
    code, out, err = run(score(pred, "--device", "cuda"), capsys)
    assert code == 2 and one_line(err) and "no CUDA GPU or driver was found" in err, err
    assert "optional dependency" not in err and "--device cpu" in err


def test_hints_for_logits_percent_and_text_labels(tmp_path, capsys):
    y, p = fastcal.simulate(50, seed=1)
    z = np.log(p / (1 - p))
    with pytest.raises(ValueError, match=r"logits\? pass logits=True"):
        fastcal.ece(y, z)
    with pytest.raises(ValueError, match=r"percentages\? divide them by 100"):
        fastcal.ece(y, 100 * p)
    with pytest.raises(ValueError, match="map text labels such as 'yes'/'no' to 0/1"):
        fastcal.ece(np.where(y == 1, "yes", "no"), p)
    stray = p.copy()
    stray[7] = 1.5  # one bad value among probabilities: no hint of another scale
    with pytest.raises(ValueError, match=r"outside \[0, 1\] or infinite \(first at index 7\)") as info:
        fastcal.ece(y, stray)
    assert "percentages" not in str(info.value) and "logits" not in str(info.value)
    f = tmp_path / "t.parquet"
    text = pa.array(np.where(y == 1, "yes", "no"), pa.large_string())
    pq.write_table(pa.table({"p": p, "z": z, "pct": 100 * p, "y": text,
                             "y01": y.astype(np.int64)}), f)
    for col, label, hint in (("z", "y01", "logits? pass --logits"),
                             ("pct", "y01", "percentages? divide them by 100"),
                             ("p", "y", "text labels such as 'yes'/'no' must be written as 0/1")):
        code, out, err = run(["score", str(f), "--prob", col, "--label", label, "--quiet"],
                             capsys)
        assert code == 2 and one_line(err) and hint in err, err
    assert "has type large_string" in err


def test_one_bin_bound_for_api_and_cli(pred, capsys):
    from fastcal.inputs.validation import MAX_BINS

    assert cli.MAX_BINS == MAX_BINS
    y, p = fastcal.simulate(20, seed=1)
    for n in (MAX_BINS + 1, 10**7, 2**63):
        with pytest.raises(ValueError, match=f"n_bins must be <= {MAX_BINS:,}"):
            fastcal.calibration_report(y, p, n_bins=n)
    code, out, err = run(score(pred, "--bins", str(2**63)), capsys)
    assert code == 2 and one_line(err) and f"--bins must be <= {MAX_BINS:,}" in err, err
    assert fastcal.calibration_report(y, p, n_bins=MAX_BINS).n_bins == MAX_BINS


def test_a_masked_array_is_refused_unless_nothing_is_masked():
    y = np.array([0, 1, 1, 0])
    p = np.ma.masked_array([0.2, 0.8, 0.6, 0.1], mask=[0, 0, 1, 0])
    with pytest.raises(ValueError, match="y_prob is a masked array with 1 masked values "
                                         r"\(first at flat index 2\)"):
        fastcal.ece(y, p)
    assert fastcal.ece(y, np.ma.masked_array(p.data)) == fastcal.ece(y, p.data)


def test_full_disk_on_stdout_names_standard_output(pred, capsys, monkeypatch):
    full = open("/dev/full", "w")
    monkeypatch.setattr(sys, "stdout", full)
    code = cli.main(score(pred, "--json"))
    monkeypatch.undo()
    try:
        full.close()
    except OSError:  # the unwritten text is flushed again on close
        pass
    err = capsys.readouterr().err
    assert code == 2 and one_line(err) and "standard output: could not write" in err, err


def test_simulate_into_a_read_only_directory_names_it(tmp_path, capsys):
    import tempfile

    folder = tempfile.mkdtemp(prefix="fastcal-ro-")  # in /tmp, so another user can reach it
    os.chmod(folder, 0o555)
    root = os.geteuid() == 0
    try:
        if root:  # root writes anywhere: act as nobody for the call
            os.seteuid(65534)
        try:
            code, out, err = run(["simulate", os.path.join(folder, "s.parquet"), "--n", "10",
                                  "--quiet"], capsys)
        finally:
            if root:
                os.seteuid(0)
        assert code == 2 and one_line(err), err
        assert f"cannot create a file in the directory {folder} (Permission denied)" in err
        assert os.listdir(folder) == []
    finally:
        os.rmdir(folder)


# -- item 19: help, progress, summary, warnings ------------------------------------------------

def test_every_option_has_help_and_no_default_twice():
    ap = cli._parser()
    subs = next(a for a in ap._actions if a.dest == "command").choices
    for name, sp in subs.items():
        for action in sp._actions:
            assert action.help, f"{name} {action.option_strings} has no help"
        text = sp.format_help()
        assert text.count("(default") <= len([a for a in sp._actions if a.help
                                              and "default" in a.help]), name


def test_progress_shows_on_a_terminal_with_json_and_output(pred, tmp_path, monkeypatch):
    master, slave = os.openpty()
    tty = os.fdopen(slave, "w")
    monkeypatch.setattr(sys, "stderr", tty)
    out = tmp_path / "r.json"
    code = cli.main(["score", pred, "--prob", "p", "--label", "y", "--strategy", "quantile",
                     "--json", "--output", str(out)])
    tty.flush()
    monkeypatch.undo()
    os.set_blocking(master, False)
    try:
        seen = os.read(master, 65536).decode()
    except BlockingIOError:  # nothing was drawn
        seen = ""
    tty.close()
    os.close(master)
    assert code == 0 and json.loads(out.read_text())["n"] == 600
    assert "pred.parquet" in seen and "rows" in seen, seen


def test_simulate_says_what_it_wrote(tmp_path, capsys):
    out = tmp_path / "s.csv"
    code, so, err = run(["simulate", str(out), "--n", "1000", "--seed", "7"], capsys)
    assert code == 0 and so == ""
    assert err.startswith(f"wrote 1,000 rows (p float64, y uint8; sigma 0, seed 7) to {out} "
                          "(csv, ") and one_line(err), err


def test_huge_logits_in_equal_mass_bins_warn_nothing():
    z = np.array([800.0, -800.0, 1.0, -2.0, 3.0, 750.0])
    y = np.array([1, 0, 1, 0, 1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarnings too
        rep = fastcal.calibration_report(y, z, logits=True, strategy="quantile", n_bins=2,
                                         ace=True)
    assert np.isfinite(rep.ece)


# -- item 7: signals ------------------------------------------------------------------------

READY = ("import sys, fastcal.cli as c; sys.stderr.write('ready\\n'); sys.stderr.flush(); "
         "sys.argv[0] = 'fastcal'; sys.exit(c.main())")


def test_ctrl_c_at_any_stage_is_one_line(pred):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("FASTCAL_DEBUG", None)
    # from just after the module is imported (the few bytecodes before main's own
    # handling are the interpreter's) to the end of the run
    for delay in (0.05, 0.15, 0.4, 0.8):
        proc = subprocess.Popen([sys.executable, "-c", READY, *score(pred, "--strategy",
                                                                     "quantile", "--ace")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            assert proc.stderr.readline() == "ready\n"
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode == 0 and err == "":  # finished before the signal came
            continue
        assert proc.returncode == 130 and one_line(err) and "interrupted" in err, (delay, err)


def test_simulate_removes_what_a_killed_run_left(tmp_path, capsys):
    out = tmp_path / "big.parquet"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "fastcal.cli", "simulate", str(out),
                             "--n", "1e9", "--chunk-rows", "65536", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        t_end = time.monotonic() + 60
        while not os.listdir(tmp_path) and time.monotonic() < t_end:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = os.listdir(tmp_path)
    assert len(left) == 1 and left[0].startswith(f".big.parquet.{proc.pid}."), left
    live = tmp_path / f".big.parquet.{os.getpid()}.abc.tmp.parquet"  # a live writer's: kept
    live.write_bytes(b"x")
    assert run(["simulate", str(out), "--n", "10", "--quiet"], capsys)[0] == 0
    assert sorted(os.listdir(tmp_path)) == sorted(["big.parquet", live.name])


# -- item 6: damage a format rule can catch -------------------------------------------------

def test_npy_longer_than_its_header_is_refused(tmp_path, capsys):
    y, p = fastcal.simulate(100, seed=3)
    d = tmp_path / "cols"
    d.mkdir()
    np.save(d / "p.npy", p)
    np.save(d / "y.npy", y)
    size = os.path.getsize(d / "y.npy")
    with open(d / "y.npy", "ab") as fh:
        fh.write(y[:10].tobytes())  # a range written twice
    code, out, err = run(score(str(d)), capsys)
    assert code == 2 and one_line(err), err
    assert ("y.npy: file is longer than its header says" in err and f"expected a file of "
            f"{size} bytes; the file has {size + 10}" in err), err


def test_csv_without_a_final_newline_is_flagged(tmp_path, capsys):
    f = tmp_path / "cut.csv"
    f.write_text("y,p\n0,0.2\n1,0.7\n1,0.7")  # cut inside the last number (0.73)
    with pytest.warns(UserWarning, match="does not end in a newline, so its last line may be "
                                         "cut"):
        fastcal.score_file(str(f), prob="p", label="y")
    code, out, err = run(score(str(f)), capsys)
    assert code == 0 and one_line(err) and "note:" in err and "cut.csv" in err, err
    f.write_text("y,p\n0,0.2\n1,0.73\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fastcal.score_file(str(f), prob="p", label="y")


# -- item 4: --plot has a bounded cost ------------------------------------------------------

def test_plot_above_the_bin_bound_is_refused_before_scoring(tmp_path, capsys):
    missing = str(tmp_path / "none.parquet")  # never read: the refusal comes first
    for argv in (score(missing, "--bins", "300000", "--plot", str(tmp_path / "r.png")),
                 recal(missing, "--bins", "1001", "--plot", str(tmp_path / "r.png"))):
        code, out, err = run(argv, capsys)
        assert code == 2 and one_line(err), err
        assert f"draws one bar per bin, at most {cli.MAX_PLOT_BINS:,}" in err, err


# -- item 8: Dask's own logs stay quiet during a run ----------------------------------------

def test_every_distributed_logger_is_quiet_during_a_run_and_restored():
    import logging

    pytest.importorskip("distributed")
    client_log = logging.getLogger("distributed.client")
    before = client_log.level
    assert client_log.isEnabledFor(logging.ERROR)  # distributed's config: its own level
    old = on_dask._quiet_dask(False)
    try:
        for name in ("distributed.client", "distributed.scheduler", "distributed", "tornado"):
            assert not logging.getLogger(name).isEnabledFor(logging.CRITICAL), name
    finally:
        on_dask._restore_logs(old)
    assert client_log.level == before and client_log.isEnabledFor(logging.ERROR)
    assert on_dask._quiet_dask(True) == {}

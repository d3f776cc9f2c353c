"""The command line under faults (issue 12): all outputs or none, one line and exit 2 on
every failure, cleanup on signals, special output files, optional dependencies, messages
that name the option the user typed."""

import errno
import gzip
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal import _atomic, cli, writers
from fastcal.commands import on_dask
from fastcal.reports.report import CalibrationReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAS_MPL = True
try:
    import matplotlib  # noqa: F401
except ImportError:  # pragma: no cover - the test extra installs it
    HAS_MPL = False
needs_mpl = pytest.mark.skipif(not HAS_MPL, reason="matplotlib not installed")


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def pred(tmp_path):
    y, p = fastcal.simulate(2_000, sigma=0.5, seed=4)
    d = tmp_path / "in"
    d.mkdir()
    f = d / "pred.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, row_group_size=500)
    return str(f)


def score(path, *extra):
    return ["score", path, "--prob", "p", "--label", "y", *extra]


def _read(path):
    with open(path, "rb") as fh:  # closed: warnings are errors, ResourceWarning too
        return fh.read()


def one_line(err):
    return err.count("\n") == 1 and "Traceback" not in err


# -- defect 3: all outputs of a run, or none ------------------------------------------

@needs_mpl
def test_output_that_is_a_directory_fails_before_the_plot_is_touched(pred, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    png = tmp_path / "old.png"
    png.write_bytes(b"old plot")
    code, stdout, err = run(score(pred, "--plot", str(png), "--output", str(out)), capsys)
    assert code == 2 and one_line(err) and "--output" in err and "is a directory" in err
    assert png.read_bytes() == b"old plot" and stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["in", "old.png", "out"]


@needs_mpl
def test_disk_full_on_the_second_output_changes_neither(pred, tmp_path, capsys, monkeypatch):
    png = tmp_path / "r.png"
    rep = tmp_path / "r.json"
    png.write_bytes(b"old plot")
    rep.write_text("old report")
    calls = []
    real_fsync = os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    code, stdout, err = run(score(pred, "--json", "--plot", str(png), "--output", str(rep)),
                            capsys)
    assert code == 2 and one_line(err) and stdout == ""
    assert "--output" in err and "--plot" in err and "No space left" in err
    assert ".tmp" not in err  # names what the user typed, not a temporary file
    assert png.read_bytes() == b"old plot" and rep.read_text() == "old report"
    assert sorted(os.listdir(tmp_path)) == ["in", "r.json", "r.png"]
    assert not _atomic.LIVE


def test_commit_interrupted_between_renames_puts_the_first_back(tmp_path, monkeypatch):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old a")
    b.write_text("old b")
    real = _atomic.rename
    seen = []

    def rename(tmp, path):
        seen.append(path)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(tmp, path)

    monkeypatch.setattr(_atomic, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        _atomic.commit([(str(a), b"new a"), (str(b), b"new b")])
    assert a.read_text() == "old a" and b.read_text() == "old b"
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"] and not _atomic.LIVE


# -- defect 5: one line, exit 2, sizes checked before allocating -----------------------

@pytest.mark.parametrize("argv, text", [
    (["--bins", "1e12"], "--bins must be <= 1,000,000; got 1,000,000,000,000"),
    (["--bins", "0"], "--bins must be >= 1"),
    (["--chunk-rows", "1e12"], "--chunk-rows must be <= "),
    (["--workers", "100000"], "--workers must be <= "),
    (["--eps", "0.7"], "--eps must be in [0, 0.5); got 0.7"),
    (["--eps", "-0.1"], "--eps must be in [0, 0.5); got -0.1"),
])
def test_sizes_are_checked_with_the_option_name(pred, argv, text, capsys, monkeypatch):
    def never(*a, **k):
        raise AssertionError("scored despite a bad size")

    monkeypatch.setattr("fastcal.files.score_file", never)
    monkeypatch.setattr("fastcal.distributed.score_dataset", never)
    code, _, err = run(score(pred, *argv), capsys)
    assert code == 2 and one_line(err) and text in err, err


def test_simulate_sizes_and_disk_are_checked(tmp_path, capsys, monkeypatch):
    code, _, err = run(["simulate", str(tmp_path / "x.parquet"), "--n", "1e15"], capsys)
    assert code == 2 and one_line(err) and "--n must be <= " in err
    code, _, err = run(["simulate", str(tmp_path / "x.parquet"), "--n", "10",
                        "--chunk-rows", "0"], capsys)
    assert code == 2 and "--chunk-rows must be >= 1" in err
    monkeypatch.setattr(writers.shutil, "disk_usage", lambda p: type("U", (), {"free": 1000})())
    code, _, err = run(["simulate", str(tmp_path / "x.parquet"), "--n", "1e6"], capsys)
    assert code == 2 and one_line(err) and "GB are free" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("exc, code, text", [
    (MemoryError(), 2, "not enough memory: an allocation failed; lower --chunk-rows or --bins"),
    (OSError(errno.EACCES, "Permission denied", "/data/p.parquet"), 2,
     "/data/p.parquet: Permission denied"),
    (RuntimeError("something odd\nsecond line"), 1, "internal error: RuntimeError: something odd"),
])
def test_any_exception_is_one_line(pred, exc, code, text, capsys, monkeypatch):
    def boom(*a, **k):
        raise exc

    monkeypatch.setattr("fastcal.files.score_file", boom)
    got, out, err = run(score(pred), capsys)
    assert got == code and out == "" and one_line(err) and text in err, err
    monkeypatch.setenv("FASTCAL_DEBUG", "1")
    with pytest.raises(type(exc)):
        cli.main(score(pred))


def test_dask_errors_are_one_line_exit_2():
    distributed = pytest.importorskip("distributed")
    from distributed.scheduler import KilledWorker

    code, text = cli._describe_error(KilledWorker("fill-3", type("W", (), {"address": "tcp://127.0.0.1:4000"})(), 3))
    assert code == 2 and "worker died" in text and "--chunk-rows" in text
    assert "tcp://127.0.0.1:4000" in text and "\n" not in text
    code, text = cli._describe_error(distributed.comm.CommClosedError("in <TCP>: Stream closed"))
    assert code == 2 and text.startswith("Dask: CommClosedError")


def test_no_traceback_from_the_installed_command(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("FASTCAL_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "fastcal.cli", "score", str(tmp_path / "x.pq"),
                        "--prob", "p", "--label", "y", "--bins", "1e12"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and one_line(r.stderr) and "--bins must be <=" in r.stderr


# -- defect 7: signals clean up like errors ----------------------------------------------

def wait_for(predicate, limit=60.0):
    t_end = time.monotonic() + limit
    while time.monotonic() < t_end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_during_simulate_leaves_no_temporary_file(tmp_path, sig, code):
    out = tmp_path / "big.parquet"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "fastcal.cli", "simulate", str(out),
                             "--n", "1e9", "--chunk-rows", "65536", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        started = wait_for(lambda: any(f.startswith(".big.parquet.")
                                       for f in os.listdir(tmp_path)))
        assert started, "no temporary file appeared"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert one_line(err) and "temporary files removed" in err
    assert os.listdir(tmp_path) == []


def test_sigterm_during_score_keeps_old_outputs(pred, tmp_path):
    pytest.importorskip("distributed")
    import socket

    srv = socket.socket()  # a scheduler that accepts and never answers: score waits there
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(30)
    conns = []
    t = threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True)
    t.start()
    rep, png = tmp_path / "r.txt", tmp_path / "r.png"
    rep.write_text("old")
    png.write_bytes(b"old")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastcal.cli", *score(pred, "--scheduler",
                                                     f"tcp://127.0.0.1:{srv.getsockname()[1]}",
                                                     "--timeout", "60", "--output", str(rep),
                                                     "--plot", str(png))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert wait_for(lambda: conns), "never connected"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in conns:
            c[0].close()
        srv.close()
    assert proc.returncode == 143 and "stopped by SIGTERM" in err and one_line(err)
    assert rep.read_text() == "old" and png.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["in", "r.png", "r.txt"]


# -- defect 9: special files, modes, inputs ---------------------------------------------

def test_output_writes_through_a_fifo(pred, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(_read(fifo)), daemon=True)
    reader.start()
    code, out, err = run(score(pred, "--json", "--output", str(fifo)), capsys)
    reader.join(30)
    assert code == 0 and out == "" and err == ""
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["n"] == 2_000


def private_null(tmp_path):
    """A character device node of our own (the null device), so that a broken build can
    only replace this node, never the machine's /dev/null."""
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (OSError, AttributeError):
        pytest.skip("cannot create a device node here (needs root)")
    return node


def test_output_to_a_device_dash_and_a_symlink(pred, tmp_path, capsys):
    node = private_null(tmp_path)
    code, out, _ = run(score(pred, "--json", "--output", str(node)), capsys)
    assert code == 0 and out == "" and stat.S_ISCHR(os.stat(node).st_mode)
    code, out, _ = run(score(pred, "--json", "--output", "-"), capsys)
    assert code == 0 and json.loads(out)["n"] == 2_000
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    code, _, _ = run(score(pred, "--json", "--output", str(link)), capsys)
    assert code == 0 and link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["n"] == 2_000


def test_simulate_writes_through_a_device_and_keeps_a_mode(tmp_path, capsys):
    node = private_null(tmp_path)
    assert run(["simulate", str(node), "--n", "1000", "--format", "parquet"], capsys)[0] == 0
    assert stat.S_ISCHR(os.stat(node).st_mode)
    f = tmp_path / "s.parquet"
    f.write_text("old")
    f.chmod(0o640)
    assert run(["simulate", str(f), "--n", "10"], capsys)[0] == 0
    assert stat.S_IMODE(f.stat().st_mode) == 0o640 and pq.read_table(f).num_rows == 10
    assert sorted(os.listdir(tmp_path)) == ["null", "s.parquet"]


def test_existing_output_keeps_its_mode(pred, tmp_path, capsys):
    out = tmp_path / "secret.txt"
    out.write_text("old")
    out.chmod(0o600)
    old = os.umask(0o022)
    try:
        code, _, _ = run(score(pred, "--output", str(out)), capsys)
    finally:
        os.umask(old)
    assert code == 0 and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "weighted sum" in out.read_text()


def test_output_never_overwrites_an_input(pred, tmp_path, capsys):
    before = _read(pred)
    alias = tmp_path / "alias.parquet"
    alias.symlink_to(pred)
    inside = os.path.join(os.path.dirname(pred), "report.txt")
    for argv in (score(pred, "--output", pred), score(pred, "--plot", str(alias)),
                 score(os.path.dirname(pred), "--output", inside)):
        code, out, err = run(argv, capsys)
        assert code == 2 and one_line(err) and "refusing to overwrite an input" in err, err
    assert _read(pred) == before and not os.path.exists(inside)


# -- defect 14: optional dependencies checked before scoring ---------------------------

def test_plot_without_matplotlib_fails_before_scoring(pred, tmp_path, capsys, monkeypatch):
    import fastcal.reports.plot

    def missing():
        raise ImportError("plotting needs matplotlib")

    def never(*a, **k):
        raise AssertionError("scored before checking --plot")

    monkeypatch.setattr(fastcal.reports.plot, "_matplotlib", missing)
    monkeypatch.setattr("fastcal.files.score_file", never)
    code, out, err = run(score(pred, "--plot", str(tmp_path / "r.png")), capsys)
    assert code == 2 and one_line(err) and out == ""
    assert "--plot needs matplotlib" in err and "pip install -e '.[plot]'" in err


@needs_mpl
def test_plot_type_is_checked_before_scoring(pred, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("fastcal.files.score_file", lambda *a, **k: 1 / 0)
    code, _, err = run(score(pred, "--plot", str(tmp_path / "r.xyz")), capsys)
    assert code == 2 and one_line(err) and "unknown image type '.xyz'" in err and "png" in err


@needs_mpl
def test_report_is_printed_when_the_plot_fails(pred, tmp_path, capsys, monkeypatch):
    def broken(self, *a, **k):
        raise RuntimeError("font cache is corrupt")

    monkeypatch.setattr(CalibrationReport, "plot", broken)
    target = tmp_path / "r.json"
    code, out, err = run(score(pred, "--json", "--plot", str(tmp_path / "r.png"),
                               "--output", str(target)), capsys)
    assert code == 2 and one_line(err) and "could not draw" in err and "printed to stdout" in err
    assert json.loads(out)["n"] == 2_000
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_workers_without_dask_gives_the_friendly_message(pred, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, _, err = run(score(pred, "--workers", "2"), capsys)
    assert code == 2 and one_line(err)
    assert "--workers needs Dask" in err and "pip install -e '.[dask]'" in err


# -- defect 16: certain and wrong rows are counted by fastcal score ----------------------

def test_score_counts_certain_and_wrong_rows(tmp_path, capsys):
    y, p = fastcal.simulate(1_000, seed=2)
    p[[17, 600, 900]] = [0.0, 1.0, 1.0]
    y[[17, 600, 900]] = [1, 0, 1]  # row 900 is certain and right
    f = tmp_path / "cw.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, row_group_size=300)
    code, out, _ = run(score(str(f), "--chunk-rows", "256"), capsys)
    assert code == 0 and "2 rows are certain and wrong (first at row 17) in bins 1, 10" in out
    assert "--eps" in out
    code, out, _ = run(score(str(f), "--json"), capsys)
    cw = json.loads(out)["certain_wrong"]
    assert cw["n"] == 2 and cw["first_row"] == 17 and cw["bins"] == [1, 10]
    code, out, _ = run(score(str(f), "--json", "--eps", "1e-6"), capsys)
    d = json.loads(out)
    assert "certain_wrong" not in d and isinstance(d["ecd"], float)


# -- defect 17: formats and messages -----------------------------------------------------

def test_csv_gz_is_detected_and_written(tmp_path, capsys):
    y, p = fastcal.simulate(500, seed=3)
    f = tmp_path / "s.csv.gz"
    with gzip.open(f, "wt") as fh:
        fh.write("p,y\n" + "".join(f"{a!r},{b}\n" for a, b in zip(p.tolist(), y.tolist())))
    code, out, err = run(score(str(f), "--json"), capsys)
    assert code == 0, err
    assert json.loads(out)["ece"] == pytest.approx(fastcal.ece(y, p), rel=1e-12)
    sim = tmp_path / "sim.csv.gz"
    assert run(["simulate", str(sim), "--n", "300", "--seed", "5"], capsys)[0] == 0
    with gzip.open(sim) as fh:
        head = fh.read(4)
    assert head == b'"p",' or head[:3] == b"p,y"
    code, out, _ = run(score(str(sim), "--json"), capsys)
    y5, p5 = fastcal.simulate(300, seed=5)
    assert code == 0 and json.loads(out)["ece"] == pytest.approx(fastcal.ece(y5, p5), rel=1e-12)


def test_simulate_never_guesses_parquet(tmp_path, capsys):
    for name in ("x.gz", "x.dat", "noext"):
        code, _, err = run(["simulate", str(tmp_path / name), "--n", "10"], capsys)
        assert code == 2 and one_line(err) and "pass --format" in err, err
    assert os.listdir(tmp_path) == []
    code, _, err = run(["simulate", str(tmp_path / "x.gz"), "--n", "10", "--format", "parquet"],
                       capsys)
    assert code == 2 and "gzip-compressed CSV" in err
    assert run(["simulate", str(tmp_path / "x.dat"), "--n", "10", "--format", "parquet"],
               capsys)[0] == 0
    assert pq.read_table(tmp_path / "x.dat").num_rows == 10


def test_messages_name_the_option_not_the_keyword(tmp_path, capsys):
    f = tmp_path / "preds.xyz"
    f.write_text("p,y\n0.5,1\n")
    code, _, err = run(score(str(f)), capsys)
    assert code == 2 and "pass --format" in err and "format=" not in err
    assert cli._cli_words("pass nan_policy='omit' to drop them") == "pass --nan-policy omit to drop them"
    assert cli._cli_words("chunk_rows must be a positive integer") == \
        "--chunk-rows must be a positive integer"
    # a file's message names both; the command line keeps the option alone
    assert cli._cli_words("f.csv: use nan_policy='omit' (--nan-policy omit) to drop them") == \
        "f.csv: use --nan-policy omit to drop them"
    assert cli._cli_words("pass renormalize=True to divide") == "pass --renormalize to divide"


# -- defect 11: Dask runs are quiet and limited in time ---------------------------------

@pytest.fixture(scope="module")
def paused_cluster():
    """One worker that pauses at once (pause threshold 1% of 2 GB), for the time limit."""
    distributed = pytest.importorskip("distributed")
    import logging

    import dask

    cfg = {"distributed.worker.memory.pause": 0.01, "distributed.worker.memory.terminate": False,
           "distributed.worker.memory.spill": False, "distributed.worker.memory.target": False,
           "distributed.worker.memory.monitor-interval": "50ms"}
    with dask.config.set(cfg):
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                           memory_limit="2GB", silence_logs=logging.CRITICAL)
    try:
        yield cluster
    finally:
        cluster.close()


def test_time_limit_names_the_paused_worker(paused_cluster):
    from distributed import Client

    client = Client(paused_cluster, set_as_default=False)
    try:
        assert wait_for(lambda: any(w["status"] == "paused" for w in
                                    client.scheduler_info()["workers"].values()), 30)
        t0 = time.monotonic()
        with on_dask._Watchdog(client, 1.0) as dog:
            with pytest.raises(Exception):  # noqa: B017 - whichever error Dask gives for a lost task
                client.gather(client.submit(sum, [1, 2]))
        assert time.monotonic() - t0 < 20
        worker = next(iter(paused_cluster.scheduler_info["workers"]))
        assert dog.message.startswith("the Dask run did not finish within --time-limit 1 s")
        assert f"{worker} (paused" in dog.message
    finally:
        client.close()


def test_failed_dask_run_prints_one_line_only(tmp_path, capfd):
    pytest.importorskip("distributed")
    y, p = fastcal.simulate(3_000, seed=9)
    p[2_500] = 1.5
    f = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), f, row_group_size=1_000)
    code = cli.main(score(str(f), "--workers", "1", "--chunk-rows", "1000"))
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and "row 2500" in err, err


def test_warnings_are_one_note_line_and_verdicts_cap_their_bin_lists(tmp_path, capsys):
    y, p = fastcal.simulate(2_000, seed=4)
    d = tmp_path / "ds"
    d.mkdir()
    pq.write_table(pa.table({"p": p, "y": y}), d / "a.parquet")
    (d / "notes.txt").write_text("not data")
    code, _, err = run(score(str(d)), capsys)
    assert code == 0
    assert err.strip().splitlines() == [
        f"fastcal score: note: {d}: ignored 1 file that is not parquet data: notes.txt"]
    from fastcal.reports.stats import MAX_RANGES, _bin_ranges

    every_other = list(range(1, 4 * MAX_RANGES, 2))
    text = _bin_ranges(every_other)
    assert text.count(",") == MAX_RANGES - 1 and text.endswith(f"and {MAX_RANGES} more bins")
    assert _bin_ranges([1, 2, 3, 5]) == "1-3, 5"

"""Signals and the commands' start-up: Ctrl-C at any moment is one line and status 130,
SIGTERM during the start-up ends the process at once, and no signal is lost.

The commands run as installed: the console scripts named in pyproject.toml, as pip
writes them. Each child says "ready" the moment its entry module has put its
handler in place (``fastcal.process.start``), or when the command's heavy imports
begin (``load_blas``); the signal comes a delay after that. The few milliseconds
before the handler (the interpreter's own start-up and ``import fastcal``) belong
to Python.
"""

import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
import tomllib
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastcal import cli, process
from tracking import cli as tracking_cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]

# What pip's console script does with "module:function", after a hook that says when
# fastcal.process.<hook> is called (after start: once its handler is in place).
CHILD = """\
import os, sys
from fastcal import process
real = process.{hook}
def called(*args):
    if {hook!r} == "start":  # ready once the handler is in place
        real(*args)
        os.write(2, b"ready\\n")
    else:  # ready when the call begins
        os.write(2, b"ready\\n")
        real(*args)
process.{hook} = called
from {module} import {function}
sys.exit({function}())
"""

DELAYS = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8)


@pytest.fixture(scope="module")
def pred(tmp_path_factory):
    rng = np.random.default_rng(0)
    f = tmp_path_factory.mktemp("signals") / "pred.parquet"
    pq.write_table(pa.table({"p": rng.random(500), "y": rng.integers(0, 2, 500)}), f)
    return str(f)


def _child(prog, argv, hook):
    module, function = SCRIPTS[prog].split(":")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("FASTCAL_DEBUG", None)
    env.pop("TRACKING_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD.format(module=module, function=function, hook=hook), *argv],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def _signalled(runs, sig, hook):
    """Start every (prog, argv, delay) run at once; send ``sig`` to each its delay after
    it is ready (``hook`` called). Returns (delay, prog, returncode, stderr) per run."""
    results = []

    def one(prog, argv, delay):
        proc = _child(prog, argv, hook)
        try:
            ready = proc.stderr.readline()
            if ready == "ready\n":
                threading.Event().wait(delay)
                proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
            results.append((delay, prog, proc.returncode,
                            err if ready == "ready\n" else ready + err))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    threads = [threading.Thread(target=one, args=run) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results)


def test_the_console_scripts_are_the_light_entry_modules():
    assert SCRIPTS == {"fastcal": "fastcal.__main__:main", "tracking": "tracking.__main__:main"}
    code = ("import sys, fastcal, tracking; "
            "print(sorted(m for m in ('numpy', 'numba', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.stdout == "[]\n", out.stderr


def test_ctrl_c_in_the_start_up_is_one_line(pred):
    runs = [("fastcal", ["score", pred, "--prob", "p", "--label", "y", "--quiet"], d)
            for d in DELAYS]
    runs += [("tracking", ["compare", "--runs", "4", "--steps", "3"], d) for d in DELAYS]
    for delay, prog, code, err in _signalled(runs, signal.SIGINT, "start"):
        if code == 0 and err == "" and delay >= 0.4:
            continue  # finished before the signal came
        assert code == 130, (prog, delay, code, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (prog, delay, err)
        assert err.startswith(prog) and "interrupted" in err, (prog, delay, err)


def test_sigterm_in_the_start_up_ends_the_process_at_once(pred):
    # while the command's libraries load (after its options are parsed): the default
    # action, which a library's start-up code stuck in C cannot hold back
    runs = [("fastcal", ["score", pred, "--prob", "p", "--label", "y", "--quiet"], d)
            for d in (0.02, 0.1)]
    runs += [("tracking", ["compare", "--runs", "4", "--steps", "3"], d) for d in (0.02, 0.1)]
    for delay, prog, code, err in _signalled(runs, signal.SIGTERM, "load_blas"):
        if (prog, delay) == ("fastcal", 0.1) and code in (0, 143):
            # fastcal score's imports can be over in 0.1 s (its report's kernels load
            # without Numba): the run's own handler took the signal, as it must then, or
            # the run of 500 rows was over before it came
            assert err == ("" if code == 0 else "fastcal score: stopped by SIGTERM; temporary files removed\n")
            continue
        assert (code, err) == (-signal.SIGTERM, ""), (prog, delay)


# -- a signal whose exception Python drops ----------------------------------------------

def _signal_in_a_weakref_callback(sig):
    """A run in which ``sig`` comes while Python runs a weakref callback (as when an
    import's module lock is freed): its handler's exception is dropped there."""
    class Obj:
        pass

    def run(*args):
        obj = Obj()
        ref = weakref.ref(obj, lambda r: signal.raise_signal(sig))  # noqa: F841
        del obj  # the callback runs here, and the signal's handler in it
        return 0

    return run


@pytest.mark.parametrize("sig, code, text", [
    (signal.SIGINT, 130, "fastcal warmup: interrupted; temporary files removed\n"),
    (signal.SIGTERM, 143, "fastcal warmup: stopped by SIGTERM; temporary files removed\n"),
])
def test_a_signal_raised_where_python_drops_it_still_stops_the_run(sig, code, text,
                                                                   monkeypatch, capsys):
    import fastcal.commands.warmup as warmup

    monkeypatch.setattr(warmup, "run", _signal_in_a_weakref_callback(sig))
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    assert cli.main(["warmup"]) == code
    assert capsys.readouterr().err == text
    assert {s: signal.getsignal(s) for s in before} == before


def test_ctrl_c_dropped_inside_the_commands_imports_still_stops_the_run(monkeypatch, capsys):
    # main() called from Python (Python's own Ctrl-C handler, no start-up's): a Ctrl-C that
    # comes while an import frees its module lock raises inside a weakref callback, where
    # Python drops it; the run's handler, in place before the imports, sends it again
    import time

    import fastcal.commands.warmup as warmup

    monkeypatch.setattr(warmup, "run", lambda args: 0)
    real = cli._command

    def importing(name):
        _signal_in_a_weakref_callback(signal.SIGINT)()
        time.sleep(0.5)  # the rest of the imports: the signal comes again in them
        return real(name)

    monkeypatch.setattr(cli, "_command", importing)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert cli.main(["warmup"]) == 130
    assert capsys.readouterr().err == "fastcal warmup: interrupted; temporary files removed\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_tracking_loses_no_signal_either(monkeypatch, capsys):
    add, _ = tracking_cli.COMMANDS["compare"]
    monkeypatch.setitem(tracking_cli.COMMANDS, "compare", (add, _signal_in_a_weakref_callback(signal.SIGINT)))
    assert tracking_cli.main(["compare"]) == 130
    assert capsys.readouterr().err == "tracking compare: interrupted; temporary files removed\n"


def test_a_signal_ignored_at_the_start_stays_ignored(monkeypatch, capsys):
    # nohup: SIGHUP ignored; the run must not make a hang-up stop it
    import fastcal.commands.warmup as warmup

    monkeypatch.setattr(warmup, "run", _signal_in_a_weakref_callback(signal.SIGHUP))
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert cli.main(["warmup"]) == 0
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("run, code, out, err", [
    ("lambda: sys.stdout.write('x' * 100_000) and 3", 3, "x" * 100_000, ""),  # flushed
    ("lambda: sys.exit()", 0, "", ""),
    ("lambda: sys.exit('one line')", 1, "", "one line\n"),
    ("lambda: None", 0, "", ""),
])
def test_a_command_ends_without_the_interpreters_teardown_and_loses_no_output(run, code, out,
                                                                               err):
    # fastcal.process.finish: the exit status of run(), the buffered output flushed
    # (stdout is a pipe here: block-buffered), then os._exit (an atexit hook never runs)
    child = ("import atexit, sys\nfrom fastcal import process\n"
             "atexit.register(lambda: print('teardown', file=sys.stderr))\n"
             f"process.finish({run})\n")
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, out, err)
    with pytest.raises(ZeroDivisionError):  # other errors propagate before any exit
        process.finish(lambda: 1 / 0)


def test_the_commands_answer_and_exit_with_their_status(tmp_path):
    path = tmp_path / "pred.parquet"
    pq.write_table(pa.table({"p": [0.1, 0.8, 0.6, 0.3], "y": [0, 1, 1, 0]}), path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-m", "fastcal", "score", str(path), "--prob", "p",
                         "--label", "y", "--json"], capture_output=True, text=True, env=env,
                        timeout=120)
    assert ok.returncode == 0 and '"n": 4' in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "fastcal", "score", str(tmp_path / "no.csv"),
                          "--prob", "p", "--label", "y"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""

"""Tests that run in a subprocess, started early and run beside the suite.

Some cases run in a child ``python -m pytest`` because isolation is their
point (``NUMBA_ENABLE_CUDASIM`` binds the CUDA simulator for a whole process;
the PTX compiles import numba's CUDA target). Each takes minutes, and the main
process compiles kernels on one core while the other waits. So ``conftest.py``
starts them at the end of collection on a background thread, one after
another, and moves the tests that wait for them to the end of the session.
Targets with the same environment (all the simulator's) run in ONE child, so
numba and the kernels load once. The child writes a JUnit XML file; each waiting test asserts on its
own outcome there:

- a whole file (a test named ``*_in_subprocess``, ``check_file``): every case
  of the file passed or was skipped, and one passed;
- one case (the ``cuda`` half of tests/backends/test_backends.py, ``check_case``): the
  child's test of the same id passed (its failure text is shown otherwise).

Without that start (a file run alone with ``-k``, or collected out of this
suite) the first waiting test runs its target then.
"""

import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# inside a simulator run (or a real-GPU run of the cases: tests/backends/test_cuda_gpu.py)
SIM = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
CASES = SIM or os.environ.get("FASTCAL_CUDA_CASES") == "1"
# inside the background child of the tests marked background (see background_run)
BACKGROUND_CHILD = os.environ.get("FASTCAL_BACKGROUND_CHILD") == "1"

_runs = {}  # target (a file, or file::test[id]) -> _Run
_lock = threading.Lock()


class Result:
    """A finished child run: ``proc`` (CompletedProcess), ``cases``, the JUnit
    outcome of each case by (module name, test name): (outcome, text, seconds),
    and ``cpu``, the CPU seconds of the child and what it waited for."""

    def __init__(self, proc, cases, cpu=0.0):
        self.proc = proc
        self.cases = cases
        self.cpu = cpu
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def tail(self):
        return self.stdout[-6000:] + self.stderr[-3000:]


class _Run:
    def __init__(self, targets, env, timeout):
        self.targets = targets
        self.env = env
        self.timeout = timeout
        self.done = threading.Event()
        self.result = None
        self.error = None
        self.span = None  # (start, end) of the child, time.monotonic()

    def go(self):
        t0 = time.monotonic()
        try:
            self.result = _pytest(self.targets, self.env, self.timeout)
        except BaseException as exc:  # handed to the waiting test, which raises it
            self.error = exc
        finally:
            self.span = (t0, time.monotonic())
            self.done.set()

    def name(self):
        files = sorted({t.partition("::")[0] for t in self.targets})
        more = f" and {len(files) - 1} more files" if len(files) > 1 else ""
        n = len(self.targets)
        return f"{n} target{'s' * (n != 1)} of {files[0]}{more}"

    def wait(self):
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result


def _junit_cases(path):
    """{(module name, test name): (outcome, text, seconds)} of a JUnit XML file."""
    cases = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        outcome, text = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = tc.find(kind)
            if node is not None:
                outcome = kind
                text = (node.get("message") or "") + "\n" + (node.text or "")
                break
        cases[(tc.get("classname", "").split(".")[-1], tc.get("name"))] = (
            outcome, text, float(tc.get("time") or 0))
    return cases


def _pytest(targets, env, timeout):
    """Run ``targets`` in a child pytest; its CPU seconds (its own and those of the
    processes it waited for) come from ``os.wait4``, for the summary."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "cases.xml")
        out, err = (open(os.path.join(tmp, name), "w+") for name in ("out", "err"))
        with out, err:
            proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p",
                                     "no:cacheprovider", f"--junitxml={xml}", *targets],
                                    cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
            killed = []
            timer = threading.Timer(timeout, lambda: (killed.append(True), proc.kill()))
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            if killed:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            out.seek(0)
            err.seek(0)
            done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
        cases = _junit_cases(xml) if os.path.exists(xml) else {}
    return Result(done, cases, usage.ru_utime + usage.ru_stime)


def simulator_run():
    """(env, timeout) of a simulator run (``NUMBA_ENABLE_CUDASIM=1``), or None
    inside such a run: the ``suite_run`` of the simulator test files."""
    if CASES:
        return None
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env, 600


def background_run():
    """(env, timeout) of the background child, or None inside it. Tests marked
    ``background`` (tests/conftest.py) spend their time in subprocesses of their
    own (fresh interpreters that must meet the kernel cache as a new process
    does), so they run there, beside the suite, on the core the main process
    leaves idle while it compiles; the main process's item asserts on the
    child's outcome of the same test (``check_case``)."""
    if BACKGROUND_CHILD:
        return None
    env = dict(os.environ, FASTCAL_BACKGROUND_CHILD="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env, 900


def spans():
    """(name, start, end, CPU seconds, its three slowest cases as (seconds, id)) of
    each child run that finished, in the order they started (``time.monotonic()``):
    the summary's lines of where the children's time went."""
    with _lock:
        runs = {id(r): r for r in _runs.values()}.values()
    done = sorted((r for r in runs if r.span), key=lambda r: r.span[0])
    return [(r.name(), *r.span, r.result.cpu if r.result else None,
             sorted(((c[2], f"{mod}::{name}") for (mod, name), c in r.result.cases.items()),
                    reverse=True)[:3] if r.result else [])
            for r in done]


def _key(target):
    """``target`` with its file relative to the repository (a test id already is)."""
    path, _, rest = target.partition("::")
    path = os.path.relpath(path, ROOT) if os.path.isabs(path) else path
    return path + ("::" + rest if rest else "")


def start(suites):
    """Run ``suites`` ([(target, env, timeout)], a target a file or a test id)
    on a daemon thread: the targets of one environment in one child, the
    children one after another. Side by side (tried: three children and the
    main process on two cores) the tests took 1,273 s against 1,156 s one
    after another, fresh clones of nearly the same code on the same day, and
    the children's CPU seconds grew by 12-37 %."""
    groups = {}
    with _lock:
        for target, env, timeout in suites:
            key = _key(target)
            if key in _runs:
                continue
            env_key = tuple(sorted(env.items()))
            run = groups.get(env_key)
            if run is None:
                run = groups[env_key] = _Run([], env, 0)
            files = {t.partition("::")[0] for t in run.targets}
            if key.partition("::")[0] not in files:  # each file adds its own time
                run.timeout += timeout
            run.targets.append(key)
            _runs[key] = run
    if groups:
        runs = list(groups.values())
        threading.Thread(target=lambda: [r.go() for r in runs], daemon=True,
                         name="subsuites").start()


def _result(target, env, timeout):
    """The finished run holding ``target``: started at collection, or run now."""
    key = _key(target)
    with _lock:
        r = _runs.get(key)
        if r is None:
            r = _runs[key] = _Run([key], env, timeout)
            now = True
        else:
            now = False
    if now:
        r.go()
    return r.wait()


def run(path, env, timeout):
    """The finished child run of ``path`` (a ``Result``, with ``returncode``,
    ``stdout`` and ``stderr`` as a CompletedProcess)."""
    return _result(path, env, timeout)


def check_file(path, env, timeout):
    """Assert that every case of ``path`` in its child run passed or was
    skipped, and that one passed."""
    res = _result(path, env, timeout)
    module = os.path.splitext(os.path.basename(path))[0]
    mine = {name: oc for (mod, name), oc in res.cases.items() if mod == module}
    bad = {name: text for name, (outcome, text, _) in mine.items()
           if outcome in ("failure", "error")}
    assert not bad, "\n".join(f"{name}: {text[-3000:]}" for name, text in bad.items())
    assert any(outcome == "passed" for outcome, _, _ in mine.values()), res.tail()


def check_case(item, env, timeout):
    """Pass, fail or skip as the child's run of the same test (``item``, a
    pytest item of this process) did."""
    path, _, name = item.nodeid.partition("::")
    res = _result(item.nodeid, env, timeout)
    module = os.path.splitext(os.path.basename(path))[0]
    outcome = res.cases.get((module, name))
    if outcome is None:
        pytest.fail(f"{item.nodeid} did not run in the child run:\n{res.tail()}")
    kind, text, _ = outcome
    if kind == "skipped":
        pytest.skip(text.strip().splitlines()[0] if text.strip() else "skipped in the child")
    if kind != "passed":
        pytest.fail(f"in the child run ({kind}):\n{text[-6000:]}", pytrace=False)

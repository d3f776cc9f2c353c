"""Test files that run their cases in a subprocess, started early and run beside the suite.

Four files run their cases in a child ``python -m pytest`` because isolation is
their point (``NUMBA_ENABLE_CUDASIM`` binds the CUDA simulator for a whole
process; the PTX compiles import numba's CUDA target). Each takes minutes, and
the main process compiles kernels on one core while the other waits. So
``conftest.py`` starts the collected ones at the end of collection, one after
another on a background thread, and moves their tests to the end of the session:
each waits for its own run and asserts on it as it did on a run of its own
(``run``). Without that start (a
file run alone with ``-k``, or collected out of this suite) ``run`` runs it then.
"""

import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# inside a simulator run (or a real-GPU run of the cases: tests/test_cuda_gpu.py)
SIM = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
CASES = SIM or os.environ.get("FASTCAL_CUDA_CASES") == "1"

_runs = {}  # file -> _Run
_lock = threading.Lock()


class _Run:
    def __init__(self, path, env, timeout):
        self.path = path
        self.env = env
        self.timeout = timeout
        self.done = threading.Event()
        self.result = None
        self.error = None

    def go(self):
        try:
            self.result = _pytest(self.path, self.env, self.timeout)
        except BaseException as exc:  # handed to the waiting test, which raises it
            self.error = exc
        finally:
            self.done.set()


def _pytest(path, env, timeout):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           os.path.abspath(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def simulator_run():
    """(env, timeout) of a simulator file's run (``NUMBA_ENABLE_CUDASIM=1``), or
    None inside such a run: the ``suite_run`` of the simulator test files."""
    if CASES:
        return None
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env, 600


def start(suites):
    """Run ``suites`` ([(file, env, timeout)]) one after another on a daemon thread."""
    runs = []
    with _lock:
        for path, env, timeout in suites:
            key = os.path.abspath(path)
            if key not in _runs:
                _runs[key] = _Run(key, env, timeout)
                runs.append(_runs[key])
    if runs:
        threading.Thread(target=lambda: [r.go() for r in runs], daemon=True,
                         name="subsuites").start()


def run(path, env, timeout):
    """The finished ``python -m pytest -q path`` (a CompletedProcess): the run started
    at collection, waited for, or a run made now."""
    with _lock:
        r = _runs.get(os.path.abspath(path))
    if r is None:
        return _pytest(path, env, timeout)
    r.done.wait()
    if r.error is not None:
        raise r.error
    return r.result

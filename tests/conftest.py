"""Suite-wide set-up: the subprocess tests start early (see tests/subsuites.py)."""

import functools
import os
import signal
import threading
import time

import pytest

from tests import subsuites

if os.environ.get("FASTCAL_COMPILE_PROFILE"):  # where the suite's compiling goes (its docstring)
    from tests.compile_profile import pytest_runtest_call, pytest_sessionfinish  # noqa: F401

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_AT_START = {}  # the signal handlers the session started with
_FOUND_IGNORED = []  # (test, signal): ignored when that test started, though not at the start


def pytest_sessionstart(session):
    # The suite tests what Ctrl-C does. A shell that starts it in the background without
    # job control (``(make test &)``, a non-interactive script's ``&``) hands it SIGINT
    # ignored, which every command it runs would then keep ignored (as under nohup, on
    # purpose): the suite runs with Python's own handler instead, and says so.
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _FOUND_IGNORED.append(("the session", "SIGINT"))
    _AT_START.update((s, signal.getsignal(s)) for s in _SIGNALS)


@pytest.fixture(autouse=True)
def _signal_handlers_as_found(request):
    """Each test leaves the process's signal handlers as it found them. A command run
    in this process as the console entry ends by ignoring signals until it exits (its
    status is known: fastcal.process.Stop.restore); in a test process that would make
    every later Ctrl-C test, and every child started later, ignore SIGINT.

    A signal found ignored when a test starts, which the session did not start with
    ignored (changed outside any test's body), is put back to the session's handler
    and named in the summary (``pytest_terminal_summary``), so that one leak fails no
    unrelated test and is still seen."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    for s, h in _AT_START.items():
        if h not in (None, signal.SIG_IGN) and signal.getsignal(s) is signal.SIG_IGN:
            signal.signal(s, h)
            _FOUND_IGNORED.append((request.node.nodeid, signal.Signals(s).name))
    before = {s: signal.getsignal(s) for s in _SIGNALS}
    yield
    for s, h in before.items():
        if h is not None and signal.getsignal(s) is not h:
            signal.signal(s, h)


_T0 = time.monotonic()  # the session's start, for the children's lines in the summary


def pytest_terminal_summary(terminalreporter):
    for name, start, end, cpu, slowest in subsuites.spans():
        cpu = "" if cpu is None else f" ({cpu:.0f} s of CPU)"
        terminalreporter.write_line(
            f"child run: {name}: {end - start:.0f} s{cpu}, from {start - _T0:.0f} s to "
            f"{end - _T0:.0f} s of the session; slowest: "
            + ", ".join(f"{case} {t:.0f} s" for t, case in slowest))
    for nodeid, name in _FOUND_IGNORED:
        terminalreporter.write_line(f"signal handlers: {name} was found ignored when {nodeid} "
                                    "started; Python's handler put back")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "background: the test runs in the background child, beside the suite "
        "(its time is spent in subprocesses that compile on their own; tests/subsuites.py); "
        "a file marks all its tests with pytestmark")


def _background_case(item):
    # a marked test seen from the main process: it waits for its run in the background child
    return item.get_closest_marker("background") is not None and not subsuites.BACKGROUND_CHILD


def _waits(item):
    # a test that waits for a child run: a whole file's (``*_in_subprocess``), or a
    # case that runs there (the cuda half of tests/backends/test_backends.py: ``in_child``;
    # a test marked ``background``)
    if _background_case(item):
        return True
    if getattr(item.module, "suite_run", None) is None:
        return False
    in_child = getattr(item.module, "in_child", None)
    return item.name.endswith("_in_subprocess") or bool(in_child and in_child(item))


# files whose tests start worker processes (a Dask LocalCluster) that compile the
# kernels they meet: run after the rest, when the main process has compiled and
# cached most of them, so that the workers load them instead of each compiling again
_WORKER_FILES = ("test_distributed.py",)


def _order(item):
    if _waits(item):
        return 2
    return 1 if item.path.name in _WORKER_FILES else 0


def pytest_collection_modifyitems(session, config, items):
    # the tests that wait for a background run go last: the rest of the suite runs
    # in the main process meanwhile (sorted is stable: file order within each group)
    for item in items:
        if _background_case(item):
            item.runtest = functools.partial(subsuites.check_case, item,
                                             *subsuites.background_run())
    items[:] = sorted(items, key=_order)


def pytest_collection_finish(session):
    # A module that runs cases in a subprocess says how (suite_run) and whether it
    # would here (None inside that subprocess, or without numba-cuda). A whole
    # file's run is its path; a case's, the case's id.
    suites = {}
    for item in session.items:
        if _background_case(item):
            suites[item.nodeid] = subsuites.background_run()
        elif _waits(item):
            args = item.module.suite_run()
            if args is not None:
                target = (item.module.__file__ if item.name.endswith("_in_subprocess")
                          else item.nodeid)
                suites[target] = args
    subsuites.start([(target, env, timeout) for target, (env, timeout) in suites.items()])

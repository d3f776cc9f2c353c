"""Suite-wide set-up: the subprocess test files start early (see tests/subsuites.py)."""

from tests import subsuites


def _waits(item):
    return getattr(item.module, "suite_run", None) is not None and item.name.endswith(
        "_in_subprocess")


def pytest_collection_modifyitems(session, config, items):
    # the tests that wait for a background run go last: the rest of the suite runs
    # in the main process meanwhile
    items[:] = [i for i in items if not _waits(i)] + [i for i in items if _waits(i)]


def pytest_collection_finish(session):
    # A module that runs its cases in a subprocess says how (suite_run) and whether it
    # would here (None inside that subprocess, or without numba-cuda).
    suites = {}
    for item in session.items:
        if _waits(item):
            args = item.module.suite_run()
            if args is not None:
                suites[item.module.__file__] = args
    subsuites.start([(path, env, timeout) for path, (env, timeout) in suites.items()])

"""Suite-wide set-up: the subprocess tests start early (see tests/subsuites.py)."""

from tests import subsuites


def _waits(item):
    # a test that waits for a child run: a whole file's (``*_in_subprocess``), or a
    # case that runs there (the cuda half of tests/test_backends.py: ``in_child``)
    if getattr(item.module, "suite_run", None) is None:
        return False
    in_child = getattr(item.module, "in_child", None)
    return item.name.endswith("_in_subprocess") or bool(in_child and in_child(item))


def pytest_collection_modifyitems(session, config, items):
    # the tests that wait for a background run go last: the rest of the suite runs
    # in the main process meanwhile
    items[:] = [i for i in items if not _waits(i)] + [i for i in items if _waits(i)]


def pytest_collection_finish(session):
    # A module that runs cases in a subprocess says how (suite_run) and whether it
    # would here (None inside that subprocess, or without numba-cuda). A whole
    # file's run is its path; a case's, the case's id.
    suites = {}
    for item in session.items:
        if _waits(item):
            args = item.module.suite_run()
            if args is not None:
                target = (item.module.__file__ if item.name.endswith("_in_subprocess")
                          else item.nodeid)
                suites[target] = args
    subsuites.start([(target, env, timeout) for target, (env, timeout) in suites.items()])

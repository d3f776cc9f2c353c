"""Suite-wide set-up: the subprocess test files start early (see tests/subsuites.py)."""

from tests import subsuites


def pytest_collection_finish(session):
    # A module that runs its cases in a subprocess says how (suite_run) and whether it
    # would here (None inside that subprocess, or without numba-cuda).
    suites = {}
    for item in session.items:
        how = getattr(item.module, "suite_run", None)
        if how is not None and item.name.endswith("_in_subprocess"):
            args = how()
            if args is not None:
                suites[item.module.__file__] = args
    subsuites.start([(path, env, timeout) for path, (env, timeout) in suites.items()])

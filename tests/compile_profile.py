"""Where the suite's time goes to Numba: ``FASTCAL_COMPILE_PROFILE=FILE make test``
writes, per test of the main process, its wall seconds and the seconds Numba spent
compiling in it (outermost compiles: typing, lowering and LLVM of a kernel and what it
calls; loads from the cache are not compiles), sorted by compile time, and then each
outermost compile: its seconds, the function, its argument types and the test that
paid for it (the variants a suite compiles beside the shipped ones). The children
(background runs, subprocesses) are not counted: their kernels load from the cache the
main process filled, or compile there on their own.
"""

import os
import time

from numba.core import event
import pytest

_rows = []


class _Listener(event.Listener):
    def __init__(self):
        self.depth = 0
        self.t0 = 0.0
        self.total = 0.0
        self.test = ""
        self.compiles = []  # (seconds, function, argument types, test)

    def on_start(self, ev):
        if self.depth == 0:
            self.t0 = time.perf_counter()
        self.depth += 1

    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            dt = time.perf_counter() - self.t0
            self.total += dt
            data = ev.data or {}
            fn = getattr(data.get("dispatcher"), "py_func", None)
            name = f"{fn.__module__}.{fn.__qualname__}" if fn is not None else "?"
            self.compiles.append((dt, name, str(data.get("args", "")), self.test))


_listener = _Listener()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not getattr(_listener, "registered", False):
        event.register("numba:compile", _listener)
        _listener.registered = True
    before, t0 = _listener.total, time.perf_counter()
    _listener.test = item.nodeid
    try:
        return (yield)
    finally:
        _rows.append((_listener.total - before, time.perf_counter() - t0, item.nodeid))


def pytest_sessionfinish(session):
    path = os.environ.get("FASTCAL_COMPILE_PROFILE")
    if not path:
        return
    total = sum(r[0] for r in _rows)
    with open(path, "w") as f:
        f.write(f"# compile s\twall s\ttest (main process: {total:.1f} s compiling of "
                f"{sum(r[1] for r in _rows):.1f} s in tests)\n")
        for c, w, nodeid in sorted(_rows, reverse=True):
            f.write(f"{c:.2f}\t{w:.2f}\t{nodeid}\n")
        f.write("# compile s\tfunction\targument types\ttest\n")
        for dt, name, args, nodeid in sorted(_listener.compiles, reverse=True):
            f.write(f"{dt:.2f}\t{name}\t{args}\t{nodeid}\n")

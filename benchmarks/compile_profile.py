"""Per-kernel compile profile of the first binary and first K-class report (issue 26).

Listens to Numba's ``numba:compile`` events and prints, per dispatcher and
signature, the time of its first compile: total (including the functions it
calls that compiled during it) and self (total less those nested compiles).
Run it with an empty ``NUMBA_CACHE_DIR``::

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/compile_profile.py \
        [--classes] [--no-ace] [--rows N]

Inputs as in first_call.py: 10,000 rows, float32 p, uint8 y, 15 bins; then a
4-class report with ``--classes``; ``--rows`` for more rows (the
threaded kernels run from 131,072 rows on).
"""

import sys
import time

from numba.core import event
import numpy as np


class _Profile(event.Listener):
    def __init__(self):
        self.stack = []
        self.rows = []

    def on_start(self, ev):
        self.stack.append([time.perf_counter(), 0.0])

    def on_end(self, ev):
        t0, child = self.stack.pop()
        total = time.perf_counter() - t0
        if self.stack:
            self.stack[-1][1] += total
        disp = ev.data["dispatcher"]
        name = f"{disp.py_func.__module__.split('.')[-1]}.{disp.py_func.__name__}"
        self.rows.append((name, len(self.stack), total, total - child, str(ev.data["args"])))


def main():
    import fastcal

    rng = np.random.default_rng(0)
    n = int(float(sys.argv[sys.argv.index("--rows") + 1])) if "--rows" in sys.argv else 10_000
    p = rng.random(n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.uint8)
    ace = "--no-ace" not in sys.argv
    prof = _Profile()
    steps = [("binary", lambda: fastcal.calibration_report(y, p, n_bins=15, ace=ace))]
    if "--classes" in sys.argv:
        P = rng.dirichlet(np.ones(4), n).astype(np.float32)
        yk = rng.integers(0, 4, n)
        steps.append(("K-class", lambda: fastcal.calibration_report(yk, P, n_bins=15, ace=ace)))
    for label, call in steps:
        prof.rows.clear()
        with event.install_listener("numba:compile", prof):
            t0 = time.perf_counter()
            call()
            wall = time.perf_counter() - t0
        self_sum = sum(r[3] for r in prof.rows)
        print(f"== first {label} report: {wall:.2f} s wall, {self_sum:.2f} s compiling "
              f"({len(prof.rows)} compiles)")
        print(f"{'self s':>7} {'total s':>8}  kernel (depth) signature")
        for name, depth, total, own, args in sorted(prof.rows, key=lambda r: -r[3]):
            print(f"{own:7.2f} {total:8.2f}  {name} ({depth}) {args[:90]}")


if __name__ == "__main__":
    main()

"""First call in a fresh process: import, then one binary (and optionally one K-class) report.

Prints ``import_s first_binary_s [first_kclass_s]``. Run it with an empty
``NUMBA_CACHE_DIR`` for the compile time, again with the same one for the cached
start-up; farm-bench times the whole process from outside::

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/first_call.py --classes
    farm-bench -n 5 -- python benchmarks/first_call.py     # cached

Inputs as in issue 26: 10,000 rows (``--rows N`` for more: the threaded fills run
from 200,000 binary rows and 1e6 K-class elements on), float32 probabilities,
uint8 labels, 15 bins.
"""

import sys
import time

t0 = time.perf_counter()
import numpy as np  # noqa: E402

import fastcal  # noqa: E402

t1 = time.perf_counter()
rng = np.random.default_rng(0)
n = int(float(sys.argv[sys.argv.index("--rows") + 1])) if "--rows" in sys.argv else 10_000
p = rng.random(n).astype(np.float32)
y = (rng.random(n) < p).astype(np.uint8)
fastcal.calibration_report(y, p, n_bins=15)
t2 = time.perf_counter()
out = [t1 - t0, t2 - t1]
if "--classes" in sys.argv:
    P = rng.dirichlet(np.ones(4), n).astype(np.float32)
    fastcal.calibration_report(rng.integers(0, 4, n), P, n_bins=15)
    out.append(time.perf_counter() - t2)
print(" ".join(f"{x:.3f}" for x in out))

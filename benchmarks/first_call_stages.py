"""Where the first binary report's time goes, stage by stage, in a new process.

Prints one line per stage (wall s): Python's start-up is outside (farm-bench times the
whole process); then ``import numpy``, ``import fastcal``, Numba's import (with
fastcal's kernel cache, which answers Numba's BLAS check without importing
scipy.linalg: ``fastcal._kernels._startup``), Numba's target set-up (its first
``refresh``: every implementation registry), the first report (its kernels loaded: from your cache, the
shipped ones, or compiled), and a second report of the same size::

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/first_call_stages.py   # a new environment
    python benchmarks/first_call_stages.py                                # a later process

Inputs as ``benchmarks/first_call.py``: 10,000 float32 probabilities, uint8 labels, 15 bins.
"""

import time

t = [time.perf_counter()]
import numpy as np  # noqa: E402

t.append(time.perf_counter())
import fastcal  # noqa: E402

t.append(time.perf_counter())
import fastcal._kernels._cache  # noqa: E402, F401  (numba, and its BLAS check without SciPy)

t.append(time.perf_counter())
from numba.core.registry import cpu_target  # noqa: E402

cpu_target.target_context.refresh()
t.append(time.perf_counter())
rng = np.random.default_rng(0)
p = rng.random(10_000).astype(np.float32)
y = (rng.random(10_000) < p).astype(np.uint8)
fastcal.calibration_report(y, p, n_bins=15)
t.append(time.perf_counter())
fastcal.calibration_report(y, p, n_bins=15)
t.append(time.perf_counter())
names = ["import numpy", "import fastcal", "import numba", "numba target set-up", "first report",
         "second report"]
for name, a, b in zip(names, t, t[1:]):
    print(f"{name:22s} {b - a:.3f}")
from fastcal.warmup import shipped  # noqa: E402

print("shipped kernels:", shipped() or "loaded")

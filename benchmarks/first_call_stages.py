"""Where the first binary report's time goes, stage by stage, in a new process.

Prints one line per stage (wall s): Python's start-up is outside (farm-bench times the
whole process); then ``import numpy``, ``import fastcal``, the first report (the
report's modules imported, and its kernels loaded: the module compiled ahead of time,
:mod:`fastcal._kernels._aot`, where the call fits it; else Numba's import, its target
set-up and the kernels from your cache, the shipped ones, or compiled), and a second
report of the same size; then whether Numba was imported, and why the ahead-of-time
module was not loaded, if it was not::

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/first_call_stages.py   # a new environment
    python benchmarks/first_call_stages.py                                # a later process
    FASTCAL_AOT=0 python benchmarks/first_call_stages.py                  # the JIT kernels

Inputs as ``benchmarks/first_call.py``: 10,000 float32 probabilities, uint8 labels, 15 bins.
"""

import sys
import time

t = [time.perf_counter()]
import numpy as np  # noqa: E402

t.append(time.perf_counter())
import fastcal  # noqa: E402

t.append(time.perf_counter())
rng = np.random.default_rng(0)
p = rng.random(10_000).astype(np.float32)
y = (rng.random(10_000) < p).astype(np.uint8)
fastcal.calibration_report(y, p, n_bins=15)
t.append(time.perf_counter())
fastcal.calibration_report(y, p, n_bins=15)
t.append(time.perf_counter())
names = ["import numpy", "import fastcal", "first report", "second report"]
for name, a, b in zip(names, t, t[1:]):
    print(f"{name:22s} {b - a:.3f}")
print("numba imported:", "numba" in sys.modules)
from fastcal._kernels import _aot  # noqa: E402

print("ahead-of-time module:", _aot.status() or "loaded")

"""Start-up cost: the first call compiles the kernels; later processes load them.

Both are timed in fresh Python processes sharing a temporary NUMBA_CACHE_DIR:
the first one finds it empty (import + compile + call), the second finds the
cached machine code (cache=True) and only imports and loads it. Each is one
round: repeating a compile is the same measurement.
"""

import os
from pathlib import Path
import subprocess
import sys
import tempfile

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np
import fastcal
t1 = time.perf_counter()
y, p = fastcal.simulate(1_000_000, sigma=0.5, seed=0, dtype=np.float32)
t2 = time.perf_counter()
r = fastcal.calibration_report(y, p, n_bins=15, ace=False)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2, r.n)
"""


def _run(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         check=True)
    t_import, t_call, n = out.stdout.split()
    assert int(n) == 1_000_000
    return float(t_import), float(t_call)


@pytest.fixture(scope="module")
def cache_dir():
    with tempfile.TemporaryDirectory(prefix="fastcal-numba-cache-") as d:
        yield d


def test_first_call_compiles(benchmark, cache_dir):
    benchmark.group = "startup"
    benchmark.extra_info.update(contender="first process (compile)", n=1_000_000)
    t_import, t_call = benchmark.pedantic(_run, args=(cache_dir,), rounds=1, iterations=1)
    benchmark.extra_info.update(import_s=t_import, first_call_s=t_call)


def test_second_process_uses_cache(benchmark, cache_dir):
    benchmark.group = "startup"
    benchmark.extra_info.update(contender="second process (cached)", n=1_000_000)
    t_import, t_call = benchmark.pedantic(_run, args=(cache_dir,), rounds=1, iterations=1)
    benchmark.extra_info.update(import_s=t_import, first_call_s=t_call)
    assert t_call < 5.0, "the cached kernels were not used (the call recompiled)"

"""Model functions defined in a script (``__main__``) are compiled once and cached like importable ones."""

import os
from pathlib import Path
import subprocess
import sys
import textwrap

from numba import njit
import numpy as np
import pytest

from tracking.kernels.factory import _inline_sources, _template

ROOT = Path(__file__).resolve().parents[2]
MODELS = """
import math
import numpy as np
from numba import njit

GAIN = {gain}


@njit(error_model="numpy")
def script_f(x, dt, p, out):
    out[0] = x[0] + dt * x[1]
    out[1] = GAIN * x[1]


@njit
def script_h(x, p, out):
    out[0] = math.sqrt(x[0] * x[0] + 1.0)
    out[1] = x[0]
"""


def load(tmp_path, gain, name="m"):
    """The model functions as a script defines them: from a file, in a module that cannot be imported."""
    path = tmp_path / f"{name}.py"
    path.write_text(MODELS.format(gain=gain))
    g = {"__name__": "__main__"}
    exec(compile(path.read_text(), str(path), "exec"), g)  # noqa: S102 - the test's own text
    return g


def test_sources_constants_and_modules_are_written_into_the_kernel(tmp_path):
    g = load(tmp_path, 0.9)
    text = _inline_sources({"f": g["script_f"], "h": g["script_h"]}, _template(), {"N": 2})
    assert "def script_f(x, dt, p, out):" in text and "GAIN = 0.9" in text and "import math" in text
    line = next(t for t in text.splitlines() if t.startswith("script_f = _njit("))
    assert "'error_model': 'numpy'" in line  # compiled with its own options
    assert text.rstrip().endswith("f = script_f\nh = script_h")
    other = _inline_sources({"f": load(tmp_path, 0.8, "m2")["script_f"]}, _template(), {"N": 2})
    assert "GAIN = 0.8" in other  # a changed constant is a new kernel, never a stale one

    arr = np.ones(2)

    @njit
    def reads_an_array(x, dt, p, out):
        out[0] = arr[0]
        out[1] = x[1]

    assert _inline_sources({"f": reads_an_array}, _template(), {}) is None  # compiled in memory instead


# two fresh processes compile a new model pair (about 8 s): beside the suite
@pytest.mark.background
def test_a_script_model_compiles_once_across_runs(tmp_path):
    script = tmp_path / "run_models.py"
    script.write_text(MODELS.format(gain=1.0) + textwrap.dedent("""
        from tracking.filters import ExtendedKalmanFilter
        from tests.tracking.tracking_user_models import Drift, LogRange


        class M(Drift):
            f_jit = staticmethod(script_f)


        class S(LogRange):
            h_jit = staticmethod(script_h)


        z = np.zeros((2, 3, 2))
        print(repr(float(ExtendedKalmanFilter(M(), S()).run(np.zeros(2), np.eye(2), z).means.sum())))
    """))
    env = dict(os.environ, TRACKING_KERNEL_DIR=str(tmp_path / "k"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    outs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-W", "always", str(script)], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "compiled in every process" not in p.stderr
        outs.append((p.stdout, sorted(os.listdir(tmp_path / "k" / "__pycache__"))))
    assert outs[0] == outs[1]  # same result, and the second run added no cache file: it compiled nothing
    assert len(list((tmp_path / "k").glob("tracking_kernel_*.py"))) == 1

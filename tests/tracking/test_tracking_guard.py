"""A mistake in a user's model function is one ValueError naming it: at the probe (a guarded output) or
at any later run and step of the batch (bounds checks, a watch for functions that never return)."""

import os
from pathlib import Path
import subprocess
import sys
import textwrap

from numba import njit
import numpy as np
import pytest

from tests.tracking.tracking_user_models import Drift, LogRange, drift_f
from tracking.filters import ExtendedKalmanFilter
from tracking.kernels.guard import probe

ROOT = Path(__file__).resolve().parents[2]


@njit
def f_half(x, dt, p, out):
    out[0] = x[0]  # out[1] never written


@njit
def f_two_args(x, out):
    out[0] = x[0]


@njit
def f_divides(x, dt, p, out):
    out[0] = x[0] / 0.0  # numba's default error model raises ZeroDivisionError
    out[1] = x[1]


@njit
def f_indexes_a_scalar(x, dt, p, out):
    out[0] = dt[0]
    out[1] = x[1]


def motion(**fns):
    m = Drift()
    for k, v in fns.items():
        setattr(m, k, v)
    return m


@pytest.mark.parametrize("fns,needle", [
    (dict(f_jit=f_half), r"motion.f_jit \(f_half\) left 1 of the 2 components of its \(2,\) output unwritten "
                         r"\(first \[1\]\)"),
    (dict(f_jit=f_two_args), r"motion.f_jit \(f_two_args\) raised TypeError at a probe state: too many arguments"),
    (dict(f_jit=f_divides), r"motion.f_jit \(f_divides\) raised ZeroDivisionError at a probe state: division by zero"),
    (dict(f_jit=f_indexes_a_scalar), r"motion.f_jit \(f_indexes_a_scalar\) cannot be compiled for its arguments "
                                     r"\(float64\[2\], float64, float64\[1\], out: float64\[2\]\)"),
])
def test_model_misuse_is_one_error_naming_the_function(fns, needle):
    with pytest.raises(ValueError, match=needle) as exc:
        ExtendedKalmanFilter(motion(**fns), LogRange())
    assert "\n" not in str(exc.value)


def test_probe_sees_an_overrun_without_running_a_kernel():
    @njit
    def F_3x3(x, dt, p, out):
        for i in range(3):
            for j in range(3):
                out[i, j] = 0.0

    x = np.zeros(2)
    with pytest.raises(ValueError, match=r"^motion.F_jit \(.*F_3x3\) raised IndexError at a probe state: index is out "
                                         r"of bounds; expected indices within x \(2,\), p \(1,\) and out \(2, 2\)$"):
        probe(F_3x3, (x, 0.5, np.zeros(1)), (2, 2), owner="motion", slot="F_jit")
    probe(drift_f, (x, 0.5, np.array([0.3])), (2,), owner="motion", slot="f_jit")  # a good one passes


def test_a_jacobian_written_3x3_into_2x2_is_an_error_not_a_crash(tmp_path):
    # before the guard: SIGSEGV / SIGABRT in the batched kernel, or memory silently corrupted
    script = textwrap.dedent("""
        import numpy as np
        from numba import njit
        from tests.tracking.tracking_user_models import Drift, LogRange
        from tracking.filters import ExtendedKalmanFilter

        @njit
        def F_jit(x, dt, p, out):
            for i in range(3):
                for j in range(3):
                    out[i, j] = 1.0 if i == j else 0.0

        m = Drift()
        m.F_jit = F_jit
        try:
            ekf = ExtendedKalmanFilter(m, LogRange())
            z = np.random.default_rng(0).normal(size=(200, 30, 2))
            ekf.run(np.zeros((200, 2)), np.broadcast_to(np.eye(2), (200, 2, 2)).copy(), z)
        except ValueError as exc:
            print(exc)
            raise SystemExit(3)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    assert p.stdout.strip() == ("motion.F_jit (F_jit) raised IndexError at a probe state: index is out of bounds; "
                                "expected indices within x (2,), p (1,) and out (2, 2)")


def test_an_exception_inside_the_batch_names_the_function_run_and_step():
    from tests.tracking.tracking_user_models import DriftRaisesFar

    x0 = np.zeros((4, 2))
    x0[2, 0] = 3.0  # only run 2 starts beyond the point where f divides by zero
    z = np.zeros((4, 3, 2))
    P0 = np.broadcast_to(0.01 * np.eye(2), (4, 2, 2)).copy()
    with pytest.raises(ValueError, match=r"^motion.f_jit \(drift_f_raises_far\) raised ZeroDivisionError in run 2, "
                                         r"step 0: division by zero; expected model functions that do not raise$"):
        ExtendedKalmanFilter(DriftRaisesFar(), LogRange()).run(x0, P0, z)


LATE = """
import numpy as np
from tests.tracking.tracking_user_models import LogRangeBadLate, WalkOverrunsLate
from tracking.filters import ExtendedKalmanFilter

runs, steps = 3, 8
x0 = np.zeros((runs, 2))
x0[:2, 0] = -10.0  # only run 2 walks past the thresholds (position 0.5 (k + 1) after step k)
P0 = np.broadcast_to(1e-4 * np.eye(2), (runs, 2, 2)).copy()
truth = x0[:, :1] + 0.5 * np.arange(1, steps + 1)
z = np.stack([np.log(np.sqrt((truth - 3.0) ** 2 + 1.0)), truth], axis=-1)
inf = np.inf
for f_past, H_past, h_past, zs in [(2.2, inf, inf, np.full_like(z, np.nan)),  # f: an overrun of 800 MB
                                   (inf, 2.2, inf, z),  # H: one column too far, into the next row
                                   (inf, inf, 2.2, z),  # h: an endless loop
                                   (inf, inf, -inf, z)]:  # h: an endless loop at once, in the probe
    motion, sensor = WalkOverrunsLate(), LogRangeBadLate()
    motion.params = np.array([f_past])
    # (a function is probed once per shape of its arguments: the last case's params are longer)
    sensor.params = np.array([3.0, H_past, h_past] + [0.0] * (h_past == -inf))
    try:
        ExtendedKalmanFilter(motion, sensor).run(x0, P0, zs)
        print("no error")
    except ValueError as exc:
        print(exc)
"""


@pytest.mark.background
def test_a_mistake_at_a_later_step_is_one_error_naming_the_function():
    # before the bounds checks and the watch: SIGSEGV, then corrupted numbers with exit 0, then a hang
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TRACKING_MODEL_TIMEOUT="1")
    p = subprocess.run([sys.executable, "-c", LATE], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=600)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert p.stdout.splitlines() == [
        "motion.f_jit (walk_f_overruns_late) raised IndexError in run 2, step 5: index is out of bounds; "
        "expected indices within x (2,), p (1,) and out (2,)",
        "sensor.H_jit (log_range_H_overruns_late) raised IndexError in run 2, step 4: index is out of bounds; "
        "expected indices within x (2,), p (3,) and out (2, 2)",
        "sensor.h_jit (log_range_h_loops_late) did not return within 1 s in run 2, step 4 (an endless loop?); "
        "expected model functions that return (TRACKING_MODEL_TIMEOUT sets the limit in seconds)",
        "sensor.h_jit (log_range_h_loops_late) did not return within 1 s at a probe state (an endless loop?); "
        "expected model functions that return (TRACKING_MODEL_TIMEOUT sets the limit in seconds)",
    ]

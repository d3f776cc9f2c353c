"""Smooth ECE of data in GPU memory under Numba's CUDA simulator, against the CPU: the
GPU ranks the values (sigmoid, confidence) and the grid is filled from that pair.

As tests/test_cuda_sim.py: the simulator is bound when numba.cuda is first
imported, so in the main process one test runs this file again in a
subprocess with ``NUMBA_ENABLE_CUDASIM=1``, where the cases run.
"""

import sys

import numpy as np
import pytest

from tests import subsuites

SIM = subsuites.SIM
CASES = subsuites.CASES  # the simulator, or tests/test_cuda_gpu.py on a real GPU


suite_run = subsuites.simulator_run  # started early, beside the rest (tests/subsuites.py)


def test_simulator_cases_in_subprocess():
    if CASES:
        pytest.skip("already running the cases (simulator or real GPU)")
    proc = subsuites.run(__file__, *suite_run())
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout


if SIM:
    sys.setswitchinterval(1e-5)  # simulated threads meet sooner (as test_cuda_sim.py)

if CASES:
    import fastcal
    from fastcal.accumulators.calibration import CalibrationAccumulator
    from numba import cuda

    def _data(n, seed, dtype=np.float64):
        rng = np.random.default_rng(seed)
        p = rng.random(n).astype(dtype)
        p[:3] = [0.0, 1.0, 0.5]
        return (rng.random(n) < p).astype(np.uint8), p

    def test_device_reports_equal_cpu_for_probabilities_logits_and_classes():
        y, p = _data(2_000, 2)
        ref = fastcal.calibration_report(y, p, smooth=True, ace=False)
        got = fastcal.calibration_report(cuda.to_device(y), cuda.to_device(p), smooth=True,
                                         ace=False)
        assert got.smece == pytest.approx(ref.smece, rel=1e-12)
        assert got.smece_sigma == pytest.approx(ref.smece_sigma, rel=1e-12)
        z = np.log(p[3:] / (1 - p[3:]))
        ref = fastcal.smece(y[3:], z, logits=True)
        assert fastcal.smece(cuda.to_device(y[3:]), cuda.to_device(z), logits=True) == \
            pytest.approx(ref, rel=1e-12)
        rng = np.random.default_rng(3)
        probs = rng.dirichlet(np.ones(3), 600)
        labels = rng.integers(0, 3, 600)
        assert fastcal.smece(cuda.to_device(labels), cuda.to_device(probs), 0.05) == \
            pytest.approx(fastcal.smece(labels, probs, 0.05), rel=1e-12)

    def test_device_state_merges_with_host_state_and_omits_nan_rows():
        y, p = _data(1_200, 4)
        p[17] = np.nan
        whole = CalibrationAccumulator(smooth=True, nan_policy="omit").update(y, p)
        a = CalibrationAccumulator(smooth=True, nan_policy="omit").update_device(
            cuda.to_device(y[:500]), cuda.to_device(p[:500]))
        b = CalibrationAccumulator(smooth=True, nan_policy="omit").update(y[500:], p[500:],
                                                                         start=500)
        merged = a + b
        np.testing.assert_array_equal(merged.grid.n, whole.grid.n)
        np.testing.assert_allclose(merged.grid.mass, whole.grid.mass, rtol=1e-12, atol=1e-12)
        assert merged.report().smece == pytest.approx(whole.report().smece, rel=1e-12)
        streamed = fastcal.calibration_report(y, p, smooth=True, nan_policy="omit",
                                              device="cuda", ace=False)
        assert streamed.smece == pytest.approx(whole.report().smece, rel=1e-12)

"""Issue 27's measures from GPU-filled state, under Numba's CUDA simulator: the two new
totals (sum p**2, sum p*y) of the CUDA kernels, and so the Brier decomposition, L2 and
debiased errors, ECE-sweep and TACE of device arrays, equal the CPU's.

A subprocess for the reason tests/test_cuda_sim.py gives (NUMBA_ENABLE_CUDASIM is read
once per process); run the cases directly with NUMBA_ENABLE_CUDASIM=1.
"""

import sys

import numpy as np
import pytest

from tests import subsuites

SIM = subsuites.SIM
CASES = subsuites.CASES  # the simulator, or tests/test_cuda_gpu.py on a real GPU

FIELDS = ("brier", "ece_l2", "ece_debiased", "brier_reliability", "brier_resolution",
          "brier_uncertainty", "brier_within_variance", "brier_within_covariance")


suite_run = subsuites.simulator_run  # started early, beside the rest (tests/subsuites.py)


def test_simulator_cases_in_subprocess():
    if CASES:
        pytest.skip("already running the cases (simulator or real GPU)")
    proc = subsuites.run(__file__, *suite_run())
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout


if SIM:
    sys.setswitchinterval(1e-5)

if CASES:
    import fastcal
    from numba import cuda

    def _same(got, ref, extra=()):
        for name in FIELDS + tuple(extra):
            assert getattr(got, name) == pytest.approx(getattr(ref, name), rel=1e-12,
                                                       abs=1e-15), name

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_binary_device_state_gives_the_cpu_measures(dtype):
        rng = np.random.default_rng(3)
        p = rng.random(1500).astype(dtype)
        y = (rng.random(1500) < p ** 1.2).astype(np.uint8)
        kw = dict(n_bins=8, metrics=("ece_sweep",))
        ref = fastcal.calibration_report(y, p, **kw)
        got = fastcal.calibration_report(cuda.to_device(y), cuda.to_device(p), **kw)
        _same(got, ref, ("ece_sweep",))
        assert got.ece_sweep_bins == ref.ece_sweep_bins
        z = np.log(p.astype(np.float64) / (1 - p))
        ref = fastcal.calibration_report(y, z, logits=True, ace=False)
        got = fastcal.calibration_report(cuda.to_device(y), cuda.to_device(z), logits=True,
                                         ace=False)
        _same(got, ref)

    @pytest.mark.parametrize("logits", [False, True])
    def test_class_device_state_gives_the_cpu_measures(logits):
        rng = np.random.default_rng(4)
        z = rng.normal(size=(900, 3)) * 1.5
        y = rng.integers(0, 3, 900)
        x = z if logits else np.exp(z) / np.exp(z).sum(1, keepdims=True)
        kw = dict(n_bins=6, logits=logits, metrics=("tace",))
        ref = fastcal.calibration_report(y, x, **kw)
        got = fastcal.calibration_report(cuda.to_device(y), cuda.to_device(x), **kw)
        _same(got, ref, ("classwise_ece_debiased", "sce", "tace"))

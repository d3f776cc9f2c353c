"""GPU kernels on a real NVIDIA GPU (skipped, with the reason, where there is none).

``benchmarks/gpu_run.sh`` runs this file on the GPU machine. The main process
never imports ``numba.cuda``: whether a GPU is there is asked in a
subprocess, and every case runs in one too, so this file behaves the same
whatever ran before it (see tests/backends/test_cuda_sim.py on why that matters).
"""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _gpu_reason():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return "NUMBA_ENABLE_CUDASIM=1: this process runs the simulator, not a GPU"
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver (nvidia-smi not found)"
    code = "import fastcal.cuda as fc; print(fc.is_available())"
    try:
        out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                             text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "numba.cuda did not answer within 300 s"
    if out.stdout.strip() != "True":
        return "numba-cuda found no usable GPU: " + (out.stderr.strip().splitlines() or ["?"])[-1]
    return None


REASON = _gpu_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def _run(code, timeout=600):
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                         text=True, timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    return out.stdout


def test_simulator_cases_on_the_gpu():
    """Every case of tests/backends/test_cuda_sim.py (edges, merge...) and the cuda half of
    tests/backends/test_backends.py (reports, bad input, NEES...) on the real GPU."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          os.path.join(ROOT, "tests", "test_cuda_sim.py"),
                          os.path.join(ROOT, "tests", "test_backends.py")], cwd=ROOT,
                         env=_env(FASTCAL_CUDA_CASES="1"), capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]


def test_torch_cuda_tensors_many_blocks_match_cpu():
    """Zero-copy torch CUDA input, a grid of many blocks, 1e7 rows: same state as the CPU."""
    _run("""
import numpy as np, torch
from fastcal.backends import cuda as fc
from fastcal.backends import cpu as mc
from fastcal._kernels import binary as kb
from fastcal.inputs.binning import kernel_edges
assert torch.cuda.is_available()
g = torch.Generator(device="cuda").manual_seed(0)
n = 10_000_000
p = torch.rand(n, generator=g, device="cuda")
y = (torch.rand(n, generator=g, device="cuda") < p).to(torch.uint8)
p[123_457] = float("nan"); p[9_000_001] = 2.0
assert fc.is_device_array(p) and fc.as_device_array("p", p).shape == (n,)
ph, yh = p.cpu().numpy(), y.cpu().numpy()
for n_bins in (1, 10, 15, 47):
    for right in (False, True):
        e = kernel_edges(n_bins, "<f4")
        gpu = fc.fill_binary(y, p, e, True, right, True, 0.0, True)
        cpu = mc.named(mc.BINARY, kb.fill_parallel(ph, yh, e, True, right, True, 0.0, True, 8))
        assert list(gpu) == list(cpu)
        for a, b in zip(gpu.values(), cpu.values()):
            assert a.dtype == b.dtype and a.shape == b.shape
            if b.dtype.kind == "i":
                assert np.array_equal(a, b), (n_bins, right, a, b)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
        assert gpu["checks"][kb.N_CHECK_KINDS + kb.CHECK_NAN_P] == 123_457
# float64 tensors, logits, host chunks
p64 = p.double().nan_to_num(0.5).clamp(0, 1)
e = kernel_edges(15, "<f8")
gpu = fc.fill_binary(y, p64, e, True, False, True, 0.0, True)
chunked = fc.fill_binary(y.cpu().numpy(), p64.cpu().numpy(), e, True, False, True, 0.0, True,
                         chunk_rows=3_000_000)
for name in gpu:
    np.testing.assert_allclose(gpu[name], chunked[name], rtol=1e-12)
z = torch.randn(n, generator=g, device="cuda", dtype=torch.float64) * 3
gl = fc.fill_binary_logits(y, z, e, True, False, 0.0)
assert gl["counts"][:15, 0].sum() == n
# multi-class, K = 10, 2e6 rows
P = torch.softmax(torch.randn(2_000_000, 10, generator=g, device="cuda") * 2, dim=1)
yk = torch.multinomial(P, 1, generator=g).squeeze(1)
e = kernel_edges(15, "<f4")
gpu = fc.fill_multiclass(yk, P, e, True, False, 0.0, False, True, True)
cpu = mc.fill_multiclass(yk.cpu().numpy(), P.cpu().numpy(), e, True, False, 0.0, False, True, True, 8)
assert list(gpu) == list(cpu)
for a, b in zip(gpu.values(), cpu.values()):
    if b.dtype.kind == "i":
        assert np.array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * np.abs(b).max())
print("ok")
""")


def test_reports_of_torch_tensors_ace_and_intervals_on_the_gpu():
    """The default report (ACE) of K classes and logits, and bootstrap intervals,
    of torch CUDA tensors over many blocks: the CPU report of a host copy."""
    _run("""
import numpy as np, torch, fastcal
from fastcal.backends import cuda as fc
from fastcal._kernels import bootstrap as kboot
from fastcal.inputs.binning import kernel_edges
g = torch.Generator(device="cuda").manual_seed(1)
def same(got, ref):
    for name in ("n", "ece", "ace", "ecd", "brier"):
        a, b = getattr(got, name), getattr(ref, name)
        assert a == b or abs(a - b) <= 1e-12 * abs(b), (name, a, b)
    assert np.array_equal(got.bins["count"], ref.bins["count"])
P = torch.softmax(torch.randn(2_000_000, 10, generator=g, device="cuda") * 2, dim=1)
y = torch.multinomial(P, 1, generator=g).squeeze(1)
P[1000:5000] = P[1000]  # ties across a group boundary
same(fastcal.calibration_report(y, P), fastcal.calibration_report(y.cpu().numpy(), P.cpu().numpy()))
z = torch.randn(3_000_000, generator=g, device="cuda", dtype=torch.float64) * 3
yb = (torch.rand(3_000_000, generator=g, device="cuda", dtype=torch.float64) < torch.sigmoid(z)).to(torch.uint8)
same(fastcal.calibration_report(yb, z, logits=True),
     fastcal.calibration_report(yb.cpu().numpy(), z.cpu().numpy(), logits=True))
p = torch.rand(3_000_000, generator=g, device="cuda")
yp = (torch.rand(3_000_000, generator=g, device="cuda") < p).to(torch.uint8)
got = fastcal.calibration_report(yp, p, n_bins=15, ci=0.9, n_boot=100, ace=False)
ref = fastcal.calibration_report(yp.cpu().numpy(), p.cpu().numpy(), n_bins=15, ci=0.9, n_boot=100, ace=False)
for name in ("ece", "esce", "mce"):
    np.testing.assert_allclose(got.intervals[name], ref.intervals[name], rtol=1e-12)
e = kernel_edges(15, "<f4")
c = np.zeros((100, 15, 3), np.int64); s = np.zeros((100, 15))
kboot.boot_fill_parallel(p.cpu().numpy(), yp.cpu().numpy(), 0, e, True, False, 0, 8, c, s)
boot = fc.fill_bootstrap(yp, p, 0, e, True, False, 0, 100)
gc, gs = boot["boot_counts"], boot["boot_sums"]
assert np.array_equal(gc, c)
np.testing.assert_allclose(gs, s, rtol=1e-12)
print("ok")
""")

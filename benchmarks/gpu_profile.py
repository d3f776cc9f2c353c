"""Where the time of a GPU report goes: every CUDA kernel and copy of one call,
from the CUDA profiler that torch.profiler reads (numba-cuda's kernels included).

Usage on the GPU machine: ``python3 benchmarks/gpu_profile.py [N] [N_MC]``
(defaults 1e9 binary predictions and 1e8 rows of K = 10). Prints, per report,
the wall time of a warm call and the device time of each kernel, largest first.
"""

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import fastcal


def profiled(name, call):
    call()  # warm: compiles, allocates the staging buffers
    torch.cuda.synchronize()
    t = time.perf_counter()
    call()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    print(f"\n== {name}: warm call {wall * 1e3:.1f} ms wall")
    rows = [e for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in rows)
    print(f"device time of all kernels and copies: {total / 1e3:.1f} ms")
    for e in rows[:12]:
        print(f"{e.device_time_total / 1e3:9.2f} ms  x{e.count:<4d} {e.key[:90]}")


def main():
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10**9
    n_mc = int(float(sys.argv[2])) if len(sys.argv) > 2 else 10**8
    g = torch.Generator(device="cuda").manual_seed(0)
    p = torch.rand(n, generator=g, device="cuda")
    y = (torch.rand(n, generator=g, device="cuda") < p).to(torch.uint8)
    profiled(f"binary default report (ACE), n={n:.0e}",
             lambda: fastcal.calibration_report(y, p, n_bins=15))
    profiled(f"binary report, ace=False, n={n:.0e}",
             lambda: fastcal.calibration_report(y, p, n_bins=15, ace=False))
    p = y = None  # free the GPU memory
    P = torch.softmax(torch.randn(n_mc, 10, generator=g, device="cuda") * 2, dim=1)
    yk = torch.multinomial(P, 1, generator=g).squeeze(1)
    profiled(f"K = 10 default report (ACE), n={n_mc:.0e}",
             lambda: fastcal.calibration_report(yk, P, n_bins=15))
    profiled(f"K = 10 report, ace=False, n={n_mc:.0e}",
             lambda: fastcal.calibration_report(yk, P, n_bins=15, ace=False))


if __name__ == "__main__":
    main()

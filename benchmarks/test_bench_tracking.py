"""Batched EKF / UKF (one compiled call for R runs x T steps) against filterpy, per run-step.

Run::

    pytest benchmarks/test_bench_tracking.py -s            # wall clock
    pytest benchmarks/test_bench_tracking.py -s --benchmark-timer time.process_time

The batched filters run R = 1000 runs x T = 100 steps of the default scenario;
filterpy, which costs tens to hundreds of microseconds per step in Python, runs
the first FP_RUNS runs of the same data. Times are normalised per run-step, the
JIT is warmed before timing, and each benchmark checks its result against the
other implementation (1e-9). The last test prints the ratios.
"""

import math
import os
import platform

import numba
import numpy as np
import pytest

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is not installed (pip install '.[bench]')")
pytest.importorskip("filterpy", reason="filterpy is not installed (pip install '.[bench]'); nothing to race against")

from filterpy.kalman import ExtendedKalmanFilter as FpEKF  # noqa: E402
from filterpy.kalman import MerweScaledSigmaPoints  # noqa: E402
from filterpy.kalman import UnscentedKalmanFilter as FpUKF  # noqa: E402

from tracking import ExtendedKalmanFilter, UnscentedKalmanFilter  # noqa: E402
from tracking.scenario import Scenario, simulate  # noqa: E402

RUNS, STEPS = 1000, 100
FP_RUNS = 10
CHECK_RUNS = 3
UKF = dict(alpha=1.0, beta=2.0, kappa=-1.0)

PER_STEP = {}  # name -> seconds per run-step (minimum over rounds)


@pytest.fixture(scope="module")
def data():
    sc = Scenario(runs=RUNS, steps=STEPS, seed=0)
    return sc, simulate(sc)


# ------------------------------------------------------------------ filterpy side (plain numpy models)
def _wrap(a):
    return math.pi - ((math.pi - a) % (2.0 * math.pi))


def _models(sc):
    sx, sy = sc.sensor.position

    def hx(x):
        dx, dy = x[0] - sx, x[2] - sy
        return np.array([math.hypot(dx, dy), math.atan2(dy, dx)])

    def jac(x):
        dx, dy = x[0] - sx, x[2] - sy
        r2 = dx * dx + dy * dy
        r = math.sqrt(r2)
        return np.array([[dx / r, 0.0, dy / r, 0.0], [-dy / r2, 0.0, dx / r2, 0.0]])

    def residual_z(a, b):
        d = a - b
        d[1] = _wrap(d[1])
        return d

    def z_mean(sigmas, Wm):
        # weighted mean of differences about the centre point, bearing wrapped (as the kernel)
        ref = sigmas[0]
        d = sigmas[1:] - ref
        d[:, 1] = np.pi - np.mod(np.pi - d[:, 1], 2.0 * np.pi)
        out = ref + Wm[1:] @ d
        out[1] = _wrap(out[1])
        return out

    def x_mean(sigmas, Wm):
        ref = sigmas[0]
        return ref + Wm[1:] @ (sigmas[1:] - ref)

    return hx, jac, residual_z, z_mean, x_mean


def filterpy_ekf(sc, sim, runs):
    hx, jac, residual_z, _, _ = _models(sc)
    means = np.empty((runs, STEPS, 4))
    covs = np.empty((runs, STEPS, 4, 4))
    for r in range(runs):
        f = FpEKF(dim_x=4, dim_z=2)
        f.x, f.P, f.F, f.Q, f.R = sim.x0[r].copy(), sim.P0.copy(), sc.motion.F, sc.motion.Q, sc.sensor.R
        for k in range(STEPS):
            f.predict()
            f.update(sim.measurements[r, k], jac, hx, residual=residual_z)
            means[r, k], covs[r, k] = f.x, f.P
    return means, covs


def filterpy_ukf(sc, sim, runs):
    hx, _, residual_z, z_mean, x_mean = _models(sc)
    F = sc.motion.F
    means = np.empty((runs, STEPS, 4))
    covs = np.empty((runs, STEPS, 4, 4))
    for r in range(runs):
        points = MerweScaledSigmaPoints(4, **UKF)
        f = FpUKF(dim_x=4, dim_z=2, dt=sc.dt, hx=hx, fx=lambda x, dt: F @ x, points=points,
                  x_mean_fn=x_mean, z_mean_fn=z_mean, residual_z=residual_z)
        f.x, f.P, f.Q, f.R = sim.x0[r].copy(), sim.P0.copy(), sc.motion.Q, sc.sensor.R
        for k in range(STEPS):
            f.predict()
            f.update(sim.measurements[r, k])
            means[r, k], covs[r, k] = f.x, f.P
    return means, covs


def _record(benchmark, name, run_steps):
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        PER_STEP[name] = stats.stats.min / run_steps
        benchmark.extra_info["us_per_run_step"] = 1e6 * PER_STEP[name]


# ------------------------------------------------------------------ benchmarks
def test_bench_batched_ekf(benchmark, data):
    sc, sim = data
    flt = ExtendedKalmanFilter(sc.motion, sc.sensor)
    flt.run(sim.x0[:2], sim.P0, sim.measurements[:2])  # compile / load the cached kernel
    out = benchmark.pedantic(flt.run, args=(sim.x0, sim.P0, sim.measurements), rounds=7, warmup_rounds=1)
    _record(benchmark, "batched EKF", RUNS * STEPS)
    ref_means, ref_covs = filterpy_ekf(sc, sim, CHECK_RUNS)
    np.testing.assert_allclose(out.means[:CHECK_RUNS], ref_means, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out.covs[:CHECK_RUNS], ref_covs, rtol=0, atol=1e-9)


def test_bench_filterpy_ekf(benchmark, data):
    sc, sim = data
    means, covs = benchmark.pedantic(filterpy_ekf, args=(sc, sim, FP_RUNS), rounds=3, warmup_rounds=1)
    _record(benchmark, "filterpy EKF", FP_RUNS * STEPS)
    out = ExtendedKalmanFilter(sc.motion, sc.sensor).run(sim.x0[:FP_RUNS], sim.P0, sim.measurements[:FP_RUNS])
    np.testing.assert_allclose(means, out.means, rtol=0, atol=1e-9)
    np.testing.assert_allclose(covs, out.covs, rtol=0, atol=1e-9)


def test_bench_batched_ukf(benchmark, data):
    sc, sim = data
    flt = UnscentedKalmanFilter(sc.motion, sc.sensor, **UKF)
    flt.run(sim.x0[:2], sim.P0, sim.measurements[:2])
    out = benchmark.pedantic(flt.run, args=(sim.x0, sim.P0, sim.measurements), rounds=7, warmup_rounds=1)
    _record(benchmark, "batched UKF", RUNS * STEPS)
    ref_means, ref_covs = filterpy_ukf(sc, sim, CHECK_RUNS)
    np.testing.assert_allclose(out.means[:CHECK_RUNS], ref_means, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out.covs[:CHECK_RUNS], ref_covs, rtol=0, atol=1e-9)


def test_bench_filterpy_ukf(benchmark, data):
    sc, sim = data
    means, covs = benchmark.pedantic(filterpy_ukf, args=(sc, sim, FP_RUNS), rounds=3, warmup_rounds=1)
    _record(benchmark, "filterpy UKF", FP_RUNS * STEPS)
    out = UnscentedKalmanFilter(sc.motion, sc.sensor, **UKF).run(sim.x0[:FP_RUNS], sim.P0, sim.measurements[:FP_RUNS])
    np.testing.assert_allclose(means, out.means, rtol=0, atol=1e-9)
    np.testing.assert_allclose(covs, out.covs, rtol=0, atol=1e-9)


def test_report_ratios(request):
    needed = ("batched EKF", "filterpy EKF", "batched UKF", "filterpy UKF")
    if not all(k in PER_STEP for k in needed):
        pytest.skip("timings missing (benchmarks disabled or deselected)")
    timer = request.config.getoption("benchmark_timer", default=None)
    lines = [
        "",
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
        f"numba threads {numba.get_num_threads()}, load average {os.getloadavg()[0]:.2f}; timer {timer}",
        f"batched: R={RUNS} runs x T={STEPS} steps in one call; filterpy: {FP_RUNS} runs x {STEPS} steps",
    ]
    for f in ("EKF", "UKF"):
        fast, slow = PER_STEP[f"batched {f}"], PER_STEP[f"filterpy {f}"]
        lines.append(
            f"{f}: filterpy {1e6 * slow:.1f} us/step, batched {1e6 * fast:.3f} us/run-step, "
            f"ratio {slow / fast:.0f}x"
        )
    print("\n".join(lines))

"""Batched EKF / UKF (one compiled call for R runs x T steps) against filterpy, per run-step.

Run::

    pytest benchmarks/test_bench_tracking.py -s            # wall clock
    pytest benchmarks/test_bench_tracking.py -s --benchmark-timer time.process_time

The batched filters run R = 1000 runs x T = 100 steps of the default scenario
(2-D constant velocity + range-bearing) and of a 3-D coordinated turn seen by a
range-bearing-elevation radar (7 states, 3 measurements, nonlinear motion);
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

from tracking import (  # noqa: E402
    CoordinatedTurn,
    ExtendedKalmanFilter,
    RangeBearingElevationSensor,
    UnscentedKalmanFilter,
)
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


# ------------------------------------------------------------------ 3-D coordinated turn + range-bearing-elevation
def _ct3d_scenario():
    return Scenario(
        runs=RUNS, steps=STEPS, seed=1,
        motion=CoordinatedTurn(q=0.05, q_turn=1e-4, dt=1.0, dims=3),
        sensor=RangeBearingElevationSensor(sigma_r=2.0, sigma_theta=math.radians(1.0),
                                           sigma_phi=math.radians(1.0), position=(-300.0, 100.0, 0.0)),
        truth0=[0.0, 10.0, 0.0, 0.0, 200.0, 1.0, 0.05],
        P0=np.diag([25.0, 4.0, 25.0, 4.0, 25.0, 4.0, 0.02 ** 2]),
        name="ct3d",
    )


@pytest.fixture(scope="module")
def data3d():
    sc = _ct3d_scenario()
    return sc, simulate(sc)


def _ct3d_helpers(sc):
    motion, sensor = sc.motion, sc.sensor

    def residual_z(a, b):
        d = a - b
        d[1] = _wrap(d[1])
        d[2] = _wrap(d[2])
        return d

    def z_mean(sigmas, Wm):
        ref = sigmas[0]
        d = sigmas[1:] - ref
        d[:, 1:] = np.pi - np.mod(np.pi - d[:, 1:], 2.0 * np.pi)
        out = ref + Wm[1:] @ d
        out[1] = _wrap(out[1])
        out[2] = _wrap(out[2])
        return out

    def x_mean(sigmas, Wm):
        ref = sigmas[0]
        return ref + Wm[1:] @ (sigmas[1:] - ref)

    return motion, sensor, residual_z, z_mean, x_mean


def filterpy_ekf_ct3d(sc, sim, runs):
    motion, sensor, residual_z, _, _ = _ct3d_helpers(sc)
    n = motion.ndim
    means = np.empty((runs, STEPS, n))
    covs = np.empty((runs, STEPS, n, n))
    for r in range(runs):
        f = FpEKF(dim_x=n, dim_z=3)
        f.x, f.P, f.Q, f.R = sim.x0[r].copy(), sim.P0.copy(), motion.Q, sensor.R

        def predict_x(u=0, f=f):
            f.x = motion.transition(f.x)

        f.predict_x = predict_x
        for k in range(STEPS):
            f.F = motion.jacobian(f.x)
            f.predict()
            f.update(sim.measurements[r, k], sensor.jacobian, sensor.h, residual=residual_z)
            means[r, k], covs[r, k] = f.x, f.P
    return means, covs


def filterpy_ukf_ct3d(sc, sim, runs):
    motion, sensor, residual_z, z_mean, x_mean = _ct3d_helpers(sc)
    n = motion.ndim
    means = np.empty((runs, STEPS, n))
    covs = np.empty((runs, STEPS, n, n))
    for r in range(runs):
        points = MerweScaledSigmaPoints(n, alpha=1.0, beta=2.0, kappa=3.0 - n)
        f = FpUKF(dim_x=n, dim_z=3, dt=motion.dt, hx=sensor.h, fx=lambda x, dt: motion.transition(x),
                  points=points, x_mean_fn=x_mean, z_mean_fn=z_mean, residual_z=residual_z)
        f.x, f.P, f.Q, f.R = sim.x0[r].copy(), sim.P0.copy(), motion.Q, sensor.R
        for k in range(STEPS):
            f.predict()
            f.update(sim.measurements[r, k])
            means[r, k], covs[r, k] = f.x, f.P
    return means, covs


def _close(a, b):
    scale = np.maximum(1.0, np.abs(b))
    assert np.all(np.abs(a - b) <= 1e-9 * scale)


@pytest.mark.parametrize("kind", ["EKF", "UKF"])
def test_bench_batched_ct3d(benchmark, data3d, kind):
    sc, sim = data3d
    cls = ExtendedKalmanFilter if kind == "EKF" else UnscentedKalmanFilter
    flt = cls(sc.motion, sc.sensor)
    flt.run(sim.x0[:2], sim.P0, sim.measurements[:2])
    out = benchmark.pedantic(flt.run, args=(sim.x0, sim.P0, sim.measurements), rounds=5, warmup_rounds=1)
    _record(benchmark, f"batched CT3D {kind}", RUNS * STEPS)
    ref = (filterpy_ekf_ct3d if kind == "EKF" else filterpy_ukf_ct3d)(sc, sim, CHECK_RUNS)
    _close(out.means[:CHECK_RUNS], ref[0])
    _close(out.covs[:CHECK_RUNS], ref[1])


@pytest.mark.parametrize("kind", ["EKF", "UKF"])
def test_bench_filterpy_ct3d(benchmark, data3d, kind):
    sc, sim = data3d
    fn = filterpy_ekf_ct3d if kind == "EKF" else filterpy_ukf_ct3d
    benchmark.pedantic(fn, args=(sc, sim, FP_RUNS), rounds=3, warmup_rounds=1)
    _record(benchmark, f"filterpy CT3D {kind}", FP_RUNS * STEPS)


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
    pairs = [("EKF", "EKF"), ("UKF", "UKF")]
    if all(f"{a} CT3D {k}" in PER_STEP for a in ("batched", "filterpy") for k in ("EKF", "UKF")):
        pairs += [("CT3D EKF", "CT3D EKF"), ("CT3D UKF", "CT3D UKF")]
    for f, _ in pairs:
        fast, slow = PER_STEP[f"batched {f}"], PER_STEP[f"filterpy {f}"]
        lines.append(
            f"{f}: filterpy {1e6 * slow:.1f} us/step, batched {1e6 * fast:.3f} us/run-step, "
            f"ratio {slow / fast:.0f}x"
        )
    print("\n".join(lines))

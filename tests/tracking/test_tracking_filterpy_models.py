"""filterpy's EKF and UKF with the same f / h agree with the batched kernels at every step (1e-9)
on the 3-D radar and the coordinated-turn scenarios."""

import math
import warnings

import numpy as np
import pytest

from tracking import ExtendedKalmanFilter, UnscentedKalmanFilter
from tracking.scenario import make_scenario, simulate

pytest.importorskip("filterpy")
from filterpy.kalman import ExtendedKalmanFilter as FpEKF  # noqa: E402
from filterpy.kalman import MerweScaledSigmaPoints  # noqa: E402
from filterpy.kalman import UnscentedKalmanFilter as FpUKF

TOL = 1e-9
RUNS, STEPS = 3, 40


def wrap(a):
    return math.pi - ((math.pi - a) % (2 * math.pi))


def problem(name):
    sc = make_scenario(name, runs=RUNS, steps=STEPS, seed=4, missing=0.05)
    return sc, simulate(sc)


def helpers(sensor):
    angles = tuple(sensor.angles)

    def residual_z(a, b):
        d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
        for i in angles:
            d[i] = wrap(d[i])
        return d

    def z_mean(sigmas, Wm):
        ref = sigmas[0]
        out = ref + sum(w * residual_z(s, ref) for w, s in zip(Wm[1:], sigmas[1:]))
        for i in angles:
            out[i] = wrap(out[i])
        return out

    def x_mean(sigmas, Wm):
        ref = sigmas[0]
        return ref + sum(w * (s - ref) for w, s in zip(Wm[1:], sigmas[1:]))

    return residual_z, z_mean, x_mean


@pytest.mark.parametrize("name", ["radar-3d", "turn"])
def test_batched_ekf_equals_filterpy_ekf_every_step(name):
    sc, sim = problem(name)
    motion, sensor = sc.motion, sc.sensor
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ExtendedKalmanFilter(motion, sensor).run(sim.x0, sim.P0, sim.measurements)
    residual_z, _, _ = helpers(sensor)
    n, m = motion.ndim, sensor.ndim
    assert np.isnan(sim.measurements).any()
    for r in range(RUNS):
        f = FpEKF(dim_x=n, dim_z=m)
        f.x, f.P, f.Q, f.R = sim.x0[r].copy(), sim.P0.copy(), motion.Q, sensor.R

        def predict_x(u=0, f=f):
            f.x = motion.transition(f.x)

        f.predict_x = predict_x  # nonlinear f; filterpy's default is F @ x
        for k in range(STEPS):
            f.F = motion.jacobian(f.x)
            f.predict()
            z = sim.measurements[r, k]
            if np.isfinite(z).all():
                f.update(z, sensor.jacobian, sensor.h, residual=residual_z)
                np.testing.assert_allclose(out.innovations[r, k], f.y, rtol=0, atol=TOL)
                np.testing.assert_allclose(out.innovation_covs[r, k], f.S, rtol=0, atol=TOL)
            np.testing.assert_allclose(out.means[r, k], f.x, rtol=0, atol=TOL * max(1.0, np.abs(f.x).max()))
            np.testing.assert_allclose(out.covs[r, k], f.P, rtol=0, atol=TOL * max(1.0, np.abs(f.P).max()))


@pytest.mark.parametrize("name", ["radar-3d", "turn"])
@pytest.mark.parametrize("alpha,beta,kappa", [(1.0, 2.0, None), (0.5, 2.0, 0.0)])
def test_batched_ukf_equals_filterpy_ukf_every_step(name, alpha, beta, kappa):
    # filterpy sends sigma points through fx in predict and redraws them from the
    # prior for the update, as the kernel does; its P - K S K^T equals the kernel's
    # Joseph-like form for the optimal gain. Means are differences about the centre
    # sigma point in both (angles wrapped).
    sc, sim = problem(name)
    motion, sensor = sc.motion, sc.sensor
    n, m = motion.ndim, sensor.ndim
    kappa = 3.0 - n if kappa is None else kappa
    out = UnscentedKalmanFilter(motion, sensor, alpha=alpha, beta=beta, kappa=kappa).run(
        sim.x0, sim.P0, sim.measurements)
    residual_z, z_mean, x_mean = helpers(sensor)
    for r in range(RUNS):
        points = MerweScaledSigmaPoints(n, alpha=alpha, beta=beta, kappa=kappa)
        f = FpUKF(dim_x=n, dim_z=m, dt=motion.dt, hx=sensor.h, fx=lambda x, dt: motion.transition(x),
                  points=points, x_mean_fn=x_mean, z_mean_fn=z_mean, residual_z=residual_z)
        f.x, f.P, f.Q, f.R = sim.x0[r].copy(), sim.P0.copy(), motion.Q, sensor.R
        for k in range(STEPS):
            f.predict()
            z = sim.measurements[r, k]
            if np.isfinite(z).all():
                f.update(z)
            np.testing.assert_allclose(out.means[r, k], f.x, rtol=0, atol=TOL * max(1.0, np.abs(f.x).max()))
            np.testing.assert_allclose(out.covs[r, k], f.P, rtol=0, atol=TOL * max(1.0, np.abs(f.P).max()))

"""Generic models and kernels: Jacobians, user models, singular geometry, scenarios."""

import math
import warnings

import numpy as np
import pytest

from tests.tracking.tracking_user_models import Drift, LogRange
from tracking import (
    ConstantAcceleration,
    ConstantVelocity,
    CoordinatedTurn,
    ExtendedKalmanFilter,
    GaussianState,
    PositionSensor,
    RangeBearingElevationSensor,
    RangeBearingRangeRateSensor,
    RangeBearingSensor,
    Scenario,
    UnscentedKalmanFilter,
    evaluate,
    simulate,
)
from tracking.filters import FAILED, MISSED, OK, SINGULAR
from tracking.scenario import make_scenario, scenario_names


def fd_jacobian(fun, x, eps=1e-6, wrap_rows=()):
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(len(x)):
        dx = np.zeros_like(x)
        dx[j] = eps
        d = fun(x + dx) - fun(x - dx)
        for a in wrap_rows:
            d[a] = math.remainder(d[a], 2 * math.pi)
        cols.append(d / (2 * eps))
    return np.array(cols).T


@pytest.mark.parametrize("motion,x", [
    (ConstantVelocity(dims=3), [1.0, 2.0, 3.0, -1.0, 5.0, 0.5]),
    (ConstantAcceleration(dt=0.5), [1.0, 2.0, 0.3, -1.0, 0.5, -0.2]),
    (CoordinatedTurn(dt=2.0), [1.0, 3.0, 2.0, -1.0, 0.2]),
    (CoordinatedTurn(dt=2.0), [1.0, 3.0, 2.0, -1.0, 1e-7]),  # the series branch near omega = 0
    (CoordinatedTurn(dt=1.0, dims=3), [1.0, 3.0, 2.0, -1.0, 7.0, 0.4, -0.3]),
])
def test_motion_jacobians_match_finite_differences(motion, x):
    J = motion.jacobian(x)
    np.testing.assert_allclose(J, fd_jacobian(motion.transition, x), atol=1e-7)


def test_coordinated_turn_is_continuous_at_zero_rate_and_exact_for_a_quarter_turn():
    ct = CoordinatedTurn(dt=1.0)
    cv = ConstantVelocity(dt=1.0)
    w = 0.999e-4  # series branch; compare with the closed form in numpy
    s, c = math.sin(w), math.cos(w)
    closed = [1.0 + s / w * 2.0 - (1 - c) / w * 4.0, c * 2.0 - s * 4.0, 3.0 + (1 - c) / w * 2.0 + s / w * 4.0,
              s * 2.0 + c * 4.0, w]
    np.testing.assert_allclose(ct.transition([1.0, 2.0, 3.0, 4.0, w]), closed, rtol=1e-12)
    np.testing.assert_allclose(ct.transition([1.0, 2.0, 3.0, 4.0, 0.0])[:4], cv.transition([1.0, 2.0, 3.0, 4.0]))
    # radius v / omega: a quarter turn from the origin heading +x ends at (r, r) heading +y
    w = math.pi / 2
    np.testing.assert_allclose(ct.transition([0.0, 1.0, 0.0, 0.0, w]), [1 / w, 0.0, 1 / w, 1.0, w], atol=1e-15)


@pytest.mark.parametrize("sensor,x", [
    (RangeBearingSensor(position=(1.0, -2.0)), [4.0, 1.0, 2.0, 0.5]),
    (RangeBearingElevationSensor(position=(1.0, -2.0, 0.5)), [4.0, 1.0, 2.0, 0.5, 3.0, -0.2]),
    (RangeBearingRangeRateSensor(position=(1.0, -2.0)), [4.0, 1.0, 2.0, 0.5]),
    (RangeBearingSensor(position=(5.0, 0.0)), [-3.0, 0.0, 1e-3, 0.0]),  # bearing near +-pi
    (PositionSensor(mapping=(0, 3)), [4.0, 1.0, 2.0, 0.5, 3.0, -0.2]),
])
def test_sensor_jacobians_match_finite_differences(sensor, x):
    H = sensor.jacobian(x)
    np.testing.assert_allclose(H, fd_jacobian(sensor.h, x, wrap_rows=sensor.angles), atol=1e-7)


def test_numerical_jacobian_when_h_gives_none():
    s = LogRange()
    x = np.array([1.5, 0.2])
    analytic = np.array([[(1.5 - 3.0) / ((1.5 - 3.0) ** 2 + 1.0), 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(s.jacobian(x), analytic, atol=1e-9)
    m = Drift()
    a = math.exp(-0.3 * 0.5)
    np.testing.assert_allclose(m.jacobian(x), [[1.0, (1 - a) / 0.3], [0.0, a]], atol=1e-9)


def test_user_model_pair_runs_batched_and_matches_a_numpy_ekf():
    m, s = Drift(), LogRange()
    rng = np.random.default_rng(5)
    runs, steps = 3, 15
    x0 = rng.normal(size=(runs, 2))
    P0 = np.diag([1.0, 0.5])
    zs = rng.normal(size=(runs, steps, 2)) * 0.3 + [0.5, 1.0]
    out = ExtendedKalmanFilter(m, s).run(x0, P0, zs)
    assert (out.status == OK).all()
    for r in range(runs):
        x, P = x0[r], P0
        for k in range(steps):
            F = m.jacobian(x)
            x, P = m.transition(x), F @ P @ F.T + m.Q
            H = s.jacobian(x)
            S = H @ P @ H.T + s.R
            K = P @ H.T @ np.linalg.inv(S)
            x = x + K @ (zs[r, k] - s.h(x))
            IKH = np.eye(2) - K @ H
            P = IKH @ P @ IKH.T + K @ s.R @ K.T
            np.testing.assert_allclose(out.means[r, k], x, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(out.covs[r, k], P, rtol=1e-10, atol=1e-10)
    ukf = UnscentedKalmanFilter(m, s).run(x0, P0, zs)
    assert (ukf.status == OK).all() and np.isfinite(ukf.means).all()


def test_target_on_the_sensor_is_reported_not_raised():
    # truth and prediction exactly at the sensor: range 0, the Jacobian divides by zero
    m, s = ConstantVelocity(), RangeBearingSensor(position=(2.0, 3.0))
    x0 = np.array([[1.0, 1.0, 3.0, 0.0], [10.0, 0.0, 3.0, 1.0]])  # run 0 predicted onto the sensor
    zs = np.array([[[0.0, 0.0], [0.5, 0.1]], [[8.0, 0.0], [8.1, 0.1]]])
    flt = ExtendedKalmanFilter(m, s)
    with pytest.warns(RuntimeWarning, match=r"singular geometry .* run 0 at step 0"):
        out = flt.run(x0, np.eye(4), zs)
    assert out.status.tolist() == [[SINGULAR, OK], [OK, OK]]
    np.testing.assert_allclose(out.means[0, 0], m.transition(x0[0]))  # predict only at the singular step
    assert np.isfinite(out.means).all()
    with pytest.raises(np.linalg.LinAlgError, match="singular geometry"):
        flt.update(GaussianState(np.array([2.0, 0.0, 3.0, 0.0]), np.eye(4)), [0.0, 0.0])
    # the 3-D radar straight above itself: rho = 0
    s3 = RangeBearingElevationSensor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out3 = ExtendedKalmanFilter(ConstantVelocity(dims=3), s3).run(
            np.array([0.0, 0.0, 0.0, 0.0, 5.0, 0.0]), np.eye(6), np.array([[5.0, 0.0, math.pi / 2]]))
    assert out3.status.tolist() == [[SINGULAR]]


def test_a_covariance_that_stops_being_positive_definite_ends_that_run_only():
    m, s = ConstantVelocity(), PositionSensor(sigma=1.0)
    flt = UnscentedKalmanFilter(m, s)
    bad = np.stack([np.eye(4), np.eye(4)])
    zs = np.zeros((2, 3, 2))
    out = flt._run_kernel(np.zeros((2, 4)), bad, zs)[0]  # a valid start: everything OK
    assert (out.status == OK).all()
    # an R that is positive definite but P0 slightly indefinite in run 1 (bypassing run()'s check)
    bad[1, 0, 0] = -1.0
    out, status = flt._run_kernel(np.zeros((2, 4)), bad, zs)
    assert (status[0] == OK).all()
    assert (status[1] == FAILED).all() and np.isnan(out.means[1]).all()
    assert out.failed.tolist() == [-1, 0]


def test_missing_measurements_are_status_missed():
    sc = Scenario(runs=3, steps=10, seed=1, missing=0.3)
    sim = simulate(sc)
    out = ExtendedKalmanFilter(sc.motion, sc.sensor).run(sim.x0, sim.P0, sim.measurements)
    np.testing.assert_array_equal(out.status == MISSED, np.isnan(sim.measurements[..., 0]))


def test_scenarios_are_named_seeded_and_shaped_by_their_models():
    assert scenario_names() == ["range-bearing", "radar-3d", "turn"]
    for name, (n, m) in {"range-bearing": (4, 2), "radar-3d": (6, 3), "turn": (5, 3)}.items():
        sc = make_scenario(name, runs=4, steps=6, seed=2)
        a, b = simulate(sc), simulate(sc)
        np.testing.assert_array_equal(a.measurements, b.measurements)
        assert a.truth.shape == (4, 6, n) and a.measurements.shape == (4, 6, m) and a.x0.shape == (4, n)
    with pytest.raises(ValueError, match="scenario must be one of"):
        make_scenario("nope")


def test_turn_scenario_truth_follows_the_coordinated_turn():
    sc = make_scenario("turn", runs=2, steps=30, seed=0)
    sim = simulate(sc)
    speed = np.hypot(sim.truth[..., 1], sim.truth[..., 3])
    heading = np.unwrap(np.arctan2(sim.truth[..., 3], sim.truth[..., 1]), axis=1)
    assert abs(speed.mean() - 10.0) < 1.0
    assert 2.0 < heading[:, -1].mean() - heading[:, 0].mean() < 4.0  # about 0.1 rad/s for 29 s


def test_evaluate_on_states_that_are_not_x_vx_y_vy():
    sc = make_scenario("radar-3d", runs=20, steps=10, seed=3)
    sim = simulate(sc)
    c = evaluate(UnscentedKalmanFilter(sc.motion, sc.sensor).run(sim.x0, sim.P0, sim.measurements), sim.truth)
    assert c.anees.shape == (10,) and np.isfinite(c.rmse) and c.rmse > 0
    run = ExtendedKalmanFilter(Drift(), LogRange()).run(np.zeros(2), np.eye(2), np.zeros((3, 4, 2)))
    c2 = evaluate(run, np.zeros((3, 4, 2)))
    assert np.isfinite(c2.rmse)  # position (0,) from the user model


def test_scenario_takes_user_models_and_checks_them():
    sc = Scenario(runs=3, steps=4, motion=Drift(), sensor=LogRange(), truth0=[0.0, 1.0], P0=np.eye(2))
    assert simulate(sc).measurements.shape == (3, 4, 2)
    with pytest.raises(ValueError, match="truth0 is required with a custom motion model"):
        Scenario(motion=Drift(), sensor=LogRange())

    class NotASensor:
        ndim = 2

    with pytest.raises(ValueError, match=r"sensor \(NotASensor\) has no R, params, h_jit"):
        Scenario(sensor=NotASensor())
    with pytest.raises(ValueError, match=r"sensor.reads \(0, 7\) must be different state indices in \[0, 4\)"):
        ExtendedKalmanFilter(ConstantVelocity(), RangeBearingSensor(mapping=(0, 7)))
    with pytest.raises(ValueError, match=r"P0 has shape"):
        Scenario(motion=Drift(), sensor=LogRange(), truth0=[0.0, 1.0], P0=np.eye(3))


def test_duck_typed_sensor_without_base_class_works():
    from tests.tracking.tracking_user_models import log_range_h

    class Duck:
        ndim = 2
        R = np.diag([0.01, 0.25])
        params = np.array([3.0])
        h_jit = log_range_h

    a = ExtendedKalmanFilter(Drift(), Duck()).run(np.zeros(2), np.eye(2), np.ones((2, 3, 2)))
    b = ExtendedKalmanFilter(Drift(), LogRange()).run(np.zeros(2), np.eye(2), np.ones((2, 3, 2)))
    np.testing.assert_allclose(a.means, b.means, rtol=1e-12)  # reads defaults to all components

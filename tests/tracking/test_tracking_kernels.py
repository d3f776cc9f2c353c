"""The generated kernel's sparse F P F^T: same bits as the dense product, and a safe fallback."""

import math

import numpy as np

from tests.tracking.tracking_user_models import Kink
from tracking import (
    ConstantVelocity,
    CoordinatedTurn,
    ExtendedKalmanFilter,
    PositionSensor,
    RangeBearingElevationSensor,
    Scenario,
    UnscentedKalmanFilter,
    simulate,
)
from tracking.kernels.factory import jacobian_pattern, kernel_for


def _run_with(flt, pattern, x0, P0, zs):
    """Run ``flt``'s model pair through the kernel generated for ``pattern`` (None: dense)."""
    ms, ss = flt._ms, flt._ss
    kernel = kernel_for(ms.f, ms.F, ss.h, ss.H, n=ms.n, m=ss.m, reads=ss.reads, angles=ss.angles,
                        linear=ms.linear, ukf=flt._use_ukf, f_pattern=pattern)
    runs, steps, m = zs.shape
    n = ms.n
    out = [np.empty((runs, steps, n)), np.empty((runs, steps, n, n)), np.empty((runs, steps, m)),
           np.empty((runs, steps, m, m)), np.empty((runs, steps), np.int8)]
    Wm, Wc, scale = flt._weights()
    kernel(np.ascontiguousarray(x0), np.ascontiguousarray(np.broadcast_to(P0, (runs, n, n))),
           np.ascontiguousarray(zs), ms.dt, ms.Q, ms.params, ss.params, ss.R, Wm, Wc, scale, *out, False,
           np.full(3, -1, np.int64))
    return out


def _ct3d():
    return Scenario(
        runs=6, steps=25, seed=3,
        motion=CoordinatedTurn(q=0.05, q_turn=1e-4, dt=1.0, dims=3),
        sensor=RangeBearingElevationSensor(sigma_r=2.0, position=(-300.0, 100.0, 0.0)),
        truth0=[0.0, 10.0, 0.0, 0.0, 200.0, 1.0, 0.05],
        P0=np.diag([25.0, 4.0, 25.0, 4.0, 25.0, 4.0, 0.02 ** 2]),
        name="ct3d",
    )


def test_pattern_of_builtin_jacobians():
    ct = CoordinatedTurn(dims=3)
    pat = np.array(jacobian_pattern(ct.F_jit, 7, 1.0, ct.params)).reshape(7, 7)
    expected = np.zeros((7, 7), dtype=bool)
    for i, cols in enumerate([(0, 1, 3, 6), (1, 3, 6), (1, 2, 3, 6), (1, 3, 6), (4, 5), (5,), (6,)]):
        expected[i, list(cols)] = True
    np.testing.assert_array_equal(pat, expected)
    cv = ConstantVelocity()
    pat = np.array(jacobian_pattern(cv.F_jit, 4, 1.0, cv.params)).reshape(4, 4)
    np.testing.assert_array_equal(pat, np.kron(np.eye(2), [[1, 1], [0, 1]]).astype(bool))
    assert jacobian_pattern(None, 4, 1.0, cv.params) is None


def test_dense_jacobian_gets_no_pattern():
    from numba import njit

    @njit
    def full(x, dt, p, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = 1.0 + x[i] * x[j]

    assert jacobian_pattern(full, 3, 1.0, np.empty(0)) is None


def test_sparse_predict_gives_the_dense_bits():
    sc = _ct3d()
    sim = simulate(sc)
    for flt in (ExtendedKalmanFilter(sc.motion, sc.sensor),
                ExtendedKalmanFilter(ConstantVelocity(dims=3), sc.sensor),
                UnscentedKalmanFilter(ConstantVelocity(dims=3), sc.sensor)):
        n = flt.dim_x
        x0 = sim.x0[:, :n] if n == 6 else sim.x0
        P0 = sim.P0[:n, :n]
        pattern = jacobian_pattern(flt._ms.F, n, flt._ms.dt, flt._ms.params)
        assert pattern is not None and sum(pattern) < n * n
        sparse = _run_with(flt, pattern, x0, P0, sim.measurements)
        dense = _run_with(flt, None, x0, P0, sim.measurements)
        assert (sparse[4] == 0).all()
        for a, b in zip(sparse, dense):
            np.testing.assert_array_equal(a, b)
        # the public run() takes the sparse kernel and gives the same numbers
        out = flt.run(x0, P0, sim.measurements)
        np.testing.assert_array_equal(out.covs, dense[1])


def test_jacobian_outside_its_pattern_falls_back_to_dense():
    motion = Kink()
    sensor = PositionSensor(sigma=0.5, mapping=(0,))
    flt = ExtendedKalmanFilter(motion, sensor)
    pattern = jacobian_pattern(motion.F_jit, 2, motion.dt, motion.params)
    assert pattern == (True, True, False, True)  # the probes never pass x = 200
    rng = np.random.default_rng(0)
    steps = 30
    x0 = np.array([[190.0, 2.0], [260.0, 1.0]])  # crosses the kink; starts beyond it
    truth = x0[:, None, 0] + np.arange(1, steps + 1) * x0[:, None, 1]
    zs = (truth + 0.5 * rng.standard_normal(truth.shape))[..., None]
    P0 = np.diag([4.0, 1.0])
    sparse = _run_with(flt, pattern, x0, P0, zs)
    dense = _run_with(flt, None, x0, P0, zs)
    for a, b in zip(sparse, dense):
        np.testing.assert_array_equal(a, b)
    # and the dense answer is the textbook EKF with the full F
    x, P = x0[1].copy(), P0.copy()
    Q, R = motion.Q, sensor.R
    for k in range(steps):
        F = np.array([[1.0, 1.0], [0.01 if x[0] > 200.0 else 0.0, 1.0]])
        x = np.array([x[0] + x[1], x[1] + (0.01 * (x[0] - 200.0) if x[0] > 200.0 else 0.0)])
        P = F @ P @ F.T + Q
        S = P[0, 0] + R[0, 0]
        K = P[:, 0] / S
        x = x + K * (zs[1, k, 0] - x[0])
        IKH = np.eye(2) - np.outer(K, [1.0, 0.0])
        P = IKH @ P @ IKH.T + np.outer(K, K) * R[0, 0]
        np.testing.assert_allclose(sparse[0][1, k], x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sparse[1][1, k], P, rtol=1e-10, atol=1e-12)
    assert math.isfinite(sparse[1][0, -1, 1, 0])

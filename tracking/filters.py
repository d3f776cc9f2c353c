"""Extended and unscented Kalman filters, one state at a time or batched over Monte Carlo runs.

Filters are small objects holding a motion model and a sensor; they return new
states and never mutate their inputs. :meth:`run` hands whole batches shaped
``(runs, steps, dim)`` to one compiled kernel (:func:`tracking._kernels.run_batch`),
parallel over runs, with no Python per step.

Both filters use a Joseph-form covariance update, keep covariances symmetric and
solve with Cholesky factors (no explicit inverse). A measurement holding a NaN
means "no detection": predict only.
"""

from typing import NamedTuple
import math
import numbers

import numba
import numpy as np

from tracking import _kernels as _k
from tracking.models import ConstantVelocity

__all__ = ["GaussianState", "FilterRun", "ExtendedKalmanFilter", "UnscentedKalmanFilter"]


class GaussianState(NamedTuple):
    """Gaussian estimate: ``mean`` (n,) and ``cov`` (n, n)."""

    mean: np.ndarray
    cov: np.ndarray


class FilterRun(NamedTuple):
    """Output of :meth:`ExtendedKalmanFilter.run` / :meth:`UnscentedKalmanFilter.run`.

    means : (runs, steps, n) posterior means.
    covs : (runs, steps, n, n) posterior covariances.
    innovations : (runs, steps, m) measurement residuals ``z - zhat`` (NaN if missed).
    innovation_covs : (runs, steps, m, m) innovation covariances ``S`` (NaN if missed).
    """

    means: np.ndarray
    covs: np.ndarray
    innovations: np.ndarray
    innovation_covs: np.ndarray


def _as_float(name, value):
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"{name} must be an array of real numbers; converting it failed: {exc}"
        raise ValueError(msg) from None


def _kernel_array(a):
    """C-contiguous, writable float64: one array type per rank, so the kernel compiles once
    (read-only views from ``np.broadcast_to`` would otherwise type as a second signature)."""
    return np.require(a, dtype=np.float64, requirements=["C", "W"])


def _check_spd(name, covs):
    """covs (..., n, n): finite, symmetric, positive definite; else a ValueError naming the index."""
    lead = covs.shape[:-2]

    def where(mask):
        i = int(np.flatnonzero(mask.reshape(-1))[0])
        return "" if not lead else "[" + ", ".join(str(int(j)) for j in np.unravel_index(i, lead)) + "]"

    finite = np.isfinite(covs).all(axis=(-2, -1))
    if not finite.all():
        msg = f"{name}{where(~finite)} contains NaN or inf; expected a finite symmetric positive definite covariance"
        raise ValueError(msg)
    gap = np.abs(covs - np.swapaxes(covs, -1, -2)).max(axis=(-2, -1))
    scale = np.abs(covs).max(axis=(-2, -1))
    asym = gap > 1e-10 * scale
    if asym.any():
        msg = f"{name}{where(asym)} is not symmetric; expected a symmetric positive definite covariance"
        raise ValueError(msg)
    low = np.linalg.eigvalsh(covs)[..., 0]
    bad = ~(low > 0)
    if bad.any():
        first = float(low.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]])
        msg = (
            f"{name}{where(bad)} is not positive definite (smallest eigenvalue {first:.3g}); "
            "expected a symmetric positive definite covariance"
        )
        raise ValueError(msg)


class _KalmanFilter:
    _use_ukf = False

    def __init__(self, motion, sensor):
        if not isinstance(motion, ConstantVelocity):
            msg = f"motion must be a tracking.models.ConstantVelocity, got {type(motion).__name__}"
            raise ValueError(msg)
        if not hasattr(sensor, "kind") or not hasattr(sensor, "params"):
            msg = f"sensor must be a tracking.models sensor (RangeBearingSensor, PositionSensor), got {type(sensor).__name__}"
            raise ValueError(msg)
        self.motion = motion
        self.sensor = sensor
        self._F, self._Q = motion._matrices()
        self._sp = sensor.params
        self._R = sensor.R

    # Unscented weights; the EKF kernel ignores them.
    def _weights(self):
        n_sig = 2 * self.motion.ndim + 1
        return np.zeros(n_sig), np.zeros(n_sig), 0.0

    def predict(self, state):
        """Return the predicted :class:`GaussianState` one period ahead."""
        x, P = self._check_state(state)
        xp = np.empty(4)
        Pp = np.empty((4, 4))
        _k.predict(x, P, self.motion.dt, self._Q, xp, Pp, np.empty((4, 4)))
        return GaussianState(xp, Pp)

    def update(self, state, z):
        """Return the posterior :class:`GaussianState` after measurement ``z`` (NaN: no update)."""
        x, P = self._check_state(state)
        z = _as_float("z", z)
        if z.shape != (2,):
            msg = f"z has shape {z.shape}; expected (2,)"
            raise ValueError(msg)
        if np.isnan(z).any():
            return GaussianState(x.copy(), P.copy())
        out, failed = self._run_kernel(x[None], P[None], z[None, None], skip_first_predict=True)
        if failed[0] >= 0:
            msg = f"{type(self).__name__}.update failed: the innovation covariance is not positive definite"
            raise np.linalg.LinAlgError(msg)
        return GaussianState(out.means[0, 0], out.covs[0, 0])

    def _run_kernel(self, x0, P0, zs, *, skip_first_predict=False):
        runs, steps, _ = zs.shape
        means = np.empty((runs, steps, 4))
        covs = np.empty((runs, steps, 4, 4))
        innov = np.empty((runs, steps, 2))
        innov_covs = np.empty((runs, steps, 2, 2))
        failed = np.empty(runs, dtype=np.int64)
        Wm, Wc, scale = self._weights()
        _k.run_batch(
            self._use_ukf, _kernel_array(x0), _kernel_array(P0), _kernel_array(zs),
            self.motion.dt, self._Q, self.sensor.kind, self._sp, self._R, Wm, Wc, scale,
            means, covs, innov, innov_covs, failed, numba.get_num_threads(), skip_first_predict,
        )
        return FilterRun(means, covs, innov, innov_covs), failed

    def _check_state(self, state):
        x = _as_float("state.mean", state[0])
        P = _as_float("state.cov", state[1])
        if x.shape != (4,) or P.shape != (4, 4):
            msg = f"state has mean shape {x.shape} and cov shape {P.shape}; expected (4,) and (4, 4)"
            raise ValueError(msg)
        _check_spd("state.cov", P)
        return np.ascontiguousarray(x), np.ascontiguousarray(P)

    def run(self, x0, P0, measurements):
        """Filter every run over every step in one compiled call.

        Parameters
        ----------
        x0 : array_like, shape (runs, 4) or (4,)
            Initial estimates (before the first prediction).
        P0 : array_like, shape (runs, 4, 4) or (4, 4)
            Initial covariances, symmetric positive definite.
        measurements : array_like, shape (runs, steps, 2) or (steps, 2)
            Measurement ``k`` follows the ``k``-th prediction; NaN means missed.

        Returns
        -------
        FilterRun
            Posterior means (runs, steps, 4), covariances (runs, steps, 4, 4),
            innovations (runs, steps, 2) and innovation covariances (runs, steps, 2, 2).

        Raises
        ------
        ValueError
            On shape mismatches or a non-SPD initial covariance.
        numpy.linalg.LinAlgError
            If a covariance loses positive definiteness during filtering.
        """
        zs = _as_float("measurements", measurements)
        if zs.ndim == 2:
            zs = zs[None]
        if zs.ndim != 3 or zs.shape[-1] != 2:
            msg = f"measurements has shape {np.shape(measurements)}; expected (runs, steps, 2) or (steps, 2)"
            raise ValueError(msg)
        runs, steps, _ = zs.shape
        x0 = _as_float("x0", x0)
        if x0.shape == (4,):
            x0 = np.broadcast_to(x0, (runs, 4))
        if x0.shape != (runs, 4):
            msg = f"x0 has shape {x0.shape}; expected ({runs}, 4) or (4,) to match measurements {zs.shape}"
            raise ValueError(msg)
        if not np.isfinite(x0).all():
            msg = "x0 contains NaN or inf; expected finite initial estimates"
            raise ValueError(msg)
        P0 = _as_float("P0", P0)
        if P0.shape == (4, 4):
            _check_spd("P0", P0)
            P0 = np.broadcast_to(P0, (runs, 4, 4))
        elif P0.shape == (runs, 4, 4):
            _check_spd("P0", P0)
        else:
            msg = f"P0 has shape {P0.shape}; expected ({runs}, 4, 4) or (4, 4)"
            raise ValueError(msg)
        out, failed = self._run_kernel(x0, P0, zs)
        bad = np.flatnonzero(failed >= 0)
        if bad.size:
            r = int(bad[0])
            msg = (
                f"{type(self).__name__}: a covariance lost positive definiteness in run {r} at step "
                f"{int(failed[r])} ({bad.size} of {runs} runs affected)"
            )
            raise np.linalg.LinAlgError(msg)
        return out


class ExtendedKalmanFilter(_KalmanFilter):
    """Extended Kalman filter with a Joseph-form update.

    Parameters
    ----------
    motion : ConstantVelocity
    sensor : RangeBearingSensor or PositionSensor

    Notes
    -----
    Predict ``x = F x``, ``P = F P F^T + Q``; update with the Jacobian ``H`` at the
    prediction: ``S = H P H^T + R``, ``K = P H^T S^-1`` (Cholesky solve),
    ``x += K (z - h(x))`` (bearing wrapped), ``P = (I-KH) P (I-KH)^T + K R K^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import ConstantVelocity, RangeBearingSensor, ExtendedKalmanFilter, GaussianState
    >>> ekf = ExtendedKalmanFilter(ConstantVelocity(), RangeBearingSensor())
    >>> prior = ekf.predict(GaussianState(np.array([20.0, 0.0, 0.0, 1.0]), np.eye(4)))
    >>> post = ekf.update(prior, [20.0, 0.05])
    >>> bool(post.cov[0, 0] < prior.cov[0, 0])
    True
    """


class UnscentedKalmanFilter(_KalmanFilter):
    """Unscented Kalman filter with Merwe's scaled sigma points.

    Parameters
    ----------
    motion : ConstantVelocity
    sensor : RangeBearingSensor or PositionSensor
    alpha : float, default 1.0
        Spread of the sigma points, > 0.
    beta : float, default 2.0
        Prior knowledge of the distribution (2 is optimal for Gaussians).
    kappa : float, optional
        Secondary scaling; default ``3 - n`` (= -1 for n = 4), which matches the
        fourth moment of a Gaussian and gives a negative centre weight.

    Notes
    -----
    ``lambda = alpha^2 (n + kappa) - n``; weights ``Wm_0 = lambda / (n + lambda)``,
    ``Wc_0 = Wm_0 + 1 - alpha^2 + beta``, ``W_i = 1 / (2 (n + lambda))``. The
    prediction is linear and shared with the EKF (the unscented transform of a
    linear map is exact). The update redraws sigma points from the prediction;
    the bearing mean is a weighted mean of wrapped differences about the centre
    sigma point. The covariance update ``P - K Pxz^T - Pxz K^T + K S K^T`` is the
    Joseph form written with cross-covariances.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import ConstantVelocity, RangeBearingSensor, UnscentedKalmanFilter
    >>> ukf = UnscentedKalmanFilter(ConstantVelocity(), RangeBearingSensor())
    >>> out = ukf.run([20.0, 0.0, 0.0, 1.0], np.eye(4), [[20.0, 0.05], [20.1, 0.1]])
    >>> out.means.shape, out.covs.shape
    ((1, 2, 4), (1, 2, 4, 4))
    """

    _use_ukf = True

    def __init__(self, motion, sensor, *, alpha=1.0, beta=2.0, kappa=None):
        super().__init__(motion, sensor)
        n = motion.ndim
        if kappa is None:
            kappa = 3.0 - n
        for name, value in (("alpha", alpha), ("beta", beta), ("kappa", kappa)):
            if not isinstance(value, numbers.Real) or not math.isfinite(value):
                msg = f"{name} must be a finite real number, got {value!r}"
                raise ValueError(msg)
        if not alpha > 0:
            msg = f"alpha must be > 0, got {alpha!r}"
            raise ValueError(msg)
        if not n + kappa > 0:
            msg = f"kappa must be > -{n} so that n + lambda = alpha^2 (n + kappa) > 0, got {kappa!r}"
            raise ValueError(msg)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.kappa = float(kappa)

    def _weights(self):
        n = self.motion.ndim
        lam = self.alpha ** 2 * (n + self.kappa) - n
        Wm = np.full(2 * n + 1, 0.5 / (n + lam))
        Wc = Wm.copy()
        Wm[0] = lam / (n + lam)
        Wc[0] = lam / (n + lam) + (1.0 - self.alpha ** 2 + self.beta)
        return Wm, Wc, math.sqrt(n + lam)

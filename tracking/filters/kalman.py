"""Extended and unscented Kalman filters, one state at a time or batched over Monte Carlo runs.

Filters are small objects holding a motion model and a sensor model (any objects
following the protocols of :mod:`tracking.models`); they return new states and
never mutate their inputs. :meth:`run` hands whole batches shaped
``(runs, steps, dim)`` to one compiled kernel, generated once per model pair
(:mod:`tracking.kernels.factory`), threads over runs, with no Python per step.

Both filters use a Joseph-form covariance update, keep covariances symmetric and
solve with Cholesky factors (no explicit inverse). A measurement holding a NaN
means "no detection": predict only. Singular geometry (``h`` or its Jacobian not
finite at the prediction, e.g. the target on the sensor) skips that update; a
covariance that stops being positive definite ends the run (NaN from there on).
Both are reported per run and step in :attr:`FilterRun.status`, never raised.
"""

import math
import numbers
from typing import NamedTuple
import warnings

import numpy as np

from fastcal.messages import show
from tracking.filters.batch import run_kernel
from tracking.filters.specs import as_float, check_spd, motion_spec, sensor_spec
from tracking.kernels.factory import jacobian_pattern, kernel_for
from tracking.kernels.guard import probe_models

__all__ = ["GaussianState", "FilterRun", "ExtendedKalmanFilter", "UnscentedKalmanFilter",
           "OK", "MISSED", "SINGULAR", "FAILED"]

# Status codes of FilterRun.status (the kernel's codes).
OK = 0
MISSED = 1
SINGULAR = 2
FAILED = 3
STATUS_NAMES = {OK: "ok", MISSED: "missed", SINGULAR: "singular geometry", FAILED: "failed"}


class GaussianState(NamedTuple):
    """Gaussian estimate: ``mean`` (n,) and ``cov`` (n, n).

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import GaussianState
    >>> s = GaussianState(np.zeros(4), np.eye(4))
    >>> s.mean.shape, s.cov.shape
    ((4,), (4, 4))
    """

    mean: np.ndarray
    cov: np.ndarray


class FilterRun(NamedTuple):
    """Output of :meth:`ExtendedKalmanFilter.run` / :meth:`UnscentedKalmanFilter.run`.

    means : (runs, steps, n) posterior means.
    covs : (runs, steps, n, n) posterior covariances.
    innovations : (runs, steps, m) measurement residuals ``z - zhat`` (NaN if missed).
    innovation_covs : (runs, steps, m, m) innovation covariances ``S`` (NaN if missed).
    status : (runs, steps) int8, per run and step: ``OK`` (0) updated, ``MISSED`` (1)
        no measurement (predict only), ``SINGULAR`` (2) ``h`` or its Jacobian not
        finite at the prediction (predict only), ``FAILED`` (3) a covariance stopped
        being positive definite (this step and the rest of the run are NaN).
    position : tuple of int or None
        State indices of the positions (from the motion model), for the RMSE.

    Examples
    --------
    >>> import numpy as np
    >>> from tracking import ConstantVelocity, RangeBearingSensor, ExtendedKalmanFilter
    >>> ekf = ExtendedKalmanFilter(ConstantVelocity(), RangeBearingSensor())
    >>> z = [[20.0, 0.05], [np.nan, np.nan], [20.1, 0.1]]  # the second measurement missed
    >>> out = ekf.run([20.0, 0.0, 0.0, 1.0], np.eye(4), z)
    >>> type(out).__name__, out.means.shape, out.status.tolist(), out.failed.tolist()
    ('FilterRun', (1, 3, 4), [[0, 1, 0]], [-1])
    """

    means: np.ndarray
    covs: np.ndarray
    innovations: np.ndarray
    innovation_covs: np.ndarray
    status: np.ndarray = None
    position: tuple = None

    @property
    def failed(self):
        """(runs,) first step at which the run failed, or -1."""
        bad = self.status == FAILED
        return np.where(bad.any(axis=1), bad.argmax(axis=1), -1)


class _KalmanFilter:
    _use_ukf = False

    def __init__(self, motion, sensor):
        self.motion = motion
        self.sensor = sensor
        self._ms = motion_spec(motion)
        self._ss = sensor_spec(sensor, self._ms.n)
        ms, ss = self._ms, self._ss
        probe_models(ms, ss)  # before anything else calls them: bad writes and signatures named here
        # The UKF uses F only for a linear motion (F P F^T + Q); otherwise sigma points.
        needs_f = not self._use_ukf or ms.linear
        pattern = jacobian_pattern(ms.F, ms.n, ms.dt, ms.params) if needs_f else None
        self._kernel = kernel_for(ms.f, ms.F, ss.h, ss.H, n=ms.n, m=ss.m, reads=ss.reads,
                                  angles=ss.angles, linear=ms.linear, ukf=self._use_ukf,
                                  f_pattern=pattern)

    @property
    def dim_x(self):
        """State dimension ``n``."""
        return self._ms.n

    @property
    def dim_z(self):
        """Measurement dimension ``m``."""
        return self._ss.m

    # Unscented weights; the EKF kernel ignores them.
    def _weights(self):
        n_sig = 2 * self._ms.n + 1
        return np.zeros(n_sig), np.zeros(n_sig), 0.0

    def predict(self, state):
        """Return the predicted :class:`GaussianState` one period ahead.

        Raises ``numpy.linalg.LinAlgError`` if the UKF cannot factor the covariance.
        """
        x, P = self._check_state(state)
        n, m = self._ms.n, self._ss.m
        out, status = self._run_kernel(x[None], P[None], np.full((1, 1, m), np.nan))
        if status[0, 0] == FAILED:
            msg = f"{type(self).__name__}.predict failed: the covariance is not positive definite"
            raise np.linalg.LinAlgError(msg)
        return GaussianState(out.means[0, 0].reshape(n), out.covs[0, 0].reshape(n, n))

    def update(self, state, z):
        """Return the posterior :class:`GaussianState` after measurement ``z`` (NaN: no update).

        Raises ``numpy.linalg.LinAlgError`` (naming the reason) when the update is
        impossible: singular geometry or a covariance that is not positive definite.
        """
        x, P = self._check_state(state)
        m = self._ss.m
        z = as_float("z", z)
        if z.shape != (m,):
            msg = f"z has shape {z.shape}; expected ({m},)"
            raise ValueError(msg)
        if np.isnan(z).any():
            return GaussianState(x.copy(), P.copy())
        out, status = self._run_kernel(x[None], P[None], z[None, None], skip_first_predict=True)
        code = int(status[0, 0])
        if code == FAILED:
            msg = f"{type(self).__name__}.update failed: a covariance is not positive definite"
            raise np.linalg.LinAlgError(msg)
        if code == SINGULAR:
            msg = (
                f"{type(self).__name__}.update failed: singular geometry, h or its Jacobian is not "
                "finite at the prediction (e.g. the target on the sensor)"
            )
            raise np.linalg.LinAlgError(msg)
        return GaussianState(out.means[0, 0], out.covs[0, 0])

    def _run_kernel(self, x0, P0, zs, *, skip_first_predict=False):
        outs = run_kernel(self._kernel, self._ms, self._ss, self._weights(), x0, P0, zs,
                          skip_first_predict=skip_first_predict)
        return FilterRun(*outs, self._ms.position), outs[-1]

    def _check_state(self, state):
        n = self._ms.n
        x = as_float("state.mean", state[0])
        P = as_float("state.cov", state[1])
        if x.shape != (n,) or P.shape != (n, n):
            msg = f"state has mean shape {x.shape} and cov shape {P.shape}; expected ({n},) and ({n}, {n})"
            raise ValueError(msg)
        check_spd("state.cov", P)
        return np.ascontiguousarray(x), np.ascontiguousarray(P)

    def run(self, x0, P0, measurements):
        """Filter every run over every step in one compiled call.

        Parameters
        ----------
        x0 : array_like, shape (runs, n) or (n,)
            Initial estimates (before the first prediction).
        P0 : array_like, shape (runs, n, n) or (n, n)
            Initial covariances, symmetric positive definite.
        measurements : array_like, shape (runs, steps, m) or (steps, m)
            Measurement ``k`` follows the ``k``-th prediction; NaN means missed.

        Returns
        -------
        FilterRun
            Posterior means (runs, steps, n), covariances (runs, steps, n, n),
            innovations (runs, steps, m), innovation covariances (runs, steps, m, m)
            and the status of every run and step.

        Raises
        ------
        ValueError
            On shape mismatches or a non-SPD initial covariance; when a model
            function raises, indexes outside an array or does not return within
            ``$TRACKING_MODEL_TIMEOUT`` seconds (default 10), one line naming it,
            the run and the step (see :mod:`tracking.kernels.guard`).

        Warns
        -----
        RuntimeWarning
            When some steps had singular geometry or a run failed (see ``status``);
            the filter never raises for these.
        """
        x0, P0, zs = self._check_batch(x0, P0, measurements)
        out, status = self._run_kernel(x0, P0, zs)
        self._warn_status(status)
        return out

    def _check_batch(self, x0, P0, measurements):
        """``(x0, P0, zs)`` shaped (runs, n), (runs, n, n), (runs, steps, m), each checked."""
        n, m = self._ms.n, self._ss.m
        zs = as_float("measurements", measurements)
        if zs.ndim == 2:
            zs = zs[None]
        if zs.ndim != 3 or zs.shape[-1] != m:
            msg = f"measurements has shape {np.shape(measurements)}; expected (runs, steps, {m}) or (steps, {m})"
            raise ValueError(msg)
        runs = zs.shape[0]
        x0 = as_float("x0", x0)
        if x0.shape == (n,):
            x0 = np.broadcast_to(x0, (runs, n))
        if x0.shape != (runs, n):
            msg = f"x0 has shape {x0.shape}; expected ({runs}, {n}) or ({n},) to match measurements {zs.shape}"
            raise ValueError(msg)
        if not np.isfinite(x0).all():
            msg = "x0 contains NaN or inf; expected finite initial estimates"
            raise ValueError(msg)
        P0 = as_float("P0", P0)
        if P0.shape == (n, n):
            check_spd("P0", P0)
            P0 = np.broadcast_to(P0, (runs, n, n))
        elif P0.shape == (runs, n, n):
            check_spd("P0", P0)
        else:
            msg = f"P0 has shape {P0.shape}; expected ({runs}, {n}, {n}) or ({n}, {n})"
            raise ValueError(msg)
        return x0, P0, zs

    def _warn_status(self, status):
        """One RuntimeWarning each for singular steps and failed runs (the filter never raises for them)."""
        for code, what in ((SINGULAR, "singular geometry (update skipped)"),
                           (FAILED, "a covariance lost positive definiteness (rest of the run is NaN)")):
            hit = status == code
            if code == FAILED:
                hit = hit & (np.cumsum(hit, axis=1) == 1)  # count each failed run once
            if hit.any():
                r, k = (int(v[0]) for v in np.nonzero(hit))
                msg = (
                    f"{type(self).__name__}: {what} at {int(hit.sum())} run-steps, first in run {r} "
                    f"at step {k}; see FilterRun.status"
                )
                warnings.warn(msg, RuntimeWarning, stacklevel=3)


class ExtendedKalmanFilter(_KalmanFilter):
    """Extended Kalman filter with a Joseph-form update.

    Parameters
    ----------
    motion : motion model
        Any object following the motion protocol of :mod:`tracking.models`.
    sensor : sensor model
        Any object following the sensor protocol of :mod:`tracking.models`.

    Notes
    -----
    Predict ``x = f(x)``, ``P = F P F^T + Q`` with ``F`` the Jacobian of ``f`` at the
    previous estimate; update with the Jacobian ``H`` at the prediction: ``S = H P H^T + R``,
    ``K = P H^T S^-1`` (Cholesky solve),
    ``x += K (z - h(x))`` (angles wrapped), ``P = (I-KH) P (I-KH)^T + K R K^T``.

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
    motion : motion model
    sensor : sensor model
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
    prediction sends sigma points through ``f`` (for a motion model marked
    ``linear`` it is ``F P F^T + Q``, which the unscented transform of a linear map
    equals exactly). The update redraws sigma points from the prediction; an
    angle's mean is a weighted mean of wrapped differences about the centre
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
        n = self._ms.n
        if kappa is None:
            kappa = 3.0 - n
        for name, value in (("alpha", alpha), ("beta", beta), ("kappa", kappa)):
            if not isinstance(value, numbers.Real) or not math.isfinite(value):
                msg = f"{name} must be a finite real number, got {show(value)}"
                raise ValueError(msg)
        if not alpha > 0:
            msg = f"alpha must be > 0, got {show(alpha)}"
            raise ValueError(msg)
        if not n + kappa > 0:
            msg = f"kappa must be > -{n} so that n + lambda = alpha^2 (n + kappa) > 0, got {show(kappa)}"
            raise ValueError(msg)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.kappa = float(kappa)

    def _weights(self):
        n = self._ms.n
        lam = self.alpha ** 2 * (n + self.kappa) - n
        Wm = np.full(2 * n + 1, 0.5 / (n + lam))
        Wc = Wm.copy()
        Wm[0] = lam / (n + lam)
        Wc[0] = lam / (n + lam) + (1.0 - self.alpha ** 2 + self.beta)
        return Wm, Wc, math.sqrt(n + lam)

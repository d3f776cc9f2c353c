"""Extended and unscented Kalman filters, one state at a time or batched over Monte Carlo runs.

Filters are small objects holding a motion model and a sensor model (any objects
following the protocols of :mod:`tracking.models`); they return new states and
never mutate their inputs. :meth:`run` hands whole batches shaped
``(runs, steps, dim)`` to one compiled kernel, generated once per model pair
(:mod:`tracking._factory`), threads over runs, with no Python per step.

Both filters use a Joseph-form covariance update, keep covariances symmetric and
solve with Cholesky factors (no explicit inverse). A measurement holding a NaN
means "no detection": predict only. Singular geometry (``h`` or its Jacobian not
finite at the prediction, e.g. the target on the sensor) skips that update; a
covariance that stops being positive definite ends the run (NaN from there on).
Both are reported per run and step in :attr:`FilterRun.status`, never raised.
"""

from typing import NamedTuple
import math
import numbers

import numba
import numpy as np

import warnings

from fastcal.jit import run_threads, thread_range
from fastcal.messages import show
from tracking._factory import jacobian_pattern, kernel_for
from tracking._guard import ModelStalled, model_timeout, probe_models, run_watched, shape_text, stall_text
from tracking._kernels import SLOT_F, SLOT_H, SLOT_JF, SLOT_JH

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
    >>> out = ekf.run([20.0, 0.0, 0.0, 1.0], np.eye(4), [[20.0, 0.05], [20.1, 0.1]])
    >>> type(out).__name__, out.means.shape, out.status.tolist()
    ('FilterRun', (1, 2, 4), [[0, 0]])
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


def _qual(fn):
    return getattr(getattr(fn, "py_func", fn), "__qualname__", repr(fn))


def _is_jit(fn):
    return callable(fn) and hasattr(fn, "py_func") and hasattr(fn, "compile")


def _missing_attrs(obj, names):
    return [n for n in names if not hasattr(obj, n)]


class _MotionSpec(NamedTuple):
    n: int
    dt: float
    Q: np.ndarray
    params: np.ndarray
    f: object
    F: object
    linear: bool
    position: tuple


class _SensorSpec(NamedTuple):
    m: int
    R: np.ndarray
    params: np.ndarray
    h: object
    H: object
    angles: tuple
    reads: tuple


def _params(owner, value):
    p = _as_float(f"{owner}.params", value)
    if p.ndim != 1:
        msg = f"{owner}.params has shape {p.shape}; expected a 1-D array of floats"
        raise ValueError(msg)
    return np.require(p, dtype=np.float64, requirements=["C", "W"])


def _dim(owner, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        msg = f"{owner}.ndim must be an integer >= 1, got {show(value)}"
        raise ValueError(msg)
    return int(value)


def motion_spec(motion):
    """Check a motion model against the protocol of :mod:`tracking.models`."""
    need = ("ndim", "dt", "Q", "params", "f_jit")
    missing = _missing_attrs(motion, need)
    if missing:
        msg = (
            f"motion ({type(motion).__name__}) has no {', '.join(missing)}; expected a motion model "
            f"with {', '.join(need)} (and optionally F_jit, linear, position_indices), see tracking.models"
        )
        raise ValueError(msg)
    n = _dim("motion", motion.ndim)
    dt = motion.dt
    if not isinstance(dt, numbers.Real) or isinstance(dt, bool) or not (math.isfinite(dt) and dt > 0):
        msg = f"motion.dt must be a finite number > 0, got {show(dt)}"
        raise ValueError(msg)
    Q = _as_float("motion.Q", motion.Q)
    if Q.shape != (n, n):
        msg = f"motion.Q has shape {Q.shape}; expected ({n}, {n}) for a state of dimension {n}"
        raise ValueError(msg)
    if not np.isfinite(Q).all() or np.abs(Q - Q.T).max() > 1e-10 * max(np.abs(Q).max(), 1e-300):
        msg = "motion.Q must be a finite symmetric matrix"
        raise ValueError(msg)
    f = motion.f_jit
    F = getattr(motion, "F_jit", None)
    for name, fn in (("f_jit", f), ("F_jit", F)):
        if fn is not None and not _is_jit(fn):
            msg = f"motion.{name} must be a numba @njit function f(x, dt, p, out), got {type(fn).__name__}"
            raise ValueError(msg)
    position = getattr(motion, "position_indices", None)
    if position is not None:
        position = tuple(int(i) for i in position)
        if any(not 0 <= i < n for i in position):
            msg = f"motion.position_indices {position} must lie in [0, {n})"
            raise ValueError(msg)
    return _MotionSpec(n, float(dt), np.ascontiguousarray(Q), _params("motion", motion.params),
                       f, F, bool(getattr(motion, "linear", False)), position)


def sensor_spec(sensor, n):
    """Check a sensor model against the protocol of :mod:`tracking.models` for a state of dimension ``n``."""
    need = ("ndim", "R", "params", "h_jit")
    missing = _missing_attrs(sensor, need)
    if missing:
        msg = (
            f"sensor ({type(sensor).__name__}) has no {', '.join(missing)}; expected a sensor model "
            f"with {', '.join(need)} (and optionally H_jit, angles, reads), see tracking.models"
        )
        raise ValueError(msg)
    m = _dim("sensor", sensor.ndim)
    R = _as_float("sensor.R", sensor.R)
    if R.shape != (m, m):
        msg = f"sensor.R has shape {R.shape}; expected ({m}, {m}) for a measurement of dimension {m}"
        raise ValueError(msg)
    _check_spd("sensor.R", R)
    h = sensor.h_jit
    H = getattr(sensor, "H_jit", None)
    for name, fn in (("h_jit", h), ("H_jit", H)):
        if fn is not None and not _is_jit(fn):
            msg = f"sensor.{name} must be a numba @njit function h(x, p, out), got {type(fn).__name__}"
            raise ValueError(msg)
    angles = tuple(getattr(sensor, "angles", ()) or ())
    if any(not isinstance(a, numbers.Integral) or not 0 <= a < m for a in angles):
        msg = f"sensor.angles {angles!r} must be measurement indices in [0, {m})"
        raise ValueError(msg)
    reads = getattr(sensor, "reads", None)
    reads = tuple(range(n)) if reads is None else tuple(int(j) for j in reads)
    if not reads or any(not 0 <= j < n for j in reads) or len(set(reads)) != len(reads):
        msg = f"sensor.reads {reads!r} must be different state indices in [0, {n}) for a state of dimension {n}"
        raise ValueError(msg)
    return _SensorSpec(m, np.ascontiguousarray(R), _params("sensor", sensor.params), h, H,
                       tuple(i in angles for i in range(m)), reads)


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
        z = _as_float("z", z)
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
        runs, steps, _ = zs.shape
        n, m = self._ms.n, self._ss.m
        means = np.empty((runs, steps, n))
        covs = np.empty((runs, steps, n, n))
        innov = np.empty((runs, steps, m))
        innov_covs = np.empty((runs, steps, m, m))
        status = np.full((runs, steps), -1, dtype=np.int8)  # -1 left: the batch stopped early (a model raised)
        Wm, Wc, scale = self._weights()
        ms, ss = self._ms, self._ss
        x0, P0, zs = _kernel_array(x0), _kernel_array(P0), _kernel_array(zs)
        outs = (means, covs, innov, innov_covs, status)
        # contiguous ranges of runs, one per worker thread; each run is written by one thread
        n_threads = max(1, min(numba.get_num_threads(), runs))
        ranges = [thread_range(t, runs, n_threads) for t in range(n_threads)]
        # per thread: run (in its range), step, model function; rows 128 bytes apart, so the
        # threads' writes never share a cache line
        where = np.full((n_threads, 16), -1, dtype=np.int64)

        def part(t):
            i, j = ranges[t]
            return lambda: self._kernel(x0[i:j], P0[i:j], zs[i:j], ms.dt, ms.Q, ms.params, ss.params, ss.R, Wm, Wc,
                                        scale, *(o[i:j] for o in outs), skip_first_predict, where[t])

        timeout = model_timeout()

        def place(t):
            r, k, slot = (int(v) for v in where[t, :3])
            return self._slot_name(slot), f"in run {ranges[t][0] + r}, step {k}"

        def stalled(t):
            name, at = place(t)
            return ModelStalled(stall_text(name, at, timeout))

        errors = run_watched([part(t) for t in range(n_threads)], where, timeout=timeout, stalled=stalled)
        for t, err in enumerate(errors):
            if err is not None:  # a model function raised inside the compiled batch
                name, at = place(t)
                raise ValueError(self._raised_text(name, at, err, int(where[t, 2]))) from None
        if (status < 0).any():  # stopped without an exception
            msg = "the compiled batch stopped early: a model function raised"
            raise RuntimeError(msg)
        return FilterRun(means, covs, innov, innov_covs, status, ms.position), status

    def _slot_name(self, slot):
        """``motion.f_jit (its name)`` for the batch's model-function code ``slot`` (``_k.SLOT_*``)."""
        ms, ss = self._ms, self._ss
        owner, attr, fn = {SLOT_F: ("motion", "f_jit", ms.f), SLOT_JF: ("motion", "F_jit", ms.F),
                           SLOT_H: ("sensor", "h_jit", ss.h), SLOT_JH: ("sensor", "H_jit", ss.H)}.get(
                               slot, ("a model", "function", None))
        return f"{owner}.{attr}" + (f" ({_qual(fn)})" if fn is not None else "")

    def _raised_text(self, name, at, err, slot):
        text = str(err).strip().splitlines()
        head = f"{name} raised {type(err).__name__} {at}: {text[0] if text else ''}"
        if isinstance(err, IndexError):
            n, m = self._ms.n, self._ss.m
            p = self._ms.params if slot in (SLOT_F, SLOT_JF) else self._ss.params
            out = {SLOT_F: (n,), SLOT_JF: (n, n), SLOT_H: (m,), SLOT_JH: (m, n)}.get(slot)
            if out is not None:
                return f"{head}; expected indices within x ({n},), p ({p.shape[0]},) and out {shape_text(out)}"
        return f"{head}; expected model functions that do not raise"

    def _check_state(self, state):
        n = self._ms.n
        x = _as_float("state.mean", state[0])
        P = _as_float("state.cov", state[1])
        if x.shape != (n,) or P.shape != (n, n):
            msg = f"state has mean shape {x.shape} and cov shape {P.shape}; expected ({n},) and ({n}, {n})"
            raise ValueError(msg)
        _check_spd("state.cov", P)
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
            the run and the step (see :mod:`tracking._guard`).

        Warns
        -----
        RuntimeWarning
            When some steps had singular geometry or a run failed (see ``status``);
            the filter never raises for these.
        """
        n, m = self._ms.n, self._ss.m
        zs = _as_float("measurements", measurements)
        if zs.ndim == 2:
            zs = zs[None]
        if zs.ndim != 3 or zs.shape[-1] != m:
            msg = f"measurements has shape {np.shape(measurements)}; expected (runs, steps, {m}) or (steps, {m})"
            raise ValueError(msg)
        runs, steps, _ = zs.shape
        x0 = _as_float("x0", x0)
        if x0.shape == (n,):
            x0 = np.broadcast_to(x0, (runs, n))
        if x0.shape != (runs, n):
            msg = f"x0 has shape {x0.shape}; expected ({runs}, {n}) or ({n},) to match measurements {zs.shape}"
            raise ValueError(msg)
        if not np.isfinite(x0).all():
            msg = "x0 contains NaN or inf; expected finite initial estimates"
            raise ValueError(msg)
        P0 = _as_float("P0", P0)
        if P0.shape == (n, n):
            _check_spd("P0", P0)
            P0 = np.broadcast_to(P0, (runs, n, n))
        elif P0.shape == (runs, n, n):
            _check_spd("P0", P0)
        else:
            msg = f"P0 has shape {P0.shape}; expected ({runs}, {n}, {n}) or ({n}, {n})"
            raise ValueError(msg)
        out, status = self._run_kernel(x0, P0, zs)
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
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
        return out


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
    previous estimate; update with the Jacobian ``H`` at the prediction: ``S = H P H^T + R``, ``K = P H^T S^-1`` (Cholesky solve),
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

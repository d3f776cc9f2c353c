"""Gaussian consistency: NEES, Gaussian ECD and their chi-square bands.

The same engine scores classifiers and state estimators: for a Gaussian
prediction ``N(mu, C)`` of a true state ``x`` with error ``e = x - mu`` in ``d``
dimensions, the paper's ECD (eq. 8) reduces to (eq. 10)

    ECD = mean(0.5 * e^T C^-1 e - d / 2) = 0.5 * ANEES - d / 2,

where ``e^T C^-1 e`` is the NEES (eq. 11) and ANEES its average. All NEES values
are computed by the compiled kernels in :mod:`fastcal._kernels.gaussian` with a
Cholesky factorisation and one forward substitution (no explicit inverse).

Public functions validate their inputs once and then call the kernels:

* :func:`nees` -- NEES per error vector, batched over leading axes.
* :func:`gaussian_ecd` -- mean Gaussian ECD (eq. 10).
* :class:`GaussianAccumulator` -- streaming, mergeable sufficient statistics
  (count in int64, sum of NEES in float64) per bin.
* :func:`anees_bounds`, :func:`ecd_bounds` -- two-sided chi-square bands.

Arrays in GPU memory (torch CUDA tensors, CuPy, Numba device arrays) are
scored there by :func:`gaussian_ecd` and :meth:`GaussianAccumulator.update`
(``fastcal.cuda.fill_gaussian``); :func:`nees` copies them to the host.
"""

from collections import namedtuple
import numbers

import numba
import numpy as np

from fastcal.accumulators.base import Mergeable
from fastcal._kernels import _config
from fastcal._kernels import gaussian as _k

__all__ = [
    "nees",
    "gaussian_ecd",
    "GaussianAccumulator",
    "GaussianResult",
    "anees_bounds",
    "ecd_bounds",
]

# Relative tolerance on |C_ij - C_ji| / sqrt(C_ii C_jj) before a covariance counts
# as asymmetric. Covariances from ``A @ A.T`` or a symmetrised filter pass easily.
SYMMETRY_RTOL = _config.SYMMETRY_RTOL

_NAN_POLICIES = ("raise", "propagate", "omit")

GaussianResult = namedtuple("GaussianResult", ["count", "anees", "ecd"])
GaussianResult.__doc__ = """Reduction of a :class:`GaussianAccumulator`.

count : int or ndarray of int64
    Number of error vectors per bin.
anees : float or ndarray
    Average NEES per bin (NaN where count is 0).
ecd : float or ndarray
    Gaussian ECD per bin, ``0.5 * anees - d / 2`` (eq. 10; NaN where count is 0).
"""


def _check_nan_policy(nan_policy, allowed):
    if nan_policy not in allowed:
        msg = f"nan_policy must be one of {allowed}, got {nan_policy!r}"
        raise ValueError(msg)


def _as_float_array(name, value):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"{name} must be an array of real numbers; converting it failed: {exc}"
        raise ValueError(msg) from None
    return arr


def _check_shapes(errors, covs, group_shape=()):
    """Validate ``errors`` (..., d) against ``covs`` (..., d, d); return d."""
    if errors.ndim < 1 + len(group_shape):
        msg = (
            f"errors must have at least {1 + len(group_shape)} dimension(s) "
            f"(..., d), got shape {errors.shape}"
        )
        raise ValueError(msg)
    d = errors.shape[-1]
    if d < 1:
        msg = f"errors must have a last axis of length d >= 1, got shape {errors.shape}"
        raise ValueError(msg)
    expected = errors.shape + (d,)
    if covs.shape != expected:
        msg = (
            f"covs has shape {covs.shape} but errors has shape {errors.shape}; "
            f"expected covs.shape == errors.shape + (d,) = {expected}"
        )
        raise ValueError(msg)
    if group_shape:
        found = errors.shape[-1 - len(group_shape):-1]
        if found != tuple(group_shape):
            msg = (
                f"errors has shape {errors.shape}; expected its axes before the last "
                f"to end with the accumulator shape {tuple(group_shape)}, found {found}"
            )
            raise ValueError(msg)
    return d


class _Shape:
    """Shape and ndim of an array anywhere (host or GPU), for ``_check_shapes``."""

    def __init__(self, x):
        self.shape = tuple(int(s) for s in x.shape)
        self.ndim = len(self.shape)


def _on_device(*arrays):
    from fastcal import cuda  # loads no numba.cuda until a fill runs

    return any(cuda.is_device_array(a) for a in arrays)


def _device_pair(errors, covs):
    """Numba device views of the inputs in GPU memory, float64 arrays of the others."""
    from fastcal import cuda

    out = []
    for name, x in (("errors", errors), ("covs", covs)):
        if cuda.is_device_array(x):
            x = cuda.as_device_array(name, x)
            if x.dtype.kind not in "biuf":
                msg = f"{name} must be an array of real numbers, got dtype {x.dtype} in GPU memory"
                raise ValueError(msg)
        else:
            x = _as_float_array(name, x)
        out.append(x)
    return out


def _host_pair(errors, covs):
    """float64 host copies of the inputs, wherever they are."""
    from fastcal import cuda

    return [_as_float_array(name, cuda.to_host(name, x))
            for name, x in (("errors", errors), ("covs", covs))]


def _flat(x, shape):
    """``x`` as ``shape`` without a copy, or None (a non-contiguous device array)."""
    if tuple(x.shape) == shape:
        return x  # any strides: the kernel indexes [i, a] and [i, a, c]
    if isinstance(x, np.ndarray) or x.is_c_contiguous():
        return x.reshape(shape)
    return None


def _format_index(flat_index, lead_shape):
    if len(lead_shape) == 0:
        return ""
    idx = np.unravel_index(int(flat_index), lead_shape)
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def _nees_checked(errors, covs, nan_policy):
    """Flat NEES values and a mask of rows holding NaN/inf; raise per the policy."""
    d = errors.shape[-1]
    lead = errors.shape[:-1]
    # C-contiguous and writable: one array type, so the kernel compiles once
    # (read-only views from np.broadcast_to would type as a second signature).
    flat_e = np.require(errors.reshape(-1, d), requirements=["C", "W"])
    flat_c = np.require(covs.reshape(-1, d, d), requirements=["C", "W"])
    n = flat_e.shape[0]
    out = np.empty(n, dtype=np.float64)
    status = np.empty(n, dtype=np.int8)
    if n:
        _k.nees_batch(flat_e, flat_c, out, status, SYMMETRY_RTOL, numba.get_num_threads())
    bad_nan = status == _k.STATUS_NAN
    if nan_policy == "raise" and bad_nan.any():
        e_rows = ~np.isfinite(flat_e).all(axis=1)
        name, rows = ("errors", e_rows) if e_rows.any() else ("covs", bad_nan)
        count = int(rows.sum())
        first = _format_index(np.flatnonzero(rows)[0], lead) or " (the only one)"
        msg = (
            f"{name} contains NaN or inf in {count} of {n} entries (first at index "
            f"{first}); pass nan_policy='propagate' or 'omit' to keep going"
        )
        raise ValueError(msg)
    asym = np.flatnonzero(status == _k.STATUS_ASYMMETRIC)
    if asym.size:
        i = asym[0]
        gap = float(np.max(np.abs(flat_c[i] - flat_c[i].T)))
        msg = (
            f"covs{_format_index(i, lead)} is not symmetric (max |C - C^T| = {gap:.3g}; "
            f"{asym.size} of {n} covariances affected); expected symmetric positive "
            "definite covariance matrices"
        )
        raise ValueError(msg)
    not_pd = np.flatnonzero(status == _k.STATUS_NOT_PD)
    if not_pd.size:
        i = not_pd[0]
        low = float(np.linalg.eigvalsh(flat_c[i])[0])
        msg = (
            f"covs{_format_index(i, lead)} is not positive definite (smallest eigenvalue "
            f"{low:.3g}; {not_pd.size} of {n} covariances affected); expected symmetric "
            "positive definite covariance matrices"
        )
        raise ValueError(msg)
    return out, bad_nan


def nees(errors, covs, *, nan_policy="raise"):
    """Normalised estimation error squared of each error vector.

    Parameters
    ----------
    errors : array_like, shape (..., d)
        Estimation errors ``x - mu`` (true state minus estimate), batched over any
        leading axes.
    covs : array_like, shape (..., d, d)
        Symmetric positive definite covariance of each estimate.
    nan_policy : {'raise', 'propagate'}, default 'raise'
        What to do with entries whose error or covariance holds NaN or inf:
        raise, or return NaN for those entries.

    Returns
    -------
    ndarray of shape (...) or float
        ``e^T C^-1 e`` per entry; a float when ``errors`` is 1-D.

    Raises
    ------
    ValueError
        On shape mismatch, NaN/inf with ``nan_policy='raise'``, or a covariance
        that is not symmetric positive definite (the message names its index).

    Notes
    -----
    NEES (paper eq. 11, one term of the sum) is ``e^T C^-1 e``. It is computed
    as ``y^T y`` with ``C = L L^T`` (Cholesky) and ``L y = e`` (forward
    substitution). Under consistency it is chi-square with ``d`` degrees of
    freedom, with mean ``d``.

    Arrays in GPU memory are copied to the host and scored there: the result
    has one value per vector, as large as the input's leading axes.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.gaussian import nees
    >>> nees([1.0, 2.0], np.diag([1.0, 4.0]))
    2.0
    >>> nees(np.zeros((3, 2)), np.broadcast_to(np.eye(2), (3, 2, 2))).tolist()
    [0.0, 0.0, 0.0]
    """
    _check_nan_policy(nan_policy, ("raise", "propagate"))
    if _on_device(errors, covs):
        errors, covs = _host_pair(errors, covs)
    errors = _as_float_array("errors", errors)
    covs = _as_float_array("covs", covs)
    _check_shapes(errors, covs)
    values, _ = _nees_checked(errors, covs, nan_policy)
    if errors.ndim == 1:
        return float(values[0])
    return values.reshape(errors.shape[:-1])


def gaussian_ecd(errors, covs, *, nan_policy="raise"):
    """Gaussian Entropic Calibration Difference (paper eq. 10).

    Parameters
    ----------
    errors : array_like, shape (..., d)
        Estimation errors ``x - mu``.
    covs : array_like, shape (..., d, d)
        Symmetric positive definite covariance of each estimate.
    nan_policy : {'raise', 'propagate', 'omit'}, default 'raise'
        Entries with NaN or inf: raise, return NaN, or leave them out.

    Returns
    -------
    float
        ``mean(0.5 * NEES - d / 2)``: 0 when consistent, positive when
        over-confident, negative when under-confident. NaN if no entry is left.

    Raises
    ------
    ValueError
        As :func:`nees`.

    Notes
    -----
    For Gaussian predictions ``N(mu_i, C_i)`` the ECD of eq. 8 becomes (eq. 10)
    ``ECD = (1/N) sum_i [0.5 (x_i - mu_i)^T C_i^-1 (x_i - mu_i) - d/2]``,
    i.e. ``0.5 * ANEES - d/2`` with the NEES of eq. 11.

    Arrays in GPU memory are scored there, as by
    :meth:`GaussianAccumulator.update`.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.gaussian import gaussian_ecd
    >>> gaussian_ecd([[2.0, 0.0]], [np.eye(2)])  # NEES 4 in 2-D: 0.5*4 - 1
    1.0
    """
    _check_nan_policy(nan_policy, _NAN_POLICIES)
    if _on_device(errors, covs):
        errors, covs = _device_pair(errors, covs)
        d = _check_shapes(_Shape(errors), _Shape(covs))
    else:
        errors = _as_float_array("errors", errors)
        covs = _as_float_array("covs", covs)
        d = _check_shapes(errors, covs)
    acc = GaussianAccumulator(d)
    acc.update(errors, covs, nan_policy=nan_policy)
    return acc.report().ecd


class GaussianAccumulator(Mergeable):
    """Streaming, mergeable NEES / Gaussian ECD statistics per bin.

    Holds per-bin sufficient statistics: ``count`` (int64) and ``nees_sum``
    (float64). Filling is :meth:`update`; it is mergeable like the other
    accumulators (``a + b``, ``a += b``, ``sum([...])``, ``copy()``, pickle), and
    :meth:`report` reads the result. Merging adds the statistics, so results do
    not depend on how the data was chunked or in which order the parts were
    merged (up to float rounding of the sums).

    Parameters
    ----------
    dim : int
        State dimension ``d`` of every error vector.
    shape : tuple of int, default ()
        Shape of the bins, e.g. ``(n_steps,)`` to keep one statistic per time
        step. Error arrays passed to :meth:`update` have shape
        ``(..., *shape, dim)`` and are reduced over the leading ``...`` axes.

    Notes
    -----
    ``anees = nees_sum / count`` and ``ecd = 0.5 * anees - dim / 2`` (eq. 10-11).
    Empty bins report count 0 and NaN, they are never dropped.

    Examples
    --------
    >>> import numpy as np
    >>> from fastcal.gaussian import GaussianAccumulator
    >>> e = np.array([[1.0, 0.0], [0.0, 3.0]])
    >>> C = np.broadcast_to(np.eye(2), (2, 2, 2))
    >>> a = GaussianAccumulator(2).update(e[:1], C[:1])
    >>> b = GaussianAccumulator(2).update(e[1:], C[1:])
    >>> (a + b).report()
    GaussianResult(count=2, anees=5.0, ecd=1.5)
    >>> sum([a, b]).report() == (a + b).report()
    True
    """

    def __init__(self, dim, *, shape=()):
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 1:
            msg = f"dim must be an integer >= 1, got {dim!r}"
            raise ValueError(msg)
        try:
            shape = tuple(int(s) for s in shape)
        except TypeError:
            msg = f"shape must be a tuple of non-negative integers, got {shape!r}"
            raise ValueError(msg) from None
        if any(s < 0 for s in shape):
            msg = f"shape must be a tuple of non-negative integers, got {shape!r}"
            raise ValueError(msg)
        self.dim = int(dim)
        self.shape = shape
        self.count = np.zeros(shape, dtype=np.int64)
        self.nees_sum = np.zeros(shape, dtype=np.float64)

    def update(self, errors, covs, *, nan_policy="raise"):
        """Add error vectors and their covariances; return ``self``.

        Parameters
        ----------
        errors : array_like, shape (..., *shape, dim)
        covs : array_like, shape (..., *shape, dim, dim)
        nan_policy : {'raise', 'propagate', 'omit'}, default 'raise'
            Entries with NaN or inf: raise, make their bin NaN, or skip them
            (they are not counted).

        Notes
        -----
        If ``errors`` or ``covs`` is in GPU memory (torch CUDA tensor, CuPy,
        Numba device array) the NEES are computed there
        (``fastcal.cuda.fill_gaussian``) and only the per-bin count and sum
        come back; a host input beside it is copied to the GPU. Counts equal
        the CPU's, sums agree to float rounding. The rows are read in place
        when they reshape to ``(n, dim)`` without a copy (C-contiguous, or
        already 2-D / 3-D with any strides); other strided device arrays are
        copied to the host and scored on the CPU, since Numba device arrays
        cannot be reshaped without a copy. A covariance that is not symmetric
        positive definite, or NaN/inf with ``nan_policy='raise'``, sends the
        inputs to the host so the CPU raises its own message.
        """
        _check_nan_policy(nan_policy, _NAN_POLICIES)
        if _on_device(errors, covs):
            return self._update_device(errors, covs, nan_policy)
        errors = _as_float_array("errors", errors)
        covs = _as_float_array("covs", covs)
        self._check_dim(_check_shapes(errors, covs, self.shape))
        return self._update_host(errors, covs, nan_policy)

    def _check_dim(self, d):
        if d != self.dim:
            msg = f"errors has dimension d={d} on its last axis; this accumulator expects dim={self.dim}"
            raise ValueError(msg)

    def _update_host(self, errors, covs, nan_policy):
        values, bad = _nees_checked(errors, covs, "raise" if nan_policy == "raise" else "propagate")
        n_bins = int(np.prod(self.shape, dtype=np.int64))
        n_rows = values.shape[0] // n_bins if n_bins else 0
        values = values.reshape(n_rows, n_bins)
        if nan_policy == "omit":
            keep = ~bad.reshape(n_rows, n_bins)
            counts = keep.sum(axis=0, dtype=np.int64)
            sums = np.where(keep, values, 0.0).sum(axis=0)
        else:
            counts = np.full(n_bins, values.shape[0], dtype=np.int64)
            sums = values.sum(axis=0)
        self.count += counts.reshape(self.shape)
        self.nees_sum += sums.reshape(self.shape)
        return self

    def _update_device(self, errors, covs, nan_policy):
        from fastcal import cuda

        errors, covs = _device_pair(errors, covs)
        d = self.dim
        self._check_dim(_check_shapes(_Shape(errors), _Shape(covs), self.shape))
        n = int(np.prod(errors.shape[:-1], dtype=np.int64))
        flat_e, flat_c = _flat(errors, (n, d)), _flat(covs, (n, d, d))
        if flat_e is None or flat_c is None:
            # strided device arrays of more axes: numba reshapes only contiguous ones
            return self._update_host(*_host_pair(errors, covs), nan_policy)
        n_bins = int(np.prod(self.shape, dtype=np.int64))
        out = cuda.fill_gaussian(flat_e, flat_c, n_bins)
        checks = out["checks"]
        if checks["asymmetric"][0] or checks["not_pd"][0] or (
                nan_policy == "raise" and checks["nan"][0]):
            # the CPU words the error (first index in the input's shape, eigenvalue)
            return self._update_host(*_host_pair(errors, covs), nan_policy)
        counts, sums = out["count"], out["nees_sum"]
        if nan_policy == "propagate":
            # as the CPU: rows with NaN/inf count, and make their bin's sum NaN
            counts = counts + out["n_bad"]
            sums = np.where(out["n_bad"] > 0, np.nan, sums)
        self.count += counts.reshape(self.shape)
        self.nees_sum += sums.reshape(self.shape)
        return self

    def _check_compatible(self, other):
        self._check_type(other, "GaussianAccumulator")
        if other.dim != self.dim or other.shape != self.shape:
            msg = (
                f"cannot merge accumulators with dim={other.dim}, shape={other.shape} into "
                f"dim={self.dim}, shape={self.shape}; expected equal dim and shape"
            )
            raise ValueError(msg)

    def _add(self, other):
        self.count += other.count
        self.nees_sum += other.nees_sum

    def __repr__(self):
        return f"GaussianAccumulator(dim={self.dim}, shape={self.shape}, count={int(self.count.sum())})"

    def report(self):
        """Reduce to :class:`GaussianResult` ``(count, anees, ecd)`` per bin.

        Scalars (``int``/``float``) when ``shape == ()``, arrays of ``shape`` otherwise.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            anees = np.where(self.count > 0, self.nees_sum / np.maximum(self.count, 1), np.nan)
        ecd = 0.5 * anees - 0.5 * self.dim
        if self.shape == ():
            return GaussianResult(int(self.count), float(anees), float(ecd))
        return GaussianResult(self.count.copy(), anees, ecd)

    def result(self):
        """The same as :meth:`report` (the name of earlier versions)."""
        return self.report()


def _check_band_args(runs, dim, alpha):
    if not isinstance(runs, numbers.Integral) or isinstance(runs, bool) or runs < 2:
        msg = f"runs must be an integer >= 2 for a chi-square band over Monte Carlo runs, got {runs!r}"
        raise ValueError(msg)
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 1:
        msg = f"dim must be an integer >= 1, got {dim!r}"
        raise ValueError(msg)
    if not (isinstance(alpha, numbers.Real) and 0.0 < alpha < 1.0):
        msg = f"alpha must be a number in (0, 1), got {alpha!r}"
        raise ValueError(msg)


def anees_bounds(runs, dim, *, alpha=0.05):
    """Two-sided chi-square band for the ANEES over ``runs`` Monte Carlo runs.

    Parameters
    ----------
    runs : int
        Number of independent runs ``R >= 2`` averaged at one time step.
    dim : int
        State dimension ``d``.
    alpha : float, default 0.05
        Significance level; the band holds with probability ``1 - alpha``.

    Returns
    -------
    (float, float)
        ``(chi2_{R d}(alpha/2) / R, chi2_{R d}(1 - alpha/2) / R)``.

    Raises
    ------
    ValueError
        If ``runs < 2``, ``dim < 1`` or ``alpha`` is not in (0, 1).

    Notes
    -----
    Under consistency each NEES (eq. 11) is chi-square with ``d`` degrees of
    freedom, so ``R * ANEES`` is chi-square with ``R d``.

    Examples
    --------
    >>> from fastcal.gaussian import anees_bounds
    >>> lo, hi = anees_bounds(50, 4)
    >>> round(lo, 3), round(hi, 3)
    (3.255, 4.821)
    """
    _check_band_args(runs, dim, alpha)
    dof = runs * dim
    from scipy import stats  # imported here: scipy.stats is slow to import

    lo = stats.chi2.ppf(alpha / 2.0, dof) / runs
    hi = stats.chi2.ppf(1.0 - alpha / 2.0, dof) / runs
    return float(lo), float(hi)


def ecd_bounds(runs, dim, *, alpha=0.05):
    """Two-sided chi-square band for the Gaussian ECD over ``runs`` runs.

    Parameters
    ----------
    runs : int
        Number of independent runs ``R >= 2`` averaged at one time step.
    dim : int
        State dimension ``d``.
    alpha : float, default 0.05
        Significance level; the band holds with probability ``1 - alpha``.

    Returns
    -------
    (float, float)
        ``(chi2_{R d}(alpha/2) / (2R) - d/2, chi2_{R d}(1 - alpha/2) / (2R) - d/2)``.

    Raises
    ------
    ValueError
        If ``runs < 2``, ``dim < 1`` or ``alpha`` is not in (0, 1).

    Notes
    -----
    From eq. 10, ``2 R (ECD + d/2) = R * ANEES``, which is chi-square with
    ``R d`` degrees of freedom under consistency.

    Examples
    --------
    >>> from fastcal.gaussian import ecd_bounds
    >>> lo, hi = ecd_bounds(50, 4)
    >>> round(lo, 3), round(hi, 3)
    (-0.373, 0.411)
    """
    lo, hi = anees_bounds(runs, dim, alpha=alpha)
    return 0.5 * lo - 0.5 * dim, 0.5 * hi - 0.5 * dim

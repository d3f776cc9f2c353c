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
  (count in int64, sum of NEES in float64) per bin (its state is one of
  :mod:`fastcal.accumulators`; it is re-exported here and as
  ``fastcal.GaussianAccumulator``).
* :func:`anees_bounds`, :func:`ecd_bounds` -- two-sided chi-square bands.

Arrays in GPU memory (torch CUDA tensors, CuPy, Numba device arrays) are
scored there by :func:`gaussian_ecd` and :meth:`GaussianAccumulator.update`
(the GPU backend, :mod:`fastcal.backends.cuda`); :func:`nees` copies them to the host.
"""

import numbers

from scipy import special

from fastcal import backends
from fastcal._kernels import _config
from fastcal.accumulators.gaussian import NAN_POLICIES as _NAN_POLICIES
from fastcal.accumulators.gaussian import GaussianAccumulator, GaussianResult
from fastcal.accumulators.gaussian import check_nan_policy as _check_nan_policy
from fastcal.backends import cpu
from fastcal.inputs.validation import show

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
    batch = backends.resolve_gaussian(errors, covs, device="cpu")
    errors = batch.errors
    values, _ = cpu.nees_checked(errors, batch.covs, nan_policy)
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
    batch = backends.resolve_gaussian(errors, covs)
    return GaussianAccumulator(batch.d).update_batch(batch, nan_policy=nan_policy).report().ecd


def _check_band_args(runs, dim, alpha):
    if not isinstance(runs, numbers.Integral) or isinstance(runs, bool) or runs < 2:
        msg = f"runs must be an integer >= 2 for a chi-square band over Monte Carlo runs, got {show(runs)}"
        raise ValueError(msg)
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 1:
        msg = f"dim must be an integer >= 1, got {show(dim)}"
        raise ValueError(msg)
    if not (isinstance(alpha, numbers.Real) and 0.0 < alpha < 1.0):
        msg = f"alpha must be a number in (0, 1), got {show(alpha)}"
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
    lo = _chi2_ppf(alpha / 2.0, dof) / runs
    hi = _chi2_ppf(1.0 - alpha / 2.0, dof) / runs
    return float(lo), float(hi)


def _chi2_ppf(q, dof):
    """scipy.stats.chi2.ppf(q, dof), computed as it does (2 gammaincinv(dof / 2, q)),
    without importing scipy.stats (0.5 s, a third of a warm ``tracking compare``)."""
    return 2.0 * special.gammaincinv(dof / 2.0, q)


def ecd_bounds(runs, dim, *, alpha=0.05):
    """Two-sided chi-square band for the Gaussian ECD over ``runs`` runs.

    Parameters
    ----------
    runs, dim, alpha
        As in :func:`anees_bounds` (``R >= 2`` runs, state dimension ``d``, level).

    Returns
    -------
    (float, float)
        ``(chi2_{R d}(alpha/2) / (2R) - d/2, chi2_{R d}(1 - alpha/2) / (2R) - d/2)``.

    Raises
    ------
    ValueError
        As :func:`anees_bounds` does.

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

"""Consistency of a batch of filter runs, scored with fastcal's Gaussian engine."""

from typing import NamedTuple

import numpy as np

from fastcal.gaussian import GaussianAccumulator, anees_bounds, ecd_bounds, nees

__all__ = ["Consistency", "evaluate"]


class Consistency(NamedTuple):
    """Consistency of R runs over T steps.

    nees : (R, T) NEES of the posterior state per run and step (eq. 11 term).
    nis : (R, T) NIS of the innovation per run and step (NaN where missed).
    anees : (T,) average NEES over runs per step.
    ecd : (T,) Gaussian ECD over runs per step, ``0.5 anees - d/2`` (eq. 10).
    mean_nis : (T,) average NIS over the runs that had a measurement.
    anees_bounds, ecd_bounds : (lo, hi) two-sided chi-square bands for one step.
    inside_fraction : fraction of steps whose ANEES lies inside its band (the
        ECD band is the same event, so it holds the same steps).
    mean_anees, mean_ecd : time averages over steps.
    mean_nees : the mean of all N NEES values scored (the runs' NEES at every
        step), equal to ``mean_anees`` when no run failed.
    mean_bounds : (lo, hi) two-sided chi-square band of ``mean_nees``: under
        consistency ``N * mean_nees`` is chi-square with ``N d`` degrees of
        freedom, a band much narrower than one step's.
    nees_count : N, the NEES values scored (runs x steps less failed steps).
    rmse : position RMSE over all runs and steps (m); NaN when the position
        components are not known (pass ``position=`` to :func:`evaluate`).
    nis_bounds : (lo, hi) chi-square band of the mean NIS at one step (m dof).
    singular_steps : run-steps whose update was skipped for singular geometry.
    failed_runs : runs that stopped because a covariance lost positive
        definiteness; their remaining steps are left out of the averages.

    Examples
    --------
    >>> from tracking import ExtendedKalmanFilter, Scenario, evaluate, simulate
    >>> sc = Scenario(runs=10, steps=5)
    >>> sim = simulate(sc)
    >>> c = evaluate(ExtendedKalmanFilter(sc.motion, sc.sensor).run(sim.x0, sim.P0, sim.measurements), sim.truth)
    >>> type(c).__name__, c.anees.shape
    ('Consistency', (5,))
    """

    nees: np.ndarray
    nis: np.ndarray
    anees: np.ndarray
    ecd: np.ndarray
    mean_nis: np.ndarray
    anees_bounds: tuple
    ecd_bounds: tuple
    inside_fraction: float
    mean_anees: float
    mean_ecd: float
    rmse: float
    nis_bounds: tuple = (np.nan, np.nan)
    singular_steps: int = 0
    failed_runs: int = 0
    mean_nees: float = np.nan
    mean_bounds: tuple = (np.nan, np.nan)
    nees_count: int = 0


def evaluate(run, truth, *, alpha=0.05, position=None):
    """Score a :class:`tracking.filters.FilterRun` against the true states.

    Parameters
    ----------
    run : FilterRun
        Output of a filter's ``run``: means (R, T, d), covariances (R, T, d, d),
        innovations (R, T, m) and their covariances.
    truth : array_like, shape (R, T, d)
        True states.
    alpha : float, default 0.05
        Significance level of the bands.
    position : tuple of int, optional
        State indices of the positions, for the RMSE; default ``run.position``
        (set by the filters from the motion model's ``position_indices``).

    Returns
    -------
    Consistency

    Notes
    -----
    NEES per run and step is ``e^T P^-1 e`` (paper eq. 11), ANEES its mean over
    runs, and the Gaussian ECD ``0.5 ANEES - d/2`` (eq. 10); all come from one
    :class:`fastcal.gaussian.GaussianAccumulator` per time step. Steps of runs
    that failed (NaN estimates, see ``FilterRun.status``) are left out.

    Two bands answer two questions. One step's ANEES over ``R`` runs has the
    band ``chi2_{R d} / R`` (``anees_bounds``); the mean over all ``N = R T``
    NEES values has ``chi2_{N d} / N`` (``mean_bounds``), which judges the
    filter as a whole: a mean ANEES of 4.28 for ``d = 4`` may lie inside most
    steps' bands and still be far outside the band of the mean.

    Examples
    --------
    >>> from tracking import ExtendedKalmanFilter, Scenario, evaluate, simulate
    >>> sc = Scenario(runs=50, steps=20)
    >>> sim = simulate(sc)
    >>> run = ExtendedKalmanFilter(sc.motion, sc.sensor).run(sim.x0, sim.P0, sim.measurements)
    >>> c = evaluate(run, sim.truth)
    >>> c.anees.shape, round(c.anees_bounds[0], 2), round(c.anees_bounds[1], 2)
    ((20,), 3.25, 4.82)
    """
    truth = np.asarray(truth, dtype=np.float64)
    if truth.shape != run.means.shape:
        msg = f"truth has shape {truth.shape}; expected the filter means' shape {run.means.shape}"
        raise ValueError(msg)
    R, T, d = truth.shape
    if not np.isfinite(truth).all():
        msg = "truth contains NaN or inf; expected finite true states"
        raise ValueError(msg)
    errors = truth - run.means
    per_run = nees(errors, run.covs, nan_policy="propagate")
    per_step = GaussianAccumulator(d, shape=(T,)).update(errors, run.covs, nan_policy="omit").result()
    m = run.innovations.shape[-1]
    nis = nees(run.innovations, run.innovation_covs, nan_policy="propagate")
    nis_step = GaussianAccumulator(m, shape=(T,)).update(
        run.innovations, run.innovation_covs, nan_policy="omit"
    ).result()
    a_lo, a_hi = anees_bounds(R, d, alpha=alpha)
    e_lo, e_hi = ecd_bounds(R, d, alpha=alpha)
    n_lo, n_hi = anees_bounds(R, m, alpha=alpha)
    inside = (per_step.anees >= a_lo) & (per_step.anees <= a_hi)
    if position is None:
        position = getattr(run, "position", None)
    if position is None:
        rmse = float("nan")
    else:
        position = tuple(int(i) for i in position)
        if not position or any(not 0 <= i < d for i in position):
            msg = f"position {position} must be state indices in [0, {d})"
            raise ValueError(msg)
        sq = np.sum(errors[..., list(position)] ** 2, axis=-1)
        ok = np.isfinite(sq)
        rmse = float(np.sqrt(np.mean(sq[ok]))) if ok.any() else float("nan")
    finite = np.isfinite(per_run)
    count = int(finite.sum())
    mean_nees = float(per_run[finite].mean()) if count else float("nan")
    mean_bounds = anees_bounds(count, d, alpha=alpha) if count >= 2 else (float("nan"), float("nan"))
    status = getattr(run, "status", None)
    singular = int(np.count_nonzero(status == 2)) if status is not None else 0
    failed = int(np.count_nonzero((status == 3).any(axis=1))) if status is not None else 0
    return Consistency(
        nees=per_run,
        nis=nis,
        anees=per_step.anees,
        ecd=per_step.ecd,
        mean_nis=nis_step.anees,
        anees_bounds=(a_lo, a_hi),
        ecd_bounds=(e_lo, e_hi),
        inside_fraction=float(inside.mean()),
        mean_anees=float(np.nanmean(per_step.anees)) if np.isfinite(per_step.anees).any() else float("nan"),
        mean_ecd=float(np.nanmean(per_step.ecd)) if np.isfinite(per_step.ecd).any() else float("nan"),
        rmse=rmse,
        nis_bounds=(n_lo, n_hi),
        singular_steps=singular,
        failed_runs=failed,
        mean_nees=mean_nees,
        mean_bounds=mean_bounds,
        nees_count=count,
    )

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
    rmse : position RMSE over all runs and steps (m).
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


def evaluate(run, truth, *, alpha=0.05):
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

    Returns
    -------
    Consistency

    Notes
    -----
    NEES per run and step is ``e^T P^-1 e`` (paper eq. 11), ANEES its mean over
    runs, and the Gaussian ECD ``0.5 ANEES - d/2`` (eq. 10); all come from one
    :class:`fastcal.gaussian.GaussianAccumulator` per time step. The position
    RMSE uses state components 0 and 2 (x and y of ``[x, vx, y, vy]``).

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
    errors = truth - run.means
    per_run = nees(errors, run.covs)
    per_step = GaussianAccumulator(d, shape=(T,)).update(errors, run.covs).result()
    m = run.innovations.shape[-1]
    nis = nees(run.innovations, run.innovation_covs, nan_policy="propagate")
    nis_step = GaussianAccumulator(m, shape=(T,)).update(
        run.innovations, run.innovation_covs, nan_policy="omit"
    ).result()
    a_lo, a_hi = anees_bounds(R, d, alpha=alpha)
    e_lo, e_hi = ecd_bounds(R, d, alpha=alpha)
    inside = (per_step.anees >= a_lo) & (per_step.anees <= a_hi)
    rmse = float(np.sqrt(np.mean(errors[..., 0] ** 2 + errors[..., 2] ** 2)))
    return Consistency(
        nees=per_run,
        nis=nis,
        anees=per_step.anees,
        ecd=per_step.ecd,
        mean_nis=nis_step.anees,
        anees_bounds=(a_lo, a_hi),
        ecd_bounds=(e_lo, e_hi),
        inside_fraction=float(inside.mean()),
        mean_anees=float(per_step.anees.mean()),
        mean_ecd=float(per_step.ecd.mean()),
        rmse=rmse,
    )

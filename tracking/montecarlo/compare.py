"""EKF vs UKF on the same truths and measurements: report, table and plot."""

import math
import warnings

import numpy as np

from fastcal.io import write_atomically
from tracking.filters import ExtendedKalmanFilter, UnscentedKalmanFilter
from tracking.montecarlo.scenario import Scenario, make_scenario, simulate
from tracking.scoring.consistency import evaluate
from tracking.scoring.report import (
    band_lines,
    band_panel,
    check_plot_path,
    ecd_scale,
    legend_above,
    num,
    series,
    verdict,
    write_figure,
)

__all__ = ["compare", "format_table", "plot_report", "write_atomically", "check_plot_path", "verdict"]

FILTER_NAMES = ("ekf", "ukf")


def _floats(values):
    """Plain list: NaN becomes None (JSON has no NaN); +-inf stays (the CLI writes it as "inf")."""
    return [None if math.isnan(v) else float(v) for v in np.asarray(values, dtype=float).tolist()]


def _float(v):
    return None if math.isnan(v) else float(v)


def compare(scenario=None, *, alpha=0.05, ukf_alpha=1.0, ukf_beta=2.0, ukf_kappa=None):
    """Run the EKF and the UKF on one scenario draw and score both.

    Parameters
    ----------
    scenario : Scenario or str, optional
        A :class:`tracking.scenario.Scenario` or the name of a built-in one
        (:func:`tracking.scenario.scenario_names`); default ``Scenario()``.
    alpha : float, default 0.05
        Significance level of the chi-square bands (0.05: 95% bands).
    ukf_alpha, ukf_beta, ukf_kappa : float
        UKF sigma-point parameters (``ukf_kappa=None`` means ``3 - n``).

    Returns
    -------
    dict
        JSON-ready report. Contract keys: ``filters`` -> ``ekf``/``ukf`` ->
        ``runs``, ``steps``, ``dim``, ``anees``, ``ecd``, ``nis`` (lists per
        step), ``bounds`` (``anees``, ``ecd``, ``nis``: one step's [lo, hi];
        ``mean_anees``: the band of the mean over all runs and steps),
        ``inside_fraction`` (steps inside their band), ``mean_anees``,
        ``mean_ecd``, ``mean_nees`` (the mean of all NEES values, the mean ANEES
        when no run failed), ``nees_count``, ``verdict`` (``mean_nees`` against
        the band of the mean), ``rmse``, ``singular_steps``, ``failed_runs``;
        ``bounds`` (the same bands);
        ``scenario`` (every parameter used).

    Examples
    --------
    >>> from tracking.compare import compare
    >>> from tracking.scenario import make_scenario
    >>> rep = compare(make_scenario("radar-3d", runs=20, steps=5))
    >>> rep["filters"]["ukf"]["dim"], len(rep["filters"]["ukf"]["anees"])
    (6, 5)
    """
    if scenario is None:
        sc = Scenario()
    elif isinstance(scenario, str):
        sc = make_scenario(scenario)
    else:
        sc = scenario
    if not isinstance(sc, Scenario):
        msg = f"scenario must be a tracking.Scenario or a scenario name, got {type(scenario).__name__}"
        raise ValueError(msg)
    sim = simulate(sc)
    ukf = UnscentedKalmanFilter(sc.motion, sc.sensor, alpha=ukf_alpha, beta=ukf_beta, kappa=ukf_kappa)
    filters = {"ekf": ExtendedKalmanFilter(sc.motion, sc.sensor), "ukf": ukf}
    report = {"filters": {}, "bounds": None, "scenario": None}

    for name, flt in filters.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # counted in the report instead
            run = flt.run(sim.x0, sim.P0, sim.measurements)
        report["filters"][name] = _filter_report(sc, sim, evaluate(run, sim.truth, alpha=alpha))
        report["bounds"] = report["filters"][name]["bounds"]
    params = sc.as_dict()
    params.update(
        alpha=alpha,
        confidence=1.0 - alpha,
        ukf_alpha=ukf.alpha,
        ukf_beta=ukf.beta,
        ukf_kappa=ukf.kappa,
        state_dim=int(sim.truth.shape[-1]),
        measurement_dim=int(sim.measurements.shape[-1]),
        initial_truth=np.asarray(sc.truth0).tolist(),
    )
    report["scenario"] = params
    return report


def _filter_report(sc, sim, c):
    """One filter's part of the report, from its :class:`tracking.consistency.Consistency` ``c``."""
    bounds = {"anees": list(c.anees_bounds), "ecd": list(c.ecd_bounds), "nis": list(c.nis_bounds),
              "mean_anees": list(c.mean_bounds)}
    spread = (np.nanpercentile(c.nees, [5, 50, 95], axis=0) if np.isfinite(c.nees).any()
              else np.full((3, sc.steps), np.nan))
    return {
        "runs": sc.runs,
        "steps": sc.steps,
        "dim": int(sim.truth.shape[-1]),
        "anees": _floats(c.anees),
        "ecd": _floats(c.ecd),
        "nis": _floats(c.mean_nis),
        "nees_p05": _floats(spread[0]),
        "nees_median": _floats(spread[1]),
        "nees_p95": _floats(spread[2]),
        "bounds": bounds,
        "inside_fraction": c.inside_fraction,
        "mean_anees": _float(c.mean_anees),
        "mean_ecd": _float(c.mean_ecd),
        "mean_nees": _float(c.mean_nees),
        "nees_count": c.nees_count,
        "verdict": verdict(c.mean_nees, c.mean_bounds),
        "rmse": _float(c.rmse),
        "singular_steps": c.singular_steps,
        "failed_runs": c.failed_runs,
    }


def format_table(report):
    """Plain-text table: one row per filter.

    Examples
    --------
    >>> from tracking import Scenario, compare, format_table
    >>> print(format_table(compare(Scenario(runs=5, steps=3))).splitlines()[4])
    filter    mean ANEES   mean ECD  steps in band  pos RMSE [m]  mean ANEES vs band of the mean
    """
    sc = report["scenario"]
    level = round(100 * sc["confidence"])
    lines = [
        f"EKF vs UKF ({sc['name']}): {sc['runs']} runs x {sc['steps']} steps, seed {sc['seed']}; {sc['description']}",
        *band_lines(report["bounds"], level=level, d=sc["state_dim"], show_d=True,
                    count=report["filters"][FILTER_NAMES[-1]]["nees_count"]),
        "",
        f"{'filter':<8}{'mean ANEES':>12}{'mean ECD':>11}{'steps in band':>15}{'pos RMSE [m]':>14}"
        "  mean ANEES vs band of the mean",
    ]
    notes = []
    for name in FILTER_NAMES:
        f = report["filters"][name]
        lines.append(
            f"{name.upper():<8}{num(f['mean_anees'], 12)}{num(f['mean_ecd'], 11)}"
            f"{100 * f['inside_fraction']:>14.0f}%{num(f['rmse'], 14)}  {f['verdict']}"
        )
        if f.get("singular_steps") or f.get("failed_runs"):
            notes.append(f"{name.upper()}: {f['singular_steps']} run-steps skipped for singular geometry, "
                         f"{f['failed_runs']} runs stopped (covariance not positive definite)")
        if f.get("failed_runs"):
            notes.append(f"{name.upper()}: the verdict judges the mean NEES of the {f['nees_count']} run-steps "
                         f"scored, {num(f['mean_nees'], 0)}, against its band "
                         f"[{f['bounds']['mean_anees'][0]:.3f}, {f['bounds']['mean_anees'][1]:.3f}]")
    return "\n".join(lines + ([""] + notes if notes else []))


def plot_report(report, path=None):
    """ANEES per step with its band and an ECD scale (ECD = 0.5 ANEES - d/2), and the mean NIS.

    One line per filter; returns the figure. With ``path`` it is also written
    (atomically, image format from the extension). Legends sit above the axes,
    outside them, so they never hide a curve.

    Examples
    --------
    >>> import os, tempfile
    >>> from tracking import Scenario, compare, plot_report
    >>> path = os.path.join(tempfile.mkdtemp(), "anees.png")
    >>> fig = plot_report(compare(Scenario(runs=5, steps=3)), path)
    >>> os.path.getsize(path) > 0
    True
    """
    from matplotlib.figure import Figure

    fmt = check_plot_path(path) if path is not None else None
    sc = report["scenario"]
    d = sc["state_dim"]
    m = sc["measurement_dim"]
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    ax, ax_nis = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    steps = np.arange(1, sc["steps"] + 1)
    level = round(100 * sc["confidence"])
    colors = {"ekf": "tab:red", "ukf": "tab:blue"}
    for panel, key, centre, lw, label in ((ax, "anees", d, 1.4, f"ANEES (consistent: {d})"),
                                          (ax_nis, "nis", m, 1.2, f"mean NIS (consistent: {m})")):
        band_panel(panel, report["bounds"][key], level, centre)
        for name in FILTER_NAMES:
            panel.plot(steps, series(report["filters"][name][key]), color=colors[name], lw=lw, label=name.upper())
        panel.set_ylabel(label)
        if panel is ax:
            ecd_scale(ax, d)
        legend_above(panel)
    ax_nis.set_xlabel("step")
    fig.suptitle(f"EKF vs UKF consistency, {sc['name']}, {sc['runs']} runs", fontsize=10)
    if path is not None:
        write_figure(fig, path, fmt)
    return fig

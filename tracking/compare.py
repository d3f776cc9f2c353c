"""EKF vs UKF on the same truths and measurements: report, table and plot."""

import math
import os

import numpy as np

from fastcal._atomic import write_atomically
from tracking.consistency import evaluate
from tracking.filters import ExtendedKalmanFilter, UnscentedKalmanFilter
from tracking.scenario import Scenario, simulate

__all__ = ["compare", "format_table", "plot_report", "write_atomically"]

FILTER_NAMES = ("ekf", "ukf")


def _floats(values):
    """JSON-ready list: NaN becomes None (JSON has no NaN)."""
    return [None if not math.isfinite(v) else float(v) for v in np.asarray(values, dtype=float).tolist()]


def compare(scenario=None, *, alpha=0.05, ukf_alpha=1.0, ukf_beta=2.0, ukf_kappa=None):
    """Run the EKF and the UKF on one scenario draw and score both.

    Parameters
    ----------
    scenario : Scenario, optional
        Default :class:`tracking.scenario.Scenario()`.
    alpha : float, default 0.05
        Significance level of the chi-square bands (0.05: 95% bands).
    ukf_alpha, ukf_beta, ukf_kappa : float
        UKF sigma-point parameters (``ukf_kappa=None`` means ``3 - n``).

    Returns
    -------
    dict
        JSON-ready report. Contract keys: ``filters`` -> ``ekf``/``ukf`` ->
        ``anees``, ``ecd``, ``nis`` (lists per step), ``inside_fraction``,
        ``mean_anees``, ``mean_ecd``, ``rmse``; ``bounds`` -> ``anees``,
        ``ecd`` ([lo, hi]); ``scenario`` (every parameter used).
    """
    sc = Scenario() if scenario is None else scenario
    sim = simulate(sc)
    ukf = UnscentedKalmanFilter(sc.motion, sc.sensor, alpha=ukf_alpha, beta=ukf_beta, kappa=ukf_kappa)
    filters = {"ekf": ExtendedKalmanFilter(sc.motion, sc.sensor), "ukf": ukf}
    report = {"filters": {}, "bounds": None, "scenario": None}
    for name, flt in filters.items():
        c = evaluate(flt.run(sim.x0, sim.P0, sim.measurements), sim.truth, alpha=alpha)
        report["filters"][name] = {
            "anees": _floats(c.anees),
            "ecd": _floats(c.ecd),
            "nis": _floats(c.mean_nis),
            "inside_fraction": c.inside_fraction,
            "mean_anees": c.mean_anees,
            "mean_ecd": c.mean_ecd,
            "rmse": c.rmse,
        }
        report["bounds"] = {"anees": list(c.anees_bounds), "ecd": list(c.ecd_bounds)}
    params = sc.as_dict()
    params.update(
        alpha=alpha,
        confidence=1.0 - alpha,
        ukf_alpha=ukf.alpha,
        ukf_beta=ukf.beta,
        ukf_kappa=ukf.kappa,
        state_dim=4,
        initial_truth=sc.truth0.tolist(),
    )
    report["scenario"] = params
    return report


def format_table(report):
    """Plain-text table: one row per filter."""
    sc = report["scenario"]
    lo, hi = report["bounds"]["anees"]
    elo, ehi = report["bounds"]["ecd"]
    level = round(100 * sc["confidence"])
    lines = [
        f"EKF vs UKF: {sc['runs']} runs x {sc['steps']} steps, seed {sc['seed']}; sensor at "
        f"({sc['sensor_x']:g}, {sc['sensor_y']:g}), range {sc['range0']:g} m, speed {sc['speed']:g} m/s, "
        f"sigma_r {sc['sigma_r']:g} m, sigma_theta {sc['sigma_theta_deg']:g} deg",
        f"{level}% bands per step (d=4): ANEES [{lo:.3f}, {hi:.3f}]   ECD [{elo:.3f}, {ehi:.3f}]   "
        "(consistent: ANEES 4, ECD 0)",
        "",
        f"{'filter':<8}{'mean ANEES':>12}{'mean ECD':>11}{'steps in band':>15}{'pos RMSE [m]':>14}  mean ANEES vs band",
    ]
    for name in FILTER_NAMES:
        f = report["filters"][name]
        if f["mean_anees"] > hi:
            verdict = "above (over-confident)"
        elif f["mean_anees"] < lo:
            verdict = "below (under-confident)"
        else:
            verdict = "inside"
        lines.append(
            f"{name.upper():<8}{f['mean_anees']:>12.3f}{f['mean_ecd']:>11.3f}"
            f"{100 * f['inside_fraction']:>14.0f}%{f['rmse']:>14.3f}  {verdict}"
        )
    return "\n".join(lines)


def plot_report(report, path):
    """Draw ANEES and ECD per step with their bands, one line per filter; write a PNG atomically."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 6), constrained_layout=True)
    axes = fig.subplots(2, 1, sharex=True)
    steps = np.arange(1, report["scenario"]["steps"] + 1)
    level = round(100 * report["scenario"]["confidence"])
    for ax, key, label, target in ((axes[0], "anees", "ANEES", 4.0), (axes[1], "ecd", "Gaussian ECD", 0.0)):
        lo, hi = report["bounds"][key]
        ax.axhspan(lo, hi, color="0.85", label=f"{level}% band")
        ax.axhline(target, color="0.5", lw=0.8, ls=":")
        for name, color in zip(FILTER_NAMES, ("tab:red", "tab:blue")):
            values = np.array([np.nan if v is None else v for v in report["filters"][name][key]])
            ax.plot(steps, values, color=color, lw=1.4, label=name.upper())
        ax.set_ylabel(label)
        ax.legend(loc="upper right", ncol=3, fontsize=8)
    axes[1].set_xlabel("step")
    sc = report["scenario"]
    axes[0].set_title(
        f"EKF vs UKF consistency, {sc['runs']} runs (range-bearing, sigma_r {sc['sigma_r']:g} m, "
        f"sigma_theta {sc['sigma_theta_deg']:g} deg)",
        fontsize=10,
    )
    return write_atomically(path, lambda fh: fig.savefig(fh, format="png", dpi=110))

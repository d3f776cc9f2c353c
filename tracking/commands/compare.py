"""``tracking compare``: the subcommand's options, and the run that compares the EKF and the UKF
on a scenario and writes the table (or JSON) and the plot."""

from tracking.commands.output import plot_format, write_report
from tracking.montecarlo.compare import compare, format_table, plot_report
from tracking.montecarlo.scenario import SCENARIOS, Scenario, make_scenario

__all__ = ["add_compare_parser", "run_compare_cli", "MAX_VALUES"]

# Options that shape only the default 2-D range-bearing scenario.
_RB_OPTIONS = ("dt", "q", "sigma_r", "sigma_theta_deg", "sensor_x", "sensor_y", "range0", "speed", "p0_pos", "p0_vel")

#: Largest Monte Carlo batch compare runs: runs x steps x (state + measurement) values per array.
MAX_VALUES = 1 << 26


def add_compare_parser(sub, formatter_class):
    """The ``compare`` subcommand on ``sub``; ``formatter_class`` shows each default once."""
    d = Scenario()
    p = sub.add_parser(
        "compare",
        help="run EKF and UKF on the same Monte Carlo data and compare their consistency",
        description=(
            "Run the EKF and the UKF on the same seeded truths and measurements and print, per "
            "filter, the mean ANEES, mean Gaussian ECD, % of steps inside the chi-square bands and "
            "the position RMSE. Scenarios: "
            + "; ".join(f"{k}: {v[0]}" for k, v in SCENARIOS.items())
        ),
        formatter_class=formatter_class,
    )
    p.add_argument("--scenario", default="range-bearing", metavar="NAME",
                   help=f"scenario to run, one of {', '.join(SCENARIOS)}")
    p.add_argument("--list-scenarios", action="store_true", help="list the scenarios and exit")
    p.add_argument("--runs", type=int, default=d.runs, help="Monte Carlo runs (>= 2)")
    p.add_argument("--steps", type=int, default=d.steps, help="time steps per run")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed")
    p.add_argument("--missing", type=float, default=d.missing, help="probability of a missed measurement")
    g = p.add_argument_group("range-bearing scenario only")
    g.add_argument("--dt", type=float, default=None, help=f"sampling period [s] (default {d.dt:g})")
    g.add_argument("--q", type=float, default=None,
                   help=f"white-noise acceleration intensity [m^2/s^3] (default {d.q:g})")
    g.add_argument("--sigma-r", type=float, default=None, help=f"range noise std [m] (default {d.sigma_r:g})")
    g.add_argument("--sigma-theta-deg", type=float, default=None,
                   help=f"bearing noise std [deg] (default {d.sigma_theta_deg:g})")
    g.add_argument("--sensor-x", type=float, default=None, help=f"sensor x [m] (default {d.sensor_x:g})")
    g.add_argument("--sensor-y", type=float, default=None, help=f"sensor y [m] (default {d.sensor_y:g})")
    g.add_argument("--range0", type=float, default=None, help=f"initial target range [m] (default {d.range0:g})")
    g.add_argument("--speed", type=float, default=None, help=f"tangential target speed [m/s] (default {d.speed:g})")
    g.add_argument("--p0-pos", type=float, default=None, help=f"initial position std [m] (default {d.p0_pos:g})")
    g.add_argument("--p0-vel", type=float, default=None, help=f"initial velocity std [m/s] (default {d.p0_vel:g})")
    p.add_argument("--band-alpha", type=float, default=0.05, help="significance level of the bands")
    p.add_argument("--ukf-alpha", type=float, default=1.0, help="UKF sigma-point spread alpha")
    p.add_argument("--ukf-beta", type=float, default=2.0, help="UKF beta")
    p.add_argument("--ukf-kappa", type=float, default=None, help="UKF kappa (default 3 - n)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--plot", metavar="FILE", default=None,
                   help="write ANEES (with an ECD scale) and NIS over time with bands; format from the extension")
    return p


def run_compare_cli(args):
    """``tracking compare``: every output built in memory, then committed together."""
    if args.list_scenarios:
        width = max(len(k) for k in SCENARIOS)
        for name, (text, _) in SCENARIOS.items():
            print(f"{name:<{width}}  {text}")
        return 0
    fmt = plot_format(args.plot, [])
    if not 0.0 < args.band_alpha < 1.0:
        msg = f"--band-alpha must be in (0, 1), got {args.band_alpha!r}"
        raise ValueError(msg)
    scenario = _scenario(args)
    _check_sizes(scenario, args)
    report = compare(
        scenario, alpha=args.band_alpha, ukf_alpha=args.ukf_alpha,
        ukf_beta=args.ukf_beta, ukf_kappa=args.ukf_kappa,
    )
    write_report(report, lambda: format_table(report), as_json=args.json, plot=args.plot,
                 figure=lambda: plot_report(report), fmt=fmt)
    return 0


def _scenario(args):
    """The scenario the options name, with the range-bearing options only where they apply."""
    if args.scenario not in SCENARIOS:
        msg = f"--scenario must be one of {', '.join(SCENARIOS)}; got {args.scenario!r} (see --list-scenarios)"
        raise ValueError(msg)
    given = {k: getattr(args, k) for k in _RB_OPTIONS if getattr(args, k) is not None}
    if args.scenario == "range-bearing":
        return Scenario(runs=args.runs, steps=args.steps, seed=args.seed, missing=args.missing, **given)
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        msg = f"{flags} only apply to --scenario range-bearing, not {args.scenario!r}"
        raise ValueError(msg)
    return make_scenario(args.scenario, runs=args.runs, steps=args.steps, seed=args.seed, missing=args.missing)


def _check_sizes(sc, args):
    """Before anything is allocated: the batch fits a bound, the UKF's options a sane range."""
    n = max(len(sc.truth0), 1)
    values = sc.runs * sc.steps * n * n
    if values > MAX_VALUES:
        msg = (f"--runs {sc.runs} x --steps {sc.steps} x state dimension {n}^2 is {values:.3g} covariance "
               f"values; expected at most {MAX_VALUES:.3g} (about {8 * MAX_VALUES / 2**30:.0f} GiB per array): "
               "use fewer runs or steps")
        raise ValueError(msg)
    if not (1e-4 <= args.ukf_alpha <= 1e2):
        msg = (f"--ukf-alpha must be in [1e-4, 100], got {args.ukf_alpha!r}: smaller spreads put the sigma "
               "points' weights beyond float64 precision")
        raise ValueError(msg)
    for name in ("ukf_beta", "ukf_kappa"):
        v = getattr(args, name)
        if v is not None and not (abs(v) <= 1e6):
            msg = f"--{name.replace('_', '-')} must be a finite number in [-1e6, 1e6], got {v!r}"
            raise ValueError(msg)

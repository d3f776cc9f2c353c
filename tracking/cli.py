"""Command line: ``python -m tracking compare [options]`` (also installed as ``tracking``).

Every failure is one line on stderr: exit 2 for bad input, 1 for anything
else. ``--debug`` (or ``TRACKING_DEBUG=1``) shows the traceback instead. Not API: the
command line is documented by its ``--help``.
"""

import argparse
import json
import os
import sys

import numpy as np

from tracking.compare import check_plot_path, compare, format_table, plot_report
from tracking.scenario import SCENARIOS, Scenario, make_scenario

PROG = "python -m tracking"

# Options that shape only the default 2-D range-bearing scenario.
_RB_OPTIONS = ("dt", "q", "sigma_r", "sigma_theta_deg", "sensor_x", "sensor_y", "range0", "speed", "p0_pos", "p0_vel")


class _OneLineParser(argparse.ArgumentParser):
    """Bad input: one line on stderr, exit code 2 (no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser():
    parser = _OneLineParser(prog=PROG, description="EKF vs UKF consistency (NEES, Gaussian ECD) for tracking.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks (also TRACKING_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_OneLineParser)
    sub.required = True
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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
    g.add_argument("--q", type=float, default=None, help=f"white-noise acceleration intensity [m^2/s^3] (default {d.q:g})")
    g.add_argument("--sigma-r", type=float, default=None, help=f"range noise std [m] (default {d.sigma_r:g})")
    g.add_argument("--sigma-theta-deg", type=float, default=None, help=f"bearing noise std [deg] (default {d.sigma_theta_deg:g})")
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
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    from tracking.score import add_score_parser

    add_score_parser(sub)
    return parser


def _compare(args):
    if args.list_scenarios:
        width = max(len(k) for k in SCENARIOS)
        for name, (text, _) in SCENARIOS.items():
            print(f"{name:<{width}}  {text}")
        return 0
    if args.plot is not None:
        check_plot_path(args.plot)  # before computing
    if not 0.0 < args.band_alpha < 1.0:
        msg = f"--band-alpha must be in (0, 1), got {args.band_alpha!r}"
        raise ValueError(msg)
    if args.scenario not in SCENARIOS:
        msg = f"--scenario must be one of {', '.join(SCENARIOS)}; got {args.scenario!r} (see --list-scenarios)"
        raise ValueError(msg)
    given = {k: getattr(args, k) for k in _RB_OPTIONS if getattr(args, k) is not None}
    if args.scenario == "range-bearing":
        scenario = Scenario(runs=args.runs, steps=args.steps, seed=args.seed, missing=args.missing, **given)
    else:
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            msg = f"{flags} only apply to --scenario range-bearing, not {args.scenario!r}"
            raise ValueError(msg)
        scenario = make_scenario(args.scenario, runs=args.runs, steps=args.steps, seed=args.seed, missing=args.missing)
    report = compare(
        scenario, alpha=args.band_alpha, ukf_alpha=args.ukf_alpha,
        ukf_beta=args.ukf_beta, ukf_kappa=args.ukf_kappa,
    )
    if args.plot is not None:
        try:
            plot_report(report, args.plot)
        except OSError as exc:
            msg = f"cannot write --plot {args.plot!r}: {exc.strerror or exc}"
            raise ValueError(msg) from None
    if args.json:
        json.dump(report, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(format_table(report))
        if args.plot is not None:
            print(f"\nplot written to {args.plot}")
    return 0


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False) or os.environ.get("TRACKING_DEBUG", "") not in ("", "0")
    command = args.command
    try:
        if command == "compare":
            return _compare(args)
        from tracking.score import run_score_cli

        return run_score_cli(args)
    except (ValueError, np.linalg.LinAlgError) as exc:
        if debug:
            raise
        text = str(exc).strip().splitlines()
        parser.exit(2, f"{PROG} {command}: error: {text[0] if text else type(exc).__name__}\n")
    except Exception as exc:  # one line, never a traceback unless --debug
        if debug:
            raise
        text = str(exc).strip().splitlines()
        parser.exit(1, f"{PROG} {command}: internal error ({type(exc).__name__}): "
                       f"{text[0] if text else ''} (rerun with --debug for the traceback)\n")

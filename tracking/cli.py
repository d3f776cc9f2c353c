"""Command line: ``python -m tracking compare [options]``."""

import argparse
import json
import sys

from tracking.compare import compare, format_table, plot_report
from tracking.scenario import Scenario

PROG = "python -m tracking"


class _OneLineParser(argparse.ArgumentParser):
    """Bad input: one line on stderr, exit code 2 (no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser():
    parser = _OneLineParser(prog=PROG, description="EKF vs UKF consistency (NEES, Gaussian ECD) on range-bearing tracking.")
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_OneLineParser)
    sub.required = True
    d = Scenario()
    p = sub.add_parser(
        "compare",
        help="run EKF and UKF on the same Monte Carlo data and compare their consistency",
        description=(
            "Run the EKF and the UKF on the same seeded truths and measurements and print, per "
            "filter, the mean ANEES, mean Gaussian ECD, % of steps inside the chi-square bands and "
            "the position RMSE."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--runs", type=int, default=d.runs, help="Monte Carlo runs (>= 2)")
    p.add_argument("--steps", type=int, default=d.steps, help="time steps per run")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed")
    p.add_argument("--dt", type=float, default=d.dt, help="sampling period [s]")
    p.add_argument("--q", type=float, default=d.q, help="white-noise acceleration intensity [m^2/s^3]")
    p.add_argument("--sigma-r", type=float, default=d.sigma_r, help="range noise std [m]")
    p.add_argument("--sigma-theta-deg", type=float, default=d.sigma_theta_deg, help="bearing noise std [deg]")
    p.add_argument("--sensor-x", type=float, default=d.sensor_x, help="sensor x [m]")
    p.add_argument("--sensor-y", type=float, default=d.sensor_y, help="sensor y [m]")
    p.add_argument("--range0", type=float, default=d.range0, help="initial target range [m]")
    p.add_argument("--speed", type=float, default=d.speed, help="tangential target speed [m/s]")
    p.add_argument("--p0-pos", type=float, default=d.p0_pos, help="initial position std [m]")
    p.add_argument("--p0-vel", type=float, default=d.p0_vel, help="initial velocity std [m/s]")
    p.add_argument("--missing", type=float, default=d.missing, help="probability of a missed measurement")
    p.add_argument("--band-alpha", type=float, default=0.05, help="significance level of the bands")
    p.add_argument("--ukf-alpha", type=float, default=1.0, help="UKF sigma-point spread alpha")
    p.add_argument("--ukf-beta", type=float, default=2.0, help="UKF beta")
    p.add_argument("--ukf-kappa", type=float, default=None, help="UKF kappa (default 3 - n = -1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--plot", metavar="FILE.png", default=None, help="write ANEES and ECD over time with bands")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        scenario = Scenario(
            runs=args.runs, steps=args.steps, seed=args.seed, dt=args.dt, q=args.q,
            sigma_r=args.sigma_r, sigma_theta_deg=args.sigma_theta_deg,
            sensor_x=args.sensor_x, sensor_y=args.sensor_y, range0=args.range0, speed=args.speed,
            p0_pos=args.p0_pos, p0_vel=args.p0_vel, missing=args.missing,
        )
        if not 0.0 < args.band_alpha < 1.0:
            msg = f"--band-alpha must be in (0, 1), got {args.band_alpha!r}"
            raise ValueError(msg)
        if args.plot is not None and not args.plot.lower().endswith(".png"):
            msg = f"--plot must name a .png file, got {args.plot!r}"
            raise ValueError(msg)
        report = compare(
            scenario, alpha=args.band_alpha, ukf_alpha=args.ukf_alpha,
            ukf_beta=args.ukf_beta, ukf_kappa=args.ukf_kappa,
        )
    except ValueError as exc:
        parser.exit(2, f"{PROG} compare: error: {exc}\n")
    if args.plot is not None:
        try:
            plot_report(report, args.plot)
        except OSError as exc:
            parser.exit(2, f"{PROG} compare: error: cannot write --plot {args.plot!r}: {exc.strerror or exc}\n")
    if args.json:
        json.dump(report, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(format_table(report))
        if args.plot is not None:
            print(f"\nplot written to {args.plot}")
    return 0

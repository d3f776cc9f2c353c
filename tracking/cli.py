"""Command line: ``tracking compare|score [options]`` (also ``python -m tracking``).

Every failure is one line on stderr: exit 2 for bad input, 1 for anything
else. ``--debug`` (or ``TRACKING_DEBUG=1``) shows the traceback instead.
SIGINT, SIGTERM and SIGHUP end with one line, after removing temporary files.
Run bare, it prints its help and exits 2. Not API: the command line is documented by its
``--help``.
"""

import argparse
import os
import signal
import sys
import threading
import warnings

import numpy as np

from fastcal import __version__
from fastcal.process import Stop, Terminated, not_enough_memory

from tracking._output import check_outputs, cleanup, commit_with_stdout, signals_held, to_json
from tracking.compare import check_plot_path, compare, format_table, plot_report
from tracking.scenario import SCENARIOS, Scenario, make_scenario
from tracking.score import add_score_parser, run_score_cli

PROG = "tracking"

# Options that shape only the default 2-D range-bearing scenario.
_RB_OPTIONS = ("dt", "q", "sigma_r", "sigma_theta_deg", "sensor_x", "sensor_y", "range0", "speed", "p0_pos", "p0_vel")


class _OneLineParser(argparse.ArgumentParser):
    """Bad input: one line on stderr, exit code 2 (no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds "(default: X)" once: not where the help already names its default,
    nor for flags and options without one."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is x for x in (None, False, argparse.SUPPRESS)):
            return text
        return super()._get_help_string(action)


def build_parser():
    parser = _OneLineParser(prog=PROG, description="EKF vs UKF consistency (NEES, Gaussian ECD) for tracking.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks (also TRACKING_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_OneLineParser)
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
        formatter_class=_DefaultsFormatter,
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

    add_score_parser(sub, _DefaultsFormatter)
    return parser


def _compare(args):
    if args.list_scenarios:
        width = max(len(k) for k in SCENARIOS)
        for name, (text, _) in SCENARIOS.items():
            print(f"{name:<{width}}  {text}")
        return 0
    if args.plot is not None:
        with signals_held():  # matplotlib's import must not be cut short
            check_plot_path(args.plot)  # before computing
        check_outputs([("--plot", args.plot)], [])
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
    _check_sizes(scenario, args)
    report = compare(
        scenario, alpha=args.band_alpha, ukf_alpha=args.ukf_alpha,
        ukf_beta=args.ukf_beta, ukf_kappa=args.ukf_kappa,
    )
    outputs = []
    if args.plot is not None:
        import io

        buf = io.BytesIO()
        plot_report(report).savefig(buf, format=check_plot_path(args.plot), dpi=110)
        outputs.append((args.plot, buf.getvalue()))
    if args.json:
        text = to_json(report)
    else:
        text = format_table(report) + "\n"
        if args.plot is not None:
            text += f"\nplot written to {args.plot}\n"
    commit_with_stdout(outputs, text, args.plot)
    return 0


#: Largest Monte Carlo batch compare runs: runs x steps x (state + measurement) values per array.
MAX_VALUES = 1 << 26


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


def main(argv=None):
    """Run the command line; returns the exit status (bad input: 2 with one line on stderr).

    SIGINT, SIGTERM and SIGHUP end the run with one line and 128 + the signal's number
    (130 for Ctrl-C) after removing temporary files; run as the command (``argv``
    None), a signal that comes once the status is known is ignored.
    """
    as_command = argv is None and threading.current_thread() is threading.main_thread()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    debug = getattr(args, "debug", False) or os.environ.get("TRACKING_DEBUG", "") not in ("", "0")
    command = args.command
    stop = Stop()
    stop.install()
    shown = warnings.showwarning

    def note(message, category, filename, lineno, file=None, line=None):
        # a note is one line on stderr, not Python's two (message and source line)
        text = str(message)
        print(text if text.startswith("tracking") else f"{PROG} {command}: note: {text}", file=sys.stderr)

    if not debug:
        warnings.showwarning = note
    try:
        status = _compare(args) if command == "compare" else run_score_cli(args)
        stop.check()
        return status
    except (KeyboardInterrupt, Terminated, Exception) as exc:  # one line, no traceback unless --debug
        stop.seen = True
        cleanup()
        # a signal that came wins over the exception that surfaced (its own, or one it caused)
        signum = stop.signum or (signal.SIGINT if isinstance(exc, KeyboardInterrupt) else None)
        if debug and signum in (None, signal.SIGINT):
            raise
        if signum == signal.SIGINT:
            print(f"{PROG} {command}: interrupted; temporary files removed", file=sys.stderr)
            return 130
        if signum is not None:
            print(f"{PROG} {command}: stopped by {signal.Signals(signum).name}; temporary files removed",
                  file=sys.stderr)
            return 128 + signum
        memory = not_enough_memory(exc)
        text = str(exc).strip().splitlines()
        if memory is not None:
            parser.exit(2, f"{PROG} {command}: error: {memory}\n")
        if isinstance(exc, (ValueError, np.linalg.LinAlgError)):
            parser.exit(2, f"{PROG} {command}: error: {text[0] if text else type(exc).__name__}\n")
        parser.exit(1, f"{PROG} {command}: internal error ({type(exc).__name__}): "
                       f"{text[0] if text else ''} (rerun with --debug for the traceback)\n")
    finally:
        warnings.showwarning = shown
        stop.restore(as_command)

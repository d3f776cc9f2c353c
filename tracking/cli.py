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
from tracking.commands.compare import add_compare_parser, run_compare_cli
from tracking.commands.output import cleanup
from tracking.commands.score import add_score_parser, run_score_cli

PROG = "tracking"
COMMANDS = {"compare": (add_compare_parser, run_compare_cli), "score": (add_score_parser, run_score_cli)}


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
    for add, _ in COMMANDS.values():
        p = add(sub, _DefaultsFormatter)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


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
        status = COMMANDS[command][1](args)
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

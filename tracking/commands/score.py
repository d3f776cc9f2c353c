"""``tracking score FILE``: the subcommand's options, and the run that scores the file and writes
the text, the JSON and the plot (all built in memory, then committed together)."""

import argparse

from tracking.commands.output import plot_format, write_report
from tracking.scoring.files import format_score, plot_score, score_file

__all__ = ["add_score_parser", "run_score_cli"]


def add_score_parser(sub, formatter_class=None):
    """The ``score`` subcommand on ``sub``; ``formatter_class`` shows each default once."""
    p = sub.add_parser(
        "score",
        help="score a tracker's estimates stored in a file (NEES, ANEES, Gaussian ECD per step)",
        description=(
            "Score any tracker's output: per filter, the mean ANEES and Gaussian ECD against their "
            "chi-square bands and the verdict, then (on request) the per-step and per-run tables. "
            "Layouts: a long table (one row per run and step: run id, step id, estimate, truth, "
            "covariance as d*d row-major columns); the same with a filter (or method) column holding "
            "several filters; a wide table (--estimate NAME=COLS and --cov NAME=COLS per filter); "
            "arrays in a .npz or a directory of .npy files, estimate and truth shaped (runs, steps, d) "
            "and covariance (runs, steps, d, d), named by the same options. Run and step ids may be "
            "numbers, strings or timestamps; runs may be ragged (missing steps, all-NaN rows): each "
            "step is scored over the runs it has, and what is missing is counted."
        ),
        formatter_class=formatter_class or argparse.HelpFormatter,
    )
    p.add_argument("file", help="Parquet, Feather/Arrow or CSV file, .npz, a directory of .npy files, "
                                "or a directory of table files")
    p.add_argument("--run", default=None, metavar="NAME",
                   help="run id column or array (default: 'run'; arrays: 0..runs-1 when absent)")
    p.add_argument("--step", default=None, metavar="NAME",
                   help="step id column or array (default: 'step'; arrays: 0..steps-1 when absent)")
    p.add_argument("--estimate", action="append", default=None, metavar="[NAME=]SPEC",
                   help="estimate columns or array: a pattern where * is any text (x_*, *_est), a comma list "
                        "or a name; NAME=SPEC once per filter (default: x_*)")
    p.add_argument("--truth", default="t_*", metavar="SPEC", help="true state columns or array, named as --estimate")
    p.add_argument("--cov", action="append", default=None, metavar="[NAME=]SPEC",
                   help="covariance columns (d*d, row-major) or array (runs, steps, d, d); NAME=SPEC once "
                        "per filter (default: P_*)")
    p.add_argument("--filter", default=None, metavar="COL",
                   help="column naming the filter of each row (default: 'filter' or 'method' when present)")
    p.add_argument("--format", default=None, choices=("parquet", "feather", "npy", "npz", "csv"),
                   help="input format (default: from the extension)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the bands")
    p.add_argument("--per-step", action="store_true", help="also print ANEES and ECD for every step")
    p.add_argument("--per-run", action="store_true", help="also print the mean NEES of every run")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--plot", metavar="FILE", default=None, help="write ANEES (ECD scale) per step and NEES per run")
    return p


def run_score_cli(args):
    """``tracking score``: every output built in memory, then committed together."""
    fmt = plot_format(args.plot, [args.file])
    if not 0.0 < args.alpha < 1.0:
        msg = f"--alpha must be in (0, 1), got {args.alpha!r}"
        raise ValueError(msg)
    rep = score_file(args.file, run=args.run, step=args.step, estimate=args.estimate or "x_*", truth=args.truth,
                     cov=args.cov or "P_*", filter=args.filter, alpha=args.alpha, format=args.format)
    write_report(rep, lambda: format_score(rep, per_run=args.per_run, per_step=args.per_step), as_json=args.json,
                 plot=args.plot, figure=lambda: plot_score(rep), fmt=fmt)
    return 0

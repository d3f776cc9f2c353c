"""``fastcal recalibrate``: fit a recalibration map on a prediction file, out of
core, save it, and print the before/after table on the same file."""

import time

from fastcal import files, recalibrate
from fastcal.commands.common import EXIT_OK, MAX_CHUNK_ROWS, _check_bins, _check_range, _columns, _Fail, _input_format
from fastcal.commands.outputs import _check_outputs, _check_plot_bins, _figure_bytes, _plot_type, _write
from fastcal.reports._json import json_text

# The rows of the before/after table: (name, report attribute).
_TABLE = (("ECD", "ecd"), ("ECE", "ece"), ("Brier", "brier"), ("NLL", "nll"),
          ("ECD z", "ecd_z"), ("p(over-confident)", "ecd_p_over"))


def run(args):
    """Run ``fastcal recalibrate`` with the parsed ``args``; returns the exit status."""
    plot_kind = _check_args(args)
    progress = False if args.quiet else None  # on stderr when it is a terminal, --json or not
    read = dict(prob=_columns(args.prob), label=args.label, chunk_rows=args.chunk_rows,
                progress=progress, format=_input_format(args), where=args.where)
    model, fit_seconds = _fit(args, read)
    out = {"file": args.path, "method": args.method, "passes": model.passes_,
           "fit_seconds": round(fit_seconds, 6), "params": model.to_dict()}
    lines = _fit_lines(args, model, fit_seconds)
    reports = None
    if not args.no_table:
        reports = _before_after(args, model, read)
        out["table"] = {name: {k: float(getattr(r, attr)) for k, r in reports}
                        for name, attr in _TABLE}
        out["table"]["verdict"] = {k: r.verdict for k, r in reports}
        lines += _table_lines(reports)
    text = json_text(out) if args.json else "\n".join(lines) + "\n"
    outputs = [("-", text.encode("utf-8"))]
    if args.out:
        outputs.append((args.out, (model.to_json(indent=1) + "\n").encode("utf-8")))
    if args.plot:
        fig = recalibrate.before_after_diagram(reports[0][1], reports[1][1],
                                               title=f"{args.method} recalibration")
        outputs.append((args.plot, _figure_bytes(fig, plot_kind)))
    _write(outputs, (("standard output", "-"), ("--out", args.out), ("--plot", args.plot)))
    return EXIT_OK


def _check_args(args):
    """Every check that needs no data; returns the --plot image type (or None)."""
    _check_bins("--bins", args.bins)
    _check_bins("--hist-bins", args.hist_bins)
    _check_range("--chunk-rows", args.chunk_rows, 1, MAX_CHUNK_ROWS)
    if not 0.0 < args.alpha < 0.5:
        raise _Fail(f"--alpha must be strictly between 0 and 0.5; got {args.alpha!r}")
    if args.target == "safe" and args.method != "temperature":
        raise _Fail(f"--target safe is for --method temperature; got --method {args.method}")
    _check_outputs([("standard output", "-"), ("--out", args.out), ("--plot", args.plot)],
                   [("input", args.path)])
    _check_plot_bins(args.plot, args.bins)
    plot_kind = _plot_type(args.plot) if args.plot else None
    if args.plot and args.no_table:
        raise _Fail("--plot draws the before/after table's bins; drop --no-table")
    return plot_kind


def _fit(args, read):
    """The fitted map and the seconds its passes took."""
    options = {"temperature": dict(target=args.target, alpha=args.alpha),
               "histogram": dict(n_bins=args.hist_bins)}.get(args.method, {})
    model = recalibrate.make(args.method, logits=args.logits, nan_policy=args.nan_policy,
                             **options)
    t0 = time.perf_counter()
    recalibrate.fit_file(model, args.path, **read)
    return model, time.perf_counter() - t0


def _fit_lines(args, model, fit_seconds):
    """The head of the text report: the file, the passes and the fitted parameters."""
    lines = [f"# {args.path}: {args.method} recalibration", "",
             f"fitted on {model.n_} rows in {model.passes_} passes, {fit_seconds:.2f} s"]
    if args.method == "temperature":
        lines.append(f"T = {model.temperature_:.6g}" + (
            f" (safe at alpha = {args.alpha:g}; the NLL optimum is "
            f"T = {model.temperature_nll_:.6g})" if args.target == "safe" else ""))
    elif args.method == "platt":
        lines.append(f"a = {model.a_:.6g}, b = {model.b_:.6g}")
    return lines


def _before_after(args, model, read):
    """(name, report) of the file before and after the map (and at the NLL optimum
    for a safe temperature), each from its own pass."""
    def scored(transform=None):
        return files.score_file(args.path, logits=args.logits, n_bins=args.bins,
                                nan_policy=args.nan_policy, transform=transform, **read)

    reports = [("before", scored()), ("after", scored(model))]
    if args.method == "temperature" and args.target == "safe":
        nll_model = recalibrate.from_dict(dict(model.to_dict(), params=dict(
            model.to_dict()["params"], temperature=model.temperature_nll_, target="nll")))
        reports.append(("NLL optimum", scored(nll_model)))
    return reports


def _table_lines(reports):
    """The before/after table in Markdown (and the cost of being safe)."""
    lines = ["", "In-sample (the fitting data; fastcal.recalibrate.evaluate cross-fits):", "",
             "| | " + " | ".join(k for k, _ in reports) + " |",
             "|---|" + "---:|" * len(reports)]
    for name, attr in _TABLE:
        lines.append(f"| {name} | " + " | ".join(f"{getattr(r, attr):.4g}" for _, r in reports)
                     + " |")
    lines.append("| verdict | " + " | ".join(r.verdict for _, r in reports) + " |")
    if len(reports) == 3:
        b, n = reports[1][1], reports[2][1]
        lines.append("")
        lines.append(f"Cost of being safe: NLL {b.nll - n.nll:+.3g}, ECE {b.ece - n.ece:+.3g} "
                     "against the NLL optimum.")
    return lines

"""``fastcal score``: score a prediction file (or, with ``--scheduler`` /
``--workers``, a Parquet dataset on Dask) and print or write its report."""

import math
import os
import sys
import time

from fastcal import files
from fastcal.commands.common import (
    EXIT_OK,
    MAX_CHUNK_ROWS,
    _check_bins,
    _check_local_input,
    _check_range,
    _cli_words,
    _columns,
    _Fail,
    _input_format,
    by_options,
)
from fastcal.commands.outputs import _check_outputs, _check_plot_bins, _figure_bytes, _plot_type, _write
from fastcal.inputs.validation import check_eps
from fastcal.reports._json import json_text
from fastcal.sources.files import soft_labels
from fastcal.writers import _one_line


def run(args):
    """Run ``fastcal score`` with the parsed ``args``; returns the exit status."""
    plot_kind = _check_score_args(args)
    if args.plot_smooth and not args.plot:
        raise _Fail("--plot-smooth chooses what --plot draws; pass --plot FILE.png too")
    args.smece = args.smece or args.plot_smooth
    prob, label = _columns(args.prob), _columns(args.label)
    if soft_labels(label) and args.plot:
        raise _Fail("--plot draws a reliability diagram of bins; soft labels (K --label "
                    "columns) have no bins: drop --plot")
    fmt = _input_format(args)
    transform = _load_recalibration(args.recalibration, args.logits) \
        if args.recalibration else None
    t0 = time.perf_counter()
    if args.scheduler is not None or args.workers is not None:
        # 10-20 ms of imports (fastcal.distributed) that a local run does not pay
        from fastcal.commands import on_dask

        rep = on_dask.score(args, fmt, prob, label, transform)
    else:
        rep = _score_here(args, fmt, prob, label, transform)
    elapsed = time.perf_counter() - t0
    if args.json:
        text = json_text(_report_dict(rep, elapsed))
    else:
        text = _report_text(rep, elapsed)
    outputs = [(args.output or "-", text.encode("utf-8"))]
    if args.plot:
        outputs.append((args.plot, _plot_or_print(args, rep, plot_kind, text)))
    _write(outputs, (("--output", args.output or "-"), ("--plot", args.plot)))
    return EXIT_OK


def _score_here(args, fmt, prob, label, transform):
    """The report, computed in this process."""
    progress = False if args.quiet else None  # on stderr when it is a terminal, --json or not
    return files.score_file(
        args.path, prob=prob, label=label, n_bins=args.bins, closed=args.closed,
        strategy=args.strategy, observed=args.observed, nan_policy=args.nan_policy,
        eps=args.eps, ace=args.ace, chunk_rows=args.chunk_rows, progress=progress, format=fmt,
        logits=args.logits, renormalize=args.renormalize, ci=args.ci, n_boot=args.n_boot,
        seed=args.seed, device=args.device, verify_checksums=not args.no_verify_checksums,
        transform=transform, smooth=args.smece, metrics=args.metrics, sweep=args.sweep,
        tace_threshold=args.tace_threshold, where=args.where, weight=args.weight,
        **by_options(args))


def _plot_or_print(args, rep, kind, text):
    """The --plot image; if drawing fails, the finished report is printed rather than
    lost and no file is written."""
    try:
        fig = rep.plot() if getattr(args, "by", None) is not None else rep.plot(smooth=args.plot_smooth)
        return _figure_bytes(fig, kind)
    except Exception as exc:
        if args.output != "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        where = "printed above" if args.output in (None, "-") else "printed to stdout"
        raise _Fail(f"--plot {args.plot}: could not draw the diagram "
                    f"({type(exc).__name__}: {_one_line(exc)}); the report was {where} and "
                    f"no file was written") from exc


def _check_score_args(args):
    """Every check that needs no data: sizes, outputs, optional dependencies."""
    _check_bins("--bins", args.bins)
    _check_range("--chunk-rows", args.chunk_rows, 1, MAX_CHUNK_ROWS)
    try:  # the library's rule (0 <= eps < 0.5), in the CLI's words
        check_eps(args.eps)
    except ValueError as exc:
        raise _Fail(_cli_words(str(exc))) from None
    if args.scheduler is not None or args.workers is not None:
        _check_dask_args(args)
    if getattr(args, "correction", None) is not None and getattr(args, "by", None) is None:
        raise _Fail("--correction adjusts the segments' p-values: pass --by COL too, or drop "
                    "--correction")
    if getattr(args, "by", None) is not None and args.plot_smooth:
        raise _Fail("--plot-smooth draws one reliability diagram; with --by, --plot draws the "
                    "segments' ECD: drop --plot-smooth")
    inputs = [("input", args.path)]
    if args.recalibration:
        inputs.append(("--recalibration map", args.recalibration))
    _check_outputs([("--output", args.output), ("--plot", args.plot)], inputs)
    _check_plot_bins(args.plot, args.bins)
    return _plot_type(args.plot) if args.plot else None


def _check_dask_args(args):
    """--scheduler / --workers: one of them, sane bounds, Dask installed."""
    cores = os.cpu_count() or 1
    if args.scheduler is not None and args.workers is not None:
        raise _Fail("pass --scheduler or --workers, not both")
    _check_range("--workers", args.workers, 1, max(64, 4 * cores),
                 f" (this machine has {cores} cores)")
    for opt, val in (("--timeout", args.timeout), ("--time-limit", args.time_limit)):
        if not (val > 0 and math.isfinite(val)):
            raise _Fail(f"{opt} must be a positive number of seconds; got {val!r}")
    try:
        import distributed  # noqa: F401
    except ImportError:
        opt = "--scheduler" if args.scheduler is not None else "--workers"
        raise _Fail(f"{opt} needs Dask, which is not installed: pip install -e '.[dask]' "
                    f"in a fastcal checkout, or pip install 'fastcal[dask]'") from None


def _load_recalibration(path, logits):
    """The --recalibration map, checked against --logits."""
    from fastcal import recalibrate  # 0.13 s to import: only when the option is given

    try:
        model = recalibrate.load(path)
    except OSError as exc:
        _check_local_input("--recalibration", path)
        raise _Fail(f"--recalibration {path}: {exc.strerror or _one_line(exc)}") from None
    except ValueError as exc:
        raise _Fail(f"--recalibration {_one_line(exc)}") from None
    if model.logits != bool(logits):
        want = "logits (pass --logits)" if model.logits else "probabilities (drop --logits)"
        raise _Fail(f"--recalibration {path}: the map was fitted on {want}")
    return model


# -- the report as text and JSON ----------------------------------------------------

def _report_dict(rep, elapsed):
    out = rep.to_dict()
    whole = getattr(rep, "overall", rep)  # segments: the whole's provenance
    out["file"] = whole.source
    out["format"] = whole.format
    out["n_rows"] = whole.n_rows
    out["passes"] = whole.passes
    out["seconds"] = round(elapsed, 6)
    return out


_ORDINAL = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def _pass_lines(steps, where):
    """What each pass after the first was, from the report's ``pass_steps``."""
    lines = []
    first = 1
    for what, k in steps:
        last = first + k - 1
        if what != "fill":
            if k > 1:
                at = f"passes {first}-{last}"
            else:
                at = f"a {_ORDINAL[first]} pass" if first in _ORDINAL else f"pass {first}"
            lines.append({
                "equal-mass bins": f"Equal-mass bins: exact, from {at} over {where}.",
                "ACE": f"ACE: exact equal-mass bins, from {at} over {where}.",
                "certain-and-wrong rows": f"Certain-and-wrong rows: counted in {at} over {where}.",
            }.get(what, f"{what}: {at} over {where}."))
        first = last + 1
    return lines


def _report_text(rep, elapsed):
    if hasattr(rep, "overall"):  # segments
        whole = rep.overall
        return (f"# {whole.source}\n\n{whole.n_rows} rows ({whole.format}) in {len(rep):,} "
                f"segments of {', '.join(rep.columns)} scored in {elapsed:.2f} s, "
                f"{whole.n_bins} bins\n\n{rep.to_markdown()}\n")
    if not hasattr(rep, "n_bins"):  # soft labels: no bins
        return (f"# {rep.source}\n\n{rep.n_rows} rows ({rep.format}) of soft labels over "
                f"{rep.n_classes} classes scored in {elapsed:.2f} s\n\n{rep.to_markdown()}\n")
    head = [f"# {rep.source}", "",
            f"{rep.n_rows} rows ({rep.format}) scored in {elapsed:.2f} s, {rep.n_bins} "
            f"{rep.strategy} bins, closed={rep.closed!r}"]
    where = "the data" if getattr(rep, "dask", None) else "the file"
    if getattr(rep, "dask", None):
        head.append(f"Computed on Dask ({rep.dask}) in {rep.passes} "
                    f"pass{'es' if rep.passes != 1 else ''} over the data.")
    head += _pass_lines(getattr(rep, "pass_steps", ()), where)
    return "\n".join(head) + "\n\n" + rep.to_markdown() + "\n"


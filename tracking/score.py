"""Score any tracker's output from a file: ``tracking score FILE`` and :func:`score_file`.

The file holds one row per run and step: a run id, a step id, the estimate
``x`` (d columns), the true state ``t`` (d columns) and the covariance ``P``
(d*d columns, row-major). It is read out of core, chunk by chunk, through
fastcal's readers (Parquet, Feather / Arrow IPC, a directory of NPY files, CSV)
and scored with one :class:`fastcal.gaussian.GaussianAccumulator` per step.
"""

import math
import os

import numpy as np

from fastcal.gaussian import GaussianAccumulator, anees_bounds, ecd_bounds, nees
from fastcal.sources.io import open_reader

__all__ = ["score_file", "format_score", "plot_score", "resolve_columns"]

CHUNK_ROWS = 1 << 16
MAX_ID = 10_000_000  # run and step ids index dense count grids


def resolve_columns(spec, available, *, what, path):
    """Columns named by ``spec``: a comma list, a prefix ending in ``*``, an exact name, or a prefix."""
    if not isinstance(spec, str) or not spec.strip():
        msg = f"{path}: --{what} must be a column prefix ('x_*') or a comma list of columns, got {spec!r}"
        raise ValueError(msg)
    spec = spec.strip()
    if "," in spec:
        cols = [c.strip() for c in spec.split(",") if c.strip()]
        missing = [c for c in cols if c not in available]
        if missing:
            msg = f"{path}: --{what} names missing column(s) {', '.join(map(repr, missing))}; the file has {', '.join(map(repr, available))}"
            raise ValueError(msg)
        return cols
    if not spec.endswith("*") and spec in available:
        return [spec]
    prefix = spec.rstrip("*")
    cols = [c for c in available if c.startswith(prefix)]
    if not cols:
        msg = f"{path}: --{what} {spec!r} matches no column; the file has {', '.join(map(repr, available))}"
        raise ValueError(msg)
    return cols


def _where(chunk, i, runs, steps):
    return (f"{chunk.file}: row {chunk.file_start + int(i)} (run {_id(runs[i])}, step {_id(steps[i])})")


def _id(v):
    v = float(v)
    return int(v) if math.isfinite(v) and v == int(v) else v


def _ids(name, values, chunk):
    """Run or step ids: finite non-negative integers."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v) | (v < 0) | (v != np.floor(v)) | (v > MAX_ID)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (f"{chunk.file}: row {chunk.file_start + i}: {name} id {values[i]!r} is not an integer in "
               f"[0, {MAX_ID}]; expected integer run and step ids")
        raise ValueError(msg)
    return v.astype(np.int64)


def _grow(a, shape, fill):
    if a.shape == shape:
        return a
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


def score_file(path, *, run="run", step="step", estimate="x_*", truth="t_*", cov="P_*",
               alpha=0.05, format=None, chunk_rows=CHUNK_ROWS):
    """Score a tracker's estimates stored in a file: per-step ANEES and Gaussian ECD, NEES per run.

    Parameters
    ----------
    path : str or path-like
        Parquet / Feather / CSV file, NPY directory (one column per file), or a
        directory of such files.
    run, step : str
        Columns holding the run and step ids (non-negative integers).
    estimate, truth, cov : str
        Estimate ``x`` (d columns), truth (d columns) and covariance (d*d columns,
        row-major): a prefix ending in ``*`` (columns in file order), a comma list,
        or one column name.
    alpha : float, default 0.05
        Significance level of the two-sided chi-square bands.
    format : str, optional
        Reader format (``parquet``, ``feather``, ``npy``, ``csv``); default from the extension.
    chunk_rows : int
        Rows per chunk (memory is bounded by this, plus one count per run and step).

    Returns
    -------
    dict
        ``runs``, ``steps``, ``dim``, ``anees`` and ``ecd`` (lists per step),
        ``bounds`` (``anees``, ``ecd``), ``mean_anees``, ``mean_ecd``,
        ``inside_fraction``, ``verdict``, ``nees_per_run`` (mean NEES of each run
        over its steps), ``run_ids``, ``step_ids``, ``file``, ``columns``, ``alpha``.

    Raises
    ------
    ValueError
        One line naming the file, row, run and step: a NaN or inf value, a
        covariance that is not symmetric positive definite, a (run, step) pair
        present twice, or a step missing from a run.

    Notes
    -----
    NEES ``e^T P^-1 e`` with ``e = t - x`` (paper eq. 11); ANEES is its mean over
    runs at one step and the Gaussian ECD ``0.5 ANEES - d/2`` (eq. 10). Under
    consistency ``R * ANEES`` is chi-square with ``R d`` degrees of freedom,
    which gives the bands.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> from tracking.score import score_file
    >>> rows = [(r, k, 0.1 * r, 0.0, 1.0, 0.0, 0.0, 1.0) for r in range(3) for k in range(2)]
    >>> cols = dict(zip(["run", "step", "x_0", "t_0", "P_0"], np.array(rows)[:, [0, 1, 2, 3, 4]].T))
    >>> path = os.path.join(tempfile.mkdtemp(), "est.parquet")
    >>> pq.write_table(pa.table(cols), path)
    >>> rep = score_file(path)
    >>> rep["runs"], rep["steps"], rep["dim"], [round(a, 4) for a in rep["anees"]]
    (3, 2, 1, [0.0167, 0.0167])
    """
    if not (isinstance(alpha, float | int) and 0.0 < alpha < 1.0):
        msg = f"alpha must be in (0, 1), got {alpha!r}"
        raise ValueError(msg)
    path = os.fspath(path)
    reader, _ = open_reader(path, format)
    available = list(reader.columns)
    for name, col in (("run", run), ("step", step)):
        if col not in available:
            msg = f"{path}: no {name} column {col!r}; the file has {', '.join(map(repr, available))}"
            raise ValueError(msg)
    est = resolve_columns(estimate, available, what="estimate", path=path)
    tru = resolve_columns(truth, available, what="truth", path=path)
    cvs = resolve_columns(cov, available, what="cov", path=path)
    d = len(est)
    if len(tru) != d:
        msg = f"{path}: --truth has {len(tru)} columns ({', '.join(tru)}); expected {d}, one per --estimate column"
        raise ValueError(msg)
    if len(cvs) != d * d:
        msg = f"{path}: --cov has {len(cvs)} columns; expected d*d = {d * d} (row-major) for d = {d}"
        raise ValueError(msg)
    names = [run, step, *est, *tru, *cvs]
    reader.check(list(dict.fromkeys(names)))

    counts = np.zeros((0, 0), dtype=np.int64)     # 1 where a (run id, step id) row was seen
    first_row = np.zeros((0, 0), dtype=np.int64)  # global row of the first such row
    run_sum = np.zeros(0)
    run_n = np.zeros(0, dtype=np.int64)
    accs = {}
    for chunk in reader.chunks(names, int(chunk_rows)):
        cols = chunk.columns
        n = len(cols[0])
        if n == 0:
            continue
        raw_runs, raw_steps = np.asarray(cols[0]), np.asarray(cols[1])
        runs = _ids("run", raw_runs, chunk)
        steps = _ids("step", raw_steps, chunk)
        x = np.column_stack([np.asarray(c, dtype=np.float64) for c in cols[2:2 + d]])
        t = np.column_stack([np.asarray(c, dtype=np.float64) for c in cols[2 + d:2 + 2 * d]])
        P = np.column_stack([np.asarray(c, dtype=np.float64) for c in cols[2 + 2 * d:]]).reshape(n, d, d)
        for label, arr, colnames in (("estimate", x, est), ("truth", t, tru), ("cov", P.reshape(n, -1), cvs)):
            bad = ~np.isfinite(arr)
            if bad.any():
                i, j = (int(v[0]) for v in np.nonzero(bad))
                msg = (f"{_where(chunk, i, raw_runs, raw_steps)}: {label} column {colnames[j]!r} is "
                       f"{arr[i, j]}; expected finite values")
                raise ValueError(msg)
        scale = np.sqrt(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        gap = np.abs(P - np.swapaxes(P, 1, 2)).max(axis=(1, 2))
        asym = gap > 1e-8 * np.maximum(scale.max(axis=1) ** 2, np.finfo(float).tiny)
        low = np.linalg.eigvalsh(P)[:, 0]
        bad = asym | ~(low > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            why = "is not symmetric" if asym[i] else f"is not positive definite (smallest eigenvalue {low[i]:.3g})"
            msg = (f"{_where(chunk, i, raw_runs, raw_steps)}: the covariance ({cvs[0]} .. {cvs[-1]}) {why}; "
                   "expected a symmetric positive definite matrix")
            raise ValueError(msg)
        # bookkeeping of (run, step) pairs: duplicates now, missing ones at the end
        shape = (max(counts.shape[0], int(runs.max()) + 1), max(counts.shape[1], int(steps.max()) + 1))
        counts = _grow(counts, shape, 0)
        first_row = _grow(first_row, shape, -1)
        seen_before = counts[runs, steps] > 0
        dup = seen_before | _dup_in_chunk(runs, steps)
        if dup.any():
            i = int(np.flatnonzero(dup)[0])
            if seen_before[i]:
                prev = int(first_row[runs[i], steps[i]])
            else:  # twice within this chunk
                prev = chunk.start + int(np.flatnonzero((runs == runs[i]) & (steps == steps[i]))[0])
            msg = (f"{_where(chunk, i, raw_runs, raw_steps)}: the pair (run {runs[i]}, step {steps[i]}) appears "
                   f"again (first at global row {prev}); expected one row per run and step")
            raise ValueError(msg)
        counts[runs, steps] = 1
        first_row[runs, steps] = chunk.start + np.arange(n)
        e = t - x
        values = nees(e, P)
        if run_sum.shape[0] < shape[0]:
            run_sum = _grow(run_sum, (shape[0],), 0.0)
            run_n = _grow(run_n, (shape[0],), 0)
        np.add.at(run_sum, runs, values)
        np.add.at(run_n, runs, 1)
        order = np.argsort(steps, kind="stable")
        uniq, starts = np.unique(steps[order], return_index=True)
        bounds = list(starts[1:]) + [n]
        for s, a, b in zip(uniq.tolist(), starts.tolist(), bounds):
            rows = order[a:b]
            acc = accs.get(s)
            if acc is None:
                acc = accs[s] = GaussianAccumulator(d)
            acc.update(e[rows], P[rows])
    if not accs:
        msg = f"{path}: no rows to score"
        raise ValueError(msg)
    run_ids = np.flatnonzero(counts.sum(axis=1) > 0)
    step_ids = np.flatnonzero(counts.sum(axis=0) > 0)
    grid = counts[np.ix_(run_ids, step_ids)]
    if (grid == 0).any():
        r, k = (int(v[0]) for v in np.nonzero(grid == 0))
        msg = (f"{path}: run {int(run_ids[r])} has no row for step {int(step_ids[k])} "
               f"({int((grid == 0).sum())} (run, step) pairs missing); expected every run to have every step")
        raise ValueError(msg)
    R, T = len(run_ids), len(step_ids)
    if R < 2:
        msg = f"{path}: found {R} run; expected >= 2 runs for the chi-square bands"
        raise ValueError(msg)
    results = [accs[int(s)].result() for s in step_ids]
    anees = np.array([r.anees for r in results])
    ecd = np.array([r.ecd for r in results])
    a_lo, a_hi = anees_bounds(R, d, alpha=alpha)
    e_lo, e_hi = ecd_bounds(R, d, alpha=alpha)
    inside = (anees >= a_lo) & (anees <= a_hi)
    mean_anees = float(anees.mean())
    from tracking.compare import verdict

    return {
        "file": path,
        "runs": R,
        "steps": T,
        "dim": d,
        "anees": anees.tolist(),
        "ecd": ecd.tolist(),
        "bounds": {"anees": [a_lo, a_hi], "ecd": [e_lo, e_hi]},
        "mean_anees": mean_anees,
        "mean_ecd": float(ecd.mean()),
        "inside_fraction": float(inside.mean()),
        "verdict": verdict(mean_anees, (a_lo, a_hi)),
        "nees_per_run": (run_sum[run_ids] / run_n[run_ids]).tolist(),
        "run_ids": run_ids.tolist(),
        "step_ids": step_ids.tolist(),
        "columns": {"run": run, "step": step, "estimate": est, "truth": tru, "cov": cvs},
        "alpha": alpha,
        "confidence": 1.0 - alpha,
    }


def _dup_in_chunk(runs, steps):
    """Rows whose (run, step) pair occurs earlier in the same chunk."""
    key = runs * (int(steps.max()) + 1) + steps
    _, first = np.unique(key, return_index=True)
    mask = np.ones(len(key), dtype=bool)
    mask[first] = False
    return mask


def format_score(rep):
    """Plain-text report: bands, per-step ANEES / ECD, NEES per run, fraction inside, verdict."""
    lo, hi = rep["bounds"]["anees"]
    elo, ehi = rep["bounds"]["ecd"]
    level = round(100 * rep["confidence"])
    d = rep["dim"]
    lines = [
        f"{rep['file']}: {rep['runs']} runs x {rep['steps']} steps, state dimension {d}",
        f"{level}% bands per step: ANEES [{lo:.3f}, {hi:.3f}]   ECD [{elo:.3f}, {ehi:.3f}]   "
        f"(consistent: ANEES {d}, ECD 0)",
        "",
        f"{'step':>8}{'ANEES':>10}{'ECD':>10}  band",
    ]
    for s, a, e in zip(rep["step_ids"], rep["anees"], rep["ecd"]):
        where = "inside" if lo <= a <= hi else ("above" if a > hi else "below")
        lines.append(f"{s:>8}{a:>10.3f}{e:>10.3f}  {where}")
    lines += ["", f"{'run':>8}{'mean NEES':>11}"]
    for r, v in zip(rep["run_ids"], rep["nees_per_run"]):
        lines.append(f"{r:>8}{v:>11.3f}")
    lines += [
        "",
        f"mean ANEES {rep['mean_anees']:.3f}, mean ECD {rep['mean_ecd']:.3f}; "
        f"{100 * rep['inside_fraction']:.0f}% of steps inside the band; mean ANEES vs band: {rep['verdict']}",
    ]
    return "\n".join(lines)


def plot_score(rep, path):
    """ANEES per step with its band and an ECD scale, and the mean NEES of each run."""
    from fastcal._atomic import write_atomically
    from tracking.compare import check_plot_path

    fmt = check_plot_path(path)
    from matplotlib.figure import Figure

    d = rep["dim"]
    fig = Figure(figsize=(8, 6.5), constrained_layout=True)
    ax, ax_runs = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 2]})
    lo, hi = rep["bounds"]["anees"]
    level = round(100 * rep["confidence"])
    ax.axhspan(lo, hi, color="0.85", label=f"{level}% band")
    ax.axhline(d, color="0.5", lw=0.8, ls=":")
    ax.plot(rep["step_ids"], rep["anees"], color="tab:blue", lw=1.4, label="ANEES")
    ax.set_xlabel("step")
    ax.set_ylabel(f"ANEES (consistent: {d})")
    sec = ax.secondary_yaxis("right", functions=(lambda a: 0.5 * a - 0.5 * d, lambda e: 2.0 * e + d))
    sec.set_ylabel("Gaussian ECD = ANEES/2 - d/2")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(f"{os.path.basename(rep['file'])}: {rep['runs']} runs x {rep['steps']} steps", fontsize=10)
    ax_runs.plot(rep["run_ids"], rep["nees_per_run"], "o", ms=3, color="tab:blue")
    ax_runs.axhline(d, color="0.5", lw=0.8, ls=":")
    ax_runs.set_xlabel("run")
    ax_runs.set_ylabel("mean NEES of the run")
    return write_atomically(path, lambda fh: fig.savefig(fh, format=fmt, dpi=110))


def add_score_parser(sub):
    import argparse

    p = sub.add_parser(
        "score",
        help="score a tracker's estimates stored in a file (NEES, ANEES, Gaussian ECD per step)",
        description=(
            "Read one row per run and step (run id, step id, estimate, truth, covariance as d*d "
            "row-major columns) out of core and print per-step ANEES and Gaussian ECD with their "
            "chi-square bands, NEES per run, the fraction of steps in the band and the verdict."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("file", help="Parquet, Feather/Arrow, CSV file, NPY directory, or a directory of files")
    p.add_argument("--run", default="run", metavar="COL", help="run id column")
    p.add_argument("--step", default="step", metavar="COL", help="step id column")
    p.add_argument("--estimate", default="x_*", metavar="COLS", help="estimate columns: prefix* or comma list")
    p.add_argument("--truth", default="t_*", metavar="COLS", help="true state columns: prefix* or comma list")
    p.add_argument("--cov", default="P_*", metavar="COLS", help="covariance columns (d*d, row-major)")
    p.add_argument("--format", default=None, choices=("parquet", "feather", "npy", "csv"),
                   help="file format (default: from the extension)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the bands")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--plot", metavar="FILE", default=None, help="write ANEES (ECD scale) per step and NEES per run")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return p


def run_score_cli(args):
    import json
    import sys

    from tracking.compare import check_plot_path

    if args.plot is not None:
        check_plot_path(args.plot)
    if not 0.0 < args.alpha < 1.0:
        msg = f"--alpha must be in (0, 1), got {args.alpha!r}"
        raise ValueError(msg)
    rep = score_file(args.file, run=args.run, step=args.step, estimate=args.estimate, truth=args.truth,
                     cov=args.cov, alpha=args.alpha, format=args.format)
    if args.plot is not None:
        try:
            plot_score(rep, args.plot)
        except OSError as exc:
            msg = f"cannot write --plot {args.plot!r}: {exc.strerror or exc}"
            raise ValueError(msg) from None
    if args.json:
        json.dump(rep, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(format_score(rep))
        if args.plot is not None:
            print(f"\nplot written to {args.plot}")
    return 0

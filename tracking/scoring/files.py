"""Score any tracker's output from a file: ``tracking score FILE`` and :func:`score_file`.

The layouts read (long table, wide table, table with a filter column, arrays
in a ``.npz`` or ``.npy`` directory) are decided once, in :mod:`tracking.scoring.inputs`;
this module scores the rows it hands over, block by block, with
:func:`fastcal.gaussian.nees`. Memory grows with the rows read (one key and one
NEES per row), never with the values of run or step ids.
"""

import math
import os

import numpy as np

from fastcal.gaussian import anees_bounds, ecd_bounds, nees
from tracking.scoring.inputs import open_input, resolve_columns, show_id
from tracking.scoring.report import (
    band_lines,
    band_panel,
    check_plot_path,
    ecd_scale,
    legend_above,
    num,
    series,
    verdict,
    write_figure,
)

__all__ = ["score_file", "format_score", "plot_score", "resolve_columns"]

CHUNK_ROWS = 1 << 16


def score_file(path, *, run=None, step=None, estimate="x_*", truth="t_*", cov="P_*", filter=None,
               alpha=0.05, format=None, chunk_rows=CHUNK_ROWS):
    """Score a tracker's estimates stored in a file: per-step ANEES and Gaussian ECD, NEES per run.

    Parameters
    ----------
    path : str or path-like
        A long or wide table (Parquet, Feather, CSV, a directory of such files or
        of 1-D ``.npy`` columns), or arrays (``.npz``, a directory of ``.npy``
        files) shaped (runs, steps, d) and (runs, steps, d, d).
    run, step : str, optional
        Run and step id column (or array); default ``"run"`` and ``"step"``.
        Ids may be integers, floats, strings or timestamps. Arrays: optional,
        default ``0 .. n-1``.
    estimate, truth, cov : str or dict
        Estimate ``x`` (d columns), truth (d columns) and covariance (d*d
        columns, row-major), or array names: a prefix ending in ``*``, a comma
        list, or one name. Several filters: ``{"ekf": "x_ekf_*", "ukf": ...}``
        for both ``estimate`` and ``cov`` (a wide table, or named arrays); for
        arrays a prefix matching several arrays (``x_ekf``, ``x_ukf``) also does.
    filter : str, optional
        Column telling the filters apart in a long table; default ``filter`` or
        ``method`` when the table has one.
    alpha : float, default 0.05
        Significance level of the two-sided chi-square bands.
    format : str, optional
        ``parquet``, ``feather``, ``csv``, ``npy`` or ``npz``; default from the extension.
    chunk_rows : int
        Rows per block read.

    Returns
    -------
    dict
        One filter: ``runs``, ``steps``, ``dim``, ``anees`` and ``ecd`` (lists
        per step), ``bounds`` (``anees``, ``ecd``: one step's band over all runs;
        ``mean_anees``: the band of the mean), ``mean_anees``, ``mean_ecd``,
        ``mean_nees`` and ``nees_count`` (the mean of all N NEES values scored,
        the mean ANEES when every step has every run), ``inside_fraction`` (the
        share of steps inside their band), ``verdict`` (``mean_nees`` against the
        band of the mean), ``nees_per_run``, ``run_ids``,
        ``step_ids``, ``runs_per_step``, ``missing_pairs``, ``skipped_rows``,
        ``file``, ``layout``, ``columns``, ``alpha``. Several filters:
        ``filters`` -> name -> those keys, beside ``file``, ``layout``, ``alpha``.

    Raises
    ------
    ValueError
        One line naming the file and what was found: a layout that does not
        fit, a NaN or inf value in a row that is not wholly missing, a
        covariance that is not symmetric positive definite, a (run, step) pair
        present twice, fewer than two runs.

    Notes
    -----
    NEES ``e^T P^-1 e`` with ``e = t - x`` (paper eq. 11); ANEES is its mean over
    the runs present at one step and the Gaussian ECD ``0.5 ANEES - d/2``
    (eq. 10). Under consistency ``R_k * ANEES`` is chi-square with ``R_k d``
    degrees of freedom, which gives each step's band (``R_k`` runs at step k),
    and ``N * mean_nees`` over all ``N`` NEES values is chi-square with ``N d``,
    which gives the band of the mean the verdict uses: much narrower than one
    step's, so a filter whose steps mostly lie inside their bands can still be
    judged over- or under-confident as a whole.
    Ragged runs are scored as they are: a (run, step) pair without a row, and a
    row whose whole estimate, truth or covariance is NaN (padding), are counted
    and the first one named (``missing_pairs``, ``skipped_rows``), never dropped
    silently.

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
    if not (isinstance(alpha, float | int) and not isinstance(alpha, bool) and 0.0 < alpha < 1.0):
        msg = f"alpha must be in (0, 1), got {alpha!r}"
        raise ValueError(msg)
    if not (isinstance(chunk_rows, int) and chunk_rows >= 1):
        msg = f"chunk_rows must be an integer >= 1, got {chunk_rows!r}"
        raise ValueError(msg)
    path = os.fspath(path)
    layout = open_input(path, run=run, step=step, estimate=estimate, truth=truth, cov=cov, filter=filter,
                        format=format)
    scorers = {}
    for block in layout.blocks(chunk_rows):
        sc = scorers.get(block.filter)
        if sc is None:
            sc = scorers[block.filter] = _Scorer(layout.dim, _component_names(layout, block.filter))
        sc.update(block, layout.where)
    if not scorers:
        msg = f"{path}: no rows to score"
        raise ValueError(msg)
    reps = {}
    for name, sc in scorers.items():
        rep = sc.finish(path, layout.where, alpha, name)
        rep["columns"] = _columns_of(layout, name)
        reps[name] = rep
    if list(reps) == [None]:
        rep = reps[None]
        return {"file": path, "layout": layout.kind, **rep}
    return {"file": path, "layout": layout.kind, "filters": {str(k): v for k, v in reps.items()},
            "alpha": alpha, "confidence": 1.0 - alpha}


def _columns_of(layout, name):
    cols = dict(layout.columns)
    for key in ("estimate", "cov"):
        if isinstance(cols.get(key), dict):
            cols[key] = cols[key][name]
    return cols


def _component_names(layout, name):
    """Names for messages: the estimate, truth and covariance columns (or array[..., j])."""
    cols = _columns_of(layout, name)
    out = {}
    for key in ("estimate", "truth", "cov"):
        v = cols[key]
        if isinstance(v, str):  # an array
            d = layout.dim
            v = [f"{v}[..., {j}]" for j in range(d)] if key != "cov" else \
                [f"{v}[..., {i}, {j}]" for i in range(d) for j in range(d)]
        out[key] = list(v)
    return out


def _sort_key(v):
    return (0, v, "") if isinstance(v, (int, float, np.number, np.datetime64)) else (1, 0, str(v))


class _Scorer:
    """Per-filter sums: NEES per step and per run over dense codes given to ids as they are met."""

    def __init__(self, d, names):
        self.d = d
        self.names = names
        self.run_index, self.run_labels = {}, []
        self.step_index, self.step_labels = {}, []
        self.keys, self.rows = [], []
        self.step_sum, self.step_n = np.zeros(0), np.zeros(0, dtype=np.int64)
        self.run_sum, self.run_n = np.zeros(0), np.zeros(0, dtype=np.int64)
        self.skipped, self.first_skipped = 0, None

    @staticmethod
    def _codes(ids, index, labels, what, where):
        try:
            uniq, inv = np.unique(ids, return_inverse=True)
        except TypeError:
            msg = f"{where}: the {what} ids mix kinds (numbers and strings); expected one kind"
            raise ValueError(msg) from None
        codes = np.empty(len(uniq), dtype=np.int64)
        for j, v in enumerate(uniq):
            key = v.item() if isinstance(v, np.generic) and not isinstance(v, np.datetime64) else v
            c = index.get(key)
            if c is None:
                c = index[key] = len(labels)
                labels.append(key)
            codes[j] = c
        return codes[inv.reshape(-1)]

    def update(self, b, where):
        n = len(b.x)
        grows = b.start + (np.arange(n) if b.rows is None else b.rows)
        pad = np.isnan(b.x).all(axis=1) | np.isnan(b.t).all(axis=1) | np.isnan(b.P).all(axis=(1, 2))
        if pad.any():
            if self.first_skipped is None:
                i = int(np.flatnonzero(pad)[0])
                self.first_skipped = f"{where(grows[i])} (run {show_id(b.runs[i])}, step {show_id(b.steps[i])})"
            self.skipped += int(pad.sum())
            keep = ~pad
            b = b._replace(runs=b.runs[keep], steps=b.steps[keep], x=b.x[keep], t=b.t[keep], P=b.P[keep])
            grows = grows[keep]
            n = len(b.x)
            if n == 0:
                return

        def at(i):
            return f"{where(grows[i])} (run {show_id(b.runs[i])}, step {show_id(b.steps[i])})"

        P = b.P
        for label, arr in (("estimate", b.x), ("truth", b.t), ("cov", P.reshape(n, -1))):
            bad = ~np.isfinite(arr)
            if bad.any():
                i, j = (int(v[0]) for v in np.nonzero(bad))
                msg = (f"{at(i)}: {label} column {self.names[label][j]!r} is {arr[i, j]}; expected finite "
                       "values (a row whose whole estimate, truth or covariance is NaN counts as missing)")
                raise ValueError(msg)
        scale = np.sqrt(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        gap = np.abs(P - np.swapaxes(P, 1, 2)).max(axis=(1, 2))
        asym = gap > 1e-8 * np.maximum(scale.max(axis=1) ** 2, np.finfo(float).tiny)
        low = np.linalg.eigvalsh(P)[:, 0]
        bad = asym | ~(low > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            why = "is not symmetric" if asym[i] else f"is not positive definite (smallest eigenvalue {low[i]:.3g})"
            c = self.names["cov"]
            msg = f"{at(i)}: the covariance ({c[0]} .. {c[-1]}) {why}; expected a symmetric positive definite matrix"
            raise ValueError(msg)
        rc = self._codes(b.runs, self.run_index, self.run_labels, "run", where(grows[0]))
        sc = self._codes(b.steps, self.step_index, self.step_labels, "step", where(grows[0]))
        values = nees(b.t - b.x, P)
        R, T = len(self.run_labels), len(self.step_labels)
        self.run_sum = _grow(self.run_sum, R) + np.bincount(rc, weights=values, minlength=R)
        self.run_n = _grow(self.run_n, R) + np.bincount(rc, minlength=R)
        self.step_sum = _grow(self.step_sum, T) + np.bincount(sc, weights=values, minlength=T)
        self.step_n = _grow(self.step_n, T) + np.bincount(sc, minlength=T)
        self.keys.append((rc << 32) | sc)
        self.rows.append(np.asarray(grows, dtype=np.int64))

    def finish(self, path, where, alpha, name):
        """The report of this filter (see :func:`score_file`)."""
        label = "" if name is None else f" (filter {name})"
        if not self.keys:
            msg = f"{path}: no rows to score{label}; {self.skipped} rows are wholly NaN"
            raise ValueError(msg)
        keys, rows = np.concatenate(self.keys), np.concatenate(self.rows)
        self._check_once(keys, rows, where, label)
        R, T, d = len(self.run_labels), len(self.step_labels), self.d
        if R < 2:
            msg = f"{path}: found {R} run{label}; expected >= 2 runs for the chi-square bands"
            raise ValueError(msg)
        run_order = sorted(range(R), key=lambda i: _sort_key(self.run_labels[i]))
        step_order = sorted(range(T), key=lambda i: _sort_key(self.step_labels[i]))
        missing = {"count": int(R * T - len(keys)), "first": None}
        if missing["count"]:
            missing["first"] = self._first_missing(keys, run_order, step_order)
        n_k = self.step_n[step_order]
        anees = self.step_sum[step_order] / n_k
        ecd = 0.5 * anees - 0.5 * d
        lo_k, hi_k = _step_bands(n_k, d, alpha)
        banded = n_k >= 2
        inside = (anees >= lo_k) & (anees <= hi_k)
        n_nees = int(n_k.sum())  # >= 2: R >= 2 runs, each with a row
        mean_nees = float(self.step_sum.sum() / n_nees)
        mean_band = anees_bounds(n_nees, d, alpha=alpha)
        rep = {
            "runs": R,
            "steps": T,
            "dim": d,
            "anees": anees.tolist(),
            "ecd": ecd.tolist(),
            "bounds": {"anees": list(anees_bounds(R, d, alpha=alpha)), "ecd": list(ecd_bounds(R, d, alpha=alpha)),
                       "mean_anees": list(mean_band)},
            "mean_anees": float(anees.mean()),
            "mean_ecd": float(ecd.mean()),
            "mean_nees": mean_nees,
            "nees_count": n_nees,
            "inside_fraction": float(inside[banded].mean()) if banded.any() else math.nan,
            "verdict": verdict(mean_nees, mean_band),
            "nees_per_run": (self.run_sum[run_order] / self.run_n[run_order]).tolist(),
            "run_ids": [show_id(self.run_labels[i]) for i in run_order],
            "step_ids": [show_id(self.step_labels[i]) for i in step_order],
            "runs_per_step": n_k.tolist(),
            "missing_pairs": missing,
            "skipped_rows": {"count": self.skipped, "first": self.first_skipped},
            "alpha": alpha,
            "confidence": 1.0 - alpha,
        }
        if missing["count"]:
            rep["bounds_per_step"] = {"anees": [lo_k.tolist(), hi_k.tolist()]}
        return rep

    def _check_once(self, keys, rows, where, label):
        """Each (run, step) pair in one row; else a ValueError naming the row that repeats one first."""
        order = np.lexsort((rows, keys))
        ks = keys[order]
        again = np.flatnonzero(ks[1:] == ks[:-1]) + 1
        if len(again):
            pos = order[again]
            i = int(pos[np.argmin(rows[pos])])
            first = int(rows[keys == keys[i]].min())
            r, s = show_id(self.run_labels[keys[i] >> 32]), show_id(self.step_labels[keys[i] & 0xFFFFFFFF])
            msg = (f"{where(rows[i])} (run {r}, step {s}): the pair (run {r}, step {s}) appears again{label} "
                   f"(first at global row {first}); expected one row per run and step")
            raise ValueError(msg)

    def _first_missing(self, keys, run_order, step_order):
        """The first (run, step) pair without a row, in the order of the ids."""
        short = next(r for r in run_order if self.run_n[r] < len(self.step_labels))
        have = set((keys[(keys >> 32) == short] & 0xFFFFFFFF).tolist())
        k = next(s for s in step_order if s not in have)
        return {"run": show_id(self.run_labels[short]), "step": show_id(self.step_labels[k])}


def _step_bands(n_k, d, alpha):
    """Each step's ANEES band over the ``n_k`` runs it has (NaN below 2 runs): (lo, hi) arrays."""
    bands = {int(n): (anees_bounds(int(n), d, alpha=alpha) if n >= 2 else (math.nan, math.nan))
             for n in np.unique(n_k)}
    return np.array([bands[int(n)][0] for n in n_k]), np.array([bands[int(n)][1] for n in n_k])


def _grow(a, n):
    if len(a) >= n:
        return a
    out = np.zeros(n, dtype=a.dtype)
    out[:len(a)] = a
    return out


def filters_of(rep):
    """``[(name, per-filter report)]``; the name is None for a one-filter report."""
    if "filters" in rep:
        return list(rep["filters"].items())
    return [(None, rep)]


def format_score(rep, *, per_run=False, per_step=False):
    """Plain-text report: summary and verdict per filter first; per-step and per-run tables on request.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from tracking.score import format_score, score_file
    >>> path = os.path.join(tempfile.mkdtemp(), "est.npz")
    >>> x = np.zeros((3, 2, 1)); np.savez(path, x=x, t=x + 0.1, P=np.ones((3, 2, 1, 1)))
    >>> print(format_score(score_file(path, estimate="x", truth="t", cov="P")).splitlines()[-1])
    mean ANEES 0.010, mean ECD -0.495; 0% of steps inside the band; mean ANEES vs band of the mean: below (under-confident)
    """  # noqa: E501 - the doctest output line is the report as printed
    items = filters_of(rep)
    named = items[0][0] is not None
    first = items[0][1]
    names = ", ".join(str(n) for n, _ in items) if named else ""
    lines = [
        f"{rep['file']} ({rep['layout']}{'; filters ' + names if names else ''}): {first['runs']} runs x "
        f"{first['steps']} steps, state dimension {first['dim']}",
        *band_lines(first["bounds"], level=round(100 * first["confidence"]), d=first["dim"],
                    count=first["nees_count"]),
    ]
    if named:
        lines += ["", f"{'filter':<10}{'mean ANEES':>12}{'mean ECD':>11}{'steps in band':>15}"
                      "  mean ANEES vs band of the mean"]
    notes = []
    for name, f in items:
        lines += _summary(name, f)
        notes += _notes(name, f, first)
    if notes:
        lines += [""] + ["note: " + n for n in notes]
    lo, hi = first["bounds"]["anees"]
    for name, f in items if per_step else []:
        los, his = f.get("bounds_per_step", {}).get("anees", ([lo] * f["steps"], [hi] * f["steps"]))
        lines += _table("ANEES and ECD at each step", name, f"{'step':>10}{'runs':>7}{'ANEES':>10}{'ECD':>10}  band",
                        [f"{s!s:>10}{n:>7}{num(a, 10)}{num(e, 10)}  {_against(a, bl, bh)}" for s, n, a, e, bl, bh
                         in zip(f["step_ids"], f["runs_per_step"], f["anees"], f["ecd"], los, his)])
    for name, f in items if per_run else []:
        lines += _table("mean NEES of each run", name, f"{'run':>10}{'mean NEES':>11}",
                        [f"{r!s:>10}{num(v, 11)}" for r, v in zip(f["run_ids"], f["nees_per_run"])])
    return "\n".join(lines)


def _summary(name, f):
    """One filter's summary: its own paragraph (one filter) or its row of the filters' table."""
    frac = f["inside_fraction"]
    nan_frac = frac is None or (isinstance(frac, float) and math.isnan(frac))
    if name is None:
        inside = "no step has 2 runs for a band" if nan_frac else f"{100 * frac:.0f}% of steps inside the band"
        return ["", f"mean ANEES {num(f['mean_anees'], 0)}, mean ECD {num(f['mean_ecd'], 0)}; {inside}; "
                    f"mean ANEES vs band of the mean: {f['verdict']}"]
    frac_s = f"{'n/a':>15}" if nan_frac else f"{100 * frac:>14.0f}%"
    return [f"{name!s:<10}{num(f['mean_anees'], 12)}{num(f['mean_ecd'], 11)}{frac_s}  {f['verdict']}"]


def _notes(name, f, first):
    """What the reader should know about one filter's figures: other sizes, missing pairs, skipped rows."""
    notes = []
    if (f["runs"], f["steps"], f["nees_count"]) != (first["runs"], first["steps"], first["nees_count"]):
        b = f["bounds"]["mean_anees"]
        notes.append(f"{f['runs']} runs x {f['steps']} steps, {f['nees_count']} run-steps: band of the "
                     f"mean [{b[0]:.3f}, {b[1]:.3f}]")
    m, s = f["missing_pairs"], f["skipped_rows"]
    if m["count"]:
        notes += [f"{m['count']} (run, step) pairs have no row (first: run {m['first']['run']}, step "
                  f"{m['first']['step']}); each step is scored over the runs it has, with its own band",
                  f"the verdict judges the mean NEES of the {f['nees_count']} run-steps scored, "
                  f"{num(f['mean_nees'], 0)} (the mean ANEES weighs each step alike)"]
    if s["count"]:
        notes.append(f"{s['count']} rows skipped as missing (whole estimate, truth or covariance NaN); "
                     f"first: {s['first']}")
    return [("" if name is None else f"{name}: ") + n for n in notes]


def _against(a, lo, hi):
    return "inside" if lo <= a <= hi else ("above" if a > hi else ("below" if a < lo else "n/a"))


def _table(title, name, header, rows):
    return ["", f"{title}{'' if name is None else ' (' + str(name) + ')'}:", header, *rows]


def plot_score(rep, path=None, *, ax=None):
    """ANEES per step with its band and an ECD scale, and the mean NEES of each run.

    Returns the figure; with ``path`` it is also written (atomically, format
    from the extension). The legends sit outside the axes, above them.
    """
    from matplotlib.figure import Figure

    items = filters_of(rep)
    first = items[0][1]
    d = first["dim"]
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    ax, ax_runs = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 2]})
    band_panel(ax, first["bounds"]["anees"], round(100 * first["confidence"]), d)
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown"]
    numeric = all(isinstance(s, (int, float)) for s in first["step_ids"])
    for i, (name, f) in enumerate(items):
        xs = f["step_ids"] if numeric else np.arange(len(f["step_ids"]))
        c = colors[i % len(colors)]
        ax.plot(xs, series(f["anees"]), color=c, lw=1.4, label="ANEES" if name is None else str(name))
        runs_x = f["run_ids"] if all(isinstance(r, (int, float)) for r in f["run_ids"]) else np.arange(f["runs"])
        ax_runs.plot(runs_x, series(f["nees_per_run"]), "o", ms=3, color=c,
                     label=None if name is None else str(name))
    ax.set_xlabel("step" if numeric else "step (in order)")
    ax.set_ylabel(f"ANEES (consistent: {d})")
    ecd_scale(ax, d)
    legend_above(ax)
    fig.suptitle(f"{os.path.basename(rep['file'])}: {first['runs']} runs x {first['steps']} steps", fontsize=10)
    ax_runs.axhline(d, color="0.5", lw=0.8, ls=":")
    ax_runs.set_xlabel("run")
    ax_runs.set_ylabel("mean NEES of the run")
    if len(items) > 1:
        legend_above(ax_runs)
    if path is not None:
        write_figure(fig, path, check_plot_path(path))
    return fig

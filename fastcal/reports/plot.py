"""Reliability diagram with a per-bin ECD panel, and the paper's Figure 2.

matplotlib is imported only when a function here is called (extra ``plot``:
``pip install fastcal[plot]``). Figures are built on the object-oriented API
with the Agg canvas, never through pyplot's global state, so nothing opens a
window and nothing leaks between calls. PNG files are written atomically
(temporary file in the same directory, then renamed).
"""

import os
import textwrap
from typing import NamedTuple

import numpy as np

from fastcal._atomic import write_atomically
from fastcal.reports.smooth import SmoothGrid

OVER_COLOUR = "#c0392b"   # ECD > 0: over-confident, flagged by the per-bin test
UNDER_COLOUR = "#2471a3"  # ECD < 0: under-confident, flagged
OVER_PALE = "#f2c4bf"     # the same directions, not flagged (|z| below the test's threshold)
UNDER_PALE = "#bcd5ea"


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "plotting needs matplotlib: pip install 'fastcal[plot]'"
        raise ImportError(msg) from exc
    return Figure, FigureCanvasAgg


def save_atomic(fig, path, *, dpi=None):
    """Save a figure to ``path`` through a temporary file and a rename.

    The format follows the file's suffix (PNG when there is none). A failed
    save leaves no file behind and an existing file untouched.
    """
    suffix = os.path.splitext(os.fspath(path))[1].lower().lstrip(".") or "png"
    return write_atomically(path, lambda fh: fig.savefig(fh, format=suffix, dpi=dpi))


def wilson_interval(k, n, level=0.95):
    """Wilson score interval for a proportion k / n (arrays); NaN where n == 0."""
    from scipy.special import ndtri

    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = float(ndtri(0.5 + level / 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = (k + z * z / 2.0) / (n + z * z)
        half = z / (n + z * z) * np.sqrt(k * (n - k) / n + z * z / 4.0)
    lo = np.where(n > 0, centre - half, np.nan)
    hi = np.where(n > 0, centre + half, np.nan)
    return lo, hi


def reliability_diagram(report, path=None, *, ax=None, title=None, figsize=(6.4, 8.0), dpi=100,
                        level=0.95):
    """Reliability diagram, bin counts and per-bin ECD of a calibration report.

    Three panels sharing the probability axis:

    1. fraction of positives (or accuracy, following ``report.observed``)
       against the mean predicted probability of each non-empty bin, with
       Wilson ``level`` intervals and the diagonal of perfect calibration;
       for K classes, accuracy against confidence (the mean top-label
       probability of the bin);
    2. the number of samples per bin as a histogram (one bar per bin, empty
       bins have height 0);
    3. the mean ECD per bin (eq. 15) as bars, red when over-confident
       (ECD > 0), blue when under-confident, strong where the per-bin test
       (:meth:`~fastcal.CalibrationReport.bin_test`, alpha = 0.05) flags the
       bin and pale where it does not, each labelled with the bin's z-score
       sum T_i / sqrt(sum Var_i) (labels that would overlap a more extreme
       one are left out: the table has every z); the title gives the net z
       and ``report.overall_verdict`` (the net ECD test and the per-bin
       test). A bin whose ECD is infinite (a prediction of exactly 0 or 1
       that was wrong) is drawn hatched, beyond the tallest finite bar, and
       labelled "inf". A legend under the panel says what the colours and
       the hatching mean.

    Parameters
    ----------
    report : CalibrationReport
    path : str or path-like, optional
        Where to write the image (format from the suffix, PNG by default),
        atomically. Without a path nothing is written.
    ax : matplotlib Axes, optional
        Draw the reliability panel alone (1. above, with its intervals) into these
        axes of your own figure, such as one panel of a grid comparing models
        (``figsize`` and ``dpi`` then unused; ``path`` saves the axes' figure).
    title : str, optional
        Figure title (default: n and ECE).
    figsize : (float, float), default (6.4, 8.0)
        Inches; the PNG is figsize * dpi pixels.
    dpi : int, default 100
    level : float, default 0.95
        Level of the per-bin Wilson intervals.

    Returns
    -------
    matplotlib.figure.Figure
        Axes labels are "reliability", "counts" and "ecd" (with ``ax``: the axes'
        figure, ``ax`` labelled "reliability").

    Raises
    ------
    ValueError
        If the report has no samples, or ``ax`` is not a matplotlib Axes.

    Notes
    -----
    Points below the diagonal are over-confident bins for p > 0.5 and
    under-confident ones for p < 0.5 (frac_pos - conf is ESCE's sign, eq. 6);
    the ECD panel gives the confidence direction directly.

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(10_000, sigma=0.5, seed=0)
    >>> fig = fastcal.calibration_report(y, p).plot()
    >>> [ax.get_label() for ax in fig.axes]
    ['reliability', 'counts', 'ecd']

    Two models side by side, each report drawn into its own axes:

    >>> from matplotlib.figure import Figure
    >>> y2, p2 = fastcal.simulate(10_000, sigma=2.0, seed=0)
    >>> grid = Figure(figsize=(10, 4)).subplots(1, 2)
    >>> for ax, (yy, pp) in zip(grid, [(y, p), (y2, p2)]):
    ...     _ = fastcal.calibration_report(yy, pp).plot(ax=ax)
    >>> [ax.get_label() for ax in grid]
    ['reliability', 'reliability']
    """
    if report.n == 0:
        msg = "report has no samples (n = 0); nothing to plot"
        raise ValueError(msg)
    Figure, FigureCanvasAgg = _matplotlib()
    if ax is not None:
        return _reliability_into(report, ax, path, title, dpi, level)
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    ax_rel, ax_cnt, ax_ecd = _panels(fig)
    multiclass = bool(getattr(report, "n_classes", 0))
    bins = _bin_shapes(report)
    _draw_reliability(ax_rel, report, bins, level, title)
    ax_cnt.bar(bins.centre, bins.counts, width=bins.width, color="0.6", edgecolor="0.3", lw=0.5)
    ax_cnt.set_ylabel("count")
    ax_cnt.tick_params(labelbottom=False)
    test = report.bin_test()
    finite, labels = _draw_ecd(ax_ecd, report, bins, test)
    ax_ecd.set_xlabel("confidence (mean top-label probability)" if multiclass
                      else "mean predicted probability")
    if multiclass:
        ax_rel.set_ylabel("accuracy")
    t = report.ecd_test()
    head = f"ECD per bin, z on the bars; net z = {t.z:+.2f}; {report.overall_verdict}"
    _legend(fig, test, finite.all())
    _fit(fig, ax_cnt, ax_ecd, head, labels)
    if path is not None:
        save_atomic(fig, path, dpi=dpi)
    return fig


def _reliability_into(report, ax, path, title, dpi, level):
    """The reliability panel alone, in axes of the caller's figure."""
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        msg = f"ax must be a matplotlib Axes; got {type(ax).__name__}"
        raise ValueError(msg)
    ax.set_label("reliability")
    _draw_reliability(ax, report, _bin_shapes(report), level, title)
    ax.tick_params(labelbottom=True)
    ax.set_xlabel("confidence (mean top-label probability)" if getattr(report, "n_classes", 0)
                  else "mean predicted probability")
    if path is not None:
        save_atomic(ax.figure, path, dpi=dpi)
    return ax.figure


def _panels(fig):
    """The three panels (reliability, counts, ECD) sharing the probability axis."""
    grid = fig.add_gridspec(3, 1, height_ratios=(3.0, 1.0, 1.6), hspace=0.28, left=0.14,
                            right=0.96, top=0.94, bottom=0.13)
    ax_rel = fig.add_subplot(grid[0])
    ax_cnt = fig.add_subplot(grid[1], sharex=ax_rel)
    ax_ecd = fig.add_subplot(grid[2], sharex=ax_rel)
    ax_rel.set_label("reliability")
    ax_cnt.set_label("counts")
    ax_ecd.set_label("ecd")
    return ax_rel, ax_cnt, ax_ecd


class _Bins(NamedTuple):
    table: dict        # the report's per-bin table
    counts: np.ndarray  # int64 per bin
    full: np.ndarray   # count > 0
    centre: np.ndarray
    width: np.ndarray  # of the bars: 90% of the bin, at least 0.9e-3
    target: np.ndarray  # frac_pos or accuracy, as report.observed says


def _bin_shapes(report):
    """Where each bin's bars stand, and what the reliability panel compares."""
    b = report.bins
    count = np.asarray(b["count"], dtype=np.int64)
    lower = np.asarray(b["lower"], dtype=np.float64)
    upper = np.asarray(b["upper"], dtype=np.float64)
    if report.strategy == "quantile":
        # data ranges of equal-mass groups: may be NaN (empty) or zero-width
        lower = np.where(np.isnan(lower), 0.0, lower)
        upper = np.where(np.isnan(upper), lower, upper)
    return _Bins(b, count, count > 0, (lower + upper) / 2.0,
                 np.maximum(upper - lower, 1e-3) * 0.9,
                 np.asarray(b[report.observed], dtype=np.float64))


def _draw_reliability(ax_rel, report, bins, level, title):
    """Panel 1: observed against confidence per non-empty bin, Wilson intervals."""
    full, count, target = bins.full, bins.counts, bins.target
    ax_rel.plot([0, 1], [0, 1], color="0.5", lw=1, ls="--", label="perfect calibration")
    k = np.rint(target[full] * count[full])
    lo, hi = wilson_interval(k, count[full], level)
    conf = np.asarray(bins.table["conf"], dtype=np.float64)[full]
    # Wilson bounds are 0 or 1 exactly at k = 0 or k = n; rounding can put them
    # a hair past the point, which matplotlib rejects as a negative error
    yerr = np.maximum(np.vstack([target[full] - lo, hi - target[full]]), 0.0)
    ax_rel.errorbar(conf, target[full], yerr=yerr, fmt="o-", color="black", ms=4, lw=1,
                    capsize=2, label=f"bins ({100 * level:g}% Wilson)")
    ax_rel.set_xlim(0, 1)
    ax_rel.set_ylim(0, 1)
    ax_rel.set_ylabel("fraction of positives" if report.observed == "frac_pos" else "accuracy")
    ax_rel.legend(loc="upper left", fontsize=8)
    ax_rel.set_title(title or f"n = {report.n:,}, ECE = {report.ece:.4f}, ECD = {report.ecd:.4f}",
                     fontsize=10)
    ax_rel.tick_params(labelbottom=False)


def _draw_ecd(ax_ecd, report, bins, test):
    """Panel 3: the ECD bars, coloured by direction and by the per-bin ``test``, each
    labelled with its z; returns (which bars are finite, (|z|, label) pairs)."""
    full, centre = bins.full, bins.centre
    ecd = np.asarray(bins.table["ecd"], dtype=np.float64)
    bin_z = np.asarray(bins.table["ecd_z"], dtype=np.float64)
    height = np.where(full, ecd, 0.0)
    finite = np.isfinite(height)
    top = max(float(np.max(np.abs(height[finite]))) if finite.any() else 0.0, 1e-6)
    # an infinite bin (a certain prediction that was wrong) is not a number to draw:
    # it gets a hatched bar beyond every finite one, marked "inf"
    shown = np.where(finite, height, np.copysign(1.3 * top, height))
    flagged = np.zeros(bins.counts.shape[0], bool)
    flagged[np.asarray(test.over_bins + test.under_bins, dtype=np.int64) - 1] = True
    colours = [(OVER_COLOUR if f else OVER_PALE) if h > 0 else (UNDER_COLOUR if f else UNDER_PALE)
               for h, f in zip(shown, flagged)]
    bars = ax_ecd.bar(centre, shown, width=bins.width, color=colours, edgecolor="0.3", lw=0.5)
    for bar, ok in zip(bars, finite):
        if not ok:
            bar.set_hatch("///")
            bar.set_label("infinite ECD")
    ax_ecd.axhline(0.0, color="black", lw=0.8)
    labels = []
    for x, h, z, ok in zip(centre[full], shown[full], bin_z[full], finite[full]):
        text = f"{z:+.1f}" if ok else "inf"
        labels.append((abs(z) if ok else np.inf, ax_ecd.annotate(
            text, (x, h), xytext=(0, 2 if h >= 0 else -2), textcoords="offset points",
            ha="center", va="bottom" if h >= 0 else "top", fontsize=7,
            # readable where a neighbouring (wider) bar is taller
            bbox=dict(boxstyle="square,pad=0.05", fc="white", ec="none", alpha=0.8))))
    ax_ecd.set_ylim(-1.45 * top, 1.45 * top)
    ax_ecd.set_ylabel("ECD per bin")
    return finite, labels


def _legend(fig, test, all_finite):
    """The legend under the ECD panel: what the colours and the hatching mean."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=OVER_COLOUR, edgecolor="0.3", label="over-confident, flagged"),
               Patch(facecolor=UNDER_COLOUR, edgecolor="0.3", label="under-confident, flagged"),
               Patch(facecolor=OVER_PALE, edgecolor="0.3", label="over-confident, not flagged"),
               Patch(facecolor=UNDER_PALE, edgecolor="0.3", label="under-confident, not flagged")]
    if not all_finite:
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///",
                             label="infinite ECD (p = 0 or 1, wrong)"))
    fig.legend(handles=handles, loc="lower center", ncol=3 if len(handles) > 4 else 2,
               fontsize=7, frameon=False, bbox_to_anchor=(0.55, 0.0),
               title=f"bins flagged by the per-bin test (alpha = {test.alpha:g})",
               title_fontsize=7)


def _fit(fig, ax_cnt, ax_ecd, head, labels):
    """Lay out the ECD panel at the figure's size: its title wrapped to fit the figure's
    width and kept below the counts panel, every z label inside the panel, and labels
    that would share a column with a more extreme one removed."""
    renderer = fig.canvas.get_renderer()
    fig_w = fig.bbox.width
    for chars in range(130, 20, -4):  # the widest wrapping whose every line fits
        ax_ecd.set_title("\n".join(textwrap.wrap(head, chars, break_on_hyphens=False)),
                         fontsize=8)
        fig.draw_without_rendering()  # places the title
        box = ax_ecd.title.get_window_extent(renderer)
        if box.x0 >= 2 and box.x1 <= fig_w - 2:
            break
    for _ in range(3):  # lower the panel's top until its title clears the counts panel
        gap = ax_cnt.get_tightbbox(renderer).y0 - ax_ecd.title.get_window_extent(renderer).y1
        if gap >= 6:
            break
        pos = ax_ecd.get_position()
        cut = (6 - gap) / fig.bbox.height
        ax_ecd.set_position([pos.x0, pos.y0, pos.width, pos.height - cut])
        fig.draw_without_rendering()
    for _ in range(6):  # widen the y range until every label lies inside the panel
        inside = ax_ecd.get_window_extent(renderer)
        out = [a for _, a in labels if a.get_window_extent(renderer).y1 > inside.y1 - 1
               or a.get_window_extent(renderer).y0 < inside.y0 + 1]
        if not out:
            break
        lo, hi = ax_ecd.get_ylim()
        ax_ecd.set_ylim(1.2 * lo, 1.2 * hi)
    inside = ax_ecd.get_window_extent(renderer)
    points = 72.0 / fig.dpi
    for _, a in labels:  # a label wider than an edge bin moves inward, not off the panel
        box = a.get_window_extent(renderer)
        shift = max(inside.x0 + 1 - box.x0, 0.0) - max(box.x1 - (inside.x1 - 1), 0.0)
        if shift:
            dx, dy = a.xyann
            a.xyann = (dx + shift * points, dy)
    # labels side by side in x would stack over narrow bars and read as one another's:
    # keep the most extreme of any whose columns overlap
    kept = []
    for _, a in sorted(labels, key=lambda x: -x[0]):
        box = a.get_window_extent(renderer)
        if any(box.x0 < x1 and x0 < box.x1 for x0, x1 in kept):
            a.remove()
        else:
            kept.append((box.x0, box.x1))


def ecd_single_datum(path=None, *, p_min=1e-4, p_max=1 - 1e-4, n_points=2001, figsize=(6.4, 4.0),
                     dpi=100):
    """The paper's Figure 2: the ECD of a single datum against p, for y = 1 and y = 0.

    ECD(p, y) = (p - y) log(p / (1 - p)) (eq. 15 with n = 1). For y = 1 it is
    negative (under-confident) for 0.5 < p < 1 with its minimum about
    -0.2785 near p = 0.782 (section IV-D), 0 at p = 0.5 and p -> 1, and grows
    without bound as p -> 0 (confidently wrong). y = 0 is its mirror image.

    Parameters
    ----------
    path : str or path-like, optional
        Where to write the image, atomically.
    p_min, p_max : float
        Range of p (the paper uses 0.0001 to 0.9999).
    n_points : int, default 2001
    figsize : (float, float), default (6.4, 4.0)
    dpi : int, default 100

    Returns
    -------
    matplotlib.figure.Figure
        One Axes labelled "ecd_single_datum" with the lines y = 1 and y = 0
        (and the zero line).

    Raises
    ------
    ValueError
        If not 0 < p_min < p_max < 1.

    Examples
    --------
    >>> fig = ecd_single_datum()
    >>> [line.get_label() for line in fig.axes[0].get_lines()][:2]
    ['y = 1', 'y = 0']
    """
    if not 0.0 < p_min < p_max < 1.0:
        msg = f"need 0 < p_min < p_max < 1; got p_min={p_min!r}, p_max={p_max!r}"
        raise ValueError(msg)
    Figure, FigureCanvasAgg = _matplotlib()
    p = np.linspace(p_min, p_max, n_points)
    logit = np.log(p) - np.log1p(-p)
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_label("ecd_single_datum")
    ax.plot(p, (p - 1.0) * logit, color=UNDER_COLOUR, label="y = 1")
    ax.plot(p, p * logit, color=OVER_COLOUR, ls="--", label="y = 0")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("predicted probability p of class 1")
    ax.set_ylabel("ECD of one datum")
    ax.set_title("ECD of a single datum (paper, Figure 2)", fontsize=10)
    ax.legend()
    if path is not None:
        save_atomic(fig, path, dpi=dpi)
    return fig


def smooth_diagram(report, path=None, *, ax=None, title=None, figsize=(6.4, 6.4), dpi=100):
    """Smooth reliability diagram: the kernel-smoothed curve and the density of
    the predictions, from the smooth ECE grid of the report (as relplot's
    ``rel_diagram`` draws it, at the bandwidth ``report.smece_sigma``).

    The curve is mu(t) = sum_i y_i K(t, p_i) / D(t) (``fastcal.reports.smooth``):
    the smoothed mean label (top-label: accuracy) at prediction (confidence) t,
    drawn thicker where the density D(t) / n is higher; the density itself
    is the shaded area along the bottom (scaled to a fifth of the height).

    Parameters
    ----------
    report : CalibrationReport
        Filled with the smooth ECE grid (``smooth=True``).
    path : str or path-like, optional
        Where to write the image (format from the suffix), atomically.
    ax : matplotlib Axes, optional
        Draw into these axes (``path``, ``figsize`` and ``dpi`` then unused
        for a new figure; ``path`` still saves the axes' figure).
    title : str, optional
        Default: n, smooth ECE and its bandwidth.
    figsize, dpi
        Of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        Its smooth axes are labelled "smooth".

    Raises
    ------
    ValueError
        The report has no smooth ECE grid.

    Examples
    --------
    >>> import fastcal
    >>> y, p = fastcal.simulate(10_000, sigma=0.5, seed=0)
    >>> fig = fastcal.calibration_report(y, p, smooth=True).plot(smooth=True)
    >>> [ax.get_label() for ax in fig.axes]
    ['smooth']
    """
    if getattr(report, "smooth_grid", None) is None:
        msg = ("report has no smooth ECE grid; score with smooth=True (CLI: --smece) to draw "
               "the smooth reliability diagram")
        raise ValueError(msg)
    Figure, FigureCanvasAgg = _matplotlib()
    from matplotlib.collections import LineCollection

    if ax is None:
        fig = Figure(figsize=figsize, dpi=dpi)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    ax.set_label("smooth")
    t, mu, density = SmoothGrid(*report.smooth_grid).curve(report.smece_sigma)
    top = float(np.nanmax(density)) or 1.0
    ax.fill_between(t, 0.0, 0.2 * density / top, color="0.8", lw=0, label="density of predictions")
    ax.plot([0, 1], [0, 1], ls="--", color="0.5", lw=0.8)
    points = np.column_stack([t, mu]).reshape(-1, 1, 2)
    segments = np.concatenate([points[:-1], points[1:]], axis=1)
    widths = 0.5 + 3.5 * density[:-1] / top
    ax.add_collection(LineCollection(segments, linewidths=widths, colors=OVER_COLOUR,
                                     label="smoothed reliability"))
    multiclass = bool(getattr(report, "n_classes", 0))
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("confidence (max probability)" if multiclass else "predicted probability")
    ax.set_ylabel("accuracy (smoothed)" if multiclass else "fraction of positives (smoothed)")
    ax.set_title(title or (f"n = {report.n:,}, smooth ECE = {report.smece:.4f} "
                           f"(sigma = {report.smece_sigma:.4f})"), fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    if path is not None:
        save_atomic(fig, path, dpi=dpi)
    return fig

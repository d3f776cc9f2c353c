"""What the two consistency reports share: the verdict, the band lines of their tables, number
formatting and the pieces of their plots (:func:`tracking.compare.compare` and
:func:`tracking.score.score_file` report the same measures, from filter runs and from files)."""

import math
import os

import numpy as np

from fastcal.io import write_atomically

__all__ = ["verdict", "band_lines", "num", "check_plot_path", "band_panel", "ecd_scale", "legend_above",
           "series", "write_figure"]


def verdict(mean_nees, bounds):
    """Where the mean of all NEES values scored lies against its own band, the band of the
    mean (``anees_bounds(N, d)`` for N values), not one step's band.

    Examples
    --------
    >>> from tracking.compare import verdict
    >>> verdict(4.4, (3.9, 4.1)), verdict(4.0, (3.9, 4.1)), verdict(None, (3.9, 4.1))
    ('above (over-confident)', 'inside', 'undefined')
    """
    lo, hi = bounds
    if mean_nees is None or not math.isfinite(mean_nees) or not (math.isfinite(lo) and math.isfinite(hi)):
        return "undefined"
    if mean_nees > hi:
        return "above (over-confident)"
    if mean_nees < lo:
        return "below (under-confident)"
    return "inside"


def band_lines(bounds, *, level, d, count, show_d=False):
    """The two lines under a report's title: one step's ANEES and ECD bands, and the band of the mean."""
    lo, hi = bounds["anees"]
    elo, ehi = bounds["ecd"]
    mlo, mhi = bounds["mean_anees"]
    return [
        f"{level}% bands per step{f' (d={d})' if show_d else ''}: ANEES [{lo:.3f}, {hi:.3f}]   "
        f"ECD [{elo:.3f}, {ehi:.3f}]   (consistent: ANEES {d}, ECD 0)",
        f"{level}% band of the mean ANEES over all {count} run-steps: [{mlo:.3f}, {mhi:.3f}]",
    ]


def num(v, w, p=3):
    """``v`` right-aligned in ``w`` characters with ``p`` decimals; ``nan`` for None or NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return f"{'nan':>{w}}"
    return f"{v:>{w}.{p}f}"


def check_plot_path(path):
    """Before computing: matplotlib importable and ``path``'s extension a format it writes.

    Returns the format name; raises ValueError with one line otherwise.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        msg = "--plot needs matplotlib, which is not installed (pip install 'fastcal[plot]')"
        raise ValueError(msg) from None
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    supported = Figure().canvas.get_supported_filetypes()
    if ext not in supported:
        msg = (
            f"--plot {os.fspath(path)!r}: cannot tell the image format from the extension "
            f"{('.' + ext) if ext else '(none)'}; expected one of {', '.join('.' + e for e in sorted(supported))}"
        )
        raise ValueError(msg)
    return ext


def band_panel(ax, band, level, centre):
    """The ``level``% ``band`` shaded on ``ax`` and the consistent value ``centre`` dotted."""
    ax.axhspan(band[0], band[1], color="0.85", label=f"{level}% band")
    ax.axhline(centre, color="0.5", lw=0.8, ls=":")


def ecd_scale(ax, d):
    """A second y axis on the right of an ANEES axis: the Gaussian ECD, ``ANEES/2 - d/2``."""
    sec = ax.secondary_yaxis("right", functions=(lambda a: 0.5 * a - 0.5 * d, lambda e: 2.0 * e + d))
    sec.set_ylabel("Gaussian ECD = ANEES/2 - d/2")


def legend_above(ax):
    """The legend in one row above the axes (outside them), so it never hides a curve."""
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01, 1.0, 0.1), ncol=max(1, len(handles)),
              fontsize=8, frameon=False, borderaxespad=0.0)


def series(values):
    """A report's list (None for NaN) as a float array for plotting."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def write_figure(fig, path, fmt):
    """Write ``fig`` to ``path`` atomically in the image format ``fmt`` (from :func:`check_plot_path`)."""
    write_atomically(path, lambda fh: fig.savefig(fh, format=fmt, dpi=110))

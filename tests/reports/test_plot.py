"""Reliability diagram and Figure 2: inspect the Axes and the PNG header, not pixels."""

import math
import os
import struct

import numpy as np
import pytest

import fastcal
from fastcal.reports.plot import OVER_COLOUR, OVER_PALE, UNDER_COLOUR, UNDER_PALE, ecd_single_datum, reliability_diagram

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.colors import to_hex  # noqa: E402


def png_size(path):
    """(width, height) from the PNG IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def axes_by_label(fig):
    return {ax.get_label(): ax for ax in fig.axes}


@pytest.mark.parametrize("n_bins", [10, 15])
def test_reliability_diagram_png_and_axes(tmp_path, n_bins):
    y, p = fastcal.simulate(20_000, sigma=0.5, seed=1)
    rep = fastcal.calibration_report(y, p, n_bins=n_bins, ace=False)
    out = tmp_path / "rel.png"
    fig = reliability_diagram(rep, out, figsize=(5.0, 7.0), dpi=80)
    assert png_size(out) == (400, 560)
    mask = os.umask(0o022)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask
    ax = axes_by_label(fig)
    assert set(ax) == {"reliability", "counts", "ecd"}
    # one bar per bin, heights = counts and mean ECD
    bars = ax["counts"].patches
    assert len(bars) == n_bins
    np.testing.assert_array_equal([b.get_height() for b in bars], rep.bins["count"])
    ecd_bars = ax["ecd"].patches
    assert len(ecd_bars) == n_bins
    np.testing.assert_allclose([b.get_height() for b in ecd_bars], rep.bins["ecd"], rtol=1e-12)
    # strong colours for the bins the per-bin test flags, pale ones for the rest
    # (issue 23, item 18: red and blue alone made insignificant bins look flagged)
    test = rep.bin_test()
    flagged = set(test.over_bins + test.under_bins)
    assert flagged and len(flagged) < n_bins
    for i, (b, e) in enumerate(zip(ecd_bars, rep.bins["ecd"])):
        strong = (OVER_COLOUR if e > 0 else UNDER_COLOUR)
        pale = (OVER_PALE if e > 0 else UNDER_PALE)
        assert to_hex(b.get_facecolor()) == (strong if i + 1 in flagged else pale)
    # bar centres are the bin centres
    centres = [b.get_x() + b.get_width() / 2 for b in bars]
    np.testing.assert_allclose(centres, (rep.bins["lower"] + rep.bins["upper"]) / 2, atol=1e-12)
    # per-bin z written on the ECD bars
    texts = [t.get_text() for t in ax["ecd"].texts]
    assert texts == [f"{z:+.1f}" for z in rep.bins["ecd_z"]]
    assert rep.overall_verdict in ax["ecd"].get_title().replace("\n", " ")
    # reliability: the diagonal and one point per bin at (conf, frac_pos)
    lines = ax["reliability"].get_lines()
    diag = [ln for ln in lines if ln.get_label() == "perfect calibration"][0]
    np.testing.assert_array_equal(diag.get_xydata(), [[0, 0], [1, 1]])
    pts = [ln for ln in lines if len(ln.get_xdata()) == n_bins][0]
    np.testing.assert_allclose(pts.get_xdata(), rep.bins["conf"], rtol=1e-12)
    np.testing.assert_allclose(pts.get_ydata(), rep.bins["frac_pos"], rtol=1e-12)


def test_empty_bins_keep_their_bars_and_get_no_point(tmp_path):
    y = np.array([0, 1, 1, 0, 1])
    p = np.array([0.05, 0.95, 0.9, 0.15, 0.55])
    rep = fastcal.calibration_report(y, p, n_bins=20, ace=False)
    fig = rep.plot(tmp_path / "sparse.png")
    ax = axes_by_label(fig)
    assert len(ax["counts"].patches) == 20 and len(ax["ecd"].patches) == 20
    full = rep.bins["count"] > 0
    assert len(ax["ecd"].texts) == int(full.sum())
    pts = [ln for ln in ax["reliability"].get_lines() if len(ln.get_xdata()) == full.sum()]
    assert pts and os.path.exists(tmp_path / "sparse.png")


def test_quantile_and_accuracy_reports_plot(tmp_path):
    y, p = fastcal.simulate(5_000, sigma=2.0, seed=3)
    rep = fastcal.calibration_report(y, p, strategy="quantile", observed="accuracy", n_bins=8)
    fig = rep.plot(tmp_path / "q.png", dpi=50)
    ax = axes_by_label(fig)
    assert len(ax["counts"].patches) == 8
    assert ax["reliability"].get_ylabel() == "accuracy"
    assert png_size(tmp_path / "q.png") == (320, 400)


def test_infinite_bin_is_drawn_at_the_edge():
    rep = fastcal.calibration_report([0, 1, 1], [1.0, 0.7, 0.2], n_bins=5, ace=False)
    ax = axes_by_label(rep.plot())
    heights = [b.get_height() for b in ax["ecd"].patches]
    assert all(math.isfinite(h) for h in heights)
    # not drawn as the tallest finite bar: beyond it, hatched, labelled inf
    finite = [h for h, e in zip(heights, rep.bins["ecd"]) if math.isfinite(e)]
    assert heights[4] > 1.2 * max(abs(h) for h in finite) > 0
    assert ax["ecd"].patches[4].get_hatch() == "///"
    assert [b.get_hatch() for b in ax["ecd"].patches[:4]] == [None] * 4
    assert "inf" in [t.get_text() for t in ax["ecd"].texts]
    assert ax["ecd"].get_ylim()[1] > heights[4]


def test_failed_save_leaves_nothing_and_keeps_the_old_file(tmp_path):
    y, p = fastcal.simulate(1_000, seed=1)
    rep = fastcal.calibration_report(y, p, ace=False)
    target = tmp_path / "out.notaformat"
    with pytest.raises(ValueError):
        rep.plot(target)
    assert list(tmp_path.iterdir()) == []
    good = tmp_path / "keep.png"
    good.write_bytes(b"old")
    with pytest.raises(ValueError):
        reliability_diagram(rep, good, dpi=-5)
    assert good.read_bytes() == b"old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["keep.png"]


def test_empty_report_raises():
    rep = fastcal.CalibrationAccumulator().report()
    with pytest.raises(ValueError, match="no samples"):
        rep.plot()


def test_figure_2_single_datum(tmp_path):
    out = tmp_path / "fig2.png"
    fig = ecd_single_datum(out, dpi=50)
    assert png_size(out) == (320, 200)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("y = 1", "y = 0")]
    assert [ln.get_label() for ln in lines] == ["y = 1", "y = 0"]
    x1, v1 = lines[0].get_xdata(), lines[0].get_ydata()
    assert x1[0] == pytest.approx(1e-4) and x1[-1] == pytest.approx(1 - 1e-4)
    # section IV-D: the lower bound of a single datum's ECD is about -0.2785
    assert v1.min() == pytest.approx(-0.2785, abs=5e-5)
    assert x1[np.argmin(v1)] == pytest.approx(0.782, abs=1e-3)
    # each curve is the library's ECD of one datum
    for line, label in zip(lines, (1, 0)):
        for i in (0, 400, 1000, 1700, 2000):
            x = float(line.get_xdata()[i])
            assert line.get_ydata()[i] == pytest.approx(fastcal.ecd([label], [x]), rel=1e-12)
    # the y = 0 curve mirrors y = 1
    np.testing.assert_allclose(lines[1].get_ydata(), v1[::-1], rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="0 < p_min < p_max < 1"):
        ecd_single_datum(p_min=0.0)


def test_bins_with_all_or_no_positives_plot():
    # frac_pos exactly 0 and 1: Wilson bounds touch the point
    y = np.array([0] * 7 + [1] * 9)
    p = np.array([0.03] * 7 + [0.97] * 9)
    rep = fastcal.calibration_report(y, p, ace=False)
    ax = axes_by_label(rep.plot())
    assert len(ax["counts"].patches) == 10


# -- what a reader sees at the size users get (issue 23, item 18) -----------------------
# Rendered at the default size (640 x 800 px, as `fastcal score --plot` writes it); the
# assertions read the artists' extents from the renderer, not pixels.

def _boxes(fig, artists):
    r = fig.canvas.get_renderer()
    return [a.get_window_extent(r) for a in artists]


def _overlapping(boxes):
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].overlaps(boxes[j])]


def _s_shaped(n=200_000, seed=6):
    rng = np.random.default_rng(seed)
    u = rng.uniform(-5.0, 5.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-u))).astype(np.uint8)
    return y, 1.0 / (1.0 + np.exp(-u * (1.0 + 0.3 * (np.abs(u) - 2.7317))))


@pytest.fixture(scope="module")
def certain_wrong_report():
    y, p = fastcal.simulate(100_000, sigma=0.5, seed=1)
    p = p.astype(np.float64)
    p[:3], y[:3] = 1.0, 0
    p[3:5], y[3:5] = 0.0, 1
    return fastcal.calibration_report(y, p, ace=False)


@pytest.mark.parametrize("case", ["s_shaped", "few_rows"])
def test_the_ecd_title_fits_in_the_figure_and_clears_the_counts(case, tmp_path):
    if case == "s_shaped":
        rep = fastcal.calibration_report(*_s_shaped(), ace=False)
    else:  # a three-line title: bins named with their rows and a caution
        rng = np.random.default_rng(0)
        logits = rng.normal(size=(10_000, 5)) * 3
        rep = fastcal.calibration_report(rng.integers(0, 5, 10_000), logits, logits=True)
        assert "caution" in rep.overall_verdict
    fig = rep.plot(tmp_path / "r.png")
    assert png_size(tmp_path / "r.png") == (640, 800)
    ax = axes_by_label(fig)
    r = fig.canvas.get_renderer()
    title = ax["ecd"].title.get_window_extent(r)
    assert 0 <= title.x0 and title.x1 <= fig.bbox.width  # was cut at the right edge
    assert title.y1 < ax["counts"].get_tightbbox(r).y0
    assert rep.overall_verdict in ax["ecd"].get_title().replace("\n", " ")


def test_inf_labels_stay_in_the_panel_and_the_legend_explains_the_hatching(
        certain_wrong_report, tmp_path):
    fig = certain_wrong_report.plot(tmp_path / "inf.png")
    ax = axes_by_label(fig)["ecd"]
    texts = [t for t in ax.texts if t.get_text() == "inf"]
    assert len(texts) == 2
    panel = _boxes(fig, [ax])[0]
    for box in _boxes(fig, ax.texts):
        assert panel.y0 < box.y0 and box.y1 < panel.y1 and panel.x0 <= box.x0 <= box.x1 <= panel.x1
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("infinite ECD" in t for t in legend)
    hatched = [h for h in fig.legends[0].legend_handles if h.get_hatch() == "///"]
    assert len(hatched) == 1


def test_pale_bins_are_explained_in_the_legend(tmp_path):
    y, p = fastcal.simulate(20_000, sigma=0.2, seed=5)
    rep = fastcal.calibration_report(y, p, ace=False)
    assert rep.bin_test().verdict == "no bin miscalibrated"
    fig = rep.plot(tmp_path / "pale.png")
    colours = {to_hex(b.get_facecolor()) for b in axes_by_label(fig)["ecd"].patches}
    assert colours <= {OVER_PALE, UNDER_PALE}
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "over-confident, not flagged" in legend and "under-confident, flagged" in legend
    assert "infinite ECD" not in " ".join(legend)


def test_z_labels_of_narrow_equal_mass_bins_do_not_overlap(tmp_path):
    y, p = fastcal.simulate(300_000, sigma=2.0, seed=4)
    rep = fastcal.calibration_report(y, p, strategy="quantile", n_bins=15, ace=False)
    fig = rep.plot(tmp_path / "q.png")
    ax = axes_by_label(fig)["ecd"]
    boxes = _boxes(fig, ax.texts)
    assert _overlapping(boxes) == []
    # nor do they share a column (stacked labels over narrow bars read as each other's)
    assert all(a.x1 < b.x0 or b.x1 < a.x0 for i, a in enumerate(boxes) for b in boxes[i + 1:])
    panel = _boxes(fig, [ax])[0]
    assert all(panel.x0 <= b.x0 and b.x1 <= panel.x1 for b in boxes)
    # thinned, not emptied: the most extreme z is always written
    z = rep.bins["ecd_z"]
    assert 0 < len(ax.texts) < 15
    assert f"{z[np.nanargmax(np.abs(z))]:+.1f}" in [t.get_text() for t in ax.texts]
    # nothing else in the ECD panel or its title overlaps either
    r = fig.canvas.get_renderer()
    assert not ax.title.get_window_extent(r).overlaps(
        axes_by_label(fig)["counts"].get_tightbbox(r))


def test_k_class_axes_say_confidence_and_accuracy(tmp_path):
    rng = np.random.default_rng(0)
    rep = fastcal.calibration_report(rng.integers(0, 3, 2_000), rng.normal(size=(2_000, 3)),
                                     logits=True, n_bins=10)
    ax = axes_by_label(rep.plot(tmp_path / "k.png"))
    assert ax["reliability"].get_ylabel() == "accuracy"
    assert ax["ecd"].get_xlabel() == "confidence (mean top-label probability)"
    y, p = fastcal.simulate(2_000, seed=1)
    binary = axes_by_label(fastcal.calibration_report(y, p).plot())
    assert binary["ecd"].get_xlabel() == "mean predicted probability"
    assert binary["reliability"].get_ylabel() == "fraction of positives"


def test_reliability_panel_into_the_callers_axes(tmp_path):
    from matplotlib.figure import Figure

    y, p = fastcal.simulate(5_000, sigma=0.5, seed=2)
    rep = fastcal.calibration_report(y, p, n_bins=8, ace=False)
    fig = Figure(figsize=(8, 3))
    left, right = fig.subplots(1, 2)
    right.plot([0, 1], [1, 0], label="the caller's own line")
    got = rep.plot(tmp_path / "grid.png", ax=right)
    assert got is fig and fig.axes == [left, right]  # no axes added, none replaced
    assert right.get_label() == "reliability" and not left.lines
    pts = [ln for ln in right.get_lines() if len(ln.get_xdata()) == 8][0]
    np.testing.assert_allclose(pts.get_xdata(), rep.bins["conf"], rtol=1e-12)
    np.testing.assert_allclose(pts.get_ydata(), rep.bins["frac_pos"], rtol=1e-12)
    assert "the caller's own line" in [ln.get_label() for ln in right.get_lines()]
    assert right.get_xlabel() == "mean predicted probability"
    assert png_size(tmp_path / "grid.png") == (800, 300)
    for bad in (3, fig, [right]):
        with pytest.raises(ValueError, match="^ax must be a matplotlib Axes; got "):
            rep.plot(ax=bad)

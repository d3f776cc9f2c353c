"""Smooth ECE (issue 27): the grid fill, the measure against relplot and an exact
kernel sum, merging, every entry point, reports, the CLI and the diagram."""

import json
import pickle
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.signal import fftconvolve

import fastcal
from fastcal._kernels import smooth as ks
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.cli import main
from fastcal.reports.smooth import SIGMA_MIN, SmoothGrid
from fastcal.score import Options

SIGMAS = (0.01, 0.02, 0.05, 0.1, 0.2)


def _data(n, seed):
    """Probabilities whose true frequency crosses them (the residual changes sign)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, n)
    q = np.clip(0.5 + 1.6 * (p - 0.5) + 0.1 * np.sin(9.0 * p), 0.0, 1.0)
    return (rng.random(n) < q).astype(np.int64), p


def _grid_reference(y, x, g=ks.GRID):
    """relplot's smooth_round_to_grid of the weights and of the residuals x - y."""
    u = x * g
    j = np.minimum(u.astype(np.int64), g - 1)
    w = u - j
    mass = np.zeros(g + 1)
    resid = np.zeros(g + 1)
    for jj, ww, r in zip(j, w, x - y):
        mass[jj] += 1.0 - ww
        mass[jj + 1] += ww
        resid[jj] += (1.0 - ww) * r
        resid[jj + 1] += ww * r
    return mass, resid


def _exact(y, x, sigma, points=40_001):
    """smECE_sigma with the reflected Gaussian kernel summed row by row (all images
    within 3 periods), integrals by the trapezoid rule on a fine grid: no
    interpolation onto a grid."""
    t = np.linspace(0.0, 1.0, points)
    r = np.zeros(points)
    d = np.zeros(points)
    for xi, ri in zip(x, x - y):
        k = sum(np.exp(-0.5 * ((t - s * xi - 2.0 * m) / sigma) ** 2)
                for m in (-1, 0, 1) for s in (1.0, -1.0))
        r += ri * k
        d += k
    w = np.full(points, 1.0)
    w[[0, -1]] = 0.5
    return float((np.abs(r) * w).sum() / (d * w).sum())


@pytest.fixture(scope="module")
def relplot():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import relplot as rp  # its import (matplotlib, seaborn, pandas) must be clean
    return rp


@pytest.fixture(scope="module")
def binary():
    return _data(20_000, 1)


# -- the fill ----------------------------------------------------------------

def test_grid_fill_equals_the_reference():
    y, x = _data(500, 2)
    x[:3] = [0.0, 1.0, 0.5]  # both ends, and a point on the grid
    mass = np.zeros(ks.GRID + 1)
    resid = np.zeros(ks.GRID + 1)
    n = np.zeros(1, np.int64)
    ks.fill_grid(x, y, 1, mass, resid, n)
    ref_mass, ref_resid = _grid_reference(y, x)
    np.testing.assert_allclose(mass, ref_mass, rtol=0, atol=1e-12)
    np.testing.assert_allclose(resid, ref_resid, rtol=0, atol=1e-12)
    assert n[0] == 500 and mass.sum() == pytest.approx(500.0, rel=1e-14)


def test_grid_fill_skips_invalid_rows_and_threads_agree():
    y, x = _data(300_000, 3)
    yf = y.astype(np.float64)
    x[5], yf[7] = np.nan, np.nan
    states = []
    for threads in (1, 2):
        mass, resid, n = np.zeros(ks.GRID + 1), np.zeros(ks.GRID + 1), np.zeros(1, np.int64)
        ks.fill_grid(x, yf, threads, mass, resid, n)
        states.append((mass, resid, n))
    assert states[0][2][0] == states[1][2][0] == 300_000 - 2
    np.testing.assert_allclose(states[0][0], states[1][0], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(states[0][1], states[1][1], rtol=1e-12, atol=1e-9)


# -- the measure against relplot and the exact kernel sum ----------------------

def _truncated(mass, resid, sigma):
    """smECE_sigma of a grid with relplot's kernel: offsets cut at |d| <= 0.5 and
    one reflection at each end (its ReflectedGaussianKernel.convolve)."""
    g = mass.shape[0] - 1
    off = np.arange(-g, g + 1) / g
    k = np.where(np.abs(off) <= 0.5, np.exp(-0.5 * (off / sigma) ** 2), 0.0)

    def smooth(a):
        return fftconvolve(np.concatenate([a[:0:-1], a, a[-2::-1]]), k, "same")[g:2 * g + 1]

    w = np.ones(g + 1)
    w[[0, -1]] = 0.5
    return (np.abs(smooth(resid)) * w).sum() / (smooth(mass) * w).sum()


def test_smece_sigma_matches_relplot(relplot, binary):
    y, p = binary
    for sigma in SIGMAS[:-1] + (0.15,):
        ours = fastcal.smece(y, p, sigma)
        theirs = relplot.smECE_sigma(p, y.astype(np.float64), sigma)
        assert ours == pytest.approx(theirs, rel=5e-3), sigma


def test_relplot_cuts_its_kernel_at_half_width_one_half(relplot, binary):
    """At sigma = 0.2 relplot differs from the reflected kernel by 1.3% here: it
    cuts the kernel at |t - x| <= 0.5 (1.2% of its mass at sigma = 0.2). Its
    kernel on our grid agrees with it to 5e-3; ours keeps the whole kernel."""
    y, p = binary
    acc = _smooth_acc().update(y, p)
    theirs = relplot.smECE_sigma(p, y.astype(np.float64), 0.2)
    assert _truncated(acc.smooth_mass, acc.smooth_resid, 0.2) == pytest.approx(theirs, rel=5e-3)
    assert abs(fastcal.smece(y, p, 0.2) / theirs - 1.0) > 5e-3


def test_smece_fixed_point_within_relplot_resolution(relplot, binary):
    y, p = binary
    value, sigma = fastcal.smece(y, p, return_sigma=True)
    theirs, width = relplot.smECE(p, y.astype(np.float64), return_width=True)
    assert abs(sigma - width) <= 2 / 1024
    assert abs(sigma - value) <= 1e-6  # the fixed point sigma = smECE_sigma
    assert value == pytest.approx(relplot.smECE_sigma(p, y.astype(np.float64), sigma), rel=5e-3)
    assert sigma >= SIGMA_MIN


def test_logits_and_top_label_match_relplot(relplot):
    y, p = _data(5_000, 4)
    z = np.log(p / (1.0 - p))
    assert fastcal.smece(y, z, 0.05, logits=True) == pytest.approx(
        relplot.smECE_sigma(p, y.astype(np.float64), 0.05), rel=5e-3)
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.full(4, 0.5), 5_000)
    labels = np.array([rng.choice(4, p=q) for q in probs ** 1.5 / (probs ** 1.5).sum(1)[:, None]])
    conf, correct = relplot.multiclass_logits_to_confidences(probs, labels, probs=True)
    for sigma in (0.02, 0.1):
        assert fastcal.smece(labels, probs, sigma) == pytest.approx(
            relplot.smECE_sigma(conf, correct, sigma), rel=5e-3)
    value, sigma = fastcal.smece(labels, probs, return_sigma=True)
    assert abs(sigma - relplot.smECE(conf, correct, return_width=True)[1]) <= 2 / 1024


def test_grid_error_is_below_relplot_against_the_exact_kernel_sum(relplot):
    """The fixed grid (8,193 points) against the exact reflected-kernel sum: below
    2e-5 relative at every bandwidth from 0.01 (relplot's own error is larger)."""
    y, p = _data(150, 6)
    for sigma in SIGMAS:
        exact = _exact(y, p, sigma)
        ours = fastcal.smece(y, p, sigma)
        assert abs(ours / exact - 1.0) < 2e-5, sigma
        assert abs(ours / exact - 1.0) < abs(relplot.smECE_sigma(p, y * 1.0, sigma) / exact - 1.0)


def _exact_curve(y, x, sigma, t):
    """relplot's smoothed reliability curve with the exact reflected kernel: the
    kernel regression sum_i y_i K(t, x_i) / sum_i K(t, x_i), and the density
    sum_i K(t, x_i) / n (integral 1 over [0, 1])."""
    k = sum(np.exp(-0.5 * ((t[:, None] - s * x[None, :] - 2.0 * m) / sigma) ** 2)
            for m in (-1, 0, 1) for s in (1.0, -1.0)) / (sigma * np.sqrt(2.0 * np.pi))
    return (k * y).sum(1) / k.sum(1), k.sum(1) / x.shape[0]


def test_rows_at_zero_and_one_count_in_full():
    """A row at an end is its own mirror image: its reflected kernel still has mass 1
    on [0, 1]. One over-confident row at p = 1 has smooth ECE 1, as for any p."""
    for sigma in (0.01, 0.05, 0.3):
        assert fastcal.smece([0], [1.0], sigma=sigma) == pytest.approx(1.0, rel=1e-12)
        assert fastcal.smece([1], [0.0], sigma=sigma) == pytest.approx(1.0, rel=1e-12)
        assert fastcal.smece([0], [0.6], sigma=sigma) == pytest.approx(0.6, rel=1e-12)
    assert fastcal.smece([0, 1], [1.0, 1.0], sigma=0.05) == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize("where", ["ends", "one ulp from the ends", "within a grid cell"])
def test_rows_near_the_ends_match_the_exact_kernel_sum(where):
    rng = np.random.default_rng(11)
    base = {"ends": np.array([0.0, 1.0]),
            "one ulp from the ends": np.array([np.nextafter(np.float32(1), np.float32(0)),
                                               np.float32(1e-45)], dtype=np.float64),
            "within a grid cell": np.array([0.3 / ks.GRID, 1.0 - 0.7 / ks.GRID])}[where]
    x = np.concatenate([np.repeat(base, 40), rng.random(40)])
    y = (rng.random(x.shape[0]) < 0.5).astype(np.int64)
    for sigma in (0.02, 0.05, 0.1):
        assert fastcal.smece(y, x, sigma) == pytest.approx(_exact(y, x, sigma), rel=2e-5), sigma


def test_a_model_with_probabilities_at_the_ends_matches_the_exact_kernel_sum():
    """scikit-learn's GaussianNB on its breast-cancer data puts most rows within a grid
    cell of 0 or 1 (a fifth exactly there)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.naive_bayes import GaussianNB

    X, y = load_breast_cancer(return_X_y=True)
    p = GaussianNB().fit(X[::2], y[::2]).predict_proba(X)[:, 1]
    assert np.mean((p < 1.0 / ks.GRID) | (p > 1.0 - 1.0 / ks.GRID)) > 0.8
    for sigma in (0.02, 0.1):
        assert fastcal.smece(y, p, sigma) == pytest.approx(_exact(y, p, sigma), rel=2e-5), sigma
    value, sigma = fastcal.smece(y, p, return_sigma=True)
    assert _exact(y, p, sigma) == pytest.approx(sigma, rel=1e-4)  # the exact sum's fixed point


def test_smooth_curve_is_the_kernel_regression_of_y():
    rng = np.random.default_rng(12)
    x = np.concatenate([[0.0, 0.0, 1.0], rng.beta(2.0, 5.0, 300)])
    y = (rng.random(x.shape[0]) < np.sqrt(x)).astype(np.int64)
    acc = _smooth_acc().update(y, x)
    t, mu, density = SmoothGrid(*acc.smooth_grid()).curve(0.05)
    ref_mu, ref_density = _exact_curve(y, x, 0.05, t)
    np.testing.assert_allclose(mu, ref_mu, rtol=0, atol=2e-4)
    np.testing.assert_allclose(density, ref_density, rtol=2e-3, atol=1e-3)


# -- merging and entry points ----------------------------------------------------

def _smooth_acc(**kw):
    return CalibrationAccumulator(smooth=True, **kw)


def test_merge_is_exact_in_any_order_and_state_round_trips(binary):
    y, p = binary
    whole = _smooth_acc().update(y, p).report()
    cuts = [0, 1_234, 7_000, 7_001, 20_000]
    parts = [_smooth_acc().update(y[a:b], p[a:b], start=a) for a, b in zip(cuts, cuts[1:])]
    for merged in (sum(parts), sum(reversed(parts)), (parts[2] + parts[0]) + (parts[3] + parts[1])):
        rep = merged.report()
        assert rep.smece == pytest.approx(whole.smece, rel=1e-12)
        assert rep.smece_sigma == pytest.approx(whole.smece_sigma, rel=1e-12)
    back = pickle.loads(pickle.dumps(parts[0]))
    np.testing.assert_array_equal(back.smooth_mass, parts[0].smooth_mass)
    copy = parts[0].copy()
    copy.update(y[:10], p[:10])
    assert copy.smooth_n[0] == parts[0].smooth_n[0] + 10  # the copy's grid is its own
    arrays = [a.to_arrays() for a in parts]
    assert arrays[0]["smooth_mass"].shape == (ks.GRID + 1,)
    assert arrays[0]["smooth_n"].dtype == np.int64
    total = {k: sum(a[k] for a in arrays) for k in arrays[0]}
    rep = _smooth_acc().add_arrays(total).report()
    assert rep.smece == pytest.approx(whole.smece, rel=1e-12)


def test_merge_refuses_a_state_without_the_grid(binary):
    y, p = binary
    with pytest.raises(ValueError, match=r"with and without the smooth ECE grid \(smooth=True"):
        _smooth_acc().update(y[:5], p[:5]) + CalibrationAccumulator().update(y[:5], p[:5])
    with pytest.raises(ValueError, match="names"):
        CalibrationAccumulator().add_arrays(_smooth_acc().update(y[:5], p[:5]).to_arrays())


def test_arrays_file_dask_agree(tmp_path, binary):
    import dask.array as da

    from fastcal.distributed import score_dask, score_dataset

    y, p = binary
    ref = fastcal.calibration_report(y, p, smooth=True, ace=False)
    assert ref.smece == fastcal.smece(y, p)
    path = tmp_path / "pred.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), path, row_group_size=3_000)
    got = [fastcal.score_file(path, smooth=True, chunk_rows=4_321),
           score_dask(da.from_array(y, chunks=6_000), da.from_array(p, chunks=6_000),
                      smooth=True),
           score_dataset(str(path), smooth=True, rows_per_partition=5_000)]
    for rep in got:
        assert rep.smece == pytest.approx(ref.smece, rel=1e-12)
        assert rep.smece_sigma == pytest.approx(ref.smece_sigma, rel=1e-12)
    quantile = fastcal.calibration_report(y, p, smooth=True, strategy="quantile")
    assert quantile.smece == pytest.approx(ref.smece, rel=1e-12)


def test_default_report_has_no_grid(binary):
    y, p = binary
    acc = Options(ace=False).accumulator()
    assert not acc.smooth and acc.smooth_mass.shape == (0,) and acc.smooth_grid() is None
    rep = fastcal.calibration_report(y, p)
    assert np.isnan(rep.smece) and "smece" not in rep.to_dict()
    assert "Smooth ECE" not in str(rep)


def test_report_fields_text_and_json(binary):
    y, p = binary
    rep = fastcal.calibration_report(y[:2_000], p[:2_000], smooth=True)
    d = json.loads(rep.to_json())
    assert d["smece"] == rep.smece and d["smece_sigma"] == rep.smece_sigma
    assert f"Smooth ECE = {rep.smece:.4f} (bandwidth sigma = {rep.smece_sigma:.4f})" in str(rep)
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6], [0.5, 0.4, 0.1]])
    mc = fastcal.calibration_report([0, 2, 2, 1], probs, smooth=True)
    assert type(mc).__name__ == "MulticlassReport"
    assert mc.to_dict()["smece"] == pytest.approx(fastcal.smece([0, 2, 2, 1], probs))


def test_nan_rows_omitted_from_the_grid(binary):
    y, p = binary
    p = p[:1_000].copy()
    p[10] = np.nan
    keep = ~np.isnan(p)
    assert fastcal.smece(y[:1_000], p, 0.05, nan_policy="omit") == pytest.approx(
        fastcal.smece(y[:1_000][keep], p[keep], 0.05), rel=1e-12)


def test_bad_input_gets_one_line():
    with pytest.raises(ValueError, match=r"sigma must be a number from 0.001 to 1 .* got 0"):
        fastcal.smece([0, 1], [0.2, 0.7], 0)
    with pytest.raises(ValueError, match=r"^y_prob contains 1 NaN"):
        fastcal.smece([0, 1], [np.nan, 0.7])
    with pytest.raises(ValueError, match="soft labels .* no smooth ECE grid"):
        fastcal.calibration_report(np.array([[0.2, 0.8], [1.0, 0.0]]),
                                   np.array([[0.3, 0.7], [0.9, 0.1]]), smooth=True)


# -- the CLI and the diagram -------------------------------------------------------

def test_cli_smece_json_text_and_plot(tmp_path, binary, capsys):
    y, p = binary
    path = tmp_path / "pred.parquet"
    pq.write_table(pa.table({"p": p[:3_000], "y": y[:3_000]}), path)
    ref = fastcal.score_file(path, smooth=True)
    args = ["score", str(path), "--prob", "p", "--label", "y", "--quiet"]
    assert main(args + ["--smece", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["smece"] == pytest.approx(ref.smece, rel=1e-12)
    png = tmp_path / "smooth.png"
    assert main(args + ["--plot", str(png), "--plot-smooth"]) == 0
    assert "Smooth ECE" in capsys.readouterr().out and png.stat().st_size > 0
    assert main(args + ["--plot-smooth"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fastcal score: error: --plot-smooth chooses what --plot draws; pass "
                   "--plot FILE.png too"]


def test_smooth_diagram(binary):
    pytest.importorskip("matplotlib")
    from fastcal.reports.plot import smooth_diagram

    y, p = binary
    rep = fastcal.calibration_report(y, p, smooth=True)
    fig = rep.plot(smooth=True)
    assert [ax.get_label() for ax in fig.axes] == ["smooth"]
    t, mu, density = SmoothGrid(*rep.smooth_grid).curve(rep.smece_sigma)
    assert t[0] == 0.0 and t[-1] == 1.0
    assert np.trapezoid(density, t) == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(ValueError, match="no smooth ECE grid; score with smooth=True"):
        smooth_diagram(fastcal.calibration_report(y, p))


@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(0, 3_000), max_size=6), order=st.randoms(use_true_random=False))
def test_any_chunking_and_merge_order_give_the_same_smece(cuts, order):
    y, p = _data(3_000, 7)
    bounds = sorted({0, 3_000, *cuts})
    parts = [_smooth_acc().update(y[a:b], p[a:b], start=a) for a, b in zip(bounds, bounds[1:])]
    order.shuffle(parts)
    whole = _smooth_acc().update(y, p).report()
    rep = sum(parts).report()
    assert rep.smece == pytest.approx(whole.smece, rel=1e-12)
    assert rep.smece_sigma == pytest.approx(whole.smece_sigma, rel=1e-12)

"""ECE-sweep (Roelofs et al., 2022) and TACE (Nixon et al., 2019), asked for through
``metrics=`` (issue 27): loop references from the papers, every entry point, the option."""

import json
import subprocess
import sys

import numpy as np
import pytest

import fastcal
from fastcal.score import OPTIONAL_METRICS, Options


def _binary(n=4000, seed=0):
    return fastcal.simulate(n, sigma=0.6, seed=seed)


def _classes(n=1500, k=4, seed=1):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.5), size=n)
    y = np.array([rng.choice(k, p=row) for row in p ** 1.3 / (p ** 1.3).sum(1, keepdims=True)])
    return y, p


# -- loop references, from the papers ----------------------------------------------


def _groups_equal_mass(x, b):
    """Ranks split at floor(g n / b); ties by row order (a stable sort)."""
    order = np.argsort(x, kind="stable")
    n = len(x)
    g = np.empty(n, np.int64)
    for j in range(b):
        g[order[(j * n) // b:((j + 1) * n) // b]] = j
    return g


def _groups_equal_width(x, b):
    return np.minimum((x * b).astype(np.int64), b - 1)  # [a, b), the last bin [a, 1]


def sweep_ref(y, x, strategy="quantile"):
    """Roelofs et al. (2022), section 4: the largest b (from 1, stopping at the first
    failure) whose bins' label frequencies are monotone, and the ECE there."""
    best = None
    for b in range(1, len(x) + 1):
        g = _groups_equal_mass(x, b) if strategy == "quantile" else _groups_equal_width(x, b)
        freqs, ece = [], 0.0
        for j in range(b):
            sel = g == j
            if sel.sum() == 0:
                continue
            freqs.append(y[sel].mean())
            ece += sel.sum() / len(x) * abs(y[sel].mean() - x[sel].mean())
        if any(f2 < f1 for f1, f2 in zip(freqs, freqs[1:])):
            break
        best = (ece, b)
    return best


def tace_ref(y, p, n_ranges=10, threshold=1e-3):
    """Nixon et al. (2019): per class, the probabilities above the threshold in R
    equal-mass ranges; 1/(K R) sum_k sum_r |acc(r, k) - conf(r, k)|."""
    k_classes = p.shape[1]
    total = 0.0
    for k in range(k_classes):
        keep = p[:, k] > threshold
        x = p[keep, k]
        lab = (y[keep] == k).astype(float)
        if x.size == 0:
            continue
        g = _groups_equal_mass(x, n_ranges)
        for r in range(n_ranges):
            sel = g == r
            if sel.any():
                total += abs(lab[sel].mean() - x[sel].mean())
    return total / (k_classes * n_ranges)


# -- ECE-sweep --------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["quantile", "uniform"])
@pytest.mark.parametrize("seed", [0, 1])
def test_ece_sweep_equals_the_loop_reference(strategy, seed):
    y, p = _binary(3000, seed)
    rep = fastcal.calibration_report(y, p, metrics=("ece_sweep",), sweep=strategy)
    ece, b = sweep_ref(y.astype(float), p, strategy)
    assert rep.ece_sweep_bins == b
    assert rep.ece_sweep == pytest.approx(ece, rel=1e-12)
    assert rep.pass_steps[-1][0] == "ece_sweep" and rep.passes > 2


def test_ece_sweep_top_label_and_ties():
    y, p = _classes()
    rep = fastcal.calibration_report(y, p, metrics="ece_sweep")
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    ece, b = sweep_ref(correct, conf)
    assert (rep.ece_sweep_bins, rep.ece_sweep) == (b, pytest.approx(ece, rel=1e-12))
    # many tied values: equal-mass groups split ties by row order
    y, p = _binary(2000, 2)
    p = np.round(p, 2)
    rep = fastcal.calibration_report(y, p, metrics=("ece_sweep",))
    ece, b = sweep_ref(y.astype(float), p)
    assert (rep.ece_sweep_bins, rep.ece_sweep) == (b, pytest.approx(ece, rel=1e-12))


def test_ece_sweep_is_the_same_from_a_file_in_chunks_and_on_dask(tmp_path):
    da = pytest.importorskip("dask.array")
    from fastcal.distributed import score_dask

    y, p = _binary(3000, 1)
    path = tmp_path / "s.csv"
    np.savetxt(path, np.column_stack([y, p]), delimiter=",", header="y,p", comments="",
               fmt=["%d", "%.17g"])
    mem = fastcal.calibration_report(y, p, metrics=("ece_sweep",))
    got = fastcal.score_file(str(path), chunk_rows=700, metrics=("ece_sweep",))
    dask = score_dask(da.from_array(y, chunks=500), da.from_array(p, chunks=500),
                      metrics=("ece_sweep",))
    for rep in (got, dask):
        assert rep.ece_sweep_bins == mem.ece_sweep_bins
        assert rep.ece_sweep == pytest.approx(mem.ece_sweep, rel=1e-12)


# -- SCE and TACE -----------------------------------------------------------------


def test_sce_is_the_classwise_ece():
    """SCE (Nixon et al.) is class-wise ECE over equal-width bins with weights
    |B_mk| / n: the definitions coincide whenever the bins are the same."""
    y, p = _classes()
    rep = fastcal.calibration_report(y, p, n_bins=15, ace=False)
    ref = 0.0
    for k in range(p.shape[1]):
        g = _groups_equal_width(p[:, k], 15)
        for b in range(15):
            sel = g == b
            if sel.any():
                ref += sel.sum() / len(y) * abs((y[sel] == k).mean() - p[sel, k].mean())
    ref /= p.shape[1]
    assert rep.sce == rep.classwise_ece
    assert rep.sce == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("threshold", [1e-3, 0.05])
def test_tace_equals_the_loop_reference(threshold):
    y, p = _classes()
    rep = fastcal.calibration_report(y, p, n_bins=8, metrics=("tace",),
                                     tace_threshold=threshold)
    assert rep.tace == pytest.approx(tace_ref(y, p, 8, threshold), rel=1e-12)
    logits = fastcal.calibration_report(y, np.log(p), logits=True, n_bins=8,
                                        metrics=("tace",), tace_threshold=threshold)
    assert logits.tace == pytest.approx(rep.tace, rel=1e-9)


def test_tace_of_a_class_with_few_probabilities_above_the_threshold():
    y, p = _classes(300, k=3)
    p[:, 2] = np.where(np.arange(300) < 4, p[:, 2], 1e-4)  # 4 rows above 1e-3
    p /= p.sum(axis=1, keepdims=True)
    rep = fastcal.calibration_report(y, p, n_bins=10, metrics=("tace",))
    assert rep.tace == pytest.approx(tace_ref(y, p, 10), rel=1e-12)


def test_tace_from_a_file_and_on_dask_equals_arrays(tmp_path):
    da = pytest.importorskip("dask.array")
    from fastcal.distributed import score_dask

    y, p = _classes(1200, k=3)
    path = tmp_path / "k.csv"
    np.savetxt(path, np.column_stack([y, p]), delimiter=",", header="y,p_0,p_1,p_2",
               comments="", fmt=["%d"] + ["%.17g"] * 3)
    mem = fastcal.calibration_report(y, p, metrics=("tace",))
    got = fastcal.score_file(str(path), prob="p_*", chunk_rows=250, metrics=("tace",))
    dask = score_dask(da.from_array(y, chunks=400), da.from_array(p, chunks=(400, 3)),
                      metrics=("tace",))
    assert got.tace == pytest.approx(mem.tace, rel=1e-12)
    assert dask.tace == pytest.approx(mem.tace, rel=1e-12)
    assert json.loads(got.to_json())["tace"] == pytest.approx(mem.tace, rel=1e-12)


def test_tace_of_binary_input_is_refused_in_one_line():
    y, p = _binary(200)
    with pytest.raises(ValueError, match=r"^metrics 'tace' is class-wise and needs K class "
                                         r"columns; .* holds one probability column \(binary\)"):
        fastcal.calibration_report(y, p, metrics=("tace",))


# -- the option ---------------------------------------------------------------------


def test_default_report_computes_no_optional_measure():
    y, p = _binary(500)
    rep = fastcal.calibration_report(y, p)
    assert np.isnan(rep.ece_sweep) and rep.ece_sweep_bins is None
    assert [s for s, _ in rep.pass_steps] == ["fill", "ACE"]


def test_unknown_metric_names_one_line_listing_the_valid_ones():
    with pytest.raises(ValueError) as err:
        Options(metrics=("ece_sweep", "smooth", "tacee")).checked()
    msg = str(err.value)
    assert msg == ("metrics has unknown names 'smooth', 'tacee'; valid names: "
                   + ", ".join(OPTIONAL_METRICS))
    assert "\n" not in msg
    with pytest.raises(ValueError, match="tace_threshold must be a number in"):
        fastcal.calibration_report([0, 1], [0.2, 0.8], tace_threshold=1.5)
    with pytest.raises(ValueError, match="sweep must be one of"):
        fastcal.calibration_report([0, 1], [0.2, 0.8], sweep="width")


def test_cli_metrics_text_json_and_bad_name(tmp_path):
    y, p = _binary(1000)
    path = tmp_path / "s.csv"
    np.savetxt(path, np.column_stack([y, p]), delimiter=",", header="y,p", comments="",
               fmt=["%d", "%.17g"])
    from fastcal.cli import main

    mem = fastcal.calibration_report(y, p, metrics=("ece_sweep",))
    out = tmp_path / "r.json"
    assert main(["score", str(path), "--prob", "p", "--label", "y", "--metrics",
                 "ece_sweep", "--json", "--output", str(out), "--quiet"]) == 0
    d = json.loads(out.read_text())
    assert d["ece_sweep_bins"] == mem.ece_sweep_bins
    assert d["ece_sweep"] == pytest.approx(mem.ece_sweep, rel=1e-12)
    assert d["ece_l2"] == pytest.approx(mem.ece_l2, rel=1e-12)
    proc = subprocess.run([sys.executable, "-m", "fastcal", "score", str(path), "--prob", "p",
                           "--label", "y", "--metrics", "ece_sweep,bogus"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "metrics has unknown name 'bogus'; valid names: " + ", ".join(OPTIONAL_METRICS))


def test_ece_sweep_of_separated_labels_runs_to_one_row_per_bin_and_stops_at_the_cap(
        monkeypatch):
    from fastcal.accumulators import sweep

    p = np.linspace(0.01, 0.99, 40)
    y = (p > 0.5).astype(np.uint8)  # frequencies 0 then 1: monotone for every b
    for strategy in ("quantile", "uniform"):
        rep = fastcal.calibration_report(y, p, metrics=("ece_sweep",), sweep=strategy)
        ece, b = sweep_ref(y.astype(float), p, strategy)
        assert (rep.ece_sweep_bins, rep.ece_sweep) == (b, pytest.approx(ece, rel=1e-12))
    assert rep.ece_sweep_bins == 40
    monkeypatch.setattr(sweep, "MAX_BINS", 12)
    rep = fastcal.calibration_report(y, p, metrics=("ece_sweep",))
    assert rep.ece_sweep_bins == 12

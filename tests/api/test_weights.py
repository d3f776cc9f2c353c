"""Sample weights in the binned reports: integer weights equal repeated rows, weights
all 1 equal none, merged chunks equal one pass, the weighted Brier and NLL equal
scikit-learn's, the ECD test with Kish's effective rows, and bad weights refused in
one line."""

import numpy as np
import pytest

import fastcal
from fastcal.accumulators.calibration import CalibrationAccumulator

SCALARS = ("ece", "esce", "mce", "ecd", "brier", "nll", "ece_l2")
BINS = ("count", "conf", "frac_pos", "accuracy", "ece", "esce", "ecd")
N = 400


def _binary(seed=0, n=N):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    y = (rng.random(n) < p ** 1.3).astype(np.int64)
    return y, p


def _classes(seed=1, n=N, k=4):
    rng = np.random.default_rng(seed)
    z = 2.0 * rng.normal(size=(n, k))
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return rng.integers(0, k, n), P


def _logits(seed=2, n=N):
    rng = np.random.default_rng(seed)
    z = 3.0 * rng.normal(size=n)
    return (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(np.int64), z


DATA = {"binary": (_binary, {}), "multiclass": (_classes, {}),
        "logits": (_logits, {"logits": True})}


def _close(got, ref, names=SCALARS, rtol=1e-12):
    for name in names:
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=rtol, atol=0,
                                   err_msg=name)


@pytest.mark.parametrize("kind", list(DATA))
def test_integer_weights_equal_repeated_rows(kind):
    make, options = DATA[kind]
    y, p = make()
    w = np.random.default_rng(5).integers(0, 4, y.shape[0])  # zeros too
    got = CalibrationAccumulator(**options).update(y, p, sample_weight=w).report()
    ref = CalibrationAccumulator(**options).update(np.repeat(y, w), np.repeat(p, w, axis=0)).report()
    _close(got, ref)
    # the Brier decomposition: its parts to 1e-12 of the Brier score (the within-bin
    # terms are differences of sums of p**2, whose rounding is relative to those sums)
    for name in ("brier_reliability", "brier_resolution", "brier_uncertainty",
                 "brier_within_variance", "brier_within_covariance"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=0,
                                   atol=1e-12 * ref.brier, err_msg=name)
    np.testing.assert_allclose(got.bins["weight"], ref.bins["count"], rtol=0, atol=0)
    for col in ("conf", "frac_pos", "accuracy", "ecd"):
        np.testing.assert_allclose(got.bins[col], ref.bins[col], rtol=1e-12, atol=0)
    assert got.n == y.shape[0] and ref.n == w.sum() == got.weight_sum
    assert got.bins["count"].sum() == y.shape[0]
    if kind == "multiclass":
        assert got.classwise_ece == pytest.approx(ref.classwise_ece, rel=1e-12, abs=0)
        np.testing.assert_array_equal(got.classes["support"], ref.classes["support"])


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_weights_all_one_equal_no_weights_bit_for_bit(kind):
    make, options = DATA[kind]
    y, p = make()
    got = fastcal.calibration_report(y, p, sample_weight=np.ones(y.shape[0], np.float32),
                                     ci=0.9, n_boot=0)
    ref = fastcal.calibration_report(y, p, ace=False, ci=0.9, n_boot=0)
    for name in (*SCALARS, "ecd_z", "ecd_var", "ece_debiased"):
        assert getattr(got, name) == getattr(ref, name), name
    for col in BINS + ("ecd_var", "ecd_z"):
        np.testing.assert_array_equal(got.bins[col], ref.bins[col])
    for name in ("ecd", "brier", "nll"):
        assert got.intervals[name] == ref.intervals[name], name
    assert got.weighted and got.n_eff == got.weight_sum == ref.n and not ref.weighted


def test_weighted_kernel_with_weights_one_equals_unweighted_fill():
    """The weighted kernel itself (weights 1 and a weight 0 row, so the all-ones
    shortcut is not taken) against the unweighted fill, to 1e-12."""
    y, p = _binary()
    w = np.ones(y.shape[0])
    w[-1] = 0.0
    got = fastcal.calibration_report(y, p, sample_weight=w)
    ref = fastcal.calibration_report(y[:-1], p[:-1], ace=False)
    _close(got, ref, (*SCALARS, "ecd_z", "ecd_var", "ece_debiased"))
    assert got.n == y.shape[0] and got.n_eff == got.weight_sum == y.shape[0] - 1


def test_merged_chunks_equal_one_pass():
    y, p = _binary(3, 600)
    w = np.random.default_rng(4).gamma(0.7, 2.0, y.shape[0])
    one = CalibrationAccumulator(n_bins=12).update(y, p, sample_weight=w)
    parts = [CalibrationAccumulator(n_bins=12).update(y[a:b], p[a:b], sample_weight=w[a:b])
             for a, b in ((0, 150), (150, 420), (420, 600))]
    merged = sum(parts)
    streamed = CalibrationAccumulator(n_bins=12)
    for a, b in ((0, 200), (200, 600)):
        streamed.update(y[a:b], p[a:b], sample_weight=w[a:b])
    for acc in (merged, streamed):
        _close(acc.report(), one.report(), (*SCALARS, "ecd_z", "ece_debiased", "n_eff"))
    # as arrays (a framework's sum reduction): the weighted sums travel too
    rest = {k: parts[1].to_arrays()[k] + parts[2].to_arrays()[k] for k in one.to_arrays()}
    assert {"wsums", "wtotals"} <= set(rest)
    _close(parts[0].copy().add_arrays(rest).report(), one.report())


def test_unweighted_rows_weigh_one_in_a_weighted_state():
    """An unweighted chunk (or state) merged with a weighted one counts its rows at
    weight 1, in either order."""
    y, p = _binary(6, 300)
    w = np.r_[np.ones(100), np.random.default_rng(7).random(200) * 2]
    ref = CalibrationAccumulator().update(y, p, sample_weight=w).report()
    first = CalibrationAccumulator().update(y[:100], p[:100])
    second = CalibrationAccumulator().update(y[100:], p[100:], sample_weight=w[100:])
    _close((first + second).report(), ref)
    _close((second + first).report(), ref)
    _close(first.copy().update(y[100:], p[100:], sample_weight=w[100:]).report(), ref)
    chunked = CalibrationAccumulator().update(y[100:], p[100:], sample_weight=w[100:])
    _close(chunked.update(y[:100], p[:100], start=0).report(), ref)


def test_brier_and_nll_equal_scikit_learn():
    from sklearn.metrics import brier_score_loss, log_loss

    y, p = _binary(8)
    w = np.random.default_rng(9).gamma(0.5, 2.0, y.shape[0])
    assert fastcal.brier_score(y, p, sample_weight=w) == pytest.approx(
        brier_score_loss(y, p, sample_weight=w), rel=1e-12, abs=0)
    assert fastcal.log_loss(y, p, sample_weight=w) == pytest.approx(
        log_loss(y, p, sample_weight=w), rel=1e-12, abs=0)
    yk, P = _classes()
    assert fastcal.log_loss(yk, P, sample_weight=w) == pytest.approx(
        log_loss(yk, P, sample_weight=w, labels=np.arange(4)), rel=1e-12, abs=0)


def test_weighted_means_and_kish_test_from_their_definitions():
    """ECE, ECD and the test's z from the formulas in the docs, in NumPy."""
    y, p = _binary(10)
    w = np.random.default_rng(11).gamma(0.5, 2.0, y.shape[0])
    r = fastcal.calibration_report(y, p, n_bins=5, sample_weight=w)
    b = np.minimum((p * 5).astype(int), 4)
    gaps = [abs(np.average(y[b == k], weights=w[b == k]) - np.average(p[b == k], weights=w[b == k]))
            for k in range(5)]
    mass = np.bincount(b, weights=w, minlength=5)
    assert r.ece == pytest.approx(np.dot(mass / w.sum(), gaps), rel=1e-12, abs=0)
    logit = np.log(p) - np.log1p(-p)
    t, var = (p - y) * logit, p * (1 - p) * logit ** 2
    n_eff = w.sum() ** 2 / np.sum(w * w)
    assert r.n_eff == pytest.approx(n_eff, rel=1e-12, abs=0)
    assert r.ecd == pytest.approx(np.sum(w * t) / w.sum(), rel=1e-12, abs=0)
    z = np.sum(w * t) / np.sqrt(np.sum(w * var) * np.sum(w * w) / w.sum())
    assert r.ecd_z == pytest.approx(z, rel=1e-12, abs=0)
    k = 3
    in_k = b == k
    z_k = np.sum((w * t)[in_k]) / np.sqrt(np.sum((w * var)[in_k]) * np.sum(w[in_k] ** 2)
                                          / w[in_k].sum())
    assert r.bins["ecd_z"][k] == pytest.approx(z_k, rel=1e-12, abs=0)
    d = r.to_dict()
    assert d["weight_sum"] == pytest.approx(w.sum()) and d["n_eff"] == pytest.approx(n_eff)
    assert d["bins"][k]["weight"] == pytest.approx(mass[k])
    assert "Effective rows" in str(r) or "effective rows" in str(r)
    assert "weight_sum" not in fastcal.calibration_report(y, p, ace=False).to_dict()


def test_function_metrics_and_ecce_take_weights():
    y, p = _binary(12)
    w = np.random.default_rng(13).integers(0, 3, y.shape[0])
    yr, pr = np.repeat(y, w), np.repeat(p, w)
    for fn in (fastcal.ece, fastcal.esce, fastcal.mce, fastcal.ecd):
        assert fn(y, p, sample_weight=w) == pytest.approx(fn(yr, pr), rel=1e-12, abs=1e-15)
    assert fastcal.ece(y, p, sample_weight=w, norm="l2") == pytest.approx(
        fastcal.ece(yr, pr, norm="l2"), rel=1e-12)
    r = fastcal.calibration_report(y, p, sample_weight=w, metrics=("ecce",))
    assert (r.ecce, r.ecce_sigma, r.ecce_pvalue) == tuple(fastcal.ecce(y, p, sample_weight=w))


BAD = [
    (lambda n: np.r_[np.ones(n - 3), -1.0, 2.0, -0.5],
     r"^sample_weight has 2 negative values \(first at index 397: -1\.0\); weights must be "
     r"finite and >= 0$"),
    (lambda n: np.r_[np.ones(5), np.nan, np.ones(n - 6)],
     r"^sample_weight has 1 NaN values \(first at index 5: nan\)"),
    (lambda n: np.r_[np.inf, np.ones(n - 1)], r"^sample_weight has 1 infinite values \(first "
                                              r"at index 0: inf\)"),
    (lambda n: np.zeros(n), r"^sample_weight is 0 in all 400 rows; at least one weight must"),
    (lambda n: np.ones(n - 1), r"^sample_weight has 399 weights; y_prob has 400 rows \(one "
                               r"weight per row\)$"),
    (lambda n: np.ones((n, 2)), r"^sample_weight must be 1-D with one weight per sample; got "
                                r"shape \(400, 2\)$"),
    (lambda n: np.array(["1"] * n), r"^sample_weight must hold numbers; got dtype <U1$"),
]


@pytest.mark.parametrize(("weights", "message"), BAD)
def test_bad_weights_refused_in_one_line(weights, message):
    y, p = _binary()
    w = weights(y.shape[0])
    with pytest.raises(ValueError, match=message):
        fastcal.calibration_report(y, p, sample_weight=w)
    acc = CalibrationAccumulator()
    with pytest.raises(ValueError, match=message):
        acc.update(y, p, sample_weight=w)
    assert acc.n_rows == 0 and not acc.weighted


@pytest.mark.parametrize(("options", "message"), [
    (dict(ace=True), r"^sample_weight cannot be combined with ace=True: ACE's equal-mass bins "
                     r"rank rows, not weights; pass ace=False$"),
    (dict(strategy="quantile"), r"^sample_weight cannot be combined with strategy='quantile'"),
    (dict(smooth=True), r"^sample_weight cannot be combined with smooth ECE"),
    (dict(metrics=("ece_sweep",)), r"^sample_weight cannot be combined with metrics "
                                   r"'ece_sweep'"),
])
def test_measures_without_weights_refused(options, message):
    y, p = _binary()
    with pytest.raises(ValueError, match=message):
        fastcal.calibration_report(y, p, sample_weight=np.ones(y.shape[0]), **options)


def test_accumulator_refuses_weights_with_unweighted_parts_and_soft_labels():
    y, p = _binary()
    w = np.ones(y.shape[0])
    with pytest.raises(ValueError, match=r"^sample_weight cannot be combined with smooth=True: "):
        CalibrationAccumulator(smooth=True).update(y, p, sample_weight=w)
    t = np.column_stack([1.0 - p, p])
    with pytest.raises(ValueError, match=r"^sample_weight: soft labels .* take no weights"):
        CalibrationAccumulator().update(t, t, sample_weight=w)
    with pytest.raises(ValueError, match=r"^sample_weight is 0 in all 2 rows left after "):
        fastcal.calibration_report([0, 1, 1], [0.2, np.nan, 0.4], sample_weight=[0, 1, 0],
                                   nan_policy="omit")


@pytest.fixture(scope="module")
def weighted_file(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    y, p = _binary(14, 700)
    w = np.random.default_rng(15).gamma(0.6, 2.0, y.shape[0])
    w[3] = 0.0
    path = tmp_path_factory.mktemp("weights") / "pred.parquet"
    pq.write_table(pa.table({"p": p, "y": y, "w": w}), path, row_group_size=128)
    return str(path), y, p, w


def test_file_weight_column_equals_arrays(weighted_file):
    from fastcal.files import score_file

    path, y, p, w = weighted_file
    ref = fastcal.calibration_report(y, p, sample_weight=w, ci=0.9, n_boot=0)
    got = score_file(path, weight="w", chunk_rows=97, ci=0.9, n_boot=0)
    _close(got, ref, (*SCALARS, "ecd_z", "ece_debiased", "n_eff", "weight_sum"))
    for name in ("ecd", "brier", "nll"):
        np.testing.assert_allclose(got.intervals[name], ref.intervals[name], rtol=1e-12)
    assert got.n == ref.n == y.shape[0]


def test_cli_weight_column(weighted_file, capsys):
    import json

    from fastcal.cli import main

    path, y, p, w = weighted_file
    ref = fastcal.calibration_report(y, p, sample_weight=w)
    assert main(["score", path, "--prob", "p", "--label", "y", "--weight", "w", "--json",
                 "--quiet", "--chunk-rows", "200"]) == 0
    got = json.loads(capsys.readouterr().out)
    for name in ("ece", "ecd", "brier", "nll", "weight_sum", "n_eff"):
        assert got[name] == pytest.approx(getattr(ref, name), rel=1e-12, abs=0), name
    assert main(["score", path, "--prob", "p", "--label", "y", "--weight", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'nope'" in err and "'w'" in err


def test_bad_weight_in_a_file_named_by_file_column_and_global_row(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastcal.cli import main

    w = np.ones(500)
    w[300] = -2.0
    path = str(tmp_path / "bad.parquet")
    pq.write_table(pa.table({"p": np.linspace(0, 1, 500), "y": np.arange(500) % 2, "w": w}),
                   path)
    assert main(["score", path, "--prob", "p", "--label", "y", "--weight", "w", "--quiet",
                 "--chunk-rows", "128"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.parquet: weight column 'w' has 1 negative values " \
        "(first at row 300: -2.0)" in err
    assert main(["score", path, "--prob", "p", "--label", "y", "--weight", "w", "--ace"]) == 2
    assert "--weight cannot be combined with --ace: ACE's equal-mass bins rank rows, not " \
        "weights; drop --ace" in capsys.readouterr().err
    acc = CalibrationAccumulator().update([0, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match=r"first at index 3: -1\.0"):
        acc.update([0, 1], [0.2, 0.3], sample_weight=[1.0, -1.0])


def test_accumulator_weighted_from_the_start_has_fixed_arrays():
    """weighted=True: the weighted sums are part of to_arrays before any data (what a
    framework reducing arrays by name needs); unweighted rows weigh 1."""
    y, p = _binary(16, 200)
    w = np.random.default_rng(17).random(200)
    acc = CalibrationAccumulator(weighted=True)
    names = set(acc.to_arrays())
    assert {"wsums", "wtotals"} <= names
    acc.update(y[:50], p[:50]).update(y[50:], p[50:], sample_weight=w[50:])
    assert set(acc.to_arrays()) == names
    ref = CalibrationAccumulator().update(y, p, sample_weight=np.r_[np.ones(50), w[50:]])
    _close(acc.report(), ref.report())
    with pytest.raises(ValueError, match=r"^weighted=True cannot be combined with ace_buckets="
                                         r"64: ACE's value buckets do not take weights"):
        CalibrationAccumulator(weighted=True, ace_buckets=64)


def test_torch_metric_takes_weights():
    torch = pytest.importorskip("torch")
    from fastcal.torch import CalibrationMetric

    y, p = _binary(18, 300)
    w = np.random.default_rng(19).gamma(0.6, 2.0, 300)
    ref = fastcal.calibration_report(y, p, sample_weight=w)
    metric = CalibrationMetric(weighted=True)
    for a, b in ((0, 120), (120, 300)):
        metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]),
                      torch.from_numpy(w[a:b]))
    _close(metric.report(), ref)
    assert float(metric.compute()) == pytest.approx(ref.ece, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match=r"^sample_weight needs the weighted sums in the "
                                         r"metric's state: make it with CalibrationMetric"):
        CalibrationMetric().update(torch.from_numpy(p), torch.from_numpy(y), torch.ones(300))


def test_torch_metric_with_weights_intervals_and_unweighted_batches():
    """Batches with and without weights, the bootstrap replicates on, forward's
    batch values: the metric's state is the accumulator's of the same batches."""
    torch = pytest.importorskip("torch")
    from fastcal.torch import CalibrationMetric

    y, p = _binary(20, 300)
    w = np.random.default_rng(21).gamma(0.6, 2.0, 300)
    ref = CalibrationAccumulator(weighted=True, n_boot=30, seed=4)
    metric = CalibrationMetric(weighted=True, ci=0.9, n_boot=30, seed=4)
    for a, b, weights in ((0, 100, w[:100]), (100, 180, None), (180, 300, w[180:])):
        ref.update(y[a:b], p[a:b], sample_weight=weights)
        batch = fastcal.calibration_report(y[a:b], p[a:b], sample_weight=weights)
        tw = None if weights is None else torch.from_numpy(weights)
        value = metric(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]), tw)
        assert float(value) == pytest.approx(batch.ece, rel=1e-12, abs=0)
    got, want = metric.report(), ref.report(ci=0.9)
    _close(got, want)
    for name in want.intervals:
        np.testing.assert_allclose(got.intervals[name], want.intervals[name], rtol=1e-12,
                                   atol=1e-15, err_msg=name)


def test_dask_functions_take_weights(weighted_file):
    """Arrays, a dataframe and a Parquet dataset on Dask (its default local scheduler)
    give the report of the arrays in memory."""
    pytest.importorskip("distributed")
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    from fastcal import distributed as fd

    path, y, p, w = weighted_file
    ref = fastcal.calibration_report(y, p, sample_weight=w)
    names = (*SCALARS, "ecd_z", "n_eff", "weight_sum")
    _close(fd.score_dask(da.from_array(y, chunks=150), da.from_array(p, chunks=150),
                         sample_weight=da.from_array(w, chunks=100)), ref, names)
    frame = dd.from_pandas(pd.DataFrame({"p": p, "y": y, "w": w}), npartitions=3)
    _close(fd.score_dataframe(frame, weight="w"), ref, names)
    _close(fd.score_dataset(path, weight="w", rows_per_partition=200), ref, names)
    with pytest.raises(ValueError, match=r"^sample_weight has 1 negative values \(first at index "
                                         r"7: -1\.0\);.* \[in chunk 0 of 5, rows 0-149\]$"):
        bad = w.copy()
        bad[7] = -1.0
        fd.score_dask(da.from_array(y, chunks=150), da.from_array(p, chunks=150),
                      sample_weight=da.from_array(bad, chunks=150))
    # measures without weights: refused in the API's words before any partition is filled
    with pytest.raises(ValueError, match=r"^sample_weight cannot be combined with ace=True: "):
        fd.score_dataframe(frame, weight="w", ace=True)


def test_threaded_weighted_fill_equals_one_thread():
    from fastcal.backends.cpu import PARALLEL_MIN_ROWS

    y, p = _binary(20, PARALLEL_MIN_ROWS)
    w = np.random.default_rng(21).random(y.shape[0])
    one = CalibrationAccumulator(threads=1).update(y, p, sample_weight=w)
    two = CalibrationAccumulator(threads=2).update(y, p, sample_weight=w)
    np.testing.assert_array_equal(two.counts, one.counts)
    _close(two.report(), one.report(), (*SCALARS, "ecd_z", "n_eff", "weight_sum"))


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_bootstrap_of_weighted_rows(kind):
    """Poisson(1) x w: weights 1 with a last row of weight 0 (the weighted kernel) give
    the replicates of the other rows unweighted (the same draws: a row's draw hangs on
    its global row), and chunks with their offsets give those of one pass."""
    make, _ = DATA[kind]
    y, p = make(22, 300)
    w = np.ones(300)
    w[-1] = 0.0
    got = CalibrationAccumulator(n_boot=40, seed=3).update(y, p, sample_weight=w)
    ref = CalibrationAccumulator(n_boot=40, seed=3).update(y[:-1], p[:-1])
    np.testing.assert_allclose(got.wboot_counts, ref.boot_counts, rtol=0, atol=0)
    np.testing.assert_allclose(got.wboot_sums, ref.boot_sums, rtol=1e-12, atol=0)
    for name in ("ece", "esce", "mce"):
        np.testing.assert_allclose(got.report(ci=0.9).intervals[name],
                                   ref.report(ci=0.9).intervals[name], rtol=1e-12, atol=1e-15)
    v = np.random.default_rng(23).gamma(0.6, 2.0, 300)
    one = CalibrationAccumulator(n_boot=40, seed=3).update(y, p, sample_weight=v)
    parts = sum(CalibrationAccumulator(n_boot=40, seed=3).update(
        y[a:b], p[a:b], sample_weight=v[a:b], start=a) for a, b in ((0, 110), (110, 300)))
    np.testing.assert_allclose(parts.wboot_counts, one.wboot_counts, rtol=1e-12, atol=0)
    for name in ("ece", "esce", "mce", "ecd", "brier"):
        np.testing.assert_allclose(parts.report(ci=0.9).intervals[name],
                                   one.report(ci=0.9).intervals[name], rtol=1e-12, atol=1e-15)
    r = fastcal.calibration_report(y, p, sample_weight=v, ci=0.9, n_boot=40, seed=3)
    assert r.intervals["ece"] == one.report(ci=0.9).intervals["ece"]

"""ECCE (Arrieta-Ibarra et al., 2022): against MCGrad's functions and a sorted
reference, ties as one step, exact over chunks, files and Dask, and bad weights."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.accumulators import ecce as ec
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.reports.stats import ecce_pvalue


@pytest.fixture(scope="module")
def mcgrad():
    from mcgrad import metrics

    return metrics


def _data(n, seed, shift=0.0, lo=0.0, width=1.0):
    """Tie-free probabilities in [lo, lo + width) (beta-shaped), labels drawn at p +
    shift (shift 0: calibrated)."""
    rng = np.random.default_rng(seed)
    p = np.unique(lo + width * rng.beta(2.0, 3.0, n))
    p = p[rng.permutation(p.shape[0])]
    y = (rng.random(p.shape[0]) < np.clip(p + shift, 0.0, 1.0)).astype(np.int64)
    return y, p


def _reference(y, p, w=None):
    """(ecce, ecce_sigma) by sorting: C after each run of equal p, and C_0 = 0."""
    y = np.asarray(y, np.float64)
    w = np.ones_like(p) if w is None else np.asarray(w, np.float64)
    order = np.argsort(p, kind="stable")
    y, p, w = y[order], p[order], w[order]
    c = np.concatenate([[0.0], np.cumsum(w * (y - p))]) / w.sum()
    ends = np.flatnonzero(np.r_[True, p[1:] != p[:-1], True])  # run ends, as prefix lengths
    value = np.ptp(c[ends])
    return value, value / (np.sqrt(np.sum(w * w * p * (1.0 - p))) / w.sum())


def _mcgrad(m, y, p, w=None):
    return m.ecce(y, p, w), m.ecce_sigma(y, p, w), m.ecce_pvalue(y, p, w)


def _close(got, ref):
    """ecce and ecce_sigma to 1e-12 relative, the p-value to 1e-12 relative or 1e-15
    absolute (MCGrad's 1 - CDF carries absolute rounding of about 1e-16)."""
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-12, atol=0)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shift", [0.0, 0.03])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_mcgrad_on_tie_free_data(mcgrad, shift, weighted):
    y, p = _data(20_000, 1, shift)
    w = np.random.default_rng(2).gamma(0.5, 2.0, p.shape[0]) if weighted else None
    got = fastcal.ecce(y, p, sample_weight=w)
    _close(got, _mcgrad(mcgrad, y, p, w))
    assert got == (got.ecce, got.ecce_sigma, got.ecce_pvalue)


@pytest.mark.parametrize("weighted", [False, True])
def test_crowded_buckets_are_gathered_and_cut_exactly(mcgrad, weighted):
    # 60,000 rows in [0.01, 0.02) (about 90 a bucket: gathered), and 300,000 rows in one
    # bucket (more than GATHER_MAX: cut into ranges of bit patterns, then gathered)
    for n, lo, width in ((60_000, 0.01, 0.01), (300_000, 0.5, 2.0 ** -17)):
        y, p = _data(n, 3, 0.002, lo, width)
        w = np.random.default_rng(4).random(p.shape[0]) if weighted else None
        rep = fastcal.calibration_report(y, p, ace=False, metrics=("ecce",))
        got = fastcal.ecce(y, p, sample_weight=w)
        _close(got, _mcgrad(mcgrad, y, p, w))
        if not weighted:
            assert (rep.ecce, rep.ecce_sigma, rep.ecce_pvalue) == tuple(got)
            assert dict(rep.pass_steps)["ecce"] == (1 if n == 60_000 else 2)


def test_ties_are_one_step_whatever_the_order_of_tied_rows():
    y, p = _data(30_000, 5, 0.02)
    p = np.round(p, 3)  # about 30 rows per value
    w = np.random.default_rng(6).random(p.shape[0])
    ref, ref_sigma = _reference(y, p, w)
    for seed in (0, 1):
        order = np.random.default_rng(seed).permutation(p.shape[0])
        got = fastcal.ecce(y[order], p[order], sample_weight=w[order])
        np.testing.assert_allclose(got[:2], (ref, ref_sigma), rtol=1e-12)
    # every row at one value: C is taken only at both ends
    got = fastcal.ecce(np.array([1, 0, 1, 1]), np.full(4, 0.5))
    assert got.ecce == pytest.approx(0.25, rel=1e-15, abs=0)


def test_logits_top_label_and_omitted_rows(mcgrad):
    y, p = _data(5_000, 7, 0.05)
    z = np.log(p / (1.0 - p))
    _close(fastcal.ecce(y, z, logits=True), fastcal.ecce(y, 1.0 / (1.0 + np.exp(-z))))
    rng = np.random.default_rng(8)
    P = rng.dirichlet(np.ones(3), 4_000)
    k = rng.integers(0, 3, 4_000)
    conf, correct = P.max(axis=1), (P.argmax(axis=1) == k).astype(np.int64)
    _close(fastcal.ecce(k, P), _mcgrad(mcgrad, correct, conf))
    w = rng.random(p.shape[0])
    q = p.copy()
    q[[3, 70, 4_000]] = np.nan
    keep = ~np.isnan(q)
    _close(fastcal.ecce(y, q, sample_weight=w, nan_policy="omit"),
           _mcgrad(mcgrad, y[keep], p[keep], w[keep]))


def test_integer_weights_repeat_rows_and_ones_are_no_weights():
    y, p = _data(3_000, 9, 0.03)
    w = np.random.default_rng(10).integers(0, 4, p.shape[0])
    weighted, repeated = fastcal.ecce(y, p, sample_weight=w), fastcal.ecce(np.repeat(y, w),
                                                                             np.repeat(p, w))
    assert weighted.ecce == pytest.approx(repeated.ecce, rel=1e-12, abs=0)
    # sigma is MCGrad's, sqrt(sum w^2 p (1 - p)) / W (importance weights): a repeated row
    # adds w p (1 - p), a weighted one w^2 p (1 - p)
    sigma = np.sqrt(np.sum(w * w * p * (1 - p))) / w.sum()
    assert weighted.ecce_sigma == pytest.approx(weighted.ecce / sigma, rel=1e-12, abs=0)
    assert fastcal.ecce(y, p, sample_weight=np.ones(p.shape[0])) == fastcal.ecce(y, p)


def test_the_same_from_chunks_files_and_dask(tmp_path):
    import dask.array as da

    from fastcal.distributed import score_dask, score_dataset

    y, p = _data(40_000, 11, 0.01, 0.2, 0.05)  # crowded buckets: the second pass runs
    ref = fastcal.ecce(y, p)
    path = tmp_path / "pred.parquet"
    pq.write_table(pa.table({"p": p, "y": y}), path, row_group_size=7_000)
    got = [fastcal.score_file(path, metrics=("ecce",), chunk_rows=4_321),
           fastcal.score_file(path, metrics=("ecce",), chunk_rows=40_000),
           score_dask(da.from_array(y, chunks=6_000), da.from_array(p, chunks=6_000),
                      metrics=("ecce",)),
           score_dataset(str(path), metrics=("ecce",), rows_per_partition=9_000)]
    for rep in got:
        _close((rep.ecce, rep.ecce_sigma, rep.ecce_pvalue), ref)
        assert rep.to_dict()["ecce"] == rep.ecce
    # a weight column: each pass reads it with the rows
    w = np.random.default_rng(12).uniform(0.0, 3.0, p.shape[0])
    pq.write_table(pa.table({"p": p, "y": y, "w": w}), path, row_group_size=7_000)
    rep = fastcal.score_file(path, weight="w", metrics=("ecce",), chunk_rows=4_321)
    _close((rep.ecce, rep.ecce_sigma, rep.ecce_pvalue), fastcal.ecce(y, p, sample_weight=w))
    cuts = [0, 1, 9_999, 25_000, 40_000]
    parts = [CalibrationAccumulator(ecce=True).update(y[a:b], p[a:b]) for a, b in
             zip(cuts, cuts[1:])]
    whole = CalibrationAccumulator(ecce=True).update(y, p)
    merged = sum(reversed(parts))
    np.testing.assert_array_equal(merged.ecce_counts, whole.ecce_counts)
    np.testing.assert_allclose(merged.ecce_sums, whole.ecce_sums, rtol=1e-12, atol=1e-12)
    arrays = merged.to_arrays()
    assert arrays["ecce_sums"].shape == (ec.BUCKETS + 1, 3)
    with pytest.raises(ValueError, match=r"with and without ECCE's value buckets \(ecce=True"):
        parts[0] + CalibrationAccumulator().update(y[:5], p[:5])


def test_report_fields_only_when_asked_for():
    y, p = _data(2_000, 12)
    rep = fastcal.calibration_report(y, p)
    assert np.isnan(rep.ecce) and "ecce" not in rep.to_dict()
    assert CalibrationAccumulator().ecce_state() is None
    rep = fastcal.calibration_report(y, p, metrics=("ecce",))
    assert rep.to_dict()["ecce_pvalue"] == rep.ecce_pvalue
    assert f"ECCE = {rep.ecce:.4f} ({rep.ecce_sigma:.2f} standard deviations" in rep.to_markdown()


def test_pvalue_is_the_range_of_a_brownian_motion(mcgrad):
    xs = np.array([1e-3, 0.3, 0.8, 1.0, 1.5, 1.999, 2.0, 2.5, 3.0, 4.0])
    got = np.array([ecce_pvalue(x) for x in xs])
    np.testing.assert_allclose(got, mcgrad.ecce_pvalue_from_sigma(xs), rtol=1e-12, atol=1e-15)
    # the tail series stays accurate where 1 - CDF has no digits left: Feller's density
    # 8 sum (-1)^(k-1) k^2 phi(k r) integrated from 8 to 40
    r = np.linspace(8.0, 40.0, 400_001)
    k = np.arange(1, 6)[:, None]
    dens = 8.0 * np.sum((-1.0) ** (k - 1) * k ** 2 * np.exp(-0.5 * (k * r) ** 2), axis=0)
    tail = np.trapezoid(dens, r) / np.sqrt(2.0 * np.pi)
    assert ecce_pvalue(8.0) == pytest.approx(tail, rel=1e-6, abs=0)
    assert ecce_pvalue(0.0) == 1.0 and ecce_pvalue(np.inf) == 0.0


@pytest.mark.parametrize("w, message", [
    (lambda n: np.r_[np.ones(n - 2), -1.0, -2.0],
     r"^sample_weight has 2 negative values \(first at index 1998: -1\.0\); weights must be "
     r"finite and >= 0$"),
    (lambda n: np.r_[np.ones(5), np.nan, np.ones(n - 6)],
     r"^sample_weight has 1 NaN values \(first at index 5: nan\)"),
    (lambda n: np.r_[np.inf, np.ones(n - 1)],
     r"^sample_weight has 1 infinite values \(first at index 0: inf\)"),
    (lambda n: np.zeros(n), r"^sample_weight is 0 in all 2000 rows; at least one weight must"),
    (lambda n: np.ones(n - 1),
     r"^sample_weight has 1999 weights; y_prob has 2000 rows \(one weight per row\)$"),
    (lambda n: np.ones((n, 1)), r"^sample_weight must be 1-D with one weight per sample"),
])
def test_bad_weights_get_one_line(w, message):
    y, p = _data(2_000, 13)
    with pytest.raises(ValueError, match=message):
        fastcal.ecce(y, p, sample_weight=w(p.shape[0]))


def test_soft_labels_are_refused_in_one_line():
    # label distributions have no ECCE: the report used to come back without it, silently
    with pytest.raises(ValueError, match=r"^ECCE takes hard labels \(0/1, or a class per "
                                         r"row\); soft labels"):
        fastcal.calibration_report(np.array([[0.2, 0.8], [1.0, 0.0]]),
                                   np.array([[0.3, 0.7], [0.9, 0.1]]), metrics=("ecce",))


def test_weights_of_the_rows_left_all_zero_get_one_line():
    p = np.array([0.2, np.nan, 0.7])
    with pytest.raises(ValueError, match=r"^sample_weight is 0 in all 2 rows left after "):
        fastcal.ecce(np.array([0, 1, 1]), p, sample_weight=[0.0, 1.0, 0.0], nan_policy="omit")


def test_exact_reads_nan_without_weight():
    state = (np.zeros(ec.BUCKETS + 1, np.int64), np.zeros((ec.BUCKETS + 1, 3)), np.zeros(2))
    assert all(np.isnan(v) for v in ec.exact(*state, None)[:3])


# MCGrad 0.1.5 sorts its frame with sort_values(inplace=True) and reset_index(inplace=True),
# which pandas 3.1 deprecates (not ours to fix)
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame")
@pytest.mark.parametrize("weighted", [False, True])
def test_segments_in_the_same_passes_equal_mcgrad_and_its_multicalibration_error(
        mcgrad, weighted):
    import pandas as pd

    from fastcal.accumulators.equal_mass import ArrayParts
    from fastcal.reports.stats import multicalibration_error

    y, p = _data(30_000, 14)
    rng = np.random.default_rng(15)
    g = rng.integers(0, 6, p.shape[0])
    g[:40] = 6  # a segment of 40 rows: below min_rows
    y = np.where(g == 2, (rng.random(p.shape[0]) < np.clip(p + 0.04, 0, 1)), y).astype(float)
    w = rng.random(p.shape[0]) if weighted else None
    parts = ec.RowParts(ArrayParts(y, p, 2), w, g)
    state = ec.segment_state(parts, 7, n_buckets=64)  # about 70 rows a bucket: gathered
    ecce, scaled, pvalue, passes = ec.exact(*state, parts)
    assert passes == 1
    for k in range(7):
        rows = g == k
        _close((ecce[k], scaled[k], pvalue[k]),
               _mcgrad(mcgrad, y[rows], p[rows], None if w is None else w[rows]))
    whole = ec.bucket_state(parts)
    _, whole_sigma, _, _ = ec.exact(*whole, parts)
    total_w, total_v = whole[2]
    prevalence = (y.mean() if w is None else (w * y).sum() / w.sum())
    got = multicalibration_error(np.r_[whole_sigma, scaled], np.sqrt(total_v) / total_w,
                                 np.r_[p.shape[0], np.bincount(g)], prevalence=prevalence,
                                 min_rows=100)
    frame = pd.DataFrame({"y": y, "p": p, "g": g, "w": np.ones_like(p) if w is None else w})
    ref = mcgrad.MulticalibrationError(
        frame, "y", "p", weight_column=None if w is None else "w",
        categorical_segment_columns=["g"], max_depth=1, max_values_per_segment_feature=100,
        min_samples_per_segment=100, precision_dtype="float64")
    np.testing.assert_allclose([got.mce_sigma, got.mce, got.mce_relative, got.mde,
                                got.mde_relative],
                               [ref.mce_sigma, ref.mce, ref.mce_relative, ref.mde,
                                ref.mde_relative], rtol=1e-12)
    np.testing.assert_allclose(got.mce_pvalue, ref.mce_pvalue, rtol=1e-12, atol=1e-15)
    assert (got.segment, got.n_tested) == (1 + 2, 7)  # segment 2 (0 is the whole), 6 of 7


def test_crowded_segments_are_cut_in_the_same_passes():
    # 280,000 rows in one value bucket: segment 0 holds 272,000 of them, more than
    # GATHER_MAX, so its bucket is cut into ranges of bit patterns; segment 1's is gathered
    from fastcal.accumulators.equal_mass import ArrayParts

    y, p = _data(280_000, 16, 0.002, 0.5, 2.0 ** -17)
    g = (np.arange(p.shape[0]) % 35 == 0).astype(np.int64)
    parts = ec.RowParts(ArrayParts(y, p, 2), None, g)
    ecce, scaled, _, passes = ec.exact(*ec.segment_state(parts, 2), parts)
    assert passes == 2
    for k in range(2):
        np.testing.assert_allclose((ecce[k], scaled[k]), _reference(y[g == k], p[g == k]),
                                   rtol=1e-12)


def test_segments_of_many_rows_get_buckets_of_about_16_to_32_rows():
    # rows known up front (arrays): more buckets, so the extremes lie in smaller ones
    assert ec.segment_buckets(100) == ec.segment_buckets(100, 10**5) == 1024
    assert ec.segment_buckets(100, 10**7) == 4096  # 1e5 rows a segment: 24 a bucket
    assert ec.segment_buckets(1, 10**9) == 1 << 14  # at most 2**14 a segment
    assert ec.segment_buckets(10**4, 10**9) == ec.segment_buckets(10**4)  # the cells' bound


def test_many_segments_share_fewer_buckets_and_keep_their_values(monkeypatch):
    # the segments' buckets together are bounded (SEGMENT_CELLS): more segments get
    # fewer buckets each, so more rows are gathered, and the same values
    monkeypatch.setattr(ec, "SEGMENT_CELLS", 64)
    assert [ec.segment_buckets(s) for s in (1, 2, 4, 5, 10**6)] == [64, 32, 16, 16, 16]
    assert ec.segment_buckets(4, 10**9) == 16  # many rows: still within the cells' bound
    y, p = _data(6_000, 17, 0.03)
    g = np.random.default_rng(18).integers(0, 4, p.shape[0])
    r = fastcal.calibration_report(y, p, by=g, metrics=("ecce",))
    for k in range(4):
        ref = fastcal.ecce(y[g == k], p[g == k])
        np.testing.assert_allclose((r[k].ecce, r[k].ecce_sigma, r[k].ecce_pvalue), ref,
                                   rtol=1e-12)
        assert ("ecce", 2) in r[k].pass_steps  # the bucket pass and one search pass


def test_segment_buckets_fold_and_merge_by_key(monkeypatch):
    # a segmented accumulator's ECCE buckets: filled chunk by chunk, merged by key in
    # any order, halved as keys come past SEGMENT_CELLS, equal to one state of all rows
    from fastcal.accumulators.equal_mass import ArrayParts
    from fastcal.accumulators.segmented import SegmentedAccumulator

    monkeypatch.setattr(ec, "SEGMENT_CELLS", 256)
    monkeypatch.setattr(ec, "SEGMENT_BUCKETS", 64)
    y, p = _data(9_000, 19, 0.02)
    g = np.random.default_rng(20).integers(0, 12, p.shape[0])
    g[:3_000] %= 3  # the first chunk brings 3 keys (64 buckets), the rest 12 (16)
    cuts = [0, 3_000, 6_000, 9_000]
    accs = [SegmentedAccumulator(ecce=True).update(y[a:b], p[a:b], by=g[a:b])
            for a, b in zip(cuts, cuts[1:])]
    assert [a._ecce.n_buckets for a in accs] == [64, 16, 16]
    merged = accs[0] + accs[2] + accs[1]
    (counts, sums, totals), whole = merged.ecce_state()
    keys = list(merged.keys())
    assert merged._ecce.n_buckets == 16 and sorted(keys) == list(range(12))
    ref = ec.segment_state(ec.RowParts(ArrayParts(y, p, 1), None, g), 12, 16)
    order = np.array(keys)
    np.testing.assert_array_equal(counts, ref[0][order])
    np.testing.assert_allclose(sums, ref[1][order], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(totals, ref[2][order], rtol=1e-12)
    np.testing.assert_array_equal(whole[0], ref[0].sum(axis=0))
    parts = ec.RowParts(ArrayParts(y, p, 1), None, merged.ecce_rows()(g, g.shape[0]))
    values = ec.exact(counts, sums, totals, parts)
    for k, key in enumerate(keys):
        np.testing.assert_allclose(values[1][k], _reference(y[g == key], p[g == key])[1],
                                   rtol=1e-12)
    # the segments' and the whole's searches share their passes, with the same values
    alone = ec.exact(*whole, parts)
    both = ec.exact_all([(counts, sums, totals), whole], parts)
    assert both[1][3] == both[0][3] == max(alone[3], values[3]) >= 1
    np.testing.assert_array_equal(both[0][1], values[1])
    assert both[1][:3] == alone[:3]
    np.testing.assert_allclose(alone[:2], _reference(y, p), rtol=1e-12)
    with pytest.raises(ValueError, match=r"^the data changed between passes: segment 99 "):
        merged.ecce_rows()(np.array([3, 99]), 2)
    with pytest.raises(ValueError, match=r"^can only merge segmented accumulators that both "):
        merged + SegmentedAccumulator().update(y[:5], p[:5], by=g[:5])


def test_many_rows_at_few_values_keep_their_digits():
    # p on tenths: 10 (y - p) is an integer, so the running sums at the value ends are
    # exact in integers; the bucket sums of y - p keep ECCE to 1e-12 of them (here 4e-13;
    # the rise minus the fall, both near 15,000 in a bucket, was 2.7e-11 off)
    rng = np.random.default_rng(2)
    k = rng.integers(0, 11, 300_000)
    y = (rng.random(k.shape[0]) < k / 10).astype(np.int64)
    steps = np.bincount(k, weights=10 * y - k, minlength=11).astype(np.int64)
    ends = np.concatenate([[0], np.cumsum(steps)])
    exact = (ends.max() - ends.min()) / (10 * k.shape[0])
    assert fastcal.ecce(y, k / 10).ecce == pytest.approx(exact, rel=1e-12, abs=0)

"""Reports by segment (``by=``): each segment's report is that of its rows alone, the
accumulators merge by key in any order, nulls are a segment, the Holm and BH
corrections, files and the command line, and MCGrad's multicalibration error."""

import json
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import fastcal
from fastcal.accumulators.segmented import SegmentedAccumulator
from fastcal.reports.segmented import adjust_pvalues

SCALARS = ("ece", "esce", "mce", "ace", "ecd", "ecd_z", "brier", "nll")
N = 3_000
KEYS = np.array(["DE", "FR", "IT", "NL", "PL"])


def _close(got, ref, names=SCALARS):
    for name in names:
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12, atol=0,
                                   err_msg=name)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    assert got.n == ref.n


@pytest.fixture(scope="module")
def data():
    """Binary and K = 3 predictions, weights, a country per row (one over-confident),
    a second key column, and the segmented report of each."""
    rng = np.random.default_rng(0)
    g = KEYS[rng.integers(0, len(KEYS), N)]
    h = rng.integers(0, 2, N)
    p = rng.beta(2.0, 3.0, N)
    truth = np.where(g == "FR", 0.5 + 0.4 * (p - 0.5), p)  # FR: over-confident
    y = (rng.random(N) < truth).astype(np.int64)
    z = 1.5 * rng.normal(size=(N, 3))
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    c = np.array([rng.choice(3, p=row) for row in P])
    w = rng.random(N) * 3
    return dict(y=y, p=p, g=g, h=h, P=P, c=c, w=w)


CASES = {
    "binary": lambda d: ((d["y"], d["p"]), {}),
    "classes": lambda d: ((d["c"], d["P"]), {}),
    "weighted": lambda d: ((d["y"], d["p"]), {"sample_weight": d["w"]}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_segment_is_the_report_of_its_rows_alone(data, case):
    (y, p), kw = CASES[case](data)
    g = data["g"]
    r = fastcal.calibration_report(y, p, by=g, **kw)
    assert sorted(r.keys()) == sorted(KEYS.tolist()) and len(r) == len(KEYS)
    assert list(r) == list(r.keys())
    for key in KEYS:
        rows = g == key
        part = {k: v[rows] for k, v in kw.items()}
        _close(r[key], fastcal.calibration_report(y[rows], p[rows], **part))
    _close(r.overall, fastcal.calibration_report(y, p, **kw))


def test_several_columns_are_the_pairs(data):
    y, p, g, h = data["y"], data["p"], data["g"], data["h"]
    r = fastcal.calibration_report(y, p, by=[g, h], metrics=("ecce",))
    assert len(r) == 2 * len(KEYS)
    for key, hk in [(k, j) for k in KEYS for j in (0, 1)]:
        rows = (g == key) & (h == hk)
        _close(r[(str(key), hk)], fastcal.calibration_report(y[rows], p[rows],
                                                              metrics=("ecce",)),
               SCALARS + ("ecce", "ecce_sigma"))


def test_nulls_are_a_segment_of_their_own():
    rng = np.random.default_rng(3)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    g = np.array(["a", None, "b", float("nan")] * 75, dtype=object)
    r = fastcal.calibration_report(y, p, by=g)
    assert list(r.keys()) == ["a", "b", None]
    assert [r[k].n for k in r] == [75, 75, 150]
    _close(r[None], fastcal.calibration_report(y[1::2], p[1::2]))
    f = np.where(np.arange(300) % 3 == 0, np.nan, np.arange(300) % 3)
    assert {k: r2.n for k, r2 in fastcal.calibration_report(y, p, by=f).items()} == {
        1.0: 100, 2.0: 100, None: 100}


def test_keys_of_pandas_pyarrow_and_polars_keep_their_type_and_nulls():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(4)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    ints, texts = [1, 2, None, 3] * 50, ["a", "b", None, "c"] * 50
    for by in (pd.Series(ints, dtype="Int64"), pa.array(ints), pl.Series(ints)):
        assert list(fastcal.calibration_report(y, p, by=by, ace=False).keys()) == [1, 2, 3, None]
    for by in (pd.Series(texts, dtype="string"), pd.Series(texts, dtype="category"),
               pa.chunked_array([texts[:90], texts[90:]]), pl.Series(texts)):
        r = fastcal.calibration_report(y, p, by=by, ace=False)
        assert list(r.keys()) == ["a", "b", "c", None] and r[None].n == 50


def test_small_and_empty_segments_are_kept_with_a_caution(data):
    y, p = data["y"][:600].astype(float), data["p"][:600].copy()
    g = np.where(np.arange(600) < 550, "big", "small").astype(object)
    g[-3:] = "gone"
    p[-3:] = np.nan  # every row of segment "gone" is omitted
    r = fastcal.calibration_report(y, p, by=g, nan_policy="omit")
    assert r["gone"].n == 0 and np.isnan(r["gone"].ecd)
    # its rows are counted as read and omitted, as a report of those rows alone says
    assert r["gone"].n_rows == r["gone"].n_omitted == 3 and r["small"].n_rows == 47
    t = r.table()
    notes = dict(zip(t["segment"], t["note"]))
    assert notes == {"big": "", "small": "caution: fewer than 200 rows",
                     "gone": "no ECD test (no rows, or zero variance)"}
    assert t["verdict"][-1] == "untested" and t["segment"][-1] == "gone"
    assert "caution: 2 segments of fewer than 200 rows" in r.verdict
    assert "small (47 rows)" in r.verdict and "gone (0 rows)" in r.verdict


def test_the_verdict_names_the_miscalibrated_segment(data):
    r = fastcal.calibration_report(data["y"], data["p"], by=data["g"])
    t = r.table()
    assert r.miscalibrated == ["FR"] and t["segment"][0] == "FR"
    assert t["verdict"][0] == "over-confident"
    n_fr = int((data["g"] == "FR").sum())
    assert r.verdict.startswith(f"1 of 5 segments miscalibrated (Holm, alpha = 0.05): FR "
                                f"over-confident ({n_fr:,} rows)")
    out = json.loads(r.to_json())
    assert out["miscalibrated"] == ["FR"] and out["segments"][0]["segment"] == "FR"
    assert out["segments"][0]["n"] == n_fr and out["overall"]["n"] == N
    md = r.to_markdown()
    assert md.splitlines()[2].startswith(f"| FR | {n_fr:,} | ")
    assert md.endswith(f"Verdict: {r.verdict}")


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_adjusted_pvalues_equal_a_hand_computation(data, correction):
    r = fastcal.calibration_report(data["y"], data["p"], by=[data["g"], data["h"]],
                                   correction=correction, alpha=0.1)
    t = r.table()
    p, m = t["p_value"], len(t["p_value"])
    assert np.all(np.diff(t["p_adjusted"]) >= 0)
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    hand = np.empty(m)
    for i in range(m):  # the textbook formulas, one p-value at a time
        if correction == "holm":
            hand[i] = min(1.0, max((m - j) * ranked[j] for j in range(i + 1)))
        else:
            hand[i] = min(min(1.0, m * ranked[j] / (j + 1)) for j in range(i, m))
    np.testing.assert_allclose(t["p_adjusted"][order], hand, rtol=1e-15)
    bad = [k for k, a in zip(t["segment"], t["p_adjusted"]) if a < 0.1]
    assert r.miscalibrated == bad


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_adjusted_pvalues_equal_statsmodels(data, correction):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    r = fastcal.calibration_report(data["y"], data["p"], by=[data["g"], data["h"]],
                                   correction=correction, ace=False)
    t = r.table()
    ref = multitest.multipletests(t["p_value"], method="holm" if correction == "holm"
                                  else "fdr_bh")[1]
    np.testing.assert_allclose(t["p_adjusted"], ref, rtol=1e-12)


def test_adjusted_pvalues_leave_nan_untested():
    got = adjust_pvalues([0.01, np.nan, 0.04, 0.03], "holm")
    np.testing.assert_allclose(got, [0.03, np.nan, 0.06, 0.06])


def test_per_segment_brier_equals_scikit_learn(data):
    from sklearn.metrics import brier_score_loss

    y, p, g, w = data["y"], data["p"], data["g"], data["w"]
    r = fastcal.calibration_report(y, p, by=g, sample_weight=w)
    for key in KEYS:
        rows = g == key
        ref = brier_score_loss(y[rows], p[rows], sample_weight=w[rows])
        np.testing.assert_allclose(r[key].brier, ref, rtol=1e-12)


def _chunks(data, case, bounds=(0, 700, 1_900, N)):
    (y, p), kw = CASES[case](data)
    g = data["g"]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        acc = SegmentedAccumulator(n_bins=10)
        acc.update(y[a:b], p[a:b], by=g[a:b],
                   **{k: v[a:b] for k, v in kw.items()})
        out.append(acc)
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_chunked_accumulators_merged_in_any_order_equal_one_update(data, case):
    (y, p), kw = CASES[case](data)
    one = SegmentedAccumulator(n_bins=10).update(y, p, by=data["g"], **kw).report()
    a, b, c = _chunks(data, case)
    for merged in (sum([a, b, c]), (c + a) + b, c + (b + a)):
        got = merged.report()
        assert sorted(got.keys()) == sorted(one.keys())
        for key in one:
            _close(got[key], one[key], SCALARS[:3] + SCALARS[4:])
        _close(got.overall, one.overall, SCALARS[:3] + SCALARS[4:])
    # and the streamed state of a segment is calibration_report's without ACE
    rows = data["g"] == "IT"
    ref = fastcal.calibration_report(y[rows], p[rows], ace=False,
                                     **{k: v[rows] for k, v in kw.items()})
    _close(one["IT"], ref, SCALARS[:3] + SCALARS[4:])


def _same_arrays(got, ref):
    assert set(got) == set(ref)
    for name, x in ref.items():
        if x.dtype.kind == "i":
            np.testing.assert_array_equal(got[name], x, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], x, rtol=1e-12, atol=1e-15, err_msg=name)


def test_one_pass_fills_every_segment_as_its_own_accumulator(data):
    # the state of all segments, filled in one pass and added to each segment's
    # accumulator when read, is the segment's own fill: counts exactly (the omitted
    # rows and the trash row too), sums to rounding
    y, p = data["y"], data["p"].copy()
    g = data["g"].astype(object)
    g[0], g[1:4] = "one", "gone"  # a segment of one row, one of rows all omitted
    p[1:4] = np.nan
    p[np.random.default_rng(4).integers(4, N, 40)] = np.nan
    cases = ({}, {"edges": [0, 0.2, 0.5, 1], "closed": "right", "eps": 1e-3},
             {"with_logs": False})
    for opts in cases:
        acc = SegmentedAccumulator(nan_policy="omit", **opts)
        acc.update(y[:1000], p[:1000], by=g[:1000]).update(y[1000:], p[1000:], by=g[1000:])
        for key in set(g):
            rows = g == key
            ref = fastcal.CalibrationAccumulator(nan_policy="omit", **opts)
            _same_arrays(acc[key].to_arrays(), ref.update(y[rows], p[rows]).to_arrays())
    assert acc["gone"].n == 0 and acc["gone"].n_omitted == 3 and acc["one"].n == 1
    # the whole is the sum of the segments where every row is valid, else its own fill,
    # whose checks refuse a chunk (in its words) before anything is filled
    acc = SegmentedAccumulator().update(y[:1000], data["p"][:1000], by=g[:1000])
    ref = fastcal.CalibrationAccumulator().update(y[:1000], data["p"][:1000])
    _same_arrays(acc.overall.to_arrays(), ref.to_arrays())
    it = acc["IT"].n
    for bad, message in ((p, r"^y_prob contains 43 NaN values \(first at index 1001\)"),
                         (data["p"].astype(np.float32), r"^y_prob is float32 but this "
                                                        r"accumulator holds float64 data")):
        with pytest.raises(ValueError, match=message):
            acc.update(y, bad, by=g)
        _same_arrays(acc.overall.to_arrays(), ref.to_arrays())
        assert acc["IT"].n == it


def test_large_inputs_fill_segments_in_threads_as_in_one(data):
    rng = np.random.default_rng(5)
    p = rng.random(200_000)
    y = (rng.random(p.shape[0]) < p).astype(np.int64)
    g = rng.integers(0, 3, p.shape[0])
    one = SegmentedAccumulator(threads=1).update(y, p, by=g)
    two = SegmentedAccumulator(threads=2).update(y, p, by=g)
    r = fastcal.calibration_report(y, p, by=g, threads=2)
    for k in range(3):
        _same_arrays(two[k].to_arrays(), one[k].to_arrays())
        _close(r[k], fastcal.calibration_report(y[g == k], p[g == k]))


def test_rows_are_grouped_by_segment_in_their_order():
    from fastcal.inputs.segments import factorize, slices

    rng = np.random.default_rng(6)
    ints = rng.integers(-3, 40, 500) * 2  # gaps and negative values
    codes, keys = factorize(ints)
    uniq, inverse = np.unique(ints, return_inverse=True)
    assert keys == uniq.tolist() and np.array_equal(codes, inverse)
    order, bounds = slices(codes, len(keys) + 2)  # two codes without rows
    np.testing.assert_array_equal(order, np.argsort(codes, kind="stable"))
    np.testing.assert_array_equal(bounds, np.r_[0, np.cumsum(np.bincount(codes, minlength=len(keys) + 2))])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_grouped_and_keys_coded_in_threads_equal_the_stable_sort(threads):
    # each thread writes its contiguous rows from its own offsets: the same order as
    # one thread (a stable sort), for every dtype the counting sort moves
    from fastcal.inputs.segments import factorize, grouped

    rng = np.random.default_rng(61)
    ints = rng.integers(-7, 90, 400_000) * 3  # gaps and negative values
    codes, keys = factorize(ints, threads=threads)
    uniq, inverse = np.unique(ints, return_inverse=True)
    assert keys == uniq.tolist() and np.array_equal(codes, inverse)
    order = np.argsort(codes, kind="stable")
    columns = (rng.random(ints.shape[0]), rng.random(ints.shape[0]).astype(np.float32),
               rng.integers(0, 2, ints.shape[0]).astype(np.uint8), codes,
               rng.integers(0, 9, ints.shape[0]).astype(np.int16), None)  # int16: by the order
    out, bounds = grouped(columns, codes, len(keys) + 1, threads)  # one code without rows
    for x, got in zip(columns, out):
        assert got is None if x is None else np.array_equal(got, x[order])
    np.testing.assert_array_equal(bounds, np.r_[0, np.cumsum(np.bincount(codes, minlength=len(keys) + 1))])


def test_a_key_on_one_side_is_kept_and_pickles(data):
    y, p, g = data["y"], data["p"], data["g"]
    a = SegmentedAccumulator().update(y[:100], p[:100], by=np.full(100, "only-a"))
    b = SegmentedAccumulator().update(y[100:300], p[100:300], by=g[100:300])
    merged = pickle.loads(pickle.dumps(a + b))
    assert merged["only-a"].n == 100 and len(merged) == 1 + len(set(g[100:300]))
    assert merged.overall.n == 300
    again = pickle.loads(pickle.dumps(b))
    again += a
    np.testing.assert_allclose(again.report()["only-a"].ecd, merged.report()["only-a"].ecd,
                               rtol=1e-12)


def test_too_many_segments_are_refused_before_any_fill(data):
    y, p = data["y"], data["p"]
    with pytest.raises(ValueError, match=r"^by has 3,000 distinct segments, more than "
                                         r"max_segments=1,000; pass a larger max_segments"):
        fastcal.calibration_report(y, p, by=np.arange(N), max_segments=1_000)
    acc = SegmentedAccumulator(max_segments=4)
    with pytest.raises(ValueError, match=r"^by has 5 distinct segments, more than "
                                         r"max_segments=4"):
        acc.update(y, p, by=data["g"])
    assert acc.overall.n == 0 and len(acc) == 0
    acc.update(y[:10], p[:10], by=np.zeros(10, int))
    with pytest.raises(ValueError, match=r"^by has 5 distinct segments, more than "
                                         r"max_segments=4"):
        acc.update(y[:10], p[:10], by=np.arange(10) % 4 + 1)
    assert acc.overall.n == 10
    big = SegmentedAccumulator(n_bins=100, n_boot=1_000)  # 3.1 MiB a segment
    with pytest.raises(ValueError, match=r"^by has 500 segments of 3,129\.8 KiB of state each "
                                         r"\(mostly bootstrap replicates \(n_boot=1,000 x "
                                         r"n_bins x 32 bytes\)\): 1\.5 GiB, more than the 1 GiB"):
        big.update(y[:500], p[:500], by=np.arange(500))
    assert big.overall.n == 0


def test_soft_labels_with_by_are_refused_in_one_line_before_any_fill(data):
    # label distributions have no ECD test, which the segments' verdict reads (it raised
    # an AttributeError from deep in the segmented report)
    rng = np.random.default_rng(5)
    P, T = rng.dirichlet(np.ones(3), 50), rng.dirichlet(np.ones(3), 50)
    with pytest.raises(ValueError, match=r"^by= needs 0/1 labels or class indices; y_true "
                                         r"holds label distributions \(2-D\)"):
        fastcal.calibration_report(T, P, by=np.arange(50) % 2)
    acc = SegmentedAccumulator()
    with pytest.raises(ValueError, match=r"^by= needs 0/1 labels or class indices"):
        acc.update(T, P, by=np.arange(50) % 2)
    assert acc.overall.n == 0 and len(acc) == 0


def test_by_of_another_length_is_one_line(data):
    with pytest.raises(ValueError, match=r"^by has 2,999 keys; y_prob has 3,000 rows \(one "
                                         r"segment key per row\)$"):
        fastcal.calibration_report(data["y"], data["p"], by=data["g"][1:])
    with pytest.raises(ValueError, match=r"^by must be 1-D with one segment key per row; got "
                                         r"shape \(3000, 2\) \(for several key columns pass a "
                                         r"list of 1-D columns\)$"):
        fastcal.calibration_report(data["y"], data["p"], by=np.c_[data["h"], data["h"]])
    with pytest.raises(ValueError, match=r"^correction='bh' is for the segments' verdict"):
        fastcal.calibration_report(data["y"], data["p"], correction="bh")
    with pytest.raises(ValueError, match=r"^correction must be one of 'holm', 'bh'; got"):
        fastcal.calibration_report(data["y"], data["p"], by=data["g"], correction="bonf")


def test_plot_draws_each_segment(data):
    pytest.importorskip("matplotlib")
    r = fastcal.calibration_report(data["y"], data["p"], by=data["g"], ace=False)
    fig = r.plot()
    assert len(fig.axes[0].get_yticklabels()) == len(KEYS)


# MCGrad 0.1.5 sorts its frame with sort_values(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame")
@pytest.mark.parametrize("weighted", [False, True])
def test_multicalibration_error_equals_mcgrad(data, weighted):
    pd = pytest.importorskip("pandas")
    metrics = pytest.importorskip("mcgrad.metrics")
    rng = np.random.default_rng(7)
    p = np.unique(rng.beta(2.0, 3.0, N))
    p = p[rng.permutation(p.shape[0])]  # tie-free
    n = p.shape[0]
    g = rng.integers(0, 5, n)
    g[:30] = 5  # a segment of 30 rows: below min_rows
    y = (rng.random(n) < np.where(g == 2, np.clip(p + 0.08, 0, 1), p)).astype(float)
    w = rng.random(n) if weighted else None
    r = fastcal.calibration_report(y, p, by=g, metrics=("ecce",), sample_weight=w,
                                   ace=False)
    got = fastcal.multicalibration_error(r, min_rows=100)
    frame = pd.DataFrame({"y": y, "p": p, "g": g, "w": np.ones(n) if w is None else w})
    ref = metrics.MulticalibrationError(
        frame, "y", "p", weight_column=None if w is None else "w",
        categorical_segment_columns=["g"], max_depth=1, max_values_per_segment_feature=100,
        min_samples_per_segment=100, precision_dtype="float64")
    np.testing.assert_allclose([got.mce_sigma, got.mce, got.mce_relative, got.mde,
                                got.mde_relative],
                               [ref.mce_sigma, ref.mce, ref.mce_relative, ref.mde,
                                ref.mde_relative], rtol=1e-12)
    np.testing.assert_allclose(got.mce_pvalue, ref.mce_pvalue, rtol=1e-12, atol=1e-15)
    assert (got.segment, got.n_tested) == (2, 6)


def test_multicalibration_error_needs_ecce_and_segments(data):
    r = fastcal.calibration_report(data["y"], data["p"], by=data["g"], ace=False)
    with pytest.raises(ValueError, match=r"^report has no ECCE: pass metrics=\('ecce',\)"):
        fastcal.multicalibration_error(r)
    with pytest.raises(ValueError, match=r"^report must be a segmented report"):
        fastcal.multicalibration_error(r.overall)
    r = fastcal.calibration_report(data["c"], data["P"], by=data["g"], metrics=("ecce",))
    with pytest.raises(ValueError, match=r"^report holds 3 classes; the multicalibration error "
                                         r"is of binary predictions"):
        fastcal.multicalibration_error(r)


@pytest.fixture(scope="module")
def parquet(data, tmp_path_factory):
    """The binary data as a Parquet file of 4 row groups, with nulls in the key column."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    g = data["g"].astype(object)
    g[::50] = None
    path = tmp_path_factory.mktemp("segments") / "pred.parquet"
    pq.write_table(pa.table({"p": data["p"], "y": data["y"], "w": data["w"], "country": g,
                             "h": data["h"]}), path, row_group_size=800)
    return str(path), g


def test_score_file_by_equals_the_arrays(data, parquet):
    path, g = parquet
    y, p, w, h = data["y"], data["p"], data["w"], data["h"]
    got = fastcal.score_file(path, by="country", chunk_rows=700)
    ref = fastcal.calibration_report(y, p, by=g, ace=False)
    assert list(got.keys()) == list(ref.keys()) == [*KEYS.tolist(), None]
    for key in ref:
        _close(got[key], ref[key], SCALARS[:3] + SCALARS[4:])
    _close(got.overall, ref.overall, SCALARS[:3] + SCALARS[4:])
    assert got.overall.n_rows == N and got.overall.passes == 1 and got.columns == ["country"]
    # ECCE of every segment and of the whole, weighted, from the fill and its passes
    got = fastcal.score_file(path, by=["country", "h"], weight="w", chunk_rows=1_000,
                             correction="bh", metrics=("ecce",))
    ref = fastcal.calibration_report(y, p, by=[g, h], sample_weight=w, correction="bh",
                                     metrics=("ecce",))
    assert list(got.keys()) == list(ref.keys()) and len(got) == 2 * len(KEYS) + 2
    ecce = ("ecce", "ecce_sigma", "ecce_pvalue")
    for key in ref:
        _close(got[key], ref[key], SCALARS[:3] + SCALARS[4:] + ecce)
    _close(got.overall, ref.overall, ecce)
    assert got.overall.pass_steps[0] == ("fill", 1) and got.overall.pass_steps[1][0] == "ecce"
    t, d = got.table(), json.loads(got.to_json())
    first = t["segment"][0]
    assert t["ecce_sigma"][0] == got[first].ecce_sigma and t["ecce_pvalue"][0] == got[first].ecce_pvalue
    assert d["segments"][0]["ecce_sigma"] == got[first].ecce_sigma
    assert d["overall"]["ecce"] == got.overall.ecce
    head, _, row = got.to_markdown().splitlines()[:3]
    assert head.endswith("| p adj. | ECCE sigma | ECCE p | verdict |")
    assert f"| {got[first].ecce_sigma:.2f} | " in row
    plain = fastcal.score_file(path, by="country", chunk_rows=700)
    assert "ecce" not in plain.table() and "ECCE" not in plain.to_markdown()
    np.testing.assert_allclose(got.table()["p_adjusted"], ref.table()["p_adjusted"],
                               rtol=1e-12)


def test_score_file_by_refuses_what_takes_more_passes(parquet):
    with pytest.raises(ValueError, match=r"pred\.parquet: by= scores each segment in one pass "
                                         r"over the file: ace=True needs more passes"):
        fastcal.score_file(parquet[0], by="country", ace=True)
    with pytest.raises(ValueError, match=r"pred\.parquet: no column 'cntry'"):
        fastcal.score_file(parquet[0], by="cntry")


def test_command_line_by_prints_the_table_and_json(data, parquet, capsys):
    from fastcal.cli import main

    path, g = parquet
    assert main(["score", path, "--prob", "p", "--label", "y", "--by", "country",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    ref = fastcal.calibration_report(data["y"], data["p"], by=g, ace=False)
    assert "3000 rows (parquet) in 6 segments of country" in out
    table = ref.to_markdown().splitlines()
    assert table[0].replace("| segment |", "| country |") + "\n" + "\n".join(table[1:]) in out
    assert main(["score", path, "--prob", "p", "--label", "y", "--by", "country,h",
                 "--correction", "bh", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["correction"] == "bh" and got["columns"] == ["country", "h"]
    assert got["n_rows"] == N and got["miscalibrated"][0][0] == "FR"
    assert main(["score", path, "--prob", "p", "--label", "y", "--by", "cntry"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no column 'cntry'" in err
    assert main(["score", path, "--prob", "p", "--label", "y", "--correction", "bh"]) == 2
    assert "--correction adjusts the segments' p-values: pass --by COL" in capsys.readouterr().err
    assert main(["score", path, "--prob", "p", "--label", "y", "--by", "country",
                 "--max-segments", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(
        "pred.parquet: --by has 6 distinct segments, more than --max-segments 5; pass a larger "
        "--max-segments (each segment keeps a state of its own) or coarser keys\n")
    assert main(["score", path, "--prob", "p", "--label", "y", "--by", "country", "--ace"]) == 2
    assert "pred.parquet: --by scores each segment in one pass over the file: --ace needs" \
        in capsys.readouterr().err


@given(cuts=st.lists(st.integers(1, 299), max_size=4, unique=True),
       order=st.permutations(range(5)), n_keys=st.integers(1, 7), seed=st.integers(0, 99))
@settings(max_examples=25, deadline=None)
def test_any_chunking_and_merge_order_give_one_update(cuts, order, n_keys, seed):
    rng = np.random.default_rng(seed)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(np.int64)
    g = rng.integers(0, n_keys, 300).astype(str).astype(object)
    g[rng.random(300) < 0.1] = None
    one = SegmentedAccumulator(n_bins=7).update(y, p, by=g).report()
    bounds = [0, *sorted(cuts), 300]
    parts = [SegmentedAccumulator(n_bins=7).update(y[a:b], p[a:b], by=g[a:b])
             for a, b in zip(bounds[:-1], bounds[1:])]
    merged = sum(parts[i] for i in order if i < len(parts)).report()
    assert set(merged.keys()) == set(one.keys())
    for key in one:
        _close(merged[key], one[key], ("ece", "esce", "mce", "ecd", "brier", "nll"))


def test_segments_come_in_the_order_of_one_update_whatever_the_chunks_bring_first(data):
    """A first chunk holding only the null key (and a later one a new key) gives the
    order of calibration_report: sorted keys, nulls last in each column."""
    y, p, h = data["y"], data["p"], data["h"]
    g = data["g"].astype(object)
    g[0] = None
    acc = SegmentedAccumulator().update(y[:1], p[:1], by=g[:1])
    acc = acc + SegmentedAccumulator().update(y[1:], p[1:], by=g[1:])
    assert list(acc.report().keys()) == list(
        fastcal.calibration_report(y, p, by=g, ace=False).keys()) == [*KEYS.tolist(), None]
    two = SegmentedAccumulator().update(y[:1], p[:1], by=[g[:1], h[:1]])
    two.update(y[1:], p[1:], by=[g[1:], h[1:]])
    assert list(two.report().keys()) == list(
        fastcal.calibration_report(y, p, by=[g, h], ace=False).keys())

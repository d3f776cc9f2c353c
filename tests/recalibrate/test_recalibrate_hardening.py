"""Recalibration maps hardened (issue 23, items 2, 3, 13, 14, 15): every field of a
saved map checked on load, fits that refuse what they cannot fit, K-class rows that
sum to 1, the safe temperature on exact 0s and 1s, and the report's own bins."""

import json
import tracemalloc

import numpy as np
import pytest

from fastcal import cli
from fastcal import recalibrate as rc

GOOD = {
    "temperature": {"temperature": 2.0, "target": "nll", "alpha": 0.05},
    "platt": {"a": 0.8, "b": -0.1},
    "isotonic": {"exact": True, "n_fine": 65536, "x": [0.1, 0.5, 0.9], "y": [0.0, 0.5, 1.0]},
    "histogram": {"n_bins": 3, "values": [0.1, 0.5, 0.9], "counts": [3, 4, 5]},
}

RAW = "@RAW@"  # a placeholder for JSON text that json.dumps cannot write (1e400, -1e-320)


def map_text(method, where, value):
    """The JSON of a good map of ``method`` with ``where`` (a top-level key or
    "params.<key>") set to ``value`` (a str starting with RAW is written as is)."""
    d = {"fastcal_recalibration": 1, "method": method, "logits": False, "n_classes": None,
         "n": 100, "params": dict(GOOD[method])}
    target, key = (d["params"], where[7:]) if where.startswith("params.") else (d, where)
    raw = isinstance(value, str) and value.startswith(RAW)
    target[key] = RAW if raw else value
    text = json.dumps(d)  # NaN and Infinity as Python's json writes (and reads) them
    return text.replace(f'"{RAW}"', value[len(RAW):]) if raw else text


BAD = [
    ("temperature", "params.temperature", 0),
    ("temperature", "params.temperature", -1),
    ("temperature", "params.temperature", float("inf")),
    ("temperature", "params.temperature", float("-inf")),
    ("temperature", "params.temperature", float("nan")),
    ("temperature", "params.temperature", 1e308),
    ("temperature", "params.temperature", RAW + "1e-320"),
    ("temperature", "params.temperature", "2"),
    ("temperature", "params.alpha", 0.7),
    ("temperature", "params.target", "fast"),
    ("temperature", "n", None),
    ("temperature", "n", [1]),
    ("temperature", "n", RAW + "1e400"),
    ("temperature", "n", 1.5),
    ("temperature", "n_classes", 1),
    ("temperature", "logits", "no"),
    ("temperature", "params.temperature", RAW + "1" + "0" * 400),
    ("platt", "params.b", float("inf")),
    ("platt", "params.b", RAW + "-1" + "0" * 400),
    ("platt", "params.a", float("nan")),
    ("platt", "params.a", -1.0),
    ("isotonic", "params.x", []),
    ("isotonic", "params.x", [0.9, 0.5, 0.1]),
    ("isotonic", "params.x", [0.1, 0.1, 0.9]),
    ("isotonic", "params.y", [1.0, 0.5, 0.0]),
    ("isotonic", "params.y", [0.0, 0.5]),
    ("isotonic", "params.y", [0.0, 0.5, 1.5]),
    ("isotonic", "params.exact", "yes"),
    ("histogram", "params.n_bins", 0),
    ("histogram", "params.n_bins", -1),
    ("histogram", "params.n_bins", 5),
    ("histogram", "params.n_bins", 100_000_000),
    ("histogram", "params.values", []),
    ("histogram", "params.values", [0.1, float("nan"), 0.9]),
    ("histogram", "params.values", [0.1, 2.0, 0.9]),
    ("histogram", "params.counts", [3, -4, 5]),
    ("histogram", "params.counts", [3, 4]),
]


def ids(case):
    return f"{case[0]}-{case[1]}={str(case[2])[:12]}"


@pytest.mark.parametrize("method", sorted(GOOD))
def test_good_maps_load(tmp_path, method):
    path = tmp_path / "map.json"
    path.write_text(map_text(method, "n", 100))
    m = rc.load(path)
    assert m.n_ == 100 and m.method == method


@pytest.mark.parametrize("case", BAD, ids=ids)
def test_bad_map_field_is_named_in_one_line(tmp_path, case):
    method, where, value = case
    path = tmp_path / "map.json"
    path.write_text(map_text(method, where, value))
    field = where.split(".")[-1]
    with pytest.raises(ValueError) as info:
        rc.load(path)
    msg = str(info.value)
    assert str(path) in msg and field in msg and "\n" not in msg


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "d.csv"
    path.write_text("p,y\n0.2,0\n0.7,1\n0.9,1\n0.4,0\n")
    return path


@pytest.mark.parametrize("case", BAD, ids=ids)
def test_cli_bad_map_exits_2_naming_file_and_field(tmp_path, csv_file, capsys, case):
    method, where, value = case
    path = tmp_path / "map.json"
    path.write_text(map_text(method, where, value))
    code = cli.main(["score", str(csv_file), "--prob", "p", "--label", "y",
                     "--recalibration", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert str(path) in err and where.split(".")[-1] in err and "must" in err
    assert "NaN" not in err or "column" not in err  # never blamed on the data


def test_huge_n_bins_fails_before_allocating(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(map_text("histogram", "params.n_bins", 100_000_000))
    assert path.stat().st_size < 600
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"params\.n_bins"):
            rc.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_deeply_nested_map_is_one_line(tmp_path, csv_file, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        rc.load(path)
    code = cli.main(["score", str(csv_file), "--prob", "p", "--label", "y",
                     "--recalibration", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and len(err.strip().splitlines()) == 1


def test_from_dict_names_the_field_without_a_file():
    d = json.loads(map_text("temperature", "params.temperature", -1))
    with pytest.raises(ValueError, match=r"params\.temperature must be a finite number"):
        rc.from_dict(d)


# -- item 3: fits refuse what they cannot fit -------------------------------------------------

@pytest.mark.parametrize("method", ["temperature", "platt"])
@pytest.mark.parametrize("rows", [1, 200])
def test_one_label_is_refused(method, rows):
    p = np.linspace(0.05, 0.95, rows) if rows > 1 else np.array([0.3])
    for label in (0, 1):
        y = np.full(rows, label, np.uint8)
        with pytest.raises(ValueError, match=f"both labels; got {rows} rows, every one with "
                                             f"label {label}"):
            rc.make(method).fit(y, p)


@pytest.mark.parametrize("method", ["temperature", "platt"])
def test_inverted_ranking_is_refused(method):
    rng = np.random.default_rng(3)
    p = rng.random(500)
    y = (rng.random(500) < 1 - p).astype(np.uint8)  # the higher p, the rarer label 1
    with pytest.raises(ValueError, match="invert the ranking"):
        rc.make(method).fit(y, p)


def test_multiclass_temperature_below_zero_is_refused():
    p = np.random.default_rng(4).dirichlet([1, 1, 1], 300)
    y = np.argmin(p, axis=1)  # the true class is always the least likely
    with pytest.raises(ValueError, match=r"lowest at T = -.*invert the ranking"):
        rc.TemperatureScaling().fit(y, p)


def test_cli_recalibrate_one_label_exits_2(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("p,y\n0.2,1\n0.7,1\n0.9,1\n")
    out = tmp_path / "map.json"
    code = cli.main(["recalibrate", str(data), "--prob", "p", "--label", "y", "--out", str(out),
                     "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "both labels" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


# -- item 13: K-class isotonic and histogram rows sum to 1 ------------------------------------

@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits, GaussianNB fitted on the even rows, probabilities of
    the odd ones (898 x 10, many rows with max p within 1e-10 of 1)."""
    from sklearn.datasets import load_digits
    from sklearn.naive_bayes import GaussianNB

    X, y = load_digits(return_X_y=True)
    p = GaussianNB().fit(X[::2], y[::2]).predict_proba(X[1::2])
    return y[1::2], p


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", ["isotonic", "histogram"])
def test_multiclass_binned_rows_sum_to_one(digits, method, dtype, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastcal
    from fastcal.files import score_file

    y, p = digits
    p = p.astype(dtype)
    m = rc.make(method).fit(y, p)
    q = m.transform(p)
    assert np.abs(q.sum(axis=1) - 1.0).max() <= 1e-15 * p.shape[1]
    fastcal.calibration_report(y, q)  # fastcal accepts its own output
    # and from the file the map was fitted on, through the driver
    names = [f"p_{k}" for k in range(p.shape[1])]
    path = tmp_path / "digits.parquet"
    pq.write_table(pa.table({**{c: p[:, k] for k, c in enumerate(names)}, "y": y}), path)
    mf = rc.fit_file(rc.make(method), path, prob=names, label="y", chunk_rows=300)
    rep = score_file(path, prob=names, label="y", transform=mf, chunk_rows=300)
    assert rep.n == len(y)


def test_multiclass_binned_rows_near_certain():
    # max p rounds to 1 while the others are tiny: their own sum is the divisor
    p = np.array([[1.0, 3e-17, 1e-17], [1 - 2e-16, 1e-16, 1e-16], [0.5, 0.3, 0.2]])
    y = np.array([0, 1, 2])
    for method in ("isotonic", "histogram"):
        q = rc.make(method).fit(y, p).transform(p)
        assert np.abs(q.sum(axis=1) - 1.0).max() <= 4e-16
        assert np.all(q >= 0)


# -- item 15: the report's bins, the K-class log floor ----------------------------------------

def _float32_edge_rows(n_bins, reps=3):
    """float32 probabilities on and one float32 ulp either side of every edge k / n_bins."""
    e = (np.arange(1, n_bins) / n_bins).astype(np.float32)
    p = np.concatenate([e, np.nextafter(e, np.float32(0)), np.nextafter(e, np.float32(1))])
    return np.tile(p, reps)


@pytest.mark.parametrize("n_bins", [10, 15, 1000])
def test_histogram_of_float32_uses_the_reports_bins(n_bins):
    import fastcal

    p = _float32_edge_rows(n_bins)
    y = (np.random.default_rng(n_bins).random(p.size) < p).astype(np.uint8)
    m = rc.HistogramBinning(n_bins=n_bins).fit(y, p)
    rep = fastcal.calibration_report(y, p, n_bins=n_bins)
    counts = np.asarray(rep.bins["count"], np.int64)
    np.testing.assert_array_equal(m.counts_, counts)
    full = counts > 0
    np.testing.assert_array_equal(m.values_[full], np.asarray(rep.bins["frac_pos"])[full])
    # transform sends each row to the bin the report put it in: a map whose value
    # is its bin's index shows where each row went
    d = json.loads(m.to_json())
    d["params"]["values"] = (np.arange(n_bins) / n_bins).tolist()
    where = np.rint(rc.from_dict(d).transform(p) * n_bins).astype(np.int64)
    np.testing.assert_array_equal(np.bincount(where, minlength=n_bins), counts)


def test_histogram_of_float32_edge_row_in_k_classes():
    # top-label confidence float32(0.7) = 0.69999998...: the report's bin 7 of 10
    p = np.array([[0.7, 0.2, 0.1], [0.3, 0.5, 0.2], [0.1, 0.1, 0.8]], np.float32)
    y = np.array([0, 1, 0])
    m = rc.HistogramBinning(n_bins=10).fit(y, p)
    assert m.counts_[7] == 1 and m.counts_[6] == 0
    assert m.transform(p)[0, 0] == m.values_[7]


def test_multiclass_temperature_warns_when_the_true_class_has_probability_0():
    good = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.5, 0.3, 0.2]])
    p = np.concatenate([np.tile(good, (500, 1)), [[0.6, 0.4, 0.0]] * 2])
    y = np.concatenate([np.tile([0, 1, 2, 1], 500), [2, 2]])
    with pytest.warns(RuntimeWarning, match=r"2 rows give their true class probability 0"):
        t = rc.TemperatureScaling().fit(y, p)
    assert t.temperature_ > 1  # the floored rows pull T up


def test_isotonic_is_exact_pav_and_sklearn_pools_near_ties():
    """The documented difference: two values one ulp apart stay two thresholds here."""
    from sklearn.isotonic import IsotonicRegression

    x = np.array([0.2, 0.5, np.nextafter(0.5, 1.0), 0.8])
    y = np.array([0, 0, 1, 1], np.uint8)
    m = rc.IsotonicCalibration().fit(y, x)
    np.testing.assert_array_equal(m.x_, x)
    np.testing.assert_array_equal(m.y_, [0.0, 0.0, 1.0, 1.0])
    ir = IsotonicRegression(out_of_bounds="clip").fit(x, y)
    np.testing.assert_array_equal(ir.X_thresholds_, [0.2, 0.5, 0.8])  # pooled
    assert "1e-15" in rc.IsotonicCalibration.__doc__


# -- item 14: the safe temperature on exact 0s and 1s -----------------------------------------

def _with_certain_rows(n=20_000, temperature=5.0, wrong=0, seed=0):
    """Over-confident probabilities (labels drawn at z / temperature) of which 5% are
    exactly 0 or 1 with the right label, ``wrong`` more with the wrong one."""
    from scipy import special

    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 4.0, n)
    y = (rng.random(n) < special.expit(z / temperature)).astype(np.uint8)
    p = special.expit(z)
    k = n // 20
    p[:k] = y[:k]
    p[k:k + wrong] = 1 - y[k:k + wrong]
    return y, p


def test_safe_temperature_with_certain_rows_reaches_its_target_in_the_report():
    import fastcal

    y, p = _with_certain_rows()
    t = rc.TemperatureScaling(target="safe", alpha=0.05).fit(y, p)
    rep = fastcal.calibration_report(y, t.transform(p))
    assert rep.ecd_z == pytest.approx(t.ecd_z_, rel=1e-6)
    assert rep.ecd_z == pytest.approx(1.6448536269514722, rel=1e-6)
    assert rep.ecd_p_over == pytest.approx(0.05, rel=1e-5)
    before = fastcal.calibration_report(y, p)
    assert t.ecd_z_before_ == pytest.approx(before.ecd_z, rel=1e-6)


def test_certain_and_wrong_rows_say_no_temperature_reaches_the_target():
    import fastcal

    y, p = _with_certain_rows(wrong=3)
    with pytest.raises(ValueError, match="3 rows are certain and wrong.*no temperature"):
        rc.TemperatureScaling(target="safe").fit(y, p)
    t = rc.TemperatureScaling().fit(y, p)  # the NLL optimum of the other rows, reported honestly
    rep = fastcal.calibration_report(y, t.transform(p))
    assert t.ecd_z_ == rep.ecd_z == np.inf and t.p_over_ == 0.0
    assert t.nll_ == np.inf and t.n_certain_wrong_ == 3


def test_every_row_certain_is_refused():
    y = np.array([0, 1, 1, 0], np.uint8)
    with pytest.raises(ValueError, match="every row has p = 0 or 1"):
        rc.TemperatureScaling().fit(y, y.astype(np.float64))


# -- a fit never saves a map that its own loader refuses --------------------------------------

def test_fits_refuse_sizes_their_maps_could_not_load():
    y = np.array([0, 1, 1, 0], np.uint8)
    p = np.array([0.2, 0.7, 0.9, 0.4])
    with pytest.raises(ValueError, match="n_bins must be <= 1,000,000; got 2,000,000"):
        rc.HistogramBinning(n_bins=2_000_000).fit(y, p)
    with pytest.raises(ValueError, match="n_fine must be <= "):
        rc.IsotonicCalibration(n_fine=1 << 31).fit(y, p)


@pytest.mark.parametrize("method", sorted(GOOD))
def test_fitted_maps_with_certain_rows_load_again(method, digits):
    y, p = _with_certain_rows(2000)
    m = rc.make(method).fit(y, p)
    back = rc.from_dict(json.loads(m.to_json()))
    np.testing.assert_array_equal(back.transform(p), m.transform(p))
    if method in ("isotonic", "histogram", "temperature"):
        yk, pk = digits
        if method == "temperature":  # digits has 16 rows whose true class has p = 0
            with pytest.warns(RuntimeWarning, match="16 rows give their true class"):
                mk = rc.make(method).fit(yk, pk)
        else:
            mk = rc.make(method).fit(yk, pk)
        back = rc.from_dict(json.loads(mk.to_json()))
        np.testing.assert_array_equal(back.transform(pk), mk.transform(pk))


@pytest.mark.parametrize("method", ["temperature", "isotonic"])
def test_soft_labels_are_refused_at_the_gate_in_one_line(method):
    # label distributions reached the fit's compiled passes (a Numba typing error)
    P = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"^y_true must be 1-D with one class index per sample; "
                                         r"got shape \(3, 2\) \(2-D y_true means soft labels"):
        rc.make(method).fit(P, P)

"""fastcal.torch.CalibrationMetric with num_groups: one state per group, and the report
of calibration_report(y, p, by=groups) on all the rows (the DDP run of groups is in
test_torch_metric.py, beside the other checks of its one gloo run)."""

import copy
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchmetrics = pytest.importorskip("torchmetrics")

import fastcal  # noqa: E402
from fastcal.torch import CalibrationMetric  # noqa: E402
from tests.api.test_torch_metric import K, assert_same, batches, data, first_error  # noqa: E402

G = 5


def group_ids(n, seed=0):
    """Group ids in [0, G) of n rows; groups 2 and G - 1 get no rows."""
    g = np.random.default_rng(seed).choice([0, 1, 3], n, p=[0.5, 0.3, 0.2])
    return g.astype(np.int64)


# the intervals of the bootstrap replicates
BOOTSTRAPPED = ("ece", "esce", "mce")


def assert_same_segments(got, ref):
    """The segmented reports agree: keys, each segment's and the whole's report, the test.

    The whole's state is the sum of the groups': its bootstrap replicates weigh each row
    by its number in its group (as each segment's do), not in all the rows, so their
    intervals are other draws than the whole's of calibration_report (the rest is equal)."""
    assert type(got).__name__ == "SegmentedReport"
    assert list(got.keys()) == list(ref.keys())
    for key in ref.keys():
        assert type(key) is int
        assert_same(got[key], ref[key])
    whole = copy.copy(got.overall)
    if np.isfinite(ref.overall.intervals.get("ece", (np.nan,))[0]):
        assert all(np.isfinite(got.overall.intervals[k]).all() for k in BOOTSTRAPPED)
        whole.intervals = dict(whole.intervals, **{k: ref.overall.intervals[k]
                                                   for k in BOOTSTRAPPED})
    assert_same(whole, ref.overall)
    assert got.verdict == ref.verdict and got.miscalibrated == ref.miscalibrated
    t, r = got.table(), ref.table()
    assert t["segment"] == r["segment"] and t["verdict"] == r["verdict"]
    np.testing.assert_allclose(t["p_adjusted"], r["p_adjusted"], rtol=1e-12)


CASES = {
    "binary": ("binary", dict(), dict(), False),
    "weighted": ("binary32", dict(weighted=True), dict(), True),
    "logits": ("logits", dict(logits=True, n_bins=7), dict(), False),
    # bootstrap: each group numbers its own rows, as each segment of by= does
    "ci": ("binary", dict(ci=0.9, n_boot=6, seed=2), dict(), False),
    "multiclass": ("multiclass", dict(n_bins=6), dict(task="multiclass", num_classes=K), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_groups_give_the_report_of_calibration_report_by(case):
    kind, options, task, weighted = CASES[case]
    p, y = data(kind, n=1_500)
    g = group_ids(len(y))
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(y)) if weighted else None
    ref = fastcal.calibration_report(y, p, by=g, ace=False, sample_weight=w,
                                     **{k: x for k, x in options.items() if k != "weighted"})
    metric = CalibrationMetric(**task, **options, num_groups=G)
    for a, b in batches(len(y), 4) + [(0, 0)]:
        metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]),
                      None if w is None else torch.from_numpy(w[a:b]),
                      groups=torch.from_numpy(g[a:b]))
    assert_same_segments(metric.report(), ref)
    bh = metric.report(correction="bh", alpha=0.1)  # the verdict's options
    assert bh.correction == "bh" and bh.alpha == 0.1
    values = metric.compute()  # a dict of 0-d float64 tensors: "all" and every group
    assert list(values) == ["all"] + [f"group_{k}" for k in range(G)]
    assert all(x.dtype == torch.float64 and x.shape == () for x in values.values())
    np.testing.assert_allclose(float(values["all"]), ref.overall.ece, rtol=1e-12, atol=1e-15)
    for k in range(G):
        want = ref[k].ece if k in ref else np.nan  # a group without rows: NaN
        np.testing.assert_allclose(float(values[f"group_{k}"]), want, rtol=1e-12, atol=1e-15)
    assert metric.ece == float(values["all"])
    state = metric.counts  # states: one per group, side by side
    assert state.shape[0] == G and int(state[2].sum()) == 0


def test_a_group_whose_rows_are_all_omitted_is_an_untested_segment():
    p, y = data("binary", n=600)
    g = group_ids(len(y))
    p[g == 1] = np.nan
    ref = fastcal.calibration_report(y, p, by=g, ace=False, nan_policy="omit")
    metric = CalibrationMetric(nan_policy="omit", num_groups=G)
    metric.update(torch.from_numpy(p), torch.from_numpy(y), groups=torch.from_numpy(g))
    got = metric.report()
    assert list(got.keys()) == [0, 1, 3]
    assert got[1].n == 0 and got[1].n_rows == int((g == 1).sum())  # by= keeps no row count
    assert got.segment_verdict(1) == ref.segment_verdict(1) == "untested"
    for key in (0, 3):
        assert_same(got[key], ref[key])
    assert_same(got.overall, ref.overall)
    assert got.verdict == ref.verdict
    assert np.isnan(float(metric.compute()["group_1"]))


def test_forward_merge_state_copies_pickles_and_a_collection():
    p, y = data("binary", n=1_200)
    g = group_ids(len(y), seed=3)
    P, Y, Gr = torch.from_numpy(p), torch.from_numpy(y), torch.from_numpy(g)
    a, b = CalibrationMetric(num_groups=G), CalibrationMetric(num_groups=G)
    first = a(P[:500], Y[:500], groups=Gr[:500])  # the batch's own values, as compute() gives
    ref = fastcal.calibration_report(y[:500], p[:500], by=g[:500], ace=False)
    assert float(first["all"]) == pytest.approx(ref.overall.ece, rel=1e-12)
    assert float(first["group_3"]) == pytest.approx(ref[3].ece, rel=1e-12)
    assert np.isnan(float(first["group_2"]))
    b.update(P[500:], Y[500:], groups=Gr[500:])
    restored = pickle.loads(pickle.dumps(a))
    copied = copy.deepcopy(b)
    restored.merge_state(copied)
    whole = fastcal.calibration_report(y, p, by=g, ace=False)
    assert_same_segments(restored.report(), whole)
    a.merge_state(dict(b.metric_state))  # a dict of states, as torchmetrics passes them
    assert_same_segments(a.report(), whole)
    # metrics of other groups, or none, do not merge
    for other, text in ((CalibrationMetric(num_groups=3), "num_groups=3 into one made with "
                                                          "num_groups=5"),
                        (CalibrationMetric(), "num_groups=None into one made with num_groups=5")):
        msg = first_error(lambda other=other: b.merge_state(other))
        assert msg == (f"cannot merge a CalibrationMetric made with {text}; merge only metrics "
                       "made with the same options")
    msg = first_error(lambda: CalibrationMetric().merge_state(b))
    assert msg.startswith("cannot merge a CalibrationMetric made with num_groups=5 into one "
                          "made with num_groups=None")
    state = {k: x.clone() for k, x in b.metric_state.items()}
    state["counts"] = state["counts"][:3]
    msg = first_error(lambda: CalibrationMetric(num_groups=G).merge_state(state))
    assert msg == ("arrays['counts'] has shape (3, 11, 3); this metric's state has shape "
                   "(5, 11, 3) (num_groups=5 states of shape (11, 3))")
    before = b.counts.clone()
    state = {k: x.clone() for k, x in b.metric_state.items()}
    state["counts"][4, 0, 0] = -1  # a negative count, in a group b has no rows of
    assert first_error(lambda: b.merge_state(state)).startswith("arrays['counts']")
    assert torch.equal(b.counts, before)

    coll = torchmetrics.MetricCollection({"ece": CalibrationMetric(num_groups=G),
                                          "ecd": CalibrationMetric(num_groups=G, value="ecd")})
    coll.update(P, Y, groups=Gr)
    out = coll.compute()
    assert out["ecd_group_3"] == pytest.approx(whole[3].ecd, rel=1e-12)
    assert out["ece_all"] == pytest.approx(whole.overall.ece, rel=1e-12)


def test_groups_on_the_state_device_and_as_lists():
    p, y = data("multiclass", n=300)
    g = group_ids(len(y))
    metric = CalibrationMetric("multiclass", num_classes=K, num_groups=G)
    metric.update(torch.from_numpy(p[:100]), torch.from_numpy(y[:100]), groups=g[:100].tolist())
    metric.update(torch.from_numpy(p[100:]), torch.from_numpy(y[100:]),
                  groups=torch.from_numpy(g[100:]).to(torch.int16))
    assert_same_segments(metric.report(), fastcal.calibration_report(y, p, by=g, ace=False))


def _refused(bad):
    """The message of a bad batch, after two good ones, and whether the state changed."""
    p, y = data("binary", n=400)
    g = group_ids(len(y))
    P, Y, Gr = torch.from_numpy(p), torch.from_numpy(y), torch.from_numpy(g)
    metric = CalibrationMetric(num_groups=3 if bad == "outside" else G)
    if bad == "outside":
        Gr = torch.from_numpy(np.minimum(g, 2))
    metric.update(P[:100], Y[:100], groups=Gr[:100])
    metric.update(P[100:300], Y[100:300], groups=Gr[100:300])
    before = {name: x.clone() for name, x in metric.metric_state.items()}
    last = dict(preds=P[300:].clone(), target=Y[300:], groups=Gr[300:].clone())
    if bad == "missing":
        del last["groups"]
    elif bad == "length":
        last["groups"] = last["groups"][:-1]
    elif bad == "floats":
        last["groups"] = last["groups"].double()  # whole floats too
    elif bad == "bools":
        last["groups"] = last["groups"] > 0
    elif bad == "2-D":
        last["groups"] = last["groups"][:, None]
    elif bad == "outside":
        last["groups"][[17, 40, 41]] = torch.tensor([3, -1, 7])
    elif bad == "nan":  # a bad row of one group: named by its row in the batch
        last["preds"][[55, 70]] = float("nan")
    elif bad == "forward":
        last["groups"][60] = 9
    call = metric if bad == "forward" else metric.update
    msg = first_error(lambda: call(**last))
    changed = [name for name, x in before.items() if not torch.equal(getattr(metric, name), x)]
    return msg, changed, metric


@pytest.mark.parametrize("bad, text", [
    ("missing", "groups is missing: this metric was made with num_groups=5, so each batch "
                "takes a group id per row (update(preds, target, groups=ids))"),
    ("length", "groups has 99 ids for 100 rows of preds; expected shape (100,), one group id "
               "per row"),
    ("floats", "groups has dtype torch.float64; expected integer group ids in [0, 5) (floats "
               "are refused, whole or not: cast them, e.g. groups.long())"),
    ("bools", "groups has dtype torch.bool; expected integer group ids in [0, 5)"),
    ("2-D", "groups has shape (100, 1); expected shape (100,), one group id per row"),
    ("outside", "groups has 3 ids outside [0, 3) (first at index 317: 3); group ids are "
                "integers in [0, num_groups)"),
    ("nan", "y_prob contains 2 NaN values (first at index 355); pass nan_policy='omit' to "
            "drop them"),
    ("forward", "groups has 1 ids outside [0, 5) (first at index 360: 9)"),
])
def test_bad_groups_are_one_line_naming_the_batch_and_change_nothing(bad, text):
    msg, changed, metric = _refused(bad)
    assert msg.startswith(f"batch 3: {text}"), msg
    assert "\n" not in msg and changed == []
    assert metric.report().overall.n == 300


@pytest.mark.parametrize("options, text", [
    (dict(num_groups=0), "num_groups must be a positive integer (or None: no groups); got 0"),
    (dict(num_groups=2.0), "num_groups must be a positive integer (or None: no groups); got "
                           "2.0"),
    (dict(num_groups=True), "num_groups must be a positive integer"),
    (dict(num_groups=2_000_000), "num_groups=2,000,000 with n_bins=10 makes a state of 1.09 GiB "
                                 "(2,000,000 states of 584 bytes), mostly per-bin arrays; a "
                                 "state may take at most 1 GiB (fastcal.accumulators.settings."
                                 "MAX_STATE_BYTES): use at most 1,838,599 groups, or fewer bins "
                                 "or buckets"),
    (dict(num_groups=1_000, task="multiclass", num_classes=10_000),
     "num_groups=1,000, num_classes=10,000 with n_bins=10 makes a state of 2.24 GiB"),
])
def test_bad_num_groups_is_one_line_before_anything_is_allocated(options, text):
    import tracemalloc

    tracemalloc.start()
    try:
        msg = first_error(lambda: CalibrationMetric(**options))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert msg.startswith(text), msg
    assert peak < 1 << 20


def test_groups_only_with_num_groups():
    p, y = data("binary", n=50)
    metric = CalibrationMetric()
    msg = first_error(lambda: metric.update(torch.from_numpy(p), torch.from_numpy(y),
                                            groups=torch.zeros(50, dtype=torch.long)))
    assert msg == ("batch 1: groups given, but this metric was made without num_groups; make "
                   "it with CalibrationMetric(..., num_groups=G) to score G groups")
    metric.update(torch.from_numpy(p), torch.from_numpy(y))
    msg = first_error(lambda: metric.report(correction="bh"))
    assert msg.startswith("correction and alpha are for the verdict of the groups")
    assert metric.report().n == 50

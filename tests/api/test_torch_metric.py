"""fastcal.torch.CalibrationMetric: the report of calibration_report on all the data,
whatever the batching or the number of processes, in constant memory."""

import copy
import dataclasses
from pathlib import Path
import pickle
import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchmetrics = pytest.importorskip("torchmetrics")

import fastcal  # noqa: E402
from fastcal.accumulators.classes import MulticlassAccumulator  # noqa: E402
from fastcal.torch import CalibrationMetric  # noqa: E402
from tests.docs.test_examples import run_example  # noqa: E402,F401 (a fixture: the examples run in this process)

K = 4


def data(kind, n=3_000, seed=0):
    """(preds, target) as numpy arrays of one kind of input."""
    rng = np.random.default_rng(seed)
    if kind in ("binary", "binary32"):
        p = rng.random(n)
        y = (rng.random(n) < p ** 1.3).astype(np.int64)
        return (p.astype(np.float32) if kind == "binary32" else p), y
    if kind == "logits":
        z = rng.normal(0, 2, n)
        return z, (rng.random(n) < 1 / (1 + np.exp(-0.7 * z))).astype(np.int64)
    z = rng.normal(0, 1.5, (n, K))
    y = rng.integers(0, K, n)
    z[np.arange(n), y] += 1.0
    if kind == "multiclass-logits":
        return z, y
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), y


CASES = {
    "binary": ("binary", dict(), dict()),
    "binary float32": ("binary32", dict(), dict()),
    "binary right eps": ("binary", dict(closed="right", eps=1e-6, n_bins=7), dict()),
    "binary edges accuracy": ("binary", dict(edges=[0, 0.2, 0.5, 0.9, 1],
                                             observed="accuracy"), dict()),
    "binary ci": ("binary", dict(ci=0.9, n_boot=15, seed=3), dict()),
    "logits": ("logits", dict(logits=True, ci=0.95, n_boot=0), dict()),
    "multiclass": ("multiclass", dict(n_bins=12), dict(task="multiclass", num_classes=K)),
    "multiclass ci": ("multiclass", dict(ci=0.95, n_boot=10),
                      dict(task="multiclass", num_classes=K)),
    "multiclass logits": ("multiclass-logits", dict(logits=True),
                          dict(task="multiclass", num_classes=K)),
}


def assert_same(got, ref):
    """Every field: ints exactly, floats and tables to 1e-12 relative (1e-15 absolute
    for differences of numbers of order 1, like the other entry points' tests)."""
    assert type(got) is type(ref)
    for f in dataclasses.fields(ref):
        a, b = getattr(got, f.name), getattr(ref, f.name)
        if isinstance(b, dict):
            assert set(a) == set(b), f.name
            for key in b:
                np.testing.assert_allclose(np.asarray(a[key], float), np.asarray(b[key], float),
                                           rtol=1e-12, atol=1e-15, err_msg=f"{f.name}[{key}]")
        elif isinstance(b, (int, np.integer)) or isinstance(b, str) or b is None:
            assert a == b, f.name
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=f.name)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    assert got.n_rows == ref.n_rows


def batches(n, seed):
    """Uneven batch bounds covering [0, n), one of them empty."""
    cuts = np.sort(np.random.default_rng(seed).integers(0, n, 6))
    return list(zip(np.r_[0, cuts], np.r_[cuts, n]))


@pytest.mark.parametrize("case", list(CASES))
def test_same_report_as_calibration_report(case):
    kind, options, task = CASES[case]
    p, y = data(kind)
    ref = fastcal.calibration_report(y, p, ace=False, **options)
    metric = CalibrationMetric(**task, **options)
    for a, b in batches(len(y), 1) + [(0, 0)]:
        metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]))
    assert_same(metric.report(), ref)
    value = metric.compute()  # a 0-d float64 tensor of the report's ECE, like torchmetrics'
    assert value.dtype == torch.float64 and value.shape == ()
    np.testing.assert_allclose(float(value), ref.ece, rtol=1e-12, atol=1e-15)
    if options.get("ci"):
        assert np.isfinite(ref.intervals["ecd"]).all()
        assert np.isfinite(ref.intervals["ece"]).all() == bool(options.get("n_boot"))


def test_nan_policy_omit_counts_the_omitted_rows():
    p, y = data("binary")
    p[[5, 2_000]] = np.nan
    ref = fastcal.calibration_report(y, p, ace=False, nan_policy="omit")
    metric = CalibrationMetric(nan_policy="omit")
    for a, b in batches(len(y), 2):
        metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]))
    rep = metric.report()
    assert rep.n_omitted == 2 and rep.n_rows == len(y)
    assert_same(rep, ref)


def test_forward_returns_the_batch_value_and_accumulates():
    p, y = data("binary")
    metric = CalibrationMetric(value="ecd")
    first = metric(torch.from_numpy(p[:1_000]), torch.from_numpy(y[:1_000]))
    assert first.dtype == torch.float64 and first.shape == ()
    assert float(first) == fastcal.calibration_report(y[:1_000], p[:1_000], ace=False).ecd
    second = metric(torch.from_numpy(p[1_000:]), torch.from_numpy(y[1_000:]))
    assert float(second) == fastcal.calibration_report(y[1_000:], p[1_000:], ace=False).ecd
    ref = fastcal.calibration_report(y, p, ace=False)
    assert_same(metric.report(), ref)
    # the floats of report(); report() is the one-pass report to 1e-12
    # (merging batches is not bit-for-bit the one pass: the block sums round otherwise)
    rep = metric.report()
    assert float(metric.compute()) == rep.ecd
    assert type(metric.ecd) is float and type(metric.ece) is float
    assert metric.ecd == rep.ecd and metric.ece == rep.ece
    np.testing.assert_allclose([metric.ecd, metric.ece], [ref.ecd, ref.ece], rtol=1e-12)


def test_cpu_tensors_are_read_without_a_copy():
    """The fill reads the tensor's own memory: a (1-D, float64) view of it."""
    from fastcal.inputs import validation as v

    t = torch.rand(100, dtype=torch.float64, requires_grad=True)
    arr = v.to_array("y_prob", t.detach())
    assert arr.ctypes.data == t.data_ptr()
    metric = CalibrationMetric()
    metric.update(t, (t.detach() > 0.5).long())  # requires_grad is detached, not refused
    assert metric.report().n == 100


def test_state_size_does_not_depend_on_the_number_of_predictions():
    def state_bytes(metric):
        return sum(x.nbytes for x in metric.metric_state.values())

    small, large = CalibrationMetric(ci=0.95, n_boot=5), CalibrationMetric(ci=0.95, n_boot=5)
    p, y = data("binary", n=20_000)
    small.update(torch.from_numpy(p[:10]), torch.from_numpy(y[:10]))
    for a in range(0, 20_000, 2_000):
        large.update(torch.from_numpy(p[a:a + 2_000]), torch.from_numpy(y[a:a + 2_000]))
    assert state_bytes(small) == state_bytes(large) < 4_000
    mc = CalibrationMetric("multiclass", num_classes=K)
    pk, yk = data("multiclass", n=5_000)
    before = state_bytes(mc)
    mc.update(torch.from_numpy(pk), torch.from_numpy(yk))
    assert state_bytes(mc) == before
    # torchmetrics' own metric keeps every prediction (what this one replaces)
    theirs = torchmetrics.classification.BinaryCalibrationError(n_bins=10)
    theirs.update(torch.from_numpy(p), torch.from_numpy(y))
    assert sum(x.nbytes for x in theirs.confidences) >= 20_000 * 4


def first_error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("bad", ["nan", "range", "labels", "lengths", "multiclass labels",
                                 "multiclass shape"])
def test_bad_input_gets_calibration_reports_message_naming_the_batch(bad):
    multiclass = bad.startswith("multiclass")
    p, y = data("multiclass" if multiclass else "binary", n=400)
    p, y = p.copy(), y.copy()
    if bad == "nan":
        p[[310, 330]] = np.nan
    elif bad == "range":
        p[305] = 1.5
    elif bad == "labels":
        y[399] = 2
    elif bad == "multiclass labels":
        y[350] = K
    bounds = [(0, 100), (100, 300), (300, 400)]
    task = dict(task="multiclass", num_classes=K) if multiclass else {}
    metric = CalibrationMetric(**task)
    for a, b in bounds[:2]:
        metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]))
    before = {name: x.clone() for name, x in metric.metric_state.items()}
    last_p, last_y = p[300:], y[300:]
    if bad == "lengths":
        last_y = last_y[:-1]
        ref_p, ref_y = last_p, last_y  # counts of the batch's own arrays
    elif bad == "multiclass shape":
        last_p = last_p[:, :-1]
        ref_p, ref_y = last_p, last_y
    else:
        ref_p, ref_y = p, y
    msg = first_error(lambda: metric.update(torch.from_numpy(last_p), torch.from_numpy(last_y)))
    ref = first_error(lambda: fastcal.calibration_report(ref_y, ref_p, ace=False))
    assert msg == f"batch 3: {ref}" if bad != "multiclass shape" else msg.startswith("batch 3: ")
    assert "\n" not in msg
    if bad == "multiclass shape":
        assert msg == ("batch 3: y_prob has 3 columns but this accumulator holds 4-class state; "
                       "every update needs shape (n, 4)")
    for name, x in before.items():  # the state is unchanged
        assert torch.equal(getattr(metric, name), x), name
    assert metric.report().n == 300


def test_binary_metric_refuses_class_scores_and_mixed_widths():
    metric = CalibrationMetric()
    msg = first_error(lambda: metric.update(torch.rand(5, 3), torch.zeros(5, dtype=torch.long)))
    assert msg.startswith("batch 1: preds has shape (5, 3), but task='binary' takes shape (n,)")
    for task in ({}, dict(task="multiclass", num_classes=3)):  # soft labels: not a state here
        msg = first_error(lambda task=task: CalibrationMetric(**task).update(
            torch.full((5, 3), 1 / 3), torch.full((5, 3), 1 / 3)) if task else
            CalibrationMetric().update(torch.rand(5), torch.full((5, 3), 1 / 3)))
        assert msg == ("batch 1: target has shape (5, 3), but CalibrationMetric takes labels of "
                       "shape (n,) (0/1, or class indices); soft labels are not supported")
    metric.update(torch.rand(5), torch.ones(5, dtype=torch.long))  # float32
    msg = first_error(lambda: metric.update(torch.rand(5, dtype=torch.float64),
                                            torch.ones(5, dtype=torch.long)))
    assert msg.startswith("batch 3: y_prob is float64 but earlier batches were float32")
    assert metric.report().n == 5
    # states of other widths meet at merge_state (or at compute() under DDP): refused
    other = CalibrationMetric()
    other.update(torch.rand(5, dtype=torch.float64), torch.ones(5, dtype=torch.long))
    msg = first_error(lambda: metric.merge_state(other))
    assert msg.startswith("cannot add arrays of float32 and float64 data")
    assert metric.report().n == 5
    # reset() replaces the state tensors: the width and the rows seen are read off the new
    # ones (the batch's bookkeeping reads the states through NumPy views of them)
    metric.reset()
    metric.update(torch.rand(4, dtype=torch.float64), torch.ones(4, dtype=torch.long))
    p = torch.rand(5, dtype=torch.float64)
    p[2] = float("nan")
    msg = first_error(lambda: metric.update(p, torch.ones(5, dtype=torch.long)))
    assert msg.startswith("batch 2: y_prob contains 1 NaN values (first at index 6)")
    msg = first_error(lambda: metric.update(torch.rand(5), torch.ones(5, dtype=torch.long)))
    assert msg.startswith("batch 3: y_prob is float32 but earlier batches were float64")
    assert metric.report().n == 4


def test_states_are_added_in_place_and_follow_reset_copies_and_pickles():
    """update adds each batch to the state tensors themselves (through views of their
    memory), and a state tensor replaced (reset(), a copy, a pickle) is the one filled."""
    p, y = data("binary32", n=1_200)
    P, Y = torch.from_numpy(p), torch.from_numpy(y)
    metric = CalibrationMetric()
    metric.update(P[:400], Y[:400])
    counts = metric.counts
    metric.update(P[400:800], Y[400:800])
    assert metric.counts is counts
    assert_same(metric.report(), fastcal.calibration_report(y[:800], p[:800], ace=False))
    copied, restored = copy.deepcopy(metric), pickle.loads(pickle.dumps(metric))
    ref = fastcal.calibration_report(y, p, ace=False)
    for other in (copied, restored):
        other.update(P[800:], Y[800:])
        assert_same(other.report(), ref)
    assert metric.report().n == 800  # the copies' batches are their own
    metric.reset()
    metric.update(P[800:], Y[800:])
    assert_same(metric.report(), fastcal.calibration_report(y[800:], p[800:], ace=False))


def test_update_and_forward_number_batches_alike_and_a_bad_batch_changes_nothing():
    p, y = data("binary", n=900)
    P, Y = torch.from_numpy(p), torch.from_numpy(y)
    metric = CalibrationMetric()
    metric.update(P[:300], Y[:300])
    value = metric(P[300:600], Y[300:600])
    assert float(value) == fastcal.calibration_report(y[300:600], p[300:600], ace=False).ece
    before = {name: x.clone() for name, x in metric.metric_state.items()}
    bad = P[600:].clone()
    bad[5] = float("nan")
    msgs = [first_error(lambda call=call: call(bad, Y[600:])) for call in (metric.update, metric)]
    text = "y_prob contains 1 NaN values (first at index 605); pass nan_policy='omit' to drop them"
    assert msgs == [f"batch 3: {text}", f"batch 4: {text}"]
    for name, x in before.items():
        assert torch.equal(getattr(metric, name), x), name
    metric.update(P[600:], Y[600:])
    assert_same(metric.report(), fastcal.calibration_report(y, p, ace=False))


@pytest.mark.parametrize("options, text", [
    (dict(ace=True), "ace=True is not available in CalibrationMetric: ACE needs equal-mass"),
    (dict(strategy="quantile"), "strategy='quantile' is not available in CalibrationMetric"),
    (dict(task="multiclass"), "num_classes must be an integer >= 2 for task='multiclass'; "
                              "got None"),
    (dict(num_classes=3), "num_classes applies to task='multiclass' only"),
    (dict(task="regression"), "task must be one of"),
    (dict(n_bins=0), "n_bins"),
])
def test_bad_options_get_one_line(options, text):
    msg = first_error(lambda: CalibrationMetric(**options))
    assert msg.startswith(text) or text in msg, msg


def test_compute_without_rows_says_so():
    metric = CalibrationMetric(nan_policy="omit")
    with pytest.warns(UserWarning, match="called before the ``update``"):  # torchmetrics' own
        msg = first_error(metric.compute)
    assert msg == "CalibrationMetric: no predictions were given since reset()"
    metric.update(torch.tensor([float("nan")]), torch.tensor([1]))
    assert first_error(metric.compute) == "no samples left: all 1 rows were omitted as NaN"


def test_reset_merge_state_pickle_and_collection():
    p, y = data("binary")
    a, b = CalibrationMetric(ci=0.95), CalibrationMetric(ci=0.95)
    a.update(torch.from_numpy(p[:1_200]), torch.from_numpy(y[:1_200]))
    b.update(torch.from_numpy(p[1_200:]), torch.from_numpy(y[1_200:]))
    restored = pickle.loads(pickle.dumps(a))
    restored.merge_state(b)
    ref = fastcal.calibration_report(y, p, ace=False, ci=0.95, n_boot=0)
    assert_same(restored.report(), ref)
    a.reset()
    assert all(int(getattr(a, name).count_nonzero()) == 0 for name in a._names)
    a.update(torch.from_numpy(p[:10]), torch.from_numpy(y[:10]))
    assert a.report().n == 10

    coll = torchmetrics.MetricCollection({"cal10": CalibrationMetric(),
                                          "cal5": CalibrationMetric(n_bins=5, closed="right")})
    for lo, hi in batches(len(y), 3):
        coll.update(torch.from_numpy(p[lo:hi]), torch.from_numpy(y[lo:hi]))
    out = coll.compute()
    assert_same(coll["cal10"].report(), fastcal.calibration_report(y, p, ace=False))
    assert_same(coll["cal5"].report(), fastcal.calibration_report(y, p, ace=False, n_bins=5,
                                                                  closed="right"))
    assert float(out["cal5"]) == coll["cal5"].report().ece


def test_states_keep_their_dtypes_through_casts():
    p, y = data("binary")
    metric = CalibrationMetric()
    metric.update(torch.from_numpy(p[:1_000]), torch.from_numpy(y[:1_000]))
    metric = metric.to(torch.float16)
    metric.set_dtype(torch.float32)
    metric.half()
    assert metric.sums.dtype == torch.float64 and metric.counts.dtype == torch.int64
    metric.update(torch.from_numpy(p[1_000:]), torch.from_numpy(y[1_000:]))
    assert_same(metric.report(), fastcal.calibration_report(y, p, ace=False))
    metric.reset()  # the defaults were not cast either
    assert metric.sums.dtype == torch.float64


# -- compute() is a scalar tensor of the chosen field; report() the whole report ------

@pytest.mark.parametrize("value, task", [
    ("ece", {}), ("ecd", {}), ("ecd_z", {}), ("brier", {}), ("nll", {}), ("mce", {}),
    ("brier_reliability", {}),
    ("classwise_ece", dict(task="multiclass", num_classes=K)),
    ("esce", dict(task="multiclass", num_classes=K)),
])
def test_compute_returns_the_chosen_field_as_a_0d_float64_tensor(value, task):
    p, y = data("multiclass" if task else "binary", n=600)
    metric = CalibrationMetric(**task, value=value)
    for a, b in batches(len(y), 4):
        metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]))
    out = metric.compute()
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64 and out.shape == ()
    rep = metric.report()
    assert float(out) == getattr(rep, value)
    np.testing.assert_allclose(float(out), getattr(fastcal.calibration_report(y, p, ace=False),
                                                   value), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("options, text", [
    (dict(value="ace"), "value must be one of 'ece', 'esce', 'mce', 'ecd', 'ecd_z', "
                        "'ecd_p_two_sided', 'brier', 'nll', 'ece_l2', 'ece_debiased', "
                        "'brier_reliability', 'brier_resolution', 'brier_uncertainty', "
                        "'classwise_ece', 'classwise_ece_debiased'; got 'ace'"),
    (dict(value="classwise_ece"), "value='classwise_ece' needs task='multiclass' with "
                                  "classwise=True; got task='binary', classwise=True"),
    (dict(task="multiclass", num_classes=3, classwise=False, value="brier_resolution"),
     "value='brier_resolution' of K classes is read off the class-wise state; pass "
     "classwise=True (the default)"),
])
def test_a_value_no_state_gives_is_one_line(options, text):
    assert first_error(lambda: CalibrationMetric(**options)) == text


def test_metric_collection_computes_a_dict_of_tensors():
    """Metrics of one state share it (compute groups); the options state keeps those of
    other bins apart even when an empty first batch leaves every count equal."""
    p, y = data("binary", n=800)
    edges = [0, 0.3, 0.5, 0.7, 0.9, 1]
    coll = torchmetrics.MetricCollection({
        "ece": CalibrationMetric(n_bins=5), "ecd": CalibrationMetric(n_bins=5, value="ecd"),
        "ece_edges": CalibrationMetric(edges=edges)})
    coll.update(torch.from_numpy(p[:0]), torch.from_numpy(y[:0]))
    for a, b in batches(len(y), 5):
        coll.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]))
    out = coll.compute()
    assert sorted(map(sorted, coll.compute_groups.values())) == [["ecd", "ece"], ["ece_edges"]]
    assert all(x.dtype == torch.float64 and x.shape == () for x in out.values())
    ref = fastcal.calibration_report(y, p, n_bins=5, ace=False)
    ref_edges = fastcal.calibration_report(y, p, edges=edges, ace=False)
    np.testing.assert_allclose([float(out["ece"]), float(out["ecd"]), float(out["ece_edges"])],
                               [ref.ece, ref.ecd, ref_edges.ece], rtol=1e-12)


# Lightning's DataLoader fetch under torch 2.13 (third-party, not ours to fix)
@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
def test_lightning_logs_the_metric_with_self_log(tmp_path):
    """A real Trainer: self.log("val_cal", metric) logs compute() at each epoch's end,
    the ECE of calibration_report on that epoch's validation predictions; a metric of
    groups is logged by self.log_dict(metric.compute()), each group's ECE that of by=."""
    import csv

    pl = pytest.importorskip("pytorch_lightning")
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(400, 1)))
    y = torch.from_numpy((rng.random(400) < 1 / (1 + np.exp(-2 * x[:, 0].numpy()))).astype(
        np.int64))

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1, dtype=torch.float64)
            self.val_cal = CalibrationMetric(n_bins=5)
            self.val_groups = CalibrationMetric(n_bins=5, num_groups=2)
            self.seen = []  # per validation batch: (probabilities, labels)

        def training_step(self, batch, i):
            xb, yb = batch
            return torch.nn.functional.binary_cross_entropy_with_logits(self.layer(xb)[:, 0],
                                                                        yb.double())

        def validation_step(self, batch, i):
            xb, yb = batch
            prob = torch.sigmoid(self.layer(xb)[:, 0])
            self.seen.append((prob.numpy().copy(), yb.numpy()))
            self.val_cal.update(prob, yb)
            self.log("val_cal", self.val_cal)
            self.val_groups.update(prob, yb, groups=(xb[:, 0] > 0).long())

        def on_validation_epoch_end(self):
            self.log_dict(self.val_groups.compute())
            self.val_groups.reset()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=100)
    module = Module()
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, log_every_n_steps=1,
                         logger=pl.loggers.CSVLogger(tmp_path), enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0)
    trainer.fit(module, loader, loader)
    with open(Path(trainer.logger.log_dir) / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("val_cal")]
    logged = [float(r["val_cal"]) for r in rows]
    assert len(logged) == 2 and len(module.seen) == 8
    side = (x[:, 0] > 0).long().numpy()
    for epoch, value in enumerate(logged):
        seen = module.seen[4 * epoch:4 * epoch + 4]
        ref = fastcal.calibration_report(np.concatenate([t for _, t in seen]),
                                         np.concatenate([q for q, _ in seen]), n_bins=5,
                                         ace=False, by=side)
        np.testing.assert_allclose(value, ref.overall.ece, rtol=1e-12)
        np.testing.assert_allclose([float(rows[epoch][k]) for k in ("all", "group_0", "group_1")],
                                   [ref.overall.ece, ref[0].ece, ref[1].ece], rtol=1e-12)


# -- merging: only states of the same options, only arrays a state holds ------------

@pytest.mark.parametrize("mine, theirs, name, shown", [
    (dict(edges=[0, 0.3, 1]), dict(edges=[0, 0.5, 1]), "edges", ("[0.0, 0.3, 1.0]",
                                                                   "[0.0, 0.5, 1.0]")),
    ({}, dict(task="multiclass", num_classes=K), "task", ("'binary'", "'multiclass'")),
    (dict(task="multiclass", num_classes=K), dict(task="multiclass", num_classes=3),
     "num_classes", ("4", "3")),
    ({}, dict(n_bins=15), "n_bins", ("10", "15")),
    ({}, dict(closed="right"), "closed", ("'left'", "'right'")),
    ({}, dict(logits=True), "logits", ("False", "True")),
    (dict(task="multiclass", num_classes=K), dict(task="multiclass", num_classes=K,
                                                  classwise=False), "classwise",
     ("True", "False")),
    (dict(ci=0.9, n_boot=4), dict(ci=0.9, n_boot=5), "n_boot", ("4", "5")),
    ({}, dict(eps=1e-6), "eps", ("0.0", "1e-06")),
])
def test_merge_state_refuses_a_metric_of_other_options_naming_it(mine, theirs, name, shown):
    p, y = data("multiclass" if mine.get("task") else "binary", n=300)
    a = CalibrationMetric(**mine)
    a.update(torch.from_numpy(p), torch.from_numpy(y))
    before = {k: x.clone() for k, x in a.metric_state.items()}
    b = CalibrationMetric(**theirs)
    msg = first_error(lambda: a.merge_state(b))
    assert msg == (f"cannot merge a CalibrationMetric made with {name}={shown[1]} into one "
                   f"made with {name}={shown[0]}; merge only metrics made with the same options")
    for k, x in before.items():
        assert torch.equal(getattr(a, k), x), k
    # what only chooses what is read off the state may differ
    c = CalibrationMetric(**mine, value="ecd", observed="accuracy")
    c.update(torch.from_numpy(p), torch.from_numpy(y))
    a.merge_state(c)
    assert a.report().n == 600


@pytest.mark.parametrize("change, text", [
    (("counts", (2, 1), -3), "arrays['counts'] has 1 negative values (first at index (2, 1): "
                             "-3); counts are >= 0"),
    (("sums", (1, 0), float("nan")), "arrays['sums'] has 1 NaN or infinite values (first at "
                                     "index (1, 0): nan); sums are finite (those of "
                                     "logarithm terms may be +inf)"),
    (("totals", 4, -float("inf")), "arrays['totals'] has 1 NaN or infinite values (first at "
                                   "index 4: -inf); sums are finite (those of logarithm "
                                   "terms may be +inf)"),
    (("n_rows", (), -1_000), "arrays['n_rows'] is -1000; row counts are >= 0"),
    (("n_rows", (), 301), "arrays['n_rows'] is 301 but arrays['counts'] holds 300 rows and "
                          "arrays['n_omitted'] 0; the rows of a state are those counted and "
                          "those omitted"),
])
def test_merge_state_of_a_dict_passes_the_add_arrays_checks(change, text):
    p, y = data("binary", n=300)
    metric = CalibrationMetric()
    metric.update(torch.from_numpy(p), torch.from_numpy(y))
    incoming = {k: x.clone() for k, x in metric.metric_state.items()}
    name, at, value = change
    incoming[name][at] = value
    before = {k: x.clone() for k, x in metric.metric_state.items()}
    assert first_error(lambda: metric.merge_state(incoming)) == text
    for k, x in before.items():
        assert torch.equal(getattr(metric, k), x), k
    other = CalibrationMetric(n_bins=5)  # a dict of another metric's states
    other.update(torch.from_numpy(p), torch.from_numpy(y))
    assert first_error(lambda: metric.merge_state(dict(other.metric_state))) == (
        "cannot merge a state made with another n_bins than this metric's (n_bins=10): its "
        "'options' differ; merge only states of metrics made with the same options")
    arrays = fastcal.CalibrationAccumulator().update(y, p).to_arrays()  # an accumulator's
    metric.merge_state({k: torch.from_numpy(x) for k, x in arrays.items()})
    assert metric.report().n == 600


def test_an_empty_batch_leaves_the_float_width_open():
    p, y = data("binary", n=200)
    metric = CalibrationMetric()
    metric.update(torch.zeros(0, dtype=torch.float32), torch.zeros(0, dtype=torch.long))
    metric.update(torch.from_numpy(p), torch.from_numpy(y))  # float64
    assert_same(metric.report(), fastcal.calibration_report(y, p, ace=False))
    acc = fastcal.CalibrationAccumulator().update([], np.zeros(0, np.float32))
    assert acc.edge_dtype is None and acc.update(y, p).edge_dtype == "float64"


def test_a_state_too_large_is_refused_before_it_is_allocated():
    import tracemalloc

    tracemalloc.start()
    try:
        msg = first_error(lambda: CalibrationMetric("multiclass", num_classes=10**7))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert msg == ("num_classes=10,000,000 with n_bins=10 makes a state of 2.24 GiB, mostly "
                   "class-wise counters (10,000,000 classes x n_bins x 24 bytes); a state may "
                   "take at most 1 GiB (fastcal.accumulators.settings.MAX_STATE_BYTES): pass "
                   "classwise=False (top-label state only) or fewer bins")
    assert peak < 1 << 20
    assert CalibrationMetric("multiclass", num_classes=10**7, classwise=False).report  # fits
    msg = first_error(lambda: fastcal.CalibrationAccumulator(n_classes=10**7))
    assert msg.startswith("n_classes=10,000,000 with n_bins=10 makes a state of 2.24 GiB")
    # K from the data: refused before the fill sizes the state
    P = np.full((2, 100), 0.01)
    msg = first_error(lambda: fastcal.calibration_report([0, 1], P, n_bins=10**6))
    assert msg.startswith("y_prob's 100 columns with n_bins=1,000,000 makes a state of 2.29 GiB")
    msg = first_error(lambda: fastcal.CalibrationAccumulator(n_bins=1_000, n_boot=50_000))
    assert msg == ("n_bins=1,000 makes a state of 1.49 GiB, mostly bootstrap replicates "
                   "(n_boot=50,000 x n_bins x 32 bytes); a state may take at most 1 GiB "
                   "(fastcal.accumulators.settings.MAX_STATE_BYTES): use fewer replicates or "
                   "bins")


def test_metrics_pickled_when_compute_was_the_report_load():
    """Metrics pickled by fastcal at a1ef6a5 (compute() returned the report), from
    tests/inputs/test_bins.py's _pickled_data(): CalibrationMetric(n_bins=7, ci=0.9, n_boot=4)
    updated with (p, y), and CalibrationMetric("multiclass", num_classes=3, n_bins=5) with
    (P, yk); compute() had been called on both before pickling."""
    from tests.inputs.test_bins import _pickled_data

    y, p, yk, P = _pickled_data()
    made = {"binary": (CalibrationMetric(n_bins=7, ci=0.9, n_boot=4), p, y),
            "multiclass": (CalibrationMetric("multiclass", num_classes=3, n_bins=5), P, yk)}
    for name, (now, x, t) in made.items():
        with open(Path(__file__).parents[1] / "data" / "pickled_metric" / f"{name}.pkl", "rb") as f:
            old = pickle.load(f)
        now.update(torch.from_numpy(x), torch.from_numpy(t))
        assert_same(old.report(), now.report())  # to 1e-12: the fill's threads may differ
        np.testing.assert_allclose(float(old.compute()), now.report().ece, rtol=1e-12)
        old.merge_state(now)
        assert old.report().n == 1_000


# -- the accumulator's arrays (the hook the metric's states are) ------------------

@pytest.mark.parametrize("kind, options", [
    ("binary", dict(n_boot=4, ace_buckets=16)),
    ("logits", dict(logits=True)),
    ("multiclass", dict(n_classes=K)),
])
def test_accumulator_arrays_add_up_to_the_merged_state(kind, options):
    p, y = data("multiclass" if kind == "multiclass" else kind, n=500)
    a = fastcal.CalibrationAccumulator(**options).update(y[:200], p[:200])
    b = fastcal.CalibrationAccumulator(**options).update(y[200:], p[200:], start=200)
    summed = {k: x + b.to_arrays()[k] for k, x in a.to_arrays().items()}
    merged = (a + b).to_arrays()
    assert set(summed) == set(merged)
    for name, x in merged.items():
        if name == "edge_dtype":  # states per float width: nonzero where one was seen
            np.testing.assert_array_equal(summed[name] > 0, x > 0)
        else:
            np.testing.assert_array_equal(summed[name], x, err_msg=name)
    fresh = fastcal.CalibrationAccumulator(**options)
    fresh.add_arrays(summed)
    assert fresh.edge_dtype == (a + b).edge_dtype
    for name, x in fresh.to_arrays().items():
        np.testing.assert_array_equal(x, merged[name], err_msg=name)
    got, ref = fresh.report(ci=0.9), (a + b).report(ci=0.9)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    assert (got.ecd, got.ece, got.intervals["ecd"]) == (ref.ecd, ref.ece, ref.intervals["ecd"])


def test_add_arrays_refuses_what_does_not_fit_and_changes_nothing():
    acc = fastcal.CalibrationAccumulator(n_bins=5).update([0, 1], np.array([0.2, 0.9]))
    arrays = acc.to_arrays()
    before = acc.to_arrays()
    msg = first_error(lambda: acc.add_arrays({k: x for k, x in arrays.items() if k != "sums"}))
    assert msg.startswith("arrays must have the names ['counts', 'edge_dtype', 'n_omitted'")
    wrong = dict(arrays, counts=arrays["counts"].astype(np.float64))
    msg = first_error(lambda: acc.add_arrays(wrong))
    assert msg == ("arrays['counts'] has shape (6, 3) and dtype float64; this state's has "
                   "shape (6, 3) and dtype int64")
    other = fastcal.CalibrationAccumulator(n_bins=5).update([0], np.array([0.2], np.float32))
    msg = first_error(lambda: acc.add_arrays(other.to_arrays()))
    assert msg.startswith("cannot add arrays of float64 and float32 data")
    for name, x in acc.to_arrays().items():
        np.testing.assert_array_equal(x, before[name], err_msg=name)
    msg = first_error(MulticlassAccumulator().to_arrays)  # K not known yet
    assert "the arrays of a multi-class state need its number of classes" in msg


# -- DDP: gloo on loopback, one shard of uneven size per process -----------------

DDP = {2: ("binary", dict(ci=0.95, n_boot=8), {}, (700, 2_300)),
       3: ("multiclass-logits", dict(logits=True, n_bins=8),
           dict(task="multiclass", num_classes=K), (1_000, 150, 1_850))}


def _ddp_worker(rank, world, port, out_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        kind, options, task, shards = DDP[world]
        p, y = data(kind)
        lo = sum(shards[:rank])
        hi = lo + shards[rank]
        metric = CalibrationMetric(**task, **options)
        for a in range(lo, hi, 400):  # batches of 400 and a short last one
            b = min(a + 400, hi)
            metric.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]), start=a)
        rep = metric.report()
        with open(f"{out_dir}/rank{rank}.pkl", "wb") as f:
            pickle.dump((rep, int(metric.n_rows)), f)
        if world == 2:
            with open(f"{out_dir}/cases{rank}.pkl", "wb") as f:
                pickle.dump(_ddp_cases(rank), f)
            # no replicates: a group numbers its rows on each process (see the test)
            grouped = CalibrationMetric(**dict(options, n_boot=0), num_groups=DDP_GROUPS)
            for a in range(lo, hi, 400):
                b = min(a + 400, hi)
                grouped.update(torch.from_numpy(p[a:b]), torch.from_numpy(y[a:b]),
                               groups=torch.from_numpy(ddp_groups(len(y))[a:b]))
            with open(f"{out_dir}/groups{rank}.pkl", "wb") as f:
                pickle.dump((grouped.report(), grouped.compute(), int(grouped.n_rows.sum())), f)
    finally:
        dist.destroy_process_group()


# the world of 2 also runs a metric of groups (ids in [0, 4); group 2 gets no rows)
DDP_GROUPS = 4


def ddp_groups(n):
    return np.random.default_rng(5).choice([0, 1, 3], n).astype(np.int64)


# Two ranks whose metrics differ, or whose batches do: what each rank's compute() gives
DDP_CASES = {
    "n_bins": ({}, dict(n_bins=16)),
    "num_classes": (dict(task="multiclass", num_classes=K), dict(task="multiclass",
                                                                  num_classes=3)),
    "empty float32 batch": ({}, {}),
    "num_groups": (dict(num_groups=3), dict(num_groups=4)),
    "groups or none": ({}, dict(num_groups=3)),
    "task": ({}, dict(task="multiclass", num_classes=K)),  # other states: last (see below)
}


def _ddp_cases(rank):
    """Each case in turn on both ranks (a refused sync leaves both ready for the next; the
    states of "task" have other names, so torchmetrics' own sync would hang: it is last)."""
    out = {}
    for case, options in DDP_CASES.items():
        metric = CalibrationMetric(**options[rank])
        if options[rank].get("num_classes") == 3:
            rng = np.random.default_rng(1)
            p, y = rng.dirichlet(np.ones(3), 600), rng.integers(0, 3, 600)
        else:
            p, y = data("multiclass" if options[rank].get("task") else "binary", n=600)
        if case == "empty float32 batch" and rank == 1:
            metric.update(torch.zeros(0, dtype=torch.float32), torch.zeros(0, dtype=torch.long))
        rows = slice(300 * rank, 300 * rank + 300)
        groups = torch.zeros(300, dtype=torch.long) if metric.num_groups else None
        metric.update(torch.from_numpy(p[rows]), torch.from_numpy(y[rows]), groups=groups)
        try:
            out[case] = float(metric.compute())
        except (ValueError, RuntimeError) as err:
            out[case] = f"{type(err).__name__}: {err}"
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(world, out_dir):
    """Start ``world`` ranks of ``_ddp_worker``, forked from this process.

    Called in a fresh interpreter (see the test): forking the test process itself,
    which holds the threads of earlier tests (Dask, thread pools), hung a rank in
    the full suite; a spawned rank would import torch again (~10-20 s when busy).
    """
    import torch.multiprocessing as mp

    mp.start_processes(_ddp_worker, args=(world, free_port(), out_dir), nprocs=world,
                       join=True, start_method="fork")


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """The folder of one run of ``world`` ranks (each world runs once per module)."""
    import os
    import subprocess
    import sys

    runs = {}

    def run(world):
        if world not in runs:
            out = tmp_path_factory.mktemp(f"ddp{world}")
            root = Path(__file__).resolve().parents[2]
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root),
                                                               os.environ.get("PYTHONPATH", "")]))
            code = f"from tests.api.test_torch_metric import run_ddp; run_ddp({world}, {str(out)!r})"
            proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-3000:]
            runs[world] = out
        return runs[world]

    return run


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_every_rank_computes_the_report_of_all_the_data(ddp_run, world):
    out = ddp_run(world)
    kind, options, task, shards = DDP[world]
    p, y = data(kind)
    assert sum(shards) == len(y)
    ref = fastcal.calibration_report(y, p, ace=False, **options)
    for rank in range(world):
        with open(out / f"rank{rank}.pkl", "rb") as f:
            rep, local_rows = pickle.load(f)
        assert local_rows == shards[rank]  # report() left the rank's own state in place
        assert_same(rep, ref)


def test_ddp_other_options_are_one_line_on_every_rank_and_empty_batches_add_nothing(ddp_run):
    out = ddp_run(2)
    cases = []
    for rank in range(2):
        with open(out / f"cases{rank}.pkl", "rb") as f:
            cases.append(pickle.load(f))
    lines = {
        "n_bins": "n_bins=10 on rank 0; n_bins=16 on rank 1",
        "num_classes": "num_classes=4 on rank 0; num_classes=3 on rank 1",
        "task": "task='binary' on rank 0; task='multiclass' on rank 1",
        "num_groups": "num_groups=3 on rank 0; num_groups=4 on rank 1",
        "groups or none": "num_groups=None on rank 0; num_groups=3 on rank 1",
    }
    for case, line in lines.items():
        for rank in range(2):
            assert cases[rank][case] == (
                f"ValueError: CalibrationMetric options differ between processes: {line}; make "
                "the metric with the same options on every process"), (case, rank)
    p, y = data("binary", n=600)
    ece = fastcal.calibration_report(y, p, ace=False).ece
    for rank in range(2):
        np.testing.assert_allclose(cases[rank]["empty float32 batch"], ece, rtol=1e-12)


def test_ddp_groups_every_rank_reports_each_group_of_all_the_data(ddp_run):
    out = ddp_run(2)
    kind, options, _, shards = DDP[2]
    p, y = data(kind)
    g = ddp_groups(len(y))
    # each group numbers its rows on each process: bootstrap replicates would be other
    # draws than one process's, so the run keeps none (the t-intervals of ci= are equal)
    ref = fastcal.calibration_report(y, p, by=g, ace=False, **dict(options, n_boot=0))
    for rank in range(2):
        with open(out / f"groups{rank}.pkl", "rb") as f:
            rep, values, local_rows = pickle.load(f)
        assert local_rows == shards[rank]
        assert list(rep.keys()) == [0, 1, 3]
        for key in rep.keys():
            assert_same(rep[key], ref[key])
        assert_same(rep.overall, ref.overall)
        assert np.isfinite(rep[3].intervals["ecd"]).all()
        assert rep.verdict == ref.verdict
        assert float(values["group_3"]) == pytest.approx(ref[3].ece, rel=1e-12)
        assert np.isnan(float(values["group_2"]))


# -- docs: the docstring example and the example script run -----------------------

def test_docstring_example():
    import doctest

    import fastcal.torch

    result = doctest.testmod(fastcal.torch)
    assert result.attempted > 0 and result.failed == 0


def test_torch_eval_loop_example(tmp_path, run_example):  # noqa: F811 - the fixture imported above
    import json

    out = run_example("torch_eval_loop.py", tmp_path)
    data = json.loads((tmp_path / "torch_eval_loop.json").read_text())
    assert [e["epoch"] for e in data["epochs"]] == [1, 2, 3]
    verdicts = ("over-confident", "under-confident", "consistent with calibration")
    for e in data["epochs"]:
        assert e["n"] == 20_000 and e["verdict"] in verdicts
        assert f"ECD {e['ecd']:+.4f}" in out and f"ECE {e['ece']:.4f}" in out
        assert f"verdict: {e['verdict']}" in out
    assert data["matches_report"] is True and data["state_bytes"] < 4_000
    assert "bytes for 20,000 predictions; matches calibration_report on all rows: True" in out


# -- the GPU fill, under Numba's CUDA simulator (a subprocess: see test_cuda_sim.py) ----

SIM_CODE = """
import numpy as np, torch
from numba import cuda
import fastcal
from fastcal.torch import CalibrationMetric

rng = np.random.default_rng(0)
p = rng.random(40); y = (rng.random(40) < p).astype(np.int64)
m = CalibrationMetric(n_bins=5)
m.update(cuda.to_device(p[:25]), cuda.to_device(y[:25]))
m.update(torch.from_numpy(p[25:]), torch.from_numpy(y[25:]))  # CPU and GPU batches mix
ref = fastcal.calibration_report(y, p, n_bins=5, ace=False)
got = m.report()
assert got.n == 40 and np.array_equal(got.bins["count"], ref.bins["count"])
assert np.isclose(got.ecd, ref.ecd, rtol=1e-12) and np.isclose(got.ece, ref.ece, rtol=1e-12)
P = rng.dirichlet(np.ones(3), 30); Y = rng.integers(0, 3, 30)
mc = CalibrationMetric("multiclass", num_classes=3)
mc.update(cuda.to_device(P), cuda.to_device(Y))
ref = fastcal.calibration_report(Y, P, ace=False)
assert np.isclose(mc.report().ecd, ref.ecd, rtol=1e-12)
p[3] = np.nan
try:
    m.update(cuda.to_device(p), cuda.to_device(y))
except ValueError as err:
    print(err)
"""


# a simulator run of its own (about 12 s): beside the suite
@pytest.mark.background
def test_gpu_fill_under_the_cuda_simulator():
    import os
    import subprocess
    import sys

    pytest.importorskip("numba.cuda")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", SIM_CODE], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == ("batch 3: y_prob contains 1 NaN values (first at index 43); "
                                   "pass nan_policy='omit' to drop them")

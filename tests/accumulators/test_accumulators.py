"""One accumulator class per kind behind the CalibrationAccumulator front door (issue 11)."""

import pickle

import numpy as np
import pytest

import fastcal
from fastcal.accumulators import checks as ck
from fastcal.accumulators.binary import BinaryAccumulator, BinaryLogitAccumulator
from fastcal.accumulators.calibration import accumulator_for
from fastcal.accumulators.classes import MulticlassAccumulator
from fastcal.accumulators.soft import SoftLabelAccumulator
from fastcal.soft import soft_label_report
from tests.api.test_multiclass import mc_data
from tests.reports_close import assert_reports_close


def soft_data(n, k, seed):
    rng = np.random.default_rng(seed)
    t = rng.dirichlet(np.ones(k), size=n)
    p = rng.dirichlet(np.ones(k) * 2, size=n)
    return t, p


def binary_data(n, seed):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    return (rng.random(n) < p).astype(np.uint8), p


KINDS = {
    "binary": lambda n, s: binary_data(n, s),
    "logits": lambda n, s: (binary_data(n, s)[0], np.random.default_rng(s).normal(0, 3, n)),
    "multiclass": lambda n, s: mc_data(n, 4, seed=s),
    "soft": lambda n, s: soft_data(n, 4, s),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_has_its_class_and_sum_of_parts_equals_the_whole(kind):
    y, p = KINDS[kind](3_000, 5)
    opts = dict(n_bins=7, logits=kind == "logits", n_boot=4 if kind != "soft" else 0, seed=2)
    whole = accumulator_for(kind, **opts).update(y, p)
    assert type(whole) is {"binary": BinaryAccumulator, "logits": BinaryLogitAccumulator,
                           "multiclass": MulticlassAccumulator,
                           "soft": SoftLabelAccumulator}[kind]
    front = fastcal.CalibrationAccumulator(**opts).update(y, p)
    assert type(front.state) is type(whole)
    cuts = [0, 1, 900, 901, 2500, 3000]
    parts = [accumulator_for(kind, **opts).update(y[a:b], p[a:b], start=a)
             for a, b in zip(cuts[:-1], cuts[1:])]
    merged = sum(reversed(parts))  # __radd__ of 0, any order
    assert merged.n_rows == 3000 and merged.n == whole.n
    assert_reports_close(merged.report(), whole.report())
    if kind != "soft":
        np.testing.assert_array_equal(merged.counts, whole.counts)
        np.testing.assert_array_equal(merged.boot_counts, whole.boot_counts)
    # copies are independent, states pickle
    c = whole.copy()
    c.update(y[:10], p[:10])
    assert c.n_rows == 3010 and whole.n_rows == 3000
    back = pickle.loads(pickle.dumps(front))
    assert_reports_close(back.report(), front.report())
    assert repr(back).startswith("CalibrationAccumulator(")


def test_states_of_different_kinds_or_settings_do_not_merge():
    y, p = binary_data(100, 1)
    b = BinaryAccumulator(n_bins=5).update(y, p)
    with pytest.raises(TypeError, match="can only merge a BinaryAccumulator"):
        b + BinaryLogitAccumulator(n_bins=5)
    with pytest.raises(ValueError, match="different bins, closed side or eps"):
        b + BinaryAccumulator(n_bins=6)
    with pytest.raises(ValueError, match="different bootstrap settings"):
        b + BinaryAccumulator(n_bins=5, n_boot=3)
    with pytest.raises(ValueError, match="different ACE bucket statistics"):
        b + BinaryAccumulator(n_bins=5, ace_buckets=1 << 14)
    with pytest.raises(ValueError, match="float32 and float64|float64 and float32"):
        b + BinaryAccumulator(n_bins=5).update(y, p.astype(np.float32))
    yk, pk = mc_data(50, 3, seed=1)
    m = MulticlassAccumulator().update(yk, pk)
    with pytest.raises(ValueError, match="logits and probabilities"):
        m + MulticlassAccumulator(logits=True)
    with pytest.raises(ValueError, match="different numbers of classes: 3 and 4"):
        m + MulticlassAccumulator().update(*mc_data(50, 4, seed=1))
    t, q = soft_data(20, 3, 1)
    s = SoftLabelAccumulator().update(t, q)
    with pytest.raises(ValueError, match="different eps, logits or renormalize"):
        s + SoftLabelAccumulator(eps=1e-6)
    with pytest.raises(ValueError, match="different numbers of classes"):
        fastcal.CalibrationAccumulator().update(t, q) + fastcal.CalibrationAccumulator().update(yk, pk)
    # a state of one kind refuses a batch of another with a message, not a crash
    with pytest.raises(ValueError, match="holds binary state of 100 rows"):
        b.update(yk, pk)
    with pytest.raises(ValueError, match="label distributions"):
        s.update(yk, pk)


def test_soft_label_state_merges_and_equals_the_one_call_report():
    t, p = soft_data(5_000, 5, 3)
    t[17] = np.nan
    whole = soft_label_report(t, p, nan_policy="omit")
    acc = fastcal.CalibrationAccumulator(nan_policy="omit")
    for a in range(0, 5_000, 700):
        acc += fastcal.CalibrationAccumulator(nan_policy="omit").update(t[a:a + 700],
                                                                       p[a:a + 700])
    rep = acc.report()
    assert rep.n == 4_999 and rep.n_omitted == 1 and rep.n_classes == 5
    assert_reports_close(rep, whole)
    # errors name the global row (start=) and leave the state as it was
    bad = p[:10].copy()
    bad[4] = [0.5, 0.6, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"1 rows that do not sum to 1 .*first at row 1004"):
        acc.update(t[:10], bad, start=1000)
    assert acc.report().to_dict() == rep.to_dict()


def test_one_table_words_every_kernel_check():
    """Every kind of every table gives its own sentence with count and global row."""
    p = np.array([[0.2, 0.8], [0.5, 0.5]])
    y = np.array([0, 1])
    for table in (ck.BINARY, ck.BINARY_LOGITS, ck.MULTICLASS, ck.MULTICLASS_RENORMALIZE,
                  ck.MULTICLASS_LOGITS, ck.SOFT, ck.SOFT_LOGITS):
        seen = set()
        for check in table.checks:
            checks = np.zeros(2 * table.n_kinds, np.int64)
            checks[check.kind] = 3
            checks[table.n_kinds + check.kind] = 1
            msg = ck.first_error(table, checks, "raise", 100, y=y, p=p, t=p)
            assert "3 " in msg and "101" in msg and msg not in seen
            seen.add(msg)
            if check.nan:
                assert ck.first_error(table, checks, "omit", 100, y=y, p=p, t=p) is None
        assert ck.first_error(table, np.zeros(2 * table.n_kinds, np.int64), "raise") is None


def test_front_door_checks_settings_across_kinds_and_shapes_on_device_calls():
    yk, pk = mc_data(50, 3, seed=2)
    m = fastcal.CalibrationAccumulator(n_bins=5).update(yk, pk)
    # an empty front door still has bins: merging it into K-class state checks them
    with pytest.raises(ValueError, match="different bins, closed side or eps"):
        m + fastcal.CalibrationAccumulator(n_bins=6)
    assert (m + fastcal.CalibrationAccumulator(n_bins=5)).report().n == 50
    # 1-D rows offered to K-class state (host arrays: refused before any GPU work,
    # with update()'s message)
    y1, p1 = np.array([0, 1, 0, 1]), np.array([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match=r"^y_prob must have shape \(n_samples, n_classes\); "
                                         r"got shape \(4,\)$") as on_device:
        m.update_device(y1, p1)
    with pytest.raises(ValueError) as on_host:
        m.update(y1, p1)
    assert str(on_device.value) == str(on_host.value)
    t, q = soft_data(10, 3, 2)
    with pytest.raises(ValueError, match=r"ci=\) are not available for soft labels"):
        SoftLabelAccumulator().update(t, q).report(ci=0.95)


def _softmax_rows(rng, n, k):
    z = rng.standard_normal((n, k)) * 2
    P = np.exp(z - z.max(axis=1, keepdims=True))
    return z, P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["binary logits", "K=10 float64", "K=10 logits"])
def test_ece_of_a_million_float64_rows_does_not_depend_on_the_split(kind):
    """ECE is a small difference of two large per-bin sums. With full float64
    values (sigmoid of logits, float64 or softmaxed rows) one long plain sum per
    bin moved it by 2e-12 relative between one part and two, which is also what
    the GPU's order of additions did; the kernels' compensated flushes keep it
    within 1e-12 for any split."""
    rng = np.random.default_rng(0)
    if kind == "binary logits":
        n = 3_000_000
        p = rng.standard_normal(n) * 3
        y = (rng.random(n) < 1 / (1 + np.exp(-p))).astype(np.uint8)
    else:
        z, P = _softmax_rows(rng, 1_000_000, 10)
        p = z if kind == "K=10 logits" else P
        y = (rng.random(len(P))[:, None] < P.cumsum(axis=1)).argmax(axis=1)
    logits = "logits" in kind

    def ece(parts):
        accs = []
        for idx in np.array_split(np.arange(len(y)), parts):
            acc = fastcal.CalibrationAccumulator(logits=logits)
            acc.update(y[idx], p[idx])
            accs.append(acc)
        return sum(accs[1:], accs[0]).report().ece

    whole = ece(1)
    for parts in (2, 7, 64):
        assert ece(parts) == pytest.approx(whole, rel=1e-12, abs=0), parts


@pytest.mark.parametrize("kind, options", [
    ("binary", dict(n_boot=3, ace_buckets=16)),
    ("logits", dict(logits=True)),
    ("multiclass", dict(n_classes=3)),
])
def test_chunk_arrays_are_what_update_adds_and_leave_the_state(kind, options):
    rng = np.random.default_rng(4)
    if kind == "multiclass":
        p = rng.dirichlet(np.ones(3), 300)
        y = rng.integers(0, 3, 300)
    else:
        p = rng.normal(0, 2, 300) if kind == "logits" else rng.random(300).astype(np.float32)
        y = (rng.random(300) < 0.5).astype(np.int64)
    state = fastcal.CalibrationAccumulator(**options).update(y[:100], p[:100]).state
    before = state.to_arrays()
    chunk = state.chunk_arrays(y[100:], p[100:])  # rows numbered from the state's n_rows
    for name, x in state.to_arrays().items():
        np.testing.assert_array_equal(x, before[name], err_msg=name)  # the state unchanged
    updated = state.copy().update(y[100:], p[100:]).to_arrays()
    assert set(updated) <= set(chunk)
    for name, x in updated.items():
        if name == "edge_dtype":  # the chunk's float width; none for sigmoids (float64 edges)
            widths = {"binary": [1, 0], "logits": [0, 0], "multiclass": [0, 1]}
            assert chunk[name].tolist() == widths[kind]
        else:
            np.testing.assert_array_equal(before[name] + chunk[name], x, err_msg=name)
    bad = p[100:].copy()
    bad[[7, 9]] = np.nan
    with pytest.raises(ValueError) as got:
        state.chunk_arrays(y[100:], bad, start=1_000)
    with pytest.raises(ValueError) as ref:
        state.copy().update(y[100:], bad, start=1_000)
    assert str(got.value) == str(ref.value) and "first at" in str(got.value)
    assert "1007" in str(got.value)

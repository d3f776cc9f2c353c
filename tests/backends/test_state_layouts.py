"""The state layouts (fastcal.backends.layout): each kind's arrays declared once,
and copying, merging, ``to_arrays`` / ``add_arrays`` with their checks, pickling
and the backends' fills all following from that one table."""

import functools
import operator
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from fastcal import backends
from fastcal.accumulators.binary import BinaryAccumulator, BinaryLogitAccumulator
from fastcal.accumulators.classes import MulticlassAccumulator
from fastcal.accumulators.gaussian import GaussianAccumulator
from fastcal.accumulators.soft import SoftLabelAccumulator
from fastcal.backends import cpu
from fastcal.backends.layout import FILLED, LAYOUTS, PARTS, Dims
from fastcal.backends.spec import FillSpec
from fastcal.inputs.binning import Bins

PARTS_ON = dict(n_boot=3, ace_buckets=16, smooth=True, ecce=True)
K = 3


def _rows(kind, n, seed):
    """Update arguments of ``n`` rows of ``kind`` (some omitted or NaN)."""
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        E = rng.normal(size=(n, 3, 2))
        C = np.broadcast_to(np.eye(2) * 1.5, (n, 3, 2, 2)).copy()
        if n > 2:
            E[1, 2, 0] = np.nan  # a NaN row: its group's sum is NaN (propagate)
        return E, C
    p = rng.random(n)
    y = (rng.random(n) < p).astype(np.uint8)
    if kind in ("binary", "logits"):
        p = np.log(p / (1 - p)) if kind == "logits" else p
        if n > 3:
            p[3] = np.nan  # omitted
        return y, p
    P = rng.dirichlet(np.ones(K), size=n)
    if kind == "soft":
        return rng.dirichlet(np.ones(K), size=n), P
    yk = rng.integers(0, K, n)
    if n > 2:
        P[2, 0] = np.nan  # omitted
    return yk, P


def _new(kind):
    if kind == "binary":
        return BinaryAccumulator(n_bins=5, nan_policy="omit", **PARTS_ON)
    if kind == "logits":
        return BinaryLogitAccumulator(n_bins=5, nan_policy="omit", **PARTS_ON)
    if kind == "multiclass":
        return MulticlassAccumulator(n_bins=4, n_classes=K, nan_policy="omit", **PARTS_ON)
    if kind == "soft":
        return SoftLabelAccumulator(n_classes=K)
    return GaussianAccumulator(2, shape=(3,))


def _filled(kind, n, seed, start=0):
    acc = _new(kind)
    if n == 0:
        return acc
    args = _rows(kind, n, seed)
    if kind == "gaussian":
        return acc.update(*args, nan_policy="propagate")
    return acc.update(*args, start=start)


def _same(a, b):
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_to_arrays_are_the_declared_arrays(kind):
    acc = _filled(kind, 40, 1)
    dims = acc._dims()
    want = [(a.name, a.shape(dims), a.dtype) for a in LAYOUTS[kind] if a.on(dims)]
    got = [(name, x.shape, x.dtype) for name, x in acc.to_arrays().items()]
    assert got == want
    # a part that is off is left out, its (empty) array kept
    if kind in ("binary", "logits", "multiclass"):
        off = type(acc)(n_bins=5, **({"n_classes": K} if kind == "multiclass" else {}))
        assert not {a.name for a in PARTS} & set(off.to_arrays())
        assert off.boot_counts.shape == (0, 5, 3) and off.smooth_n.shape == (0,)


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(0, 60), min_size=1, max_size=3), seed=st.integers(0, 99))
def test_arrays_of_a_merge_are_the_sums_of_the_arrays(kind, cuts, seed):
    bounds = [0, *sorted(cuts)]
    parts = [_filled(kind, b - a, seed + i, start=a)
             for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    arrays = [p.to_arrays() for p in parts]
    merged = sum(parts)
    total = {name: functools.reduce(operator.add, (a[name] for a in arrays))
             for name in arrays[0]}
    got = merged.to_arrays()
    assert list(got) == list(total)
    for name in got:  # the same additions in the same order: equal to the last bit
        if name == "edge_dtype":  # summed, it counts the states per width
            np.testing.assert_array_equal(got[name] > 0, total[name] > 0)
        else:
            np.testing.assert_array_equal(got[name], total[name], err_msg=name)
    # the summed arrays read back make the merged state; copies and pickles are their own
    _same(_new(kind).add_arrays(total).to_arrays(), got)
    _same(pickle.loads(pickle.dumps(merged)).to_arrays(), got)
    copy = merged.copy()
    copy += parts[0]
    _same(merged.to_arrays(), got)


def _bad_values(a, x):
    """(bad array, what the message says) for each kind of value ``a`` refuses."""
    if a.values == "counts":
        bad = x.copy()
        bad[(0,) * x.ndim] = -1
        return [(bad, "row counts are >= 0" if x.ndim == 0 else "1 negative values")]
    allowed = np.zeros(x.shape, bool)
    if a.inf is not None:
        allowed[a.inf] = True
    out = []
    if not allowed.flat[0]:  # +inf where no logarithm term is summed
        inf = x.copy()
        inf.flat[0] = np.inf
        out.append((inf, "infinite values"))
    if a.values == "sums":
        nan = x.copy()
        nan.flat[-1] = np.nan
        out.append((nan, "NaN or infinite values"))
    return out


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_add_arrays_refuses_each_bad_value_naming_the_array(kind):
    acc = _filled(kind, 30, 2)
    good = acc.to_arrays()
    before = acc.to_arrays()
    dims = acc._dims()
    for a in LAYOUTS[kind]:
        if not a.on(dims):
            continue
        x = good[a.name]
        other = np.float32 if x.dtype.kind == "i" else np.int64
        cases = [({**good, a.name: np.zeros(x.shape + (1,), x.dtype)}, "has shape"),
                 ({**good, a.name: np.zeros(x.shape, other)}, "and dtype"),
                 ({k: v for k, v in good.items() if k != a.name}, "arrays must have the names")]
        cases += [({**good, a.name: bad}, what) for bad, what in _bad_values(a, x)]
        for arrays, what in cases:
            with pytest.raises(ValueError) as err:
                acc.add_arrays(arrays)
            msg = str(err.value)
            assert what in msg, (a.name, msg)
            if "names" not in what:
                assert msg.startswith(f"arrays[{a.name!r}]"), msg
            _same(acc.to_arrays(), before)  # unchanged on error
    if kind in ("binary", "logits", "multiclass"):
        # the sums of logarithm terms may be +inf (a certain prediction that was wrong)
        ok = {**good, "sums": good["sums"].copy()}
        ok["sums"][0, 1] = np.inf
        assert np.isinf(acc.copy().add_arrays(ok).sums[0, 1])


@pytest.mark.parametrize("kind", ["binary", "logits", "multiclass", "soft"])
def test_backends_fill_the_declared_arrays_from_values(kind):
    # the backend is handed the batch and the state's spec, never the state
    y, p = _rows(kind, 50, 3)
    batch = backends.resolve(y, p, logits=kind == "logits")
    spec = FillSpec(kind, Bins(4), computed64=kind != "binary", nan_policy="omit",
                    logits=kind == "logits", n_boot=2 if kind != "soft" else 0,
                    ace_buckets=16 if kind != "soft" else 0, smooth=kind != "soft",
                    ecce=kind != "soft")
    filled = cpu.fill(batch, spec)
    dims = Dims.of(spec, K if kind == "multiclass" else None)
    table = {a.name: a for a in FILLED[kind]}
    want = {"counts", "sums", "totals", "checks"} if kind != "soft" else {"totals", "checks"}
    want |= {"fine_counts", "fine_p"} if kind == "binary" else set()  # one pass fills them
    want |= {"class_counts", "class_sums"} if kind == "multiclass" else set()
    assert set(filled) == want
    parts = cpu.fill_parts(batch, spec, 0, filled)
    assert set(parts) == ({a.name for a in PARTS if a.on(dims)} - set(filled)
                          if kind != "soft" else set())
    for name, x in {**filled, **parts}.items():
        assert (x.shape, x.dtype) == (table[name].shape(dims), table[name].dtype), name

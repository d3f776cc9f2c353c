"""Every layout of an input reaches the kernels as one array type, so no layout
compiles them again: C or Fortran order, strided, reversed and read-only views
(a scikit-learn ``predict_proba``, a DataFrame's values, a pyarrow column, a
memory map), and class indices held as floats, all use the kernels the first
report compiled."""

import importlib
import pkgutil

import numba
import numpy as np
import pytest

import fastcal
from fastcal import _kernels


def _signatures():
    """The compiled signatures of every CPU kernel, by name."""
    out = {}
    for info in pkgutil.iter_modules(_kernels.__path__):
        if "cuda" in info.name:
            continue
        module = importlib.import_module(f"fastcal._kernels.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher):
                out[f"{info.name}.{name}"] = set(obj.signatures)
    return out


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.ones(4), 2_000)
    y = rng.integers(0, 4, 2_000)
    p = np.ascontiguousarray(P[:, 1])
    yb = (rng.random(2_000) < p).astype(np.int64)
    # the first reports, of C-ordered writable arrays, compile what they need
    fastcal.calibration_report(yb, p)
    fastcal.calibration_report(y, P)
    return y, P, yb, p


VARIANTS = {
    "Fortran (n, K)": lambda y, P, yb, p: (y, np.asfortranarray(P)),
    "strided (n, K)": lambda y, P, yb, p: (y[::3], P[::3]),
    "reversed (n, K)": lambda y, P, yb, p: (y[::-1], P[::-1]),
    "columns of a wider array": lambda y, P, yb, p: (y, np.hstack([P, P])[:, 2:6]),
    "read-only (n, K)": lambda y, P, yb, p: (_read_only(y), _read_only(P)),
    # whole-number float labels (a pandas column, float16 targets) are class indices
    "float labels (n, K)": lambda y, P, yb, p: (y.astype(np.float64), P),
    "float16 labels (n, K)": lambda y, P, yb, p: (y.astype(np.float16)[::-1], P[::-1]),
    "strided p": lambda y, P, yb, p: (yb[::2], p[::2]),
    "reversed p": lambda y, P, yb, p: (yb[::-1], p[::-1]),
    "a column of (n, K)": lambda y, P, yb, p: (yb, P[:, 1]),
    "read-only p": lambda y, P, yb, p: (_read_only(yb), _read_only(p)),
    "bool labels": lambda y, P, yb, p: (yb.astype(bool)[::-1], p[::-1]),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_no_layout_compiles_the_kernels_again(data, name):
    y, P = VARIANTS[name](*data)
    before = _signatures()
    got = fastcal.calibration_report(y, P)
    after = _signatures()
    assert {k: after[k] - before.get(k, set()) for k in after if after[k] != before.get(k)} == {}
    ref = fastcal.calibration_report(np.array(y), np.array(P))  # the same values, C order
    assert got.to_dict() == ref.to_dict()


def test_the_callers_arrays_keep_their_flags(data):
    y, P, yb, p = data
    F = np.asfortranarray(P)
    fastcal.calibration_report(y, F)
    fastcal.calibration_report(yb, p)
    assert p.flags.writeable and F.flags.writeable and F.flags.f_contiguous


@pytest.mark.parametrize("kind,options", [("logits", {}), ("multiclass", {}),
                                          ("multiclass", {"column": 1, "above": 0.1})])
def test_the_ranked_pairs_made_for_equal_mass_bins_are_of_the_gates_type(data, kind, options):
    # logits, K-class rows and one class's column are ranked through arrays made on the way:
    # read-only and C-contiguous like the gate's, ACE's passes over them use the kernels of
    # a binary report (writable ones compiled each pass again, seconds each)
    from fastcal.backends.cpu import ranking_pair
    from fastcal.inputs.validation import as_class_labels, as_dtype, as_labels_1d

    y, P, yb, p = data
    if kind == "logits":
        pair = ranking_pair(as_labels_1d(yb), as_dtype(np.log(p / (1 - p)), np.float64),
                            kind=kind)
    else:
        pair = ranking_pair(as_class_labels(y, P.shape[0]), as_dtype(P, np.float64), kind=kind,
                            **options)
    assert [(a.dtype.str, a.flags.c_contiguous, a.flags.writeable) for a in pair] == [
        ("|u1", True, False), ("<f8", True, False)]

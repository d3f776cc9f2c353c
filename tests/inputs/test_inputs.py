"""Inputs people have: dtypes, layouts, pandas, polars, pyarrow, torch (no copies where promised)."""


import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import fastcal
from fastcal.inputs.convert import to_numpy

try:
    import polars as pl
except ImportError:  # pragma: no cover - polars is in the test extra
    pl = None
try:
    import torch
except ImportError:  # pragma: no cover - torch is in the test extra
    torch = None

needs_polars = pytest.mark.skipif(pl is None, reason="polars not installed (pip install polars)")
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed (pip install torch==2.13.0)")


def data(n=400, k=4, seed=0):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(k), size=n)
    y = rng.integers(0, k, n)
    return y, P


def same_report(a, b):
    for name in ("ece", "mce", "ecd", "brier", "nll", "ace"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-12, abs=1e-15), name
    if hasattr(b, "classwise_ece"):
        assert a.classwise_ece == pytest.approx(b.classwise_ece, rel=1e-12)


def test_no_library_is_imported_for_numpy_input():
    y, P = data()
    fastcal.calibration_report(y, P)
    fastcal.calibration_report(y == 1, P[:, 1] / P[:, :2].sum(axis=1))
    # fastcal itself never imports these (the test modules above may have)
    import fastcal.inputs.convert as fi

    with open(fi.__file__) as fh:
        src = fh.read()
    for lib in ("pandas", "polars", "pyarrow", "torch"):
        assert f"\nimport {lib}" not in src


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64, np.uint8])
def test_probability_dtypes(dtype):
    y, P = data()
    if np.dtype(dtype).kind in "iu":
        P = np.eye(4)[y[::-1]]  # one-hot integer predictions
    Pd = P.astype(dtype)
    ref = fastcal.calibration_report(y, Pd.astype(np.float64), renormalize=True)
    got = fastcal.calibration_report(y, Pd, renormalize=True)
    # float16 goes through float32, whose edges are float32-rounded: same bins here
    same_report(got, ref)


def test_numpy_layouts_are_not_copied():
    y, P = data()
    F = np.asfortranarray(P)
    assert to_numpy("y_prob", F) is F
    view = np.zeros((400, 8))[:, ::2]
    assert to_numpy("y_prob", view) is view


def test_pandas_series_and_dataframe_without_copy():
    y, P = data()
    df = pd.DataFrame(P, columns=list("abcd"), copy=False)
    out = to_numpy("y_prob", df)
    assert out.shape == (400, 4) and np.shares_memory(out, P)
    ys = pd.Series(y, copy=False)
    assert np.shares_memory(to_numpy("y_true", ys), y)
    same_report(fastcal.calibration_report(ys, df), fastcal.calibration_report(y, P))
    p1 = P[:, 1] / P[:, :2].sum(axis=1)
    yb = (y % 2).astype(np.int64)
    same_report(fastcal.calibration_report(pd.Series(yb), pd.Series(p1)),
                fastcal.calibration_report(yb, p1))


def test_pandas_missing_values_follow_nan_policy():
    y, P = data(50)
    df = pd.DataFrame(P).astype("Float64")
    df.iloc[7, 2] = pd.NA
    with pytest.raises(ValueError, match=r"y_prob contains NaN in 1 rows \(first at row 7\)"):
        fastcal.calibration_report(y, df)
    r = fastcal.calibration_report(y, df, nan_policy="omit")
    keep = np.arange(50) != 7
    same_report(r, fastcal.calibration_report(y[keep], P[keep]))
    yn = pd.Series(y, dtype="Int64")
    yn.iloc[3] = pd.NA
    with pytest.raises(ValueError, match=r"y_true contains 1 NaN labels \(first at row 3\)"):
        fastcal.calibration_report(yn, P)


@needs_polars
def test_polars_series_and_dataframe():
    y, P = data()
    s = pl.Series("y", y)
    out = to_numpy("y_true", s)
    assert np.shares_memory(out, s.to_numpy())  # a view of polars' buffer
    df = pl.DataFrame(P, schema=list("abcd"))
    same_report(fastcal.calibration_report(s, df), fastcal.calibration_report(y, P))
    with_null = pl.Series("p", [0.2, None, 0.7])
    with pytest.raises(ValueError, match=r"y_prob contains 1 NaN values \(first at index 1\)"):
        fastcal.ecd([0, 1, 1], with_null)


def test_pyarrow_arrays_tables_and_fixed_size_lists():
    y, P = data()
    flat = pa.array(P.ravel())
    fsl = pa.FixedSizeListArray.from_arrays(flat, 4)
    out = to_numpy("y_prob", fsl)
    assert out.shape == (400, 4)
    assert np.shares_memory(out, flat.to_numpy(zero_copy_only=True))
    ya = pa.array(y)
    assert np.shares_memory(to_numpy("y_true", ya), ya.to_numpy(zero_copy_only=True))
    same_report(fastcal.calibration_report(ya, fsl), fastcal.calibration_report(y, P))
    # a sliced fixed-size list keeps its offset
    same_report(fastcal.calibration_report(ya[100:], fsl[100:]),
                fastcal.calibration_report(y[100:], P[100:]))
    table = pa.table({c: P[:, i] for i, c in enumerate("abcd")})
    same_report(fastcal.calibration_report(ya, table), fastcal.calibration_report(y, P))
    chunked = pa.chunked_array([y[:150], y[150:]])
    one = pa.chunked_array([fsl])
    same_report(fastcal.calibration_report(chunked, one), fastcal.calibration_report(y, P))
    with pytest.raises(ValueError, match=r"y_prob contains 1 NaN values \(first at index 2\)"):
        fastcal.ecd([0, 1, 1], pa.array([0.2, 0.5, None]))


@needs_torch
def test_torch_cpu_tensors_without_copy():
    y, P = data()
    t = torch.from_numpy(P)
    out = to_numpy("y_prob", t)
    assert np.shares_memory(out, P)
    g = torch.tensor(P, requires_grad=True)
    ref = fastcal.calibration_report(y, P)
    same_report(fastcal.calibration_report(torch.from_numpy(y), g), ref)
    # non-contiguous: the transpose of a transposed copy, and a column slice
    tt = torch.from_numpy(np.ascontiguousarray(P.T)).T
    assert not tt.is_contiguous()
    same_report(fastcal.calibration_report(y, tt), ref)
    wide = torch.zeros(400, 8, dtype=torch.float64)
    wide[:, ::2] = t
    same_report(fastcal.calibration_report(y, wide[:, ::2]), ref)
    # logits straight from a model, in float32 and bfloat16
    z = torch.log(t).float()
    a = fastcal.calibration_report(y, z, logits=True)
    b = fastcal.calibration_report(y, z.numpy(), logits=True)
    same_report(a, b)
    zb = z.to(torch.bfloat16)
    c = fastcal.ecd(y, zb, logits=True)
    assert c == pytest.approx(fastcal.ecd(y, zb.float().numpy(), logits=True), rel=1e-12)


@needs_torch
def test_torch_tensor_on_other_device_is_refused():
    if not hasattr(torch, "device"):
        pytest.skip("old torch")
    t = torch.empty(3, 2, device="meta")
    with pytest.raises(ValueError, match=r"y_prob is a torch tensor on device meta"):
        fastcal.ecd([0, 1, 1], t)


def test_unreadable_inputs_name_the_argument():
    with pytest.raises(ValueError, match=r"y_prob could not be read as a numeric array"):
        fastcal.ecd([0, 1], [[0.5, 0.5], [0.2]])
    with pytest.raises(ValueError, match=r"y_true must hold integer class indices"):
        fastcal.ecd(["a", "b"], [[0.5, 0.5], [0.2, 0.8]])


def test_integer_and_bool_labels_share_one_compiled_signature():
    # labels are read as uint8 or float64 only: a first call with int64 labels does not
    # compile the kernels again, and wrapped values (256 -> 0, -1 -> 255) stay bad labels
    from fastcal._kernels import binary as kb
    from fastcal.inputs.validation import as_labels_1d

    p = np.array([0.1, 0.8, 0.3, 0.6, 0.9])
    # other tests of this process may call the kernels with other label types directly:
    # only the signatures this test adds count
    before = set(kb.fill_range.signatures + kb.fill_range_fine.signatures)
    for dtype in (np.uint8, np.int64, np.int32, np.int8, np.uint16, bool):
        y = np.array([0, 1, 0, 1, 1]).astype(dtype)
        assert as_labels_1d(y).dtype == np.uint8, dtype
        fastcal.calibration_report(y, p, n_bins=5)
    sigs = set(kb.fill_range.signatures + kb.fill_range_fine.signatures) - before
    label_types = {str(sig[1]) for sig in sigs}
    assert label_types <= {"array(uint8, 1d, C)", "array(float64, 1d, C)"}, label_types
    for y in (np.array([0, 1, 256, -1, 1], np.int64), np.array([0, 1, 2, 255, 1], np.uint8)):
        with pytest.raises(ValueError, match=r"2 labels other than 0 and 1 \(first at index 2\)"):
            fastcal.calibration_report(y, p, n_bins=5)

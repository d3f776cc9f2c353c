"""Turn the arrays people have into NumPy arrays, without copying when possible.

Accepted: NumPy arrays of any numeric dtype and layout (C, Fortran, strided
views), Python sequences, pandas Series/DataFrame, polars Series/DataFrame,
pyarrow Array/ChunkedArray/Table/RecordBatch (including a fixed-size-list
column for (N, K) data) and torch tensors on the CPU. Each library is imported
only when one of its objects is passed: the type is recognised by the name of
its module, so fastcal never imports pandas, polars, pyarrow or torch itself.

When nothing is copied:

- NumPy: never copied here (the gate's ``kernel_view`` copies layouts other
  than C order once, so that the kernels compile for one array type).
- pandas: a numeric Series without missing values, and a DataFrame whose
  columns share one numeric dtype (pandas keeps them in one block; the result
  is a Fortran-ordered view).
- polars: a numeric Series without nulls; a DataFrame is copied by polars.
- pyarrow: a numeric array without nulls, a ChunkedArray with one chunk, a
  fixed-size-list array without nulls (viewed as (N, K)); several chunks or
  Table columns are concatenated (one copy).
- torch: a CPU tensor of a dtype NumPy has (``detach()`` first if it requires
  grad; the view shares memory). bfloat16 is converted to float32. CUDA/MPS
  tensors raise: move them to the CPU yourself so the transfer is explicit.

Missing values (pandas NA, polars/arrow nulls) become NaN, so that
``nan_policy`` decides what happens to them; that conversion copies.
A NumPy masked array is read as its data when nothing is masked; masked
values are refused with a message (fill them with NaN and use
``nan_policy="omit"`` to drop them).
"""

import sys

import numpy as np


def _module(x):
    return type(x).__module__.split(".", 1)[0]


def to_numpy(name, x):
    """``x`` as a NumPy array (a view when the layout allows); ValueError naming ``name``."""
    if "numpy.ma" in sys.modules and isinstance(x, np.ma.MaskedArray):  # (no masked array without it)
        return _from_masked(name, x)
    if isinstance(x, np.ndarray):
        return x
    mod = _module(x)
    if mod == "torch":
        return _from_torch(name, x)
    if mod == "pandas":
        return _from_pandas(x)
    if mod == "polars":
        return _from_polars(x)
    if mod == "pyarrow":
        return _from_arrow(name, x)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists, objects numpy cannot read
        msg = (f"{name} could not be read as a numeric array ({type(x).__name__}): {exc}")
        raise ValueError(msg) from exc
    if arr.dtype == object:
        msg = (f"{name} could not be read as a numeric array: got {type(x).__name__} "
               f"that NumPy reads as dtype object (ragged rows or mixed types?)")
        raise ValueError(msg)
    return arr


def _from_masked(name, x):
    """A masked array's data when nothing is masked; masked values are refused
    (their data are arbitrary, and fastcal does not guess what they mean)."""
    mask = np.ma.getmaskarray(x)
    n = int(np.count_nonzero(mask))
    if n:
        first = int(np.flatnonzero(mask.reshape(-1))[0])
        msg = (f"{name} is a masked array with {n} masked values (first at flat index "
               f"{first}); fastcal does not read masks: pass {name}.filled(np.nan) with "
               f"nan_policy='omit' to drop those rows, or {name}.data to score every value")
        raise ValueError(msg)
    return np.asarray(x.data)


def _from_torch(name, t):
    import torch

    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    if not t.is_cpu:  # (is_cpu and requires_grad: attributes, cheaper than t.device)
        msg = (f"{name} is a torch tensor on device {t.device}; move it to the CPU first "
               f"({name}.cpu()) so that the copy is explicit")
        raise ValueError(msg)
    if t.requires_grad:
        t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    return t.numpy()


def _from_pandas(x):
    import pandas as pd

    if isinstance(x, pd.DataFrame):
        dtypes = set(x.dtypes)
        if len(dtypes) == 1 and isinstance(next(iter(dtypes)), np.dtype):
            return x.to_numpy()
        return _nullable_to_float(x)
    if isinstance(x, (pd.Series, pd.Index)):
        if isinstance(x.dtype, np.dtype):
            return x.to_numpy()
        return _nullable_to_float(x)
    return np.asarray(x)


def _nullable_to_float(x):
    """pandas extension dtypes (Int64, Float32, boolean, ...): NA -> NaN, one copy."""
    has_na = bool(np.asarray(x.isna()).any())
    if not has_na:
        return x.to_numpy(dtype=np.result_type(*[_np_dtype(d) for d in _dtypes(x)]))
    return x.to_numpy(dtype=np.float64, na_value=np.nan)


def _dtypes(x):
    import pandas as pd

    return list(x.dtypes) if isinstance(x, pd.DataFrame) else [x.dtype]


def _np_dtype(d):
    if isinstance(d, np.dtype):
        return d
    nd = getattr(d, "numpy_dtype", None)
    if nd is None:
        msg = f"unsupported column dtype {d}"
        raise ValueError(msg)
    return nd


def _from_polars(x):
    import polars as pl

    if isinstance(x, pl.DataFrame):
        if any(x[c].null_count() for c in x.columns):
            return x.to_numpy().astype(np.float64)
        return x.to_numpy()
    if isinstance(x, pl.Series):
        if x.null_count():
            return x.cast(pl.Float64).fill_null(float("nan")).to_numpy()
        return x.to_numpy()
    return np.asarray(x)


def _from_arrow(name, x):
    import pyarrow as pa

    if isinstance(x, (pa.Table, pa.RecordBatch)):
        if x.num_columns == 1:
            return _from_arrow(name, x.column(0))
        cols = [_from_arrow(name, x.column(i)) for i in range(x.num_columns)]
        if any(c.ndim != 1 for c in cols):
            msg = f"{name}: a table with several columns must have one number per cell"
            raise ValueError(msg)
        return np.column_stack(cols)
    if isinstance(x, pa.ChunkedArray):
        if x.num_chunks == 1:
            return _from_arrow(name, x.chunk(0))
        if x.num_chunks == 0:
            return _from_arrow(name, pa.array([], type=x.type))
        return _from_arrow(name, pa.concat_arrays(x.chunks))
    if isinstance(x, pa.Array):
        if pa.types.is_fixed_size_list(x.type):
            if x.null_count:
                msg = f"{name} has {x.null_count} null rows; fill or drop them first"
                raise ValueError(msg)
            k = x.type.list_size
            flat = x.flatten()  # respects the array's offset
            vals = _from_arrow(name, flat)
            return vals.reshape(len(x), k)
        if x.null_count:
            return x.to_numpy(zero_copy_only=False).astype(np.float64)
        if pa.types.is_boolean(x.type):
            return x.to_numpy(zero_copy_only=False)
        return x.to_numpy(zero_copy_only=True)
    return np.asarray(x)

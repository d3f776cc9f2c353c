"""The input gate: what the user passed, resolved once into a typed batch.

``resolve`` turns labels and predictions (NumPy, pandas, polars, pyarrow,
torch, lists) into validated arrays and decides their kind; nothing else in
the package asks again. Kinds:

- ``"binary"``: y 0/1 (n,), p probabilities of class 1 (n,)
- ``"logits"``: y 0/1 (n,), p logits of class 1 (n,)
- ``"multiclass"``: y class indices (n,), p (n, K) probabilities or logits
- ``"soft"``: y (n, K) label distributions, p (n, K) probabilities or logits
"""

from dataclasses import dataclass

import numpy as np

from fastcal.inputs import validation as v

KINDS = ("binary", "logits", "multiclass", "soft")


@dataclass
class Batch:
    kind: str
    y: np.ndarray
    p: np.ndarray

    @property
    def n(self):
        return self.p.shape[0]


def is_soft(y_true):
    """True if y_true is 2-D (one label distribution per row)."""
    shape = getattr(y_true, "shape", None)
    if shape is None:
        shape = v.to_array("y_true", y_true).shape
    return len(shape) == 2


def resolve(y_true, y_prob, *, logits=False, multiclass=False):
    """The validated batch of (y_true, y_prob); ``multiclass`` insists on (n, K)
    class indices. A 2-D ``y_true`` holds soft labels (kind "soft")."""
    p = v.to_array("y_prob", y_prob)
    if not multiclass and is_soft(y_true):
        t, p = v.check_soft_pair(y_true, p, logits)
        return Batch("soft", t, p)
    if p.ndim == 2 or multiclass:
        y, p = v.check_class_pair(y_true, p, logits)
        return Batch("multiclass", y, p)
    y, p = v.check_pair(y_true, p)
    return Batch("logits" if logits else "binary", y, p)


def resolve_device(y_true, y_prob, *, logits=False, multiclass=False):
    """``resolve`` for a fill on the GPU: the same shape and dtype checks and
    messages, without reading the data. Arrays in GPU memory become Numba
    device views, cast there only where the kernels need another dtype
    (float16 as float32, integer and bool probabilities as float64, float16
    labels as float32; bool labels are viewed as uint8); host arrays are
    converted as ``resolve`` converts them, for the fill to stream. Soft labels
    come back as they are (kind "soft"): they have no GPU kernel."""
    from fastcal import cuda

    def get(name, x):
        return cuda.as_device_array(name, x) if cuda.is_device_array(x) else v.to_array(name, x)

    y, p = get("y_true", y_true), get("y_prob", y_prob)
    kind = v.input_kind(y, p, logits=logits, multiclass=multiclass)
    if kind == "soft":
        return Batch(kind, y, p)
    y_dtype = v.class_label_dtype(y.dtype) if kind == "multiclass" else v.label_dtype(y.dtype)
    if cuda.is_device_array(y):  # class indices are read on the GPU in their own dtype
        y_dtype = v.label_dtype(y.dtype)

    def typed(x, dtype):
        return cuda.as_dtype(x, dtype) if cuda.is_device_array(x) else v.as_dtype(x, dtype)

    return Batch(kind, typed(y, y_dtype), typed(p, v.prob_dtype("y_prob", p.dtype)))

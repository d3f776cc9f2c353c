"""The input gate: what the user passed, resolved once into a typed batch.

``resolve`` turns labels and predictions (NumPy, pandas, polars, pyarrow,
torch, lists, or arrays in GPU memory) into validated arrays, decides their
kind and where they are filled; nothing after the gate asks either question
again. Kinds:

- ``"binary"``: y 0/1 (n,), p probabilities of class 1 (n,)
- ``"logits"``: y 0/1 (n,), p logits of class 1 (n,)
- ``"multiclass"``: y class indices (n,), p (n, K) probabilities or logits
- ``"soft"``: y (n, K) label distributions, p (n, K) probabilities or logits

Devices: ``"cpu"`` (host numpy arrays) or ``"cuda"`` (Numba device views of
arrays in GPU memory, or host arrays that the GPU backend streams to the
device; see :mod:`fastcal.backends`).
"""

from dataclasses import dataclass, field

import numpy as np

from fastcal.inputs import device as dev
from fastcal.inputs import validation as v

KINDS = ("binary", "logits", "multiclass", "soft")
DEVICES = ("cpu", "cuda")

SOFT_ON_GPU = ("device='cuda': soft labels (a 2-D y_true, one label distribution per row) "
               "have no GPU kernel; score them on the host (device=None or 'cpu', or "
               "update() with host arrays)")


@dataclass
class Batch:
    """Validated labels ``y`` and predictions ``p`` of one ``kind``, filled on ``device``."""

    kind: str
    y: object
    p: object
    device: str = "cpu"
    _host: tuple = field(default=None, repr=False)

    @property
    def n(self):
        return int(self.p.shape[0])

    @property
    def dtype(self):
        """The numpy dtype of ``p`` (GPU arrays too)."""
        return dev.dtype_of(self.p)

    def host(self):
        """(y, p) as host arrays: themselves on the CPU, a copy (made once) of GPU data."""
        if self.device == "cpu":
            return self.y, self.p
        if self._host is None:
            self._host = (dev.to_host("y_true", self.y), dev.to_host("y_prob", self.p))
        return self._host

    def context(self):
        """What error messages quote: the rows, on the host (GPU data: copied only
        when a message needs it)."""
        if self.device == "cpu":
            return {"y": self.y, "p": self.p, "t": self.y}
        return {"y": lambda: self.host()[0], "p": lambda: self.host()[1],
                "t": lambda: self.host()[0]}


def is_soft(y_true):
    """True if y_true is 2-D (one label distribution per row)."""
    shape = getattr(y_true, "shape", None)
    if shape is None:
        shape = v.to_array("y_true", y_true).shape
    return len(shape) == 2


def resolve(y_true, y_prob, *, logits=False, multiclass=False, device=None):
    """The validated batch of (y_true, y_prob); ``multiclass`` insists on (n, K)
    class indices. A 2-D ``y_true`` holds soft labels (kind "soft").

    ``device``: None fills where ``y_prob`` is (arrays in GPU memory on the
    GPU; soft labels, which have no GPU kernel, on the host); "cpu" copies GPU
    data to the host; "cuda" fills on the GPU, streaming host data to it.
    """
    if device is not None:
        v.check_choice("device", device, DEVICES)
    on_gpu = dev.is_device_array(y_prob)
    if device == "cuda" or (device is None and on_gpu
                            and (multiclass or not is_soft(y_true))):
        return _resolve_cuda(y_true, y_prob, logits=logits, multiclass=multiclass)
    if on_gpu:
        y_prob = dev.to_host("y_prob", y_prob)
    if dev.is_device_array(y_true):
        y_true = dev.to_host("y_true", y_true)
    p = v.to_array("y_prob", y_prob)
    if not multiclass and is_soft(y_true):
        t, p = v.check_soft_pair(y_true, p, logits)
        return Batch("soft", t, p)
    if p.ndim == 2 or multiclass:
        y, p = v.check_class_pair(y_true, p, logits)
        return Batch("multiclass", y, p)
    y, p = v.check_pair(y_true, p)
    return Batch("logits" if logits else "binary", y, p)


def _resolve_cuda(y_true, y_prob, *, logits, multiclass):
    """The batch of a fill on the GPU: the same shape and dtype checks and
    messages as on the host, without reading the data. Arrays in GPU memory
    become Numba device views, cast there only where the kernels need another
    dtype (float16 as float32, integer and bool probabilities as float64,
    float16 labels as float32; bool labels are viewed as uint8); host arrays
    are converted as on the host, for the GPU backend to stream."""
    def get(name, x):
        return dev.as_device_array(name, x) if dev.is_device_array(x) else v.to_array(name, x)

    y, p = get("y_true", y_true), get("y_prob", y_prob)
    kind = v.input_kind(y, p, logits=logits, multiclass=multiclass)
    if kind == "soft":
        raise ValueError(SOFT_ON_GPU)
    y_dtype = v.class_label_dtype(y.dtype) if kind == "multiclass" else v.label_dtype(y.dtype)
    if dev.is_device_array(y):  # class indices are read on the GPU in their own dtype
        y_dtype = v.label_dtype(y.dtype)

    def typed(x, dtype):
        return dev.as_dtype(x, dtype) if dev.is_device_array(x) else v.as_dtype(x, dtype)

    return Batch(kind, typed(y, y_dtype), typed(p, v.prob_dtype("y_prob", p.dtype)), "cuda")


__all__ = ["Batch", "DEVICES", "KINDS", "resolve"]

"""The gate of Gaussian predictions: errors (..., d) and covariances (..., d, d).

``resolve_gaussian`` checks their shapes, as :func:`fastcal.inputs.batch.resolve`
does for labels and probabilities: host data becomes float64 arrays; data in
GPU memory is checked (``check_device_array``, ``check_device_shapes``)
without reading it and brought there by the GPU backend
(:func:`fastcal.backends.resolve_gaussian` is the door that does both).
"""

from dataclasses import dataclass

import numpy as np

from fastcal.inputs import device as dev
from fastcal.inputs.batch import OnDevice


@dataclass
class GaussianBatch(OnDevice):
    """Checked ``errors`` and ``covs`` of dimension ``d``, filled on ``device``;
    ``host()``: (errors, covs) as float64 host arrays (GPU data: copied, once)."""

    errors: object
    covs: object
    d: int

    fields = names = ("errors", "covs")


def gaussian_placement(errors, covs, *, device=None):
    """Where a Gaussian pair is filled: "cuda" when either array is in GPU
    memory (unless ``device="cpu"``), else "cpu"."""
    gpu = device != "cpu" and (dev.is_device_array(errors) or dev.is_device_array(covs))
    return "cuda" if gpu else "cpu"


def resolve_gaussian(errors, covs, group_shape=()):
    """The checked batch of host (errors, covs); ``group_shape``: the axes before
    the last that an accumulator bins by."""
    errors, covs = as_float_array("errors", errors), as_float_array("covs", covs)
    return GaussianBatch(errors, covs, check_shapes(errors, covs, group_shape))


def check_device_array(name, x):
    """``x`` (a device view, or a float64 host array) if its dtype holds real numbers."""
    if dev.dtype_of(x).kind not in "biuf":
        msg = f"{name} must be an array of real numbers, got dtype {x.dtype} in GPU memory"
        raise ValueError(msg)
    return x


def check_device_shapes(errors, covs, group_shape=()):
    """``d`` of (errors, covs) filled on the GPU, from their shapes alone."""
    return check_shapes(_Shape(errors), _Shape(covs), group_shape)


def as_float_array(name, value):
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"{name} must be an array of real numbers; converting it failed: {exc}"
        raise ValueError(msg) from None
    return arr


def check_shapes(errors, covs, group_shape=()):
    """Validate ``errors`` (..., d) against ``covs`` (..., d, d); return d."""
    if errors.ndim < 1 + len(group_shape):
        msg = (
            f"errors must have at least {1 + len(group_shape)} dimension(s) "
            f"(..., d), got shape {errors.shape}"
        )
        raise ValueError(msg)
    d = errors.shape[-1]
    if d < 1:
        msg = f"errors must have a last axis of length d >= 1, got shape {errors.shape}"
        raise ValueError(msg)
    expected = errors.shape + (d,)
    if covs.shape != expected:
        msg = (
            f"covs has shape {covs.shape} but errors has shape {errors.shape}; "
            f"expected covs.shape == errors.shape + (d,) = {expected}"
        )
        raise ValueError(msg)
    if group_shape:
        found = errors.shape[-1 - len(group_shape):-1]
        if found != tuple(group_shape):
            msg = (
                f"errors has shape {errors.shape}; expected its axes before the last "
                f"to end with the accumulator shape {tuple(group_shape)}, found {found}"
            )
            raise ValueError(msg)
    return d


class _Shape:
    """Shape and ndim of an array anywhere (host or GPU), for ``check_shapes``."""

    def __init__(self, x):
        self.shape = tuple(int(s) for s in x.shape)
        self.ndim = len(self.shape)

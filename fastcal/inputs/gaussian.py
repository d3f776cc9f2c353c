"""The gate of Gaussian predictions: errors (..., d) and covariances (..., d, d).

``resolve_gaussian`` checks their shapes and records where they live, as
:func:`fastcal.inputs.batch.resolve` does for labels and probabilities:
arrays in GPU memory become Numba device views (filled by the GPU backend),
anything else float64 host arrays.
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

    @staticmethod
    def to_host(name, x):
        return as_float_array(name, dev.to_host(name, x))


def resolve_gaussian(errors, covs, group_shape=(), *, device=None):
    """The checked batch of (errors, covs); ``group_shape``: the axes before the
    last that an accumulator bins by. ``device``: None fills where the data is
    (on the GPU if either array is in its memory), "cpu" copies GPU data to
    the host."""
    on_gpu = dev.is_device_array(errors) or dev.is_device_array(covs)
    if on_gpu and device != "cpu":
        errors, covs = _device_pair(errors, covs)
        d = check_shapes(_Shape(errors), _Shape(covs), group_shape)
        return GaussianBatch(errors, covs, d, device="cuda")
    batch = GaussianBatch(errors, covs, 0, device="cuda" if on_gpu else "cpu")
    errors, covs = batch.host() if on_gpu else (as_float_array("errors", errors),
                                                 as_float_array("covs", covs))
    return GaussianBatch(errors, covs, check_shapes(errors, covs, group_shape))


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


def _device_pair(errors, covs):
    """Numba device views of the inputs in GPU memory, float64 arrays of the others."""
    out = []
    for name, x in (("errors", errors), ("covs", covs)):
        if dev.is_device_array(x):
            x = dev.as_device_array(name, x)
            if x.dtype.kind not in "biuf":
                msg = f"{name} must be an array of real numbers, got dtype {x.dtype} in GPU memory"
                raise ValueError(msg)
        else:
            x = as_float_array(name, x)
        out.append(x)
    return out

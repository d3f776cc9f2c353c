"""Backends: where a batch is filled, behind one interface over values.

:func:`resolve` is the door of input: the gate (:mod:`fastcal.inputs.batch`)
decides the kind and where the batch is filled, and the GPU backend brings
data in GPU memory there (device views and casts, or host copies). An
accumulator then hands each batch to :func:`of` (its backend) with its
:class:`~fastcal.backends.spec.FillSpec` and never asks where the data
lives. Both backends offer the same functions, each taking values and
returning named arrays in the layout of :mod:`fastcal.backends.layout`:

- ``fill(batch, spec)``: one chunk's state (the kind's kernel) and its checks;
- ``fill_parts(batch, spec, row0, filled)``: the bootstrap replicates, ACE's
  value buckets and the smooth ECE grid of the chunk, once its rows passed
  the checks (``filled``: what ``fill`` returned);
- ``fill_replicates(y, x, row0, spec, dtype)``, ``fill_buckets(y, x, spec)``,
  ``fill_grid(y, x, spec)``: those parts of a ranked pair (labels 0/1, values
  in [0, 1]);
- ``ranked(batch, pair)``: the (labels, values) that equal-mass bins rank,
  on the host; ``ranked_buckets(batch, pair, omit, n_buckets, threads)`` the
  same with their value bucket statistics made in the same pass, or None;
- ``gather(batch, pair)``: the equal-mass gather of boundary rows, or None
  where the host parts run it;
- ``fill_nees(batch, shape, nan_policy)``: NEES statistics per group.

:mod:`fastcal.backends.cpu` runs the Numba CPU kernels;
:mod:`fastcal.backends.cuda` the CUDA ones, imported only when a batch on
the GPU (or ``device="cuda"``) asks for it.
"""

import importlib
from typing import Protocol, runtime_checkable

from fastcal.inputs import batch as gate
from fastcal.inputs import gaussian as gaussian_gate
from fastcal.inputs.device import is_device_array


@runtime_checkable
class Backend(Protocol):
    """The functions every backend module offers (``tests/backends/test_seam.py`` checks
    both modules against it). Each takes values and returns named arrays."""

    def fill(self, batch, spec):
        """One chunk's state in its kind's layout, and its checks."""

    def fill_parts(self, batch, spec, row0, filled):
        """The bootstrap replicates, ACE's buckets and the smooth ECE grid of a
        checked chunk."""

    def fill_replicates(self, y, x, row0, spec, dtype):
        """Bootstrap replicates (boot_counts, boot_sums) of a ranked pair."""

    def fill_buckets(self, y, x, spec):
        """ACE's value buckets (fine_counts, fine_p) of a ranked pair."""

    def fill_grid(self, y, x, spec):
        """The smooth ECE grid (smooth_mass, smooth_resid, smooth_n) of a ranked pair."""

    def ranked(self, batch, pair):
        """The (labels, values) that equal-mass bins rank, on the host."""

    def ranked_buckets(self, batch, pair, omit, n_buckets, threads):
        """``(ranked(batch, pair), (fine_counts, fine_p))`` with the pair's value bucket
        statistics made in the same pass, or None where the backend makes them apart."""

    def gather(self, batch, pair):
        """The equal-mass gather of boundary rows, or None (the host parts gather)."""

    def fill_nees(self, batch, shape, nan_policy):
        """count and nees_sum of the NEES per group of ``shape``."""


def get(device):
    """The backend module of ``device`` ("cpu" or "cuda"), imported at its first use."""
    module = _LOADED.get(device)
    if module is None:
        module = _LOADED[device] = importlib.import_module(f"fastcal.backends.{device}")
    return module


_LOADED: dict = {}  # what get() imported (its import_module cost a us a chunk)


def of(batch):
    """The backend of a resolved batch."""
    return get(batch.device)


def resolve(y_true, y_prob, *, logits=False, multiclass=False, soft=None, device=None,
            sample_weight=None, first_row=0):
    """The validated batch of (y_true, y_prob), wherever they live; ``multiclass``
    insists on (n, K) class indices. A 2-D ``y_true`` holds soft labels (kind
    "soft"); ``soft`` True insists on them, False refuses them (a pass that
    ranks hard labels).

    ``device``: None fills where ``y_prob`` is (arrays in GPU memory on the
    GPU; soft labels, which have no GPU kernel, on the host); "cpu" copies GPU
    data to the host; "cuda" fills on the GPU, streaming host data to it
    (:func:`fastcal.inputs.batch.placement` decides).

    ``sample_weight``: a weight per row (see :func:`fastcal.inputs.batch.weigh`;
    ``first_row`` numbers its messages), filled on the host only.
    """
    how = dict(logits=logits, multiclass=multiclass, soft=soft)
    if gate.placement(y_true, y_prob, multiclass=multiclass, soft=soft, device=device) == "cuda":
        if sample_weight is not None:
            raise ValueError(WEIGHTS_ON_GPU)
        return get("cuda").resolve(y_true, y_prob, **how)
    y_prob, y_true = _host("y_prob", y_prob), _host("y_true", y_true)
    if sample_weight is not None:
        sample_weight = _host("sample_weight", sample_weight)
    return gate.resolve(y_true, y_prob, **how, sample_weight=sample_weight, first_row=first_row)


WEIGHTS_ON_GPU = ("sample_weight: weighted rows are filled on the host; pass device='cpu' "
                  "(GPU arrays are then copied to the host) or leave sample_weight out")


def resolve_gaussian(errors, covs, group_shape=(), *, device=None):
    """The checked batch of Gaussian errors and covariances (see
    :func:`fastcal.inputs.gaussian.resolve_gaussian`); ``device``: None fills
    where the data is (on the GPU if either array is in its memory), "cpu"
    copies GPU data to the host."""
    if gaussian_gate.gaussian_placement(errors, covs, device=device) == "cuda":
        return get("cuda").resolve_gaussian(errors, covs, group_shape)
    errors, covs = _host("errors", errors), _host("covs", covs)
    return gaussian_gate.resolve_gaussian(errors, covs, group_shape)


def _host(name, x):
    """``x`` itself, or a host copy of an array in GPU memory filled on the host."""
    return get("cuda").to_host(name, x) if is_device_array(x) else x

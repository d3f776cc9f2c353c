"""Backends: where a batch is filled, behind one interface.

The input gate (:func:`fastcal.inputs.batch.resolve`) records each batch's
device; an accumulator hands the batch to :func:`of` (its backend) and never
asks where the data lives. Both backends offer the same functions:

- ``fill(acc, batch)``: one chunk's state for ``acc`` (the kind's kernel);
- ``fill_parts(acc, batch, row0, filled)``: ACE's value buckets and the
  bootstrap replicates of the chunk, once its rows passed the checks;
- ``ranked(batch, pair)``: the (labels, values) that equal-mass bins rank,
  on the host;
- ``gather(batch, pair)``: the equal-mass gather of boundary rows, or None
  where the host parts run it;
- ``fill_gaussian(errors, covs, n_groups)``: NEES statistics per group.

:mod:`fastcal.backends.cpu` runs the Numba CPU kernels;
:mod:`fastcal.backends.cuda` the CUDA ones, imported only when a batch on
the GPU (or ``device="cuda"``) asks for it.
"""

import importlib
from typing import Protocol, runtime_checkable


@runtime_checkable
class Backend(Protocol):
    """The functions every backend module offers (``tests/test_seam.py`` checks
    both modules against it)."""

    def fill(self, acc, batch):
        """One chunk's state for ``acc`` in its kind's layout (see ``cpu.fill``)."""

    def fill_parts(self, acc, batch, row0, filled):
        """ACE's value buckets and the bootstrap replicates of a checked chunk."""

    def ranked(self, batch, pair):
        """The (labels, values) that equal-mass bins rank, on the host."""

    def gather(self, batch, pair):
        """The equal-mass gather of boundary rows, or None (the host parts gather)."""

    def fill_nees(self, acc, batch, nan_policy):
        """(counts, sums) of the NEES per group of a Gaussian accumulator."""


def get(device):
    """The backend module of ``device`` ("cpu" or "cuda")."""
    return importlib.import_module(f"fastcal.backends.{device}")


def of(batch):
    """The backend of a resolved batch."""
    return get(batch.device)

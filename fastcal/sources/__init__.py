"""Sources of the driver: arrays in memory, files (readers and a reader thread), Dask partitions.

Not API: internal to fastcal (the driver, ``fastcal.score.score``, takes them).
What the driver asks of a source, and of the parts a source hands to the
equal-mass passes, is written down as :class:`Source` and :class:`Parts`
(``tests/backends/test_seam.py`` checks every source and parts class against them).
"""

from typing import Protocol, runtime_checkable


@runtime_checkable
class Source(Protocol):
    """What the driver (:func:`fastcal.score.score`) asks of a source."""

    prefix: str      # what error messages start with ("" or "path: ")
    what: str        # how messages name the probabilities ("y_prob", "'p'")
    empty: str       # the message for input without rows
    provenance: dict  # Provenance fields the report gets (source, format, dask)

    def fill(self, options):
        """One pass: (merged accumulator, rows read); errors name rows the way
        the source counts them (array index, file and global row, partition)."""

    def parts(self, pair):
        """The data again as :class:`Parts`, ranked by ``ranking_pair(**pair)``."""


@runtime_checkable
class Parts(Protocol):
    """The data as parts for the equal-mass passes (fastcal.accumulators.equal_mass)."""

    n_parts: int     # known once a first pass has been made (None before)
    gather: object   # a function gathering boundary rows in one go (the GPU), or None

    def map(self, fn, common, per_part=None, combine=None):
        """``fn(labels, values, *common, *per_part[i])`` on each part, results in
        part order, folded by ``combine`` as they come (a list without it)."""

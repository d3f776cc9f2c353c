"""The smooth ECE grid of a binned state, for states pickled by an earlier version.

The grid sums are arrays of the binned layouts now (``smooth_mass``,
``smooth_resid``, ``smooth_n`` in :data:`fastcal.backends.layout.LAYOUTS`),
filled by the backends' ``fill_grid``; a state pickled when they were a part
of their own unpickles this class, whose arrays become the state's
(``Binned._upgrade``).
"""

from fastcal.accumulators.base import _legacy_part

SmoothGridSums = _legacy_part("SmoothGridSums", "The smooth ECE grid of an earlier pickle.")
SmoothGridSums.__module__ = __name__

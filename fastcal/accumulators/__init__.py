"""Accumulators: mergeable per-bin state filled by the kernels, and the equal-mass algorithm.

Not API, except :class:`~fastcal.CalibrationAccumulator` (exported by ``fastcal``)
and the ``to_arrays`` / ``add_arrays`` hook of its states.
"""

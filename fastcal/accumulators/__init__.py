"""Accumulators: mergeable per-bin state filled by the kernels, and the equal-mass algorithm."""

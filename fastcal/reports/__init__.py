"""Reports: the per-bin table and scalars read off an accumulator's state, the tests and
intervals computed from sums, and the plots."""

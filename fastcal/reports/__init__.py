"""Reports: the per-bin table and scalars read off an accumulator's state, the tests and
intervals computed from sums, and the plots.

The report classes are exported by ``fastcal`` (``CalibrationReport``, ``MulticlassReport``);
``fastcal.reports.stats`` lists its supported names in ``__all__``; the rest is not API."""

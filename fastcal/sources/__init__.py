"""Sources of the driver: arrays in memory, files (readers and a reader thread), Dask partitions.

Not API: internal to fastcal (the driver, ``fastcal.score.score``, takes them).
"""

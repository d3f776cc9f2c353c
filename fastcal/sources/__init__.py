"""Sources of the driver: arrays in memory, files (readers and a reader thread), Dask partitions."""

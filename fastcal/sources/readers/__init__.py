"""The readers of prediction files, one module a format: ``parquet``, ``feather``
(with the IPC layout parser ``_ipc``), ``npy`` and ``csv``, and ``arrays`` for named
arrays of any shape (``.npz`` members, ``.npy`` files); ``base`` holds what they
share, ``_npyheader`` the NPY format's rules, ``paths`` which files a path names,
``where`` where a path lives (a local path, or a URL of an object store or a web
server, opened through pyarrow's file systems or a ranged HTTP reader) and ``hive``
the partition columns of a Hive-partitioned dataset and the filters on them.
:func:`fastcal.sources.io.open_reader` picks one by format; :mod:`fastcal.io` is the
public door to them."""

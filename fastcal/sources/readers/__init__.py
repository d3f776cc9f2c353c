"""The readers of prediction files, one module a format: ``parquet``, ``feather``
(with the IPC layout parser ``_ipc``), ``npy`` and ``csv``, and ``arrays`` for named
arrays of any shape (``.npz`` members, ``.npy`` files); ``base`` holds what they
share, ``_npyheader`` the NPY format's rules and ``paths`` which files a path names.
:func:`fastcal.sources.io.open_reader` picks one by format; :mod:`fastcal.io` is the
public door to them."""

"""The readers of prediction files, one module a format: ``parquet``, ``feather``
(with the IPC layout parser ``_ipc``), ``npy`` and ``csv``; ``base`` holds what
they share and ``paths`` which files a path names. :func:`fastcal.sources.io.open_reader`
picks one by format."""

"""The commands of the ``fastcal`` command line, one module each (not API).

:mod:`fastcal.cli` builds the parsers and imports the module of the command
that runs, by name, when it runs: each module imports what its command needs
(the scoring engine, the recalibration maps, Dask) at its top, and no other
command pays for it at start-up. ``common`` holds what the parsers and every
command share, ``outputs`` the checks and the writing of report files.
"""

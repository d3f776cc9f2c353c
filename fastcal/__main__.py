"""The ``fastcal`` command (``fastcal = "fastcal.__main__:main"``; also ``python -m fastcal``).

Its first statement runs before anything heavy is imported (``import fastcal`` is
light): from here on, Ctrl-C during the start-up (about a second of imports of
numpy, pyarrow, numba and the command's modules) prints one line and exits 130,
and SIGTERM ends the process at once (see :mod:`fastcal.process`). The command
switches to its own handlers, which remove temporary files, when it starts to work
(:func:`fastcal.cli.main`).
"""

from fastcal import process

process.start("fastcal")


def main():
    """Run ``fastcal`` with ``sys.argv`` and leave the process with its exit status
    (:func:`fastcal.process.finish`: without the interpreter's teardown)."""
    try:
        from fastcal.cli import main as run
    except Exception as exc:  # noqa: BLE001 - one line, as for any failure of a run
        return process.failed_start("fastcal", exc, "FASTCAL_DEBUG")
    process.finish(run)


if __name__ == "__main__":
    raise SystemExit(main())

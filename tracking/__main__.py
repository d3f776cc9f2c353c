"""The ``tracking`` command (``tracking = "tracking.__main__:main"``; also ``python -m tracking``).

Its first statement runs before anything heavy is imported (``import tracking`` is
light): from here on, Ctrl-C during the start-up (the imports of numpy, numba and the
filters) prints one line and exits 130, and SIGTERM ends the process at once (see
``fastcal.process``). The command switches to its own handlers, which remove
temporary files, when it starts to work (:func:`tracking.cli.main`).
"""

from fastcal import process

process.start("tracking")


def main():
    """Run ``tracking`` with ``sys.argv`` and leave the process with its exit status
    (:func:`fastcal.process.finish`: without the interpreter's teardown)."""
    try:
        process.load_blas()  # both commands run numba's kernels
        from tracking.cli import main as run
    except Exception as exc:  # noqa: BLE001 - one line, as for any failure of a run
        return process.failed_start("tracking", exc, "TRACKING_DEBUG")
    process.finish(run)


if __name__ == "__main__":
    raise SystemExit(main())

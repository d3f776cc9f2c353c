"""Generated kernels are imported only when they are ours, private and exactly what would be written now.

Subprocesses: each run must load the kernel from disk as a new process would. They
compile on their own, so the test runs in the background child, beside the rest of
the suite (the ``background`` mark: tests/subsuites.py).
"""

import os
from pathlib import Path
import stat
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.background
SCRIPT = """
import numpy as np
from tests.tracking.tracking_user_models import Drift, LogRange
from tracking.filters import ExtendedKalmanFilter
z = np.random.default_rng(0).normal(size=(3, 4, 2))
out = ExtendedKalmanFilter(Drift(), LogRange()).run(np.zeros(2), np.eye(2), z)
print(repr(float(np.nansum(out.means))))
"""


def run(kernel_dir):
    env = dict(os.environ, TRACKING_KERNEL_DIR=str(kernel_dir),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-W", "always", "-c", SCRIPT], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    notes = [line for line in p.stderr.splitlines() if "tracking: " in line or "CacheWarning" in line]
    return p.stdout.strip(), notes


def test_planted_damaged_and_shared_kernels_are_never_trusted(tmp_path):
    mine = tmp_path / "mine"
    value, notes = run(mine)
    assert notes == []
    (kernel,) = mine.glob("tracking_kernel_*.py")
    good = kernel.read_text()
    assert stat.S_IMODE(mine.stat().st_mode) & 0o022 == 0

    # someone else's file in a shared directory (here: world-writable) is never imported
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    mark = tmp_path / "planted-ran"
    (shared / kernel.name).write_text(f"open({str(mark)!r}, 'w').close()\n" + good)
    again, notes = run(shared)
    assert again == value and not mark.exists()
    assert len(notes) == 1 and "is not a private directory of yours" in notes[0]

    # our own directory, a file that is not what would be written now: rewritten, never run
    kernel.write_text(f"open({str(mark)!r}, 'w').close()\n" + good)
    again, notes = run(mine)
    assert again == value and not mark.exists() and kernel.read_text() == good
    assert len(notes) == 1 and f"rewrote the kernel {kernel}" in notes[0]

    # a damaged cache: recompiled and rewritten, with one note naming the file
    (cache,) = (mine / "__pycache__").glob(kernel.stem + "*.nbc")
    cache.write_bytes(cache.read_bytes()[:4000])
    again, notes = run(mine)
    assert again == value
    assert len(notes) == 1 and f"cannot load the kernel cache file {cache}" in notes[0], notes

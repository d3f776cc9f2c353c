"""The commands under a limit on the address space (``ulimit -v``): they end promptly,
either with their result or with one line "not enough memory: ..." and status 2,
never spinning, never "interrupted", never "a missing optional dependency"."""

import errno
import os
from pathlib import Path
import resource
import subprocess
import sys
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastcal import cli, process

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pred(tmp_path_factory):
    rng = np.random.default_rng(1)
    f = tmp_path_factory.mktemp("memory") / "pred.parquet"
    pq.write_table(pa.table({"p": rng.random(300), "y": rng.integers(0, 2, 300)}), f)
    return str(f)


def _limited(megabytes, prog, *argv):
    """``python -m prog argv`` under an address-space limit: (status, stdout, stderr)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * 10**6, megabytes * 10**6))

    # the address space a run needs grows with its threads (a stack and a malloc arena
    # each): two, numba's and pyarrow's, so that a limit means the same on any machine
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="2", OMP_NUM_THREADS="2")
    for name in ("FASTCAL_DEBUG", "TRACKING_DEBUG", "OPENBLAS_NUM_THREADS"):
        env.pop(name, None)
    r = subprocess.run([sys.executable, "-m", prog, *argv], capture_output=True, text=True,
                       env=env, preexec_fn=limit, timeout=300)
    return r.returncode, r.stdout, r.stderr


def test_under_an_address_space_limit_a_run_ends_with_one_line(pred):
    runs = {(mb, prog): argv for mb in (300, 1000) for prog, argv in (
        ("fastcal", ("score", pred, "--prob", "p", "--label", "y", "--quiet")),
        ("tracking", ("compare", "--runs", "4", "--steps", "3")))}
    got = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, _limited(k[0], k[1],
                                                                             *runs[k])))
               for k in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (mb, prog), (code, out, err) in sorted(got.items()):
        if mb == 1000 and code == 0:  # enough here: the whole report
            assert err == "" and "EKF" in out or "ECE" in out, (prog, err)
            continue
        assert code == 2 and err.count("\n") == 1, (mb, prog, code, err)
        assert err.startswith(f"{prog}") and ": error: not enough memory: " in err, err
        assert f"(the address space is limited to {mb:,} MB: ulimit -v)" in err, err


# -- the words, whatever the library -----------------------------------------------------

def _raised_while_handling(cause, exc):
    try:
        try:
            raise cause
        except Exception:
            raise exc  # noqa: B904 - chained implicitly, as a reader words any failure: a ValueError naming its file
    except Exception as e:
        return e


ALLOCATION = "; lower --chunk-rows or --bins"


@pytest.mark.parametrize("exc, what, hint", [
    (MemoryError(), "an allocation failed", ALLOCATION),
    (_raised_while_handling(MemoryError(), ValueError("p.parquet: cannot read Parquet data near "
                                                      "row 0: Unknown error")),
     "an allocation failed", ALLOCATION),
    (ValueError("p.parquet: cannot read Parquet data near row 0: Unknown error: Failed to "
                "launch worker thread: Resource temporarily unavailable"),
     "could not start a thread", ""),
    (ImportError("/usr/lib/python3/site-packages/cmath.cpython-311-x86_64-linux-gnu.so: "
                 "failed to map segment from shared object"),
     "could not load cmath.cpython-311-x86_64-linux-gnu.so", ""),
    (_raised_while_handling(OSError("libllvmlite.so: failed to map segment from shared object"),
                            OSError("Could not find/load shared object file 'libllvmlite.so'")),
     "could not load libllvmlite.so", ""),
    (OSError(errno.ENOMEM, "Cannot allocate memory"), "an allocation failed", ALLOCATION),
    (MemoryError("Unable to allocate 8.00 GiB for an array with shape (1073741824,)"),
     "an allocation failed (Unable to allocate 8.00 GiB for an array with shape "
     "(1073741824,))", ALLOCATION),
])
def test_running_out_of_memory_is_named_so(exc, what, hint):
    note = process.address_space_note()  # "" unless this process runs under ulimit -v
    assert cli._describe_error(exc) == (2, f"not enough memory: {what}{note}{hint}")


def test_a_start_up_that_runs_out_of_memory_is_one_line(capsys, monkeypatch):
    monkeypatch.delenv("FASTCAL_DEBUG", raising=False)
    exc = ImportError("/x/numpy.libs/libgfortran-040039e1.so.5.0.0: failed to map segment "
                      "from shared object")
    assert process.failed_start("fastcal", exc, "FASTCAL_DEBUG") == 2
    assert capsys.readouterr().err == ("fastcal: error: not enough memory: could not load "
                                       f"libgfortran-040039e1.so.5.0.0"
                                       f"{process.address_space_note()}\n")
    assert process.failed_start("fastcal", ImportError("No module named 'numpy'"),
                                 "FASTCAL_DEBUG") == 1
    assert capsys.readouterr().err == (
        "fastcal: internal error: could not start: ImportError: No module named 'numpy' "
        "(FASTCAL_DEBUG=1 shows the traceback)\n")

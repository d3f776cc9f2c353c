"""The default binary report's kernels compiled ahead of time (fastcal/_kernels/_aot.py)
and the kernels declared without Numba (fastcal/_kernels/_lazy.py): a later process's
first report runs without importing Numba, with the JIT kernels' bits; a module that
is not the one built, or that this CPU cannot run, is never loaded."""

import json
import os
from pathlib import Path
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fastcal
from fastcal._kernels import _aot, _lazy
from fastcal._kernels import binary as kb
from fastcal._kernels import equal_mass as kem

ROOT = Path(__file__).resolve().parents[2]
LOADED = "import sys; print(sorted(m for m in ('numba', 'llvmlite', 'scipy') if m in sys.modules))"


def _run(code, env=None, cwd=None):
    res = subprocess.run([sys.executable, "-c", code], env=env or dict(os.environ), cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_the_module_built_with_this_install_is_loaded():
    # a fresh clone's `make test` builds it (setup.py, fastcal/_kernels/_aot_build.py);
    # `fastcal warmup` prints what fastcal.warmup.ahead_of_time says
    from fastcal import warmup

    assert warmup.ahead_of_time() == _aot.status() == ""


def test_a_later_first_report_imports_no_numba(tmp_path):
    code = f"""
import numpy as np, fastcal
rng = np.random.default_rng(0)
p = rng.random(10_000)
y = rng.random(10_000) < p
for pt in (np.float32, np.float64):
    for yt in (np.uint8, np.int64, bool, np.float64):
        fastcal.calibration_report(y.astype(yt), p.astype(pt), n_bins=15)
{LOADED}
"""
    assert _run(code, cwd=tmp_path) == ["[]"]
    # the command line scores a file the same way (its labels are read as float64)
    rng = np.random.default_rng(1)
    p = rng.random(1000)
    rows = "\n".join(f"{a:.6f},{int(b)}" for a, b in zip(p, rng.random(1000) < p))
    (tmp_path / "s.csv").write_text("p,y\n" + rows + "\n")
    code = ("from fastcal.cli import main\n"
            "assert main(['score', 's.csv', '--prob', 'p', '--label', 'y', '--quiet']) == 0\n" + LOADED)
    assert _run(code, cwd=tmp_path)[-1] == "[]"


@pytest.fixture
def jit_only(monkeypatch):
    """Within: the exported kernels run their JIT dispatchers (none of the module's functions)."""
    def off():
        for kernel in (kb.fill_range_fine, kb.binned_scalars, kb.binned_measures, kem.gather_buckets,
                       kem.bucket_groups, kem.add_rows):
            assert isinstance(kernel, _lazy.Kernel) and kernel.exported()
            monkeypatch.setattr(kernel, "_aot", ())
    return off


def test_the_module_gives_the_jit_kernels_bits(jit_only):
    rng = np.random.default_rng(7)
    cases = []
    for n, threads in ((1_000, 1), (50_000, 1), (600_000, 2)):  # the last in two threads at once
        p = rng.random(n).astype(np.float32)
        y = (rng.random(n) < p).astype(np.uint8)
        cases += [(y, p, dict(threads=threads)), (y, p, dict(threads=threads, n_bins=7, ci=0.9))]
    runs = [repr(fastcal.calibration_report(y, p, **kw).to_dict()) for y, p, kw in cases]
    jit_only()
    assert [repr(fastcal.calibration_report(y, p, **kw).to_dict()) for y, p, kw in cases] == runs


def test_threads_that_make_the_first_report_together_get_the_same_one(tmp_path):
    code = f"""
import threading, numpy as np, fastcal
rng = np.random.default_rng(0)
p = rng.random(20_000).astype(np.float32)
y = (rng.random(20_000) < p).astype(np.uint8)
out = [None] * 8
def run(i):
    out[i] = repr(fastcal.calibration_report(y, p).to_dict())
threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(set(out)), out[0] is not None)
{LOADED}
"""
    assert _run(code, cwd=tmp_path) == ["1 True", "[]"]


def test_a_kernel_is_pickled_by_name():
    import pickle

    for kernel in (kb.fill_range_fine, kem.add_rows):
        assert pickle.loads(pickle.dumps(kernel)) is kernel


def test_only_arguments_of_an_exported_signature_run_the_module():
    (name, checks), = [(n, c) for n, c in _aot._TABLE[("fastcal._kernels.binary", "fill_range_fine")]
                       if n.endswith("_f4_u1")]
    n_bins = 10
    args = [np.zeros(5, np.float32), np.zeros(5, np.uint8), 0, 5, np.linspace(0, 1, n_bins + 1), True, False,
            False, 0.0, True, np.zeros((n_bins + 1, 3), np.int64), np.zeros((n_bins + 1, 3)), np.zeros(7),
            np.zeros(10, np.int64), np.zeros((0, 3), np.int64), np.zeros(0)]
    args[0].flags.writeable = False  # read-only inputs fit (the gate hands such views)
    assert _aot.fits(args, checks)
    assert _aot.fits([*args[:2], np.int64(0), *args[3:]], checks)

    def changed(i, value):
        return [*args[:i], value, *args[i + 1:]]

    frozen = np.zeros(7)
    frozen.flags.writeable = False
    wrong = [
        changed(0, np.zeros(5, np.float64)),           # another float: another export
        changed(0, np.zeros(10, np.float32)[::2]),     # strided
        changed(0, np.zeros(5, ">f4")),                # another byte order
        changed(1, np.zeros(5, np.int8)),              # labels not as the gate hands them
        changed(10, np.zeros((n_bins + 1, 3), np.int32)),
        changed(10, np.zeros(3 * (n_bins + 1), np.int64)),  # another number of dimensions
        changed(12, frozen),                           # a state it writes, read-only
        changed(12, np.zeros((7, 2))[:, 0]),           # a column: strided
        changed(2, 0.0),                               # a float where an integer goes
        changed(2, np.int32(0)),
        changed(2, True),                              # bool is not an integer here
        changed(2, 1 << 63),                           # beyond int64
        changed(5, 1),                                 # an integer where a bool goes
        changed(8, 0),                                 # an integer where a float goes
        changed(0, [0.0] * 5),                         # not an array
        args[:-1],                                     # an argument short
    ]
    assert [_aot.fits(a, checks) for a in wrong] == [False] * len(wrong)


def test_kernel_modules_import_without_numba_and_load_it_when_a_kernel_needs_it(tmp_path):
    code = f"""
import math
from fastcal._kernels import binary, multiclass, mathfn, _lazy
{LOADED}
print(_lazy.numba_loaded(), type(mathfn.log64).__name__)
assert abs(mathfn.log64(3.0) - math.log(3.0)) < 1e-15
{LOADED}
print(_lazy.numba_loaded(), type(mathfn.log64).__name__, type(binary.fill_range_fine).__name__)
print(type(binary.fill_range).__name__)
"""
    out = _run(code, cwd=tmp_path)
    assert out[:2] == ["[]", "False Kernel"]
    assert "'numba'" in out[2]  # (Numba's import checks SciPy's version: its package, not scipy.linalg)
    # made: Numba reads dispatchers; the exported entry points stay kernels (called from Python)
    assert out[3:] == ["True CPUDispatcher Kernel", "CPUDispatcher"]


def test_numba_threads_are_read_without_numba_as_numba_reads_them(tmp_path):
    code = """
from fastcal.inputs.validation import numba_threads, check_threads
before = numba_threads(), check_threads(None)
import numba
assert "numba" in __import__("sys").modules
print(before == ((numba.config.NUMBA_NUM_THREADS, numba.get_num_threads()), numba.get_num_threads()))
"""
    for extra in ({}, {"NUMBA_NUM_THREADS": "1"}, {"NUMBA_NUM_THREADS": "not a number"}):
        env = dict(os.environ, **extra)
        if not extra:
            env.pop("NUMBA_NUM_THREADS", None)
        assert _run(code, env, tmp_path)[-1] == "True", extra


def test_this_cpu_is_read_from_the_system_as_llvm_reads_it():
    from llvmlite import binding as ll

    man = json.loads((Path(_aot.folder()) / _aot.MANIFEST).read_text())
    assert _aot.host_lacks(man["requires"]) == ""
    have = ll.get_host_cpu_features()
    assert _aot.host_lacks(sorted(f for f, on in have.items() if on)) == ""
    assert "lacks avx10.9-not-a-cpu" in _aot.host_lacks([*man["requires"], "avx10.9-not-a-cpu"])


@pytest.fixture
def package(tmp_path):
    """A copy of fastcal, its shipped folder and module included, imported from ``tmp_path/pkg``."""
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "fastcal", pkg / "fastcal", ignore=shutil.ignore_patterns("__pycache__"))
    shipped = pkg / "fastcal" / "_kernels" / "_shipped"
    assert (shipped / _aot.MANIFEST).is_file()
    env = dict(os.environ, PYTHONPATH=str(pkg))
    env.pop(_aot.ENV, None)
    return shipped, env


def _manifest(shipped, **changes):
    man = json.loads((shipped / _aot.MANIFEST).read_text())
    man.update(changes)
    (shipped / _aot.MANIFEST).write_text(json.dumps(man))


def _so(shipped):
    (so,) = shipped.glob(_aot.MODULE + ".*")
    return so


def _untouched(shipped):
    return ""


def _flipped(shipped):
    so = _so(shipped)
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0x10
    so.write_bytes(bytes(data))
    return "is not the file that was built (its digest differs)"


def _linked(shipped):
    so = _so(shipped)
    elsewhere = shipped.parent / "elsewhere.so"
    so.rename(elsewhere)
    so.symlink_to(elsewhere)
    return "a symbolic link"


def _group_writable(shipped):
    shipped.chmod(0o775)
    return "writable by group"


def _another_owner(shipped):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    os.chown(_so(shipped), 65534, 65534)
    return "owned by uid 65534"


def _not_a_manifest(shipped):
    (shipped / _aot.MANIFEST).write_text("[1, 2]")
    return "is not a manifest (a JSON list)"


def _another_numpy(shipped):
    _manifest(shipped, numpy="1.0.0")
    return "built for numpy 1.0.0"


def _edited_kernel(shipped):
    module = shipped.parent / "binary.py"
    module.write_text(module.read_text() + "\n# edited\n")
    return "the kernel sources changed since the build"


def _an_older_cpu(shipped):
    # a wheel built on a newer CPU, installed on an older one
    man = json.loads((shipped / _aot.MANIFEST).read_text())
    _manifest(shipped, requires=[*man["requires"], "avx10.9-not-a-cpu"])
    return "the host CPU lacks avx10.9-not-a-cpu, which its code"


def _turned_off(shipped):
    return None


@pytest.mark.parametrize("change", [_untouched, _flipped, _linked, _group_writable, _another_owner, _not_a_manifest,
                                    _another_numpy, _edited_kernel, _an_older_cpu, _turned_off])
def test_a_module_that_is_not_the_built_one_or_not_for_this_cpu_is_never_loaded(package, tmp_path, change):
    shipped, env = package
    why = change(shipped)
    if why is None:
        env[_aot.ENV] = "0"
        why = f"{_aot.ENV}=0"
    code = ("from fastcal._kernels import _aot, binary\n"
            "print(repr(_aot.status()), len(_aot.exports(binary.fill_range_fine.py_func)))\n" + LOADED)
    status, loaded = _run(code, env, tmp_path)
    if why:
        assert why in status and status.endswith(" 0"), status
    else:
        assert status == "'' 4"
    # deciding costs no Numba (a process that must compile loads it then); a CPU feature
    # that Linux does not list is asked of llvmlite
    assert loaded == ("['llvmlite']" if change is _an_older_cpu else "[]")

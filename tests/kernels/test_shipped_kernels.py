"""Kernels shipped in the package: a fresh environment's first calls compile nothing, an
older CPU compiles for itself, and a shipped file is checked as a cache file is.

Subprocesses because isolation is the point: each run starts with no kernel in memory
and an empty cache, as a new user's first process does. They run in the background
child, beside the rest of the suite (the ``background`` mark: tests/subsuites.py).
"""

import ast
import json
import os
from pathlib import Path
import shutil
import subprocess
import sys

import pytest
import setuptools

from fastcal._kernels import _cache, _shipped

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.background

# Counts Numba's compiles (not its cache loads) in the child, and prints them last.
COUNT = """
import atexit, numba.core.compiler as _c
_n = [0]
_orig = _c.compile_extra
def _counted(*a, **k):
    _n[0] += 1
    return _orig(*a, **k)
_c.compile_extra = _counted
atexit.register(lambda: print("compiles", _n[0]))
"""

# The first binary report, the first K-class report, then every layout and dtype variant
# of the inputs: the gate makes each of them one of the shipped signatures.
FIRST_CALLS = COUNT + """
import numpy as np
import fastcal
rng = np.random.default_rng(0)
p = rng.random(10_000).astype(np.float32)
y = (rng.random(10_000) < p).astype(np.uint8)
P = rng.dirichlet(np.ones(4), 10_000)
Y = rng.integers(0, 4, 10_000)
calls = [(y, p), (Y, P.astype(np.float32))]
calls += [(y.astype(t), p) for t in (np.int8, np.int16, np.int32, np.int64, bool, np.float64)]
calls += [(y, p.astype(t)) for t in (np.float16, np.float64)]
calls += [(y[::3], p[::3]), (y[::-1], p[::-1]), (Y, P), (Y, np.asfortranarray(P)), (Y[::2], P[::2]),
          (Y[::-1], P[::-1]), (Y.astype(np.int8), P), (Y, np.hstack([P, P])[:, :4])]
ro_y, ro_p = y.copy(), p.copy()
ro_y.flags.writeable = ro_p.flags.writeable = False
calls.append((ro_y, ro_p))
for a, b in calls:
    fastcal.calibration_report(a, b, n_bins=15)
print("reports", len(calls))
"""

SMALL = COUNT + "from fastcal._kernels.mathfn import log64\nprint(repr(log64(3.0)))\n"


def _run(code, env, cwd):
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def _env(tmp_path, **extra):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"))
    for name in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", _shipped.ENV):
        env.pop(name, None)
    env.update(extra)
    return env


def _compiles(res):
    assert res.returncode == 0, res.stderr
    return int(res.stdout.split()[-1])


def _log3():
    # what the child prints: log64's bits (this process loads the same kernel, or compiles it)
    from fastcal._kernels.mathfn import log64

    return repr(log64(3.0))


def _notes(stderr):
    return [line for line in stderr.splitlines() if "CacheWarning" in line]


def test_the_kernels_shipped_with_this_install_are_loaded():
    # a fresh clone's `make test` builds them; after an edit of a kernel module, `make test`
    # installs again (the Makefile's stamp depends on the kernel sources)
    assert _cache.shipped_status() == ""


def test_a_fresh_environment_compiles_nothing_for_the_first_reports_and_their_variants(tmp_path):
    res = _run(FIRST_CALLS, _env(tmp_path), tmp_path)
    assert res.stdout.split()[:2] == ["reports", "19"], res.stdout
    assert _compiles(res) == 0
    assert not (tmp_path / "cache").exists() or not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))
    assert _notes(res.stderr) == [], res.stderr


def test_the_build_step_compiles_every_group_of_signatures():
    """setup.py's children are the groups of fastcal.warmup.KINDS, each signature in one."""
    from fastcal import warmup

    tree = ast.parse((ROOT / "setup.py").read_text())
    parts = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                 and getattr(node.targets[0], "id", None) == "PARTS")
    assert parts == warmup.KINDS
    assert {warmup._kind(*sig[1:]) for sig in warmup.SIGNATURES} == set(warmup.KINDS)


def test_an_older_cpu_compiles_for_itself(tmp_path):
    shipped = _run(SMALL, _env(tmp_path), tmp_path)
    assert _compiles(shipped) == 0
    # a CPU named other than the baseline, without AVX2: never handed code it cannot run
    old = _run(SMALL, _env(tmp_path, NUMBA_CPU_NAME="core2", NUMBA_CPU_FEATURES=""), tmp_path)
    assert _compiles(old) == 1
    assert old.stdout.splitlines()[0] == shipped.stdout.splitlines()[0] == _log3()
    status = _run("from fastcal._kernels import _cache; print(_cache.shipped_status())",
                  _env(tmp_path, NUMBA_CPU_NAME="core2", NUMBA_CPU_FEATURES=""), tmp_path)
    assert "NUMBA_CPU_NAME" in status.stdout


@pytest.fixture
def package(tmp_path):
    """A copy of fastcal, its shipped kernels included, imported from ``tmp_path/pkg``."""
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "fastcal", pkg / "fastcal", ignore=shutil.ignore_patterns("__pycache__"))
    shipped = pkg / "fastcal" / "_kernels" / "_shipped"
    assert (shipped / "manifest.json").is_file()
    return shipped, _env(tmp_path, PYTHONPATH=str(pkg))


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) * 2 // 3] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_damaged_shipped_file_is_named_once_and_compiled_instead(package, tmp_path):
    shipped, env = package
    (target,) = shipped.rglob("mathfn.log64-*.nbc")
    _flip(target)
    res = _run(SMALL, env, tmp_path)
    assert _compiles(res) == 1
    assert res.stdout.splitlines()[0] == _log3()
    notes = _notes(res.stderr)
    assert len(notes) == 1 and str(target) in notes[0] and "digest mismatch" in notes[0], res.stderr


def _another_numba(shipped):
    man = json.loads((shipped / "manifest.json").read_text())
    man["numba"] = "0.1.0"
    (shipped / "manifest.json").write_text(json.dumps(man))
    return "built for numba 0.1.0"


def _group_writable(shipped):
    shipped.chmod(0o775)
    return "writable by group"


def _edited_kernel(shipped):
    module = shipped.parent / "mathfn.py"
    module.write_text(module.read_text() + "\n# edited\n")
    return "fastcal/_kernels changed since the build"


def _a_cpu_feature_this_host_lacks(shipped):
    # as a wheel built on a newer CPU, installed on an older one
    man = json.loads((shipped / "manifest.json").read_text())
    man["requires"] = [*man["requires"], "avx10.9-not-a-cpu"]
    (shipped / "manifest.json").write_text(json.dumps(man))
    return "the host CPU lacks avx10.9-not-a-cpu, which the shipped kernels"


def _turned_off(shipped):
    return None


@pytest.mark.parametrize("change", [_another_numba, _group_writable, _edited_kernel, _a_cpu_feature_this_host_lacks,
                                    _turned_off])
def test_shipped_kernels_that_do_not_fit_are_compiled_instead(package, tmp_path, change):
    shipped, env = package
    why = change(shipped)
    if why is None:
        env[_shipped.ENV] = "0"
        why = f"{_shipped.ENV}=0"
    res = _run(SMALL, env, tmp_path)
    assert _compiles(res) == 1
    assert res.stdout.splitlines()[0] == _log3()
    assert _notes(res.stderr) == []
    status = _run("from fastcal._kernels import _cache; print(_cache.shipped_status())", env, tmp_path)
    assert why in status.stdout, status.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_a_shipped_file_of_another_user_is_never_loaded(package, tmp_path):
    shipped, env = package
    (index,) = shipped.rglob("mathfn.log64-*.nbi")
    os.chown(index, 65534, 65534)
    res = _run(SMALL, env, tmp_path)
    assert _compiles(res) == 1
    notes = _notes(res.stderr)
    assert len(notes) == 1 and "owned by uid 65534" in notes[0], res.stderr


def _setup_module(monkeypatch):
    monkeypatch.setattr(setuptools, "setup", lambda **kw: None)
    monkeypatch.syspath_prepend(str(ROOT))
    sys.modules.pop("setup", None)
    import setup

    return setup


def test_a_build_step_that_fails_leaves_no_shipped_folder(monkeypatch, tmp_path):
    setup = _setup_module(monkeypatch)
    dest = tmp_path / "fastcal" / "_kernels" / "_shipped"
    dest.parent.mkdir(parents=True)
    # a source root whose package fails at import: every child fails at its first line
    broken = tmp_path / "src" / "fastcal"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('planted')\n")
    why = setup.ship(str(tmp_path / "src"), str(dest))
    assert why == "binary: exit 1: ImportError: planted"
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no half-written folder left beside it


def test_a_build_for_a_cpu_of_unknown_features_ships_nothing(monkeypatch, tmp_path):
    setup = _setup_module(monkeypatch)
    monkeypatch.setenv("FASTCAL_SHIP_CPU", "pentium-m")
    dest = tmp_path / "fastcal" / "_kernels" / "_shipped"
    dest.parent.mkdir(parents=True)
    why = setup.ship(str(ROOT), str(dest))
    assert why == "binary: exit 3: the CPU features of pentium-m are unknown; name one of x86-64-v3, x86-64-v4"
    assert not dest.exists() and list(dest.parent.iterdir()) == []

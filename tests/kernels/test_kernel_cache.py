"""The kernel cache never stops a run: read-only installs and damaged cache files.

Subprocesses because isolation is the point: each run must start with no compiled
kernels in memory and meet the cache on disk as a new process does. Those runs
compile on their own, so the file's tests run in the background child, beside the
rest of the suite (the ``background`` mark: tests/subsuites.py).
"""

import os
from pathlib import Path
import pickle
import shutil
import stat
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.background

# one small real kernel: compiles in well under a second
SMALL = ("from fastcal._kernels.mathfn import log64\n"
         "print(repr(log64(3.0)))\n")


def _run(args, env, cwd=None):
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def _env(**extra):
    # the cache of your own is what these tests are about: the kernels shipped in the
    # package, and the ahead-of-time module, are off (tests/kernels/test_shipped_kernels.py
    # and tests/kernels/test_aot.py test those)
    env = dict(os.environ, FASTCAL_SHIPPED_KERNELS="0", FASTCAL_AOT="0")
    env.update(extra)
    return env


def _notes(stderr):
    return [line for line in stderr.splitlines() if "CacheWarning" in line or "note:" in line]


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory):
    """A cache directory holding the compiled ``log64``, and the value it prints."""
    cache = tmp_path_factory.mktemp("filled")
    res = _run(["-c", SMALL], _env(NUMBA_CACHE_DIR=str(cache)))
    assert res.returncode == 0, res.stderr
    assert _notes(res.stderr) == []
    files = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert any(f.endswith(".nbi") for f in files) and any(f.endswith(".nbc") for f in files)
    return cache, res.stdout


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) * 2 // 3] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
@pytest.mark.parametrize("damage", [_truncate, _flip], ids=["truncated", "bit-flipped"])
def test_damaged_cache_file_is_recompiled_named_once_and_rewritten(filled_cache, tmp_path,
                                                                   suffix, damage):
    cache, expected = filled_cache
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    (target,) = [p for p in copy.rglob("*.log64-*" + suffix)]
    damage(target)
    env = _env(NUMBA_CACHE_DIR=str(copy))

    res = _run(["-c", SMALL], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == expected
    notes = _notes(res.stderr)
    assert len(notes) == 1, res.stderr
    assert str(target) in notes[0] and "recompiled" in notes[0]

    again = _run(["-c", SMALL], env)  # the recompiled kernel replaced the damaged file
    assert again.returncode == 0, again.stderr
    assert again.stdout == expected
    assert _notes(again.stderr) == []


@pytest.fixture(scope="module")
def read_only(tmp_path_factory):
    """A read-only copy of the packages, with HOME, XDG_CACHE_HOME and NUMBA_CACHE_DIR unwritable.

    ``__pycache__`` is a plain file in every package directory, so nothing can be
    written beside the sources even by root (who ignores permission bits); the
    cache variables point below /dev/null, where no directory can be made.
    """
    base = tmp_path_factory.mktemp("ro")
    for pkg in ("fastcal", "tracking"):
        shutil.copytree(ROOT / pkg, base / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for d in [base, *(p for p in base.rglob("*") if p.is_dir())]:
        (d / "__pycache__").write_text("")
    for p in base.rglob("*"):
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    env = _env(PYTHONPATH=str(base), HOME="/dev/null", XDG_CACHE_HOME="/dev/null/cache",
               NUMBA_CACHE_DIR="/dev/null/numba", TRACKING_KERNEL_DIR="/dev/null/tracking",
               PYTHONDONTWRITEBYTECODE="1")
    yield base, env
    for p in base.rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def _score_csv(env, tmp_path):
    """``fastcal score --json`` of a small CSV file, run with ``env``."""
    data = tmp_path / "scores.csv"
    data.write_text("p,y\n" + "".join(f"{(i % 10) / 10 + 0.05},{i % 3 == 0:d}\n" for i in range(40)))
    return _run(["-m", "fastcal", "score", str(data), "--prob", "p", "--label", "y", "--bins", "5",
                 "--json"], env, cwd=tmp_path)


def test_read_only_install_scores_with_one_note(read_only, tmp_path):
    base, env = read_only
    res = _score_csv(env, tmp_path)
    assert res.returncode == 0, res.stderr
    assert '"ece"' in res.stdout
    notes = _notes(res.stderr)
    assert len(notes) == 1, res.stderr
    assert "no writable cache directory" in notes[0] and "NUMBA_CACHE_DIR" in notes[0]
    assert str(base) in _run(["-c", "import fastcal; print(fastcal.__file__)"], env,
                             cwd=tmp_path).stdout


def test_read_only_install_with_shipped_kernels_scores_without_a_note(read_only, tmp_path):
    # the kernels shipped in the package (the ahead-of-time module for this report) load
    # from the read-only install: nothing compiles
    base, env = read_only
    env = dict(env)
    env.pop("FASTCAL_SHIPPED_KERNELS")
    env.pop("FASTCAL_AOT")
    res = _score_csv(env, tmp_path)
    assert res.returncode == 0, res.stderr
    assert '"ece"' in res.stdout
    assert _notes(res.stderr) == [], res.stderr


def test_read_only_install_runs_tracking_compare(read_only, tmp_path):
    base, env = read_only
    res = _run(["-m", "tracking", "compare", "--runs", "2", "--steps", "5", "--json"], env,
               cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "anees" in res.stdout.lower()
    assert len(_notes(res.stderr)) <= 1, res.stderr


def test_warmup_command_prints_each_signature_and_the_cache(capsys, monkeypatch):
    from fastcal import cli, warmup

    # one signature (the one most tests compile anyway): the command, not the compiler, is tested
    monkeypatch.setattr(warmup, "SIGNATURES", warmup.SIGNATURES[:1])
    assert cli.main(["warmup"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("binary, float64 p, integer or bool y: ") and out[0].endswith(" s")
    assert out[1].startswith("done in ") and "cache: " in out[1]
    assert warmup.cache_dir() is None or warmup.cache_dir() in out[1]


def test_a_changed_kernel_module_recompiles_kernels_of_the_others(tmp_path):
    # numba stamps a cache with the kernel's own file: a kernel calling another module's
    # function loaded stale code after that module changed (a new total read back as 0.0)
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "fastcal", pkg / "fastcal",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = _env(NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(pkg))
    code = ("from fastcal._kernels.mathfn import log64\n"
            "log64(3.0)\n"
            "s = log64.stats\n"
            "print(sum(s.cache_hits.values()), sum(s.cache_misses.values()))\n")

    def hits_misses():
        res = _run(["-c", code], env, cwd=tmp_path)  # not the checkout's own fastcal
        assert res.returncode == 0, res.stderr
        return res.stdout.split()

    assert hits_misses() == ["0", "1"]  # compiled and saved
    assert hits_misses() == ["1", "0"]  # loaded
    other = pkg / "fastcal" / "_kernels" / "binary.py"
    other.write_text(other.read_text() + "\n# changed\n")
    assert hits_misses() == ["0", "1"]  # another kernel module changed: compiled again
    assert hits_misses() == ["1", "0"]


class _Plant:
    """Unpickled, it creates the file ``path``: a stand-in for any code a planted pickle runs."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _old_format(marker):
    # the format fastcal wrote before: a pickled version record in front of the digest (any
    # pickle would do: nothing of a file that is not yours alone is read, whatever its format)
    return pickle.dumps(_Plant(marker)) + b"\0" * 16 + pickle.dumps(("stamp", {}))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
@pytest.mark.parametrize("case", ["dir of another user", "group-writable dir", "file of another user",
                                  "old format"])
def test_a_planted_cache_is_never_unpickled(filled_cache, tmp_path, case):
    # a shared NUMBA_CACHE_DIR (mode 1777, as in containers) where another user created the
    # directory that Numba predicts for fastcal/_kernels and planted an index file there
    cache, expected = filled_cache
    (index,) = cache.rglob("*.log64-*.nbi")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    leaf = shared / index.parent.name
    leaf.mkdir()
    target = leaf / index.name
    marker = tmp_path / "planted-ran"
    nobody = 65534
    if case == "dir of another user":
        target.write_bytes(_old_format(marker))
        os.chown(target, nobody, nobody)
        os.chown(leaf, nobody, nobody)
    elif case == "group-writable dir":
        target.write_bytes(_old_format(marker))
        leaf.chmod(0o775)
    elif case == "file of another user":  # in a directory of ours
        target.write_bytes(_old_format(marker))
        os.chown(target, nobody, nobody)
    else:  # ours, written in the format before magic bytes (the version record pickled first)
        target.write_bytes(_old_format(marker))
    env = _env(NUMBA_CACHE_DIR=str(shared))

    res = _run(["-c", SMALL], env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == expected
    assert not marker.exists()
    notes = _notes(res.stderr)
    if case == "dir of another user":
        assert len(notes) == 1, res.stderr
        assert f"the kernel cache directory {leaf} is owned by uid {nobody}, not by you (uid 0): not used" in notes[0]
    elif case == "group-writable dir":
        assert len(notes) == 1, res.stderr
        assert f"the kernel cache directory {leaf} is writable by group (mode 775): not used" in notes[0]
    elif case == "file of another user":
        assert len(notes) == 1, res.stderr
        assert f"cannot load the kernel cache file {target} (owned by uid {nobody}" in notes[0]
        assert "recompiled and rewrote it" in notes[0]
    else:
        assert notes == []  # stale: recompiled and replaced without a word
    if case in ("file of another user", "old format"):  # replaced by our own file
        assert target.stat().st_uid == 0 and target.read_bytes().startswith(b"\x93fastcal-nbi")
    if case == "file of another user":  # and loaded next time
        again = _run(["-c", SMALL], env)
        assert again.returncode == 0 and again.stdout == expected and _notes(again.stderr) == []

"""The build step that ships compiled kernels (everything else is in pyproject.toml).

``build_py`` (run by ``pip install .``, by a wheel build, and by the editable install of
``make``) compiles the kernels of the common calls once into ``fastcal/_kernels/_shipped/``
of the package it builds, so that the first call after an install loads them instead of
compiling (see fastcal/_kernels/_shipped.py). They are compiled for the build machine's
CPU; ``FASTCAL_SHIP_CPU=x86-64-v3`` (or ``x86-64-v4``) names a baseline instead, for a
wheel meant for other machines. When that cannot be done (another CPU family, a baseline
the build machine cannot run, a failure of the compile), the package is built without
them and compiles at first call, as before: it says so on the build's output, and
nothing else changes. ``FASTCAL_SHIPPED_KERNELS=0`` at build time skips the step.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

# Run in children, one per group of fastcal.warmup.KINDS (3 of them on 2 cores take
# about half the time of one): each child's Numba compiles for the build's target CPU,
# and every kernel it compiles is written to the folder FASTCAL_SHIP_KERNELS_TO names
# (under a lock: fastcal._kernels._shipped.Writer). The first part writes the manifest.
# tracking's filters are not shipped (30 s more of compiling at every install): they
# compile at their first run, into your cache.
#
# Before the binary parts, one child compiles the ahead-of-time module of the default
# binary report's kernels (fastcal/_kernels/_aot.py), beside the K-class part; the binary
# parts then run those calls through it and compile the rest. Without a C compiler (or
# on any failure of it) the package is built without that module, and says so; a build
# for a baseline CPU (FASTCAL_SHIP_CPU) has none.
PARTS = ("binary", "binary-float-y", "classes")
AOT_CHILD = "from fastcal._kernels import _aot_build; _aot_build.main()"
CHILD = """
import sys
from fastcal._kernels import _shipped
name, features = _shipped.build_target()
uses = _shipped.requires(name, features)
if uses is None:
    print(f"the CPU features of {name} are unknown; name one of {', '.join(_shipped.BASELINES)}")
    raise SystemExit(3)
missing = _shipped.host_lacks(uses)
if missing:  # the children run the kernels they compile
    print(f"{missing}, which code for {name} uses")
    raise SystemExit(3)
part = sys.argv[2]
from fastcal.warmup import warmup
warmup(ship=True, kinds=(part,))
if part == "binary":
    from fastcal._kernels import _sources
    _shipped.finish(sys.argv[1], _sources.sources_digests())
"""


class BuildWithKernels(build_py):
    """``build_py``, then the shipped kernels compiled into the package being built."""

    def run(self):
        super().run()
        if os.environ.get("FASTCAL_SHIPPED_KERNELS") == "0":
            return
        src = os.path.dirname(os.path.abspath(__file__))
        root = os.path.abspath(src if self.editable_mode else self.build_lib)  # the sources the package runs
        dest = os.path.join(root, "fastcal", "_kernels", "_shipped")
        t0 = time.perf_counter()
        why = ship(root, dest)
        took = time.perf_counter() - t0
        print(f"fastcal: compiled kernels shipped in {dest} ({took:.0f} s)" if not why
              else f"fastcal: kernels not shipped ({why}); they compile at first call", flush=True)


def ship(root, dest):
    """Compile the shipped kernels into ``dest``; '' when done, else why not (``dest`` is then absent)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"shipped kernels are built for x86-64, this is {platform.machine()}"
    tmp = tempfile.mkdtemp(prefix="._shipped-", dir=os.path.dirname(dest))
    env = dict(os.environ, FASTCAL_SHIP_KERNELS_TO=tmp,
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    if os.environ.get("FASTCAL_SHIP_CPU"):  # a portable build: a baseline CPU, not this one
        env.update(NUMBA_CPU_NAME=os.environ["FASTCAL_SHIP_CPU"], NUMBA_CPU_FEATURES="")
    env.pop("NUMBA_DISABLE_JIT", None)
    children = []

    def start(*args):
        children.append(subprocess.Popen([sys.executable, "-c", *args], env=env, cwd=tmp, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        return children[-1]

    def finished(part, child):
        out, _ = child.communicate(timeout=1800)
        last = (out.strip().splitlines() or ["no output"])[-1]
        return "" if child.returncode == 0 else f"{part}: exit {child.returncode}: {last}"

    try:
        # a portable build has none: it would run the baseline's code ahead of the code that
        # `fastcal warmup` compiles for the CPU it runs on
        aot = None if os.environ.get("FASTCAL_SHIP_CPU") else start(AOT_CHILD, tmp)
        parts = {"classes": start(CHILD, tmp, "classes")}
        why = finished("ahead-of-time module", aot) if aot else "no ahead-of-time module for a baseline CPU"
        if why:  # nothing of a module that failed half-way is shipped
            for name in os.listdir(tmp):
                if name.startswith("_fastcal_aot") or name == "aot.json":
                    os.unlink(os.path.join(tmp, name))
        print(f"fastcal: {why or 'the default binary report compiled ahead of time'}", flush=True)
        parts.update((part, start(CHILD, tmp, part)) for part in PARTS if part != "classes")
        for part in PARTS:
            child = parts[part]
            why = finished(part, child)
            if why:
                return why
        os.unlink(os.path.join(tmp, ".lock"))
        for top, dirs, files in os.walk(tmp):  # whatever the umask: writable by no one else
            for name in dirs:
                os.chmod(os.path.join(top, name), 0o755)
            for name in files:
                os.chmod(os.path.join(top, name), 0o644)
        os.chmod(tmp, 0o755)
        old = dest + ".old"
        if os.path.isdir(dest):
            os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
        return ""
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        for child in children:  # the others, when one failed
            if child.poll() is None:
                child.kill()
            child.communicate()
        shutil.rmtree(tmp, ignore_errors=True)


class WheelWithKernels(bdist_wheel):
    """A wheel that holds shipped kernels is tagged for this Python and platform (it holds
    their machine code); without them it is pure Python, as before."""

    def run(self):
        self.run_command("build")  # run once: bdist_wheel's own call to it is then a no-op
        lib = self.get_finalized_command("build_py").build_lib
        self.root_is_pure = not os.path.isdir(os.path.join(lib, "fastcal", "_kernels", "_shipped"))
        super().run()


setup(cmdclass={"build_py": BuildWithKernels, "bdist_wheel": WheelWithKernels})

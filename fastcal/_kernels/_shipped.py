"""Kernels compiled when the package was built, shipped inside it, loaded instead of compiling.

The package's build step (``setup.py``: the wheel that ``pip install .`` builds, and
the editable install of ``make``) runs :func:`fastcal.warmup.warmup` and tracking's
default comparison once, in child processes whose Numba compiles for the build's
target CPU. Each kernel they compile is written to
``fastcal/_kernels/_shipped/<module folder>/``, in the checked file format of
:mod:`fastcal._kernels._cache` (magic bytes, digest, body), and a manifest (JSON,
never unpickled) names the versions, the target and the CPU features its code uses.

The target: by default the build machine's own CPU, with its features, which is what
Numba would compile for at the first call there (``pip install .`` and ``make`` build
where they install: the same code, the same speed, the same bits). For a wheel meant
for other machines, ``FASTCAL_SHIP_CPU=x86-64-v3`` at build time names a baseline
instead (:data:`BASELINES`: x86-64-v3, AVX2 and FMA, Intel since 2013 and AMD since
2015; x86-64-v4, AVX-512). Code for a baseline is slower where the CPU has more: on
an AVX-512 CPU the binary report ran 1.6-1.9x slower compiled for x86-64-v3 than for
the host (int64 / float64 conversions are vectorised only with AVX-512DQ), so a
machine that gets a baseline wheel runs ``fastcal warmup`` once to compile its own.

A process that meets a kernel signature its own cache does not hold loads the shipped
one, when all of these hold (else it compiles, as without shipped kernels):

- ``FASTCAL_SHIPPED_KERNELS`` is not ``0``;
- the manifest's Python, Numba, llvmlite and NumPy versions, target triple,
  ``NUMBA_OPT`` and ``NUMBA_BOUNDSCHECK`` are this process's;
- this process compiles for the host CPU (``NUMBA_CPU_NAME`` and
  ``NUMBA_CPU_FEATURES`` unset) and the host has every CPU feature the shipped code
  uses, so an older CPU never runs code it cannot (it compiles for itself instead);
- the folder and the files are owned by you or by root (a package that root
  installed) and writable by no one else: a shipped kernel is code, trusted as the
  cache is (:mod:`fastcal._kernels._trust`), and each file's digest is checked
  before it is unpickled;
- the kernel's stamp, a digest of its sources, is the installed sources' (in an
  editable install, an edited kernel module is compiled, not loaded stale).

Your own cache is looked up first, so ``fastcal warmup`` (which compiles past the
shipped kernels) puts code tuned to this CPU in front.
"""

import contextlib
import fcntl
import functools
import json
import os
import sys

import llvmlite
import numba
from numba.core import caching, config
import numpy as np

from fastcal._kernels import _aot, _trust

__all__ = ["BASELINES", "DIR", "ENV", "build_target", "disabled", "finish", "host_lacks", "load", "requires", "status",
           "writer_for"]

_V3 = ("avx", "avx2", "bmi", "bmi2", "cx16", "f16c", "fma", "lzcnt", "movbe", "popcnt", "sahf", "sse3",
       "sse4.1", "sse4.2", "ssse3", "xsave")
#: Baseline CPUs a portable build may name (``FASTCAL_SHIP_CPU``), and the LLVM features their code uses.
BASELINES = {"x86-64-v3": _V3, "x86-64-v4": (*_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")}
#: Where the shipped kernels live in the installed package.
DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shipped")
#: ``0`` turns the shipped kernels off; the build step sets :data:`SHIP_TO` in its child.
ENV = "FASTCAL_SHIPPED_KERNELS"
SHIP_TO = "FASTCAL_SHIP_KERNELS_TO"
_MANIFEST = "manifest.json"
_FORMAT = 1
_OFF: list = []  # non-empty while kernels are compiled past the shipped ones (fastcal warmup)


def _versions():
    """What the machine code depends on besides the sources and the CPU."""
    return {"format": _FORMAT, "python": f"{sys.implementation.name}-{sys.version_info[0]}{sys.version_info[1]}",
            "numba": numba.__version__, "llvmlite": llvmlite.__version__, "numpy": np.__version__,
            "opt": str(config.OPT), "boundscheck": str(config.BOUNDSCHECK)}


def requires(cpu_name, features):
    """The CPU features code compiled for ``cpu_name`` with ``features`` uses; None when unknown.

    An explicit feature string (the host's, as Numba passes it) lists them (``+avx2,...``);
    without one, a baseline's are those of :data:`BASELINES`.
    """
    if features:
        return sorted(f[1:] for f in features.split(",") if f.startswith("+"))
    return list(BASELINES[cpu_name]) if cpu_name in BASELINES else None


host_lacks = _aot.host_lacks


def build_target():
    """(cpu name, features) this process compiles for: Numba's settings, else the host's."""
    codegen = numba.core.registry.cpu_target.target_context.codegen()
    return codegen.magic_tuple()[1:]


@functools.cache
def _manifest():
    """(magic tuple, '') of usable shipped kernels, or (None, why not)."""
    if os.environ.get(ENV, "1") == "0":
        return None, f"{ENV}=0"
    if not os.path.isdir(DIR):
        return None, f"none shipped ({DIR} absent: built without them)"
    why = _trust.dir_problem(DIR, owners=(0,))
    if why:
        return None, f"{DIR} is {why}: not loaded"
    path = os.path.join(DIR, _MANIFEST)
    try:
        with _trust.open_trusted(path, owners=(0,)) as f:
            man = json.loads(f.read())
    except FileNotFoundError:
        return None, f"{path} absent: not loaded"
    except (_trust.Untrusted, ValueError, UnicodeDecodeError) as exc:
        return None, f"{path} not loaded ({exc})"
    ours = _versions()
    diff = [k for k in ours if man.get(k) != ours[k]]
    if diff:
        k = diff[0]
        return None, f"built for {k} {man.get(k)}, this is {ours[k]}"
    from llvmlite import binding as ll
    if man.get("triple") != ll.get_process_triple():
        return None, f"built for {man.get('triple')}, this is {ll.get_process_triple()}"
    if config.CPU_NAME is not None or config.CPU_FEATURES is not None:
        return None, "NUMBA_CPU_NAME or NUMBA_CPU_FEATURES is set: compiling for that CPU"
    why = host_lacks(man.get("requires", ["(unknown)"]))
    if why:
        return None, f"{why}, which the shipped kernels (compiled for {man['cpu_name']}) use"
    return (man["triple"], man["cpu_name"], man["cpu_features"]), ""


def status(sources=None):
    """'' when the shipped kernels are loaded, else why not.

    ``sources``: {folder: digest} of the kernel sources now (``_sources.sources_digests``):
    a folder whose sources changed since the build is named (its kernels are compiled).
    """
    magic, why = _manifest()
    if magic is None:
        return why
    with _trust.open_trusted(os.path.join(DIR, _MANIFEST), owners=(0,)) as f:
        built = json.loads(f.read()).get("sources", {})
    changed = [k for k, v in (sources or {}).items() if built.get(k) != v]
    return f"{', '.join(changed)} changed since the build: their kernels are compiled" if changed else ""


@contextlib.contextmanager
def disabled():
    """Within: kernels are compiled (for this CPU, into your cache), the shipped ones not loaded."""
    _OFF.append(True)
    try:
        yield
    finally:
        _OFF.pop()


def folder(py_func):
    """The shipped folder of ``py_func``: its module's package path (``fastcal/_kernels``)."""
    return os.path.join(*py_func.__module__.split(".")[:-1]) if "." in py_func.__module__ else "_"


def filename_base(py_func):
    """Numba's name for the cache files of ``py_func``, less the folder."""
    base = os.path.splitext(os.path.basename(py_func.__code__.co_filename))[0]
    name = f"{base}.{py_func.__qualname__}".replace("<", "").replace(">", "")
    return f"{name}-{py_func.__code__.co_firstlineno}.py{sys.version_info[0]}{sys.version_info[1]}"


def code_key(py_func):
    """The last part of Numba's index key: digests of the bytecode and the closure's contents."""
    return caching.FunctionCache._index_key(_KeyOf(py_func), None, _NoCodegen())[2]


class _KeyOf:
    def __init__(self, py_func):
        self._py_func = py_func


class _NoCodegen:
    def magic_tuple(self):
        return None


def load(py_func, sig, target_context, file_class, stamp):
    """The shipped compile result of ``py_func`` for ``sig``, or None (absent, unusable, or off)."""
    if _OFF:
        return None
    magic, _ = _manifest()
    if magic is None:
        return None
    cache_file = file_class(os.path.join(DIR, folder(py_func)), filename_base(py_func), stamp)
    data = cache_file.load((sig, magic, code_key(py_func)))
    if data is None:
        return None
    return caching.CompileResultCacheImpl.rebuild(None, target_context, data)


class Writer(caching.NullCache):
    """The build step's cache: every kernel compiled fresh, written to the shipped folder."""

    def __init__(self, py_func, root, file_class, stamp):
        self._py_func = py_func
        self._root = root
        self._file = file_class(os.path.join(root, folder(py_func)), filename_base(py_func), stamp)

    def save_overload(self, sig, cres):
        if not caching.CompileResultCacheImpl.check_cachable(None, cres):
            return
        key = (sig, cres.target_context.codegen().magic_tuple(), code_key(self._py_func))
        data = caching.CompileResultCacheImpl.reduce(None, cres)
        # the build step's children write the same folder: an index is read and rewritten under the lock
        with open(os.path.join(self._root, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            os.makedirs(self._file._cache_path, exist_ok=True)
            self._file.save(key, data)


def writer_for(py_func, file_class, stamp):
    """The build step's :class:`Writer` when this process is that step's child, else None."""
    root = os.environ.get(SHIP_TO)
    return Writer(py_func, root, file_class, stamp) if root else None


def finish(root, sources):
    """Write the manifest of the kernels written under ``root`` (by a child of the build step).

    ``sources``: {folder: digest} of the kernel sources they were compiled from (what
    :func:`status` compares; each kernel's own stamp decides its load).
    """
    from llvmlite import binding as ll
    codegen = numba.core.registry.cpu_target.target_context.codegen()
    triple, cpu_name, features = codegen.magic_tuple()
    man = dict(_versions(), triple=ll.get_process_triple(), cpu_name=cpu_name, cpu_features=features,
               requires=requires(cpu_name, features), sources=sources)
    if triple != man["triple"] or man["requires"] is None:
        msg = f"cannot ship kernels compiled for {cpu_name} on {triple} (CPU features unknown)"
        raise RuntimeError(msg)
    with open(os.path.join(root, _MANIFEST), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)


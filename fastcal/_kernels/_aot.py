"""The default binary report's kernels compiled ahead of time: run without importing Numba.

The package's build step (``setup.py``, :mod:`fastcal._kernels._aot_build`) compiles
the kernels of :data:`KERNELS`, for the argument types listed there, into one
extension module in the shipped folder (``fastcal/_kernels/_shipped/``), with
``numba.pycc``, for the same CPU as the shipped kernels and from the same Python
functions, options and pipeline as the JIT kernels: the same machine code, the same
bits, and the GIL released as by the JIT kernels (threads fill at once).

A call of one of these kernels (:class:`fastcal._kernels._lazy.Kernel`) runs the
exported function when its arguments are exactly of an exported signature (array
dtypes, dimensions, C order, alignment, writable where written; scalar types), else
the JIT kernel. A later process's first binary report of 10,000 rows then never
imports Numba, whose import and set-up took 0.3-0.4 s of it.

The module is loaded when all of these hold (else every call runs the JIT kernels,
as without it, and :func:`status` says why):

- ``FASTCAL_AOT`` is not ``0``;
- the folder, the manifest and the module are owned by you or by root and writable
  by no one else (:mod:`fastcal._kernels._trust`), and the module's digest is the
  manifest's (checked before it is loaded: loading it runs its code);
- the manifest's Python, extension suffix and NumPy version are this process's;
- the kernel sources are those it was built from (an edited kernel runs JIT);
- this CPU has every feature the code uses (read from ``/proc/cpuinfo``, else from
  llvmlite), so an older CPU never runs code it cannot.
"""

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
import threading

import numpy as np

from fastcal._kernels import _sources, _trust

__all__ = ["ENV", "KERNELS", "MANIFEST", "MODULE", "exported", "exports", "fits", "host_lacks", "status"]

ENV = "FASTCAL_AOT"
MODULE = "_fastcal_aot"
MANIFEST = "aot.json"
FORMAT = 1
_DIR = os.path.join(_sources.HERE, "_shipped")
_SHIP_TO = "FASTCAL_SHIP_KERNELS_TO"  # the build step's children: the folder being built

# Argument codes: "f4:r1" a read-only 1-d C-ordered float32 array (writable ones fit too),
# "i8:2" a writable 2-d int64 array, "i8" / "f8" / "b1" an int64 / float64 / bool scalar;
# "{p}" is each of FLOATS and "{y}" each of LABELS, one export each. Results: "void", a
# code, or codes joined by commas (a tuple).
FLOATS = ("f4", "f8")
LABELS = ("u1", "f8")
_FILL = ("{p}:r1", "{y}:r1", "i8", "i8", "f8:1", "b1", "b1", "b1", "f8", "b1", "i8:2", "f8:2", "f8:1",
         "i8:1", "i8:2", "f8:1")
_GATHER = ("{p}:r1", "{y}:r1", "b1", "i8:1", "i8:1", "i8:1", "u1:1", "i8:1")
#: (module of fastcal._kernels, kernel, argument codes, result): the calls of a default
#: binary report (``calibration_report(y, p)``, ``fastcal score``) with float32 or
#: float64 probabilities and labels read as uint8 (integers of any width, bool) or
#: float64 (float labels, and the labels of a file).
KERNELS = (
    ("binary", "fill_range_fine", _FILL, "void"),
    ("binary", "binned_scalars", ("i8:2", "f8:2", "i8", "i8"), "f8,f8,f8"),
    ("binary", "binned_measures", ("i8:3", "i8", "i8", "f8:3", "i8"), "f8:2,f8:1"),
    ("equal_mass", "gather_buckets", _GATHER, "void"),
    ("equal_mass", "bucket_groups", ("i8:2", "f8:1", "i8", "i8:2", "f8:2", "i8:1", "i8:1"), "i8"),
    ("equal_mass", "add_rows", ("f8:1", "u1:1", "i8:1", "i8:2", "f8:2"), "void"),
)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_SCALARS = {"i8": frozenset({int, np.int64}), "f8": frozenset({float, np.float64}),
            "b1": frozenset({bool, np.bool_})}

# LLVM's names of CPU features where Linux's /proc/cpuinfo names them otherwise
_CPUINFO = {"64bit": "lm", "bmi": "bmi1", "crc32": "sse4_2", "cx16": "cx16", "lzcnt": "abm",
            "pclmul": "pclmulqdq", "prfchw": "3dnowprefetch", "rdrnd": "rdrand", "sahf": "lahf_lm",
            "sha": "sha_ni", "sse3": "pni", "avx512bf16": "avx512_bf16", "avx512bitalg": "avx512_bitalg",
            "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni", "avx512vpopcntdq": "avx512_vpopcntdq",
            "avx512fp16": "avx512_fp16", "avxvnni": "avx_vnni", "vp2intersect": "avx512_vp2intersect"}
# shadow-stack instructions are encoded as no-ops where the CPU lacks them (Linux lists
# the feature only when the kernel enables it)
_NOP_WHERE_ABSENT = frozenset({"shstk"})


def export_names(module, kernel, codes):
    """[(export name, argument codes)] of one kernel of :data:`KERNELS`."""
    if not any("{" in c for c in codes):
        return [(kernel, codes)]
    return [(f"{kernel}_{p}_{y}", tuple(c.format(p=p, y=y) for c in codes)) for p in FLOATS for y in LABELS]


def _check_of(code):
    """A parsed argument code: (dtype, ndim, must be writable) or the scalar's types."""
    if ":" not in code:
        return _SCALARS[code]
    dtype, shape = code.split(":")
    return (np.dtype(dtype), int(shape[-1]), not shape.startswith("r"))


_TABLE = {(f"fastcal._kernels.{m}", k): [(name, tuple(map(_check_of, codes))) for name, codes in
                                          export_names(m, k, codes)] for m, k, codes, _ in KERNELS}


def exported(py_func):
    """Whether ``py_func`` is a kernel of :data:`KERNELS` (whether or not the module loads)."""
    return (py_func.__module__, py_func.__qualname__) in _TABLE


def exports(py_func):
    """((function, checks), ...) of ``py_func`` in the loaded module; () when none."""
    rows = _TABLE.get((py_func.__module__, py_func.__qualname__))
    module = _load()[0] if rows else None  # (loaded only for a kernel it exports)
    if module is None:
        return ()
    return tuple((getattr(module, name), checks) for name, checks in rows)


def fits(args, checks):
    """Whether ``args`` are exactly of the exported signature ``checks``."""
    if len(args) != len(checks):
        return False
    for a, c in zip(args, checks):
        if c.__class__ is tuple:  # (a few us a call: the order of the tests is the fastest found)
            dtype, ndim, written = c
            if not isinstance(a, np.ndarray) or a.ndim != ndim or (a.dtype is not dtype and a.dtype != dtype):
                return False
            flags = a.flags
            if not (flags.carray if written else flags.c_contiguous and flags.aligned):
                return False
        elif a.__class__ not in c or (a.__class__ is int and not _INT64[0] <= a <= _INT64[1]):
            return False
    return True


def status():
    """'' when the ahead-of-time module is loaded, else why not."""
    return _load()[1]


def versions():
    """What the module depends on besides the sources and the CPU."""
    return {"format": FORMAT, "python": sys.implementation.cache_tag, "numpy": np.__version__,
            "suffix": sysconfig.get_config_var("EXT_SUFFIX")}


def folder():
    """The folder the module is read from: the shipped one, or the one a build step's child fills."""
    return os.environ.get(_SHIP_TO) or _DIR


def host_lacks(features):
    """Which of ``features`` the host CPU lacks ('' when none): it could not run that code.

    Read from Linux's ``/proc/cpuinfo`` (no import); where that does not answer (another
    system, a feature Linux names otherwise), from llvmlite.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.partition(":")[2].split())
                    break
            else:
                have = None
    except OSError:
        have = None
    if have is not None:
        unknown = [f for f in features if f not in _NOP_WHERE_ABSENT and _CPUINFO.get(f, f.replace(".", "_"))
                   not in have]
        if not unknown:
            return ""
    from llvmlite import binding as ll  # another system, or a name Linux spells otherwise

    try:
        have = ll.get_host_cpu_features()
    except RuntimeError as exc:
        return f"the host CPU's features are unknown ({exc})"
    missing = [f for f in features if not have.get(f, False)]
    return f"the host CPU lacks {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}" if missing else ""


def _load():
    """(module, '') or (None, why it is not loaded): decided once a process (threads wait)."""
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                _LOADED.append(_decide())
    return _LOADED[0]


_LOADED: list = []
_LOCK = threading.Lock()


def _decide():
    if os.environ.get(ENV, "1") == "0":
        return None, f"{ENV}=0"
    where = folder()
    path = os.path.join(where, MANIFEST)
    if not os.path.exists(path):
        return None, f"none built ({path} absent)"
    try:
        why = _trust.dir_problem(where, owners=(0,))
        if why:
            return None, f"{where} is {why}: not loaded"
        with _trust.open_trusted(path, owners=(0,)) as f:
            man = json.loads(f.read())
        if not isinstance(man, dict):
            return None, f"{path} is not a manifest (a JSON {type(man).__name__}): not loaded"
        ours = versions()
        diff = [k for k in ours if man.get(k) != ours[k]]
        if diff:
            return None, f"built for {diff[0]} {man.get(diff[0])}, this is {ours[diff[0]]}"
        if man.get("sources") != _sources.dir_digest(_sources.HERE):
            return None, "the kernel sources changed since the build: the JIT kernels run"
        why = host_lacks(man.get("requires") or ["(unknown)"])
        if why:
            return None, f"{why}, which its code (compiled for {man.get('cpu_name')}) uses"
        so = os.path.join(where, MODULE + ours["suffix"])
        with _trust.open_trusted(so, owners=(0,)) as f:
            digest = hashlib.blake2b(f.read(), digest_size=_sources.DIGEST).hexdigest()
        if digest != man.get("digest"):
            return None, f"{so} is not the file that was built (its digest differs): not loaded"
        spec = importlib.util.spec_from_file_location(
            f"fastcal._kernels.{MODULE}", so, loader=importlib.machinery.ExtensionFileLoader(
                f"fastcal._kernels.{MODULE}", so))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (_trust.Untrusted, OSError, ValueError, UnicodeDecodeError, ImportError) as exc:
        return None, f"not loaded ({type(exc).__name__}: {exc})"
    missing = [name for rows in _TABLE.values() for name, _ in rows if not hasattr(module, name)]
    if missing:
        return None, f"the module lacks {missing[0]}: not loaded"
    return module, ""

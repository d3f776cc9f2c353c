"""One compiled batched kernel per model pair, cached on disk across processes.

The batched EKF / UKF lives in ``tracking/kernels/batch_template.py`` as source text
written against a few module globals (the model functions ``f, F, h, H``, the
dimensions, the components the sensor reads, which measurement components are
angles). For a model pair, :func:`kernel_for` writes that source below a header
binding those globals into a small module file named by a fingerprint of the
pair, imports it, and returns its ``run_batch``: Numba sees the dimensions as
compile-time constants and inlines the model functions.

Why a generated file and not a Numba closure: Numba's disk cache keys a closure
on its pickled closure variables, and a pickled dispatcher carries an id that is
new in every process, so a closure over the model functions never hits the
cache (it recompiles in every process and adds a file to the cache each time).
A generated module has no closure: Numba caches it like any source file.

Importable model functions (module level in an importable module) are imported
by the kernel file. Functions defined in ``__main__`` or a notebook have their
source written into the kernel file instead, with the modules, number constants,
closure values and compiled functions they read (:func:`_inline_sources`), so
they are cached too. What cannot be written down (an array global, a lambda)
is compiled in memory, once per process, with one note.

A kernel file is imported only when it and its directory are the user's own,
not group- or world-writable (the rule of ``fastcal.jit.trust_problem``, which fastcal's
kernel cache applies too), and it holds exactly the text that would be written
now; otherwise it is rewritten (its Numba cache removed) with a note. Numba's
cache of a kernel is loaded under the same rule, wherever ``NUMBA_CACHE_DIR``
puts it, and a damaged cache file is recompiled and rewritten with a note naming
it (``fastcal.jit.njit``, which the kernels are compiled with).

Where the motion Jacobian is sparse (most of a coordinated turn's or a
constant-velocity model's ``F`` is zero), the factory also writes
``F P F^T + Q`` as straight-line code over the nonzero entries of ``F`` only
(:func:`jacobian_pattern` finds them by evaluating ``F`` at a few random
states). The kernel checks at every step that ``F`` is zero outside that pattern
and falls back to the dense product when it is not, so a wrong guess costs
speed, never correctness. The sparse product adds the same nonzero terms in the
same order as the dense loops (the skipped terms are exact zeros), so both give
the same bits for finite inputs.

The fingerprint covers the template, the header, ``tracking/kernels/blocks.py``
(which the template inlines), the bytecode of each model function and, for
tracking's own models, the source of their module (``tracking/models/physics.py``),
so editing a model function, the built-in physics or the shared building blocks
gives a new kernel file. As with Numba's
own cache, an edit to a function that a model function *calls* is not seen;
delete the kernel directory (``tracking.kernel_dir()``) after such edits.
"""

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import re
import stat
import sys
import tempfile
import textwrap
import threading
import types
import warnings

import numba
import numpy as np

from fastcal.jit import make_trusted_dir, trust_problem
from tracking.kernels import blocks as _k
from tracking.kernels.guard import ModelStalled, bounds_checked, call_watched

_TEMPLATE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_template.py")
_LOCK = threading.Lock()
_KERNELS = {}


def kernel_dir():
    """Directory of the generated kernel modules (and, beside them, Numba's cache).

    ``$TRACKING_KERNEL_DIR`` if set, else ``$XDG_CACHE_HOME/tracking-kernels``
    (``~/.cache/tracking-kernels``).

    Examples
    --------
    >>> import os
    >>> from tracking import kernel_dir
    >>> os.path.isabs(kernel_dir())
    True
    """
    path = os.environ.get("TRACKING_KERNEL_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "tracking-kernels")
    return path


def _inlined_sources(funcs):
    """The text of ``tracking/kernels/blocks.py`` and of the modules of tracking's own model functions."""
    files = [_k.__file__]
    for disp in funcs.values():
        module = sys.modules.get(getattr(disp.py_func, "__module__", None) or "")
        path = getattr(module, "__file__", None)
        if path and module.__name__.split(".")[0] == "tracking" and path not in files:
            files.append(path)
    out = []
    for path in files:
        with open(path, encoding="utf-8") as fh:
            out.append(fh.read())
    return out


def _template():
    with open(_TEMPLATE_PATH, encoding="utf-8") as fh:
        return fh.read()


def _import_path(disp):
    """``(module, qualname)`` from which ``disp`` can be imported again, or None."""
    py = getattr(disp, "py_func", None)
    if py is None:
        return None
    module, qualname = getattr(py, "__module__", None), getattr(py, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return (module, qualname) if obj is disp else None


def _code_fingerprint(disp, h):
    code = disp.py_func.__code__
    h.update(code.co_code)
    h.update(repr(code.co_consts).encode())
    h.update(repr(code.co_names).encode())


def _header(paths, consts, cache):
    lines = [
        "# Generated by tracking.kernels.factory from tracking/kernels/batch_template.py; do not edit.",
        "import importlib as _importlib",
        "",
        "",
        "def _resolve(module, qualname):",
        "    obj = _importlib.import_module(module)",
        "    for part in qualname.split('.'):",
        "        obj = getattr(obj, part)",
        "    return obj",
        "",
        "",
    ]
    if paths:
        lines += ["from tracking.kernels.guard import bounds_checked as _checked", ""]
    for name, path in paths.items():
        lines.append(f"{name} = _checked(_resolve({path[0]!r}, {path[1]!r}))")
    for name, value in consts.items():
        lines.append(f"{name} = {value!r}")
    lines.append(f"CACHE = {cache!r}")
    return "\n".join(lines) + "\n\n"


# Straight-line code grows with n * nnz(F); past this many multiply-adds the
# dense loops (which LLVM keeps as loops) are used instead.
_MAX_SPARSE_TERMS = 4096
# Use the sparse product only when it skips at least this fraction of the work.
_MAX_SPARSE_DENSITY = 0.75


def jacobian_pattern(F, n, dt, params, *, probes=3, seed=20261123):
    """Nonzero pattern of a motion Jacobian ``F(x, dt, p, out)``: a tuple of ``n * n`` bools, or None.

    ``F`` is evaluated at ``probes`` random states (standard normal times 10); an
    entry is in the pattern if it is nonzero or not finite at any of them. None
    (use the dense product) when ``F`` is None, raises, or is too dense for the
    sparse code to pay (see ``_MAX_SPARSE_DENSITY``, ``_MAX_SPARSE_TERMS``).
    The kernel re-checks the pattern at every step, so an entry that is zero at
    the probes but not elsewhere only costs speed: those steps take the dense product.
    """
    if F is None:
        return None
    F = bounds_checked(F)
    rng = np.random.default_rng(seed)
    nonzero = np.zeros((n, n), dtype=bool)
    p = np.require(np.asarray(params, dtype=np.float64), requirements=["C", "W"])
    who = f"motion.F_jit ({getattr(F.py_func, '__qualname__', '?')})"
    try:
        for _ in range(probes):
            x = 10.0 * rng.standard_normal(n)
            out = np.zeros((n, n))
            args = (x, float(dt), p, out)
            F.compile(tuple(numba.typeof(a) for a in args))  # here: compiling is not the model's time
            call_watched(F, args, who=who, where="at a random state")
            nonzero |= (out != 0.0) | ~np.isfinite(out)
    except ModelStalled:
        raise
    except Exception:  # noqa: BLE001 - any other failure only means "no fast path"
        return None
    nnz = int(nonzero.sum())
    if nnz > _MAX_SPARSE_DENSITY * n * n or 2 * n * nnz > _MAX_SPARSE_TERMS:
        return None
    return tuple(bool(v) for v in nonzero.reshape(-1))


def _sparse_source(n, pattern):
    """Source of ``pattern_holds(Fm)`` and ``fpft_sparse(Fm, P, Q, Pp)`` for one pattern.

    ``fpft_sparse`` writes ``Pp = F P F^T + Q`` term by term over the nonzeros of
    ``F``, in the order of the dense loops of ``predict_linearised``.
    """
    lines = [
        "",
        "",
        "# ---- generated by tracking.kernels.factory for the nonzero pattern of F",
        "@njit(**_OPTS)",
        "def pattern_holds(Fm):",
    ]
    if pattern is None:
        lines += ["    return False", "", "", "@njit(**_OPTS)", "def fpft_sparse(Fm, P, Q, Pp):", "    return"]
        return "\n".join(lines) + "\n"
    rows = [[k for k in range(n) if pattern[i * n + k]] for i in range(n)]
    zeros = [f"Fm[{i}, {k}] == 0.0" for i in range(n) for k in range(n) if not pattern[i * n + k]]
    if zeros:
        lines.append("    return (" + zeros[0])
        lines += [f"            and {z}" for z in zeros[1:]]
        lines.append("            )")
    else:
        lines.append("    return True")
    lines += ["", "", "@njit(**_OPTS)", "def fpft_sparse(Fm, P, Q, Pp):"]
    for i in range(n):
        for j in range(n):
            terms = [f"Fm[{i}, {k}] * P[{k}, {j}]" for k in rows[i]]
            lines.append(f"    t{i}_{j} = " + (" + ".join(terms) if terms else "0.0"))
    for i in range(n):
        for j in range(n):
            terms = [f"t{i}_{k} * Fm[{j}, {k}]" for k in rows[j]]
            lines.append(f"    Pp[{i}, {j}] = " + (" + ".join(terms) if terms else "0.0") + f" + Q[{i}, {j}]")
    return "\n".join(lines) + "\n"


def _note(text):
    """One line on stderr (a warning, so callers and tests can see or silence it)."""
    warnings.warn(text, RuntimeWarning, stacklevel=5)


def _private(st):
    return not trust_problem(st)


def _private_dir(path):
    """``path`` is (or is made) a directory of ours that no one else can write to."""
    try:
        make_trusted_dir(path, mode=0o700)
    except OSError:  # fastcal.jit.Untrusted included
        return False
    return True


def _why_not(path, text):
    """Why the file at ``path`` cannot be imported as the kernel ``text`` ('' when it can, None when absent)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or not _private(st):
        return "it is not a regular file of yours that only you can write"
    try:
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    except (OSError, UnicodeDecodeError):
        current = None
    if current != text:
        return "its content is not the kernel it should hold (damaged or replaced)"
    return ""


def _clear_cache(folder, name):
    """Remove Numba's cache files of kernel ``name`` (they are pickles: only ours may be loaded)."""
    cache = os.path.join(folder, "__pycache__")
    try:
        entries = os.listdir(cache)
    except OSError:
        return
    for f in entries:
        if f.startswith(name + "."):
            try:
                os.remove(os.path.join(cache, f))
            except OSError:
                pass


def _cache_ok(folder, name):
    """Numba's cache files of kernel ``name``: all ours and private (else they are removed)."""
    cache = os.path.join(folder, "__pycache__")
    try:
        st = os.stat(cache)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not _private(st):
        return False
    bad = []
    for f in os.listdir(cache):
        if f.startswith(name + "."):
            try:
                fst = os.lstat(os.path.join(cache, f))
            except OSError:
                continue
            if not stat.S_ISREG(fst.st_mode) or not _private(fst):
                bad.append(f)
    if bad:
        _clear_cache(folder, name)
    return True


def _write_private(path, text):
    """Write ``text`` to ``path`` (mode 0644) through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _kernel_file(path, name, text):
    """The kernel file at ``path`` holding ``text``, checked before import; None: compile in memory.

    Imported only if it is ours, not group/world-writable, in a directory of the
    same kind, and holds exactly ``text``; otherwise rewritten (its Numba cache
    removed) with one note. An unsafe directory means compiling in memory.
    """
    folder = os.path.dirname(path)
    if not _private_dir(folder):
        _note(f"tracking: kernel directory {folder} is not a private directory of yours (owner or "
              "group/world-writable); compiling in memory (set TRACKING_KERNEL_DIR to a private directory)")
        return None
    why = _why_not(path, text)
    if why:
        _note(f"tracking: rewrote the kernel {path}: {why}")
        _clear_cache(folder, name)
        try:
            os.remove(path)
        except OSError:
            pass
    if why is None or why:
        _write_private(path, text)
    if not _cache_ok(folder, name):
        _note(f"tracking: the kernel cache {os.path.join(folder, '__pycache__')} is not private; compiling in memory")
        return None
    return path


def _load_kernel(name, path, text):
    """Import the kernel module; a damaged file or cache is rewritten once, with a note naming it."""
    try:
        module = _load_file(name, path)
        module.run_batch  # noqa: B018 - a truncated file may import without it
        return module
    except (SyntaxError, AttributeError, ImportError, EOFError, ValueError) as exc:
        _note(f"tracking: kernel {path} could not be loaded ({type(exc).__name__}); rewriting it and its cache")
        sys.modules.pop(name, None)
        _clear_cache(os.path.dirname(path), name)
        _write_private(path, text)
        return _load_file(name, path)


_RESERVED = {"f", "F", "h", "H", "np", "njit", "prange", "CACHE", "_resolve", "_importlib", "_njit", "_checked"}
_SAME = {"np": np, "njit": numba.njit, "prange": numba.prange}  # names the template binds itself


class _Inliner:
    """The source of model functions that cannot be imported, with what they read.

    ``defs``: function name -> its source and the line compiling it; ``names``:
    global name -> the line binding it (an import, a number, an importable
    compiled function). A name that cannot be written down, or that the
    template uses (``reserved``), makes :meth:`visit` answer False.
    """

    def __init__(self, reserved):
        self.reserved = reserved
        self.defs = {}
        self.names = {}

    def visit(self, disp):
        """Write down the compiled function ``disp`` and what it reads; False if impossible."""
        py = disp.py_func
        name = py.__name__
        if name in self.defs:
            return True
        if name in self.reserved or name == "<lambda>" or name in self.names:
            return False
        src = _function_source(disp)
        if src is None:
            return False
        self.defs[name] = src
        g = py.__globals__
        for ref in py.__code__.co_names:
            if ref in g and ref != name and not self.bind(ref, g[ref]):
                return False
        for ref, cell in zip(py.__code__.co_freevars, py.__closure__ or ()):
            if not self.bind(ref, cell.cell_contents):
                return False
        return True

    def bind(self, ref, v):
        """Write down the global (or closure value) ``ref`` = ``v``; False if impossible."""
        if ref in _SAME and v is _SAME[ref]:
            return True
        if isinstance(v, types.ModuleType):
            line = f"import {v.__name__} as {ref}" if v.__name__ != ref else f"import {ref}"
        elif isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v)):
            line = f"{ref} = {v!r}"
        elif hasattr(v, "py_func"):
            path = _import_path(v)
            if path is None:
                return self.visit(v)
            line = f"{ref} = _checked(_resolve({path[0]!r}, {path[1]!r}))"
        else:
            return False
        if ref in self.reserved or self.names.get(ref, line) != line:
            return False
        self.names[ref] = line
        return True

    def text(self, slots):
        """The source: imports, constants, the functions, then each slot bound to its function."""
        out = ["# model functions defined where they cannot be imported (a script, a notebook): their source,",
               "# compiled with bounds checks (tracking.kernels.guard.bounds_checked)",
               "from numba import njit as _njit", "from tracking.kernels.guard import bounds_checked as _checked", ""]
        out += sorted(v for v in self.names.values() if v.startswith("import"))
        out += sorted(v for v in self.names.values() if not v.startswith("import"))
        out += ["", ""] + list(self.defs.values()) + [""]
        out += [f"{slot} = {disp.py_func.__name__}" for slot, disp in slots.items()]
        return "\n".join(out) + "\n\n"


def _function_source(disp):
    """``def ...`` of a compiled function and the line compiling it with its own options, or None."""
    py = disp.py_func
    try:
        lines = textwrap.dedent(inspect.getsource(py)).splitlines()
    except (OSError, TypeError):
        return None
    start = next((i for i, line in enumerate(lines) if line.startswith("def ")), None)
    opts = dict(getattr(disp, "targetoptions", {}))
    for k in ("nopython", "inline"):  # njit's own; inlined code would take the kernel's options
        opts.pop(k, None)
    opts.update(boundscheck=True, nogil=True)  # as tracking.kernels.guard.bounds_checked compiles them
    if start is None or not all(v is None or isinstance(v, (bool, int, float, str)) for v in opts.values()):
        return None
    return "\n".join(lines[start:]) + f"\n\n\n{py.__name__} = _njit(**{opts!r})({py.__name__})\n"


def _inline_sources(slots, template, consts):
    """Source text defining the model functions of ``slots`` (they cannot be imported), or None.

    Each function's own source, compiled with its own options, with the modules,
    number constants and other compiled functions it reads (closure values too).
    None when something cannot be written down (an array global, a lambda, a
    name the template uses): the kernel is then compiled in memory.
    """
    reserved = _RESERVED | set(consts) | set(re.findall(r"^def\s+(\w+)", template, re.M)) | set(
        re.findall(r"^(\w+)\s*=", template, re.M)) | {"MISSED", "SINGULAR", "FAILED", "_k", "_OPTS"}
    inliner = _Inliner(reserved)
    if not all(inliner.visit(disp) for disp in slots.values()):
        return None
    return inliner.text(slots)


_NOTED = set()


def _note_in_memory(funcs):
    """Once per model pair: functions that cannot be imported again are compiled in every process."""
    where = sorted({getattr(getattr(d, "py_func", None), "__qualname__", "?") for d in funcs.values()
                    if _import_path(d) is None})
    key = tuple(where)
    if key in _NOTED:
        return
    _NOTED.add(key)
    _note(f"tracking: {', '.join(where)} cannot be imported from a module (defined in a script, a notebook or a "
          "function), so their kernel is compiled in every process; put the models in an importable module "
          "to compile once (see the README)")


def _load_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kernel_for(f, F, h, H, *, n, m, reads, angles, linear, ukf, f_pattern=None):
    """The batched ``run_batch`` kernel for one model pair (see the module docstring).

    ``F`` / ``H`` may be None (central differences). ``reads`` is a tuple of state
    indices, ``angles`` a tuple of ``m`` bools; ``ukf`` picks the unscented filter.
    ``f_pattern`` is the nonzero pattern of ``F`` from :func:`jacobian_pattern`
    (None: the dense ``F P F^T`` only).
    """
    # a dispatcher kept as a class attribute and read from an instance comes back bound: unwrap it
    f, F, h, H = (getattr(v, "__func__", v) for v in (f, F, h, H))
    if F is None:
        f_pattern = None
    if f_pattern is not None:
        f_pattern = tuple(bool(v) for v in f_pattern)
    key = (f, F, h, H, n, m, reads, angles, linear, ukf, f_pattern)
    with _LOCK:
        kernel = _KERNELS.get(key)
        if kernel is not None:
            return kernel
        funcs = {
            "f": f,
            "F": F if F is not None else _k.no_jacobian_f,
            "h": h,
            "H": H if H is not None else _k.no_jacobian_h,
        }
        consts = {
            "HAS_F": F is not None, "HAS_H": H is not None,
            "N": int(n), "M": int(m), "N_SIGMA": 2 * int(n) + 1,
            "READS": tuple(int(j) for j in reads), "ANGLES": tuple(bool(a) for a in angles),
            "LINEAR": bool(linear), "USE_UKF": bool(ukf),
            "F_SPARSE": f_pattern is not None,
        }
        template = _template() + _sparse_source(int(n), f_pattern)
        module = _cached_module(funcs, consts, template)
        # a damaged Numba cache file of a module is found by its digest and recompiled, with
        # one note naming it (fastcal.jit.njit)
        kernel = module.run_batch if module is not None else _in_memory(funcs, consts, template)
        _KERNELS[key] = kernel
        return kernel


def _cached_module(funcs, consts, template):
    """The kernel module, written to the kernel directory (or found there) and imported; None when
    it must be compiled in memory (the directory is not private, the disk is read-only or full,
    a model function cannot be written down)."""
    paths = {name: _import_path(disp) for name, disp in funcs.items()}
    inline = ""
    if None in paths.values():
        # defined in a script or a notebook: their source (and the constants and modules it reads)
        # goes into the kernel file, which Numba then caches like any other
        inline = _inline_sources({k: v for k, v in funcs.items() if paths[k] is None}, template, consts)
        if inline is None:
            _note_in_memory(funcs)
            return None
    text = _header({k: p for k, p in paths.items() if p is not None}, consts, True) + inline + template
    name = f"tracking_kernel_{_fingerprint(text, funcs)}"
    path = os.path.join(kernel_dir(), name + ".py")
    try:
        if _kernel_file(path, name, text) is None:
            return None
        return _load_kernel(name, path, text)
    except OSError:
        return None  # read-only or full disk: compile in memory


def _fingerprint(text, funcs):
    """20 hex digits naming the kernel: its text, what it inlines, Numba's version and flags."""
    digest = hashlib.sha256(text.encode())
    digest.update(numba.__version__.encode())
    # NUMBA_BOUNDSCHECK=0 compiles the model functions without their bounds checks:
    # another kernel, which a process without it must not load from the cache
    digest.update(repr(numba.config.BOUNDSCHECK).encode())
    # the template inlines tracking.kernels.blocks, and tracking's own model functions (the
    # built-in physics) the helpers of their module: an edit there must give a new kernel too
    for source in _inlined_sources(funcs):
        digest.update(source.encode())
    for disp in funcs.values():
        _code_fingerprint(disp, digest)
    return digest.hexdigest()[:20]


def _in_memory(funcs, consts, template):
    """The kernel compiled in this process only (not cached)."""
    namespace = {k: bounds_checked(v) for k, v in funcs.items()}
    namespace.update(consts)
    namespace["CACHE"] = False
    namespace["__name__"] = "tracking_kernel_in_memory"
    code = compile(template, "<tracking batched kernel>", "exec")
    exec(code, namespace)  # noqa: S102 - our own template, no user text
    return namespace["run_batch"]

"""Kernels declared without importing Numba; Numba loaded when a kernel first needs it.

Every kernel of fastcal is declared with ``@njit(...)`` from this module. Declaring
one records its Python function and options and returns a :class:`Kernel`; nothing
of Numba is imported. The first time any kernel has to run as Numba code (or is
asked for anything of its dispatcher), :func:`materialize` imports Numba (through
:mod:`fastcal._kernels._cache`, the checked disk cache and the shipped kernels), makes
every declared kernel's dispatcher, and puts the dispatchers in place of the
:class:`Kernel` objects in the kernel modules, where Numba reads the functions a
kernel calls.

Why: a process whose calls all run ahead-of-time compiled code
(:mod:`fastcal._kernels._aot`, the default binary report on its common inputs) then
never imports Numba, whose import and target set-up cost 0.3-0.4 s of the 0.7-0.9 s
first report of a later process on a 2-core machine. A process that does need Numba
pays the same as before, once.

The kernels that the ahead-of-time module exports stay :class:`Kernel` objects after
:func:`materialize` (each call from Python picks the exported function that fits its
arguments, else the dispatcher). Numba code that calls one (``binary.fill_range``
calls ``fill_range_fine``), or a module outside fastcal._kernels that bound a kernel
before the dispatchers were made, types it as its dispatcher (registered by
:func:`materialize`). Code that compiles its own kernels materializes first:
``fastcal.jit.njit`` (tracking's kernels) before it compiles, and the GPU kernels
(:mod:`fastcal._kernels._cuda`) when they are imported.
"""

import importlib
import sys
import threading

from fastcal._kernels import _aot

__all__ = ["Kernel", "intrinsic", "materialize", "njit", "numba_loaded"]

_KERNELS: list = []  # every Kernel declared, in order
_INTRINSICS: list = []
_LOCK = threading.RLock()
_READY: list = []  # [fastcal._kernels._cache] once the dispatchers are made
_PREFIX = "fastcal._kernels."


def numba_loaded():
    """Whether this process has made the kernels' dispatchers (Numba imported and set up)."""
    return bool(_READY)


class Kernel:
    """One kernel: its ahead-of-time export where one fits the call, else Numba's dispatcher.

    Attributes other than ``py_func`` are the dispatcher's (``overloads``,
    ``signatures``, ``targetoptions``, ...): asking for one makes the dispatchers.
    """

    def __init__(self, fn, options):
        self.py_func = self.__wrapped__ = fn
        self.__name__, self.__qualname__, self.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        self._options = options
        self._disp = None
        self._aot = None  # the exports of this kernel, looked up at the first call

    def __call__(self, *args):
        exports = self._aot
        if exports is None:
            exports = self._aot = _aot.exports(self.py_func)
        for fn, spec in exports:
            if _aot.fits(args, spec):
                return fn(*args)
        return (self._disp or self.dispatcher())(*args)

    def dispatcher(self):
        """Numba's dispatcher of this kernel (made, with every other kernel's, at the first ask)."""
        if self._disp is None:
            materialize()
        return self._disp

    def exported(self):
        """Whether the ahead-of-time module exports this kernel (it then stays a Kernel)."""
        return _aot.exported(self.py_func)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __repr__(self):
        return f"<fastcal kernel {self.py_func.__module__}.{self.__qualname__}>"

    def __reduce__(self):
        # by name, as a function is (a Dask task that holds one): the receiving process
        # finds its own (its module, the extension module of its own install)
        return _named, (self.py_func.__module__, self.__qualname__)


def _named(module, name):
    """The kernel (or, once made, the dispatcher) ``module.name``."""
    return getattr(importlib.import_module(module), name)


class _Intrinsic:
    """A Numba intrinsic declared without Numba: made by :func:`materialize`."""

    def __init__(self, fn):
        self.fn = fn
        self.made = None


def njit(*args, cache=False, **options):
    """``fastcal._kernels._cache.njit``, made when a kernel first needs Numba (see the module).

    Once Numba is loaded, kernels declared later (a kernel module imported then) are
    made at once. Options as :func:`fastcal._kernels._cache.njit`.
    """
    if args and not callable(args[0]):
        msg = "njit: pass options as keywords; explicit signatures are not used in fastcal"
        raise TypeError(msg)
    options["cache"] = cache

    def wrap(fn):
        with _LOCK:
            kernel = Kernel(fn, options)
            if _READY:
                kernel._disp = _READY[0].njit(**options)(fn)
                return kernel if kernel.exported() else kernel._disp
            _KERNELS.append(kernel)
            return kernel

    return wrap(args[0]) if args else wrap


def intrinsic(fn):
    """``numba.core.extending.intrinsic``, made by :func:`materialize` (its body imports what it types)."""
    with _LOCK:
        if _READY:
            from numba.core.extending import intrinsic as make

            return make(fn)
        item = _Intrinsic(fn)
        _INTRINSICS.append(item)
        return item


def materialize():
    """Import Numba and make every declared kernel's dispatcher (once; thread-safe).

    In every loaded module of fastcal._kernels, a :class:`Kernel` or an intrinsic
    bound to a name is replaced by what Numba compiles from, except the kernels the
    ahead-of-time module exports, which stay :class:`Kernel` objects.
    """
    if _READY:
        return
    with _LOCK:
        if _READY:
            return
        from numba.core.extending import intrinsic as make
        from numba.core.typing.typeof import typeof_impl

        from fastcal._kernels import _cache

        typeof_impl.register(Kernel, _typeof_kernel)
        for item in _INTRINSICS:
            item.made = make(item.fn)
        for kernel in _KERNELS:
            kernel._disp = _cache.njit(**kernel._options)(kernel.py_func)
        _swap_globals()
        _READY.append(_cache)


def _typeof_kernel(val, c):
    """A :class:`Kernel` that Numba code reads (an exported one, one bound in a test) is its dispatcher."""
    from numba.core.typing.typeof import typeof_impl

    return typeof_impl(val.dispatcher(), c)


def _swap_globals():
    for name, module in list(sys.modules.items()):
        if not name.startswith(_PREFIX) or module is None:
            continue
        space = vars(module)
        for key, value in list(space.items()):
            if isinstance(value, _Intrinsic):
                space[key] = value.made
            elif isinstance(value, Kernel) and not value.exported():
                space[key] = value._disp

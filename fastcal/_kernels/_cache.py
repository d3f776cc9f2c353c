"""Numba's ``njit`` with a disk cache that never stops a run.

Every kernel is declared with ``@njit(..., cache=True)`` from this module. The
cache is Numba's own (same locations: ``$NUMBA_CACHE_DIR``, ``__pycache__`` next
to the source, ``~/.cache/numba``), with two differences:

- when no location is writable (a read-only install run by a service account),
  kernels are compiled in memory for the process and one note says so, where
  Numba raises "no locator available" at import;
- every index and data file carries a digest, checked before the file is
  unpickled, so a truncated or bit-flipped file is recompiled (and rewritten)
  with one note naming it, where Numba raises or crashes on every later run.

Notes are :class:`CacheWarning` warnings, at most one of each kind per process.
"""

import functools
import hashlib
import os
import pickle
import warnings

import numba
from numba.core import caching

_DIGEST = 16
_VERSION = numba.__version__ + "+fastcal-digest-1"
_NOTED = set()


class CacheWarning(UserWarning):
    """Kernels could not use the disk cache; they were compiled in this process."""


class DamagedCacheFile(Exception):
    """A cache file whose digest or contents do not check out."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _note(kind, msg):
    if kind not in _NOTED:
        _NOTED.add(kind)
        warnings.warn(msg, CacheWarning, stacklevel=2)


def _digest(data):
    return hashlib.blake2b(data, digest_size=_DIGEST).digest()


def _checked(path, blob):
    """The payload of ``blob`` (digest + payload), or raise DamagedCacheFile."""
    body = blob[_DIGEST:]
    if len(blob) < _DIGEST or _digest(body) != blob[:_DIGEST]:
        raise DamagedCacheFile(path, f"digest mismatch ({len(blob)} bytes)")
    return body


class _CheckedCacheFile(caching.IndexDataCacheFile):
    """Numba's index and data files, each with a digest of its contents."""

    def __init__(self, cache_path, filename_base, source_stamp):
        super().__init__(cache_path, filename_base, source_stamp)
        self._version = _VERSION

    def save(self, key, data):
        try:
            self._load_index()
        except DamagedCacheFile:
            self._save_index({})  # start a fresh index over the damaged one
        super().save(key, data)

    def _load_index(self):
        try:
            with open(self._index_path, "rb") as f:
                version = pickle.load(f)
                blob = f.read()
        except FileNotFoundError:
            return {}
        except Exception as exc:
            raise DamagedCacheFile(self._index_path, f"{type(exc).__name__}: {exc}") from None
        if version != self._version:
            return {}  # written by another Numba or an older fastcal: recompiled and replaced
        try:
            stamp, overloads = pickle.loads(_checked(self._index_path, blob))
        except DamagedCacheFile:
            raise
        except Exception as exc:
            raise DamagedCacheFile(self._index_path, f"{type(exc).__name__}: {exc}") from None
        return overloads if stamp == self._source_stamp else {}

    def _save_index(self, overloads):
        data = self._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            pickle.dump(self._version, f, protocol=-1)
            f.write(_digest(data) + data)

    def _load_data(self, name):
        path = self._data_path(name)
        with open(path, "rb") as f:
            blob = f.read()
        try:
            return pickle.loads(_checked(path, blob))
        except DamagedCacheFile:
            raise
        except Exception as exc:
            raise DamagedCacheFile(path, f"{type(exc).__name__}: {exc}") from None

    def _save_data(self, name, data):
        data = self._dump(data)
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_digest(data) + data)


@functools.cache
def _kernels_stamp():
    """(name, mtime, size) of every module of fastcal._kernels. Numba stamps a
    kernel's cache with its own source file only, so a kernel that calls (or
    inlines) a function of another module would load stale machine code after
    that module changed (a new total in binary._terms, read by a kernel of
    equal_mass.py, came back as 0.0); with this stamp any kernel module that
    changes recompiles them all."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            st = os.stat(os.path.join(here, name))
            out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


class _CheckedCache(caching.FunctionCache):
    """Numba's per-function cache over checked files; a file that fails is recompiled."""

    def __init__(self, py_func):
        super().__init__(py_func)
        stamp = (self._impl.locator.get_source_stamp(), _kernels_stamp())
        self._cache_file = _CheckedCacheFile(self._cache_path, self._impl.filename_base, stamp)

    def load_overload(self, sig, target_context):
        target_context.refresh()
        try:
            return self._load_overload(sig, target_context)
        except DamagedCacheFile as exc:
            _note("damaged", f"cannot load the kernel cache file {exc.path} ({exc.reason}); "
                             f"recompiled and rewrote it; if this note comes back, delete "
                             f"{os.path.dirname(exc.path)}")
        except OSError as exc:
            _note("unreadable", f"cannot read the kernel cache in {self._cache_path} ({exc}); "
                                f"recompiled in memory")
        return None

    def save_overload(self, sig, data):
        try:
            self._save_overload(sig, data)
        except OSError as exc:
            _note("unwritable", f"cannot write the kernel cache in {self._cache_path} ({exc}); "
                                f"kernels are compiled again in the next process")


class _MemoryCache(caching.NullCache):
    """No disk cache: says so once, at the first compile."""

    def load_overload(self, sig, target_context):
        where = os.environ.get("NUMBA_CACHE_DIR") or "NUMBA_CACHE_DIR unset"
        _note("memory", f"no writable cache directory for compiled kernels ({where}; the package's "
                        f"__pycache__ and ~/.cache/numba read-only); compiling in memory for this "
                        f"process; set NUMBA_CACHE_DIR to a writable directory to keep them")
        return None


def cache_for(py_func):
    """The disk cache for ``py_func``, or an in-memory stand-in when none is writable."""
    try:
        return _CheckedCache(py_func)
    except RuntimeError:  # numba: "no locator available"
        return _MemoryCache()


def njit(*args, cache=False, **options):
    """``numba.njit`` whose ``cache=True`` uses the checked cache of this module.

    Parameters
    ----------
    cache : bool
        Keep compiled code on disk between processes when a location is writable.
    **options
        Passed to :func:`numba.njit`.
    """
    if args and not callable(args[0]):
        msg = "njit: pass options as keywords; explicit signatures are not used in fastcal"
        raise TypeError(msg)

    def wrap(fn):
        disp = numba.njit(**options)(fn)
        if cache:
            disp._cache = cache_for(disp.py_func)
        return disp

    return wrap(args[0]) if args else wrap

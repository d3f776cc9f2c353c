"""Numba's ``njit`` with a disk cache that never stops a run and loads only your own files.

Every kernel is declared with ``@njit(..., cache=True)`` from this module. The
cache is Numba's own (same locations: ``$NUMBA_CACHE_DIR``, ``__pycache__`` next
to the source, ``~/.cache/numba``), with three differences:

- a cache is code (pickles and machine code), so a directory or file that is not
  the current user's alone (another owner, group- or world-writable: see
  :mod:`fastcal._kernels._trust`) is never loaded: the next location Numba would use is
  tried, else kernels are compiled in memory, and one note names the directory;
  a file of another owner in your own directory is recompiled and replaced;
- when no location is writable (a read-only install run by a service account),
  kernels are compiled in memory for the process and one note says so, where
  Numba raises "no locator available" at import;
- every index and data file starts with fixed magic bytes and a digest of the
  rest, both checked before anything in it is unpickled: a truncated or
  bit-flipped file is recompiled (and rewritten) with one note naming it, where
  Numba raises or crashes on every later run; a file without the magic (Numba's
  own format, or an older fastcal's) is stale: recompiled and replaced, never
  unpickled.

Notes are :class:`CacheWarning` warnings, at most one of each kind per process.
The digest finds damage, not intent: what keeps out another user's files is
that only files and directories of yours that no one else can write are read.
"""

import contextlib
import hashlib
import os
import pickle
import tempfile
import threading
import uuid
import warnings

import numba
from numba.core import caching

from fastcal._kernels import _pipeline, _shipped, _sources, _startup, _trust

_startup.blas_check_without_import()  # SciPy is not imported by Numba's set-up

_DIGEST = 16
# file layout: magic, blake2b digest of the body, body; an index body is the Numba
# version (length byte, ASCII) and then the pickled (stamp, overloads)
_MAGIC_INDEX = b"\x93fastcal-nbi\x00\x02"
_MAGIC_DATA = b"\x93fastcal-nbc\x00\x02"
_VERSION = numba.__version__.encode("ascii")
_NOTED: set = set()
_SEARCH = threading.local()  # directories refused while a function's cache is being located


class CacheWarning(UserWarning):
    """Kernels could not use the disk cache; they were compiled in this process."""


class DamagedCacheFile(Exception):
    """A cache file whose digest, contents or owner do not check out."""

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


def _read(path, owners=()):
    """The bytes of cache file ``path``, if it is yours alone (else DamagedCacheFile); None when absent."""
    try:
        with _trust.open_trusted(path, owners) as f:
            return f.read()
    except FileNotFoundError:
        return None
    except _trust.Untrusted as exc:
        raise DamagedCacheFile(path, exc.reason) from None


def _body(path, blob, magic):
    """The body of ``blob`` (magic + digest + body); None for another format (stale); DamagedCacheFile on damage."""
    if not blob.startswith(magic):
        return None
    head = len(magic) + _DIGEST
    body = blob[head:]
    if len(blob) < head or _digest(body) != blob[len(magic):head]:
        raise DamagedCacheFile(path, f"digest mismatch ({len(blob)} bytes)")
    return body


def _unpickle(path, body):
    try:
        return pickle.loads(body)
    except Exception as exc:
        raise DamagedCacheFile(path, f"{type(exc).__name__}: {exc}") from None


class _CheckedCacheFile(caching.IndexDataCacheFile):
    """Numba's index and data files: read only when yours alone, each with magic bytes and a digest."""

    _owners: tuple = ()  # uids trusted besides yours

    def __init__(self, cache_path, filename_base, source_stamp):
        super().__init__(cache_path, filename_base, source_stamp)
        self._version = _VERSION

    def save(self, key, data):
        try:
            self._load_index()
        except DamagedCacheFile:
            self._save_index({})  # start a fresh index over the damaged (or foreign) one
        super().save(key, data)

    def _load_index(self):
        blob = _read(self._index_path, self._owners)
        body = None if blob is None else _body(self._index_path, blob, _MAGIC_INDEX)
        if body is None:
            return {}  # absent, or Numba's own or an older fastcal's format: recompiled and replaced
        n = body[0] if body else 0
        if body[1:1 + n] != self._version:
            return {}  # written under another Numba: recompiled and replaced
        stamp, overloads = _unpickle(self._index_path, body[1 + n:])
        return overloads if stamp == self._source_stamp else {}

    def _save_index(self, overloads):
        data = bytes([len(self._version)]) + self._version + self._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            f.write(_MAGIC_INDEX + _digest(data) + data)

    def _load_data(self, name):
        path = self._data_path(name)
        blob = _read(path, self._owners)
        if blob is None:
            raise FileNotFoundError(path)  # Numba's load(): removed while the index still names it
        body = _body(path, blob, _MAGIC_DATA)
        if body is None:
            raise FileNotFoundError(path)  # another format: stale, recompiled
        return _unpickle(path, body)

    def _save_data(self, name, data):
        data = self._dump(data)
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_MAGIC_DATA + _digest(data) + data)

    @contextlib.contextmanager
    def _open_for_write(self, filepath):
        """A new file beside ``filepath`` (mode 0644, never through a link), renamed over it when written."""
        tmp = f"{filepath}.tmp.{uuid.uuid4().hex[:16]}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, _trust.WRITE_MODE)
        try:
            with os.fdopen(fd, "wb") as f:
                yield f
            os.replace(tmp, filepath)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def shipped_status():
    """'' when the kernels shipped in the package are loaded, else why not (:mod:`fastcal._kernels._shipped`)."""
    return _shipped.status(_sources.sources_digests())


def sources_stamp(py_func):
    """The stamp of ``py_func``'s cached code: digests of its own file's contents and of
    every module of fastcal._kernels (and of tracking.kernels, for tracking's kernels).

    Numba stamps a kernel's cache with its own file's time and size, so a kernel that
    calls (or inlines) a function of another module would load stale machine code after
    that module changed (a new total in binary._terms, read by a kernel of
    equal_mass.py, came back as 0.0); and a time is not kept by a wheel, so kernels
    shipped in one (:mod:`fastcal._kernels._shipped`) are stamped by contents.
    """
    dirs = (_sources.HERE, _sources.TRACKING_KERNELS) if py_func.__module__.startswith("tracking.") \
        else (_sources.HERE,)
    return (_sources.file_digest(os.path.abspath(py_func.__code__.co_filename)), *map(_sources.dir_digest, dirs))


class _ShippedFile(_CheckedCacheFile):
    """A file of the kernels shipped in the package: yours, or root's when root installed it."""

    _owners = (0,)


def _load_shipped(py_func, sig, target_context, stamp):
    """The shipped kernel for ``sig`` (:mod:`fastcal._kernels._shipped`), or None; never raises."""
    try:
        return _shipped.load(py_func, sig, target_context, _ShippedFile, stamp)
    except DamagedCacheFile as exc:
        _note("shipped", f"cannot load the shipped kernel file {exc.path} ({exc.reason}); compiled "
                         f"instead; reinstall fastcal, or set {_shipped.ENV}=0")
    except OSError as exc:
        _note("shipped", f"cannot read the shipped kernels in {_shipped.DIR} ({exc}); compiled instead")
    return None


class _TrustedLocator:
    """Locator mixin: a cache directory is used only when it is yours alone (:mod:`fastcal._kernels._trust`).

    A new directory is made 0755 (whatever the umask); one that is refused is
    recorded, and Numba goes on to its next location, as for an unwritable one.
    """

    def ensure_cache_path(self):
        path = self.get_cache_path()
        try:
            _trust.make_dir(path)
        except _trust.Untrusted as exc:
            getattr(_SEARCH, "refused", []).append(exc)
            raise
        tempfile.TemporaryFile(dir=path).close()


class _TrustedImpl(caching.CompileResultCacheImpl):
    _locator_classes: list = [type(f"Trusted{cls.__name__}", (_TrustedLocator, cls), {})
                        for cls in caching.CompileResultCacheImpl._locator_classes]


class _CheckedCache(caching.FunctionCache):
    """Numba's per-function cache over checked files, in a directory of yours; a file that fails is recompiled."""

    _impl_class = _TrustedImpl

    def __init__(self, py_func, refused=()):
        super().__init__(py_func)  # finds the location: the refused ones are appended to ``refused``
        why = _trust.dir_problem(self._cache_path)  # also under NUMBA_CACHE_LOCATOR_CLASSES
        if why:
            raise _trust.Untrusted(self._cache_path, why)
        self._stamp = sources_stamp(py_func)
        self._cache_file = _CheckedCacheFile(self._cache_path, self._impl.filename_base, self._stamp)
        self._refused = refused[0] if refused else None

    def load_overload(self, sig, target_context):
        target_context.refresh()
        if self._refused is not None:
            _note("refused", f"{_refused_text(self._refused)}; kernels are cached in {self._cache_path} instead")
        try:
            return self._load_overload(sig, target_context) or _load_shipped(self._py_func, sig, target_context,
                                                                             self._stamp)
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


def _refused_text(exc):
    return (f"the kernel cache directory {exc.path} is {exc.reason}: not used, since loading a cache runs "
            f"its code (set NUMBA_CACHE_DIR to a directory of yours that no one else can write)")


class _MemoryCache(caching.NullCache):
    """No disk cache: says so once, at the first compile."""

    def __init__(self, py_func, refused=None):
        self._py_func = py_func
        self._refused = refused

    def load_overload(self, sig, target_context):
        target_context.refresh()
        cres = _load_shipped(self._py_func, sig, target_context, sources_stamp(self._py_func))
        if cres is not None:
            return cres
        if self._refused is not None:
            _note("memory", f"{_refused_text(self._refused)}; compiling in memory for this process")
            return None
        where = os.environ.get("NUMBA_CACHE_DIR") or "NUMBA_CACHE_DIR unset"
        _note("memory", f"no writable cache directory for compiled kernels ({where}; the package's "
                        f"__pycache__ and ~/.cache/numba read-only); compiling in memory for this "
                        f"process; set NUMBA_CACHE_DIR to a writable directory to keep them")
        return None


def cache_for(py_func):
    """The disk cache for ``py_func`` in a directory of yours, or an in-memory stand-in when there is none."""
    writer = _shipped.writer_for(py_func, _CheckedCacheFile, sources_stamp(py_func))
    if writer is not None:
        return writer  # the package's build step: compiled for the baseline CPU, into the package
    _SEARCH.refused = refused = []
    try:
        return _CheckedCache(py_func, refused)
    except _trust.Untrusted as exc:
        return _MemoryCache(py_func, exc)
    except RuntimeError:  # numba: "no locator available"
        return _MemoryCache(py_func, refused[0] if refused else None)
    finally:
        _SEARCH.refused = []


def njit(*args, cache=False, **options):
    """``numba.njit`` whose ``cache=True`` uses the checked cache of this module.

    Compiled with :class:`fastcal._kernels._pipeline.KernelCompiler` (Numba's pipeline
    plus copy propagation, which keeps reference counting out of the loops that call
    inlined functions over arrays) unless ``pipeline_class`` is given.

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

    options.setdefault("pipeline_class", _pipeline.KernelCompiler)

    def wrap(fn):
        disp = numba.njit(**options)(fn)
        if cache:
            disp._cache = cache_for(disp.py_func)
        return disp

    return wrap(args[0]) if args else wrap

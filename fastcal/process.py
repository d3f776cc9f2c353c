"""What the processes of the command lines (``fastcal`` and ``tracking``) share: their
start-up, their signals and their words for running out of memory.

:func:`start` is the first thing a command's entry module (``fastcal.__main__``,
``tracking.__main__``) runs, before anything heavy is imported: Ctrl-C prints one
line and exits 130 at once, whatever the interpreter is importing. SIGTERM and SIGHUP
keep their default action until the run installs its handlers (:class:`Stop`): the
process ends at once even while a library's start-up code runs in C, where no Python
handler could run. Nothing is written before the run starts, so there is nothing to
clean up.

:class:`Stop` handles SIGINT, SIGTERM and SIGHUP during a run: the handler raises
``KeyboardInterrupt`` or :class:`Terminated` in the main thread, so that the cleanup
runs as on errors, and makes sure that the signal is not lost where Python drops an
exception.

:func:`memory_error` tells a failure for want of memory (address space, under
``ulimit -v``) from others, however a library words it.

Imports nothing of fastcal (the bottom layer).
"""

import errno
import os
import re
import signal
import sys


def start(prog):
    """The command's start-up: Ctrl-C's handler, and one BLAS thread, before numpy loads.

    OpenBLAS (numpy's, and SciPy's, which numba loads) sets up a 32 MB buffer per
    thread when it is loaded and spins forever, ignoring SIGTERM, when one cannot be
    had (under a limit on the address space, ``ulimit -v``); fastcal's and tracking's
    work is done in their own compiled kernels, not in BLAS. A value the user set is
    kept. Under such a limit, pyarrow's allocator starts no background thread.
    """
    line = f"{prog}: interrupted\n".encode()

    def interrupted(signum, frame):
        # one line, then out: a KeyboardInterrupt raised inside an import can be caught
        # and lost there, and nothing is written yet
        os.write(2, line)
        os._exit(130)

    signal.signal(signal.SIGINT, interrupted)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if address_space_note():
        # pyarrow's jemalloc starts a background thread when it loads; under the limit
        # that can fail, and jemalloc says so on stderr beside the run's own one line
        os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")


# Room in the address space that loading SciPy's BLAS needs: the library, its buffer
# (32 MB a thread) and what malloc reserves around it, with a margin.
BLAS_ROOM = 128 << 20


def load_blas():
    """Under a limit on the address space (``ulimit -v``), load SciPy's BLAS
    (``scipy.linalg``) now, in the command's start-up, rather than mid-run, where
    the first kernel that calls it loads it.

    OpenBLAS sets up a buffer when it is loaded and spins forever, ignoring SIGTERM,
    when none can be had. Under such a limit it is therefore loaded only when
    ``BLAS_ROOM`` bytes can be mapped (else ``MemoryError``), and in the start-up,
    where SIGTERM still ends the process by its default action. Without a limit the
    buffer is had, and nothing is loaded here: a report's kernels call no BLAS, so
    ``fastcal score`` does not pay SciPy's import (0.3-0.5 s); tracking's filters
    load it at their first call.
    """
    if "scipy.linalg" in sys.modules or address_space_note() == "":
        return
    import mmap

    try:
        mmap.mmap(-1, BLAS_ROOM).close()
    except OSError:
        raise NoRoom(f"could not load SciPy's BLAS (it needs {BLAS_ROOM >> 20} MB)") from None
    import scipy.linalg  # noqa: F401


class NoRoom(MemoryError):
    """Not enough memory for a step that says what it could not do (its message)."""


def failed_start(prog, exc, debug_variable):
    """The exit status of a command whose start-up (the imports of its command line)
    raised ``exc``, after one line on stderr: 2 for want of memory, else 1; with the
    debug variable set (``FASTCAL_DEBUG=1``), ``exc`` is raised instead."""
    if os.environ.get(debug_variable, "") not in ("", "0"):
        raise exc
    memory = not_enough_memory(exc)
    if memory is not None:
        print(f"{prog}: error: {memory}", file=sys.stderr)
        return 2
    print(f"{prog}: internal error: could not start: {type(exc).__name__}: "
          f"{_first_line(exc)} ({debug_variable}=1 shows the traceback)", file=sys.stderr)
    return 1


def finish(run):
    """Run the command's ``run()`` and leave the process with its exit status, without
    the interpreter's teardown: the output is flushed, then ``os._exit``.

    The teardown (the finalizers of the libraries loaded: numba's and llvmlite's,
    pyarrow's thread pools, ...) took 0.4 s of a 1.4 s ``fastcal score`` of 1,000
    rows on a 2-core machine, after the answer was written. Nothing of fastcal's
    needs it: every output is written and renamed, temporary files are removed and a
    Dask cluster the command started is closed before ``run`` returns. ``SystemExit``
    (``--help``) keeps its status and message; a stream that cannot be flushed (a
    pipe closed by the reader, ``| head``) gives status 120, as Python's own exit
    does. Errors other than ``SystemExit`` propagate as before.
    """
    try:
        status = run()
    except SystemExit as exc:
        status = exc.code
    if status is None:
        status = 0
    elif not isinstance(status, int):  # SystemExit("message"): printed, status 1
        print(status, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status)


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM or SIGHUP so that cleanup runs as on errors."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


# The signals that stop a run: SIGINT (Ctrl-C) raises KeyboardInterrupt, the others
# Terminated.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _in_compiler(frame):
    """Whether Python code called back from the compiler (llvmlite, through ctypes) runs:
    an exception raised there is printed and dropped, so a signal must wait."""
    while frame is not None:
        if f"{os.sep}llvmlite{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class Stop:
    """The signal that stops one run, raised until the command has it.

    Python drops an exception raised where it cannot propagate (a weakref
    callback, a ``__del__`` method, a ctypes callback such as the compiler's) and
    reports it to ``sys.unraisablehook``: such a stop is sent again 20 ms later,
    without the report (``_unraisable``); in the compiler the handler does not
    raise at all and sends it again. A run that returns with a signal received
    stops then (:meth:`check`), so a signal is never lost to a run that ends 0.

    Use: ``stop = Stop()``, ``stop.install()``, run, ``stop.check()``; in the
    ``except`` clause set ``stop.seen = True`` first (later signals then wait for
    the cleanup); at the end ``stop.restore(as_command)``.
    """

    def __init__(self):
        self.signum = None  # the first signal that came
        self.seen = False   # the command has it (cleaning up), or the run is over
        self._old = {}      # the handlers before install()
        self._hook = None   # sys.unraisablehook before install()

    def handler(self, signum, frame):
        if self.seen:
            return  # cleaning up after the first signal: later ones wait
        if self.signum is None:
            self.signum = signum
        if _in_compiler(frame):
            self._again()
            return
        raise self.exception()

    def exception(self):
        """The exception of the signal that came."""
        if self.signum == signal.SIGINT:
            return KeyboardInterrupt()
        return Terminated(self.signum)

    def _again(self):
        """Send the signal again in 20 ms (out of the callback), unless handled by then."""
        import threading

        def resend():
            if not self.seen:
                os.kill(os.getpid(), self.signum)

        try:
            t = threading.Timer(0.02, resend)
            t.daemon = True
            t.start()
        except RuntimeError:  # no thread to be had: check() at the end of the run stays
            pass

    def _unraisable(self, unraisable):
        """``sys.unraisablehook`` during the run: a dropped stop is sent again, quietly."""
        if isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated)) \
                and self.signum is not None:
            self._again()
        else:
            self._hook(unraisable)

    def check(self):
        """Raise the stop now if a signal came and its exception was lost."""
        if self.signum is not None:
            raise self.exception()

    def install(self):
        """This run's handlers of SIGINT, SIGTERM and SIGHUP (main thread only); a
        signal ignored when the run started (SIGHUP under nohup) stays ignored."""
        import threading  # here: start() runs before anything that is not needed then

        if threading.current_thread() is not threading.main_thread():
            return
        for s in SIGNALS:
            try:
                if signal.getsignal(s) is not signal.SIG_IGN:
                    self._old[s] = signal.signal(s, self.handler)
            except (ValueError, OSError):
                pass
        self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable

    def restore(self, as_command):
        """Put back the handlers before the run; a command, whose status is now known,
        ignores the signals instead until it exits."""
        self.seen = True
        for s, h in self._old.items():
            try:
                signal.signal(s, signal.SIG_IGN if as_command else h)
            except (ValueError, OSError, TypeError):
                pass
        self._old = {}
        if self._hook is not None:
            sys.unraisablehook, self._hook = self._hook, None


# -- running out of memory -------------------------------------------------------------

# How libraries word a failure for want of memory (or of address space for a thread's
# stack) when they do not raise MemoryError: the loader, ctypes, llvmlite, pyarrow, Python
_NO_MEMORY = (
    (re.compile(r"(\S+?\.so[.\w-]*): failed to map segment from shared object"),
     "could not load {0}"),
    (re.compile(r"can't start new thread|failed to launch worker thread|"
                r"pthread_create failed", re.I), "could not start a thread"),
    (re.compile(r"cannot allocate memory|out of memory|unable to allocate", re.I),
     "an allocation failed"),
)


def _chain(exc):
    """``exc`` and the exceptions it was raised from or while handling, innermost last."""
    seen = []
    while exc is not None and len(seen) < 16 and all(exc is not e for e in seen):
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def memory_error(exc):
    """What could not be done for want of memory, in words, if ``exc`` or an exception
    it came from says memory ran out (a ``MemoryError``, a library that could not be
    mapped, a thread that could not start, ``ENOMEM``); otherwise None.

    A reader that words any failure as a ``ValueError`` naming its file raises it while
    handling the original, which stays in the chain."""
    for e in reversed(_chain(exc)):  # the innermost says what failed
        if isinstance(e, NoRoom):
            return str(e)
        if isinstance(e, MemoryError):
            return "an allocation failed" + (f" ({_first_line(e)})" if str(e) else "")
        text = str(e)
        for pattern, what in _NO_MEMORY:
            m = pattern.search(text)
            if m:
                return what.format(*(os.path.basename(g) for g in m.groups()))
        if getattr(e, "errno", None) == errno.ENOMEM:
            return "an allocation failed"
    return None


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def address_space_note():
    """The note ``" (the address space is limited to N MB: ulimit -v)"`` when it is
    limited, else ``""``."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return ""
    if soft == resource.RLIM_INFINITY:
        return ""
    return f" (the address space is limited to {soft / 1e6:,.0f} MB: ulimit -v)"


def not_enough_memory(exc):
    """The one line for a failure for want of memory, or None for any other failure."""
    what = memory_error(exc)
    if what is None:
        return None
    return f"not enough memory: {what}{address_space_note()}"

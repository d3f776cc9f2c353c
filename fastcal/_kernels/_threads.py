"""Threads for the serial ``nogil`` kernels: each thread one contiguous range.

The house pattern of a parallel fill (per-thread state, contiguous ranges, a
serial reduction in thread order) with a Python thread pool in place of a
``parallel=True`` prange kernel, which Numba compiles again, callees included.
"""

from concurrent.futures import ThreadPoolExecutor, wait
import os
import threading


def thread_range(t, n, n_threads):
    """Thread ``t``'s contiguous range ``(start, stop)`` of ``n`` items."""
    return (t * n) // n_threads, ((t + 1) * n) // n_threads


def run_threads(n_threads, run):
    """``run(t)`` for each thread t, and return when every one has returned: range 0
    in the calling thread, the others in the process's pool of kernel threads; the
    first error raised (the calling thread's first) is raised here.

    The pool lives as long as the process (made again in a child after a fork):
    starting threads for each call cost about 0.1-0.2 ms, a fifth of a 2-thread
    fill of a 262,144-row chunk, paid once per chunk of a file. A ``run`` that
    calls ``run_threads`` itself gets threads of its own, as every call did before
    (a pool thread waiting on the pool could wait forever).
    """
    if n_threads == 1:
        run(0)
        return
    if getattr(_IN_POOL, "value", False):
        with ThreadPoolExecutor(n_threads - 1, initializer=_mark_pool_thread) as pool:
            _run_in(pool, n_threads, run)
        return
    _run_in(_pool(n_threads - 1), n_threads, run)


def _run_in(pool, n_threads, run):
    futures = [pool.submit(run, t) for t in range(1, n_threads)]
    try:
        run(0)
    finally:
        wait(futures)  # no range is left running when this returns or raises
    for future in futures:
        future.result()


_IN_POOL = threading.local()  # set in the pool's threads
_POOL_LOCK = threading.Lock()
_POOL: dict = {}  # {"pid", "size", "executor"}: the pool of this process


def _pool(size):
    """The process's pool of at least ``size`` kernel threads."""
    with _POOL_LOCK:
        pid = os.getpid()
        if _POOL.get("pid") != pid or _POOL["size"] < size:
            old = _POOL.get("executor") if _POOL.get("pid") == pid else None
            _POOL.update(pid=pid, size=size, executor=ThreadPoolExecutor(
                size, thread_name_prefix="fastcal-kernel", initializer=_mark_pool_thread))
            if old is not None:
                old.shutdown(wait=False)  # its threads end once idle
        return _POOL["executor"]


def _mark_pool_thread():
    _IN_POOL.value = True


def merge_checks(checks, other):
    """Add a thread's check counts (first half) to ``checks`` and keep the smaller
    first index (second half, -1 where none): the reduction of the fills' checks."""
    k = checks.shape[0] // 2
    checks[:k] += other[:k]
    first = checks[k:]
    f = other[k:]
    take = (f >= 0) & ((first < 0) | (f < first))
    first[take] = f[take]


def fill_threads(n, n_threads, new_part, fill, checks_at):
    """The threaded fill: per-thread state ``new_part()`` (a tuple of arrays),
    ``fill(start, stop, *part)`` on each thread's contiguous range of the n rows,
    then the serial reduction in thread order: the arrays are added, but for
    the checks (``part[checks_at]``), merged by ``merge_checks``."""
    parts = [new_part() for _ in range(n_threads)]

    def run(t):
        start, stop = thread_range(t, n, n_threads)
        fill(start, stop, *parts[t])

    run_threads(n_threads, run)
    out = [a.copy() for a in parts[0]]
    for part in parts[1:]:
        for j, a in enumerate(out):
            if j == checks_at:
                merge_checks(a, part[j])
            else:
                a += part[j]
    return tuple(out)

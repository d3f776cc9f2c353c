"""Threads for the serial ``nogil`` kernels: each thread one contiguous range.

The house pattern of a parallel fill (per-thread state, contiguous ranges, a
serial reduction in thread order) with a Python thread pool in place of a
``parallel=True`` prange kernel, which Numba compiles again, callees included.
"""

from concurrent.futures import ThreadPoolExecutor


def thread_range(t, n, n_threads):
    """Thread ``t``'s contiguous range ``(start, stop)`` of ``n`` items."""
    return (t * n) // n_threads, ((t + 1) * n) // n_threads


def run_threads(n_threads, run):
    """``run(t)`` for each thread t: in this thread when there is one, else in a pool."""
    if n_threads == 1:
        run(0)
        return
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(run, range(n_threads)))


def merge_checks(checks, other):
    """Add a thread's check counts (first half) to ``checks`` and keep the smaller
    first index (second half, -1 where none): the reduction of the fills' checks."""
    k = checks.shape[0] // 2
    checks[:k] += other[:k]
    first = checks[k:]
    f = other[k:]
    take = (f >= 0) & ((first < 0) | (f < first))
    first[take] = f[take]

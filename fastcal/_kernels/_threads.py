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

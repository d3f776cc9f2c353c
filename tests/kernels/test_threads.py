"""The kernels' threads (``fastcal.jit.run_threads``): a pool that lives with the
process, safe to nest, to fail in and to fork."""

import multiprocessing
import threading

import numpy as np
import pytest

from fastcal.jit import run_threads, thread_range


def test_every_range_runs_once_and_the_pool_is_reused():
    out = np.zeros(1_000, np.int64)

    def part(t):
        a, b = thread_range(t, out.shape[0], 4)
        out[a:b] += 1

    seen = set()

    def named(t):
        seen.add(threading.current_thread().name)
        part(t)

    for _ in range(50):
        run_threads(4, named)
    assert (out == 50).all()
    # the calling thread and the pool's threads, the same ones call after call
    pool = {n for n in seen if n.startswith("fastcal-kernel")}
    assert seen == pool | {threading.current_thread().name}
    assert 1 <= len(pool) <= 3
    alive = {t.name for t in threading.enumerate()}
    assert pool <= alive


def test_nested_calls_finish():
    """A range that runs threads itself gets threads of its own: a pool thread that
    waited on the pool could wait forever."""
    out = np.zeros((3, 3), np.int64)

    def outer(t):
        run_threads(3, lambda u: out.__setitem__((t, u), 10 * t + u))

    done = []
    runner = threading.Thread(target=lambda: (run_threads(3, outer), done.append(1)))
    runner.start()
    runner.join(timeout=60)
    assert done == [1]
    assert out.tolist() == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]


@pytest.mark.parametrize("failing", [0, 2])
def test_an_error_is_raised_once_every_range_has_returned(failing):
    """The calling thread's range (0) or a pool thread's (2) raises: run_threads raises
    it after the others finished, so no range still writes into the caller's arrays."""
    finished = []
    gate = threading.Event()

    def part(t):
        if t == failing:
            gate.set()
            raise ValueError(f"range {t}")
        gate.wait(10)
        threading.Event().wait(0.05)  # still running when the failing range is done
        finished.append(t)

    with pytest.raises(ValueError, match=f"range {failing}"):
        run_threads(3, part)
    assert sorted(finished) == sorted({0, 1, 2} - {failing})
    run_threads(3, lambda t: None)  # the pool is still there


def _child(queue):
    out = np.zeros(300)
    run_threads(3, lambda t: out.__setitem__(slice(*thread_range(t, 300, 3)), t + 1))
    queue.put(out.sum())


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="no fork on this platform")
def test_a_forked_child_gets_a_pool_of_its_own():
    """The parent's pool threads do not exist in a child forked from it: the child
    makes its own (a child that queued work on the parent's would wait forever)."""
    run_threads(3, lambda t: None)  # the parent's pool exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0
    assert queue.get(timeout=5) == 100 * (1 + 2 + 3)

"""One compiled batch, run over worker threads and watched: the filters' only door to their kernel.

The runs are split into contiguous ranges, one per thread; each range is one
call of the generated ``run_batch`` kernel (:mod:`tracking.kernels.factory`),
watched by :func:`tracking.kernels.guard.run_watched`. A model function that
raises or does not return is named here, with the run and step it was on.
"""

import numba
import numpy as np

from fastcal.jit import thread_range
from tracking.kernels.blocks import SLOT_F, SLOT_H, SLOT_JF, SLOT_JH
from tracking.kernels.guard import ModelStalled, model_timeout, run_watched, shape_text, stall_text

__all__ = ["run_kernel"]


def _kernel_array(a):
    """C-contiguous, writable float64: one array type per rank, so the kernel compiles once
    (read-only views from ``np.broadcast_to`` would otherwise type as a second signature)."""
    return np.require(a, dtype=np.float64, requirements=["C", "W"])


def run_kernel(kernel, ms, ss, weights, x0, P0, zs, *, skip_first_predict=False):
    """Run ``kernel`` over every run of ``zs`` (runs, steps, m) from ``x0`` (runs, n), ``P0`` (runs, n, n).

    ``ms`` / ``ss`` are the checked model specs (:mod:`tracking.filters.specs`) and
    ``weights`` the unscented ``(Wm, Wc, scale)``. Returns ``(means, covs,
    innovations, innovation_covs, status)``.

    Raises ValueError naming the model function, run and step when a model
    function raises or stalls inside the batch.
    """
    runs, steps, _ = zs.shape
    n, m = ms.n, ss.m
    means = np.empty((runs, steps, n))
    covs = np.empty((runs, steps, n, n))
    innov = np.empty((runs, steps, m))
    innov_covs = np.empty((runs, steps, m, m))
    status = np.full((runs, steps), -1, dtype=np.int8)  # -1 left: the batch stopped early (a model raised)
    Wm, Wc, scale = weights
    x0, P0, zs = _kernel_array(x0), _kernel_array(P0), _kernel_array(zs)
    outs = (means, covs, innov, innov_covs, status)
    # contiguous ranges of runs, one per worker thread; each run is written by one thread
    n_threads = max(1, min(numba.get_num_threads(), runs))
    ranges = [thread_range(t, runs, n_threads) for t in range(n_threads)]
    # per thread: run (in its range), step, model function; rows 128 bytes apart, so the
    # threads' writes never share a cache line
    where = np.full((n_threads, 16), -1, dtype=np.int64)

    def part(t):
        i, j = ranges[t]
        return lambda: kernel(x0[i:j], P0[i:j], zs[i:j], ms.dt, ms.Q, ms.params, ss.params, ss.R, Wm, Wc,
                              scale, *(o[i:j] for o in outs), skip_first_predict, where[t])

    timeout = model_timeout()

    def place(t):
        r, k, slot = (int(v) for v in where[t, :3])
        return _slot_name(ms, ss, slot), f"in run {ranges[t][0] + r}, step {k}"

    def stalled(t):
        name, at = place(t)
        return ModelStalled(stall_text(name, at, timeout))

    errors = run_watched([part(t) for t in range(n_threads)], where, timeout=timeout, stalled=stalled)
    for t, err in enumerate(errors):
        if err is not None:  # a model function raised inside the compiled batch
            name, at = place(t)
            raise ValueError(_raised_text(ms, ss, name, at, err, int(where[t, 2]))) from None
    if (status < 0).any():  # stopped without an exception
        msg = "the compiled batch stopped early: a model function raised"
        raise RuntimeError(msg)
    return outs


def _qual(fn):
    return getattr(getattr(fn, "py_func", fn), "__qualname__", repr(fn))


def _slot_name(ms, ss, slot):
    """``motion.f_jit (its name)`` for the batch's model-function code ``slot`` (``blocks.SLOT_*``)."""
    owner, attr, fn = {SLOT_F: ("motion", "f_jit", ms.f), SLOT_JF: ("motion", "F_jit", ms.F),
                       SLOT_H: ("sensor", "h_jit", ss.h), SLOT_JH: ("sensor", "H_jit", ss.H)}.get(
                           slot, ("a model", "function", None))
    return f"{owner}.{attr}" + (f" ({_qual(fn)})" if fn is not None else "")


def _raised_text(ms, ss, name, at, err, slot):
    text = str(err).strip().splitlines()
    head = f"{name} raised {type(err).__name__} {at}: {text[0] if text else ''}"
    if isinstance(err, IndexError):
        n, m = ms.n, ss.m
        p = ms.params if slot in (SLOT_F, SLOT_JF) else ss.params
        out = {SLOT_F: (n,), SLOT_JF: (n, n), SLOT_H: (m,), SLOT_JH: (m, n)}.get(slot)
        if out is not None:
            return f"{head}; expected indices within x ({n},), p ({p.shape[0]},) and out {shape_text(out)}"
    return f"{head}; expected model functions that do not raise"

"""A user's model functions: bounds-checked, watched, and tried once before any batch runs.

Numba does not check bounds by default: a Jacobian written as 3x3 into its 2x2
output overwrites whatever follows it (the process may crash, or go on with
corrupted numbers), and a component never written keeps whatever was there.
Three guards, so that a mistake in a model function ends in one ``ValueError``
naming the model and the function, wherever and whenever it happens:

- every model function that is not tracking's own is compiled again with
  Numba's bounds checks (:func:`bounds_checked`, with the compiled functions it
  calls), so an index outside an array raises ``IndexError`` instead of writing
  to memory; the batched kernel is compiled over these copies;
- the batch runs in worker threads while the calling thread watches where each
  one is (run, step and model function, written by the kernel): an exception is
  named with that place, and a model function that does not return within
  ``$TRACKING_MODEL_TIMEOUT`` seconds (default 10; an endless loop) is named
  the same way (:func:`run_watched`). Such a thread cannot be stopped: it keeps
  one core busy until the process exits, so a script should report the error
  and exit;
- before a filter compiles its batched kernel, each function is called once on
  an output that sits inside a larger buffer of canaries (a NaN with a payload
  of our own): a canary left inside the output is an unwritten component, one
  changed outside it an out-of-bounds write (of a function not bounds-checked);
  a typing error (wrong signature) or an exception is named too (:func:`probe`).
"""

import math
import os
import queue
import threading
import time
import types

import numba
import numpy as np

__all__ = ["ModelStalled", "bounds_checked", "model_timeout", "probe", "probe_models", "run_watched"]

CANARY = np.uint64(0x7FF8_DEAD_BEEF_0B0E)  # a quiet NaN no arithmetic produces
_DONE = {}  # (function, shapes) already probed in this process


def _name(owner, slot, fn):
    py = getattr(fn, "py_func", fn)
    return f"{owner}.{slot} ({getattr(py, '__qualname__', repr(fn))})"


def probe(fn, args, out_shape, *, owner, slot):
    """Call ``fn(*args, out)`` on a guarded ``out`` of ``out_shape``; raise ValueError on misuse."""
    fn = getattr(fn, "__func__", fn)  # a dispatcher kept as a class attribute comes back bound
    key = (fn, tuple(np.shape(a) for a in args), out_shape)
    if key in _DONE:
        return
    checked = bounds_checked(fn)
    size = int(np.prod(out_shape))
    pad = 8 * size + 256  # far more than any overrun of a mistaken shape
    buf = np.empty(pad + size + pad)
    bits = buf.view(np.uint64)
    bits[:] = CANARY
    out = buf[pad:pad + size].reshape(out_shape)  # C-contiguous, the type the kernel passes
    who = _name(owner, slot, fn)
    out_text = shape_text(out_shape)
    try:
        try:
            checked.compile(tuple(numba.typeof(a) for a in (*args, out)))  # here: compiling is not the model's time
        except Exception:  # noqa: BLE001 - no code of the model runs: the call fails as the compile did
            checked(*args, out)
        call_watched(checked, (*args, out), who=who, where="at a probe state")
    except ModelStalled:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is the user's function's, named once
        kind = type(exc).__name__
        text = str(exc).strip().splitlines()
        if kind == "TypingError":
            first = next((t.strip() for t in text if t.strip() and not t.startswith("Failed in")), "")
            sig = ", ".join(_type_text(a) for a in args) + f", out: float64{list(out_shape)}"
            msg = f"{who} cannot be compiled for its arguments ({sig}): {first}"
        elif kind == "IndexError":
            msg = (f"{who} raised IndexError at a probe state: {text[0] if text else ''}; "
                   f"{_bounds_text(args, out_shape)}")
        else:
            msg = f"{who} raised {kind} at a probe state: {text[0] if text else ''}"
        raise ValueError(msg) from None
    before, after = bits[:pad] != CANARY, bits[pad + size:] != CANARY
    if before.any() or after.any():
        past = int(np.flatnonzero(after)[-1]) + 1 if after.any() else 0
        msg = (f"{who} wrote outside its {out_text} output ({int(before.sum() + after.sum())} values, up to "
               f"{past} past its end); expected it to write only out[...] within {out_text}")
        raise ValueError(msg)
    unwritten = bits[pad:pad + size] == CANARY
    if unwritten.any():
        idx = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(unwritten)[0]), out_shape))
        msg = (f"{who} left {int(unwritten.sum())} of the {size} components of its {out_text} output unwritten "
               f"(first {list(idx)}); expected it to write every component (zeros too)")
        raise ValueError(msg)
    _DONE[key] = True


def _type_text(a):
    a = np.asarray(a)
    return f"float64{list(a.shape)}" if a.ndim else "float64"


def probe_models(ms, ss, *, seed=20261126):
    """Probe the motion and sensor functions of checked specs at a random state (see module docstring)."""
    x = np.random.default_rng(seed).standard_normal(ms.n)
    mp, sp = ms.params.copy(), ss.params.copy()
    probe(ms.f, (x, ms.dt, mp), (ms.n,), owner="motion", slot="f_jit")
    if ms.F is not None:
        probe(ms.F, (x, ms.dt, mp), (ms.n, ms.n), owner="motion", slot="F_jit")
    probe(ss.h, (x, sp), (ss.m,), owner="sensor", slot="h_jit")
    if ss.H is not None:
        probe(ss.H, (x, sp), (ss.m, ms.n), owner="sensor", slot="H_jit")


def _bounds_text(args, out_shape):
    names = ("x", "dt", "p") if len(args) == 3 else ("x", "p")
    shapes = [f"{n} {shape_text(np.shape(a))}" for n, a in zip(names, args) if np.ndim(a)]
    return f"expected indices within {', '.join(shapes)} and out {shape_text(out_shape)}"


def shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# ------------------------------------------------------------------ bounds-checked copies
_CHECKED = {}  # a model function -> its bounds-checked copy
_CHECKED_LOCK = threading.RLock()


def _ours(py):
    return (getattr(py, "__module__", None) or "").split(".")[0] in ("tracking", "fastcal")


def bounds_checked(disp):
    """``disp`` compiled again with Numba's bounds checks (and ``nogil``), or ``disp`` if it is tracking's own.

    The copy has the same code, options and name; the compiled functions it
    calls (globals or closure values) are replaced by their own checked copies,
    so a helper's overrun raises too. An index outside an array raises
    ``IndexError`` instead of reading or writing memory it does not own. The
    copy is not cached on disk (a cache entry does not record the bounds-check
    flag, so it could be confused with the original's): it compiles inside the
    batched kernel that calls it, which is cached, and once per process where
    it is called from Python (the probe).
    """
    disp = getattr(disp, "__func__", disp)
    py = getattr(disp, "py_func", None)
    if py is None or _ours(py):
        return disp
    with _CHECKED_LOCK:
        got = _CHECKED.get(disp)
        if got is not None:
            return got
        g = dict(py.__globals__)
        cells = None
        if py.__closure__ is not None:
            cells = tuple(types.CellType() for _ in py.__closure__)
        fn = types.FunctionType(py.__code__, g, py.__name__, py.__defaults__, cells)
        fn.__qualname__ = py.__qualname__
        fn.__kwdefaults__ = py.__kwdefaults__
        opts = {k: v for k, v in dict(disp.targetoptions).items() if k not in ("nopython", "inline")}
        opts.update(boundscheck=True, nogil=True)
        copy = numba.njit(**opts)(fn)
        _CHECKED[disp] = copy  # before its callees: a function that calls itself calls its copy
        for name in py.__code__.co_names:
            v = g.get(name)
            if v is not None and hasattr(v, "py_func") and hasattr(v, "targetoptions"):
                g[name] = bounds_checked(v)
        for cell, old in zip(cells or (), py.__closure__ or ()):
            v = old.cell_contents
            cell.cell_contents = bounds_checked(v) if hasattr(v, "py_func") and hasattr(v, "targetoptions") else v
        return copy


# ------------------------------------------------------------------ watched calls
class ModelStalled(ValueError):
    """A model function did not return within ``$TRACKING_MODEL_TIMEOUT`` seconds."""


_DEFAULT_TIMEOUT = 10.0


def model_timeout():
    """Seconds a model function may take in one call before it is reported: ``$TRACKING_MODEL_TIMEOUT``, default 10."""
    text = os.environ.get("TRACKING_MODEL_TIMEOUT", "").strip()
    if not text:
        return _DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        msg = f"TRACKING_MODEL_TIMEOUT must be a number of seconds > 0, got {text!r}"
        raise ValueError(msg)
    return value


class _Job:
    __slots__ = ("fn", "reply", "finished", "error")

    def __init__(self, fn):
        self.fn = fn
        self.reply = queue.SimpleQueue()  # the worker puts one item when it is done (faster than an Event)
        self.finished = False
        self.error = None


_IDLE = []  # inboxes of the workers waiting for a job
_IDLE_LOCK = threading.Lock()


def _work(inbox):
    while True:
        job = inbox.get()
        try:
            job.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            job.error = exc
        job.fn = None
        job.finished = True
        with _IDLE_LOCK:
            _IDLE.append(inbox)
        job.reply.put(None)


def _after_fork():
    # a forked child has none of the parent's threads: forget their inboxes (and any lock they held)
    global _IDLE_LOCK, _CHECKED_LOCK
    _IDLE.clear()
    _IDLE_LOCK = threading.Lock()
    _CHECKED_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _submit(fn):
    """Run ``fn()`` on an idle worker thread (a daemon: one that never returns does not hold up exit)."""
    job = _Job(fn)
    with _IDLE_LOCK:
        inbox = _IDLE.pop() if _IDLE else None
    if inbox is None:
        inbox = queue.SimpleQueue()
        threading.Thread(target=_work, args=(inbox,), name="tracking-model", daemon=True).start()
    inbox.put(job)
    return job


def run_watched(fns, where=None, *, timeout, stalled):
    """Run each of ``fns`` on a worker thread and wait for all; their exceptions, in order (None: returned).

    ``where`` (len(fns), k) int64, each row written by the job it belongs to as it
    goes (run, step, model function; -1 before it starts): a job whose row has
    not changed for ``timeout`` seconds once it started (compiling does not
    count), or, without ``where``, that has not returned within ``timeout``
    seconds, raises ``stalled(i)`` (a :class:`ModelStalled`) here. Workers are
    kept for the next call (one handoff costs about 10 us); one that never
    returns is left to the end of the process.
    """
    jobs = [_submit(fn) for fn in fns]
    poll = min(0.25, timeout / 4)
    seen = None if where is None else where.copy()
    since = [time.monotonic()] * len(jobs)
    for job in jobs:
        while True:
            try:
                job.reply.get(timeout=poll)
                break
            except queue.Empty:
                pass
            now = time.monotonic()
            for i, other in enumerate(jobs):
                if other.finished:
                    continue
                if where is not None:
                    row = where[i].copy()
                    if row[0] < 0 or (row != seen[i]).any():
                        seen[i] = row
                        since[i] = now
                        continue
                if now - since[i] > timeout:
                    raise stalled(i)
    return [job.error for job in jobs]


def call_watched(fn, args, *, who, where):
    """``fn(*args)`` on a worker thread; its exception re-raised here; ModelStalled past the timeout."""
    timeout = model_timeout()

    def stalled(_):
        return ModelStalled(stall_text(who, where, timeout))

    (error,) = run_watched([lambda: fn(*args)], timeout=timeout, stalled=stalled)
    if error is not None:
        raise error


def stall_text(who, where, timeout):
    """The one line for a model function ``who`` that did not return ``where`` ("in run 3, step 7")."""
    return (f"{who} did not return within {timeout:g} s {where} (an endless loop?); expected model functions "
            "that return (TRACKING_MODEL_TIMEOUT sets the limit in seconds)")

"""A user's model functions, tried once on a guarded output before any batch runs.

Numba does not check bounds: a Jacobian written as 3x3 into its 2x2 output
overwrites whatever follows it, and a component never written keeps whatever
was there. Before a filter compiles its batched kernel, each model function is
called once in Python on an output that sits inside a larger buffer of
canaries (a NaN with a payload of our own): a canary changed outside the output
is an out-of-bounds write, a canary left inside it an unwritten component. A
typing error (wrong signature) or an exception becomes one ``ValueError``
naming the function.
"""

import numpy as np

__all__ = ["probe", "probe_models"]

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
    size = int(np.prod(out_shape))
    pad = 8 * size + 256  # far more than any overrun of a mistaken shape
    buf = np.empty(pad + size + pad)
    bits = buf.view(np.uint64)
    bits[:] = CANARY
    out = buf[pad:pad + size].reshape(out_shape)  # C-contiguous, the type the kernel passes
    who = _name(owner, slot, fn)
    shape_text = "(" + ", ".join(str(s) for s in out_shape) + ("," if len(out_shape) == 1 else "") + ")"
    try:
        fn(*args, out)
    except Exception as exc:  # noqa: BLE001 - any failure is the user's function's, named once
        kind = type(exc).__name__
        text = str(exc).strip().splitlines()
        if kind == "TypingError":
            first = next((t.strip() for t in text if t.strip() and not t.startswith("Failed in")), "")
            sig = ", ".join(_type_text(a) for a in args) + f", out: float64{list(out_shape)}"
            msg = f"{who} cannot be compiled for its arguments ({sig}): {first}"
        else:
            msg = f"{who} raised {kind} at a probe state: {text[0] if text else ''}"
        raise ValueError(msg) from None
    before, after = bits[:pad] != CANARY, bits[pad + size:] != CANARY
    if before.any() or after.any():
        past = int(np.flatnonzero(after)[-1]) + 1 if after.any() else 0
        msg = (f"{who} wrote outside its {shape_text} output ({int(before.sum() + after.sum())} values, up to "
               f"{past} past its end); expected it to write only out[...] within {shape_text}")
        raise ValueError(msg)
    unwritten = bits[pad:pad + size] == CANARY
    if unwritten.any():
        idx = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(unwritten)[0]), out_shape))
        msg = (f"{who} left {int(unwritten.sum())} of the {size} components of its {shape_text} output unwritten "
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

"""The kernels' compiler pipeline: copy propagation keeps reference counting out of loops
that call inlined functions over arrays (fastcal._kernels._pipeline)."""

import importlib
import pkgutil
import re

import numba
import numpy as np

import fastcal._kernels
from fastcal._kernels._pipeline import KernelCompiler
from fastcal.jit import njit


def _helpers(jit):
    """A filter-like step: an inlined function over arrays with loops and an early return,
    called in a double loop (the shape of the batched EKF's step)."""

    @jit(inline="always")
    def step(x, P, tmp, n):
        for i in range(n):
            s = 0.0
            for k in range(n):
                s += P[i, k] * x[k]
            tmp[i] = s
        if not np.isfinite(tmp[0]):
            return False
        for i in range(n):
            x[i] = tmp[i]
        return True

    @jit(nogil=True)
    def loop(x, P, tmp, out):
        done = 0
        for r in range(out.shape[0]):
            for k in range(out.shape[1]):
                if not step(x, P, tmp, 4):
                    break
                out[r, k] = x[0]
                done += 1
        return done

    return loop


def _refcount_calls(disp):
    (ir,) = disp.inspect_llvm().values()
    body = ir.split("define ", 2)[1]  # the function itself, not its Python wrapper
    return len(re.findall(r"call void @NRT_(?:incref|decref)", body))


def test_copy_propagation_takes_reference_counting_out_of_inlined_calls_and_keeps_the_bits():
    P = np.array([[0.9, 0.1, 0.0, 0.0], [0.0, 0.8, 0.3, 0.0], [0.2, 0.0, 0.7, 0.1], [0.0, 0.1, 0.0, 1.1]])
    ours, theirs = _helpers(njit), _helpers(numba.njit)
    outs = []
    for fn in (ours, theirs):
        x, out = np.array([1.0, -2.0, 0.5, 3.0]), np.zeros((7, 9))
        outs.append((fn(x, P, np.empty(4), out), x.tobytes(), out.tobytes()))
    assert outs[0] == outs[1]
    assert outs[0][0] == 63
    # Numba's own pipeline counts the inlined function's arrays in the loop; ours does not
    assert _refcount_calls(theirs) >= 8
    assert _refcount_calls(ours) == 0


def test_every_kernel_is_compiled_by_the_kernel_pipeline():
    found = 0
    for info in pkgutil.iter_modules(fastcal._kernels.__path__):
        if info.name.startswith("cuda") or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"fastcal._kernels.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == mod.__name__:
                found += 1
                assert obj._compiler.pipeline_class is KernelCompiler, f"{info.name}.{name}"
    assert found > 50


def test_the_batched_filters_kernel_is_compiled_by_the_kernel_pipeline():
    from tracking import ExtendedKalmanFilter, UnscentedKalmanFilter
    from tracking.scenario import Scenario

    sc = Scenario(runs=2, steps=3, seed=0)
    for cls in (ExtendedKalmanFilter, UnscentedKalmanFilter):
        assert cls(sc.motion, sc.sensor)._kernel._compiler.pipeline_class is KernelCompiler

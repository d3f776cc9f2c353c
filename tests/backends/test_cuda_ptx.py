"""Every GPU kernel compiled for the GPUs we target, without a GPU.

The simulator runs the kernels' logic as Python, so it cannot tell whether
they compile for a real GPU, nor what the compiled code does in its hot loop.
numba-cuda compiles to PTX with NVVM alone (no driver, no device): this file
compiles each kernel for every argument type the host side launches it with,
for sm_90 (H100, H200) and sm_80 (A100), and checks the PTX: no float64
atomics (a CAS loop in shared memory on these GPUs; they would also make the
sums depend on scheduling), and no local memory in the binary fills.

Like tests/backends/test_cuda_sim.py, it runs in a subprocess: compiling imports
``numba.cuda``, which the main test process never does.
"""

import os
import re

import numpy as np
import pytest

from tests import subsuites

CHILD = os.environ.get("FASTCAL_PTX_CHILD") == "1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _missing():
    try:
        import numba_cuda  # noqa: F401
    except ImportError:
        return "numba-cuda is not installed (the test extra installs it)"
    return None


def suite_run():
    """(env, timeout) of this file's compiling run, or None where it does not run
    (tests/subsuites.py starts it early, beside the rest of the suite)."""
    if CHILD or _missing():
        return None
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(FASTCAL_PTX_CHILD="1", PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    # about 300 s of CPU after the other children: a guard against a hang
    return env, 1800


def test_kernels_compile_in_subprocess():
    if CHILD:
        pytest.skip("already in the subprocess")
    reason = _missing()
    if reason:
        pytest.skip(reason)
    proc = subsuites.run(__file__, *suite_run())
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout


if CHILD:
    from numba import cuda, typeof

    from fastcal._kernels import _cuda as kc
    from fastcal._kernels import cuda_binary as kcb
    from fastcal._kernels import cuda_bootstrap as kbt
    from fastcal._kernels import cuda_equal_mass as kce
    from fastcal._kernels import cuda_gaussian as kcg
    from fastcal._kernels import cuda_multiclass as kcm

    def _a(dtype, ndim, layout="C"):
        t = typeof(np.zeros((2,) * ndim, dtype))
        return t if layout == "C" else t.copy(layout=layout)

    B, F8, I8 = typeof(True), typeof(1.0), typeof(np.int64(1))
    PARTS = (_a(np.int64, 3), _a(np.float64, 3), _a(np.float64, 2), _a(np.int64, 2))
    WARP_ARGS = (B, B, _a(np.float64, 1))
    LABELS = (np.bool_, np.int64, np.float32)

    def _binary_cases():
        for pdt in (np.float32, np.float64):
            for ydt in LABELS:
                yield (f"fill_prob p={np.dtype(pdt).name} y={np.dtype(ydt).name}", kcb.fill_prob,
                       (_a(pdt, 1), _a(ydt, 1), _a(np.float64, 1), B, B, B, F8, F8, B)
                       + WARP_ARGS + PARTS)
                yield (f"fill_logit z={np.dtype(pdt).name} y={np.dtype(ydt).name}",
                       kcb.fill_logit,
                       (_a(pdt, 1), _a(ydt, 1), _a(np.float64, 1), B, B, F8, F8, B)
                       + WARP_ARGS + PARTS)
        # strided input (a column of a wider array) compiles for layout "A"
        yield ("fill_prob strided", kcb.fill_prob,
               (_a(np.float32, 1, "A"), _a(np.int64, 1, "A"), _a(np.float64, 1), B, B, B, F8, F8,
                B) + WARP_ARGS + PARTS)

    def _multiclass_cases():
        for K, pdt in ((2, np.float32), (10, np.float32), (10, np.float64), (100, np.float32)):
            yield (f"multiclass K={K} P={np.dtype(pdt).name}", kcm.kernel(K),
                   (_a(pdt, 2), _a(np.int64, 1), _a(np.float64, 1), B, B, B, F8, B, B, F8, B, B)
                   + WARP_ARGS + WARP_ARGS[1:] + PARTS + (_a(np.float64, 2),))
        yield ("multiclass K=10 strided P", kcm.kernel(10),
               (_a(np.float32, 2, "A"), _a(np.uint8, 1), _a(np.float64, 1), B, B, B, F8, B, B, F8,
                B, B) + WARP_ARGS + WARP_ARGS[1:] + PARTS + (_a(np.float64, 2),))
        for K in (2, 10):
            yield (f"confidence K={K}", kcm.confidence_kernel(K),
                   (_a(np.float32, 2), _a(np.int64, 1), B, B, F8, _a(np.float64, 1),
                    _a(np.uint8, 1)))

    def _gaussian_cases():
        parts = (_a(np.int64, 2), _a(np.float64, 2), _a(np.int64, 2), _a(np.int64, 3))
        for d in (1, 3):
            yield (f"gaussian d={d}", kcg.kernel(d),
                   (_a(np.float64, 2), _a(np.float64, 3), I8, I8, F8) + parts)
        # float32 device arrays, and strided 2-D / 3-D views (GaussianAccumulator reads them)
        yield ("gaussian d=3 float32", kcg.kernel(3),
               (_a(np.float32, 2), _a(np.float32, 3), I8, I8, F8) + parts)
        yield ("gaussian d=2 strided", kcg.kernel(2),
               (_a(np.float64, 2, "A"), _a(np.float64, 3, "A"), I8, I8, F8) + parts)

    def _gather_cases():
        for pdt in (np.float32, np.float64):
            yield (f"gather_rows p={np.dtype(pdt).name}", kce.gather_rows,
                   (_a(pdt, 1), _a(np.uint8, 1), _a(np.int64, 1), I8, _a(np.int64, 1),
                    _a(np.int64, 1), _a(np.int64, 1), _a(np.int64, 1), _a(np.uint8, 1)))

        for zdt in (np.float32, np.float64):
            yield (f"sigmoid z={np.dtype(zdt).name}", kce.sigmoid,
                   (_a(zdt, 1), _a(np.float64, 1)))
        for dt in (np.int64, np.float64):
            yield (f"sum_rows {np.dtype(dt).name}", kc.sum_rows, (_a(dt, 2), _a(dt, 1)))
        # input the fills do not read as it is: cast once (fastcal.cuda.as_dtype)
        for src, dst in ((np.float16, np.float32), (np.int64, np.float64), (np.bool_, np.float64)):
            yield (f"cast_rows {np.dtype(src).name}", kc.cast_rows,
                   (_a(src, 1, "A"), _a(dst, 1)))
        yield ("cast_rows_2d int32", kc.cast_rows_2d, (_a(np.int32, 2, "A"), _a(np.float64, 2)))

    def _bootstrap_cases():
        U8 = typeof(np.uint64(1))
        for xdt, ydt in ((np.float32, np.bool_), (np.float64, np.uint8), (np.float64, np.float32)):
            yield (f"boot_fill x={np.dtype(xdt).name} y={np.dtype(ydt).name}", kbt.boot_fill,
                   (_a(xdt, 1), _a(ydt, 1), I8, _a(np.float64, 1), B, B, U8, I8,
                    _a(np.int64, 4), _a(np.float64, 3)))

    CASES = [*_binary_cases(), *_multiclass_cases(), *_gaussian_cases(), *_gather_cases(),
             *_bootstrap_cases()]
    F64_ATOMIC = re.compile(r"\b(atom|red)(\.\w+)*\.add\.f64\b")

    # every case for sm_90 (H100, H200); the first of each kernel for sm_80 (A100) too,
    # from the same compiled library
    FIRSTS = {"fill_prob p=float32 y=bool", "fill_logit z=float32 y=bool",
              "multiclass K=2 P=float32", "gaussian d=1", "boot_fill x=float32 y=bool"}
    TARGETS = [(c, (9, 0)) for c in CASES] + [(c, (8, 0)) for c in CASES if c[0] in FIRSTS]

    _LIBRARIES = {}

    def _ptx(name, kernel, sig, cc):
        """PTX of one case for ``cc``: typed and lowered once, then NVVM once per target."""
        try:
            from numba.cuda.compiler import _compile_pyfunc_with_fixup
        except ImportError:  # another numba-cuda: compile for each target
            return cuda.compile_ptx(kernel.py_func, sig, cc=cc)[0]
        if name not in _LIBRARIES:
            _LIBRARIES[name] = _compile_pyfunc_with_fixup(kernel.py_func, sig, device=False,
                                                          abi="numba", cc=(9, 0))[0]
        return _LIBRARIES[name].get_asm_str(cc=cc)

    @pytest.mark.parametrize("case,cc", TARGETS,
                             ids=[f"{c[0]} sm_{cc[0]}{cc[1]}" for c, cc in TARGETS])
    def test_kernel_compiles_without_float64_atomics(case, cc):
        name, kernel, sig = case
        ptx = _ptx(name, kernel, sig, cc)
        assert f".target sm_{cc[0]}{cc[1]}" in ptx
        assert ".entry" in ptx
        assert not F64_ATOMIC.search(ptx), f"{name}: float64 atomic add in the PTX"
        assert "atom.shared.cas" not in ptx, f"{name}: compare-and-swap loop in shared memory"
        if name.startswith("fill_"):
            assert ".local" not in ptx, f"{name}: local memory (a spilled per-thread array)"

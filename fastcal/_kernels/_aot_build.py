"""The build step's ahead-of-time module (:mod:`fastcal._kernels._aot`), compiled with ``numba.pycc``.

Run in a child of the build step (``setup.py``), before the children that compile
the shipped JIT kernels: ``python -c "from fastcal._kernels import _aot_build;
_aot_build.main()" FOLDER``. It writes the extension module and its manifest
(:data:`fastcal._kernels._aot.MANIFEST`) into FOLDER.

Three things ``numba.pycc`` does otherwise than the JIT, made the JIT's here, so that
the module's code is the JIT kernel's (the tests compare them to the bit):

- it compiles an exported function with default flags: each kernel's own options
  (``nogil``, ``error_model``, ``fastmath``, ...) are applied, and its pipeline
  (:class:`fastcal._kernels._pipeline.KernelCompiler`); ``nogil`` makes the
  module's wrapper release the GIL as the dispatcher does;
- it compiles for a generic CPU unless told: here the CPU and the features the JIT
  kernels are compiled for (this machine's, or the baseline that
  ``FASTCAL_SHIP_CPU`` names);
- its functions are found by name, one per signature: :func:`fastcal._kernels._aot.export_names`.
"""

import hashlib
import importlib
import json
import os
import sys
import time
import warnings

from numba import types
from numba.core import codegen
from numba.core.errors import NumbaPendingDeprecationWarning
from numba.core.registry import cpu_target

with warnings.catch_warnings():  # (pending deprecation, supported until a replacement exists)
    warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
    from numba.pycc import CC
    from numba.pycc import compiler as pycc_compiler

from fastcal._kernels import _aot, _lazy, _pipeline, _shipped, _sources

__all__ = ["build", "main"]


def _numba_type(code):
    if code == "void":
        return types.void
    if "," in code:
        parts = [_numba_type(c) for c in code.split(",")]
        return types.UniTuple(parts[0], len(parts)) if len(set(parts)) == 1 else types.Tuple(parts)
    if ":" not in code:
        return {"i8": types.int64, "f8": types.float64, "b1": types.boolean}[code]
    dtype, shape = code.split(":")
    scalar = {"f4": types.float32, "f8": types.float64, "i8": types.int64, "u1": types.uint8}[dtype]
    return types.Array(scalar, int(shape[-1]), "C", readonly=shape.startswith("r"))


def build(out, cpu_name, features):
    """Compile :data:`fastcal._kernels._aot.KERNELS` into ``out``; the manifest written."""
    _lazy.materialize()
    kernels = {}
    cc = CC(_aot.MODULE)
    cc.output_dir, cc.target_cpu, cc.verbose = out, cpu_name, False
    for module, name, codes, result in _aot.KERNELS:
        kernel = getattr(importlib.import_module(f"fastcal._kernels.{module}"), name).dispatcher()
        kernels[kernel.py_func] = kernel
        for export, args in _aot.export_names(module, name, codes):
            sig = _numba_type(result)(*map(_numba_type, args))
            cc.export(export, sig)(kernel.py_func)

    real_compile = pycc_compiler.compile_extra

    def compile_extra(typingctx, targetctx, func, args, return_type, flags, locals, **kw):
        options = {k: v for k, v in kernels[func].targetoptions.items() if k != "cache"}
        flags = cpu_target.options.parse_as_flags(flags, options)
        kw.setdefault("pipeline_class", _pipeline.KernelCompiler)
        return real_compile(typingctx, targetctx, func, args, return_type, flags, locals, **kw)

    real_features = codegen.AOTCPUCodegen._customize_tm_features
    pycc_compiler.compile_extra = compile_extra
    codegen.AOTCPUCodegen._customize_tm_features = lambda self: features
    try:
        cc.compile()
    finally:
        pycc_compiler.compile_extra = real_compile
        codegen.AOTCPUCodegen._customize_tm_features = real_features
    so = os.path.join(out, _aot.MODULE + _aot.versions()["suffix"])
    with open(so, "rb") as f:
        digest = hashlib.blake2b(f.read(), digest_size=_sources.DIGEST).hexdigest()
    man = dict(_aot.versions(), cpu_name=cpu_name, cpu_features=features,
               requires=_shipped.requires(cpu_name, features), sources=_sources.dir_digest(_sources.HERE),
               digest=digest)
    with open(os.path.join(out, _aot.MANIFEST), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
    return man


def main():
    """The build step's child: ``FOLDER`` from argv; the CPU as the JIT kernels'; exit 3 when it cannot."""
    t = time.perf_counter()
    cpu_name, features = _shipped.build_target()
    if _shipped.requires(cpu_name, features) is None:
        print(f"the CPU features of {cpu_name} are unknown")
        raise SystemExit(3)
    build(sys.argv[1], cpu_name, features)
    print(f"ahead-of-time module compiled for {cpu_name} in {time.perf_counter() - t:.1f} s")

"""The compiler pipeline of fastcal's kernels: Numba's own, plus copy propagation after typing.

Why: fastcal's kernels are written as small ``inline="always"`` functions over
arrays (a row's terms, a Cholesky step, a predict). Numba inlines them in its IR,
where every argument becomes a new variable (``x.1 = x``), and each array
variable costs a reference-count increment and decrement (two atomic operations on
the array's meminfo) wherever it is live. Numba's LLVM reference-count pruning
removes the pairs only inside simple control flow; around an inlined function's
loops and early returns they stay, in the innermost loop. The batched EKF spent
two thirds of its time in them: 0.82 us a run-step on one thread against 0.22 - 0.33
with this pass (the default scenario, 1,000 runs x 100 steps, same bits; the machine's
load moved it). A
``parallel=True`` kernel never paid it, because the parfor pass runs the same
copy propagation; the serial ``nogil`` kernels lost it when they replaced the
``prange`` ones.

The pass is the copy propagation of :func:`numba.core.ir_utils.simplify`, the step
the parfor pass runs on every ``parallel=True`` function, here run once after type
inference: a variable that only copies another is replaced by it. It renames
variables; the arithmetic, and so every result, is unchanged to the bit. The rest of
``simplify`` (dead code removal) is left out: it drops stores into arrays it believes
no one reads, and a K-class kernel's ACE and smooth ECE came out NaN with it; the
copy propagation alone gives the EKF the same speed.
"""

from numba.core import ir_utils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.typed_passes import NopythonTypeInference

__all__ = ["KernelCompiler"]


@register_pass(mutates_CFG=True, analysis_only=False)
class CopyPropagate(FunctionPass):
    """Copy propagation on the typed IR (see the module docstring)."""

    _name = "fastcal_copy_propagate"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        blocks = state.func_ir.blocks
        copies, _ = ir_utils.copy_propagate(blocks, state.typemap)
        names = ir_utils.get_name_var_table(blocks)
        saved = ir_utils.apply_copy_propagate(blocks, copies, names, state.typemap, state.calltypes)
        ir_utils.restore_copy_var_names(blocks, saved, state.typemap)
        return True


class KernelCompiler(CompilerBase):
    """Numba's nopython pipeline with :class:`CopyPropagate` after type inference."""

    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.add_pass_after(CopyPropagate, NopythonTypeInference)
        pm.finalize()
        return [pm]

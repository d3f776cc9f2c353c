"""Compilation settings shared by every kernel.

Fastmath flags live here and nowhere else. ``nnan`` and ``ninf`` are never
enabled: the kernels count NaN and infinite inputs and must see them.
``reassoc`` lets LLVM vectorise reductions; it changes the order of float
additions inside one block, which is why results are equal across chunkings to
about 1e-12 relative, not bit for bit.
"""

FASTMATH = {"reassoc", "contract", "nsz"}

# Elements handled per block: small enough for the block's scratch arrays to
# stay in L1, large enough to amortise the per-block bookkeeping.
BLOCK = 512

# Interleaved copies of each per-bin accumulator. Consecutive samples usually
# fall in the same bin; spreading them over copies breaks the store-to-load
# dependency chain of the scatter.
COPIES = 4

# Elements accumulated into the per-copy scratch before it is flushed into the
# thread totals. Bounded so that the packed integer counters cannot overflow
# (21 bits per field, see binary.py).
FLUSH = 1 << 20

# Flags for the elementwise maths in mathfn.py, which rely on exact float
# identities (Fast2Sum, Sterbenz subtractions) that reassociation would undo.
FASTMATH_EXACT = {"contract", "nsz"}

# Rows of K class probabilities must sum to 1 within this (unless renormalised).
SUM_TOL = 1e-5

# Relative asymmetry |P - P.T| / |P| above which a covariance is refused.
SYMMETRY_RTOL = 1e-8

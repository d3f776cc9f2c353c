"""The common kernel signatures compiled ahead of the first call.

The package's build step runs :func:`warmup` with ``ship=True`` to compile them into
the package (:mod:`fastcal._kernels._shipped`), for the build machine's CPU or a
baseline one (``FASTCAL_SHIP_CPU``): an install loads them at its first call.
``fastcal warmup`` compiles the same calls for this very CPU into your cache, which
is looked up first: the way to fill the cache where no kernels were shipped (another
CPU family, a CPU that lacks a feature of the shipped code, a build that could not
compile them), and code tuned to the host where the wheel was built for a baseline.
"""

import contextlib
import time

import numpy as np

from fastcal._kernels import _aot, _cache, _shipped, binary
from fastcal.metrics import calibration_report

# (label, probabilities dtype, labels dtype, classes): labels are read as uint8
# (integers of any width, bool) or float64 (fastcal.inputs.validation.as_labels_1d)
SIGNATURES = (
    ("binary, float64 p, integer or bool y", np.float64, np.int64, 0),
    ("binary, float32 p, integer or bool y", np.float32, np.int64, 0),
    ("binary, float64 p, float y", np.float64, np.float64, 0),
    ("binary, float32 p, float y", np.float32, np.float64, 0),
    ("K classes, float64 P", np.float64, np.int64, 3),
    ("K classes, float32 P", np.float32, np.int64, 3),
)
# the groups of signatures, each compiled by one child of the build step (two cores
# compile about the same amount each: binary 27 s, binary float y 20 s, K classes 39 s)
KINDS = ("binary", "binary-float-y", "classes")


def _kind(p_dtype, y_dtype, k):
    if k:
        return "classes"
    return "binary-float-y" if np.dtype(y_dtype).kind == "f" else "binary"


def shipped():
    """'' when the kernels shipped in the package are loaded, else why not."""
    return _cache.shipped_status()


def ahead_of_time():
    """'' when the default binary report's module compiled ahead of time is loaded, else why not."""
    return _aot.status()


def cache_dir():
    """Directory of the compiled kernels, or None when they are compiled in memory only."""
    return getattr(binary.fill_range._cache, "cache_path", None)


def warmup(*, on_step=None, ship=False, kinds=KINDS):
    """Compile the kernels of a default report for the common input dtypes, for this CPU.

    The input gate hands the kernels read-only, C-contiguous views of one dtype per
    kind (labels as uint8 or float64), so these few cover every layout, stride and
    integer width of the inputs.

    Parameters
    ----------
    on_step : callable, optional
        Called as ``on_step(label, seconds)`` after each signature.
    ship : bool
        The package's build step (its cache writes every kernel into the package);
        else the shipped kernels are passed over, so that this CPU's are compiled.
    kinds : tuple of str
        Of :data:`KINDS` (``"binary"``, ``"binary-float-y"``, ``"classes"``): the
        signatures of those predictions only.

    Returns
    -------
    list of (str, float)
        Each signature's label and the seconds it took (about 0 when cached).

    Examples
    --------
    >>> from fastcal.warmup import warmup
    >>> steps = warmup()  # doctest: +SKIP
    """
    rng = np.random.default_rng(0)
    steps = []
    with contextlib.nullcontext() if ship else _shipped.disabled():
        for label, p_dtype, y_dtype, k in SIGNATURES:
            if _kind(p_dtype, y_dtype, k) not in kinds:
                continue
            t0 = time.perf_counter()
            if k:
                p = rng.dirichlet(np.ones(k), 64).astype(p_dtype)
                y = rng.integers(0, k, 64).astype(y_dtype)
            else:
                p = rng.random(64).astype(p_dtype)
                y = (rng.random(64) < p).astype(y_dtype)
            calibration_report(y, p, n_bins=10)
            steps.append((label, time.perf_counter() - t0))
            if on_step is not None:
                on_step(*steps[-1])
    return steps

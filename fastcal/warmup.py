"""Compile the common kernel signatures ahead of the first call (``fastcal warmup``).

Numba compiles each kernel for each argument type on its first call, and keeps
the result in its disk cache. Running this once when a container image or a CI
cache is built makes the first real call load the kernels instead (well under a
second) of compiling them.
"""

import time

import numpy as np

from fastcal._kernels import binary
from fastcal.metrics import calibration_report

# (label, probabilities dtype, labels dtype, classes): labels are read as uint8
# (integers of any width, bool) or float64 (fastcal.inputs.validation.as_labels_1d)
SIGNATURES = (
    ("binary, float64 p, integer or bool y", np.float64, np.int64, 0),
    ("binary, float32 p, integer or bool y", np.float32, np.int64, 0),
    ("binary, float64 p, float y", np.float64, np.float64, 0),
    ("K classes, float64 P", np.float64, np.int64, 3),
    ("K classes, float32 P", np.float32, np.int64, 3),
)


def cache_dir():
    """Directory of the compiled kernels, or None when they are compiled in memory only."""
    return getattr(binary.fill_range._cache, "cache_path", None)


def warmup(*, on_step=None):
    """Compile the kernels of a default report for the common input dtypes.

    Parameters
    ----------
    on_step : callable, optional
        Called as ``on_step(label, seconds)`` after each signature.

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
    for label, p_dtype, y_dtype, k in SIGNATURES:
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

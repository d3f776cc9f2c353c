"""Numba's target set-up without importing SciPy.

At its first compile or cache load, Numba imports its NumPy implementations, and
``numba.np.arraymath`` asks at import whether a BLAS is there (it picks the code of
``np.dot``-based functions by the answer) by importing ``scipy.linalg.cython_blas``.
That import runs ``scipy.linalg``'s ``__init__``: 0.5 of the 1.2 s of a later
process's first report on a 2-core machine (SciPy 1.17, which imports its array-API
layer and ``numpy.f2py`` with it), for kernels that never call BLAS.

:func:`blas_check_without_import` answers the same question from the files: SciPy's
``linalg/cython_blas`` extension is installed. The kernels that do call BLAS or
LAPACK (tracking's filters) still import it, and Numba's own checks of it (its
integer width) run then, when they compile. Where this Numba is laid out otherwise,
nothing is changed and Numba imports SciPy as before.
"""

import glob
import importlib.util
import os
import sys


def _cython_blas_installed():
    try:
        spec = importlib.util.find_spec("scipy")  # a top-level package: found, not imported
    except (ImportError, ValueError):
        return False
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if glob.glob(os.path.join(glob.escape(folder), "linalg", "cython_blas.*")):
            return True
    return False


def blas_check_without_import():
    """Import ``numba.np.arraymath`` with its BLAS check answered from the files.

    Returns True when the check was answered so, False when Numba was left to do it
    (``arraymath`` already imported, or a Numba without ``ensure_blas``).
    """
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return False
    from numba.np import linalg

    real = getattr(linalg, "ensure_blas", None)
    if real is None:
        return False

    def ensure_blas():
        if not _cython_blas_installed():
            msg = "scipy 0.16+ is required for linear algebra"
            raise ImportError(msg)

    linalg.ensure_blas = ensure_blas
    try:
        from numba.np import arraymath
    finally:
        linalg.ensure_blas = real
    if getattr(arraymath, "ensure_blas", None) is ensure_blas:
        arraymath.ensure_blas = real
    return True

"""Compiling and running kernels the way fastcal's own are: the public door for packages
that build compiled kernels on fastcal (``tracking``'s batched filters).

- :func:`njit` is ``numba.njit`` whose ``cache=True`` keeps compiled code in a disk
  cache that never stops a run: each cache file carries a digest checked before it
  is unpickled (a damaged file is recompiled with one :class:`CacheWarning` naming
  it), and where no cache location is writable the kernels are compiled in memory
  for the process, with one note.
- :func:`trust_problem`, :func:`make_trusted_dir` and :func:`open_trusted` are the rule
  by which a cache of compiled code is loaded: only directories and files of the
  current user that no one else can write (:class:`Untrusted` otherwise).
- :func:`thread_range` and :func:`run_threads` are the house pattern of a parallel
  run: serial ``nogil`` kernels, each thread on one contiguous range of its own,
  so results do not depend on the thread count.

Examples
--------
>>> import numpy as np
>>> from fastcal.jit import njit, run_threads, thread_range
>>> @njit(nogil=True)
... def fill(out, a, b):
...     for i in range(a, b):
...         out[i] = i * i
>>> out = np.zeros(10)
>>> def part(t):
...     fill(out, *thread_range(t, len(out), 3))
>>> run_threads(3, part)
>>> out.tolist()
[0.0, 1.0, 4.0, 9.0, 16.0, 25.0, 36.0, 49.0, 64.0, 81.0]
"""

import functools

from fastcal._kernels import _cache, _lazy
from fastcal._kernels._cache import CacheWarning
from fastcal._kernels._threads import run_threads, thread_range
from fastcal._kernels._trust import Untrusted, open_trusted
from fastcal._kernels._trust import make_dir as make_trusted_dir
from fastcal._kernels._trust import problem as trust_problem

__all__ = ["CacheWarning", "Untrusted", "make_trusted_dir", "njit", "open_trusted",
           "run_threads", "thread_range", "trust_problem"]


@functools.wraps(_cache.njit)
def njit(*args, **options):
    # fastcal's own kernels are made first (fastcal._kernels._lazy): code that calls them
    # then reads Numba dispatchers
    _lazy.materialize()
    return _cache.njit(*args, **options)

"""``fastcal warmup``: compile the kernels of the common input dtypes for this CPU into the cache."""

import time

from fastcal.commands.common import EXIT_OK
from fastcal.warmup import ahead_of_time, cache_dir, shipped, warmup


def run(args):
    """Run ``fastcal warmup``; returns the exit status."""
    t0 = time.perf_counter()
    warmup(on_step=lambda label, sec: print(f"{label}: {sec:.1f} s", flush=True))
    where = cache_dir() or "memory only (no writable cache directory)"
    print(f"done in {time.perf_counter() - t0:.1f} s; cache: {where}")
    why = shipped()
    print("kernels shipped in the package: " + (f"not loaded ({why})" if why else "loaded where this cache has none"))
    why = ahead_of_time()
    print("the default binary report's module compiled ahead of time: "
          + (f"not loaded ({why})" if why else "loaded (those calls run it, before any cache)"))
    return EXIT_OK

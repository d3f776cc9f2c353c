"""Digests of the kernel sources, without Numba: what a compiled kernel is stamped with.

A kernel compiled from other sources than the installed ones is never run: the disk
cache (:mod:`fastcal._kernels._cache`), the kernels shipped in the package
(:mod:`fastcal._kernels._shipped`) and the ahead-of-time module
(:mod:`fastcal._kernels._aot`) all compare these digests before loading.
"""

import functools
import hashlib
import os

DIGEST = 16
HERE = os.path.dirname(os.path.abspath(__file__))
# tracking's kernels sit beside fastcal in the same distribution
TRACKING_KERNELS = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir, "tracking", "kernels"))

# modules of fastcal/_kernels that hold no kernel and nothing a kernel reads (the cache, the
# trust rule, the thread pool, the loaders): left out of the stamp, so that changing them
# keeps the cache
NOT_COMPILED = frozenset({"_aot.py", "_aot_build.py", "_cache.py", "_lazy.py", "_shipped.py", "_sources.py",
                          "_startup.py", "_trust.py", "_threads.py"})


@functools.cache
def dir_digest(path):
    """Digest of the names and contents of the ``.py`` files in ``path`` ('' when it is absent)."""
    h = hashlib.blake2b(digest_size=DIGEST)
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".py") and n not in NOT_COMPILED)
    except OSError:
        return ""
    for name in names:
        with open(os.path.join(path, name), "rb") as f:
            data = f.read()
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


@functools.cache
def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.blake2b(f.read(), digest_size=DIGEST).hexdigest()


def sources_digests():
    """{folder: digest} of the kernel sources (fastcal/_kernels, and tracking/kernels where present)."""
    out = {"fastcal/_kernels": dir_digest(HERE), "tracking/kernels": dir_digest(TRACKING_KERNELS)}
    return {k: v for k, v in out.items() if v}

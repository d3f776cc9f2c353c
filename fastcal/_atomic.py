"""Files written whole or not at all: a temporary file beside the target, then a rename.

Readers never see a partial file, a failed write leaves no file behind and an
existing one untouched, and the result has the permissions a plain ``open``
would give (``mkstemp`` alone makes 0600).
"""

import os
import tempfile


def umask():
    """The process umask (read without changing it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def temp_near(path, suffix=""):
    """A new empty temporary file in ``path``'s directory, named after it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp" + suffix,
                               dir=folder)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask())
    return tmp


def write_atomically(path, write, *, mode="wb"):
    """Create ``path`` by calling ``write(fh)`` on an open temporary file, then renaming it."""
    path = os.fspath(path)
    tmp = temp_near(path, os.path.splitext(path)[1])
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path

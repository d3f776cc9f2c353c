"""Which cache directories and files may be loaded: your own, that no one else can write.

A cache of compiled kernels holds pickles and machine code, so loading one runs
what it says. Whoever can write a cache file can therefore run code as the user
who loads it (root's ``fastcal score`` loading an index planted by another local
user in a shared ``NUMBA_CACHE_DIR``). The rule, as ssh applies to its keys: a
directory is trusted when it is owned by the current effective user and not
writable by group or others; a file when, in addition, it is a regular file
(not a link, a FIFO or a device). Files are checked on the descriptor they are
read from (``fstat``), so a file swapped in after a check on its name is never
read. Both fastcal's kernel cache (:mod:`fastcal._kernels._cache`) and
tracking's generated kernels (:mod:`tracking.kernels.factory`) load only what passes.
"""

import os
import stat

__all__ = ["Untrusted", "problem", "dir_problem", "make_dir", "open_trusted", "WRITE_MODE"]

#: Mode of the files a cache writes: nobody but the owner can write them.
WRITE_MODE = 0o644


class Untrusted(OSError):
    """A cache directory or file that is not the current user's alone: never loaded."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def problem(st, owners=()):
    """Why an entry with stat result ``st`` is not trusted; '' when it is.

    ``owners``: uids trusted besides yours (root's, for the kernels shipped in a
    package that root installed: :mod:`fastcal._kernels._shipped`).
    """
    uid = os.geteuid()
    if st.st_uid != uid and st.st_uid not in owners:
        return f"owned by uid {st.st_uid}, not by you (uid {uid})"
    bits = st.st_mode & 0o022
    if bits:
        who = "group and others" if bits == 0o022 else "group" if bits == 0o020 else "others"
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def dir_problem(path, owners=()):
    """Why the directory ``path`` is not trusted; '' when it is (its target, if a link)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    return problem(st, owners)


def make_dir(path, mode=0o755):
    """Create ``path`` (and its parents) if absent; raise :class:`Untrusted` unless it is trusted.

    A new directory gets ``mode`` (a umask of 002 would otherwise make it
    group-writable, and so untrusted); an existing one is left as it is. A path
    that cannot be a directory (a file in the way, a read-only parent) raises
    the plain :class:`OSError`: that directory is unavailable, not refused.
    """
    os.makedirs(path, mode=mode, exist_ok=True)
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(path)
    why = problem(st)
    if why:
        raise Untrusted(path, why)


def open_trusted(path, owners=()):
    """``path`` opened for reading in binary mode, if it is a regular file of yours that only you can write.

    Raises :class:`FileNotFoundError` when it is absent and :class:`Untrusted`
    when it is a link, not a regular file, or not yours alone (checked on the
    open descriptor, so the file read is the file checked). A FIFO is opened
    without blocking.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError:
        if os.path.islink(path):
            raise Untrusted(path, "a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else problem(st, owners)
        if why:
            raise Untrusted(path, why)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

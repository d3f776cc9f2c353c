"""Files written whole or not at all: a temporary file beside the target, then a rename.

Readers never see a partial file, a failed write leaves no file behind and an
existing one untouched, and the result has the permissions a plain ``open``
would give (``mkstemp`` alone makes 0600), or the existing file's own mode.

Targets that are not regular files are written through, never replaced: a
FIFO or a character device (``/dev/stdout``, ``/dev/null``) is opened and
written; a symbolic link is followed and its target replaced, so the link
stays. :func:`commit` writes several outputs as one: all of them, or none.

Every temporary path is recorded in :data:`LIVE` until it is renamed or
removed, so a signal handler can remove what an interrupted run left
(:func:`cleanup`).
"""

import os
import re
import stat
import tempfile

#: Temporary files and directories created here and not yet renamed or removed.
LIVE: set = set()


def umask():
    """The process umask (read without changing it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _prefix(path):
    """Temporary names: ``.NAME.PID.RANDOM.tmp...``; the process id lets :func:`sweep`
    tell a temporary whose writer was killed from one still being written."""
    return f".{os.path.basename(path)}.{os.getpid()}."


def temp_near(path, suffix=""):
    """A new empty temporary file in ``path``'s directory, named after it (recorded in LIVE)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".tmp" + suffix, dir=folder)
    LIVE.add(tmp)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask())
    return tmp


def temp_dir_near(path):
    """A new empty temporary directory beside ``path`` (recorded in LIVE), mode 0777 & ~umask."""
    parent = os.path.dirname(os.path.abspath(path))
    tmp = tempfile.mkdtemp(prefix=_prefix(path), suffix=".tmp", dir=parent)
    LIVE.add(tmp)
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def remove(path):
    """Remove a temporary file or a flat temporary directory; forget it; never raise."""
    LIVE.discard(path)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            for f in os.listdir(path):
                os.remove(os.path.join(path, f))
            os.rmdir(path)
        elif os.path.lexists(path):
            os.remove(path)
    except OSError:
        pass


def rename(tmp, path):
    """``os.replace(tmp, path)`` and forget ``tmp``."""
    os.replace(tmp, path)
    LIVE.discard(tmp)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): alive
        return True
    return True


def sweep(path):
    """Remove the temporaries of ``path`` that a killed run (SIGKILL, power loss) left.

    Only names of this module's pattern (``.NAME.PID.RANDOM.tmp...``) beside
    ``path``, owned by this user, whose process ``PID`` no longer runs; returns
    their names. A live writer's temporary is never touched.
    """
    folder = os.path.dirname(os.path.abspath(path))
    pattern = re.compile(re.escape(f".{os.path.basename(path)}.") + r"(\d+)\.[a-z0-9_]+\.tmp")
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        full = os.path.join(folder, name)
        try:
            if os.lstat(full).st_uid != os.geteuid():
                continue
        except OSError:
            continue
        remove(full)
        if not os.path.lexists(full):
            removed.append(name)
    return removed


def cleanup():
    """Remove every temporary path still recorded (after an error or a signal)."""
    for p in sorted(LIVE, key=len, reverse=True):
        remove(p)


def is_special(path):
    """True for an existing FIFO, character or block device (after following links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def resolve(path):
    """The path a write should land on: symbolic links followed (the link itself is kept)."""
    return os.path.realpath(os.fspath(path))


def existing_mode(path):
    """Permission bits of an existing regular file at ``path``, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def write_atomically(path, write, *, mode="wb"):
    """Create ``path`` by calling ``write(fh)`` on an open temporary file, then renaming it.

    A FIFO or device is written through instead; a symbolic link is followed;
    an existing file keeps its permission bits.
    """
    path = os.fspath(path)
    enc = None if "b" in mode else "utf-8"
    if is_special(path):
        with open(path, mode.replace("x", "w"), encoding=enc) as fh:
            write(fh)
        return path
    real = resolve(path)
    keep = existing_mode(real)
    tmp = temp_near(real, os.path.splitext(real)[1])
    try:
        with open(tmp, mode, encoding=enc) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if keep is not None:
            os.chmod(tmp, keep)
        rename(tmp, real)
    except BaseException:
        remove(tmp)
        raise
    return path


def commit(outputs, *, stdout=None):
    """Write several outputs as one: every one of them, or none.

    Parameters
    ----------
    outputs : list of (str, bytes)
        Target path and its whole content. ``"-"`` is standard output;
        FIFOs and devices are written through; symbolic links are followed.
    stdout : binary file, optional
        Where ``"-"`` goes (default ``sys.stdout.buffer``).

    Every regular file is first written in full to a temporary file beside
    its target; only when all are written are they renamed over their
    targets, each existing target kept by a hard link until the end so that
    a failed rename puts back the ones already done. Streams (standard
    output, FIFOs, devices) cannot be taken back, so they are written last.
    On any failure or interrupt no temporary file is left.
    """
    import sys

    files, streams = [], []
    for path, data in outputs:
        if path == "-" or is_special(path):
            streams.append((path, data))
        else:
            files.append((resolve(path), data))
    staged, done, backups = [], [], []
    try:
        for real, data in files:
            tmp = temp_near(real, os.path.splitext(real)[1])
            staged.append((tmp, real))
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            keep = existing_mode(real)
            if keep is not None:
                os.chmod(tmp, keep)
        for tmp, real in staged:
            backup = None
            if existing_mode(real) is not None:
                backup = tempfile.mktemp(prefix="." + os.path.basename(real) + ".",
                                         suffix=".old", dir=os.path.dirname(real))
                try:
                    os.link(real, backup)
                    LIVE.add(backup)
                    backups.append(backup)
                except OSError:  # no hard links here: a failed later rename cannot be undone
                    backup = None
            rename(tmp, real)
            done.append((real, backup))
        for path, data in streams:
            if path == "-":
                out = stdout if stdout is not None else sys.stdout.buffer
                out.write(data)
                out.flush()
            else:
                with open(path, "wb") as fh:
                    fh.write(data)
    except BaseException:
        for real, backup in reversed(done):
            try:
                if backup is not None:
                    os.replace(backup, real)
                    LIVE.discard(backup)
                else:
                    os.remove(real)
            except OSError:
                pass
        for tmp, _ in staged:
            remove(tmp)
        raise
    finally:
        for b in backups:
            remove(b)

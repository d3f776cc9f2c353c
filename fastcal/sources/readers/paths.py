"""Which files a path names, and in which format: extensions, directory listings,
and the files of one format under a directory."""

import os

from fastcal.inputs.validation import show
from fastcal.sources.readers import where
from fastcal.sources.readers.base import _fail, _fail_os, _stat

FORMATS = ("parquet", "feather", "npy", "csv")

_EXTENSIONS = {
    ".parquet": "parquet", ".pq": "parquet", ".parq": "parquet",
    ".feather": "feather", ".arrow": "feather", ".ipc": "feather", ".arrows": "feather",
    ".npy": "npy",
    ".csv": "csv", ".csv.gz": "csv",
}


def _is_data_file(name):
    return not name.startswith((".", "_"))


def _walk_error(exc):
    raise exc


def _list_dir(path):
    if where.is_url(path):  # the objects under a prefix
        return where.list_files(path, _is_data_file)
    out = []
    try:
        for root, dirs, files in os.walk(path, onerror=_walk_error):
            dirs[:] = sorted(d for d in dirs if _is_data_file(d))
            out.extend(os.path.join(root, f) for f in sorted(files) if _is_data_file(f))
    except OSError as exc:
        _fail_os(exc.filename or path, exc, "list this directory")
    return out


def _ext(name):
    """The extension that decides a file's format: ``.csv.gz`` as one, else the last one."""
    low = where.name_of(name).lower()
    if low.endswith(".csv.gz"):
        return ".csv.gz"
    return os.path.splitext(low)[1]


def _by_format(files):
    """{format: [files]} for the data files among ``files``, and the other files."""
    found, other = {}, []
    for f in files:
        fmt = _EXTENSIONS.get(_ext(f))
        if fmt is None:
            other.append(f)
        else:
            found.setdefault(fmt, []).append(f)
    return found, other


def _some(path, files, k=3):
    """Up to ``k`` file names relative to ``path``, then how many more."""
    if where.is_url(path):
        names = [f[len(path.rstrip("/")) + 1:] for f in files[:k]]
    else:
        names = [os.path.relpath(f, path) for f in files[:k]]
    more = f" and {len(files) - k} more" if len(files) > k else ""
    return ", ".join(names) + more


def detect_format(path, format=None):
    """The format of ``path``: explicit, from the extension, or from a directory's files.

    A URL (``s3://``, ``https://``...) is read where it lives (see
    :mod:`fastcal.sources.readers.where`); one of a scheme that is not read is refused
    here, before anything is read."""
    path = where.local(path)
    if format is not None:
        if format not in FORMATS:
            msg = f"format must be one of {', '.join(repr(f) for f in FORMATS)}; got {show(format)}"
            raise ValueError(msg)
        return format
    if where.isdir(path):
        found, _ = _by_format(_list_dir(path))
        if not found:
            _fail(path, "directory holds no data files (.parquet, .feather/.arrow, .npy, .csv "
                        "or .csv.gz)")
        if len(found) > 1:
            kinds = "; ".join(f"{len(fs)} {fmt} ({_some(path, fs)})"
                              for fmt, fs in sorted(found.items()))
            _fail(path, f"directory mixes formats: {kinds}; expected one format (pass format= "
                        "to choose one; the other files are then ignored)")
        return next(iter(found))
    ext = _ext(path)
    if ext not in _EXTENSIONS:
        _fail(path, f"cannot tell the format from the extension {ext!r}; pass format= "
                    f"(one of {', '.join(FORMATS)})")
    return _EXTENSIONS[ext]


def _files_of(path, format):
    """The data files of a file or directory path, for a given format.

    Files of a directory in other formats or with other extensions are not
    read: a ``UserWarning`` names them (names starting with ``.`` or ``_``,
    such as ``_SUCCESS``, are skipped silently as dataset metadata).
    """
    import stat
    import warnings

    if not stat.S_ISDIR(_stat(path).st_mode):
        return [path]
    found, other = _by_format(_list_dir(path))
    files = found.pop(format, [])
    if not files:
        _fail(path, f"directory holds no {format} data files")
    ignored = sorted(other + [f for fs in found.values() for f in fs])
    if ignored:
        what = "1 file that is" if len(ignored) == 1 else f"{len(ignored)} files that are"
        warnings.warn(f"{path}: ignored {what} not {format} data: {_some(path, ignored)}",
                      UserWarning, stacklevel=2)
    if not where.is_url(path):
        for f in files:
            _stat(f)  # a symlink loop or a broken link among them: one line naming it
    return files

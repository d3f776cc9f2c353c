"""The one gate for ``tracking score``: which layout a path holds, read as blocks of rows per filter.

Layouts (see the README's tracking section):

- **long table** (Parquet, Feather / Arrow IPC, CSV, a directory of such files or
  of 1-D ``.npy`` columns): one row per run and step; run id, step id, estimate
  ``x`` (d columns), truth ``t`` (d columns), covariance ``P`` (d*d columns,
  row-major).
- **long table with a filter column** (``filter`` or ``method``, or ``filter=``):
  the same rows for several filters, scored side by side.
- **wide table**: one row per run and step, several filters' estimate and
  covariance columns beside one truth (``estimate={"ekf": "x_ekf_*", ...}``).
- **arrays** (``.npz``, or a directory of ``.npy`` files): estimate and truth
  shaped (runs, steps, d), covariance (runs, steps, d, d); optional ``run`` (runs,)
  and ``step`` (steps,) id arrays. A prefix matching several estimate arrays
  (``x_ekf``, ``x_ukf``) gives one filter per array.

Run and step ids may be integers, floats, strings, bytes or timestamps; they
are mapped to dense codes in the order met and never used as array indices.
Bytes (a binary column, a CSV file that is not UTF-8, an ``S`` array) are
decoded as UTF-8 text; an id that does not decode is an error naming its row.

Files are read through :mod:`fastcal.io`, with every format rule of fastcal's
readers (headers checked against file sizes before anything is allocated, a
CSV file without a final newline noted, ...), in chunks of bounded size.

Column and array patterns: a comma list of names, one name, or a pattern in
which ``*`` stands for any run of characters (``x_*``, ``*_est``, ``x_*_ekf``); a
name that is not a column is read as a prefix (``x_`` is ``x_*``).
"""

import bisect
import os
import re
from typing import Callable, NamedTuple

import numpy as np

from fastcal import io as fio

__all__ = ["Block", "Layout", "open_input", "filter_specs", "resolve_columns", "show_id"]

FILTER_COLUMNS = ("filter", "method")
TABLE_FORMATS = ("parquet", "feather", "csv", "npy")
_EXT = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".feather": "feather",
        ".arrow": "feather", ".ipc": "feather", ".arrows": "feather", ".csv": "csv", ".csv.gz": "csv",
        ".npz": "npz", ".npy": "npy"}


class Block(NamedTuple):
    """Rows of one filter: ids, estimate (n, d), truth (n, d), covariance (n, d, d), first global row."""

    filter: object
    runs: np.ndarray
    steps: np.ndarray
    x: np.ndarray
    t: np.ndarray
    P: np.ndarray
    start: int
    rows: object = None  # positions in the batch when a subset (a filter column's value), else None


class Layout(NamedTuple):
    """What :func:`open_input` found: the layout's name, filters, dimension and how to read it."""

    kind: str
    filters: list
    dim: int
    columns: dict
    blocks: Callable  # blocks(chunk_rows) -> iterator of Block
    where: Callable   # where(global_row) -> "file: row N" or "file: x[r, k]"


def _fail(path, text):
    msg = f"{path}: {text}"
    raise ValueError(msg)


def filter_specs(estimate, cov, *, path):
    """``{filter: (estimate spec, cov spec)}``; the filter is None for a single unnamed one.

    Each of ``estimate`` / ``cov`` is a spec string, a dict ``{filter: spec}``,
    or a list of ``"spec"`` / ``"name=spec"`` strings (the CLI's repeated options).
    """
    est, cv = _as_map("estimate", estimate, path), _as_map("cov", cov, path)
    if list(est) == [None] and list(cv) == [None]:
        return {None: (est[None], cv[None])}
    if set(est) != set(cv) or None in est or None in cv:
        _fail(path, f"--estimate names filters {_names(est)} and --cov {_names(cv)}; expected the same "
                    "filters in both (NAME=SPEC, once per filter)")
    return {k: (est[k], cv[k]) for k in est}


def _names(m):
    return "(none)" if list(m) == [None] else ", ".join(map(str, m))


def _as_map(what, spec, path):
    if isinstance(spec, dict):
        items = list(spec.items())
    else:
        specs = [spec] if isinstance(spec, str) else list(spec or [])
        items = []
        for s in specs:
            if not isinstance(s, str):
                _fail(path, f"--{what} must be a string, got {s!r}")
            name, eq, rest = s.partition("=")
            items.append((name.strip(), rest) if eq else (None, s))
    if not items:
        _fail(path, f"--{what} is empty; expected a column prefix ('x_*'), a comma list or NAME=SPEC")
    if len(items) > 1 and any(k is None for k, _ in items):
        _fail(path, f"--{what} given {len(items)} times without NAME=; expected NAME=SPEC for each filter")
    out = {}
    for k, v in items:
        if k == "" or not isinstance(v, str) or not v.strip():
            _fail(path, f"--{what} {k}={v!r}: expected NAME=SPEC with a non-empty name and spec")
        if k in out:
            _fail(path, f"--{what} names filter {k!r} twice")
        out[k] = v.strip()
    return out


def match_names(spec, names):
    """Names for ``spec``: a comma list (those present), an exact name, or a pattern where
    ``*`` is any run of characters (a name that is not present is a prefix: ``x_`` is ``x_*``)."""
    if "," in spec:
        return [s.strip() for s in spec.split(",") if s.strip() in names]
    if "*" not in spec and spec in names:
        return [spec]
    rx = _pattern(spec)
    return [n for n in names if rx.match(n)]


def _pattern(spec):
    pattern = spec if "*" in spec else spec + "*"
    return re.compile("(.*)".join(re.escape(p) for p in pattern.split("*")) + r"\Z", re.S)


def _tail(spec, name):
    """What the ``*`` of ``spec`` stand for in ``name`` (a filter's name: ``xs_*`` in ``xs_ekf``
    is ``ekf``), underscores at its ends dropped."""
    return "".join(_pattern(spec).match(name).groups()).strip("_")


def resolve_columns(spec, available, *, what, path):
    """Columns named by ``spec``: a comma list, an exact name, or a pattern (see :func:`match_names`)."""
    if not isinstance(spec, str) or not spec.strip():
        msg = f"{path}: --{what} must be a column pattern ('x_*') or a comma list of columns, got {spec!r}"
        raise ValueError(msg)
    spec = spec.strip()
    if "," in spec:
        cols = [c.strip() for c in spec.split(",") if c.strip()]
        missing = [c for c in cols if c not in available]
        if missing:
            msg = (f"{path}: --{what} names missing column(s) {', '.join(map(repr, missing))}; "
                   f"the file has {', '.join(map(repr, available))}")
            raise ValueError(msg)
        return cols
    cols = match_names(spec, available)
    if not cols:
        msg = f"{path}: --{what} {spec!r} matches no column; the file has {', '.join(map(repr, available))}"
        raise ValueError(msg)
    return cols


def _kind_of(path, format):
    if format is not None:
        if format not in TABLE_FORMATS + ("npz",):
            msg = f"format must be one of {', '.join(map(repr, TABLE_FORMATS + ('npz',)))}; got {format!r}"
            raise ValueError(msg)
        return format
    if fio.is_dir(path):
        return fio.detect_format(path)  # one format among the directory's files
    ext = _ext(path)
    if ext not in _EXT:
        _fail(path, f"cannot tell the layout from the extension {ext or '(none)'!r}; expected .parquet, "
                    ".feather/.arrow, .csv, .npz, or a directory of .npy files (or pass --format)")
    return _EXT[ext]


def _ext(name):
    low = name.lower()
    return ".csv.gz" if low.endswith(".csv.gz") else os.path.splitext(low)[1]


def open_input(path, *, run=None, step=None, estimate="x_*", truth="t_*", cov="P_*", filter=None,
               format=None):
    """Decide the layout of ``path`` and return a :class:`Layout` that reads it in blocks.

    Raises
    ------
    ValueError
        One line naming the file, the layout expected and what was found.
    """
    path = os.fspath(path)
    if not fio.exists(path):  # a local path, or a URL's object or prefix
        _fail(path, "no such file or directory")
    kind = _kind_of(path, format)
    specs = filter_specs(estimate, cov, path=path)
    if kind == "npz":
        return _arrays(path, fio.open_arrays(path, "npz"), run, step, specs, truth)
    if kind == "npy":
        if not fio.is_dir(path):
            _fail(path, "a single .npy file holds one array; expected a .npz or a directory of .npy files "
                        "(estimate, truth and covariance arrays, or one 1-D file per table column)")
        arrays = fio.open_arrays(path, "npy")
        if any(len(shape) != 1 for shape in arrays.shapes.values()):
            return _arrays(path, arrays, run, step, specs, truth)
        return _table(path, _ColumnFiles(arrays), run, step, specs, truth, filter)
    return _table(path, fio.open_table(path, kind), run, step, specs, truth, filter)


# -- arrays --------------------------------------------------------------------------------------

class _ColumnFiles:
    """A directory of 1-D ``.npy`` files as a table: one column per file, all of one length."""

    def __init__(self, arrays):
        self.arrays = arrays
        self.columns = list(arrays.shapes)

    def chunks(self, names, chunk_rows, *, any_type=()):
        return self.arrays.chunks(names, chunk_rows)


def _listing(arrays):
    return ", ".join(f"{n} {shape}" for n, shape in arrays.shapes.items()) or "(no arrays)"


_EXPECTED_ARRAYS = "the arrays layout: estimate and truth (runs, steps, d), covariance (runs, steps, d, d)"


def _arrays(path, arrays, run, step, specs, truth):
    """Arrays shaped (runs, steps, d) and (runs, steps, d, d), read a block of runs at a time."""
    shapes = arrays.shapes
    pairs = _array_pairs(path, arrays, specs)
    t_name = _one(path, "truth", truth, list(shapes), arrays, _EXPECTED_ARRAYS)
    t_shape = shapes[t_name]
    if len(t_shape) != 3:
        _fail(path, f"truth array {t_name!r} has shape {t_shape}; expected {_EXPECTED_ARRAYS}")
    R, T, d = t_shape
    for e_name, c_name in pairs.values():
        e_shape, c_shape = shapes[e_name], shapes[c_name]
        if e_shape != (R, T, d) or c_shape != (R, T, d, d):
            _fail(path, f"arrays {e_name!r} {e_shape}, {c_name!r} {c_shape}, {t_name!r} {t_shape}; expected "
                        f"estimate and truth (runs, steps, d) = {(R, T, d)} and covariance {(R, T, d, d)}")
    values = list(dict.fromkeys([t_name] + [n for pair in pairs.values() for n in pair]))
    for name in values:
        if arrays.dtypes[name].kind not in "fiub":
            _fail(path, f"array {name!r} holds {arrays.dtypes[name]} values; expected numbers")
    run_ids = _ids_array(path, "run", run, arrays, R)
    step_ids = _ids_array(path, "step", step, arrays, T)

    def where(row):
        r, k = divmod(int(row), T)
        return f"{path}: [{r}, {k}] of the arrays"

    def blocks(chunk_rows):
        per = max(1, int(chunk_rows) // max(T, 1))  # runs per block
        for ch in arrays.chunks(values, per):
            cols = dict(zip(values, ch.columns))
            r0 = ch.start
            r1 = r0 + len(cols[t_name])
            n = (r1 - r0) * T
            runs = np.repeat(run_ids[r0:r1], T)
            steps = np.tile(step_ids, r1 - r0)
            t = np.asarray(cols[t_name], dtype=np.float64).reshape(n, d)
            for k, (e, c) in pairs.items():
                x = np.asarray(cols[e], dtype=np.float64).reshape(n, d)
                P = np.asarray(cols[c], dtype=np.float64).reshape(n, d, d)
                yield Block(k, runs, steps, x, t, P, r0 * T)

    columns = {"run": run if run in shapes else None, "step": step if step in shapes else None,
               "truth": t_name, "estimate": {k: e for k, (e, _) in pairs.items()},
               "cov": {k: c for k, (_, c) in pairs.items()}}
    if list(pairs) == [None]:
        columns["estimate"], columns["cov"] = pairs[None]
    return Layout("arrays", list(pairs), d, columns, blocks, where)


def _array_pairs(path, arrays, specs):
    """``{filter: (estimate array, covariance array)}``: one unnamed filter, the filters named by
    ``NAME=SPEC``, or one filter per array a pattern matches (named by what its ``*`` stands for)."""
    names = list(arrays.shapes)
    if list(specs) != [None]:
        return {k: (_one(path, "estimate", e, names, arrays, _EXPECTED_ARRAYS),
                    _one(path, "cov", c, names, arrays, _EXPECTED_ARRAYS)) for k, (e, c) in specs.items()}
    est_spec, cov_spec = specs[None]
    est = match_names(est_spec, names)
    if len(est) <= 1:
        return {None: (_one(path, "estimate", est_spec, names, arrays, _EXPECTED_ARRAYS),
                       _one(path, "cov", cov_spec, names, arrays, _EXPECTED_ARRAYS))}
    cvs = match_names(cov_spec, names)
    tails_e = {_tail(est_spec, n): n for n in est}
    tails_c = {_tail(cov_spec, n): n for n in cvs}
    if set(tails_e) != set(tails_c):
        _fail(path, f"--estimate {est_spec!r} matches {', '.join(est)} and --cov {cov_spec!r} matches "
                    f"{', '.join(cvs) or 'nothing'}; expected one covariance per estimate array")
    return {k: (tails_e[k], tails_c[k]) for k in tails_e}


def _one(path, what, spec, names, arrays, expected):
    got = match_names(spec, names)
    if len(got) != 1:
        found = f"matches {', '.join(got)}" if got else "matches no array"
        _fail(path, f"--{what} {spec!r} {found}; the file holds {_listing(arrays)}; expected one array "
                    f"for {expected}")
    return got[0]


def _ids_array(path, what, name, arrays, n):
    explicit = name is not None
    name = what if name is None else name
    if name not in arrays.shapes:
        if explicit:
            _fail(path, f"--{what} {name!r} names no array; the file holds {_listing(arrays)}")
        return np.arange(n)
    shape = arrays.shapes[name]
    if shape != (n,):
        _fail(path, f"--{what} array {name!r} has shape {shape}; expected ({n},), one id per {what}")
    ids = _clean_ids(arrays.read(name), name, lambda i: f"{path}: {name}[{i}]")
    uniq = len(_unique(ids))
    if uniq != n:
        _fail(path, f"--{what} array {name!r} holds {n - uniq} repeated ids; expected one id per {what}")
    return ids


def show_id(v):
    """An id as a report shows it: timestamps as text, numpy scalars as Python ones, 2.0 as 2."""
    if isinstance(v, np.datetime64):
        return str(np.datetime_as_string(v))
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


# -- tables --------------------------------------------------------------------------------------

def _table(path, table, run, step, specs, truth, filter):
    """A long or wide table read through ``table`` (a :class:`fastcal.io.Table`, or
    :class:`_ColumnFiles`): ``columns`` and ``chunks(names, rows, any_type=ids)``."""
    available = table.columns
    run = "run" if run is None else run
    step = "step" if step is None else step
    for name, col in (("run", run), ("step", step)):
        if col not in available:
            _fail(path, f"no {name} column {col!r}; the file has {', '.join(map(repr, available))}; expected "
                        "a long table (one row per run and step) or arrays shaped (runs, steps, d) in a .npz")
    filter = _filter_column(path, available, filter, specs)
    tru = resolve_columns(truth, available, what="truth", path=path)
    d = len(tru)
    groups = _column_groups(path, available, specs, tru)
    ids = list(dict.fromkeys([run, step] + ([filter] if filter else [])))
    names = list(dict.fromkeys(ids + tru + [c for est, cvs in groups.values() for c in est + cvs]))
    if isinstance(table, fio.Table):
        table.check(names, any_type=ids)  # before any row is read: types, duplicate names
    spans = []  # (global start, file, file start) of each chunk, for row messages

    def where(row):
        i = bisect.bisect_right([s[0] for s in spans], int(row)) - 1
        g, f, fs = spans[max(i, 0)]
        return f"{f}: row {fs + int(row) - g}"

    def blocks(chunk_rows):
        spans.clear()
        for ch in table.chunks(names, int(chunk_rows), any_type=ids):
            cols = dict(zip(names, ch.columns))
            n = len(ch.columns[0])
            if n == 0:
                continue
            g = ch.start
            spans.append((g, ch.file, ch.file_start))
            at = lambda i, g=g: where(g + i)  # noqa: E731
            runs, steps = _clean_ids(cols[run], run, at), _clean_ids(cols[step], step, at)
            t = _stack([cols[c] for c in tru], tru, path)
            for k, (est, cvs) in groups.items():
                x = _stack([cols[c] for c in est], est, path)
                P = _stack([cols[c] for c in cvs], cvs, path).reshape(n, d, d)
                if filter is None:
                    yield Block(k, runs, steps, x, t, P, g)
                    continue
                fcol = _clean_ids(cols[filter], filter, at)
                for value in _unique(fcol):
                    m = fcol == value
                    rows = np.flatnonzero(m)
                    yield Block(show_id(value), runs[m], steps[m], x[m], t[m], P[m], g, rows)

    kind, filters, columns = _table_kind(run, step, filter, tru, groups)
    return Layout(kind, filters, d, columns, blocks, where)


def _filter_column(path, available, filter, specs):
    """The column telling the filters apart: the one given, else ``filter`` or ``method`` when
    present and no ``NAME=SPEC`` estimates were given; None for none."""
    if filter is None:
        found = [c for c in FILTER_COLUMNS if c in available]
        filter = found[0] if found and list(specs) == [None] else None
    elif filter not in available:
        _fail(path, f"no filter column {filter!r}; the file has {', '.join(map(repr, available))}")
    if filter is not None and list(specs) != [None]:
        _fail(path, f"a filter column ({filter!r}) and NAME=SPEC estimates were both given; expected one way "
                    "to tell the filters apart")
    return filter


def _column_groups(path, available, specs, tru):
    """``{filter: (estimate columns, covariance columns)}``, d and d*d of them for d truth columns."""
    d = len(tru)
    groups = {}
    for k, (e_spec, c_spec) in specs.items():
        est = resolve_columns(e_spec, available, what="estimate", path=path)
        cvs = resolve_columns(c_spec, available, what="cov", path=path)
        label = "" if k is None else f" of filter {k!r}"
        if len(est) != d:
            _fail(path, f"--estimate{label} has {len(est)} columns ({', '.join(est)}); expected {d}, one per "
                        f"--truth column ({', '.join(tru)})")
        if len(cvs) != d * d:
            _fail(path, f"--cov{label} has {len(cvs)} columns; expected d*d = {d * d} (row-major) for d = {d}")
        groups[k] = (est, cvs)
    return groups


def _table_kind(run, step, filter, tru, groups):
    """The layout's name, its filters (None: known after reading) and the columns it reads."""
    if filter is not None:
        columns = {"run": run, "step": step, "filter": filter, "estimate": groups[None][0],
                   "truth": tru, "cov": groups[None][1]}
        return "long table with a filter column", None, columns
    columns = {"run": run, "step": step, "truth": tru}
    if list(groups) == [None]:
        columns.update(estimate=groups[None][0], cov=groups[None][1])
        return "long table", list(groups), columns
    columns.update(estimate={k: v[0] for k, v in groups.items()}, cov={k: v[1] for k, v in groups.items()})
    return "wide table", list(groups), columns


def _unique(a):
    u = np.unique(a) if a.dtype != object else sorted(set(a.tolist()), key=str)
    return list(u)


def _clean_ids(ids, name, where):
    """The one gate for ids (run, step, filter): present in every row (no null, NaN or NaT),
    bytes decoded as UTF-8 text; ``where(i)`` names row i in a message."""
    ids = np.asarray(ids)
    if ids.dtype.kind == "S":
        ids = ids.astype(object)
    if ids.dtype == object:
        values = ids.tolist()
        bad = np.array([v is None or (isinstance(v, float) and v != v) for v in values], dtype=bool)
        if any(isinstance(v, bytes) for v in values):
            out = np.empty(len(values), dtype=object)
            for i, v in enumerate(values):
                if isinstance(v, bytes):
                    try:
                        v = v.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        msg = (f"{where(i)}: {name} id {v[:40]!r} is not UTF-8 text ({exc.reason} at byte "
                               f"{exc.start}); expected ids that are numbers, timestamps or UTF-8 text")
                        raise ValueError(msg) from None
                out[i] = v
            ids = out
    elif ids.dtype.kind == "f":
        bad = np.isnan(ids)
    elif ids.dtype.kind in "Mm":
        bad = np.isnat(ids)
    else:
        return ids
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"{where(i)}: {name} id is empty (null or NaN) in {int(bad.sum())} rows; expected an id in every row"
        raise ValueError(msg)
    return ids


def _stack(cols, names, path):
    out = np.empty((len(cols[0]), len(cols)), dtype=np.float64)
    for j, c in enumerate(cols):
        if np.ndim(c) != 1:
            msg = f"{path}: column {names[j]!r} holds {np.shape(c)[1:]} values per row; expected one number"
            raise ValueError(msg)
        try:
            out[:, j] = c
        except (ValueError, TypeError):
            msg = f"{path}: column {names[j]!r} holds {np.asarray(c).dtype} values; expected numbers"
            raise ValueError(msg) from None
    return out

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

Run and step ids may be integers, floats, strings or timestamps; they are
mapped to dense codes in the order met and never used as array indices.
"""

import bisect
import os
import zipfile
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["Block", "Layout", "open_input", "filter_specs"]

FILTER_COLUMNS = ("filter", "method")
TABLE_FORMATS = ("parquet", "feather", "csv", "npy")
_EXT = {".parquet": "parquet", ".pq": "parquet", ".feather": "feather", ".arrow": "feather",
        ".ipc": "feather", ".csv": "csv", ".csv.gz": "csv", ".npz": "npz", ".npy": "npy"}


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


def resolve_columns(spec, available, *, what, path):
    """Columns named by ``spec``: a comma list, a prefix ending in ``*``, an exact name, or a prefix."""
    if not isinstance(spec, str) or not spec.strip():
        msg = f"{path}: --{what} must be a column prefix ('x_*') or a comma list of columns, got {spec!r}"
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
    if not spec.endswith("*") and spec in available:
        return [spec]
    prefix = spec.rstrip("*")
    cols = [c for c in available if c.startswith(prefix)]
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
    if os.path.isdir(path):
        exts = {_ext(f) for f in os.listdir(path) if not f.startswith((".", "_"))} & set(_EXT)
        if not exts:
            _fail(path, "directory holds no data files (.parquet, .feather/.arrow, .csv, .npy or .npz)")
        kinds = {_EXT[e] for e in exts}
        if len(kinds) > 1:
            _fail(path, f"directory mixes formats ({', '.join(sorted(kinds))}); expected one (pass --format)")
        return kinds.pop()
    ext = _ext(path)
    if ext not in _EXT:
        _fail(path, f"cannot tell the layout from the extension {ext or '(none)'!r}; expected .parquet, "
                    ".feather/.arrow, .csv, .npz, or a directory of .npy files (or pass --format)")
    return _EXT[ext]


def _ext(name):
    low = name.lower()
    return ".csv.gz" if low.endswith(".csv.gz") else os.path.splitext(low)[1]


def _files(path, kind):
    if not os.path.isdir(path):
        return [path]
    exts = [e for e, k in _EXT.items() if k == kind]
    files = sorted(os.path.join(path, f) for f in os.listdir(path)
                   if not f.startswith((".", "_")) and _ext(f) in exts)
    if not files:
        _fail(path, f"directory holds no {kind} files")
    return files


def open_input(path, *, run=None, step=None, estimate="x_*", truth="t_*", cov="P_*", filter=None,
               format=None):
    """Decide the layout of ``path`` and return a :class:`Layout` that reads it in blocks.

    Raises
    ------
    ValueError
        One line naming the file, the layout expected and what was found.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        _fail(path, "no such file or directory")
    kind = _kind_of(path, format)
    specs = filter_specs(estimate, cov, path=path)
    if kind == "npz":
        return _arrays(path, _npz_arrays(path), run, step, specs, truth)
    if kind == "npy":
        if not os.path.isdir(path):
            _fail(path, "a single .npy file holds one array; expected a .npz or a directory of .npy files "
                        "(estimate, truth and covariance arrays, or one 1-D file per table column)")
        arrays = _npy_arrays(path)
        if any(len(shape) > 1 for shape, _ in arrays.values()):
            return _arrays(path, arrays, run, step, specs, truth)
        return _table(path, "npy", list(arrays), run, step, specs, truth, filter, arrays)
    return _table(path, kind, _table_columns(path, kind), run, step, specs, truth, filter, None)


# -- arrays --------------------------------------------------------------------------------------

def _npz_arrays(path):
    """``{name: (shape, loader)}`` read from the headers, nothing loaded."""
    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with z.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, _ = read(fh)
                name = info.filename[:-4]
                out[name] = (tuple(shape), lambda n=name: _load_npz(path, n))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        _fail(path, f"cannot read as .npz ({exc}); expected a NumPy .npz archive")
    return out


def _load_npz(path, name):
    with np.load(path, allow_pickle=False) as z:
        return z[name]


def _npy_arrays(path):
    out = {}
    for f in _files(path, "npy"):
        try:
            a = np.load(f, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            _fail(f, f"cannot read as .npy ({exc})")
        out[os.path.splitext(os.path.basename(f))[0]] = (a.shape, lambda a=a: a)
    return out


def _match(spec, names):
    """Array names for ``spec``: exact name, comma list, or prefix (ending in ``*`` or not)."""
    if "," in spec:
        return [s.strip() for s in spec.split(",") if s.strip() in names]
    if not spec.endswith("*") and spec in names:
        return [spec]
    prefix = spec.rstrip("*")
    return [n for n in names if n.startswith(prefix)]


def _listing(arrays):
    return ", ".join(f"{n} {shape}" for n, (shape, _) in arrays.items()) or "(no arrays)"


def _arrays(path, arrays, run, step, specs, truth):
    names = list(arrays)
    expected = "the arrays layout: estimate and truth (runs, steps, d), covariance (runs, steps, d, d)"
    if list(specs) == [None]:
        est_spec, cov_spec = specs[None]
        est = _match(est_spec, names)
        if len(est) > 1:  # one filter per matching array, named by what follows the prefix
            cvs = _match(cov_spec, names)
            pre_e, pre_c = est_spec.rstrip("*"), cov_spec.rstrip("*")
            tails_e = {n[len(pre_e):].lstrip("_"): n for n in est}
            tails_c = {n[len(pre_c):].lstrip("_"): n for n in cvs}
            if set(tails_e) != set(tails_c):
                _fail(path, f"--estimate {est_spec!r} matches {', '.join(est)} and --cov {cov_spec!r} matches "
                            f"{', '.join(cvs) or 'nothing'}; expected one covariance per estimate array")
            pairs = {k: (tails_e[k], tails_c[k]) for k in tails_e}
        else:
            pairs = {None: (_one(path, "estimate", est_spec, names, arrays, expected),
                            _one(path, "cov", cov_spec, names, arrays, expected))}
    else:
        pairs = {k: (_one(path, "estimate", e, names, arrays, expected),
                     _one(path, "cov", c, names, arrays, expected)) for k, (e, c) in specs.items()}
    t_name = _one(path, "truth", truth, names, arrays, expected)
    t_shape = arrays[t_name][0]
    if len(t_shape) != 3:
        _fail(path, f"truth array {t_name!r} has shape {t_shape}; expected {expected}")
    R, T, d = t_shape
    for e_name, c_name in pairs.values():
        e_shape, c_shape = arrays[e_name][0], arrays[c_name][0]
        if e_shape != (R, T, d) or c_shape != (R, T, d, d):
            _fail(path, f"arrays {e_name!r} {e_shape}, {c_name!r} {c_shape}, {t_name!r} {t_shape}; expected "
                        f"estimate and truth (runs, steps, d) = {(R, T, d)} and covariance {(R, T, d, d)}")
    run_ids = _ids_array(path, "run", run, arrays, R)
    step_ids = _ids_array(path, "step", step, arrays, T)

    def where(row):
        r, k = divmod(int(row), T)
        return f"{path}: [{r}, {k}] of the arrays"

    def blocks(chunk_rows):
        truth_arr = arrays[t_name][1]()
        per = max(1, int(chunk_rows) // max(T, 1))
        loaded = {k: (arrays[e][1](), arrays[c][1]()) for k, (e, c) in pairs.items()}
        for r0 in range(0, R, per):
            r1 = min(R, r0 + per)
            n = (r1 - r0) * T
            runs = np.repeat(run_ids[r0:r1], T)
            steps = np.tile(step_ids, r1 - r0)
            t = np.asarray(truth_arr[r0:r1], dtype=np.float64).reshape(n, d)
            for k, (ea, ca) in loaded.items():
                x = np.asarray(ea[r0:r1], dtype=np.float64).reshape(n, d)
                P = np.asarray(ca[r0:r1], dtype=np.float64).reshape(n, d, d)
                yield Block(k, runs, steps, x, t, P, r0 * T)

    columns = {"run": run if run in arrays else None, "step": step if step in arrays else None,
               "truth": t_name, "estimate": {k: e for k, (e, _) in pairs.items()},
               "cov": {k: c for k, (_, c) in pairs.items()}}
    if list(pairs) == [None]:
        columns["estimate"], columns["cov"] = pairs[None]
    return Layout("arrays", list(pairs), d, columns, blocks, where)


def _one(path, what, spec, names, arrays, expected):
    got = _match(spec, names)
    if len(got) != 1:
        found = f"matches {', '.join(got)}" if got else "matches no array"
        _fail(path, f"--{what} {spec!r} {found}; the file holds {_listing(arrays)}; expected one array "
                    f"for {expected}")
    return got[0]


def _ids_array(path, what, name, arrays, n):
    explicit = name is not None
    name = what if name is None else name
    if name not in arrays:
        if explicit:
            _fail(path, f"--{what} {name!r} names no array; the file holds {_listing(arrays)}")
        return np.arange(n)
    shape = arrays[name][0]
    if shape != (n,):
        _fail(path, f"--{what} array {name!r} has shape {shape}; expected ({n},), one id per {what}")
    ids = np.asarray(arrays[name][1]())
    if len(np.unique(ids)) != n:
        _fail(path, f"--{what} array {name!r} holds {n - len(np.unique(ids))} repeated ids; expected one "
                    f"id per {what}")
    return ids


def _show(v):
    if isinstance(v, np.datetime64):
        return str(np.datetime_as_string(v))
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


# -- tables --------------------------------------------------------------------------------------

def _table_columns(path, kind):
    f = _files(path, kind)[0]
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return list(pq.ParquetFile(f).schema_arrow.names)
        if kind == "feather":
            import pyarrow as pa

            with pa.memory_map(f) as src:
                return list(pa.ipc.open_file(src).schema.names)
        import pyarrow.csv as pcsv

        with pcsv.open_csv(f) as reader:
            return list(reader.schema.names)
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        text = str(exc).strip().splitlines()
        _fail(f, f"cannot read as {kind} ({text[0] if text else type(exc).__name__})")


def _batches(path, kind, names, chunk_rows, npy):
    """``(file, file_start, {name: numpy array})`` in file order, at most ``chunk_rows`` rows each."""
    chunk_rows = max(1, int(chunk_rows))
    if kind == "npy":
        cols = {n: npy[n][1]() for n in names}
        lengths = {n: len(c) for n, c in cols.items()}
        if len(set(lengths.values())) > 1:
            _fail(path, f"the .npy columns have different lengths ({lengths}); expected one length")
        n = next(iter(lengths.values()))
        for a in range(0, n, chunk_rows):
            yield path, a, {k: np.asarray(c[a:a + chunk_rows]) for k, c in cols.items()}
        return
    import pyarrow as pa

    for f in _files(path, kind):
        start = 0
        try:
            if kind == "parquet":
                import pyarrow.parquet as pq

                it = pq.ParquetFile(f).iter_batches(batch_size=chunk_rows, columns=names)
            elif kind == "feather":
                src = pa.memory_map(f)
                r = pa.ipc.open_file(src)
                it = (r.get_batch(i) for i in range(r.num_record_batches))
            else:
                import pyarrow.csv as pcsv

                it = pcsv.open_csv(f, read_options=pcsv.ReadOptions(block_size=1 << 20))
            for batch in it:
                for a in range(0, batch.num_rows, chunk_rows):
                    part = batch.slice(a, chunk_rows)
                    yield f, start, {n: _numpy(part.column(part.schema.get_field_index(n))) for n in names}
                    start += part.num_rows
        except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
            text = str(exc).strip().splitlines()
            _fail(f, f"cannot read {kind} data near row {start} ({text[0] if text else type(exc).__name__})")


def _numpy(col):
    import pyarrow as pa

    if pa.types.is_floating(col.type) or pa.types.is_integer(col.type):
        return col.to_numpy(zero_copy_only=False).astype(np.float64) if col.null_count else \
            col.to_numpy(zero_copy_only=False)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def _table(path, kind, available, run, step, specs, truth, filter, npy):
    run = "run" if run is None else run
    step = "step" if step is None else step
    for name, col in (("run", run), ("step", step)):
        if col not in available:
            _fail(path, f"no {name} column {col!r}; the file has {', '.join(map(repr, available))}; expected "
                        "a long table (one row per run and step) or arrays shaped (runs, steps, d) in a .npz")
    if filter is None:
        found = [c for c in FILTER_COLUMNS if c in available]
        filter = found[0] if found and list(specs) == [None] else None
    elif filter not in available:
        _fail(path, f"no filter column {filter!r}; the file has {', '.join(map(repr, available))}")
    if filter is not None and list(specs) != [None]:
        _fail(path, f"a filter column ({filter!r}) and NAME=SPEC estimates were both given; expected one way "
                    "to tell the filters apart")
    tru = resolve_columns(truth, available, what="truth", path=path)
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
    names = list(dict.fromkeys([run, step] + ([filter] if filter else []) + tru
                               + [c for est, cvs in groups.values() for c in est + cvs]))
    if npy is not None:
        bad = [n for n in names if len(npy[n][0]) != 1]
        if bad:
            _fail(path, f"column file {bad[0]}.npy has shape {npy[bad[0]][0]}; expected 1-D columns")
    spans = []  # (global start, file, file start) of each batch, for row messages

    def where(row):
        i = bisect.bisect_right([s[0] for s in spans], int(row)) - 1
        g, f, fs = spans[max(i, 0)]
        return f"{f}: row {fs + int(row) - g}"

    def blocks(chunk_rows):
        spans.clear()
        g = 0
        for f, fs, cols in _batches(path, kind, names, chunk_rows, npy):
            n = len(cols[run])
            if n == 0:
                continue
            spans.append((g, f, fs))
            runs, steps = cols[run], cols[step]
            for name, ids in ((run, runs), (step, steps)):
                _check_ids(ids, name, lambda i: where(g + i))
            t = _stack([cols[c] for c in tru], tru, path)
            for k, (est, cvs) in groups.items():
                x = _stack([cols[c] for c in est], est, path)
                P = _stack([cols[c] for c in cvs], cvs, path).reshape(n, d, d)
                if filter is None:
                    yield Block(k, runs, steps, x, t, P, g)
                    continue
                fcol = cols[filter]
                _check_ids(fcol, filter, lambda i: where(g + i))
                for value in _unique(fcol):
                    m = fcol == value
                    rows = np.flatnonzero(m)
                    yield Block(_show(value), runs[m], steps[m], x[m], t[m], P[m], g, rows)
            g += n

    if filter is not None:
        cols_info = {"run": run, "step": step, "filter": filter, "estimate": groups[None][0],
                     "truth": tru, "cov": groups[None][1]}
        kind_name = "long table with a filter column"
        filters = None  # known after reading
    else:
        cols_info = {"run": run, "step": step, "truth": tru}
        if list(groups) == [None]:
            cols_info.update(estimate=groups[None][0], cov=groups[None][1])
            kind_name = "long table"
        else:
            cols_info.update(estimate={k: v[0] for k, v in groups.items()}, cov={k: v[1] for k, v in groups.items()})
            kind_name = "wide table"
        filters = list(groups)
    return Layout(kind_name, filters, d, cols_info, blocks, where)


def _unique(a):
    u = np.unique(a) if a.dtype != object else sorted(set(a.tolist()), key=str)
    return list(u)


def _check_ids(ids, name, where):
    """Ids must be present: no null (None) and no NaN."""
    if ids.dtype == object:
        bad = np.array([v is None or (isinstance(v, float) and v != v) for v in ids.tolist()])
    elif ids.dtype.kind == "f":
        bad = np.isnan(ids)
    elif ids.dtype.kind == "M":
        bad = np.isnat(ids)
    else:
        return
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = f"{where(i)}: {name} id is empty (null or NaN) in {int(bad.sum())} rows; expected an id in every row"
        raise ValueError(msg)


def _stack(cols, names, path):
    out = np.empty((len(cols[0]), len(cols)), dtype=np.float64)
    for j, c in enumerate(cols):
        try:
            out[:, j] = c
        except (ValueError, TypeError):
            msg = f"{path}: column {names[j]!r} holds {np.asarray(c).dtype} values; expected numbers"
            raise ValueError(msg) from None
    return out

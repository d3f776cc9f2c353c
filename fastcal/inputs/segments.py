"""Segment keys: a column (or several) of keys per row, factorized into codes.

``by`` is one array of shape (n,) of any hashable values numpy holds (ints,
floats, bools, strings, dates, objects), or a list/tuple of such arrays (the
intersections: a key is then a tuple). Nulls (None, NaN, NaT, pandas' NA) are
one segment of their own, whose key is ``None``; nothing is dropped. Keys come
back as Python values (``3``, ``'DE'``, ``None``), sorted where they compare
(nulls last), in order of first appearance where they do not.
"""

import math

import numpy as np

from fastcal._kernels import segments as ks
from fastcal._kernels._threads import run_threads, thread_range
from fastcal.messages import show

#: The most segments a segmented score makes unless ``max_segments`` says otherwise
MAX_SEGMENTS = 100_000


class TooManySegments(ValueError):
    """More distinct keys than ``max_segments``: a message about the keys, not a row."""


def _is_null(x):
    if x is None:
        return True
    if isinstance(x, float):
        return math.isnan(x)
    if type(x).__name__ in ("NAType", "NaTType"):  # pandas' NA and NaT
        return True
    try:  # numpy NaN and NaT scalars
        return bool(x != x)
    except (TypeError, ValueError):
        return False


def _as_numpy(col):
    """A key column of pyarrow, pandas or polars as numpy; with nulls, integers stay
    integers (objects, None where null) instead of floats with NaN."""
    if hasattr(col, "to_pylist"):  # pyarrow
        if col.null_count:
            return np.array(col.to_pylist(), dtype=object)
        return col.to_numpy(zero_copy_only=False)
    dtype = getattr(col, "dtype", None)
    if hasattr(col, "to_numpy") and hasattr(col, "index") and not isinstance(dtype, np.dtype):
        return col.to_numpy(dtype=object)  # pandas' nullable, string and category dtypes
    if hasattr(col, "null_count") and hasattr(col, "to_list"):  # polars
        return np.array(col.to_list(), dtype=object) if col.null_count() else col.to_numpy()
    return np.asarray(col)


def check_key_shape(name, shape, n):
    """Refuse a column of keys that is not 1-D, or not of ``n`` rows (None: any)."""
    if len(shape) != 1:
        msg = (f"{name} must be 1-D with one segment key per row; got shape {shape} (for "
               "several key columns pass a list of 1-D columns)")
        raise ValueError(msg)
    if n is not None and shape[0] != n:
        msg = f"{name} has {shape[0]:,} keys; y_prob has {n:,} rows (one segment key per row)"
        raise ValueError(msg)


def key_column(name, col, n):
    """One column of keys as a 1-D numpy array of n rows (pyarrow and pandas too)."""
    arr = col if isinstance(col, np.ndarray) else _as_numpy(col)
    check_key_shape(name, arr.shape, n)
    return arr


def _ranges(n, threads):
    """(threads, ranges): at most ``threads`` threads, each a contiguous range of the n
    rows of at least 2**16 (a smaller range is not worth a thread)."""
    threads = max(1, min(int(threads), n // (1 << 16)))
    return threads, [thread_range(t, n, threads) for t in range(threads)]


def _dense_codes(values, lo, n_values, threads):
    """(codes, keys) of int64 ``values`` in [lo, lo + n_values): a table of the
    values that occur, each row's code its value's rank among them (two passes,
    each in ``threads`` threads over contiguous ranges)."""
    n = values.shape[0]
    threads, ranges = _ranges(n, threads)
    present = np.zeros((threads, n_values), np.uint8)
    run_threads(threads, lambda t: ks.mark_values(values, *ranges[t], lo, present[t]))
    present = present.max(axis=0)
    rank = np.cumsum(present, dtype=np.int64) - present
    codes = np.empty(n, np.int64)
    run_threads(threads, lambda t: ks.value_codes(values, *ranges[t], lo, rank, codes))
    return codes, (np.flatnonzero(present) + lo).tolist()


def _factorize_column(arr, threads=1):
    """(codes int64 of shape (n,), keys as a list of Python values); an integer
    column of a dense range in ``threads`` threads."""
    kind = arr.dtype.kind
    if kind in "iu" and arr.shape[0]:
        lo, hi = int(arr.min()), int(arr.max())
        if hi - lo <= 2 * arr.shape[0] and -2 ** 62 < lo and hi < 2 ** 62:
            # a dense range: a table of the values, no sort
            return _dense_codes(arr.astype(np.int64, copy=False), lo, hi - lo + 1, threads)
    if kind in "biuUS":
        uniq, codes = np.unique(arr, return_inverse=True)
        return codes.reshape(-1).astype(np.int64, copy=False), uniq.tolist()
    if kind in "fcmM":
        null = np.isnan(arr) if kind in "fc" else np.isnat(arr)
        if not null.any():
            uniq, codes = np.unique(arr, return_inverse=True)
            return codes.reshape(-1).astype(np.int64, copy=False), uniq.tolist()
        uniq, inv = np.unique(arr[~null], return_inverse=True)
        codes = np.full(arr.shape[0], uniq.shape[0], np.int64)
        codes[~null] = inv.reshape(-1)
        return codes, [*uniq.tolist(), None]
    # objects: one dict, nulls folded into one key None
    index = {}
    codes = np.empty(arr.shape[0], np.int64)
    for i, x in enumerate(arr.tolist()):
        if _is_null(x):
            x = None
        code = index.get(x)
        if code is None:
            code = index[x] = len(index)
        codes[i] = code
    keys = list(index)
    order = _sorted_order(keys)
    if order is not None:
        remap = np.empty(len(keys), np.int64)
        remap[order] = np.arange(len(keys))
        codes = remap[codes]
        keys = [keys[k] for k in order]
    return codes, keys


def _rank(key):
    """A key's place: its values in order, a null (None) after every other value (in
    each column of a tuple key)."""
    return tuple((x is None, x) for x in (key if isinstance(key, tuple) else (key,)))


def _sorted_order(keys):
    """The order that sorts ``keys`` (None last), or None when they do not compare."""
    order = list(range(len(keys)))
    try:
        order.sort(key=lambda k: _rank(keys[k]))
    except TypeError:
        return None
    return order


def sorted_keys(keys):
    """``keys`` in the order :func:`factorize` gives them (sorted where they compare,
    nulls last in each column; as given where they do not), whatever order they were
    met in: the segments of chunks merged come in the order of one update.

    Examples
    --------
    >>> from fastcal.inputs.segments import sorted_keys
    >>> sorted_keys([None, "b", "a"]), sorted_keys([("b", None), ("b", 1), ("a", 2)])
    (['a', 'b', None], [('a', 2), ('b', 1), ('b', None)])
    """
    keys = list(keys)
    order = _sorted_order(keys)
    return keys if order is None else [keys[k] for k in order]


def is_columns(by):
    """True if ``by`` is a list/tuple of key columns (not one column given as a list)."""
    return isinstance(by, (list, tuple)) and len(by) > 0 and all(
        hasattr(c, "__len__") and not isinstance(c, (str, bytes)) for c in by)


def check_max_segments(max_segments):
    if isinstance(max_segments, bool) or not isinstance(max_segments, (int, np.integer)) \
            or max_segments < 1:
        msg = f"max_segments must be an integer >= 1; got {show(max_segments)}"
        raise ValueError(msg)
    return int(max_segments)


def too_many(count, max_segments, what="by"):
    """The one-line refusal of more segments than ``max_segments``."""
    return (f"{what} has {count:,} distinct segments, more than max_segments={max_segments:,}; "
            "pass a larger max_segments (each segment keeps a state of its own) or coarser keys")


def factorize(by, n=None, *, max_segments=MAX_SEGMENTS, name="by", threads=1):
    """(codes, keys): ``codes[i]`` the segment of row i (int64 in [0, len(keys))),
    ``keys`` the segments' keys (a tuple per key for several columns).

    Refuses, before anything is filled, a ``by`` of another length than ``n``
    rows and more distinct segments than ``max_segments``.

    Examples
    --------
    >>> from fastcal.inputs.segments import factorize
    >>> codes, keys = factorize(["b", "a", None, "b"])
    >>> codes.tolist(), keys
    ([1, 0, 2, 1], ['a', 'b', None])
    >>> factorize([[1, 1, 2], ["x", "y", "x"]])[1]
    [(1, 'x'), (1, 'y'), (2, 'x')]
    """
    max_segments = check_max_segments(max_segments)
    columns = list(by) if is_columns(by) else [by]
    several = is_columns(by)
    arrays = [key_column(name, c, n) for c in columns]
    if n is None:
        n = arrays[0].shape[0]
        for a in arrays[1:]:
            if a.shape[0] != n:
                msg = (f"{name} has columns of different lengths ({arrays[0].shape[0]:,} and "
                       f"{a.shape[0]:,}); one key per row in each")
                raise ValueError(msg)
    parts = [_factorize_column(a, threads) for a in arrays]
    if not several:
        codes, keys = parts[0]
    else:
        sizes = [max(len(k), 1) for _, k in parts]
        if math.prod(sizes) < 2 ** 62:
            combined = np.zeros(n, np.int64)
            for (c, _), size in zip(parts, sizes):
                combined = combined * size + c
            uniq, codes = np.unique(combined, return_inverse=True)
            digits = []
            for size in reversed(sizes):
                digits.append(uniq % size)
                uniq = uniq // size
            digits.reverse()
        else:
            uniq, codes = np.unique(np.stack([c for c, _ in parts], 1), axis=0,
                                    return_inverse=True)
            digits = list(uniq.T)
        codes = codes.reshape(-1).astype(np.int64, copy=False)
        keys = [tuple(k[d] for (_, k), d in zip(parts, ds))
                for ds in zip(*(d.tolist() for d in digits))]
    if len(keys) > max_segments:
        raise TooManySegments(too_many(len(keys), max_segments, name))
    return codes, keys


def slices(codes, n_keys):
    """(order, bounds): the rows of segment k are ``order[bounds[k]:bounds[k + 1]]``,
    in their order (a stable counting sort of the codes, one pass over them)."""
    return ks.stable_order(np.ascontiguousarray(codes, np.int64), int(n_keys))


_GROUPED = (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64))


def grouped(arrays, codes, n_keys, threads=1):
    """(arrays, bounds): each array's rows grouped by segment (None stays None), those
    of segment k at [bounds[k], bounds[k + 1]), in their order. 1-D arrays of the
    gate's dtypes (uint8 labels, float32 or float64) and int64 codes are moved by a counting sort
    in ``threads`` threads (each its contiguous range of rows, written from its
    own offsets: the same order as one thread), others by the order of
    :func:`slices`."""
    codes = np.ascontiguousarray(codes, np.int64)
    n = codes.shape[0]
    threads, ranges = _ranges(n, threads)
    counts = np.zeros((threads, n_keys), np.int64)
    run_threads(threads, lambda t: ks.count_codes(codes, *ranges[t], counts[t]))
    bounds = np.zeros(n_keys + 1, np.int64)
    np.cumsum(counts.sum(axis=0), out=bounds[1:])
    starts = bounds[:-1] + np.cumsum(counts, axis=0) - counts  # thread t's place per code
    moved = [x is not None and x.ndim == 1 and x.dtype in _GROUPED for x in arrays]
    out = [np.empty(x.shape, x.dtype) if m else None for x, m in zip(arrays, moved)]

    def move(t):
        for x, m, dst in zip(arrays, moved, out):
            if m:
                ks.group_rows(x, codes, *ranges[t], starts[t].copy(), dst)

    if any(moved):
        run_threads(threads, move)
    order = None
    for j, (x, m) in enumerate(zip(arrays, moved)):
        if x is not None and not m:
            if order is None:
                order = slices(codes, n_keys)[0]
            out[j] = np.asarray(x)[order]
    return out, bounds


__all__ = ["MAX_SEGMENTS", "TooManySegments", "check_key_shape", "factorize", "grouped", "key_column",
           "slices", "sorted_keys"]

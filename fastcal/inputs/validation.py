"""Argument checks shared by the public functions. Kernels never import this."""

import numbers

import numpy as np

NAN_POLICIES = ("raise", "omit")
CLOSED = ("left", "right")
OBSERVED = ("frac_pos", "accuracy")
STRATEGIES = ("uniform", "quantile")


def check_choice(name, value, allowed):
    """Raise if value is not one of the allowed strings."""
    if value not in allowed:
        msg = f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}"
        raise ValueError(msg)
    return value


def check_n_bins(n_bins):
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral):
        msg = f"n_bins must be an integer >= 1; got {n_bins!r} of type {type(n_bins).__name__}"
        raise ValueError(msg)
    if n_bins < 1:
        msg = f"n_bins must be >= 1; got {n_bins}"
        raise ValueError(msg)
    return int(n_bins)


def check_eps(eps):
    if eps is None:
        return 0.0
    eps = float(eps)
    if not (0.0 <= eps < 0.5):
        msg = f"eps must be in [0, 0.5); got {eps!r}"
        raise ValueError(msg)
    return eps


def check_threads(threads):
    """Number of threads for the parallel kernels (None: numba's current setting)."""
    import numba

    limit = numba.config.NUMBA_NUM_THREADS
    if threads is None:
        return numba.get_num_threads()
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        msg = f"threads must be a positive integer; got {threads!r}"
        raise ValueError(msg)
    if threads > limit:
        msg = f"threads must be at most NUMBA_NUM_THREADS={limit}; got {threads}"
        raise ValueError(msg)
    return int(threads)


def _as_array(name, x):
    """x as a NumPy array: pandas, polars, pyarrow and torch objects without a copy
    where their layout allows (see fastcal.inputs); non-native byte order converted."""
    from fastcal.inputs.convert import to_numpy

    arr = to_numpy(name, x)
    if not arr.dtype.isnative:
        # the kernels read native byte order only (files written on other machines)
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


to_array = _as_array


def as_prob_1d(y_prob):
    """y_prob as a 1-D float32 or float64 array, without a copy when it already is one."""
    p = _as_array("y_prob", y_prob)
    if p.ndim == 2:
        msg = (f"y_prob has shape {p.shape}; this path takes the 1-D probability of class 1 "
               "(the public functions send (N, K) input to the multi-class kernel)")
        raise ValueError(msg)
    if p.ndim != 1:
        msg = f"y_prob must be 1-D with one probability per sample; got shape {p.shape}"
        raise ValueError(msg)
    return float_dtype("y_prob", p)


def as_labels_1d(y_true):
    """y_true as a 1-D numeric array (bool viewed as uint8, no copy)."""
    y = _as_array("y_true", y_true)
    if y.ndim != 1:
        msg = f"y_true must be 1-D with one label per sample; got shape {y.shape}"
        raise ValueError(msg)
    if y.dtype == np.bool_:
        return y.view(np.uint8)
    if y.dtype.kind in "iuf":
        if y.dtype == np.float16:
            return y.astype(np.float32)
        return y
    msg = f"y_true must hold 0/1 labels as bool, integer or float; got dtype {y.dtype}"
    raise ValueError(msg)


def check_pair(y_true, y_prob):
    """Validate and convert one (y_true, y_prob) pair of 1-D arrays."""
    y = as_labels_1d(y_true)
    p = as_prob_1d(y_prob)
    if y.shape[0] != p.shape[0]:
        msg = f"y_true and y_prob have different lengths: {y.shape[0]} and {p.shape[0]}"
        raise ValueError(msg)
    return y, p


def check_edges(edges):
    """Explicit bin edges: 1-D, at least 2, strictly increasing, first 0 and last 1."""
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.shape[0] < 2:
        msg = f"edges must be a 1-D array of at least 2 values; got shape {e.shape}"
        raise ValueError(msg)
    if not np.all(np.isfinite(e)):
        bad = int(np.flatnonzero(~np.isfinite(e))[0])
        msg = f"edges must be finite; edges[{bad}] is {float(e[bad])}"
        raise ValueError(msg)
    steps = np.diff(e)
    if np.any(steps <= 0):
        bad = int(np.flatnonzero(steps <= 0)[0])
        msg = (f"edges must be strictly increasing; edges[{bad}]={float(e[bad])!r} is not below "
               f"edges[{bad + 1}]={float(e[bad + 1])!r}")
        raise ValueError(msg)
    if e[0] != 0.0 or e[-1] != 1.0:
        msg = (f"edges must start at 0 and end at 1 so that every probability has a bin; "
               f"got edges[0]={float(e[0])!r} and edges[-1]={float(e[-1])!r}")
        raise ValueError(msg)
    return e


# -- multi-class input ---------------------------------------------------------

def as_prob_2d(y_prob, logits):
    """(N, K) probabilities or logits as float32/float64, any layout, no copy if possible."""
    p = to_array("y_prob", y_prob)
    if p.ndim != 2:
        msg = f"y_prob must have shape (n_samples, n_classes); got shape {p.shape}"
        raise ValueError(msg)
    if p.shape[1] < 2:
        what = "logits" if logits else "probabilities"
        msg = (f"y_prob has shape {p.shape}: {p.shape[1]} class column; multi-class {what} need "
               "K >= 2 columns (for a binary model pass the 1-D probability of class 1)")
        raise ValueError(msg)
    return float_dtype("y_prob", p)


def float_dtype(name, p):
    if p.dtype in (np.float32, np.float64):
        return p
    if p.dtype == np.float16:
        return p.astype(np.float32)
    if p.dtype.kind in "iub":
        return p.astype(np.float64)
    msg = f"{name} must hold numbers; got dtype {p.dtype}"
    raise ValueError(msg)


def as_class_labels(y_true, n):
    """Class indices as int64 (or float64 when float, so NaN can be seen)."""
    y = to_array("y_true", y_true)
    if y.ndim != 1:
        msg = (f"y_true must be 1-D with one class index per sample; got shape {y.shape} "
               "(2-D y_true means soft labels: use the functions of fastcal.soft)")
        raise ValueError(msg)
    if y.shape[0] != n:
        msg = f"y_true and y_prob have different numbers of rows: {y.shape[0]} and {n}"
        raise ValueError(msg)
    if y.dtype == np.bool_:
        return y.astype(np.int64)
    if y.dtype.kind in "iu":
        return y if y.dtype == np.int64 else y.astype(np.int64)
    if y.dtype.kind == "f":
        return y if y.dtype == np.float64 else y.astype(np.float64)
    msg = f"y_true must hold integer class indices in [0, K); got dtype {y.dtype}"
    raise ValueError(msg)


def check_class_pair(y_true, y_prob, logits):
    """Validated (labels, (n, K) probabilities or logits) of multi-class input."""
    p = as_prob_2d(y_prob, logits)
    y = as_class_labels(y_true, p.shape[0])
    return y, p


def check_soft_pair(y_true, y_prob, logits):
    """Validated (label distributions, (n, K) probabilities or logits) of soft labels."""
    p = as_prob_2d(y_prob, logits)
    t = to_array("y_true", y_true)
    if t.ndim != 2:
        msg = (f"y_true must have shape (n_samples, n_classes) holding label distributions; "
               f"got shape {t.shape}")
        raise ValueError(msg)
    if t.shape != p.shape:
        msg = f"y_true and y_prob must have the same shape; got {t.shape} and {p.shape}"
        raise ValueError(msg)
    return float_dtype("y_true", t), p


def check_n_classes(n_classes):
    if n_classes is None:
        return None
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or n_classes < 2:
        msg = f"n_classes must be an integer >= 2; got {n_classes!r}"
        raise ValueError(msg)
    return int(n_classes)

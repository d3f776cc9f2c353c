"""Argument checks shared by the public functions. Kernels never import this."""

import numbers
import os
import sys

import numpy as np

from fastcal.inputs.convert import to_numpy
from fastcal.messages import show  # noqa: F401 (re-exported: the checks' messages use it)

NAN_POLICIES = ("raise", "omit")
CLOSED = ("left", "right")
OBSERVED = ("frac_pos", "accuracy")
STRATEGIES = ("uniform", "quantile")


def check_choice(name, value, allowed):
    """Raise if value is not one of the allowed strings."""
    if value not in allowed:
        msg = f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {show(value)}"
        raise ValueError(msg)
    return value


#: The most bins of any binning (API and command line alike): the per-thread state
#: and the report grow with the bins.
MAX_BINS = 1_000_000

#: The bins of a report when none are asked for: every function of the API that bins
#: (``n_bins=10``, kept equal to this by tests/commands/test_cli_defaults.py) and both commands
#: (``fastcal score``, the before/after table of ``fastcal recalibrate``).
DEFAULT_N_BINS = 10


def check_n_bins(n_bins):
    """n_bins as an int in [1, MAX_BINS]; one message for the API and the CLI."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral):
        msg = (f"n_bins must be an integer >= 1; got {show(n_bins)} of type "
               f"{type(n_bins).__name__}")
        raise ValueError(msg)
    if n_bins < 1:
        msg = f"n_bins must be >= 1; got {n_bins}"
        raise ValueError(msg)
    if n_bins > MAX_BINS:
        msg = (f"n_bins must be <= {MAX_BINS:,}; got {int(n_bins):,} (the state and the "
               f"report grow with the bins)")
        raise ValueError(msg)
    return int(n_bins)


def check_eps(eps):
    if eps is None:
        return 0.0
    eps = float(eps)
    if not (0.0 <= eps < 0.5):
        msg = f"eps must be in [0, 0.5); got {show(eps)}"
        raise ValueError(msg)
    return eps


def numba_threads():
    """(``NUMBA_NUM_THREADS``, the thread count now): Numba's, read without importing Numba
    while it is not loaded (no one can have set another count then; a report that runs
    ahead-of-time compiled kernels never loads it: fastcal._kernels._aot)."""
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "get_num_threads"):
        return numba.config.NUMBA_NUM_THREADS, numba.get_num_threads()
    if not _THREADS:  # read once, as Numba reads its configuration once, at its import
        try:  # numba.core.config's default: the CPUs this process may run on
            default = max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            default = max(1, os.cpu_count() or 1)
        try:
            limit = int(os.environ.get("NUMBA_NUM_THREADS", default))
        except ValueError:  # Numba warns and takes the default
            limit = default
        _THREADS.append((limit, limit))
    return _THREADS[0]


_THREADS: list = []


def check_threads(threads):
    """Number of threads for the parallel kernels (None: numba's current setting)."""
    limit, current = numba_threads()
    if threads is None:
        return current
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        msg = f"threads must be a positive integer; got {show(threads)}"
        raise ValueError(msg)
    if threads > limit:
        msg = f"threads must be at most NUMBA_NUM_THREADS={limit}; got {threads}"
        raise ValueError(msg)
    return int(threads)


def _as_array(name, x):
    """x as a NumPy array: pandas, polars, pyarrow and torch objects without a copy
    where their layout allows (see fastcal.inputs); non-native byte order converted."""
    arr = to_numpy(name, x)
    if not arr.dtype.isnative:
        # the kernels read native byte order only (files written on other machines)
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


to_array = _as_array


def as_prob_1d(y_prob):
    """y_prob as a 1-D float32 or float64 array, without a copy when it already is one."""
    p = _as_array("y_prob", y_prob)
    check_prob_1d_shape(p.shape)
    return float_dtype("y_prob", p)


def check_prob_1d_shape(shape):
    if len(shape) == 2:
        msg = (f"y_prob has shape {tuple(shape)}; this path takes the 1-D probability of class 1 "
               "(the public functions send (N, K) input to the multi-class kernel)")
        raise ValueError(msg)
    if len(shape) != 1:
        msg = f"y_prob must be 1-D with one probability per sample; got shape {tuple(shape)}"
        raise ValueError(msg)


def as_labels_1d(y_true):
    """y_true as a 1-D array of uint8 (bool viewed, no copy) or float64.

    Labels are read in one of two dtypes, so that the kernels are compiled for
    two label types, not ten (a cast costs far less than a compile): integers of
    any width become uint8, where every value other than 0 and 1 becomes 2 (still
    counted as a bad label, at the same row); floats become float64 (NaN kept).
    """
    y = _as_array("y_true", y_true)
    check_labels_1d_shape(y.shape)
    dtype = label_dtype(y.dtype)
    if dtype.kind == "f":
        return as_dtype(y, np.dtype(np.float64))
    if dtype == np.uint8:
        return as_dtype(y, dtype)
    # one pass: every value other than 0 and 1 becomes 2 (-1 read unsigned is the
    # largest), so wrapped values (256, -1, ...) do not turn into 0/1 (half the time
    # of a cast, a compare and a masked store at 1e7 labels)
    y8 = np.empty(y.shape, np.uint8)
    np.minimum(y.view(f"u{y.dtype.itemsize}"), 2, out=y8, casting="unsafe")
    return kernel_view(y8)


def check_labels_1d_shape(shape):
    if len(shape) != 1:
        msg = f"y_true must be 1-D with one label per sample; got shape {tuple(shape)}"
        raise ValueError(msg)


def label_dtype(dtype):
    """The dtype 0/1 labels (or class indices on the GPU) are read in: bool as uint8
    (a view), float16 as float32, other integers and floats as they are."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.dtype(np.uint8)
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype.kind in "iuf":
        return dtype
    msg = f"y_true must hold 0/1 labels as bool, integer or float; got dtype {dtype}"
    if dtype.kind in "USO":
        msg += "; map text labels such as 'yes'/'no' to 0/1 first (e.g. y == 'yes')"
    raise ValueError(msg)


def as_dtype(x, dtype):
    """x in dtype as the kernels read it (``kernel_view``): a view of itself (bool as
    uint8), or a copy in another dtype or layout."""
    if x.dtype == np.bool_ and dtype == np.uint8:
        return kernel_view(x.view(np.uint8) if x.ndim else x.astype(np.uint8))
    return kernel_view(x if x.dtype == dtype else x.astype(dtype, order="C"))


def kernel_view(x):
    """``x`` as every kernel reads its input: C-contiguous and read-only.

    Numba compiles a kernel once per array type, and the layout (C, Fortran or
    strided) and the write flag are part of the type: a Fortran-ordered
    ``predict_proba``, a strided view or a read-only array (pyarrow, pandas'
    copy-on-write, a memory map) would each compile every kernel they reach
    again, seconds each. So the kernels see one type: a C-contiguous array is
    viewed read-only (no copy; the caller's array keeps its flags), any other
    layout is copied once into C order (and the K-class kernels read a row's
    values next to each other).
    """
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


def check_lengths(y_shape, p_shape):
    if y_shape[0] != p_shape[0]:
        msg = f"y_true and y_prob have different lengths: {y_shape[0]} and {p_shape[0]}"
        raise ValueError(msg)


def check_pair(y_true, y_prob):
    """Validate and convert one (y_true, y_prob) pair of 1-D arrays."""
    y = as_labels_1d(y_true)
    p = as_prob_1d(y_prob)
    check_lengths(y.shape, p.shape)
    return y, p


def prob_range_hint(p):
    """A hint for probabilities outside [0, 1], from the finite values of ``p`` (a
    host array; "" for anything else): in [0, 100] they look like percentages,
    negative ones like logits. Only when at least a tenth of the values lie outside
    [0, 1]: a few stray values are more likely a bug than another scale."""
    if not isinstance(p, np.ndarray) or p.size == 0:
        return ""
    finite = p[np.isfinite(p)]
    if finite.size == 0 or np.count_nonzero((finite < 0.0) | (finite > 1.0)) * 10 < finite.size:
        return ""
    lo, hi = float(finite.min()), float(finite.max())
    if lo >= 0.0 and 1.0 < hi <= 100.0:
        return f"; the values lie in [{lo:.4g}, {hi:.4g}]: percentages? divide them by 100"
    if lo < 0.0:
        return f"; the values lie in [{lo:.4g}, {hi:.4g}]: logits? pass logits=True"
    return ""


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
    check_prob_2d_shape(p.shape, logits)
    return float_dtype("y_prob", p)


def check_prob_2d_shape(shape, logits):
    shape = tuple(shape)
    if len(shape) != 2:
        msg = f"y_prob must have shape (n_samples, n_classes); got shape {shape}"
        raise ValueError(msg)
    if shape[1] < 2:
        what = "logits" if logits else "probabilities"
        msg = (f"y_prob has shape {shape}: {shape[1]} class column; multi-class {what} need "
               "K >= 2 columns (for a binary model pass the 1-D probability of class 1)")
        raise ValueError(msg)


def prob_dtype(name, dtype):
    """The dtype probabilities (or logits) are scored in: float32 and float64 as
    they are, float16 as float32, integers and bool as float64."""
    dtype = np.dtype(dtype)
    if dtype in (np.float32, np.float64):
        return dtype
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype.kind in "iub":
        return np.dtype(np.float64)
    msg = f"{name} must hold numbers; got dtype {dtype}"
    raise ValueError(msg)


def float_dtype(name, p):
    return as_dtype(p, prob_dtype(name, p.dtype))


def as_class_labels(y_true, n, k=None):
    """Class indices as int64, or float64 when float, so that NaN and labels such
    as 1.5 are seen, and named, by the kernels' checks. Float labels that are all
    class indices 0..k-1 (a pandas column, float16 targets) are read as int64:
    the same values, and the kernels the integer labels compiled."""
    y = to_array("y_true", y_true)
    check_class_labels_shape(y.shape, n)
    dtype = class_label_dtype(y.dtype)
    if dtype.kind == "f" and k is not None and _whole_class_indices(y, k):
        dtype = np.dtype(np.int64)
    return as_dtype(y, dtype)


def _whole_class_indices(y, k):
    """Whether float labels are all whole numbers in [0, k) (NaN is not)."""
    if y.size == 0:
        return True
    lo, hi = np.min(y), np.max(y)  # NaN anywhere makes both NaN, and the test False
    return bool(lo >= 0 and hi < k and np.all(np.floor(y) == y))


def check_class_labels_shape(shape, n):
    if len(shape) != 1:
        msg = (f"y_true must be 1-D with one class index per sample; got shape {tuple(shape)} "
               "(2-D y_true means soft labels: use the functions of fastcal.soft)")
        raise ValueError(msg)
    if shape[0] != n:
        msg = f"y_true and y_prob have different numbers of rows: {shape[0]} and {n}"
        raise ValueError(msg)


def class_label_dtype(dtype):
    """The dtype class indices are read in on the CPU: int64, or float64 when float."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iub":
        return np.dtype(np.int64)
    if dtype.kind == "f":
        return np.dtype(np.float64)
    msg = f"y_true must hold integer class indices in [0, K); got dtype {dtype}"
    raise ValueError(msg)


def check_class_pair(y_true, y_prob, logits):
    """Validated (labels, (n, K) probabilities or logits) of multi-class input."""
    p = as_prob_2d(y_prob, logits)
    y = as_class_labels(y_true, p.shape[0], p.shape[1])
    return y, p


def check_soft_pair(y_true, y_prob, logits):
    """Validated (label distributions, (n, K) probabilities or logits) of soft labels."""
    p = as_prob_2d(y_prob, logits)
    t = to_array("y_true", y_true)
    check_soft_shape(t.shape, p.shape)
    return float_dtype("y_true", t), p


def check_soft_labels_shape(t_shape):
    t_shape = tuple(t_shape)
    if len(t_shape) != 2:
        msg = (f"y_true must have shape (n_samples, n_classes) holding label distributions; "
               f"got shape {t_shape}")
        raise ValueError(msg)


def check_soft_shape(t_shape, p_shape):
    t_shape, p_shape = tuple(t_shape), tuple(p_shape)
    check_soft_labels_shape(t_shape)
    if t_shape != p_shape:
        msg = f"y_true and y_prob must have the same shape; got {t_shape} and {p_shape}"
        raise ValueError(msg)


def check_n_classes(n_classes):
    if n_classes is None:
        return None
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or n_classes < 2:
        msg = f"n_classes must be an integer >= 2; got {show(n_classes)}"
        raise ValueError(msg)
    return int(n_classes)


def check_sample_weight(sample_weight, n, name="sample_weight", start=0):
    """``sample_weight`` as a 1-D float64 array of ``n`` finite weights >= 0, not all
    0 (None stays None); every bad value is refused in one line naming the argument,
    the count and the first index (counted from ``start``, the global row of the
    first weight)."""
    if sample_weight is None:
        return None
    w = _as_array(name, sample_weight)
    if w.ndim != 1:
        msg = f"{name} must be 1-D with one weight per sample; got shape {tuple(w.shape)}"
        raise ValueError(msg)
    if w.shape[0] != n:
        msg = f"{name} has {w.shape[0]} weights; y_prob has {n} rows (one weight per row)"
        raise ValueError(msg)
    if w.dtype.kind not in "biuf":
        msg = f"{name} must hold numbers; got dtype {w.dtype}"
        raise ValueError(msg)
    w = np.ascontiguousarray(w, dtype=np.float64)
    for bad, what in ((np.isnan(w), "NaN"), (np.isinf(w), "infinite"), (w < 0, "negative")):
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            msg = (f"{name} has {int(bad.sum())} {what} values (first at index "
                   f"{first + start}: {show(w[first])}); weights must be finite and >= 0")
            raise ValueError(msg)
    if n and not (w > 0).any():
        msg = f"{name} is 0 in all {n} rows; at least one weight must be > 0"
        raise ValueError(msg)
    return w

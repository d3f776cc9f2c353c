"""State layouts: each kind's arrays, declared once.

A fill (:mod:`fastcal.backends`) returns one chunk's state as named arrays,
and an accumulator (:mod:`fastcal.accumulators`) keeps the sum of them. What
those arrays are is written here, one table per kind of state (``LAYOUTS``),
in the manner of torchmetrics' ``add_state``: each :class:`Array` gives

- ``name`` and ``dtype`` (counts int64, sums float64);
- ``shape``, a function of the state's :class:`Dims` (``n_bins``, the
  classes K, ``n_boot``, ``ace_buckets``, the smooth ECE grid, ECCE's
  buckets, the groups of a Gaussian state), never of the data;
- ``reduce``: how two states (or two chunks) combine: ``"sum"`` element by
  element, or ``"first"`` for a fill's checks (counts add, each kind's first
  row is the least of both, counted from the chunk's offset);
- ``values``: what the array may hold, checked when arrays come from outside
  (``add_arrays``): ``"counts"`` >= 0, ``"sums"`` finite (``inf``: the
  entries, sums of logarithm terms, that may be +inf when some p is exactly
  0 or 1 on the wrong side), ``"nan-sums"`` finite or NaN (a Gaussian
  group with a NaN row under ``nan_policy="propagate"``);
- ``part``: the :class:`Dims` field that switches the array on (bootstrap
  replicates, ACE's buckets, the smooth ECE grid, ECCE's buckets,
  class-wise counters, the weighted sums of rows with a ``sample_weight``);
  an array that is off keeps its (empty) shape and is left out of
  ``to_arrays``;
- ``store``: how the state keeps it: ``"array"`` (the attribute is the
  array), ``"int"`` (a Python int, 0-d in ``to_arrays``: the rows read and
  omitted) or ``"width"`` (the float width whose rounding the uniform edges
  use, a name of ``EDGE_DTYPES`` or None; in ``to_arrays`` one int64 per
  width, 1 where the state's data had it).

Copying, merging, ``to_arrays`` / ``add_arrays`` and their checks, and
loading states pickled with other attributes all follow from these tables.
"""

from dataclasses import dataclass

import numpy as np

from fastcal._kernels import binary as kb
from fastcal._kernels import ecce as kec
from fastcal._kernels import multiclass as km
from fastcal._kernels import smooth as ksm
from fastcal._kernels import soft as ks
from fastcal._kernels import weighted as kw

REDUCTIONS = ("sum", "first")
VALUES = ("counts", "sums", "nan-sums")
STORES = ("array", "int", "width")

# The float widths whose rounding of k / n_bins uniform edges may use (a binned state's
# edge_dtype, fixed by its first update).
EDGE_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Dims:
    """What the shapes of a state's arrays depend on (its options and K)."""

    n_bins: int = 0
    n_classes: int | None = None  # None: not known yet (K classes before the first batch)
    n_boot: int = 0
    ace_buckets: int = 0
    smooth: bool = False
    classwise: bool = False
    ecce: bool = False
    groups: tuple = ()  # the group shape of a Gaussian state
    weighted: bool = False

    @classmethod
    def of(cls, spec, n_classes=None):
        """The dims of a binned state of ``spec`` (a FillSpec) with K = ``n_classes``."""
        return cls(spec.n_bins, n_classes, spec.n_boot, spec.ace_buckets, spec.smooth,
                   spec.classwise, spec.ecce, weighted=spec.weighted)


@dataclass(frozen=True)
class Array:
    """One array of a state: see the module's docstring."""

    name: str
    shape: object  # Dims -> tuple, or None while the shape is not known
    dtype: object
    reduce: str = "sum"
    values: str = "counts"
    inf: object = None
    part: str | None = None
    store: str = "array"

    def on(self, dims):
        """True if this array is part of a state of ``dims``."""
        return self.part is None or bool(getattr(dims, self.part))

    def zeros(self, dims):
        """A zeroed array of ``dims`` (None while its shape is not known)."""
        shape = self.shape(dims)
        return None if shape is None else np.zeros(shape, self.dtype)

    def bad(self, x):
        """(mask of bad entries, what they are, what is expected) under the value rule."""
        if self.values == "counts":
            return x < 0, "negative", "counts are >= 0"
        if self.values == "nan-sums":
            return np.isinf(x), "infinite", "sums are finite or NaN"
        bad, expected = ~np.isfinite(x), "sums are finite"
        if self.inf is not None:
            inf = np.zeros(x.shape, bool)
            inf[self.inf] = True
            bad &= ~(inf & (x == np.inf))
            expected += " (those of logarithm terms may be +inf)"
        return bad, "NaN or infinite", expected

    def check(self, x):
        """Refuse values this array never holds, in one line naming it."""
        bad, found, expected = self.bad(x)
        if not bad.any():
            return
        if x.ndim == 0:
            msg = f"arrays[{self.name!r}] is {x.item()!r}; row counts are >= 0"
            raise ValueError(msg)
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        where = first[0] if len(first) == 1 else first
        msg = (f"arrays[{self.name!r}] has {int(bad.sum())} {found} values (first at index "
               f"{where}: {x[first].item()!r}); {expected}")
        raise ValueError(msg)


def _bins(d, width):
    return (d.n_bins + 1, width)


def _classes(*tail):
    # class-wise counters: K x n_bins (x 2), unknown until K is
    return lambda d: None if d.n_classes is None else (d.n_classes if d.classwise else 0,
                                                        d.n_bins, *tail)


_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)

# per bin (and a trash row for invalid rows): rows, positives, correct labels; the sums of
# p, of the ECD terms (+inf on a certain wrong prediction) and of their variance; the
# totals (Brier, NLL, squared ECD, ...; NLL and the squares of logarithms may be +inf)
PER_BIN = (
    Array("counts", lambda d: _bins(d, kb.N_COUNTS), _I64),
    Array("sums", lambda d: _bins(d, kb.N_SUMS), _F64, values="sums", inf=np.s_[:, 1]),
    Array("totals", lambda d: (kb.N_TOTALS,), _F64, values="sums", inf=np.s_[[1, 2, 4]]),
)
# the parts a checked chunk also fills: bootstrap replicates of the per-bin counts and sums
# of p, ACE's value buckets (rows, positives, correct; sum of x), the smooth ECE grid
PARTS = (
    Array("boot_counts", lambda d: (d.n_boot, d.n_bins, kb.N_COUNTS), _I64, part="n_boot"),
    Array("boot_sums", lambda d: (d.n_boot, d.n_bins), _F64, values="sums", part="n_boot"),
    Array("fine_counts", lambda d: (d.ace_buckets + 1 if d.ace_buckets else 0, kb.N_COUNTS),
          _I64, part="ace_buckets"),
    Array("fine_p", lambda d: (d.ace_buckets + 1 if d.ace_buckets else 0,), _F64,
          values="sums", part="ace_buckets"),
    Array("smooth_mass", lambda d: (ksm.GRID + 1 if d.smooth else 0,), _F64, values="sums",
          part="smooth"),
    Array("smooth_resid", lambda d: (ksm.GRID + 1 if d.smooth else 0,), _F64, values="sums",
          part="smooth"),
    Array("smooth_n", lambda d: (1 if d.smooth else 0,), _I64, part="smooth"),
    # ECCE's value buckets: rows, the sums of y (1 - x), (1 - y) x and y - x; the sums of
    # the weights and of the variance terms (fastcal.accumulators.ecce)
    Array("ecce_counts", lambda d: (kec.BUCKETS + 1 if d.ecce else 0,), _I64, part="ecce"),
    Array("ecce_sums", lambda d: (kec.BUCKETS + 1 if d.ecce else 0, 3), _F64, values="sums",
          part="ecce"),
    Array("ecce_totals", lambda d: (2 if d.ecce else 0,), _F64, values="sums", part="ecce"),
)
# K classes: per class and bin, rows and rows of that class; the sums of p_k
CLASSWISE = (
    Array("class_counts", _classes(2), _I64, part="classwise"),
    Array("class_sums", _classes(), _F64, values="sums", part="classwise"),
)
# rows with a sample_weight: per bin the sums of w, of w over positives and correct labels,
# of w p, w T (+inf on a certain wrong prediction), w V and w**2; the weighted totals; K
# classes, class-wise, the sums of w, w 1[y = k] and w p_k (fastcal._kernels.weighted)
WEIGHTED = (
    Array("wsums", lambda d: (d.n_bins + 1 if d.weighted else 0, kw.N_WSUMS), _F64,
          values="sums", inf=np.s_[:, 4], part="weighted"),
    Array("wtotals", lambda d: (kw.N_WTOTALS if d.weighted else 0,), _F64, values="sums",
          inf=np.s_[[1, 2, 4]], part="weighted"),
    # bootstrap replicates of weighted rows (Poisson(1) times w): the sums of the
    # multiplied weights, over positives and correct labels, and of them times p
    Array("wboot_counts", lambda d: (d.n_boot if d.weighted else 0, d.n_bins, kb.N_COUNTS),
          _F64, values="sums", part="weighted"),
    Array("wboot_sums", lambda d: (d.n_boot if d.weighted else 0, d.n_bins), _F64,
          values="sums", part="weighted"),
)
WCLASS = Array("wclass", lambda d: None if d.n_classes is None else (
    d.n_classes if d.classwise and d.weighted else 0, d.n_bins, kw.N_WCLASS), _F64,
    values="sums", part="weighted")
# the rows a state was given, omitted ones included, and those omitted (Python ints)
ROWS = (Array("n_rows", lambda d: (), _I64, store="int"),
        Array("n_omitted", lambda d: (), _I64, store="int"))
# the float width of a binned state's data (uniform edges are rounded to it)
WIDTH = Array("edge_dtype", lambda d: (len(EDGE_DTYPES),), _I64, store="width")
BINNED = PER_BIN + PARTS

#: The arrays of each kind of state.
LAYOUTS = {
    "binary": BINNED + WEIGHTED + ROWS + (WIDTH,),
    "logits": BINNED + WEIGHTED + ROWS + (WIDTH,),
    "multiclass": BINNED + CLASSWISE + WEIGHTED + (WCLASS,) + ROWS + (WIDTH,),
    "soft": (Array("totals", lambda d: (ks.N_SOFT,), _F64, values="sums"),) + ROWS,
    "gaussian": (Array("count", lambda d: d.groups, _I64),
                 Array("nees_sum", lambda d: d.groups, _F64, values="nan-sums")),
}

#: What a fill returns beside its state: the counts of each kind of invalid row and the
#: first of them (-1: none), as :mod:`fastcal.accumulators.checks` reads them.
CHECKS = {kind: Array("checks", lambda d, n=n: (2 * n,), _I64, reduce="first")
          for kind, n in (("binary", kb.N_CHECK_KINDS), ("logits", kb.N_CHECK_KINDS),
                          ("multiclass", km.N_CHECK_KINDS), ("soft", km.N_CHECK_KINDS))}


def new_checks(kind):
    """The checks of a fill that met no invalid row."""
    n = CHECKS[kind].shape(None)[0] // 2
    checks = np.full(2 * n, -1, np.int64)
    checks[:n] = 0
    return checks


def add_checks(checks, part, offset=0):
    """Merge ``part`` (a chunk's checks, first rows counted from ``offset``) into
    ``checks``: counts add, each kind's first row is the least."""
    n = checks.shape[0] // 2
    checks[:n] += part[:n]
    first = np.where(part[n:] >= 0, part[n:] + offset, -1)
    mine = checks[n:]
    take = (first >= 0) & ((mine < 0) | (first < mine))
    mine[take] = first[take]


#: What a fill of each kind returns: its state's arrays (those it fills) and its checks.
FILLED = {kind: LAYOUTS[kind] + (CHECKS[kind],) for kind in CHECKS}


def add(total, chunk, arrays, offset=0):
    """Add the arrays of ``chunk`` (a dict) into ``total`` (a dict holding the same
    names), each by its reduction in ``arrays`` (a layout): "sum" element by
    element, "first" as :func:`add_checks` with first rows counted from ``offset``."""
    for a in arrays:
        if a.name not in chunk:
            continue
        if a.reduce == "first":
            add_checks(total[a.name], chunk[a.name], offset)
        else:
            total[a.name] += chunk[a.name]
    return total

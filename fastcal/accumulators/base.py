"""What the accumulators share: the merge protocol, the bins, and two parts.

Every accumulator is :class:`Mergeable`: ``a + b``, ``a += b``, ``sum(...)``
(``0 + a`` is a copy of ``a``) and ``copy()``, over two methods of its own:
``_check_compatible(other)`` (a clear error when the states cannot merge)
and ``_add(other)``. The binned ones (binary, multi-class) are
:class:`Binned` and may carry two parts, each mergeable on its own:
:class:`Bootstrap` replicates for the ECE/ESCE/MCE intervals and
:class:`ValueBuckets`, the statistics that ACE is read from.
"""

from typing import Protocol, runtime_checkable

import numpy as np

from fastcal import backends
from fastcal.inputs import validation as v
from fastcal.inputs.batch import resolve
from fastcal.inputs.binning import Bins
from fastcal.accumulators import checks as ck
from fastcal._kernels import binary as kb
from fastcal._kernels import bootstrap as kboot
from fastcal._kernels import equal_mass as kem
from fastcal.inputs.validation import show

# Below this many bootstrap draws (rows x replicates) the bootstrap fill runs serially.
_PARALLEL_MIN_DRAWS = 5_000_000

# The float widths whose rounding of k / n_bins uniform edges may use (Binned.edge_dtype).
EDGE_DTYPES = ("float32", "float64")

# What the arrays of Binned.to_arrays() may hold (add_arrays checks it): the int64 ones
# count rows, >= 0; the float64 ones are sums, finite except the sums of logarithm terms
# (in the kernels' layout: sums[:, 1] the ECD terms, totals[1, 2, 4] NLL, squared ECD,
# squared NLL), which are +inf when some p is exactly 0 or 1 on the wrong side.
_MAY_BE_INF = {"sums": np.s_[:, 1], "totals": np.s_[[1, 2, 4]]}


@runtime_checkable
class Accumulator(Protocol):
    """What every state offers (``tests/test_seam.py`` checks each class): filled
    batch by batch through its backend, merged by ``+`` (and ``+=``, ``sum()``),
    copied, pickled, and read by ``report()``."""

    def update_batch(self, batch):
        """Add a batch resolved at the gate; the state is unchanged on error."""

    def report(self):
        """The report of everything added so far."""

    def copy(self):
        """An independent copy."""

    def __add__(self, other):
        """The merged state of both (``other`` unchanged)."""


class Mergeable:
    """The merge protocol over ``_check_compatible`` and ``_add``.

    ``_adds``: the names of the arrays a merge adds element by element; the
    default ``_add`` adds them (a state with more to merge overrides it).
    """

    _adds = ()

    def __iadd__(self, other):
        self._check_compatible(other)
        self._add(other)
        return self

    def __add__(self, other):
        self._check_compatible(other)
        out = self.copy()
        out._add(other)
        return out

    def __radd__(self, other):
        """``0 + acc`` is a copy of acc, so that ``sum(accumulators)`` works."""
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool) and other == 0:
            return self.copy()
        return NotImplemented

    def copy(self):
        """An independent copy: state arrays and parts are copied, settings shared."""
        out = type(self).__new__(type(self))
        out.__dict__.update({k: _copied(x) for k, x in self.__dict__.items()})
        return out

    def _add(self, other):
        for name in self._adds:
            total = getattr(self, name)
            total += getattr(other, name)  # in place: the arrays are the state

    def _check_type(self, other, name):
        if type(other) is not type(self):
            msg = f"can only merge a {name} into this one; got {type(other).__name__}"
            raise TypeError(msg)


def _copied(x):
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, Mergeable):
        return x.copy()
    return x


def _check_values(name, x):
    """Refuse values that no state's array ``name`` of :meth:`Binned.to_arrays` holds."""
    if x.dtype.kind == "i":
        bad, found, expected = x < 0, "negative", "counts are >= 0"
    else:
        bad, found, expected = ~np.isfinite(x), "NaN or infinite", "sums are finite"
        if name in _MAY_BE_INF:
            inf = np.zeros(x.shape, bool)
            inf[_MAY_BE_INF[name]] = True
            bad &= ~(inf & (x == np.inf))
            expected += " (those of logarithm terms may be +inf)"
    if not bad.any():
        return
    if x.ndim == 0:
        msg = f"arrays[{name!r}] is {x.item()!r}; row counts are >= 0"
        raise ValueError(msg)
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    where = first[0] if len(first) == 1 else first
    msg = (f"arrays[{name!r}] has {int(bad.sum())} {found} values (first at index {where}: "
           f"{x[first].item()!r}); {expected}")
    raise ValueError(msg)


def check_start(start):
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
        msg = (f"start must be an integer >= 0 (the global index of the chunk's first row); "
               f"got {show(start)}")
        raise ValueError(msg)
    return int(start)


class Binned(Mergeable):
    """Bins on [0, 1] (``bins``, a :class:`~fastcal.inputs.binning.Bins`: uniform
    ``n_bins`` or explicit ``edges``, the closed side), ``eps`` of the
    logarithms, ``nan_policy`` and the float width whose rounding of k / n_bins
    the uniform edges use (fixed by the first update).

    ``computed64``: the values binned are computed in float64 (sigmoid,
    softmax, renormalised rows), so every input width shares float64 edges.
    """

    def _init_binned(self, settings, computed64):
        """The bins, options and parts every binned state takes from ``settings``
        (a :class:`~fastcal.accumulators.settings.Settings`, checked when made)."""
        self.bins = settings.bins
        self.nan_policy = settings.nan_policy
        self.eps = settings.eps
        self.threads = settings.threads
        self.with_logs = settings.with_logs  # False: binned metrics only (no logarithms)
        self.computed64 = bool(computed64)
        self.edge_dtype = None
        self.n_omitted = 0
        self.n_rows = 0  # rows passed to update, omitted ones included
        self.boot = Bootstrap(settings.n_boot, settings.seed, self.bins.n_bins)
        self.buckets = ValueBuckets(settings.ace_buckets)

    # the bins, read as the state's own
    @property
    def n_bins(self):
        return self.bins.n_bins

    @property
    def edges(self):
        return self.bins.edges

    @property
    def closed(self):
        return self.bins.closed

    def kernel_edges(self, dtype):
        """(edges, uniform) as the kernels take them for data of ``dtype``."""
        return self.bins.kernel_edges(np.float64 if self.computed64 else dtype)

    def __setstate__(self, state):
        # a state pickled before the bins were one value held n_bins, edges and closed
        if "bins" not in state:
            state = dict(state)
            state["bins"] = Bins(state.pop("n_bins"), state.pop("edges"), state.pop("closed"))
        self.__dict__.update(state)

    def report_edges(self):
        """Bin edges as float64 (uniform: k / n_bins)."""
        return self.bins.report_edges()

    def _fix_dtype(self, dtype):
        """Fix the dtype whose rounding of k / n_bins the uniform edges use: the
        first update's. A later chunk of another float width would bin by other
        edges (0.3 is not float32(0.3)), so it is refused, not mixed in."""
        if self.edges is not None or self.computed64:
            return
        name = np.dtype(dtype).name if np.dtype(dtype).kind == "f" else "float64"
        if self.edge_dtype is None:
            self.edge_dtype = name
        elif name != self.edge_dtype:
            msg = (f"y_prob is {name} but this accumulator holds {self.edge_dtype} data, binned "
                   f"by {self.edge_dtype} edges; cast every chunk to one dtype (e.g. "
                   "astype('float64')) so that all rows share the same bins")
            raise ValueError(msg)

    def update(self, y_true, y_prob, *, start=None, device=None):
        """Add one chunk of labels and predictions (K-class state: labels (n,) and
        (n, K) rows); returns self (see :meth:`fastcal.CalibrationAccumulator.update`)."""
        batch = resolve(y_true, y_prob, logits=self.logits,
                        multiclass=self.kind == "multiclass", device=device)
        return self.update_batch(batch, start=start)

    def update_batch(self, batch, *, start=None):
        """``update`` with a batch resolved by :func:`fastcal.inputs.batch.resolve`:
        its backend fills the chunk; the state is left unchanged on invalid input."""
        self._check_batch(batch)
        row0 = self.n_rows if start is None else check_start(start)
        if batch.n:  # an empty chunk bins nothing: it leaves the float width open
            self._fix_dtype(batch.dtype)
        backend = backends.of(batch)
        state = backend.fill(self, batch)
        checks = state[self.checks_at]
        ck.raise_for(self.checks, checks, self.nan_policy, row0, **batch.context())
        backend.fill_parts(self, batch, row0, state)
        self._add_state(state, batch)
        self.n_omitted += ck.omitted(self.checks, checks)
        self.n_rows += batch.n
        return self

    def _check_bins(self, other):
        if self.bins != other.bins or self.eps != other.eps:
            msg = ("cannot merge accumulators with different bins, closed side or eps: "
                   f"{self!r} and {other!r}")
            raise ValueError(msg)
        if None not in (self.edge_dtype, other.edge_dtype) and \
                self.edge_dtype != other.edge_dtype:
            msg = (f"cannot merge accumulators of {self.edge_dtype} and {other.edge_dtype} data: "
                   "their uniform bins have different edges; cast to one dtype")
            raise ValueError(msg)

    def _check_binned(self, other):
        """What every binned state checks before a merge: bins and both parts."""
        self._check_bins(other)
        self.buckets._check_compatible(other.buckets)
        self.boot._check_compatible(other.boot)
        self.grid._check_compatible(other.grid)

    def _add_binned(self, other):
        """Add the per-bin state, both parts and the row counts of ``other``."""
        self._add_bin_sums(other.counts, other.sums, other.totals)
        self.boot._add(other.boot)
        self.buckets._add(other.buckets)
        self.grid._add(other.grid)
        self.edge_dtype = self.edge_dtype or other.edge_dtype
        self.n_omitted += other.n_omitted
        self.n_rows += other.n_rows

    def _add_bin_sums(self, counts, sums, totals):
        """Add per-bin counts and sums and the totals (of a chunk or of another state)."""
        self.counts += counts
        self.sums += sums
        self.totals += totals

    def _add_ranked(self, y, x, row0, dtype):
        """ACE's buckets, the bootstrap replicates and the smooth ECE grid of ranked
        host rows (labels 0/1, values x in [0, 1]) whose input had ``dtype``."""
        self.buckets.add_ranked(y, x, self.nan_policy == "omit")
        self.grid.fill(y, x, self.threads)
        edges, uniform = self.kernel_edges(dtype)
        self.boot.fill(y, x, row0, edges, uniform, self.bins.right, self.threads)

    # -- the state as named arrays (for frameworks that reduce tensors by "sum") --

    def to_arrays(self):
        """The state as named arrays that merge by addition; copies.

        Summing ``a.to_arrays()`` and ``b.to_arrays()`` name by name gives
        ``(a + b).to_arrays()``, so a framework that reduces tensors by sum
        (``torch.distributed``, torchmetrics' ``dist_reduce_fx="sum"``) merges
        states exactly; :meth:`add_arrays` reads them back. Counts are int64,
        sums float64; ``n_rows`` and ``n_omitted`` are 0-d int64, and
        ``edge_dtype`` holds one int64 per float width the uniform edges may
        round to (``EDGE_DTYPES``), 1 where this state's data had that width
        (summed, it counts the states per width: nonzero where one was seen).
        Parts that are off (``n_boot=0``, ``ace_buckets=0``) are left out. The
        names and shapes depend only on the options, never on the data.
        """
        out = {name: np.array(x, copy=True) for name, x in self._summed().items()}
        out["n_rows"] = np.array(self.n_rows, np.int64)
        out["n_omitted"] = np.array(self.n_omitted, np.int64)
        width = np.zeros(len(EDGE_DTYPES), np.int64)
        if self.edge_dtype is not None:
            width[EDGE_DTYPES.index(self.edge_dtype)] = 1
        out["edge_dtype"] = width
        return out

    def add_arrays(self, arrays):
        """Add arrays of :meth:`to_arrays` (a state with the same options, or a
        sum of such) to this state; returns self.

        Raises
        ------
        ValueError
            A name missing or extra, a shape or dtype other than this state's,
            a value no state holds (a negative count or row count, a NaN or
            infinite sum: only the sums of logarithm terms may be +inf), a
            row count other than the rows counted and omitted, or data of two
            float widths (their uniform bins differ). The state is unchanged
            on error.
        """
        mine = self._summed()
        expected = {**{k: (x.shape, x.dtype) for k, x in mine.items()},
                    "n_rows": ((), np.dtype(np.int64)), "n_omitted": ((), np.dtype(np.int64)),
                    "edge_dtype": ((len(EDGE_DTYPES),), np.dtype(np.int64))}
        if set(arrays) != set(expected):
            msg = (f"arrays must have the names {sorted(expected)} of this state's to_arrays(); "
                   f"got {sorted(arrays)}")
            raise ValueError(msg)
        got = {k: np.asarray(x) for k, x in arrays.items()}
        for name, (shape, dtype) in expected.items():
            if got[name].shape != shape or got[name].dtype != dtype:
                msg = (f"arrays[{name!r}] has shape {got[name].shape} and dtype {got[name].dtype}; "
                       f"this state's has shape {shape} and dtype {dtype}")
                raise ValueError(msg)
        for name in expected:
            _check_values(name, got[name])
        n = int(got["counts"][: self.n_bins, 0].sum())
        if int(got["n_rows"]) != n + int(got["n_omitted"]):
            msg = (f"arrays['n_rows'] is {int(got['n_rows'])} but arrays['counts'] holds {n} "
                   f"rows and arrays['n_omitted'] {int(got['n_omitted'])}; the rows of a state "
                   "are those counted and those omitted")
            raise ValueError(msg)
        widths = [EDGE_DTYPES[i] for i in np.flatnonzero(got["edge_dtype"])]
        if self.edge_dtype is not None and self.edge_dtype not in widths:
            widths.insert(0, self.edge_dtype)
        if len(widths) > 1:
            msg = (f"cannot add arrays of {' and '.join(widths)} data: their uniform bins have "
                   "different edges; cast every chunk to one dtype")
            raise ValueError(msg)
        for name, x in mine.items():
            x += got[name]
        self.n_rows += int(got["n_rows"])
        self.n_omitted += int(got["n_omitted"])
        self.edge_dtype = widths[0] if widths else None
        return self

    def _summed(self):
        """The state's own summed arrays by name (views: adding to them adds to the state)."""
        out = {"counts": self.counts, "sums": self.sums, "totals": self.totals}
        if self.boot.n_boot:
            out.update(boot_counts=self.boot.counts, boot_sums=self.boot.sums)
        if self.buckets.n_buckets:
            out.update(fine_counts=self.buckets.counts, fine_p=self.buckets.p)
        out.update(self.grid.arrays())
        return out

    @property
    def n(self):
        """Number of samples counted (omitted rows excluded)."""
        return int(self.counts[: self.n_bins, 0].sum())

    # the two parts, read as the state's own arrays
    @property
    def n_boot(self):
        return self.boot.n_boot

    @property
    def seed(self):
        return self.boot.seed

    @property
    def boot_counts(self):
        return self.boot.counts

    @property
    def boot_sums(self):
        return self.boot.sums

    @property
    def ace_buckets(self):
        return self.buckets.n_buckets

    @property
    def fine_counts(self):
        return self.buckets.counts

    @property
    def fine_p(self):
        return self.buckets.p


class Bootstrap(Mergeable):
    """Bootstrap replicates of the per-bin counts and sums of p.

    Each row gets Poisson(1) weights that depend only on (seed, global row,
    replicate), so the replicates do not depend on chunking or merge order.
    """

    _adds = ("counts", "sums")

    def __init__(self, n_boot, seed, n_bins):
        self.n_boot = n_boot  # checked in the settings
        self.seed = seed
        self.counts = np.zeros((self.n_boot, n_bins, 3), np.int64)
        self.sums = np.zeros((self.n_boot, n_bins), np.float64)

    def fill(self, y, x, row0, edges, uniform, right, threads):
        """Add validated rows (0/1 labels, values in [0, 1]) binned by ``edges``."""
        if self.n_boot == 0 or x.shape[0] == 0:
            return
        n_threads = v.check_threads(threads)
        if n_threads == 1 or x.shape[0] * self.n_boot < _PARALLEL_MIN_DRAWS:
            kboot.boot_fill_range(x, y, row0, edges, uniform, right, self.seed, 0, self.n_boot,
                                  self.counts, self.sums)
        else:
            kboot.boot_fill_parallel(x, y, row0, edges, uniform, right, self.seed, n_threads,
                                     self.counts, self.sums)

    def _check_compatible(self, other):
        if self.n_boot != other.n_boot or self.seed != other.seed:
            msg = ("cannot merge accumulators with different bootstrap settings: "
                   f"n_boot={self.n_boot}, seed={self.seed} and n_boot={other.n_boot}, "
                   f"seed={other.seed}")
            raise ValueError(msg)



class ValueBuckets(Mergeable):
    """Per value bucket floor(x * n_buckets): rows, positives, correct labels
    and the sum of x (x: p, a logit's sigmoid or a K-class row's confidence).
    ACE is read off them (:func:`fastcal.accumulators.equal_mass.ace`)."""

    _adds = ("counts", "p")

    def __init__(self, n_buckets):
        self.n_buckets = n_buckets  # checked in the settings
        rows = self.n_buckets + 1 if self.n_buckets else 0
        self.counts = np.zeros((rows, kb.N_COUNTS), np.int64)
        self.p = np.zeros(rows, np.float64)

    def add_ranked(self, y, x, omit):
        if self.n_buckets:
            kem.bucket_stats(x, y, omit, self.counts, self.p)

    def _check_compatible(self, other):
        if self.n_buckets != other.n_buckets:
            msg = ("cannot merge accumulators with different ACE bucket statistics: "
                   f"ace_buckets={self.n_buckets} and {other.n_buckets}")
            raise ValueError(msg)

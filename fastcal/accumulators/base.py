"""What the accumulators share: the merge protocol over declared arrays, and the bins.

Every accumulator is :class:`Mergeable`: ``a + b``, ``a += b``, ``sum(...)``
(``0 + a`` is a copy of ``a``), ``copy()``, pickling and ``to_arrays`` /
``add_arrays``, all following from its ``layout``, the table of its arrays
in :mod:`fastcal.backends.layout` (name, shape, dtype, reduction, value
rule), over one method of its own: ``_check_compatible(other)`` (a clear
error when the states cannot merge). The binned ones (binary, multi-class)
are :class:`Binned`; besides their per-bin arrays they may keep bootstrap
replicates for the ECE/ESCE/MCE intervals, the value buckets that ACE is
read from and the smooth ECE grid, each switched on by an option.
"""

from dataclasses import replace
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

from fastcal import backends
from fastcal._kernels import weighted as kw
from fastcal.accumulators import checks as ck
from fastcal.backends.layout import EDGE_DTYPES, Dims
from fastcal.backends.spec import FillSpec
from fastcal.inputs.binning import Bins
from fastcal.inputs.validation import show

__all__ = ["Accumulator", "Binned", "EDGE_DTYPES", "Mergeable", "check_start"]


@runtime_checkable
class Accumulator(Protocol):
    """What every state offers (``tests/backends/test_seam.py`` checks each class): filled
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
    """The merge protocol over ``_check_compatible`` and the state's ``layout``.

    ``layout``: the arrays of the state (:class:`fastcal.backends.layout.Array`
    entries; ``_dims()`` gives their shapes). Copying copies them, merging
    adds them by their reductions, ``to_arrays`` / ``add_arrays`` read and
    add them with the checks of their value rules, and loading a pickle
    made before an array existed gives it its zeros (``_upgrade``).
    """

    layout: tuple = ()

    def _dims(self):
        """What the shapes of this state's arrays depend on."""
        return Dims()

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
        """An independent copy: the state's arrays are copied, settings shared."""
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        for a in self.layout:
            x = self.__dict__.get(a.name)
            if isinstance(x, np.ndarray):
                out.__dict__[a.name] = x.copy()
        return out

    def _add(self, other):
        """Add ``other`` (checked compatible) by each array's reduction."""
        self._add_state({a.name: getattr(other, a.name) for a in self.layout})

    def _add_state(self, arrays):
        """Add named arrays (a chunk's, another state's) by their reductions; the
        names a layout does not hold (a fill's checks) and arrays not there (None:
        K not known yet) are passed over."""
        for a in self.layout:
            x = arrays.get(a.name)
            if x is None:
                continue
            if a.store == "width":
                self.__dict__[a.name] = self.__dict__[a.name] or x
            elif a.store == "int":
                self.__dict__[a.name] += int(x)
            else:
                total = self.__dict__[a.name]
                total += x  # in place: the arrays are the state

    def _check_type(self, other, name):
        if type(other) is not type(self):
            msg = f"can only merge a {name} into this one; got {type(other).__name__}"
            raise TypeError(msg)

    def __setstate__(self, state):
        self.__dict__.update(self._upgrade(dict(state)))
        dims = self._dims()
        for a in self.layout:  # arrays of parts added since the state was pickled
            if a.store == "array" and a.name not in self.__dict__:
                self.__dict__[a.name] = a.zeros(dims)

    def _upgrade(self, state):
        """The attributes of a state pickled by an earlier version, as they are now."""
        return state

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
        out = {}
        for a in self._on():
            x = self.__dict__[a.name]
            if a.store == "int":
                out[a.name] = np.array(x, np.int64)
            elif a.store == "width":
                width = np.zeros(len(EDGE_DTYPES), np.int64)
                if x is not None:
                    width[EDGE_DTYPES.index(x)] = 1
                out[a.name] = width
            else:
                out[a.name] = np.array(x, copy=True)
        return out

    def _on(self):
        """The arrays of this state's ``to_arrays``, in the layout's order."""
        dims = self._dims()
        on = [a for a in self.layout if a.on(dims)]
        for a in on:
            if a.shape(dims) is None:
                self._unknown_shape()
        return on

    def _unknown_shape(self):
        msg = f"the arrays of this {type(self).__name__} are not sized yet"
        raise ValueError(msg)

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
        dims = self._dims()
        on = self._on()
        expected = {a.name: (a.shape(dims), a.dtype) for a in on}
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
        for a in on:
            a.check(got[a.name])
        self._check_arrays(got)
        self._add_state(got)
        return self

    def _check_arrays(self, got):
        """What the arrays of a state must agree on (checked before any is added)."""


@lru_cache(maxsize=None)
def _width_of(dtype):
    """The float width of data of ``dtype`` (cached: numpy's dtype names cost
    microseconds, paid per chunk of a metric's small batches)."""
    return dtype.name if dtype.kind == "f" else "float64"


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
    the uniform edges use (fixed by the first update), all held by the
    state's :class:`~fastcal.backends.spec.FillSpec` (``spec``), which its
    backend fills by.

    ``computed64``: the values binned are computed in float64 (sigmoid,
    softmax, renormalised rows), so every input width shares float64 edges.
    """

    def _init_binned(self, settings, computed64, **spec):
        """The spec, arrays and counters every binned state takes from ``settings``
        (a :class:`~fastcal.accumulators.settings.Settings`, checked when made);
        ``spec``: fields of the spec this kind sets itself."""
        self.spec = FillSpec.of(settings, self.kind, computed64, **spec)
        self.edge_dtype = None
        self.n_omitted = 0
        self.n_rows = 0  # rows passed to update, omitted ones included
        self.n_classes = None
        dims = self._dims()
        for a in self.layout:
            if a.store == "array":
                setattr(self, a.name, a.zeros(dims))
        if self.spec.weighted:
            self._check_weighted("weighted=True")

    def _dims(self):
        return Dims.of(self.spec, self.n_classes)

    # the bins and options, read as the state's own
    bins = property(lambda self: self.spec.bins)
    n_bins = property(lambda self: self.spec.n_bins)
    edges = property(lambda self: self.spec.bins.edges)
    closed = property(lambda self: self.spec.bins.closed)
    nan_policy = property(lambda self: self.spec.nan_policy)
    eps = property(lambda self: self.spec.eps)
    threads = property(lambda self: self.spec.threads)
    with_logs = property(lambda self: self.spec.with_logs)  # False: binned metrics only
    computed64 = property(lambda self: self.spec.computed64)
    n_boot = property(lambda self: self.spec.n_boot)
    seed = property(lambda self: self.spec.seed)
    ace_buckets = property(lambda self: self.spec.ace_buckets)
    smooth = property(lambda self: self.spec.smooth)  # the smooth ECE grid is kept
    ecce = property(lambda self: self.spec.ecce)  # ECCE's value buckets are kept

    def kernel_edges(self, dtype):
        """(edges, uniform) as the kernels take them for data of ``dtype``."""
        return self.spec.edges(dtype)

    def _upgrade(self, state):
        # a state pickled before its spec held its options as attributes, its bins as
        # n_bins, edges and closed (before they were one value), and its bootstrap
        # replicates, ACE's buckets and smooth ECE grid as objects of their own
        if "spec" in state:
            return state
        if "bins" not in state:
            state["bins"] = Bins(state.pop("n_bins"), state.pop("edges"), state.pop("closed"))
        boot, buckets, grid = (state.pop(name, None) for name in ("boot", "buckets", "grid"))
        options = {name: state.pop(name) for name in ("nan_policy", "eps", "threads",
                                                      "with_logs", "logits", "renormalize",
                                                      "classwise") if name in state}
        state["spec"] = FillSpec(
            self.kind, state.pop("bins"), state.pop("computed64", False),
            **{**dict(logits=self.kind == "logits"), **options},
            n_boot=getattr(boot, "n_boot", 0), seed=getattr(boot, "seed", 0),
            ace_buckets=getattr(buckets, "n_buckets", 0), smooth=getattr(grid, "on", False))
        parts = {"boot_counts": (boot, "counts"), "boot_sums": (boot, "sums"),
                 "fine_counts": (buckets, "counts"), "fine_p": (buckets, "p"),
                 "smooth_mass": (grid, "mass"), "smooth_resid": (grid, "resid"),
                 "smooth_n": (grid, "n")}
        for name, (part, field) in parts.items():
            if part is not None:
                state[name] = getattr(part, field)
        state.setdefault("n_classes", None)
        return state

    def report_edges(self):
        """Bin edges as float64 (uniform: k / n_bins)."""
        return self.bins.report_edges()

    def _width(self, dtype):
        """The float width (a name of ``EDGE_DTYPES``) whose rounding of k / n_bins
        the uniform edges use for data of ``dtype``; None where the edges do not
        depend on it (explicit edges, values computed in float64)."""
        if self.edges is not None or self.computed64:
            return None
        return _width_of(np.dtype(dtype))

    def _fix_dtype(self, dtype):
        """Fix the dtype whose rounding of k / n_bins the uniform edges use: the
        first update's. A later chunk of another float width would bin by other
        edges (0.3 is not float32(0.3)), so it is refused, not mixed in."""
        name = self._width(dtype)
        if name is None:
            return
        if self.edge_dtype is None:
            self.edge_dtype = name
        elif name != self.edge_dtype:
            msg = (f"y_prob is {name} but this accumulator holds {self.edge_dtype} data, binned "
                   f"by {self.edge_dtype} edges; cast every chunk to one dtype (e.g. "
                   "astype('float64')) so that all rows share the same bins")
            raise ValueError(msg)

    def update(self, y_true, y_prob, *, start=None, device=None, sample_weight=None):
        """Add one chunk of labels and predictions (K-class state: labels (n,) and
        (n, K) rows); returns self (see :meth:`fastcal.CalibrationAccumulator.update`)."""
        return self.update_batch(self._resolve(y_true, y_prob, device, sample_weight, start),
                                 start=start)

    def _resolve(self, y_true, y_prob, device=None, sample_weight=None, start=None):
        """The gate's batch of a chunk for this state's kind."""
        return backends.resolve(y_true, y_prob, logits=self.logits,
                                multiclass=self.kind == "multiclass", device=device,
                                sample_weight=sample_weight,
                                first_row=self.n_rows if start is None else check_start(start))

    def update_batch(self, batch, *, start=None):
        """``update`` with a batch resolved by :func:`fastcal.backends.resolve`:
        its backend fills the chunk and its parts (named arrays), which are
        added once its rows passed the checks; the state is left unchanged on
        invalid input."""
        self._check_batch(batch)
        row0 = self.n_rows if start is None else check_start(start)
        if batch.weighted:
            self._check_weighted()
        if batch.n:  # an empty chunk bins nothing: it leaves the float width open
            self._fix_dtype(batch.dtype)
        arrays, omitted = self._filled(batch, row0)
        if batch.weighted:
            self._weigh()
        self._add_chunk(self._with_weighted(arrays), batch)
        self.n_omitted += omitted
        self.n_rows += batch.n
        return self

    def chunk_arrays(self, y_true, y_prob, *, start=None, sample_weight=None):
        """The arrays that ``update`` would add for one chunk, named as those of
        :meth:`to_arrays` (with the fill's ``checks`` besides), the state itself
        unchanged: for a framework that keeps the sums in tensors of its own and
        adds each chunk to them in place (:class:`fastcal.torch.CalibrationMetric`).

        Bad input raises the ``ValueError`` of ``update`` (rows numbered from
        ``start``, by default this state's ``n_rows``). ``edge_dtype`` holds the
        chunk's float width (all 0 for an empty chunk, explicit edges or values
        computed in float64); it is not checked against this state's.
        """
        batch = self._resolve(y_true, y_prob, sample_weight=sample_weight, start=start)
        self._check_batch(batch)
        row0 = self.n_rows if start is None else check_start(start)
        if batch.weighted and not self.spec.weighted:
            msg = "sample_weight needs a weighted state (made with weighted=True)"
            raise ValueError(msg)
        arrays, omitted = self._filled(batch, row0)
        arrays = self._with_weighted(arrays)
        arrays["n_rows"] = np.array(batch.n, np.int64)
        arrays["n_omitted"] = np.array(omitted, np.int64)
        width = np.zeros(len(EDGE_DTYPES), np.int64)
        name = self._width(batch.dtype) if batch.n else None
        if name is not None:
            width[EDGE_DTYPES.index(name)] = 1
        arrays["edge_dtype"] = width
        return arrays

    def _filled(self, batch, row0):
        """A chunk's arrays (its fill and its parts) once its rows passed the
        checks, and the rows it omitted; ``row0`` numbers the rows of messages."""
        backend = backends.of(batch)
        filled = backend.fill(batch, self.spec)
        checks = filled["checks"]
        ck.raise_for(self.checks, checks, self.nan_policy, row0, **batch.context())
        parts = backend.fill_parts(batch, self.spec, row0, filled)
        return {**filled, **parts}, ck.omitted(self.checks, checks)

    def _with_weighted(self, arrays):
        """A chunk's arrays with the weighted sums a weighted state keeps (rows
        without weights weigh 1 each)."""
        if self.spec.weighted and "wsums" not in arrays:
            arrays.update(as_weighted(arrays, self.n_bins))
        return arrays

    def _add_chunk(self, arrays, batch):
        """Add a checked chunk's arrays."""
        self._add_state(arrays)

    # -- weights ---------------------------------------------------------

    # the parts a state keeps that rows with weights do not fill (yet): refused with them
    _UNWEIGHTED_PARTS = (("ace_buckets", "ACE's value buckets"),
                         ("smooth", "the smooth ECE grid"))

    def _check_weighted(self, who="sample_weight"):
        """Refuse weights in a state that keeps a part they do not reach, in one line."""
        for name, what in self._UNWEIGHTED_PARTS:
            value = getattr(self, name)
            if value:
                msg = (f"{who} cannot be combined with {name}={value!r}: {what} do "
                       f"not take weights; leave {name} out (or {who})")
                raise ValueError(msg)

    def _weigh(self):
        """Make this state weighted (once): its rows so far weigh 1 each, so their
        weighted sums are the unweighted ones (:func:`as_weighted`)."""
        if self.spec.weighted:
            return
        self._check_weighted()
        now = as_weighted({a.name: getattr(self, a.name) for a in self.layout}, self.n_bins)
        self.spec = replace(self.spec, weighted=True)
        dims = self._dims()
        for a in self.layout:
            if a.part == "weighted":
                x = a.zeros(dims)
                if x is not None and a.name in now:
                    x += now[a.name]
                setattr(self, a.name, x)

    @property
    def weighted(self):
        """True if rows with a ``sample_weight`` were added (the report is weighted)."""
        return self.spec.weighted

    def boot_state(self):
        """The bootstrap replicates a report reads: (counts, sums), the weighted ones
        (float sums of Poisson(1) times w) for weighted state."""
        if self.spec.weighted:
            return self.wboot_counts, self.wboot_sums
        return self.boot_counts, self.boot_sums

    def report_state(self):
        """(counts, sums, totals, options) a report is read from: the per-bin state
        of the n_bins bins, or for weighted state its weighted sums with the rows
        (``rows``) and sums of w**2 (``w2``) per bin as the options of
        :meth:`fastcal.reports.report.CalibrationReport.from_state`."""
        nb = self.n_bins
        if not self.spec.weighted:
            return self.counts[:nb], self.sums[:nb], self.totals, {}
        ws = self.wsums[:nb]
        return ws[:, 0:3], ws[:, 3:6], self.wtotals, {"rows": self.counts[:nb, 0],
                                                      "w2": ws[:, 6]}

    def _add(self, other):
        """Add ``other`` (checked compatible); a weighted state and an unweighted one
        merge into a weighted one (the unweighted rows weigh 1)."""
        if other.spec.weighted and not self.spec.weighted:
            self._weigh()
        arrays = {a.name: getattr(other, a.name) for a in self.layout}
        if self.spec.weighted and not other.spec.weighted:
            arrays.update(as_weighted(arrays, self.n_bins))
        self._add_state(arrays)

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
        """What every binned state checks before a merge: bins and the parts kept."""
        self._check_bins(other)
        if self.ace_buckets != other.ace_buckets:
            msg = ("cannot merge accumulators with different ACE bucket statistics: "
                   f"ace_buckets={self.ace_buckets} and {other.ace_buckets}")
            raise ValueError(msg)
        if self.n_boot != other.n_boot or self.seed != other.seed:
            msg = ("cannot merge accumulators with different bootstrap settings: "
                   f"n_boot={self.n_boot}, seed={self.seed} and n_boot={other.n_boot}, "
                   f"seed={other.seed}")
            raise ValueError(msg)
        if self.smooth != other.smooth:
            msg = ("cannot merge accumulators with and without the smooth ECE grid "
                   f"(smooth={self.smooth} and smooth={other.smooth})")
            raise ValueError(msg)
        if self.ecce != other.ecce:
            msg = ("cannot merge accumulators with and without ECCE's value buckets "
                   f"(ecce={self.ecce} and ecce={other.ecce})")
            raise ValueError(msg)

    def _check_arrays(self, got):
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
        got["edge_dtype"] = widths[0] if widths else None  # the width, as the state keeps it

    @property
    def n(self):
        """Number of samples counted (omitted rows excluded)."""
        return int(self.counts[: self.n_bins, 0].sum())

    def ecce_state(self):
        """ECCE's bucket sums (counts, sums, totals), or None when not kept."""
        return (self.ecce_counts, self.ecce_sums, self.ecce_totals) if self.ecce else None

    def smooth_grid(self):
        """The smooth ECE grid sums (mass, residuals), or None when not kept."""
        return (self.smooth_mass, self.smooth_resid) if self.smooth else None


def as_weighted(arrays, n_bins):
    """The weighted sums (wsums, wtotals and, K classes class-wise, wclass) of
    unweighted named arrays (a chunk's, a state's): each row weighs 1, so the sums of
    w are the counts and those of w times a term the sums of the terms, exactly.
    Rows of the trash row (invalid binary probabilities) weigh nothing."""
    counts, sums = arrays["counts"], arrays["sums"]
    wsums = np.zeros((counts.shape[0], kw.N_WSUMS), np.float64)
    wsums[:n_bins, 0:3] = counts[:n_bins]
    wsums[:n_bins, 3:6] = sums[:n_bins]
    wsums[:n_bins, 6] = counts[:n_bins, 0]
    out = {"wsums": wsums, "wtotals": np.array(arrays["totals"], np.float64, copy=True)}
    if "boot_counts" in arrays:  # replicates: Poisson(1) times a weight of 1
        out["wboot_counts"] = np.array(arrays["boot_counts"], np.float64, copy=True)
        out["wboot_sums"] = np.array(arrays["boot_sums"], np.float64, copy=True)
    cc, cs = arrays.get("class_counts"), arrays.get("class_sums")
    if cc is not None:
        wclass = np.zeros((*cs.shape, kw.N_WCLASS), np.float64)
        wclass[..., 0:2] = cc
        wclass[..., 2] = cs
        out["wclass"] = wclass
    return out


def _legacy_part(name, doc):
    """A class that unpickles a part of a state pickled by an earlier version (its
    arrays become the state's, see ``Binned._upgrade``)."""
    return type(name, (), {"__doc__": doc, "__module__": __name__})


# parts of the binned states before their arrays were declared in one layout; kept
# so that those pickles load (tests/data/pickled_before_bins)
Bootstrap = _legacy_part("Bootstrap", "Bootstrap replicates of an earlier pickle.")
ValueBuckets = _legacy_part("ValueBuckets", "ACE's value buckets of an earlier pickle.")

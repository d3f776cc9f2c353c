"""Calibration in a PyTorch evaluation loop: a torchmetrics metric of constant memory.

:class:`CalibrationMetric` is a ``torchmetrics.Metric`` whose states are the
arrays of fastcal's accumulator (:meth:`~fastcal.accumulators.base.Binned.to_arrays`):
per-bin int64 counts and float64 sums of a few kilobytes, whatever the number of
predictions, each with ``dist_reduce_fx="sum"``. Under DDP every rank's
``compute()`` and ``report()`` therefore sum the states exactly (counts) or to
rounding (sums) and read the same report as :func:`fastcal.calibration_report`
on all the data; torchmetrics' ``BinaryCalibrationError`` instead keeps and
gathers every prediction. Needs the ``torch`` extra (``pip install fastcal[torch]``).
"""

import dataclasses
import hashlib

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities.distributed import gather_all_tensors

from fastcal.accumulators.base import EDGE_DTYPES
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.accumulators.settings import STATE_KEYWORDS, Settings
from fastcal.inputs import validation as v
from fastcal.inputs.validation import show
from fastcal.reports.provenance import Provenance
from fastcal.reports.stats import check_ci

TASKS = ("binary", "multiclass")

# What compute() may return: the report's scalar fields a constant-memory state gives
# (ACE needs the ranks of all predictions; the class-wise ones need K classes and
# classwise=True, like the Brier decomposition of K classes).
VALUES = ("ece", "esce", "mce", "ecd", "ecd_z", "ecd_p_two_sided", "brier", "nll", "ece_l2",
          "ece_debiased", "brier_reliability", "brier_resolution", "brier_uncertainty",
          "classwise_ece", "classwise_ece_debiased")
CLASSWISE_VALUES = ("classwise_ece", "classwise_ece_debiased")
BRIER_PARTS = ("brier_reliability", "brier_resolution", "brier_uncertainty")

# The options state: per option, _CHUNKS 16-bit pieces of a hash of its value. Pieces of
# 16 bits keep unequal states unequal under torchmetrics' allclose (compute groups).
_CHUNKS = 3
# the bytes of an option's value that a DDP mismatch message gathers from each rank
_SHOWN = 120


class CalibrationMetric(Metric):
    """ECE (or ECD, Brier, ...) and the whole calibration report, accumulated batch by batch.

    Parameters
    ----------
    task : {"binary", "multiclass"}, default "binary"
        "binary": ``preds`` of shape (n,), the probability (or logit) of class 1,
        and 0/1 (or bool) targets. "multiclass": ``preds`` of shape (n, K) and
        class indices in [0, K).
    num_classes : int, optional
        K; required for ``task="multiclass"`` (the state's shape depends on it).
        With ``classwise=True`` the state holds K x n_bins x 24 bytes of
        class-wise counters, at most ``MAX_STATE_BYTES`` (1 GiB) in all
        (:func:`fastcal.accumulators.settings.check_state_size`).
    value : str, default "ece"
        The report's field that ``compute()`` and ``forward()`` return, as a
        0-d float64 tensor: one of "ece", "esce", "mce", "ecd", "ecd_z" (the
        ECD test's z), "ecd_p_two_sided", "brier", "nll", "ece_l2",
        "ece_debiased", "brier_reliability", "brier_resolution",
        "brier_uncertainty", and for K classes with ``classwise=True``
        "classwise_ece" and "classwise_ece_debiased" (the Brier parts of K
        classes need the class-wise state too). :meth:`report` gives them all.
    logits : bool, default False
        ``preds`` are logits: a sigmoid (binary) or row softmax (multi-class) is
        taken inside the kernel, in float64, never materialised.
    n_bins, edges, closed, observed, nan_policy, eps, renormalize, threads, seed
        As in :func:`fastcal.calibration_report`.
    classwise : bool, default True
        Multi-class: keep the class-wise state (K x n_bins counters) for
        ``classwise_ece`` and the per-class table.
    ci : float, optional
        Confidence level of ``report().intervals``: t-intervals for ECD, Brier
        and NLL from the state's sums of squares; for ECE, ESCE and MCE a
        Poisson bootstrap when ``n_boot > 0``, NaN otherwise.
    n_boot : int, default 0
        Bootstrap replicates kept when ``ci`` is given. Each costs about one
        light pass over every batch and n_bins x 4 numbers of state. Their
        weights depend on the global row index: ``update`` numbers rows from
        the rows this process has seen, so under DDP pass each batch's global
        offset as ``start=`` for replicates that equal a one-process run's.
    ace, strategy
        Only ``ace=False`` and ``strategy="uniform"``: ACE and equal-mass bins
        need the ranks of all the predictions, which a constant-memory state
        does not keep (``fastcal.calibration_report`` on the gathered
        predictions computes them, at O(n) memory and one sort).
    weighted : bool, default False
        Keep the weighted sums, for ``update(preds, target, sample_weight=w)``
        (rows of batches without weights weigh 1); the value and report are
        then weighted (see :func:`fastcal.calibration_report`).
    **kwargs
        torchmetrics' options (``dist_sync_on_step``, ``process_group``, ...).

    Raises
    ------
    ValueError
        A bad option (one line naming it), or a state larger than
        ``MAX_STATE_BYTES`` (naming ``num_classes``, ``n_bins`` and the memory
        it would take), refused before anything is allocated.

    Notes
    -----
    ``update(preds, target)`` reads CPU tensors without a copy (a
    ``.detach().numpy()`` view; float16 and bfloat16 are cast to float32) and
    fills tensors in GPU memory on their GPU (``fastcal.backends.cuda``; needs the
    ``cuda`` extra), adding a few kilobytes to the state on the metric's device.
    Bad input raises the ``ValueError`` of :func:`fastcal.calibration_report`
    prefixed by the batch (``"batch 3: y_prob contains 1 NaN values (first at
    index 305); ..."``), its index counting the rows this process has given
    since ``reset()``; the state is unchanged then. An empty batch adds nothing
    (it does not fix the float width of the uniform edges either).

    The states keep their dtypes (int64 counts, float64 sums) through ``.to(dtype)``,
    ``.half()`` and ``set_dtype`` (Lightning's "16-true" precision casts modules
    with ``.to(dtype)``); they move between devices as usual.

    ``compute()`` returns the chosen ``value`` of everything since ``reset()`` as
    a 0-d float64 tensor, on every rank, like every torchmetrics metric: Lightning's
    ``self.log("val_cal", metric)`` and ``MetricCollection`` take it as it is.
    ``report()`` returns the whole :class:`~fastcal.CalibrationReport` (a
    :class:`~fastcal.reports.multiclass_report.MulticlassReport` for K classes)
    of the same state; ``forward(preds, target)`` (``metric(preds, target)``)
    adds the batch and returns the batch's own value, at no extra cost
    (``dist_sync_on_step`` does not apply to it). The properties :attr:`ecd` and
    :attr:`ece` are floats of ``report()``. The report's ACE is NaN and its
    ``n_certain_wrong`` None (both need the rows again).

    A metric merges (``merge_state``) and syncs (DDP) only with metrics whose
    state means the same: made with the same task, ``num_classes``, bins
    (``n_bins``, ``edges``, ``closed``), ``eps``, ``logits``, ``renormalize``,
    ``classwise``, ``n_boot`` and ``seed``. One more small state, ``options``,
    holds a hash of each; a difference is one ``ValueError`` naming the option,
    on every rank under DDP, before any sum is reduced. (``value``,
    ``observed`` and ``ci`` may differ: they only choose what is read off the
    state, so ``MetricCollection`` shares one state between such metrics.)

    Examples
    --------
    >>> import torch
    >>> from fastcal.torch import CalibrationMetric
    >>> metric = CalibrationMetric(n_bins=5)
    >>> metric.update(torch.tensor([0.1, 0.8]), torch.tensor([0, 1]))
    >>> metric.update(torch.tensor([0.6, 0.3]), torch.tensor([1, 0]))
    >>> metric.compute()
    tensor(0.2500, dtype=torch.float64)
    >>> report = metric.report()
    >>> report.n, round(report.ecd, 4)
    (4, -0.2283)
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    def __init__(self, task="binary", *, num_classes=None, value="ece", logits=False, n_bins=10,
                 edges=None, closed="left", observed="frac_pos", nan_policy="raise", eps=None,
                 renormalize=False, classwise=True, ci=None, n_boot=0, seed=0, threads=None,
                 ace=False, strategy="uniform", weighted=False, **kwargs):
        super().__init__(**kwargs)
        self.task = v.check_choice("task", task, TASKS)
        if ace:
            msg = ("ace=True is not available in CalibrationMetric: ACE needs equal-mass bins, "
                   "i.e. the ranks of all predictions, which a constant-memory state does not "
                   "keep; call fastcal.calibration_report on the gathered predictions instead")
            raise ValueError(msg)
        if v.check_choice("strategy", strategy, v.STRATEGIES) != "uniform":
            msg = ("strategy='quantile' is not available in CalibrationMetric: equal-mass bins "
                   "need the ranks of all predictions; use uniform bins or explicit edges=")
            raise ValueError(msg)
        if self.task == "multiclass":
            if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) \
                    or num_classes < 2:
                msg = (f"num_classes must be an integer >= 2 for task='multiclass'; "
                       f"got {show(num_classes)}")
                raise ValueError(msg)
            num_classes = int(num_classes)
        elif num_classes is not None:
            msg = (f"num_classes applies to task='multiclass' only; got "
                   f"num_classes={num_classes!r} with task='binary'")
            raise ValueError(msg)
        self.num_classes = num_classes
        self.value = _check_value(value, self.task, bool(classwise))
        self.observed = v.check_choice("observed", observed, v.OBSERVED)
        self.ci = check_ci(ci)
        settings = Settings.of(dict(  # checks every option once
            n_bins=n_bins, edges=edges, closed=closed, nan_policy=nan_policy, eps=eps,
            threads=threads, n_boot=n_boot if self.ci is not None else 0, seed=seed,
            logits=logits, renormalize=renormalize, classwise=classwise,
            weighted=weighted))
        if num_classes is not None:  # the state's size, before it is allocated
            settings.check_size(num_classes, f"num_classes={num_classes:,}")
        self._settings = dataclasses.replace(settings, n_classes=num_classes)
        # an empty state of the options, made once: it fills every batch (its arrays are
        # added to the states below in place) and is never filled itself
        self._filler = self._accumulator().state
        self._names = tuple(self._filler.to_arrays())
        self.add_state("options", default=_codes(self._options()), dist_reduce_fx=_first)
        for name, x in self._filler.to_arrays().items():
            self.add_state(name, default=torch.from_numpy(x), dist_reduce_fx="sum")
        self._views = None  # NumPy views of the states, see _add
        self._computed_report = None

    def _accumulator(self):
        """An empty accumulator of this metric's options."""
        return CalibrationAccumulator.of(self._settings)

    def _options(self):
        """The options a metric merged or synced with this one must share, by name:
        those that decide what the state holds, the task and the accumulators'
        ``STATE_KEYWORDS`` (``observed``, ``ci`` and ``value`` only decide what is
        read off it; ``nan_policy`` and ``threads`` how rows are read)."""
        out = {"task": self.task, "num_classes": self.num_classes}
        out.update((k, self._settings[k]) for k in STATE_KEYWORDS if k != "n_classes")
        return out

    # -- filling ---------------------------------------------------------

    def update(self, preds, target, sample_weight=None, *, start=None):
        """Add a batch: ``preds`` (n,) or (n, K), ``target`` (n,).

        ``sample_weight``: a weight per row (the metric made with
        ``weighted=True``). ``start``: the global index of the batch's first
        row, for the bootstrap weights and error messages (default: the rows
        this process has seen since ``reset()``).
        """
        self._add_batch(preds, target, start, sample_weight)

    def forward(self, preds, target, sample_weight=None, *, start=None):
        """Add the batch (as ``update``) and return the batch's own value (a 0-d tensor)."""
        self._computed = None
        self._update_count += 1
        acc = self._accumulator()
        self._add_batch(preds, target, start, sample_weight, into=acc)
        self._forward_cache = self._value_of(_report(acc, self.observed, self.ci))
        return self._forward_cache

    def _add_batch(self, preds, target, start, sample_weight=None, into=None):
        """Fill the batch and add its arrays to the states in place. ``into``: an
        empty accumulator that keeps the batch's own state too (``forward``'s)."""
        if sample_weight is not None and not self._settings.weighted:
            msg = ("sample_weight needs the weighted sums in the metric's state: make it with "
                   "CalibrationMetric(..., weighted=True)")
            raise ValueError(msg)
        row0 = int(self.n_rows) if start is None else start
        y, p = _detached(target), _detached(preds)
        try:
            self._check_shapes(preds, target)
            w = None if sample_weight is None else _numpy(sample_weight)  # weights: on the host
            # a CUDA tensor (or CuPy, Numba array) is filled on its GPU: the gate decides
            if into is None:
                arrays = self._filler.chunk_arrays(y, p, start=row0, sample_weight=w)
            else:
                arrays = into.update(y, p, start=row0, sample_weight=w).to_arrays()
        except ValueError as err:
            msg = f"batch {self._update_count}: {err}"
            raise ValueError(msg) from None
        self._check_width(arrays["edge_dtype"])
        self._add(arrays)

    def _add(self, arrays):
        """Add a batch's arrays to the states in place: through NumPy views of
        their memory (made again when a state tensor was replaced: ``reset()``,
        a sync, ``.to()``), or by torch where it gives no view (GPU memory)."""
        states = [getattr(self, name) for name in self._names]
        views = self._views
        if views is None or any(a is not b for a, b in zip(views[0], states)):
            views = self._views = (states, [_view(t) for t in states])
        for name, state, view in zip(self._names, states, views[1]):
            x = arrays.get(name)
            if x is None:  # a part this batch does not fill (rows with weights: no unweighted replicates)
                continue
            if view is None:
                state += torch.from_numpy(x).to(state.device)
            else:
                view += x

    def _check_width(self, width):
        """Refuse a batch of another float width than the earlier ones (its uniform
        bins would have other edges); ``width``: the batch's ``edge_dtype`` array."""
        width = width.tolist()
        if 1 not in width:
            return
        now = EDGE_DTYPES[width.index(1)]
        before = [w for w, seen in zip(EDGE_DTYPES, self.edge_dtype.tolist()) if seen]
        if before and before != [now]:
            msg = (f"batch {self._update_count}: y_prob is {now} but earlier batches were "
                   f"{before[0]}, binned by other edges; cast every batch to one dtype (e.g. "
                   "preds.double())")
            raise ValueError(msg)

    def _check_shapes(self, preds, target):
        if self.task == "binary" and getattr(preds, "ndim", 1) != 1:
            msg = (f"preds has shape {tuple(preds.shape)}, but task='binary' takes shape (n,), the "
                   "probability (or logit) of class 1; use task='multiclass' with num_classes=K "
                   "for (n, K) scores")
            raise ValueError(msg)
        if getattr(target, "ndim", 1) != 1:
            msg = (f"target has shape {tuple(target.shape)}, but CalibrationMetric takes labels "
                   "of shape (n,) (0/1, or class indices); soft labels are not supported")
            raise ValueError(msg)

    # -- merging ---------------------------------------------------------

    def merge_state(self, incoming_state):
        """Add another metric's state (or a dict of its states) to this one.

        Raises
        ------
        ValueError
            The other metric was made with other options (the message names the
            first that differs), or the dict's arrays fail the checks of
            :meth:`~fastcal.accumulators.base.Binned.add_arrays` (names, shapes,
            dtypes, values, one float width). The state is unchanged then.
        """
        if isinstance(incoming_state, CalibrationMetric):
            self._check_options(incoming_state.options, incoming_state._options())
            incoming = incoming_state.metric_state
        elif isinstance(incoming_state, dict):
            incoming = dict(incoming_state)
            if "options" in incoming:
                self._check_options(torch.as_tensor(incoming.pop("options")))
        else:
            super().merge_state(incoming_state)  # torchmetrics' error for what it is not
            return
        arrays = {k: _numpy(x) for k, x in incoming.items() if k != "options"}
        self._state_accumulator().add_arrays(arrays)  # the checks; the state is not touched
        for name in self._names:
            state = getattr(self, name)
            state += torch.as_tensor(arrays[name], device=state.device)
        self._computed = None  # torchmetrics keeps the cached compute() otherwise

    def _check_options(self, codes, values=None):
        """Refuse a state whose options' ``codes`` differ from this metric's,
        naming the first option that differs (and both values, when given)."""
        mine = self._options()
        name = _first_difference(mine, self.options, codes)
        if name is None:
            return
        if values is not None:
            msg = (f"cannot merge a CalibrationMetric made with {name}={_show(values[name])} into "
                   f"one made with {name}={_show(mine[name])}; merge only metrics made with the "
                   "same options")
        else:
            msg = (f"cannot merge a state made with another {name} than this metric's "
                   f"({name}={_show(mine[name])}): its 'options' differ; merge only states of "
                   "metrics made with the same options")
        raise ValueError(msg)

    def _sync_dist(self, dist_sync_fn=gather_all_tensors, process_group=None):
        """torchmetrics' sync of the states over the processes, once every
        process has shown the same options: otherwise one ``ValueError`` on every
        rank, naming the option and its value on each rank (the states may not
        even have the same shapes then, and are not reduced)."""
        group = process_group or self.process_group
        ranks = [t.cpu() for t in dist_sync_fn(self.options, group=group)]
        mine = self._options()
        # the first option that not every rank shares (the same on each: all compare to rank 0)
        names = [n for n in (_first_difference(mine, ranks[0], r) for r in ranks[1:]) if n]
        if names:
            self._raise_across(min(names, key=list(mine).index), mine, ranks, dist_sync_fn,
                               group)
        super()._sync_dist(dist_sync_fn, process_group)

    def _raise_across(self, name, mine, ranks, dist_sync_fn, group):
        """Gather each rank's value of option ``name`` and raise the line that names them."""
        text = _show(mine[name]).encode()[:_SHOWN]
        padded = torch.zeros(_SHOWN, dtype=torch.uint8)
        padded[:len(text)] = torch.tensor(list(text), dtype=torch.uint8)
        shown = [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace")
                 for t in dist_sync_fn(padded.to(self.options.device), group=group)]
        at = list(mine).index(name)
        groups = {}  # the code of each rank's value -> (value shown, ranks)
        for rank, (codes, value) in enumerate(zip(ranks, shown)):
            key = tuple(codes[at * _CHUNKS:(at + 1) * _CHUNKS].tolist())
            groups.setdefault(key, (value, []))[1].append(rank)
        parts = [f"{name}={value} on rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}"
                 for value, rs in groups.values()]
        msg = (f"CalibrationMetric options differ between processes: {'; '.join(parts)}; make "
               "the metric with the same options on every process")
        raise ValueError(msg)

    def _apply(self, fn, exclude_state=""):
        """``.to(...)``, ``.cuda()``, ``set_dtype``: states move, never change dtype (a
        float16 sum would lose the exactness the state is for)."""

        def same_dtype(t):
            out = fn(t)
            return out if out.dtype == t.dtype else t.to(out.device)

        return super()._apply(same_dtype, exclude_state)

    def reset(self):
        """Empty the state (and restart the batch count of error messages)."""
        super().reset()  # the batch count of messages is torchmetrics' _update_count
        self._computed_report = None

    def __setstate__(self, state):
        # pickled before compute() returned a tensor: no value (its compute() was the
        # report: that cached one is dropped) and no options state
        if "value" not in state:
            state = dict(state, value="ece", _computed=None, _computed_report=None)
        super().__setstate__(state)
        if "options" not in self._defaults:
            self._defaults["options"] = _codes(self._options())
            self._reductions["options"] = _first
            self._persistent["options"] = False
            self.options = self._defaults["options"].clone()
        self._filler = self._accumulator().state  # not pickled: made from the options
        self._views = None

    def __getstate__(self):
        # the filler and the views are made again from the options and the states
        return {k: x for k, x in super().__getstate__().items()
                if k not in ("_filler", "_views")}

    # -- reading ---------------------------------------------------------

    def compute(self):
        """The chosen ``value`` of every batch since ``reset()`` (summed over
        processes under DDP), a 0-d float64 tensor.

        Raises
        ------
        ValueError
            No rows were given, or every row was omitted as NaN; under DDP, the
            processes' metrics were made with other options.
        """
        rep = self._report_of_state()
        self._computed_report = rep  # report() reads it while compute()'s cache holds
        return self._value_of(rep)

    def report(self):
        """The whole report of every batch since ``reset()`` (summed over
        processes under DDP: call it on every rank, as ``compute()``): a
        :class:`~fastcal.CalibrationReport`, or a
        :class:`~fastcal.reports.multiclass_report.MulticlassReport` for K classes.

        Raises
        ------
        ValueError
            As ``compute()``.
        """
        if self._computed is not None and self._computed_report is not None:
            return self._computed_report
        with self.sync_context(dist_sync_fn=self.dist_sync_fn, should_sync=self._to_sync,
                               should_unsync=self._should_unsync):
            return self._report_of_state()

    def _report_of_state(self):
        """The report of the state as it is (synced or not)."""
        acc = self._state_accumulator()
        if acc.n_rows == 0:
            msg = "CalibrationMetric: no predictions were given since reset()"
            raise ValueError(msg)
        if acc.n == 0:
            msg = f"no samples left: all {acc.n_rows} rows were omitted as NaN"
            raise ValueError(msg)
        return _report(acc, self.observed, self.ci)

    def _state_accumulator(self):
        """An accumulator holding the metric's state (checked by ``add_arrays``)."""
        acc = self._accumulator()
        acc.add_arrays({name: _numpy(getattr(self, name)) for name in self._names})
        return acc

    def _value_of(self, rep):
        return torch.tensor(float(getattr(rep, self.value)), dtype=torch.float64,
                            device=self.device)

    @property
    def ecd(self):
        """ECD of ``report()``, a float."""
        return float(self.report().ecd)

    @property
    def ece(self):
        """ECE of ``report()``, a float."""
        return float(self.report().ece)


def _check_value(value, task, classwise):
    value = v.check_choice("value", value, VALUES)
    if value in CLASSWISE_VALUES and (task != "multiclass" or not classwise):
        msg = (f"value={value!r} needs task='multiclass' with classwise=True; got "
               f"task={task!r}, classwise={classwise}")
        raise ValueError(msg)
    if value in BRIER_PARTS and task == "multiclass" and not classwise:
        msg = (f"value={value!r} of K classes is read off the class-wise state; pass "
               "classwise=True (the default)")
        raise ValueError(msg)
    return value


def _show(x):
    """An option's value as a message shows it (and as its code hashes it)."""
    if isinstance(x, np.ndarray):
        return repr(x.tolist())
    return repr(x)


def _codes(options):
    """The ``options`` state: per option, _CHUNKS 16-bit pieces of a hash of its value."""
    out = []
    for x in options.values():
        digest = hashlib.blake2b(_show(x).encode(), digest_size=2 * _CHUNKS).digest()
        out += [int.from_bytes(digest[2 * i:2 * i + 2], "little") for i in range(_CHUNKS)]
    return torch.tensor(out, dtype=torch.int64)


def _first_difference(options, mine, theirs):
    """The first option (a name of ``options``) whose codes differ between two
    ``options`` states, or None."""
    mine, theirs = torch.as_tensor(mine).cpu(), torch.as_tensor(theirs).cpu()
    if mine.shape != theirs.shape:
        return next(iter(options))
    for i, name in enumerate(options):
        at = slice(i * _CHUNKS, (i + 1) * _CHUNKS)
        if not torch.equal(mine[at], theirs[at]):
            return name
    return None


def _first(x):
    """The reduction of the ``options`` state over processes: all equal (checked
    before any state is reduced), so the first."""
    return x[0]


def _numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _view(t):
    """A NumPy view of a state tensor's memory, or None where torch gives none (a
    tensor in GPU memory)."""
    try:
        return t.numpy()
    except (TypeError, RuntimeError):
        return None


def _detached(x):
    return x.detach() if isinstance(x, torch.Tensor) else x


def _report(acc, observed, ci):
    rep = acc.report(observed=observed, ci=ci)
    rep.provenance = Provenance(n_rows=acc.n_rows, passes=1, pass_steps=[("fill", 1)])
    return rep


__all__ = ["CalibrationMetric"]

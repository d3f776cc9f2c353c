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
from fastcal.accumulators.segmented import fill_one_pass, one_pass
from fastcal.accumulators.settings import STATE_KEYWORDS, Settings
from fastcal.inputs import validation as v
from fastcal.inputs.segments import slices
from fastcal.inputs.validation import show
from fastcal.reports.provenance import Provenance
from fastcal.reports.segmented import SegmentedReport
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
    num_groups : int, optional
        G: keep one state per group (G x the state, each state with a leading
        dimension G, summed under DDP like the others) for
        ``update(preds, target, groups=ids)``, ids in [0, G) as torchmetrics'
        ``BinaryGroupStatRates`` takes them. :meth:`report` is then
        ``fastcal.calibration_report(y, p, by=ids)``'s
        :class:`~fastcal.reports.segmented.SegmentedReport`, and ``compute()`` a
        dict of 0-d tensors ``{"all": ..., "group_0": ..., ...}``. None (the
        default): no groups.
    **kwargs
        torchmetrics' options (``dist_sync_on_step``, ``process_group``, ...).

    Raises
    ------
    ValueError
        A bad option (one line naming it), or a state larger than
        ``MAX_STATE_BYTES`` (naming ``num_groups``, ``num_classes``, ``n_bins``
        and the memory it would take), refused before anything is allocated.

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

    With ``num_groups=G``, ``update`` and ``forward`` take ``groups=``: an
    integer tensor (any integer dtype, or a list of ints; floats are refused,
    whole or not) of shape (n,), on the CPU or the device of ``preds``. Each
    group's rows are filled in their order into the group's state; the whole
    is the sum of the groups'. A batch without ``groups`` (or with ``groups``
    when there are no groups), of another length, of another dtype or with ids
    outside [0, G) (their count and the first, numbered as the rows of other
    messages) is refused in one line prefixed by the batch, the state
    unchanged. ``report(correction="holm", alpha=0.05)`` returns the
    :class:`~fastcal.reports.segmented.SegmentedReport` keyed by the ids of the
    groups that had rows (a group without rows is no segment, as a key absent
    from ``by=`` is not; one whose rows were all omitted as NaN is an untested
    segment), equal to ``fastcal.calibration_report(y, p, by=ids, ace=False)`` on
    all the rows. ``compute()`` returns ``{"all": ..., "group_0": ...,
    "group_{G-1}": ...}``, the chosen value of every row and of each group (NaN
    for a group without rows), which Lightning logs with
    ``self.log_dict(metric.compute())`` (then ``metric.reset()``); ``forward``
    returns that dict of the batch. Bootstrap replicates (``n_boot``) number
    each group's rows in the order this process gives them, as ``by=``
    numbers a segment's (``start=`` then numbers only the rows of messages):
    under DDP they are other draws than one process's, and the whole's, summed
    from the groups', are other draws than the whole's of ``by=`` (the point
    estimates and t-intervals are equal).

    A metric merges (``merge_state``) and syncs (DDP) only with metrics whose
    state means the same: made with the same task, ``num_classes``, ``num_groups``, bins
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
                 ace=False, strategy="uniform", weighted=False, num_groups=None, **kwargs):
        super().__init__(**kwargs)
        self.task = v.check_choice("task", task, TASKS)
        self.num_groups = _check_num_groups(num_groups)
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
        # the state's size, before it is allocated
        what = [f"num_groups={self.num_groups:,}"] if self.num_groups is not None else []
        what += [f"num_classes={num_classes:,}"] if num_classes is not None else []
        if what:
            settings.check_size(num_classes, ", ".join(what), copies=self.num_groups or 1)
        self._settings = dataclasses.replace(settings, n_classes=num_classes)
        # an empty state of the options, made once: it fills every batch (its arrays are
        # added to the states below in place) and is never filled itself
        self._filler = self._accumulator().state
        self._names = tuple(self._filler.to_arrays())
        self.add_state("options", default=_codes(self._options()), dist_reduce_fx=_first)
        for name, x in self._filler.to_arrays().items():
            if self.num_groups is not None:  # one state per group, side by side
                x = np.repeat(x[None], self.num_groups, axis=0)
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
        if self.num_groups is not None:  # last, and only then: a metric without groups
            out["num_groups"] = self.num_groups  # keeps the options state it always had
        return out

    # -- filling ---------------------------------------------------------

    def update(self, preds, target, sample_weight=None, *, start=None, groups=None):
        """Add a batch: ``preds`` (n,) or (n, K), ``target`` (n,).

        ``sample_weight``: a weight per row (the metric made with
        ``weighted=True``). ``start``: the global index of the batch's first
        row, for the bootstrap weights and error messages (default: the rows
        this process has seen since ``reset()``; with groups, for the messages
        only: each group numbers its own rows). ``groups``: with ``num_groups``
        (and only then), an integer tensor of a group id per row, in
        [0, num_groups), on the CPU or on the device of ``preds``.
        """
        self._add_batch(preds, target, start, sample_weight, groups=groups)

    def forward(self, preds, target, sample_weight=None, *, start=None, groups=None):
        """Add the batch (as ``update``) and return the batch's own value (a 0-d
        tensor; with ``num_groups``, a dict of them as ``compute()`` gives)."""
        self._computed = None
        self._update_count += 1
        if self.num_groups is not None:
            ids, arrays = self._add_batch(preds, target, start, sample_weight, groups=groups)
            groups_of = {int(g): {k: x[i] for k, x in arrays.items() if k in self._names}
                         for i, g in enumerate(ids)}
            reports, whole = self._reports_of(groups_of)
            self._forward_cache = self._values_of(reports, _report(whole, self.observed, self.ci))
            return self._forward_cache
        acc = self._accumulator()
        self._add_batch(preds, target, start, sample_weight, into=acc)
        self._forward_cache = self._value_of(_report(acc, self.observed, self.ci))
        return self._forward_cache

    def _add_batch(self, preds, target, start, sample_weight=None, into=None, groups=None):
        """Fill the batch and add its arrays to the states in place. ``into``: an
        empty accumulator that keeps the batch's own state too (``forward``'s).
        With groups, returns the ids of the groups the batch has rows of and their
        arrays (stacked in that order)."""
        if sample_weight is not None and not self._settings.weighted:
            msg = ("sample_weight needs the weighted sums in the metric's state: make it with "
                   "CalibrationMetric(..., weighted=True)")
            raise ValueError(msg)
        views = self._state_views()
        row0 = int(self._state("n_rows", views).sum()) if start is None else start
        y, p = _detached(target), _detached(preds)
        ids = None
        try:
            self._check_shapes(preds, target)
            _check_groups_given(groups, self.num_groups)
            w = None if sample_weight is None else _numpy(sample_weight)  # weights: on the host
            # a CUDA tensor (or CuPy, Numba array) is filled on its GPU: the gate decides
            if self.num_groups is not None:
                ids, arrays = self._group_arrays(y, p, w, groups, row0)
            elif into is None:
                arrays = self._filler.chunk_arrays(y, p, start=row0, sample_weight=w)
            else:
                arrays = into.update(y, p, start=row0, sample_weight=w).to_arrays()
        except ValueError as err:
            msg = f"batch {self._update_count}: {err}"
            raise ValueError(msg) from None
        self._check_width(arrays["edge_dtype"], views)
        self._add(arrays, ids, views)
        return ids, arrays

    def _group_arrays(self, y, p, w, groups, row0):
        """(ids, arrays) of a batch with groups: the ids of the groups it has rows
        of (ascending) and, per state, the arrays each group's rows add, stacked
        (ids x the state's shape). Each group's rows are filled in their order,
        numbered from the rows the group has seen (as ``calibration_report(by=)``
        numbers a segment's rows: its bootstrap weights). Binary probabilities
        without weights, in a state of bins only, fill every group in one pass
        (:func:`fastcal.accumulators.segmented.fill_one_pass`, as
        ``SegmentedAccumulator`` does). Bad input raises the message of the whole
        batch's fill (rows numbered from ``row0``), before any state is touched."""
        p_t = p if isinstance(p, torch.Tensor) else torch.as_tensor(p)
        n = p_t.shape[0] if p_t.ndim else 0
        codes = _check_groups(groups, n, self.num_groups, row0)
        sizes = [getattr(y, "shape", (len(y),))[0]] + ([] if w is None else [w.shape[0]])
        if any(size != n for size in sizes):  # the whole batch's fill says what is wrong
            self._filler.chunk_arrays(y, p, start=row0, sample_weight=w)
        acc = self._accumulator()  # never filled: it resolves the batch at the gate
        batch = acc.resolve(y, p, sample_weight=w, start=row0)
        if one_pass(acc, batch):  # binary probabilities without weights: all groups at once
            counts, sums, totals, bad, width = fill_one_pass(acc, batch, codes, self.num_groups)
            if not bad:  # else each group's own fill checks (or omits) its rows, below
                rows = np.bincount(codes, minlength=self.num_groups)
                at = np.flatnonzero(rows)
                widths = np.zeros((at.shape[0], len(EDGE_DTYPES)), np.int64)
                if width is not None:
                    widths[:, EDGE_DTYPES.index(width)] = 1
                return at.tolist(), {"counts": counts[at], "sums": sums[at],
                                     "totals": totals[at], "n_rows": rows[at],
                                     "n_omitted": np.zeros(at.shape[0], np.int64),
                                     "edge_dtype": widths}
        y_t = y if isinstance(y, torch.Tensor) else torch.as_tensor(y)
        # each group's rows: one slice, in their order (a counting sort of the ids, on the
        # host; the rows move where they are)
        order, bounds = slices(codes, self.num_groups)
        at = torch.from_numpy(order)
        ys, ps = y_t.index_select(0, at.to(y_t.device)), p_t.index_select(0, at.to(p_t.device))
        ws = None if w is None else w[order]
        bounds = bounds.tolist()
        seen = self.n_rows.tolist()
        ids, parts = [], []
        try:
            for k in range(self.num_groups):
                rows = slice(bounds[k], bounds[k + 1])
                if rows.start == rows.stop:
                    continue
                ids.append(k)
                parts.append(self._filler.chunk_arrays(
                    ys[rows], ps[rows], start=seen[k],
                    sample_weight=None if ws is None else ws[rows]))
        except ValueError:
            # a group's rows are bad: the whole batch's fill names the row in the batch
            self._filler.chunk_arrays(y, p, start=row0, sample_weight=w)
            raise
        arrays = {name: np.stack([a[name] for a in parts]) for name in self._names
                  if parts and name in parts[0]}
        if not parts:
            arrays["edge_dtype"] = np.zeros((0, len(EDGE_DTYPES)), np.int64)
        return ids, arrays

    def _add(self, arrays, ids, views):
        """Add a batch's arrays to the states in place: through NumPy views of
        their memory, or by torch where it gives no view (GPU memory).
        ``ids``: with groups, the groups whose arrays are stacked in ``arrays``;
        ``views``: what ``_state_views()`` gave for this batch."""
        states, views = views
        at = None if ids is None else np.asarray(ids, np.int64)
        for name, state, view in zip(self._names, states, views):
            x = arrays.get(name)
            if x is None:  # a part this batch does not fill (rows with weights: no unweighted replicates)
                continue
            if at is not None and view is None:
                state.index_add_(0, torch.from_numpy(at).to(state.device),
                                 torch.from_numpy(x).to(state.device))
            elif at is not None:
                view[at] += x  # ids are distinct: each group's row once
            elif view is None:
                state += torch.from_numpy(x).to(state.device)
            else:
                view += x

    def _state_views(self):
        """(the state tensors, a NumPy view of each or None) in ``_names`` order. The
        views are made again when a state tensor was replaced (``reset()``, a sync,
        ``.to()``): a batch's bookkeeping reads and adds through them, where torch's
        own operations on a 4,096-row batch's small states cost more than its fill."""
        states = [getattr(self, name) for name in self._names]
        views = self._views
        if views is None or any(a is not b for a, b in zip(views[0], states)):
            views = self._views = (states, [_view(t) for t in states])
        return views

    def _state(self, name, views):
        """A state as a NumPy array: its view, or a host copy (GPU memory); ``views``
        as ``_state_views()`` gave them."""
        states, views = views
        i = self._names.index(name)
        return _numpy(states[i]) if views[i] is None else views[i]

    def _check_width(self, width, views):
        """Refuse a batch of another float width than the earlier ones (its uniform
        bins would have other edges); ``width``: the batch's ``edge_dtype`` array
        (with groups, one per group of the batch); ``views`` as ``_add``'s."""
        width = _widths(width)
        if not any(width):
            return
        now = EDGE_DTYPES[width.index(next(x for x in width if x))]
        state = _widths(self._state("edge_dtype", views))
        before = [w for w, seen in zip(EDGE_DTYPES, state) if seen]
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
        if self.num_groups is None:
            self._state_accumulator().add_arrays(arrays)  # the checks; the state is not touched
        else:
            self._check_group_arrays(arrays)
        for name in self._names:
            state = getattr(self, name)
            state += torch.as_tensor(arrays[name], device=state.device)
        self._computed = None  # torchmetrics keeps the cached compute() otherwise

    def _check_group_arrays(self, arrays):
        """The checks of ``add_arrays`` for arrays of a state with groups: the
        shapes (num_groups x one state's), each group's arrays added to the
        group's state, and the whole's (one float width in all the groups)."""
        mine = {name: _numpy(getattr(self, name)) for name in self._names}
        for name, x in arrays.items():
            if name in mine and x.shape != mine[name].shape:
                msg = (f"arrays[{name!r}] has shape {x.shape}; this metric's state has shape "
                       f"{mine[name].shape} (num_groups={self.num_groups} states of shape "
                       f"{mine[name].shape[1:]})")
                raise ValueError(msg)
        filled = np.zeros(self.num_groups, bool)  # groups with anything to add or check
        for x in arrays.values():
            filled |= x.reshape(x.shape[0], -1).any(axis=1) if x.ndim else True
        for g in np.flatnonzero(filled):
            acc = self._accumulator().add_arrays({k: x[g] for k, x in mine.items()})
            acc.add_arrays({k: x[g] for k, x in arrays.items()})
        whole = self._accumulator().add_arrays({k: x.sum(axis=0) for k, x in mine.items()})
        whole.add_arrays({k: x.sum(axis=0) for k, x in arrays.items()})

    def _check_options(self, codes, values=None):
        """Refuse a state whose options' ``codes`` differ from this metric's,
        naming the first option that differs (and both values, when given)."""
        mine = self._options()
        name = _first_difference(mine, self.options, codes)
        if name is None:
            return
        if values is not None:
            msg = (f"cannot merge a CalibrationMetric made with {name}={_show(values.get(name))} "
                   f"into one made with {name}={_show(mine.get(name))}; merge only metrics made "
                   "with the same options")
        else:
            msg = (f"cannot merge a state made with another {name} than this metric's "
                   f"({name}={_show(mine.get(name))}): its 'options' differ; merge only states "
                   "of metrics made with the same options")
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
            order = [*mine, "num_groups"]  # num_groups: last, where a rank has it
            self._raise_across(min(names, key=order.index), mine, ranks, dist_sync_fn, group)
        super()._sync_dist(dist_sync_fn, process_group)

    def _raise_across(self, name, mine, ranks, dist_sync_fn, group):
        """Gather each rank's value of option ``name`` and raise the line that names them."""
        text = _show(mine.get(name)).encode()[:_SHOWN]
        padded = torch.zeros(_SHOWN, dtype=torch.uint8)
        padded[:len(text)] = torch.tensor(list(text), dtype=torch.uint8)
        shown = [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace")
                 for t in dist_sync_fn(padded.to(self.options.device), group=group)]
        at = list(mine).index(name) if name in mine else len(mine)  # num_groups: last
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
        if "num_groups" not in state:  # pickled before groups
            state = dict(state, num_groups=None)
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

        With ``num_groups=G``, a dict of such tensors: ``"all"`` the value of
        every row, ``"group_0"`` ... ``"group_{G-1}"`` each group's (NaN for a
        group without rows), for Lightning's ``self.log_dict``.

        Raises
        ------
        ValueError
            No rows were given, or every row was omitted as NaN; under DDP, the
            processes' metrics were made with other options.
        """
        rep = self._report_of_state()
        self._computed_report = rep  # report() reads it while compute()'s cache holds
        if self.num_groups is not None:
            return self._values_of(*rep)
        return self._value_of(rep)

    def report(self, *, correction=None, alpha=None):
        """The whole report of every batch since ``reset()`` (summed over
        processes under DDP: call it on every rank, as ``compute()``): a
        :class:`~fastcal.CalibrationReport`, or a
        :class:`~fastcal.reports.multiclass_report.MulticlassReport` for K classes.

        With ``num_groups``, a :class:`~fastcal.reports.segmented.SegmentedReport`
        keyed by group id (the ints of the groups that had rows, ascending; a
        group without rows is no segment, as a key absent from ``by=`` is not),
        its ``overall`` the report of every row: the report of
        ``fastcal.calibration_report(y, p, by=groups)`` on all the rows. Its
        verdict tests each group with ``correction`` ("holm" by default, or
        "bh") at ``alpha`` (0.05 by default); both apply only with groups.

        Raises
        ------
        ValueError
            As ``compute()``; ``correction`` or ``alpha`` without groups.
        """
        if self.num_groups is None and (correction is not None or alpha is not None):
            msg = ("correction and alpha are for the verdict of the groups: make the metric "
                   "with num_groups=G and update it with groups=, or leave them out")
            raise ValueError(msg)
        if self._computed is not None and self._computed_report is not None:
            rep = self._computed_report
        else:
            with self.sync_context(dist_sync_fn=self.dist_sync_fn, should_sync=self._to_sync,
                                   should_unsync=self._should_unsync):
                rep = self._report_of_state()
        if self.num_groups is None:
            return rep
        return SegmentedReport(rep[0], rep[1], correction="holm" if correction is None
                               else correction, alpha=0.05 if alpha is None else alpha)

    def _report_of_state(self):
        """The report of the state as it is (synced or not); with groups, (the
        reports of the groups with rows by id, the whole's report)."""
        if self.num_groups is not None:
            arrays = {name: _numpy(getattr(self, name)) for name in self._names}
            groups = {int(g): {k: x[g] for k, x in arrays.items()}
                      for g in np.flatnonzero(arrays["n_rows"])}
            reports, acc = self._reports_of(groups)
        else:
            acc = self._state_accumulator()
        if acc.n_rows == 0:
            msg = "CalibrationMetric: no predictions were given since reset()"
            raise ValueError(msg)
        if acc.n == 0:
            msg = f"no samples left: all {acc.n_rows} rows were omitted as NaN"
            raise ValueError(msg)
        rep = _report(acc, self.observed, self.ci)
        return rep if self.num_groups is None else (reports, rep)

    def _reports_of(self, groups):
        """(the report of each group, the accumulator of them all) of ``groups``,
        a dict of group id -> that group's arrays."""
        whole = self._accumulator()
        reports = {}
        for g, arrays in groups.items():
            acc = self._accumulator().add_arrays(arrays)
            reports[g] = _report(acc, self.observed, self.ci)
            whole += acc
        return reports, whole

    def _values_of(self, reports, overall):
        """``compute()``'s dict with groups: "all" and "group_<id>" for each id."""
        nan = torch.tensor(float("nan"), dtype=torch.float64, device=self.device)
        out = {"all": self._value_of(overall)}
        out.update((f"group_{g}", self._value_of(reports[g]) if g in reports else nan.clone())
                   for g in range(self.num_groups))
        return out

    def _state_accumulator(self):
        """An accumulator holding the metric's state (checked by ``add_arrays``)."""
        acc = self._accumulator()
        acc.add_arrays({name: _numpy(getattr(self, name)) for name in self._names})
        return acc

    def _value_of(self, rep):
        return torch.tensor(float(getattr(rep, self.value)), dtype=torch.float64,
                            device=self.device)

    def _whole(self):
        rep = self.report()
        return rep if self.num_groups is None else rep.overall

    @property
    def ecd(self):
        """ECD of ``report()`` (with groups, of its ``overall``), a float."""
        return float(self._whole().ecd)

    @property
    def ece(self):
        """ECE of ``report()`` (with groups, of its ``overall``), a float."""
        return float(self._whole().ece)


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


def _check_num_groups(num_groups):
    if num_groups is None:
        return None
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) \
            or num_groups < 1:
        msg = f"num_groups must be a positive integer (or None: no groups); got {show(num_groups)}"
        raise ValueError(msg)
    return int(num_groups)


def _check_groups_given(groups, num_groups):
    """Refuse groups missing with ``num_groups``, or given without."""
    if groups is None and num_groups is not None:
        msg = (f"groups is missing: this metric was made with num_groups={num_groups}, so each "
               "batch takes a group id per row (update(preds, target, groups=ids))")
        raise ValueError(msg)
    if groups is not None and num_groups is None:
        msg = ("groups given, but this metric was made without num_groups; make it with "
               "CalibrationMetric(..., num_groups=G) to score G groups")
        raise ValueError(msg)


def _check_groups(groups, n, num_groups, row0):
    """A batch's group ids (one per row of its ``n``), checked: an int64 array on the
    host; rows are numbered from ``row0`` in messages."""
    if isinstance(groups, torch.Tensor):
        g = groups.detach()
        integer = not (g.dtype.is_floating_point or g.dtype.is_complex or g.dtype == torch.bool)
        dtype = str(g.dtype)
    else:
        g = np.asarray(groups)
        integer = g.dtype.kind in "iu"
        dtype = str(g.dtype)
    if not integer:
        msg = (f"groups has dtype {dtype}; expected integer group ids in [0, {num_groups}) "
               "(floats are refused, whole or not: cast them, e.g. groups.long())")
        raise ValueError(msg)
    if tuple(g.shape) != (n,):
        what = (f"{g.shape[0]:,} ids for {n:,} rows of preds" if g.ndim == 1
                else f"shape {tuple(g.shape)}")
        msg = f"groups has {what}; expected shape ({n},), one group id per row"
        raise ValueError(msg)
    if isinstance(g, torch.Tensor):
        g = g.cpu().numpy()  # the ids' order is found on the host (a small copy from a GPU)
    g = np.ascontiguousarray(g, np.int64)
    outside = (g < 0) | (g >= num_groups)
    count = int(np.count_nonzero(outside))
    if count:
        first = int(np.argmax(outside))
        msg = (f"groups has {count} ids outside [0, {num_groups}) (first at index "
               f"{row0 + first}: {int(g[first])}); group ids are integers in [0, num_groups)")
        raise ValueError(msg)
    return g


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
    for i, name in enumerate(options):
        at = slice(i * _CHUNKS, (i + 1) * _CHUNKS)
        if not torch.equal(mine[at], theirs[at]):
            return name
    if mine.shape != theirs.shape:  # the other holds one option more: num_groups (last)
        return "num_groups"
    return None


def _first(x):
    """The reduction of the ``options`` state over processes: all equal (checked
    before any state is reduced), so the first."""
    return x[0]


def _numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _widths(x):
    """The float widths an ``edge_dtype`` array (or a stack of them, one per group) has
    seen, as a list (one count per name of ``EDGE_DTYPES``)."""
    x = np.asarray(x)
    return (x if x.ndim == 1 else x.reshape(-1, len(EDGE_DTYPES)).sum(axis=0)).tolist()


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

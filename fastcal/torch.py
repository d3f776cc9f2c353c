"""Calibration in a PyTorch evaluation loop: a torchmetrics metric of constant memory.

:class:`CalibrationMetric` is a ``torchmetrics.Metric`` whose states are the
arrays of fastcal's accumulator (:meth:`~fastcal.accumulators.base.Binned.to_arrays`):
per-bin int64 counts and float64 sums of a few kilobytes, whatever the number of
predictions, each with ``dist_reduce_fx="sum"``. Under DDP every rank's
``compute()`` therefore sums the states exactly (counts) or to rounding (sums)
and reads the same report as :func:`fastcal.calibration_report` on all the
data; torchmetrics' ``BinaryCalibrationError`` instead keeps and gathers every
prediction. Needs the ``torch`` extra (``pip install fastcal[torch]``).
"""

import numpy as np
import torch
from torchmetrics import Metric

from fastcal.accumulators.base import EDGE_DTYPES
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.accumulators.settings import Settings
from fastcal.inputs import validation as v
from fastcal.reports.provenance import Provenance
from fastcal.reports.stats import check_ci
from fastcal.inputs.validation import show

TASKS = ("binary", "multiclass")


class CalibrationMetric(Metric):
    """ECD, ECE and the whole calibration report, accumulated batch by batch.

    Parameters
    ----------
    task : {"binary", "multiclass"}, default "binary"
        "binary": ``preds`` of shape (n,), the probability (or logit) of class 1,
        and 0/1 (or bool) targets. "multiclass": ``preds`` of shape (n, K) and
        class indices in [0, K).
    num_classes : int, optional
        K; required for ``task="multiclass"`` (the state's shape depends on it).
    logits : bool, default False
        ``preds`` are logits: a sigmoid (binary) or row softmax (multi-class) is
        taken inside the kernel, in float64, never materialised.
    n_bins, edges, closed, observed, nan_policy, eps, renormalize, threads, seed
        As in :func:`fastcal.calibration_report`.
    classwise : bool, default True
        Multi-class: keep the class-wise state (K x n_bins counters) for
        ``classwise_ece`` and the per-class table.
    ci : float, optional
        Confidence level of ``report.intervals``: t-intervals for ECD, Brier
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
    **kwargs
        torchmetrics' options (``dist_sync_on_step``, ``process_group``, ...).

    Notes
    -----
    ``update(preds, target)`` reads CPU tensors without a copy (a
    ``.detach().numpy()`` view; float16 and bfloat16 are cast to float32) and
    fills tensors in GPU memory on their GPU (``fastcal.backends.cuda``; needs the
    ``cuda`` extra), adding a few kilobytes to the state on the metric's device.
    Bad input raises the ``ValueError`` of :func:`fastcal.calibration_report`
    prefixed by the batch (``"batch 3: y_prob contains 1 NaN values (first at
    index 305); ..."``), its index counting the rows this process has given
    since ``reset()``; the state is unchanged then.

    The states keep their dtypes (int64 counts, float64 sums) through ``.to(dtype)``,
    ``.half()`` and ``set_dtype`` (Lightning's "16-true" precision casts modules
    with ``.to(dtype)``); they move between devices as usual.

    ``compute()`` returns the :class:`~fastcal.CalibrationReport` (a
    :class:`~fastcal.reports.multiclass_report.MulticlassReport` for K classes)
    of everything since ``reset()``, on every rank; ``forward(preds, target)``
    (``metric(preds, target)``) adds the batch and returns the batch's own
    report, at no extra cost (``dist_sync_on_step`` does not apply to it). For
    ``self.log`` use a scalar of either:
    ``metric.compute().ecd``, or the properties :attr:`ecd` and :attr:`ece`
    (floats of ``compute()``, cached until the next update). The report's ACE is
    NaN and its ``n_certain_wrong`` None (both need the rows again).

    Examples
    --------
    >>> import torch
    >>> from fastcal.torch import CalibrationMetric
    >>> metric = CalibrationMetric(n_bins=5)
    >>> metric.update(torch.tensor([0.1, 0.8]), torch.tensor([0, 1]))
    >>> metric.update(torch.tensor([0.6, 0.3]), torch.tensor([1, 0]))
    >>> round(metric.compute().ece, 3)
    0.25
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    def __init__(self, task="binary", *, num_classes=None, logits=False, n_bins=10, edges=None,
                 closed="left", observed="frac_pos", nan_policy="raise", eps=None,
                 renormalize=False, classwise=True, ci=None, n_boot=0, seed=0, threads=None,
                 ace=False, strategy="uniform", **kwargs):
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
        self.observed = v.check_choice("observed", observed, v.OBSERVED)
        self.ci = check_ci(ci)
        self._settings = Settings.of(dict(  # checks every option once
            n_bins=n_bins, edges=edges, closed=closed, nan_policy=nan_policy, eps=eps,
            threads=threads, n_boot=n_boot if self.ci is not None else 0, seed=seed,
            logits=logits, renormalize=renormalize, n_classes=num_classes,
            classwise=classwise))
        template = self._accumulator()
        self._names = tuple(template.to_arrays())
        for name, x in template.to_arrays().items():
            self.add_state(name, default=torch.from_numpy(x), dist_reduce_fx="sum")
        self._batches = 0

    def _accumulator(self):
        """An empty accumulator of this metric's options."""
        return CalibrationAccumulator.of(self._settings)

    # -- filling ---------------------------------------------------------

    def update(self, preds, target, *, start=None):
        """Add a batch: ``preds`` (n,) or (n, K), ``target`` (n,).

        ``start``: the global index of the batch's first row, for the
        bootstrap weights and error messages (default: the rows this process
        has seen since ``reset()``).
        """
        self._add_batch(preds, target, start)

    def forward(self, preds, target, *, start=None):
        """Add the batch (as ``update``) and return the batch's own report."""
        self._computed = None
        self._update_count += 1
        acc = self._add_batch(preds, target, start)
        self._forward_cache = _report(acc, self.observed, self.ci)
        return self._forward_cache

    def _add_batch(self, preds, target, start):
        """Fill an accumulator with the batch, add its arrays to the state; returns it."""
        self._batches += 1
        acc = self._accumulator()
        row0 = int(self.n_rows) if start is None else start
        try:
            self._fill(acc, preds, target, row0)
        except ValueError as err:
            msg = f"batch {self._batches}: {err}"
            raise ValueError(msg) from None
        arrays = acc.to_arrays()
        before = [EDGE_DTYPES[i] for i in np.flatnonzero(self.edge_dtype.cpu().numpy())]
        if acc.edge_dtype is not None and before and before != [acc.edge_dtype]:
            msg = (f"batch {self._batches}: y_prob is {acc.edge_dtype} but earlier batches were "
                   f"{before[0]}, binned by other edges; cast every batch to one dtype (e.g. "
                   "preds.double())")
            raise ValueError(msg)
        for name in self._names:
            state = getattr(self, name)
            state += torch.from_numpy(arrays[name]).to(state.device)
        return acc

    def _fill(self, acc, preds, target, row0):
        if self.task == "binary" and getattr(preds, "ndim", 1) != 1:
            msg = (f"preds has shape {tuple(preds.shape)}, but task='binary' takes shape (n,), the "
                   "probability (or logit) of class 1; use task='multiclass' with num_classes=K "
                   "for (n, K) scores")
            raise ValueError(msg)
        if getattr(target, "ndim", 1) != 1:
            msg = (f"target has shape {tuple(target.shape)}, but CalibrationMetric takes labels "
                   "of shape (n,) (0/1, or class indices); soft labels are not supported")
            raise ValueError(msg)
        # a CUDA tensor (or CuPy, Numba array) is filled on its GPU: the gate decides
        acc.state.update(_detached(target), _detached(preds), start=row0)

    def merge_state(self, incoming_state):
        """Add another metric's state (or a dict of its states) to this one."""
        super().merge_state(incoming_state)
        self._computed = None  # torchmetrics keeps the cached compute() otherwise

    def _apply(self, fn, exclude_state=""):
        """``.to(...)``, ``.cuda()``, ``set_dtype``: states move, never change dtype (a
        float16 sum would lose the exactness the state is for)."""

        def same_dtype(t):
            out = fn(t)
            return out if out.dtype == t.dtype else t.to(out.device)

        return super()._apply(same_dtype, exclude_state)

    def reset(self):
        """Empty the state (and restart the batch count of error messages)."""
        super().reset()
        self._batches = 0

    # -- reading ---------------------------------------------------------

    def compute(self):
        """The report of every batch since ``reset()`` (summed over processes under DDP).

        Raises
        ------
        ValueError
            No rows were given, or every row was omitted as NaN.
        """
        acc = self._accumulator()
        acc.add_arrays({name: getattr(self, name).detach().cpu().numpy() for name in self._names})
        if acc.n_rows == 0:
            msg = "CalibrationMetric.compute(): no predictions were given since reset()"
            raise ValueError(msg)
        if acc.n == 0:
            msg = f"no samples left: all {acc.n_rows} rows were omitted as NaN"
            raise ValueError(msg)
        return _report(acc, self.observed, self.ci)

    @property
    def ecd(self):
        """ECD of ``compute()``, a float for ``self.log``."""
        return float(self.compute().ecd)

    @property
    def ece(self):
        """ECE of ``compute()``, a float for ``self.log``."""
        return float(self.compute().ece)


def _detached(x):
    return x.detach() if isinstance(x, torch.Tensor) else x


def _report(acc, observed, ci):
    rep = acc.report(observed=observed, ci=ci)
    rep.provenance = Provenance(n_rows=acc.n_rows, passes=1, pass_steps=[("fill", 1)])
    return rep


__all__ = ["CalibrationMetric"]

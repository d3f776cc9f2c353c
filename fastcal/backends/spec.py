"""What a backend is asked to fill: :class:`FillSpec`, one value per state.

A state (:mod:`fastcal.accumulators`) makes its spec once, from its
:class:`~fastcal.accumulators.settings.Settings` and its kind, and hands it
with each batch to its backend (:mod:`fastcal.backends`). The backend reads
the bins and options from the spec and returns named arrays
(:mod:`fastcal.backends.layout`); it never reads the state itself.
"""

from dataclasses import dataclass

import numpy as np

from fastcal.inputs.binning import Bins


@dataclass(frozen=True)
class FillSpec:
    """The bins and options of one state's fills, fixed when the state is made.

    ``kind``: the gate's kind of input ("binary", "logits", "multiclass" or
    "soft"). ``computed64``: the values binned are computed in float64
    (sigmoid, softmax, renormalised rows), so every input width shares
    float64 edges. The rest are the options of
    :class:`fastcal.CalibrationAccumulator`; ``n_boot``, ``ace_buckets``,
    ``smooth`` and ``ecce`` switch on the parts a checked chunk also fills
    (bootstrap replicates, ACE's value buckets, the smooth ECE grid, ECCE's
    value buckets). ``weighted``: the state keeps the weighted sums of rows
    with a ``sample_weight`` too (from the start, or from its first weighted
    batch).

    Examples
    --------
    >>> from fastcal.backends.spec import FillSpec
    >>> from fastcal.inputs.binning import Bins
    >>> spec = FillSpec("binary", Bins(4))
    >>> spec.edges("float64")
    (array([0.  , 0.25, 0.5 , 0.75, 1.  ]), True)
    >>> spec.parts
    False
    """

    kind: str
    bins: Bins = Bins()
    computed64: bool = False
    nan_policy: str = "raise"
    eps: float = 0.0
    threads: int | None = None
    with_logs: bool = True
    logits: bool = False
    renormalize: bool = False
    classwise: bool = True
    n_boot: int = 0
    seed: int = 0
    ace_buckets: int = 0
    smooth: bool = False
    ecce: bool = False
    weighted: bool = False  # the state keeps the weighted sums (wsums, wtotals, wclass)

    @classmethod
    def of(cls, settings, kind, computed64=False, **fields):
        """The spec of a state of ``kind`` made from ``settings`` (checked there);
        ``fields``: those the state's kind sets itself (``logits`` of binary logits)."""
        options = dict(nan_policy=settings.nan_policy, eps=settings.eps,
                       threads=settings.threads, with_logs=settings.with_logs,
                       logits=settings.logits, renormalize=settings.renormalize,
                       classwise=settings.classwise, n_boot=settings.n_boot, seed=settings.seed,
                       ace_buckets=settings.ace_buckets, smooth=settings.smooth,
                       ecce=settings.ecce, weighted=settings.weighted)
        return cls(kind, settings.bins, bool(computed64), **{**options, **fields})

    @property
    def n_bins(self):
        return self.bins.n_bins

    @property
    def right(self):
        """Bins closed on the right, as the kernels take it."""
        return self.bins.right

    @property
    def omit(self):
        return self.nan_policy == "omit"

    @property
    def parts(self):
        """True if a checked chunk fills more than its per-bin arrays."""
        return bool(self.n_boot or self.ace_buckets or self.smooth or self.ecce)

    def edges(self, dtype):
        """(edges, uniform) as the kernels take them for data of ``dtype``
        (float64 when the values are computed in float64)."""
        return self.bins.kernel_edges(np.float64 if self.computed64 else dtype)

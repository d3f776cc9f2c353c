"""The one scoring driver: every entry point (arrays, files, Dask, CLI) runs ``score``.

A source fills accumulators from its chunks (in memory, from a file with a
reader thread, or one per Dask partition merged in a tree) and returns the
merged state; the driver checks it, reads the report off it and, only when
ACE or equal-mass bins are asked for, runs the one equal-mass algorithm
(:mod:`fastcal.equal_mass`) over the source's parts. An option added to
``Options`` therefore reaches every entry point at once.

A source provides:

- ``fill(options) -> (accumulator, n_rows)``: one pass; errors name the row
  the way the source counts rows (array index, file and global row,
  partition);
- ``parts(pair) -> parts``: the data again as parts of fastcal.equal_mass,
  ranked by ``equal_mass.ranking_pair(**pair)``;
- ``empty``: the message for input without rows.
"""

from dataclasses import dataclass, replace

from . import _validation as v
from . import equal_mass as em
from .accumulator import CalibrationAccumulator
from .batch import resolve
from .report import CalibrationReport
from .stats import check_ci, check_count, check_seed


@dataclass(frozen=True)
class Options:
    """Every scoring option, checked once (``checked()``), the same for every entry point.

    See :func:`fastcal.calibration_report` for their meaning. ``ace`` is
    True by default for arrays, False for files and Dask (one pass).
    """

    n_bins: int = 10
    edges: object = None
    closed: str = "left"
    strategy: str = "uniform"
    observed: str = "frac_pos"
    nan_policy: str = "raise"
    eps: float = None
    ace: bool = True
    threads: int = None
    ci: float = None
    n_boot: int = 200
    seed: int = 0
    logits: bool = False
    renormalize: bool = False
    classwise: bool = True  # K classes: keep the class-wise state
    device: str = None  # None: where the data is; "cpu"; "cuda"
    with_logs: bool = True  # False: binned metrics only (ece/esce/mce), no logarithms

    def checked(self):
        v.check_choice("strategy", self.strategy, v.STRATEGIES)
        v.check_choice("observed", self.observed, v.OBSERVED)
        if self.device is not None:
            v.check_choice("device", self.device, ("cpu", "cuda"))
        if self.strategy == "quantile" and self.edges is not None:
            msg = "edges cannot be combined with strategy='quantile'"
            raise ValueError(msg)
        return replace(self, ci=check_ci(self.ci), n_boot=check_count("n_boot", self.n_boot, 0),
                       seed=check_seed(self.seed), ace=bool(self.ace))

    @property
    def equal_mass(self):
        return self.strategy == "quantile" or self.ace

    def accumulator(self, **overrides):
        """A fresh accumulator for these options (``overrides``: e.g. threads)."""
        boot = self.ci is not None and self.strategy == "uniform" and self.n_boot > 0
        n_bins = v.check_n_bins(self.n_bins) if self.edges is None else len(self.edges) - 1
        kwargs = dict(n_bins=self.n_bins, edges=self.edges, closed=self.closed,
                      nan_policy=self.nan_policy, eps=self.eps, threads=self.threads,
                      n_boot=self.n_boot if boot else 0, seed=self.seed, logits=self.logits,
                      renormalize=self.renormalize, classwise=self.classwise,
                      ace_buckets=em.fine_buckets_for(n_bins) if self.equal_mass else 0)
        kwargs.update(overrides)
        acc = CalibrationAccumulator(**kwargs)
        acc._with_logs = self.with_logs
        return acc


def score(source, options):
    """The report of a source: one fill, then equal-mass bins if asked for.

    Returns a :class:`~fastcal.CalibrationReport` (a MulticlassReport for K
    classes) with ``n_rows`` (rows read, omitted ones included) and
    ``passes`` (over the data).
    """
    opts = options.checked()
    acc, n_rows = source.fill(opts)
    if n_rows == 0:
        raise ValueError(source.empty)
    if acc.n == 0:
        msg = f"{source.prefix}no samples left: all {n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    passes = 1
    omit = acc.nan_policy == "omit"
    if opts.strategy == "quantile":
        if acc.n_classes is not None:
            msg = (f"{source.prefix}equal-mass bins (strategy='quantile') take one probability "
                   f"column; {source.what} holds {acc.n_classes} classes: their equal-mass "
                   "top-label ECE is the report's ace (pass ace=True)")
            raise ValueError(msg)
        parts = source.parts(_pair(acc))
        counts, sums, totals, lower, upper, extra = em.groups(
            parts, acc.n_bins, omit=omit, eps=acc.eps, with_logs=True,
            hist=acc.fine_counts[:-1, 0])
        rep = CalibrationReport.from_state(
            counts, sums, totals, edges=None, closed=acc.closed, n_omitted=acc.n_omitted,
            observed=opts.observed, strategy="quantile", eps=acc.eps, lower=lower, upper=upper)
        rep.ace = rep.ece
        if opts.ci is not None:
            rep.set_intervals(opts.ci)
        passes += extra
    else:
        rep = acc.report(observed=opts.observed, ci=opts.ci)
        if opts.ace:
            rep.ace, extra = em.ace(acc.fine_counts, acc.fine_p, acc.n_bins,
                                    source.parts(_pair(acc)), omit, opts.observed)
            passes += extra
    rep.n_rows = n_rows
    rep.passes = passes
    return rep


def _pair(acc):
    return dict(logits=acc.logits, renormalize=acc.renormalize, eps=acc.eps)


class ArraySource:
    """Arrays in memory: one chunk (the kernels run it on all threads), and
    thread slices as the parts of the equal-mass passes."""

    prefix = ""  # what error messages start with
    what = "y_prob"  # how messages name the probabilities
    empty = "y_true and y_prob are empty; need at least one sample"

    def __init__(self, y_true, y_prob):
        self.y_true = y_true
        self.y_prob = y_prob

    def fill(self, opts):
        from . import cuda

        on_gpu = cuda.is_device_array(self.y_prob)
        if opts.device == "cuda" or (opts.device is None and on_gpu):
            return self._fill_device(opts, on_gpu)
        if on_gpu:  # device="cpu": copy to the host first
            self.y_prob = cuda.as_device_array("y_prob", self.y_prob).copy_to_host()
            if cuda.is_device_array(self.y_true):
                self.y_true = cuda.as_device_array("y_true", self.y_true).copy_to_host()
        self.batch = resolve(self.y_true, self.y_prob, logits=opts.logits)
        if self.batch.n == 0:
            raise ValueError(self.empty)
        acc = opts.accumulator()
        acc.update_batch(self.batch)
        self.threads = acc.threads
        return acc, acc.n_rows

    def _fill_device(self, opts, on_gpu):
        """The fill on the GPU (fastcal.cuda); host data is streamed to it in chunks."""
        from . import cuda

        p = self.y_prob if on_gpu else v.to_array("y_prob", self.y_prob)
        if int(p.shape[0]) == 0:
            raise ValueError(self.empty)
        acc = opts.accumulator()
        acc.update_device(self.y_true, p)
        self.threads = acc.threads
        self.batch = None
        self.device_pair = (self.y_true, p)
        return acc, acc.n_rows

    def parts(self, pair):
        if self.batch is None:  # device data: the equal-mass passes run on a host copy
            from . import cuda

            y, p = (cuda.as_device_array(n, a).copy_to_host() if cuda.is_device_array(a)
                    else v.to_array(n, a) for n, a in zip(("y_true", "y_prob"),
                                                          self.device_pair))
            self.batch = resolve(y, p, logits=pair["logits"])
        y, x = em.ranking_pair(self.batch.y, self.batch.p, **pair)
        return em.ArrayParts(y, x, v.check_threads(self.threads))


def fill_arrays(y_true, y_prob, options):
    """(accumulator, batch) of in-memory arrays after one checked pass, for
    functions that read the state directly (ece, the tests of calibration)."""
    source = ArraySource(y_true, y_prob)
    acc, n_rows = source.fill(options.checked())
    if acc.n == 0:
        msg = f"no samples left: all {n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    return acc, source.batch

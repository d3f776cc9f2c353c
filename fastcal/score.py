"""The one scoring driver: every entry point (arrays, files, Dask, CLI) runs ``score``.

A source fills accumulators from its chunks (in memory, from a file with a
reader thread, or one per Dask partition merged in a tree) and returns the
merged state; the driver checks it, reads the report off it and, only when
ACE or equal-mass bins are asked for, runs the one equal-mass algorithm
(:mod:`fastcal.accumulators.equal_mass`) over the source's parts. The measures named in
``metrics=`` (``OPTIONAL_METRICS``: ECE-sweep, TACE) run last, over the same parts. An
option added to ``Options`` therefore reaches every entry point at once.

Segments (``by=``): :func:`score_by` runs ``score`` on the whole and on each
segment's rows of arrays in memory (every option applies to each segment), and
:func:`score_segments` reads a report per key off the
:class:`~fastcal.accumulators.segmented.SegmentedAccumulator` a source fills in
one pass (``source.fill_segments``: files); both return a
:class:`~fastcal.reports.segmented.SegmentedReport`.

A source provides:

- ``fill(options) -> (accumulator, n_rows)``: one pass; errors name the row
  the way the source counts rows (array index, file and global row,
  partition);
- ``parts(pair) -> parts``: the data again as parts of fastcal.accumulators.equal_mass,
  ranked by ``equal_mass.ranking_pair(**pair)``;
- ``empty``: the message for input without rows;
- ``provenance``: what the report says about the source (a dict of
  :class:`~fastcal.reports.provenance.Provenance` fields: ``source``,
  ``format``, ``dask``).
"""

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from fastcal.accumulators import ecce as ecce_
from fastcal.accumulators import equal_mass as em
from fastcal.accumulators import sweep
from fastcal.accumulators import tace as tc
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.accumulators.segmented import SegmentedAccumulator
from fastcal.accumulators.settings import Settings
from fastcal.backends.cpu import PARALLEL_MIN_ROWS
from fastcal.inputs import validation as v
from fastcal.inputs.batch import check_hard_labels
from fastcal.inputs.binning import Bins
from fastcal.inputs.convert import to_numpy
from fastcal.inputs.segments import MAX_SEGMENTS, factorize, grouped
from fastcal.reports.provenance import Provenance
from fastcal.reports.report import CalibrationReport, certain_wrong, smooth_measures
from fastcal.reports.segmented import SegmentedReport
from fastcal.reports.stats import check_ci, check_count, check_seed
from fastcal.sources.arrays import ArraySource


def _smece(source, acc, opts):
    """Smooth ECE: read off the grid the fill filled (``Options.smooth``); no pass."""
    return {}, 0


def _ece_sweep(source, acc, opts):
    """ECE-sweep over the source's ranked pairs (top-label for K classes)."""
    value, bins, passes = sweep.ece_sweep(
        acc.fine_counts, acc.fine_p, source.parts(acc.ranking_options()), acc.nan_policy == "omit",
        strategy=opts.sweep, right=acc.closed == "right")
    return {"ece_sweep": value, "ece_sweep_bins": bins}, passes


def _tace(source, acc, opts):
    """TACE over each class's probabilities above the threshold (K classes)."""
    if acc.n_classes is None:
        msg = (f"{source.prefix}metrics 'tace' is class-wise and needs K class columns; "
               f"{source.what} holds one probability column (binary): drop 'tace'")
        raise ValueError(msg)

    def parts_of(k):
        return source.parts(dict(acc.ranking_options(), column=k, above=opts.tace_threshold))

    value, passes = tc.tace(parts_of, acc.n_classes, acc.n_bins, opts.tace_threshold)
    return {"tace": value, "tace_threshold": opts.tace_threshold}, passes


def _ecce(source, acc, opts):
    """ECCE from the fill's value buckets: one more pass over the buckets that can
    hold the extremes of the running sums (:mod:`fastcal.accumulators.ecce`)."""
    weighted = getattr(source, "weighted", False)
    if getattr(source, "row_weights", False):  # parts that carry each row's weight
        parts = source.parts(acc.ranking_options(), weights=weighted)
    else:
        parts = source.parts(acc.ranking_options())
        if weighted and not hasattr(source, "weights"):
            msg = (f"{source.prefix}metrics 'ecce' with weighted rows is computed from arrays "
                   "in memory or files (fastcal.ecce, calibration_report or score_file with "
                   "weights); leave 'ecce' out here")
            raise ValueError(msg)
        w = source.weights() if weighted else None
        if w is not None:
            parts = ecce_.RowParts(parts.host, w)
    ecce, sigma, pvalue, passes = ecce_.exact(*acc.ecce_state(), parts)
    return {"ecce": ecce, "ecce_sigma": sigma, "ecce_pvalue": pvalue}, passes


# The measures computed only when named in ``metrics=`` (each costs more than 10% of the
# fill): name -> function(source, accumulator, options) that returns the values of
# the report's fields (a dict, added by ``with_measures``) and the passes over the data it
# took. One line adds a measure.
OPTIONAL_METRICS = {
    "smece": _smece,
    "ece_sweep": _ece_sweep,
    "tace": _tace,
    "ecce": _ecce,
}
# optional measures that rank the data (they need the fill's value buckets)
_RANKED = ("ece_sweep",)


def check_metrics(metrics):
    """``metrics`` as a tuple of known names: a name, or an iterable of names."""
    names = (metrics,) if isinstance(metrics, str) else tuple(metrics or ())
    unknown = [m for m in names if m not in OPTIONAL_METRICS]
    if unknown:
        msg = (f"metrics has unknown name{'s' if len(unknown) > 1 else ''} "
               f"{', '.join(repr(m) for m in unknown)}; valid names: "
               f"{', '.join(OPTIONAL_METRICS)}")
        raise ValueError(msg)
    return tuple(dict.fromkeys(names))


def _for_metric(name, value, metric, what, metrics):
    """An option of one optional measure, given while the measure is not asked for: it
    would change nothing, so it is refused rather than ignored."""
    if value is not None and metric not in metrics:
        msg = (f"{name}={v.show(value)} is for {what}, which is not asked for: pass "
               f"metrics=['{metric}'] too, or leave {name} out")
        raise ValueError(msg)


def _default(value, default, metric, metrics):
    """An optional measure's option: its default once the measure is asked for, else
    None (the measure does not run)."""
    if metric not in metrics:
        return None
    return default if value is None else value


@dataclass(frozen=True)
class Options:
    """Every scoring option, checked once when made, the same for every entry point.

    See :func:`fastcal.calibration_report` for their meaning. ``ace`` is
    True by default for arrays, False for files and Dask (one pass).
    ``bins`` is the :class:`~fastcal.inputs.binning.Bins` of ``n_bins``,
    ``edges`` and ``closed``, made here once: every accumulator of these
    options holds it.

    Examples
    --------
    >>> from fastcal.score import Options
    >>> Options(n_bins=5, ace=False).n_bins
    5
    >>> Options(edges=[0, 0.5, 1]).bins.n_bins
    2
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
    smooth: bool = False  # True: also fill the grid of smooth ECE (report.smece, smece_sigma)
    # a fitted recalibration map (fastcal.recalibrate), called on the probabilities (or logits,
    # with logits=True) of every chunk before it is scored; it returns probabilities
    transform: object = None
    # optional measures (names of OPTIONAL_METRICS), computed after the fill
    metrics: tuple = ()
    # the bins ECE-sweep sweeps: "quantile" (equal-mass, Roelofs et al.) or "uniform";
    # None: not given ("quantile" once "ece_sweep" is in metrics). Given without
    # "ece_sweep" in metrics, it is refused (it would change nothing).
    sweep: str = None
    # TACE: the class probabilities ranked are those above this; None: not given (1e-3
    # once "tace" is in metrics). Given without "tace" in metrics, it is refused.
    tace_threshold: float = None
    bins: Bins = field(init=False, repr=False, compare=False)  # made here, of the three above

    def __post_init__(self):
        """Check the options once, where they are made: every layer below reads
        this one object as it is."""
        v.check_choice("strategy", self.strategy, v.STRATEGIES)
        if self.sweep is not None:
            v.check_choice("sweep", self.sweep, sweep.SWEEPS)
        v.check_choice("observed", self.observed, v.OBSERVED)
        if self.device is not None:
            v.check_choice("device", self.device, ("cpu", "cuda"))
        if self.strategy == "quantile" and self.edges is not None:
            msg = "edges cannot be combined with strategy='quantile'"
            raise ValueError(msg)
        if self.strategy == "quantile" and self.ci is not None:
            # refused, not NaN: the Poisson bootstrap of ECE/ESCE/MCE fills replicates of
            # fixed bins in the first pass, before the equal-mass groups exist
            msg = ("ci cannot be combined with strategy='quantile': the bootstrap intervals of "
                   "ECE, ESCE and MCE need bins fixed before the data is read; use "
                   "strategy='uniform' or explicit edges with ci (the ECD, Brier and NLL "
                   "intervals do not depend on the bins), or drop ci")
            raise ValueError(msg)
        metrics = check_metrics(self.metrics) if self.metrics else ()
        smooth = bool(self.smooth) or "smece" in metrics
        threshold = (None if self.tace_threshold is None
                     else tc.check_threshold(self.tace_threshold))
        _for_metric("sweep", self.sweep, "ece_sweep", "ECE-sweep", metrics)
        _for_metric("tace_threshold", threshold, "tace", "TACE", metrics)
        checked = dict(bins=Bins(self.n_bins, self.edges, self.closed), ci=check_ci(self.ci),
                       n_boot=check_count("n_boot", self.n_boot, 0),
                       seed=check_seed(self.seed), ace=bool(self.ace), smooth=smooth,
                       metrics=metrics,
                       sweep=_default(self.sweep, "quantile", "ece_sweep", metrics),
                       tace_threshold=_default(threshold, 1e-3, "tace", metrics))
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    def checked(self):
        """These options (checked when they were made)."""
        return self

    @property
    def equal_mass(self):
        return self.strategy == "quantile" or self.ace or (bool(self.metrics) and any(
            m in _RANKED for m in check_metrics(self.metrics)))

    def accumulator(self, n_rows=None):
        """A fresh accumulator for these options; ``n_rows``, when the source knows
        it, sizes ACE's bucket statistics."""
        return CalibrationAccumulator.of(self.settings(n_rows))

    def segmented(self, max_segments=MAX_SEGMENTS):
        """A fresh :class:`~fastcal.accumulators.segmented.SegmentedAccumulator` for
        these options (a state per segment key, filled in one pass)
        (ECCE, in ``metrics``: the segments' value buckets, kept once for all of
        them, not by each segment's accumulator)."""
        with_ecce = "ecce" in self.metrics
        return SegmentedAccumulator.of(replace(self.settings(), ecce=False),
                                       max_segments=max_segments, ecce=with_ecce)

    def settings(self, n_rows=None):
        """The accumulators' :class:`~fastcal.accumulators.settings.Settings` of these options."""
        boot = self.ci is not None and self.strategy == "uniform" and self.n_boot > 0
        return (Settings(
            self.bins, nan_policy=self.nan_policy, eps=self.eps, threads=self.threads,
            n_boot=self.n_boot if boot else 0, seed=self.seed,
            logits=self.logits and self.transform is None, renormalize=self.renormalize,
            classwise=self.classwise, with_logs=self.with_logs, smooth=self.smooth,
            ecce="ecce" in self.metrics,
            ace_buckets=em.fine_buckets_for(self.bins.n_bins, n_rows) if self.equal_mass else 0))


def score(source, opts):
    """The report of a source: one fill, then equal-mass bins if asked for.

    Returns a :class:`~fastcal.CalibrationReport` (a MulticlassReport for K
    classes, a SoftLabelReport for soft labels) whose ``provenance``
    (:class:`~fastcal.reports.provenance.Provenance`) says how it was made:
    ``n_rows`` (rows read, omitted ones included), ``passes`` (over the data)
    and ``pass_steps``, what the passes were, in order: (what, passes) with
    what "fill", "equal-mass bins", "ACE" or "certain-and-wrong rows" (a step
    that needed no pass is left out), and the source's own fields (``source``
    and ``format`` for files, ``dask`` for a cluster); each is also an
    attribute of the report (``rep.passes``).

    Examples
    --------
    >>> from fastcal import simulate
    >>> from fastcal.score import Options, score
    >>> from fastcal.sources.arrays import ArraySource
    >>> y, p = simulate(2_000, sigma=0.5, seed=0)
    >>> rep = score(ArraySource(y, p), Options(n_bins=5))
    >>> rep.n, rep.passes, rep.pass_steps
    (2000, 2, [('fill', 1), ('ACE', 1)])
    """
    return _scored(source, opts)[0]


def _scored(source, opts):
    """``score``'s report and the accumulator it was read from."""
    if getattr(source, "weighted", False):
        check_weighted(opts)
    acc, n_rows = source.fill(opts)
    if n_rows == 0:
        raise ValueError(source.empty)
    if acc.n == 0:
        msg = f"{source.prefix}no samples left: all {n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    if getattr(acc, "weighted", False) and not acc.wsums[:, 0].sum() > 0:
        msg = (f"{source.prefix}sample_weight is 0 in all {acc.n} rows left after omitting "
               "NaN rows; at least one weight must be > 0")
        raise ValueError(msg)
    rep, steps = REPORTS[acc.kind](source, acc, opts)
    rep.provenance = Provenance(n_rows=n_rows, passes=sum(k for _, k in steps),
                                pass_steps=[(what, k) for what, k in steps if k],
                                **source.provenance)
    return rep, acc


def check_weighted(opts):
    """Refuse, in one line, the options whose measures do not take weights (yet):
    equal-mass bins and ACE (by rank, not by cumulative weight), smooth ECE,
    ECE-sweep and TACE."""
    refused = []
    if opts.strategy == "quantile":
        refused.append(("strategy='quantile'", "equal-mass bins rank rows, not weights; use "
                        "strategy='uniform' or edges"))
    elif opts.ace:
        refused.append(("ace=True", "ACE's equal-mass bins rank rows, not weights; pass "
                        "ace=False"))
    if opts.smooth:
        refused.append(("smooth ECE", "its grid does not take weights; leave smooth out"))
    for name in opts.metrics:
        if name in ("ece_sweep", "tace"):
            refused.append((f"metrics {name!r}", "its equal-mass passes rank rows, not "
                            f"weights; leave {name!r} out"))
    if refused:
        what, why = refused[0]
        msg = f"sample_weight cannot be combined with {what}: {why}"
        raise ValueError(msg)


def _binned_report(source, acc, opts):
    """The report of binned state and the passes it took: (report, steps)."""
    steps = [("fill", 1)]
    omit = acc.nan_policy == "omit"
    if opts.strategy == "quantile":
        if acc.n_classes is not None:
            msg = (f"{source.prefix}equal-mass bins (strategy='quantile') take one probability "
                   f"column; {source.what} holds {acc.n_classes} classes: their equal-mass "
                   "top-label ECE is the report's ace (pass ace=True)")
            raise ValueError(msg)
        parts = source.parts(acc.ranking_options())
        # the fill's value buckets serve as the first histogram unless there are
        # too few of them for the groups (then one more pass makes a finer one)
        fine = acc.fine_counts[:-1, 0]
        hist = fine if fine.shape[0] >= 4 * acc.n_bins else None
        counts, sums, totals, lower, upper, extra = em.groups(
            parts, acc.n_bins, omit=omit, eps=acc.eps, with_logs=True, hist=hist)
        rep = CalibrationReport.from_state(
            counts, sums, totals, edges=None, closed=acc.closed, n_omitted=acc.n_omitted,
            observed=opts.observed, strategy="quantile", eps=acc.eps, lower=lower, upper=upper)
        rep.with_measures({"ace": rep.ece})
        if acc.smooth:
            rep.with_measures(smooth_measures(*acc.smooth_grid()))
        steps.append(("equal-mass bins", extra))
    else:
        rep = acc.report(observed=opts.observed, ci=opts.ci)
        if opts.ace:
            ace, extra = em.ace(acc.fine_counts, acc.fine_p, acc.n_bins,
                                source.parts(acc.ranking_options()), omit, opts.observed)
            rep.with_measures({"ace": ace})
            steps.append(("ACE", extra))
    for name in opts.metrics:
        values, passes = OPTIONAL_METRICS[name](source, acc, opts)
        rep.with_measures(values)
        steps.append((name, passes))
    values, passes = _count_certain_wrong(source, acc, rep)
    rep.with_measures(values)
    steps.append(("certain-and-wrong rows", passes))
    return rep, steps


def _soft_report(source, acc, opts):
    """Soft labels have no bins: no equal-mass bins, ACE or intervals; (report, steps)."""
    if opts.strategy == "quantile":
        msg = (f"{source.prefix}strategy='quantile' bins probabilities of one class; soft labels "
               "(a label distribution per row) have no bins")
        raise ValueError(msg)
    if opts.ci is not None:
        msg = f"{source.prefix}confidence intervals (ci=) are not available for soft labels"
        raise ValueError(msg)
    if opts.smooth:
        msg = (f"{source.prefix}smooth ECE takes hard labels (0/1, or a class per row); soft "
               "labels (a label distribution per row) have no smooth ECE grid")
        raise ValueError(msg)
    if "ecce" in opts.metrics:
        msg = (f"{source.prefix}ECCE takes hard labels (0/1, or a class per row); soft labels "
               "(a label distribution per row) have no cumulative differences of y - p")
        raise ValueError(msg)
    return acc.report(), [("fill", 1)]


# The report of each kind of state (the gate's kind of its input) and the passes it took
REPORTS = {"binary": _binned_report, "logits": _binned_report, "multiclass": _binned_report,
           "soft": _soft_report}


def _count_certain_wrong(source, acc, rep):
    """Rows predicted with certainty and wrong (binary: p exactly 0 with y = 1, or
    1 with y = 0; K classes: the true class's probability exactly 0, or its logit
    -inf) and the first of them, by one light pass over the rows as given that
    runs only when the state shows one (a bin with ECD +inf), without eps.
    Returns the report's values and the passes it took."""
    if acc.kind not in ("binary", "multiclass") or acc.eps or not rep.certain_wrong_bins:
        return {}, 0
    n, first, _ = source.parts(dict(acc.ranking_options(), raw=True)).map(
        _certain_wrong, (acc.kind, acc.logits), combine=_add_certain_wrong)
    return {"n_certain_wrong": n, "first_certain_wrong_row": None if first < 0 else first}, 1


def _certain_wrong(y, p, kind, logits):
    """(count, first row of the part or -1, rows of the part)."""
    bad = np.flatnonzero(certain_wrong(y, p, kind=kind, logits=logits))
    return int(bad.size), int(bad[0]) if bad.size else -1, int(p.shape[0])


def _add_certain_wrong(acc, r):
    """Fold in part order: the first row is global (rows of earlier parts added)."""
    if acc is None:
        return r
    n, first, rows = acc
    first = first if first >= 0 else (r[1] + rows if r[1] >= 0 else -1)
    return n + r[0], first, rows + r[2]


def fill_arrays(y_true, y_prob, options, sample_weight=None):
    """(accumulator, batch) of in-memory arrays after one checked pass, for
    functions that read the state directly (ece, the tests of calibration);
    ``batch.host()`` gives the rows on the host (a copy of GPU data).
    ``sample_weight``: a weight per row (see :func:`fastcal.calibration_report`)."""
    source = ArraySource(y_true, y_prob, sample_weight=sample_weight)
    if source.weighted:
        check_weighted(options)
    acc, n_rows = source.fill(options)
    if acc.n == 0:
        msg = f"no samples left: all {n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    if getattr(acc, "weighted", False) and not acc.wsums[:, 0].sum() > 0:  # soft labels: never weighted
        msg = (f"sample_weight is 0 in all {acc.n} rows left after omitting NaN rows; at "
               "least one weight must be > 0")
        raise ValueError(msg)
    return acc, source.batch


# -- segments: a report per segment key ---------------------------------------------


def _n_rows(x):
    """The rows of an array-like before the gate reads it (None if it has no length)."""
    shape = getattr(x, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    try:
        return len(x)
    except TypeError:
        return None


def score_by(y_true, y_prob, by, opts, *, sample_weight=None, correction="holm", alpha=0.05,
             max_segments=MAX_SEGMENTS):
    """The :class:`~fastcal.reports.segmented.SegmentedReport` of arrays in memory:
    ``score`` of the whole, then ``score`` of each segment's rows (in their order:
    contiguous slices of the rows grouped by segment once), so that each segment's
    report is that of its rows alone, every option included (ACE, intervals). The
    segments' ECCE (``metrics=("ecce",)``) is read off one segmented state of all
    of them (:func:`_ecce_by`). ``by`` of another length than the rows, or of more
    distinct keys than ``max_segments``, is refused before anything is filled.

    A segment whose rows are all omitted (NaN under nan_policy='omit'), or whose
    weights are all 0, keeps an empty report (NaN figures, no test): it is never
    dropped.
    """
    check_hard_labels(y_true)
    threads = v.check_threads(opts.threads)
    codes, keys = factorize(by, _n_rows(y_prob), max_segments=max_segments, threads=threads)
    source = ArraySource(y_true, y_prob, sample_weight=sample_weight)
    with_ecce = "ecce" in opts.metrics
    if with_ecce:  # the whole's and each segment's from one state of all of them, below
        opts = Options(**{**_fields(opts), "metrics": tuple(m for m in opts.metrics
                                                             if m != "ecce")})
    overall, acc = _scored(source, opts)
    y, p = source.batch.host()
    w = None if sample_weight is None else to_numpy("sample_weight", sample_weight)
    # a segment's rows: a slice (and each grouped row's segment, for ECCE's passes)
    (y, p, w, codes), bounds = grouped((y, p, w, codes if with_ecce else None), codes,
                                       len(keys), threads)

    def one(k):
        rows = slice(int(bounds[k]), int(bounds[k + 1]))
        part = ArraySource(y[rows], p[rows], sample_weight=None if w is None else w[rows],
                           soft=source.soft)
        try:
            return score(part, opts)
        except ValueError:  # no rows left, or no weight: an empty report, not a dropped key
            empty = Options(**{**_fields(opts), "ace": False, "metrics": ()}).accumulator()
            empty.update(y[rows], p[rows], sample_weight=None if w is None else w[rows])
            rep = empty.report(observed=opts.observed)
            rep.provenance = Provenance(n_rows=rows.stop - rows.start, passes=1,
                                        pass_steps=[("fill", 1)])  # its rows, all omitted
            return rep

    # the segments in threads (their kernels release the GIL); each report is its own
    n_threads = min(threads, len(keys))
    if n_threads > 1 and y.shape[0] >= PARALLEL_MIN_ROWS:
        with ThreadPoolExecutor(n_threads) as pool:
            done = list(pool.map(one, range(len(keys))))
    else:
        done = [one(k) for k in range(len(keys))]
    reports = dict(zip(keys, done))
    if with_ecce:
        values, whole = _ecce_by(em.ranking_pair(y, p, kind=acc.kind, **acc.ranking_options()),
                                 w, codes, len(keys), acc.threads)
        for k, key in enumerate(keys):  # the bucket pass, then the search's
            _with_ecce(reports[key], *(v[k] for v in values[:3]), values[3] + 1)
        _with_ecce(overall, *whole[:3], whole[3] + 1)
    return SegmentedReport(reports, overall, correction=correction, alpha=alpha)


def _ecce_by(pair, w, codes, n_segments, threads):
    """(ecce, ecce_sigma, ecce_pvalue, passes) of every segment (arrays of
    ``n_segments`` values) and of the whole, read off one segmented state of ECCE's
    value buckets (:func:`fastcal.accumulators.ecce.segment_state`: one pass over
    the ranked ``pair`` with a segment code per row, fastest with the rows grouped
    by segment; the whole's buckets are their sum) and the exact passes that find
    every segment's extremes and the whole's together."""
    rows = ecce_.RowParts(em.ArrayParts(*pair, v.check_threads(threads)), w, codes)
    state = ecce_.segment_state(rows, n_segments, ecce_.segment_buckets(n_segments, codes.shape[0]))
    whole = tuple(a.sum(axis=0) for a in state)
    return ecce_.exact_all([state, whole], rows)


def _with_ecce(rep, value, scaled, pvalue, passes):
    rep.with_measures({"ecce": float(value), "ecce_sigma": float(scaled),
                       "ecce_pvalue": float(pvalue)})
    prov = rep.provenance
    if not passes:
        return
    rep.provenance = replace(prov, passes=(prov.passes or 0) + passes,
                             pass_steps=[*prov.pass_steps, ("ecce", passes)])


def _fields(opts):
    return {name: getattr(opts, name) for name in opts.__dataclass_fields__
            if opts.__dataclass_fields__[name].init}


def check_segmented(opts, prefix="", over="the file", ecce=False):
    """Refuse, in one line, what a streamed segment state cannot give: the measures
    that take more passes over each segment's rows (``over``: what the one pass
    reads; ECCE too where the source's parts cannot name each row's segment:
    ``ecce=False``)."""
    refused = []
    if opts.strategy == "quantile":
        refused.append("strategy='quantile'")
    if opts.ace:
        refused.append("ace=True")
    kept = ("smece", "ecce") if ecce else ("smece",)
    refused += [f"metrics {m!r}" for m in opts.metrics if m not in kept]
    if refused:
        msg = (f"{prefix}by= scores each segment in one pass over {over}: {refused[0]} needs "
               "more passes over each segment's rows; leave it out (or score the segments' "
               "rows in memory with fastcal.calibration_report(..., by=...))")
        raise ValueError(msg)


def score_segments(source, opts, *, correction="holm", alpha=0.05, max_segments=MAX_SEGMENTS,
                   columns=None):
    """The :class:`~fastcal.reports.segmented.SegmentedReport` of a source that fills a
    :class:`~fastcal.accumulators.segmented.SegmentedAccumulator` in one pass
    (``source.fill_segments``): each segment's report is read off its state."""
    check_segmented(opts, source.prefix, getattr(source, "over", "the file"),
                    ecce=getattr(source, "segment_parts", False))
    if getattr(source, "weighted", False):
        check_weighted(opts)
    acc, n_rows = source.fill_segments(opts, max_segments)
    if n_rows == 0:
        raise ValueError(source.empty)
    if acc.overall.n == 0:
        msg = f"{source.prefix}no samples left: all {n_rows} rows were omitted as NaN"
        raise ValueError(msg)
    rep = acc.report(observed=opts.observed, ci=opts.ci, correction=correction, alpha=alpha,
                     columns=columns)
    rep.overall.provenance = Provenance(n_rows=n_rows, passes=1, pass_steps=[("fill", 1)],
                                        **source.provenance)
    if "ecce" in opts.metrics:
        _segments_ecce(source, acc, rep)
    return rep


def _segments_ecce(source, acc, rep):
    """Every segment's ECCE and the whole's, from the segments' value buckets of the
    fill: the passes of :func:`fastcal.accumulators.ecce.exact` over the source's
    parts, each row with its weight and its segment."""
    parts = source.parts(acc.ranking_options(), weights=getattr(source, "weighted", False),
                         codes=acc.ecce_rows())
    values, whole = ecce_.exact_all(acc.ecce_state(), parts)  # the same passes for both
    for k, key in enumerate(acc.keys()):
        _with_ecce(rep[key], *(v[k] for v in values[:3]), 0)
    _with_ecce(rep.overall, *whole)


__all__ = ["Options", "score", "score_by", "score_segments"]

"""The CPU backend: the Numba kernels over host arrays, run in threads.

The interface is the one of :mod:`fastcal.backends`: every function takes
values (a batch, the state's :class:`~fastcal.backends.spec.FillSpec`,
ranked pairs) and returns named arrays in the layout of
:mod:`fastcal.backends.layout`; the functions below them run one kernel on
validated arrays and are what the GPU backend's fills are tested against.
Every thread threshold of the CPU fills is here.
"""

import dataclasses
import weakref

import numpy as np

from fastcal._kernels import _config
from fastcal._kernels import binary as kb
from fastcal._kernels import bootstrap as kboot
from fastcal._kernels import ecce as kec
from fastcal._kernels import equal_mass as kem
from fastcal._kernels import gaussian as kg
from fastcal._kernels import logits as kl
from fastcal._kernels import multiclass as km
from fastcal._kernels import smooth as ksm
from fastcal._kernels import soft as ks
from fastcal._kernels import weighted as kw
from fastcal._kernels._threads import run_threads, thread_range
from fastcal.backends.layout import LAYOUTS, Dims
from fastcal.inputs import validation as v

# Below these sizes one thread is faster than starting the thread pool.
PARALLEL_MIN_ROWS = 200_000          # binary rows, and rows of the smooth ECE grid
PARALLEL_MIN_ELEMENTS = 1_000_000    # K-class and soft-label values
PARALLEL_MIN_DRAWS = 5_000_000       # bootstrap draws (rows x replicates)

_ARRAYS = {a.name: a for a in LAYOUTS["multiclass"]}


def zeros(spec, *names):
    """Zeroed state arrays ``names`` of a state of ``spec``, shaped by its layout."""
    dims = Dims.of(spec)
    return {name: _ARRAYS[name].zeros(dims) for name in names}


# -- the interface -------------------------------------------------------------

def fill(batch, spec):
    """One chunk's state in its kind's layout, and its checks (named arrays):
    binary (counts, sums, totals, checks; with ``spec.ace_buckets`` the value
    buckets fine_counts, fine_p, filled by the same pass), K classes (counts,
    sums, totals, class_counts and class_sums when class-wise, checks), soft
    labels (totals, checks). A batch with weights (``batch.w``) is filled by the
    weighted kernels (:func:`fill_weighted`), which add the weighted sums."""
    if batch.w is not None:
        return fill_weighted(batch, spec)
    if batch.kind == "multiclass" and _ranks_in_fill(spec):
        return _multiclass_ranked(batch, spec)
    return _FILLS[batch.kind](batch.y, batch.p, spec)


def _ranks_in_fill(spec):
    """Whether a K-class fill writes its rows' ranked pair for the passes after it
    (``fill_parts``: ACE's value buckets, the smooth ECE grid, ECCE, the bootstrap):
    rows of probabilities, not clipped (the pair is then each row's own maximum, as
    ``confidence_fast`` gives it), where ranking them again would read the rows again
    (at K = 10 about a seventh of the fill)."""
    return spec.parts and not spec.logits and not spec.renormalize and spec.eps == 0.0


def _pair_options(spec):
    """The options of the pair that the passes after a fill rank (as
    ``CalibrationAccumulator.ranking_options``)."""
    return {"logits": spec.logits, "renormalize": spec.renormalize, "eps": spec.eps}


def _multiclass_ranked(batch, spec):
    """The K-class fill that writes the rows' ranked pair too, kept with the batch
    for ``fill_parts`` and the gather (``ranked``)."""
    n = batch.p.shape[0]
    conf, correct = np.empty(n, np.float64), np.empty(n, np.uint8)
    out = _multiclass(batch.y, batch.p, spec, rank=(conf, correct))
    _keep_ranked(batch, _pair_options(spec), (v.kernel_view(correct), v.kernel_view(conf)))
    return out


def fill_weighted(batch, spec):
    """One chunk of rows with weights (``batch.w``, float64): the unweighted state
    of its kind (every row counted once) and the weighted sums wsums, wtotals and,
    K classes class-wise, wclass (:mod:`fastcal._kernels.weighted`): the
    row-at-a-time kernels, apart from the unweighted fills, in threads (each a
    contiguous range) above the thread thresholds."""
    y, p, w = batch.y, batch.p, batch.w
    n = p.shape[0]
    n_threads = v.check_threads(spec.threads)
    if batch.kind == "multiclass":
        edges, uniform = spec.edges(p.dtype)
        big = n * p.shape[1] >= PARALLEL_MIN_ELEMENTS and n >= 2 * n_threads
        state = kw.fill_multiclass_threads(
            p, y, w, edges, uniform, spec.right, spec.eps, spec.logits, spec.renormalize,
            _config.SUM_TOL, spec.classwise, spec.with_logs, n_threads if big else 1)
        out = named(MULTICLASS + WEIGHTED_CLASSES, state)
        if not spec.classwise:
            del out["class_counts"], out["class_sums"], out["wclass"]
        return out
    logits = batch.kind == "logits"
    edges, uniform = spec.edges(np.float64 if logits else p.dtype)
    kinds = np.array([kb.CHECK_NAN_P, kb.CHECK_RANGE_P, kb.CHECK_BAD_Y, kb.CHECK_NAN_Y,
                      kb.CHECK_OMITTED], np.int64)
    big = n >= PARALLEL_MIN_ROWS
    state = kw.fill_binary_threads(p, y, w, edges, uniform, spec.right, spec.eps,
                                   spec.with_logs, logits, kinds, n_threads if big else 1)
    return named(BINARY + WEIGHTED, state)


def fill_parts(batch, spec, row0, filled):
    """The parts of a checked chunk (named arrays): bootstrap replicates, ACE's
    value buckets, the smooth ECE grid and ECCE's buckets, as ``spec`` asks.

    ``filled`` is what ``fill`` returned: binary probabilities bring their
    buckets in it and are their own ranking values; other kinds are ranked
    first (``ranking_pair``)."""
    if not spec.parts:
        return {}
    y, p = batch.host()
    if batch.kind != "binary":
        pair = _pair_options(spec)
        kept = _RANKED.get(id(batch))
        if kept is not None and kept[0] == pair:  # ranked by the fill (_multiclass_ranked)
            y, x = kept[1]
        else:
            y, x = ranking_pair(y, p, kind=batch.kind, threads=spec.threads, **pair)
            _keep_ranked(batch, pair, (y, x))
    else:
        x = p
    if batch.w is None:
        out = fill_replicates(y, x, row0, spec, p.dtype)
    else:
        out = fill_weighted_replicates(y, x, batch.w, row0, spec, p.dtype)
    if "fine_counts" not in filled:
        out.update(fill_buckets(y, x, spec))
    out.update(fill_grid(y, x, spec))
    out.update(fill_ecce(y, x, spec, batch.w))
    return out


def fill_replicates(y, x, row0, spec, dtype):
    """Bootstrap replicates (boot_counts, boot_sums) of ranked rows (labels 0/1,
    values x in [0, 1]; NaN rows carry no weight) numbered from ``row0``,
    binned by the state's edges for input of ``dtype``; none when off."""
    if not spec.n_boot:
        return {}
    out = zeros(spec, "boot_counts", "boot_sums")
    if x.shape[0] == 0:
        return out
    edges, uniform = spec.edges(dtype)
    n_threads = v.check_threads(spec.threads)
    args = (x, y, row0, edges, uniform, spec.right, spec.seed)
    if n_threads == 1 or x.shape[0] * spec.n_boot < PARALLEL_MIN_DRAWS:
        kboot.boot_fill_range(*args, 0, spec.n_boot, out["boot_counts"], out["boot_sums"])
    else:
        kboot.boot_fill_parallel(*args, n_threads, out["boot_counts"], out["boot_sums"])
    return out


def fill_weighted_replicates(y, x, w, row0, spec, dtype):
    """Bootstrap replicates of weighted ranked rows (wboot_counts, wboot_sums):
    each row weighs its Poisson(1) draw times its weight (``weighted.boot_fill``);
    none when off. The unweighted replicates are not filled for such rows."""
    if not spec.n_boot:
        return {}
    out = zeros(dataclasses.replace(spec, weighted=True), "wboot_counts", "wboot_sums")
    if x.shape[0] == 0:
        return out
    edges, uniform = spec.edges(dtype)
    n_threads = v.check_threads(spec.threads)
    if x.shape[0] * spec.n_boot < PARALLEL_MIN_DRAWS:
        n_threads = 1
    kw.boot_fill_threads(x, y, w, row0, edges, uniform, spec.right, spec.seed, n_threads,
                         out["wboot_counts"], out["wboot_sums"])
    return out


def fill_buckets(y, x, spec):
    """ACE's value buckets (fine_counts, fine_p) of ranked rows; none when off."""
    if not spec.ace_buckets:
        return {}
    out = zeros(spec, "fine_counts", "fine_p")
    kem.bucket_stats(x, y, spec.omit, out["fine_counts"], out["fine_p"])
    return out


def fill_grid(y, x, spec):
    """The smooth ECE grid (smooth_mass, smooth_resid, smooth_n) of ranked rows
    (invalid or omitted ones skipped); none when off."""
    if not spec.smooth:
        return {}
    out = zeros(spec, "smooth_mass", "smooth_resid", "smooth_n")
    rows = x.shape[0]
    n_threads = v.check_threads(spec.threads)
    grid = out["smooth_mass"], out["smooth_resid"], out["smooth_n"]
    if n_threads == 1 or rows < PARALLEL_MIN_ROWS:
        ksm.fill_grid_range(x, y, 0, rows, *grid)
    else:
        ksm.fill_grid(x, y, n_threads, *grid)
    return out


def fill_ecce(y, x, spec, w=None):
    """ECCE's value buckets (ecce_counts, ecce_sums, ecce_totals) of ranked rows
    (invalid or omitted ones skipped), weighted by ``w`` (None: every weight 1);
    none when off."""
    if not spec.ecce:
        return {}
    out = zeros(spec, "ecce_counts", "ecce_sums", "ecce_totals")
    rows = x.shape[0]
    n_threads = v.check_threads(spec.threads)
    state = out["ecce_counts"], out["ecce_sums"], out["ecce_totals"]
    weights = np.zeros(0, np.float64) if w is None else w
    if n_threads == 1 or rows < PARALLEL_MIN_ROWS:
        kec.bucket_sums_range(x, y, weights, 0, rows, *state)
    else:
        kec.bucket_sums(x, y, weights, n_threads, *state)
    return out


def ranked(batch, pair):
    """The (labels, values) that equal-mass bins rank (see ``ranking_pair``): the
    pair ``fill_parts`` ranked for this batch when it asks the same."""
    kept = _RANKED.get(id(batch))
    if kept is not None and kept[0] == pair:
        return kept[1]
    if pair.get("column") is not None and batch.kind not in ("binary", "logits"):
        return ranking_pair(batch.y, batch.p, kind=batch.kind, conf=_class_confidence(batch, pair),
                            **pair)
    return ranking_pair(batch.y, batch.p, kind=batch.kind, **pair)


def _class_confidence(batch, pair, threads=1):
    """The rows' confidence (NaN: an invalid row) for a class column of K-class rows (TACE
    asks for each class): the rows are checked once for every class, and the pair kept
    with the batch as the fill's pair is."""
    base = {k: x for k, x in pair.items() if k not in ("column", "above")}
    kept = _RANKED.get(id(batch))
    if kept is None or kept[0] != base:
        _keep_ranked(batch, base, ranking_pair(batch.y, batch.p, kind=batch.kind,
                                               threads=threads, **base))
    return _RANKED[id(batch)][1][1]


def ranked_buckets(batch, pair, omit, n_buckets, threads):
    """``(ranked(batch, pair), (fine_counts, fine_p))``: the pair and its value bucket
    statistics (``equal_mass.bucket_stats`` over ``n_buckets``, omitted rows in the
    last row) in one pass on ``threads`` threads, for a class column of K-class
    probabilities (TACE, where the statistics are each class's first equal-mass
    pass); None for any other pair, which ``ranked`` makes and the parts' own pass
    counts.

    Each class reads the whole (N, K) matrix: the column alone is bound by memory
    (two threads gained nothing), with its statistics it is not."""
    column, p = pair.get("column"), batch.p
    if (column is None or not omit or batch.kind in ("binary", "logits") or pair.get("logits")
            or pair.get("renormalize") or p.dtype not in (np.float32, np.float64)):
        return None
    conf = _class_confidence(batch, pair, threads)
    y = np.asarray(batch.y)
    n = p.shape[0]
    label, x = np.empty(n, np.uint8), np.empty(n, np.float64)
    n_threads = max(1, min(v.check_threads(threads), p.size // PARALLEL_MIN_ELEMENTS, n))
    counts = np.zeros((n_threads, n_buckets + 1, kb.N_COUNTS), np.int64)
    sums = np.zeros((n_threads, n_buckets + 1), np.float64)
    above = float(pair.get("above", 0.0))

    def run(t):
        a, b = thread_range(t, n, n_threads)
        km.column_pair(p[a:b], y[a:b], conf[a:b], column, above, label[a:b], x[a:b], counts[t],
                       sums[t])

    run_threads(n_threads, run)
    for t in range(1, n_threads):  # in thread order
        counts[0] += counts[t]
        sums[0] += sums[t]
    return (v.kernel_view(label), v.kernel_view(x)), (counts[0], sums[0])


# The ranked pair of a K-class or logit batch, kept from its fill's parts (ACE's value
# buckets) to the gather of the same batch's boundary rows, which would otherwise rank
# the rows again (at K = 10 a confidence pass costs a seventh of the fill on one thread,
# more on two, where the fill is threaded and the ranking is not). An entry lives as
# long as its batch: the report's source holds the batch, and the pair was made
# anyway, so the peak memory of a report does not grow.
_RANKED: dict = {}


def _keep_ranked(batch, pair, ranked_pair):
    key = id(batch)
    if key not in _RANKED:
        weakref.finalize(batch, _RANKED.pop, key, None)
    _RANKED[key] = (dict(pair), ranked_pair)


def gather(batch, pair):
    """None: the host parts gather the boundary rows, one thread per part."""
    return None


def fill_nees(batch, shape, nan_policy):
    """The NEES per group of ``shape`` (count, nees_sum); ``nan_policy``: rows
    with NaN/inf raise, make their group's sum NaN ("propagate") or are left
    out ("omit")."""
    errors, covs = batch.host()
    values, bad = nees_checked(errors, covs, "raise" if nan_policy == "raise" else "propagate")
    n_groups = int(np.prod(shape, dtype=np.int64))
    n_rows = values.shape[0] // n_groups if n_groups else 0
    values = values.reshape(n_rows, n_groups)
    if nan_policy == "omit":
        keep = ~bad.reshape(n_rows, n_groups)
        count, total = keep.sum(axis=0, dtype=np.int64), np.where(keep, values, 0.0).sum(axis=0)
    else:
        count, total = np.full(n_groups, values.shape[0], dtype=np.int64), values.sum(axis=0)
    return {"count": count.reshape(shape), "nees_sum": total.reshape(shape)}


def _binary(y, p, spec):
    edges, uniform = spec.edges(p.dtype)
    return fill_binary(y, p, edges, uniform, spec.right, spec.omit, spec.eps, spec.with_logs,
                       spec.threads, spec.ace_buckets)


def _logits(y, z, spec):
    edges, uniform = spec.edges(np.float64)
    return fill_binary_logits(y, z, edges, uniform, spec.right, spec.eps)


def _multiclass(y, p, spec, rank=km.NO_RANK):
    edges, uniform = spec.edges(p.dtype)
    return fill_multiclass(y, p, edges, uniform, spec.right, spec.eps, spec.logits,
                           spec.renormalize, spec.classwise, spec.threads, spec.with_logs, rank)


def _soft(t, p, spec):
    return fill_soft(t, p, spec.eps, spec.logits, spec.renormalize, spec.threads)


_FILLS = {"binary": _binary, "logits": _logits, "multiclass": _multiclass, "soft": _soft}

BINARY = ("counts", "sums", "totals", "checks")  # the binary kernels' state, in their order
FINE = ("fine_counts", "fine_p")
MULTICLASS = ("counts", "sums", "totals", "class_counts", "class_sums", "checks")
WEIGHTED = ("wsums", "wtotals")  # what the weighted kernels add, in their order
WEIGHTED_CLASSES = ("wsums", "wtotals", "wclass")


def named(names, arrays):
    """The arrays a kernel returns in order, by name (a kernel's state is positional)."""
    return dict(zip(names, arrays))


# -- the kernels on validated arrays -------------------------------------------

def fill_binary(y, p, edges, uniform, right, omit, eps, with_logs, threads, n_fine=0):
    """Run the binary fill kernel on validated arrays; serial for small inputs.

    Returns counts, sums, totals, checks by name; with ``n_fine`` > 0 the
    value-bucket statistics of ACE too (fine_counts, fine_p; see
    ``binary.fill_range_fine``).
    """
    n = p.shape[0]
    # small chunks first: asking numba for its thread count costs a few us a call
    if n < PARALLEL_MIN_ROWS or (n_threads := v.check_threads(threads)) == 1:
        counts, sums, totals, checks = kb.new_state(edges.shape[0] - 1)
        rows = n_fine + 1 if n_fine else 0
        fine_counts = np.zeros((rows, kb.N_COUNTS), np.int64)
        fine_p = np.zeros(rows, np.float64)
        kb.fill_range_fine(p, y, 0, n, edges, uniform, right, omit, eps, with_logs,
                           counts, sums, totals, checks, fine_counts, fine_p)
        state = counts, sums, totals, checks, fine_counts, fine_p
    else:
        state = kb.fill_parallel_fine(p, y, edges, uniform, right, omit, eps, with_logs,
                                      n_threads, n_fine)
    return named(BINARY + FINE if n_fine else BINARY, state)


def fill_binary_logits(y, z, edges, uniform, right, eps):
    """counts, sums, totals, checks of binary logits, the sigmoid taken in the
    kernel (float64); check kinds binary.CHECK_*."""
    counts, sums, totals, checks = kb.new_state(edges.shape[0] - 1)
    kinds = np.array([kb.CHECK_NAN_P, kb.CHECK_RANGE_P, kb.CHECK_BAD_Y, kb.CHECK_NAN_Y,
                      kb.CHECK_OMITTED], np.int64)
    kl.fill_binary_logits_range(z, y, 0, z.shape[0], edges, uniform, right, eps, counts, sums,
                                totals, checks, kinds)
    return named(BINARY, (counts, sums, totals, checks))


def fill_multiclass(y, p, edges, uniform, right, eps, logits, renormalize, classwise, threads,
                    with_logs=True, rank=km.NO_RANK):
    """Run the multi-class kernel; serial below ~1e6 elements. counts, sums,
    totals, class_counts, class_sums (class-wise only), checks by name.
    ``rank``: (conf, correct), one per row, for the rows' ranked pair
    (``multiclass.fill_range``), or empty arrays."""
    n, k = p.shape
    nb = edges.shape[0] - 1
    rowwise = k >= km.ROWWISE_K  # long rows vectorise along the row
    if n * k < PARALLEL_MIN_ELEMENTS or (n_threads := v.check_threads(threads)) == 1 \
            or n < 2 * n_threads:
        state = km.new_state(nb, k, classwise)
        fill_range = km.fill_rows if rowwise else km.fill_range
        fill_range(p, y, 0, n, edges, uniform, right, eps, logits, renormalize, _config.SUM_TOL,
                   classwise, *state, *rank, with_logs)
    else:
        fill_parallel = km.fill_rows_parallel if rowwise else km.fill_parallel
        state = fill_parallel(p, y, edges, uniform, right, eps, logits, renormalize,
                              _config.SUM_TOL, classwise, n_threads, with_logs, rank)
    out = named(MULTICLASS, state)
    if not classwise:
        del out["class_counts"], out["class_sums"]
    return out


def fill_soft(t, p, eps, logits, renormalize, threads):
    """totals and checks of one chunk of soft labels; serial below ~1e6 elements."""
    n, k = p.shape
    n_threads = v.check_threads(threads)
    tol = _config.SUM_TOL
    if n * k < PARALLEL_MIN_ELEMENTS or n_threads == 1 or n < 2 * n_threads:
        totals = np.zeros(ks.N_SOFT, np.float64)
        checks = np.full(2 * ks.N_CHECK_KINDS, -1, np.int64)
        checks[: ks.N_CHECK_KINDS] = 0
        ks.soft_range(p, t, 0, n, eps, logits, renormalize, tol, totals, checks)
        return named(("totals", "checks"), (totals, checks))
    return named(("totals", "checks"), ks.soft_parallel(p, t, eps, logits, renormalize, tol,
                                                        n_threads))


def ranking_pair(y, p, *, kind, logits=False, renormalize=False, eps=None, raw=False,
                 column=None, above=0.0, conf=None, threads=1):
    """(labels 0/1, values in [0, 1]) that equal-mass bins rank, for validated
    input of the gate's ``kind``.

    ``raw=True``: the validated (labels, probabilities or logits) unchanged
    (2-D for K classes), for passes that fit a recalibration map.
    ``column=k`` (K classes): (1[y = k], p_k) with p_k NaN (omitted) where it
    is not above ``above`` or the row is invalid, for class-wise equal-mass
    bins (TACE); ``conf``: the rows' confidence when already ranked with the
    same options (NaN marks the invalid rows), not computed again.
    ``threads``: at most this many threads rank K-class rows of probabilities
    (None: Numba's setting).

    Binary probabilities are ranked as they are; binary logits by their
    sigmoid; K-class rows by their confidence (max probability), the label
    being 1 where the argmax is the true class. Invalid rows get NaN. The
    arrays made here are read-only, as the gate's are (``kernel_view``), so
    the passes that rank them use the kernels the binary ones compiled.
    """
    if raw or kind == "binary":
        return y, p
    if kind == "logits":
        z = np.asarray(p, dtype=np.float64)
        e = np.exp(-np.abs(z))  # in [0, 1]: no overflow, no inf / inf (the same values)
        x = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        return y, v.kernel_view(x)
    if column is not None and conf is not None:
        return tuple(map(v.kernel_view,
                         _column_pair(y, p, conf, column, above, logits, renormalize)))
    n = p.shape[0]
    conf = np.empty(n, np.float64)
    correct = np.empty(n, np.uint8)
    _confidence(y, p, logits, renormalize, 0.0 if eps is None else eps, conf, correct,
                v.check_threads(threads))
    if column is not None:
        return tuple(map(v.kernel_view,
                         _column_pair(y, p, conf, column, above, logits, renormalize)))
    return v.kernel_view(correct), v.kernel_view(conf)


def _confidence(y, p, logits, renormalize, eps, conf, correct, threads):
    """conf and correct of K-class rows (``multiclass.confidence``): rows of
    probabilities by ``confidence_fast`` (on up to ``threads`` threads, each a
    contiguous range of rows, from 1e6 values), and by ``confidence``, the fill's
    row code, only the rows it leaves (rows not clearly valid) and rows of logits
    or renormalised rows; ``confidence`` is then compiled only when needed."""
    tol = _config.SUM_TOL
    if logits or renormalize:
        km.confidence(p, y, logits, renormalize, tol, eps, conf, correct)
        return
    n = p.shape[0]
    n_threads = max(1, min(threads, p.size // PARALLEL_MIN_ELEMENTS, n))

    def run(t):
        a, b = thread_range(t, n, n_threads)
        km.confidence_fast(p[a:b], y[a:b], tol, conf[a:b], correct[a:b])

    run_threads(n_threads, run)
    left = np.flatnonzero(correct == km.SLOW)
    if left.size:
        c = np.empty(left.size, np.float64)
        ok = np.empty(left.size, np.uint8)
        km.confidence(np.ascontiguousarray(p[left]), np.ascontiguousarray(np.asarray(y)[left]),
                      False, False, tol, eps, c, ok)
        conf[left] = c
        correct[left] = ok


_NO_COUNTS = np.zeros((0, kb.N_COUNTS), np.int64)  # column_pair without bucket statistics
_NO_SUMS = np.zeros(0, np.float64)


def _column_pair(y, p, conf, k, above, logits, renormalize):
    """(1[y = k], p_k) of K-class rows, p_k NaN where not above ``above`` or the
    row is invalid (``conf`` NaN), and at most 1; softmax or row sum in float64 as
    asked."""
    if logits:
        q = np.asarray(p, np.float64)
        e = np.exp(q - q.max(axis=1, keepdims=True))
        x = e[:, k] / e.sum(axis=1)
    elif renormalize:
        q = np.asarray(p, np.float64)
        x = q[:, k] / q.sum(axis=1)
    elif p.dtype in (np.float32, np.float64):  # the column alone, in one pass
        label, x = np.empty(p.shape[0], np.uint8), np.empty(p.shape[0], np.float64)
        km.column_pair(p, np.asarray(y), conf, k, float(above), label, x, _NO_COUNTS, _NO_SUMS)
        return label, x
    else:
        x = np.array(p[:, k], np.float64)  # the column alone, a copy
    x[np.isnan(conf) | ~(x > above)] = np.nan
    np.minimum(x, 1.0, out=x)  # a valid row's value above 1 ranks as 1 (column_pair)
    return (np.asarray(y) == k).astype(np.uint8), x


def nees_checked(errors, covs, nan_policy):
    """Flat NEES values and a mask of rows holding NaN/inf; raise per the policy."""
    d = errors.shape[-1]
    lead = errors.shape[:-1]
    # C-contiguous and writable: one array type, so the kernel compiles once
    # (read-only views from np.broadcast_to would type as a second signature).
    flat_e = np.require(errors.reshape(-1, d), requirements=["C", "W"])
    flat_c = np.require(covs.reshape(-1, d, d), requirements=["C", "W"])
    n = flat_e.shape[0]
    out = np.empty(n, dtype=np.float64)
    status = np.empty(n, dtype=np.int8)
    if n:
        import numba

        kg.nees_batch(flat_e, flat_c, out, status, _config.SYMMETRY_RTOL, numba.get_num_threads())
    bad_nan = status == kg.STATUS_NAN
    if nan_policy == "raise" and bad_nan.any():
        e_rows = ~np.isfinite(flat_e).all(axis=1)
        name, rows = ("errors", e_rows) if e_rows.any() else ("covs", bad_nan)
        count = int(rows.sum())
        first = _format_index(np.flatnonzero(rows)[0], lead) or " (the only one)"
        msg = (
            f"{name} contains NaN or inf in {count} of {n} entries (first at index "
            f"{first}); pass nan_policy='propagate' or 'omit' to keep going"
        )
        raise ValueError(msg)
    asym = np.flatnonzero(status == kg.STATUS_ASYMMETRIC)
    if asym.size:
        i = asym[0]
        gap = float(np.max(np.abs(flat_c[i] - flat_c[i].T)))
        msg = (
            f"covs{_format_index(i, lead)} is not symmetric (max |C - C^T| = {gap:.3g}; "
            f"{asym.size} of {n} covariances affected); expected symmetric positive "
            "definite covariance matrices"
        )
        raise ValueError(msg)
    not_pd = np.flatnonzero(status == kg.STATUS_NOT_PD)
    if not_pd.size:
        i = not_pd[0]
        low = float(np.linalg.eigvalsh(flat_c[i])[0])
        msg = (
            f"covs{_format_index(i, lead)} is not positive definite (smallest eigenvalue "
            f"{low:.3g}; {not_pd.size} of {n} covariances affected); expected symmetric "
            "positive definite covariance matrices"
        )
        raise ValueError(msg)
    return out, bad_nan


def _format_index(flat_index, lead_shape):
    if len(lead_shape) == 0:
        return ""
    idx = np.unravel_index(int(flat_index), lead_shape)
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"

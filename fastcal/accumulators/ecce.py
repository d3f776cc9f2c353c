"""ECCE (Arrieta-Ibarra, Gujral, Tannen, Tygert and Xu, 2022), exact for every source.

Definition (MCGrad's ``ecce``, ``ecce_sigma``, ``ecce_pvalue``): with the rows
in the order of x (x a probability, y a label 0/1, w a weight, W = sum w),
the cumulative differences C_k = sum_{i <= k} w_i (y_i - x_i) / W, C_0 = 0,
and

    ecce = max_k C_k - min_k C_k,
    sigma = sqrt(sum w_i**2 x_i (1 - x_i)) / W   (its deviation under calibration),
    ecce_sigma = ecce / sigma,  ecce_pvalue = P(R > ecce_sigma),

R the range of a standard Brownian motion on [0, 1]
(:func:`fastcal.reports.stats.ecce_pvalue`). Rows with equal x are one step:
C is taken only where x changes (and at both ends), so the statistic does
not depend on the order of tied rows; without ties it is MCGrad's.

Algorithm, without a sort:

1. One pass sums, per value bucket floor(x B) (B = 65,536), the rows and
   the sums of w y (1 - x) (how far C can rise inside the bucket), of
   w (1 - y) x (how far it can fall) and of w (y - x), whose cumulative sums
   are C at every bucket boundary. This is part of the fill (the state's ``ecce_*``
   arrays, merged across chunks, files and partitions by addition).
2. A bucket whose C at its start plus its rise cannot pass the largest C
   known at a boundary (nor its fall the smallest) cannot hold the extremes.
   The rows of the few others are gathered (key, label, weight) in one more
   pass and ranked; a bucket of more than ``GATHER_MAX`` rows is cut into
   2**k ranges of float64 bit patterns, whose sums narrow it the same way in
   the next pass. Every pass adds boundaries, so the largest known C only
   grows and the open ranges shrink; a range of one value is a single step.

Memory: the 2 MiB of bucket sums, plus at most ``GATHER_BUDGET`` gathered
rows (17 bytes each) or ``SPLIT_CELLS`` cells a pass. Passes: the fill, and
usually one more (more only for buckets of many rows near the extremes).

Segments: a segmented state holds the same sums per segment (S x B buckets,
``SEGMENT_BUCKETS`` = 1,024 each, fewer when there are more than 2,048
segments: :func:`segment_buckets`; 32 KiB a segment), filled from a segment
code per row (:func:`segment_state`); :func:`exact` then finds every
segment's extremes in the same passes (a range is a key range of one
segment's bucket). Fewer buckets only mean more rows gathered, never a
different value. :func:`fastcal.reports.stats.multicalibration_error` reads
MCGrad's multicalibration error off the segments' ``ecce_sigma``.
"""

import numpy as np

from fastcal._kernels import ecce as kec
from fastcal.accumulators.equal_mass import _bit_length, _key, _keys
from fastcal.inputs.segments import grouped
from fastcal.reports.stats import ecce_pvalue

BUCKETS = kec.BUCKETS
GATHER_MAX = 1 << 18      # a range with more rows is cut, not gathered
GATHER_BUDGET = 1 << 22   # rows gathered in one pass, all ranges together
SPLIT_CELLS = 1 << 20     # cells of the ranges cut in one pass, all together
MAX_SPLIT_BITS = 12
SEGMENT_BUCKETS = 1 << 10  # value buckets of each segment of a segmented state (32 KiB)
SEGMENT_CELLS = 1 << 21  # value buckets of all segments together, at most (64 MiB)
SEGMENT_ROWS = 16  # rows a bucket that more buckets aim at, where the rows are known
_NO_WEIGHTS = np.zeros(0, np.float64)
_NO_CODES = np.zeros(0, np.int64)


def _weights(w):
    return _NO_WEIGHTS if w is None else w


def _bucket_part(y, x, w=None, g=None):
    counts = np.zeros(BUCKETS + 1, np.int64)
    sums = np.zeros((BUCKETS + 1, 3), np.float64)
    totals = np.zeros(2, np.float64)
    kec.bucket_sums_range(x, y, _weights(w), 0, x.shape[0], counts, sums, totals)
    return counts, sums, totals


def _add(acc, result):
    if acc is None:
        return tuple(np.array(r, copy=True) for r in result)
    return tuple(a + r for a, r in zip(acc, result))


def bucket_state(parts):
    """(counts, sums, totals) of the ECCE state over ``parts``: one pass (the
    fill does the same when ``ecce=True``)."""
    return parts.map(_bucket_part, (), combine=_add)


class RowParts:
    """In-memory parts (an :class:`~fastcal.accumulators.equal_mass.ArrayParts`)
    with a weight per row (``w``, float64, or None) and a segment code per row
    (``g``, int64 in [0, S), or None): every pass's function gets its part's
    weights and codes as its last two arguments (empty arrays when absent)."""

    def __init__(self, parts, w=None, g=None):
        bounds = np.cumsum([0] + [x.shape[0] for _, x in parts.slices])
        self._parts = parts
        self._extra = [(_NO_WEIGHTS if w is None else w[a:b],
                        _NO_CODES if g is None else g[a:b])
                       for a, b in zip(bounds[:-1], bounds[1:])]
        self.n_parts = parts.n_parts
        self.gather = None

    def map(self, fn, common, per_part=None, combine=None):
        extra = [(*(per_part[k] if per_part else ()), *self._extra[k])
                 for k in range(self.n_parts)]
        return self._parts.map(fn, common, extra, combine)


def _segment_part(y, x, n_segments, n_buckets, w=None, g=None):
    counts = np.zeros((n_segments, n_buckets + 1), np.int64)
    sums = np.zeros((n_segments, n_buckets + 1, 3), np.float64)
    totals = np.zeros((n_segments, 2), np.float64)
    kec.segment_sums_range(x, y, _weights(w), g, 0, x.shape[0], counts, sums, totals)
    return counts, sums, totals


def segment_buckets(n_segments, n_rows=None):
    """The value buckets of each of ``n_segments`` segments: ``SEGMENT_BUCKETS``, or
    where the rows are known up front (``n_rows``, arrays in memory) about
    ``SEGMENT_ROWS`` rows a bucket when that is more (each segment's extremes then
    lie in buckets of fewer rows: fewer gathered and sorted); fewer (a power of
    two, at least 16) where the segments' buckets would take more than
    ``SEGMENT_CELLS`` together (fewer buckets only mean more rows gathered at the
    extremes, never another value)."""
    n_segments = max(int(n_segments), 1)
    want = SEGMENT_BUCKETS
    if n_rows is not None:
        while want < (1 << 14) and want * SEGMENT_ROWS * 2 <= n_rows // n_segments:
            want <<= 1
    cells = max(SEGMENT_CELLS // n_segments, 16)
    return min(want, 1 << (cells.bit_length() - 1))


def segment_state(parts, n_segments, n_buckets=SEGMENT_BUCKETS):
    """(counts (S, B + 1), sums (S, B + 1, 3), totals (S, 2)): the ECCE state of
    each of ``n_segments`` segments over ``parts`` (a :class:`RowParts` with
    segment codes), ``n_buckets`` value buckets each (a power of two); one pass."""
    return parts.map(_segment_part, (n_segments, n_buckets), combine=_add)


class SegmentBuckets:
    """The ECCE value buckets of every segment key, filled chunk by chunk and merged
    by key (a :class:`~fastcal.accumulators.segmented.SegmentedAccumulator` keeps
    one when asked for ECCE): counts (S, B + 1), sums (S, B + 1, 3) and totals
    (S, 2) in the layout of :func:`segment_state`, ``index`` a key's row.

    B is :func:`segment_buckets` of the keys held: ``SEGMENT_BUCKETS`` up to
    2,048 keys, then halved as keys come (two neighbouring buckets summed: the
    bucket of x at B / 2 is that at B halved, exactly, B a power of two), so
    that the state stays within ``SEGMENT_CELLS`` cells.
    """

    def __init__(self):
        self.index = {}
        self.n_buckets = SEGMENT_BUCKETS
        self._alloc(0)

    def _alloc(self, rows):
        nb = self.n_buckets
        self.counts = np.zeros((rows, nb + 1), np.int64)
        self.sums = np.zeros((rows, nb + 1, 3), np.float64)
        self.totals = np.zeros((rows, 2), np.float64)

    def _fold(self, n_buckets):
        """Sum neighbouring buckets down to ``n_buckets`` (a smaller power of two)."""
        s, nb = self.counts.shape[0], self.n_buckets
        f = nb // n_buckets
        counts = np.zeros((s, n_buckets + 1), np.int64)
        sums = np.zeros((s, n_buckets + 1, 3), np.float64)
        counts[:, :n_buckets] = self.counts[:, :nb].reshape(s, n_buckets, f).sum(axis=2)
        sums[:, :n_buckets] = self.sums[:, :nb].reshape(s, n_buckets, f, 3).sum(axis=2)
        counts[:, n_buckets] = self.counts[:, nb]
        sums[:, n_buckets] = self.sums[:, nb]
        self.counts, self.sums, self.n_buckets = counts, sums, n_buckets

    def rows_of(self, keys):
        """The rows of ``keys`` (int64), new keys getting new rows."""
        new = [k for k in keys if k not in self.index]
        if new:
            size = len(self.index) + len(new)
            nb = segment_buckets(size)
            if nb < self.n_buckets:
                self._fold(nb)
            if size > self.counts.shape[0]:
                old = (self.counts, self.sums, self.totals)
                self._alloc(max(size, 2 * old[0].shape[0]))
                for mine, x in zip((self.counts, self.sums, self.totals), old):
                    mine[: x.shape[0]] = x
            for k in new:
                self.index[k] = len(self.index)
        return np.array([self.index[k] for k in keys], np.int64)

    def fill(self, y, x, w, codes, keys):
        """Add a chunk's rows (labels ``y``, ranked values ``x``, weights ``w`` or
        None) to their segments' buckets (``codes`` index ``keys``)."""
        rows = self.rows_of(keys)
        if len(keys) > 1:
            # grouped by segment (a counting sort): the kernel then sums each segment's
            # rows in a scratch of its buckets that stays in cache, where rows of
            # segments in no order would each reach into the whole state (32 KiB a
            # segment: 32 MiB for 1,000)
            (y, x, w), bounds = grouped((y, x, w), codes, len(keys))
            g = np.repeat(rows, np.diff(bounds))
        else:
            g = np.full(x.shape[0], rows[0] if rows.size else 0, np.int64)
        kec.segment_sums_range(x, y, _weights(w), g, 0, x.shape[0], self.counts, self.sums,
                               self.totals)

    def merge(self, other):
        """Add ``other``'s buckets by key (in place)."""
        rows = self.rows_of(list(other.index))
        theirs = other
        if other.n_buckets != self.n_buckets:
            theirs = other.copy()
            if theirs.n_buckets > self.n_buckets:
                theirs._fold(self.n_buckets)
            else:
                self._fold(theirs.n_buckets)
        n = len(theirs.index)
        self.counts[rows] += theirs.counts[:n]  # rows of distinct keys: no repeats
        self.sums[rows] += theirs.sums[:n]
        self.totals[rows] += theirs.totals[:n]
        return self

    def copy(self):
        out = SegmentBuckets.__new__(SegmentBuckets)
        out.index = dict(self.index)
        out.n_buckets = self.n_buckets
        n = len(self.index)
        out.counts, out.sums, out.totals = (self.counts[:n].copy(), self.sums[:n].copy(),
                                            self.totals[:n].copy())
        return out

    def state(self, keys):
        """(counts, sums, totals) of ``keys``, in their order (the layout of
        :func:`segment_state`), and of the whole (their sum over every key)."""
        n = len(self.index)
        rows = np.array([self.index[k] for k in keys], np.int64)
        whole = tuple(a[:n].sum(axis=0) for a in (self.counts, self.sums, self.totals))
        return (self.counts[rows], self.sums[rows], self.totals[rows]), whole


def _probe(y, x, segmented, n_buckets, first, lo, hi, shift, modes, sizes, w=None, g=None):
    codes = g if segmented and g is not None else _NO_CODES  # the whole: codes not used
    return kec.probe_ranges(x, y, _weights(w), codes, n_buckets, first, lo, hi, shift, modes,
                            sizes)


def _fold_probe(acc, result):
    """Add up the counts and cells; keep each part's gathered rows (part order),
    each with its range (the part's offsets of the ranges, one per range, would
    take the ranges' memory again for every part: gigabytes over a file of
    billions of rows in a thousand segments)."""
    count, keys, labels, weights, key_start, cells, cell_sums, _ = result
    # each part holds its rows range by range: the range of every row
    rid = np.repeat(np.arange(key_start.shape[0] - 1), np.diff(key_start))
    if acc is None:
        return count.copy(), cells.copy(), cell_sums.copy(), [(keys, labels, weights, rid)]
    total, cell_total, sums_total, gathered = acc
    total += count
    cell_total += cells
    sums_total += cell_sums
    gathered.append((keys, labels, weights, rid))
    return acc


def exact(counts, sums, totals, parts):
    """(ecce, ecce_sigma, ecce_pvalue, passes) of the rows of ``parts`` from
    their bucket state (``counts`` (B + 1,), ``sums`` (B + 1, 3), ``totals``
    (2,), as the fill or :func:`bucket_state` made them); NaN when no row
    has weight.

    A segmented state (``counts`` (S, B + 1), ``sums`` (S, B + 1, 3),
    ``totals`` (S, 2), as :func:`segment_state` made it, over parts with
    segment codes) gives three arrays of S values, all segments from the same
    passes.
    """
    return exact_all([(counts, sums, totals)], parts)[0]


def exact_all(states, parts):
    """:func:`exact` of several states over the same ``parts`` (the segments'
    and the whole's, say), their searches sharing the passes: each pass probes
    every state's open ranges on the same part. Returns one result per state,
    each with the passes of all (a pass reads the rows once for all)."""
    searches = [_Search(*state) for state in states]
    passes = 0
    while True:
        asks = [(s, s.request()) for s in searches]
        asks = [(s, a) for s, a in asks if a is not None]
        if not asks:
            break
        found = parts.map(_probe_all, ([a for _, a in asks],), combine=_fold_all)
        passes += 1
        for (search, _), result in zip(asks, found):
            search.absorb(result)
    return [s.result(passes) for s in searches]


def _probe_all(y, x, asks, *rows):
    """Every search's probe of one part (``rows``: its weights and codes, if any)."""
    return [_probe(y, x, *ask, *rows) for ask in asks]


def _fold_all(acc, results):
    if acc is None:
        acc = [None] * len(results)
    return [_fold_probe(a, r) for a, r in zip(acc, results)]


class _Search:
    """The search of one bucket state's extremes of C: ``request`` gives the probe
    of its open ranges for the next pass (None when none is left), ``absorb`` takes
    that pass's result, ``result`` gives (ecce, ecce_sigma, ecce_pvalue, passes)."""

    def __init__(self, counts, sums, totals):
        self.one = one = counts.ndim == 1
        if one:
            counts, sums, totals = counts[None], sums[None], totals[None]
        n_seg, nb = counts.shape[0], counts.shape[1] - 1
        self.n_seg, self.nb = n_seg, nb
        self.weight = totals[:, 0].astype(np.float64)
        self.var = totals[:, 1].astype(np.float64)
        m = counts[:, :nb].astype(np.int64)
        pos = sums[:, :nb, 0].astype(np.float64)
        neg = sums[:, :nb, 1].astype(np.float64)
        end = np.cumsum(sums[:, :nb, 2].astype(np.float64), axis=1)
        c0 = np.concatenate([np.zeros((n_seg, 1)), end[:, :-1]], axis=1)
        self.top = np.maximum(0.0, end.max(axis=1))
        self.bottom = np.minimum(0.0, end.min(axis=1))
        b = np.arange(nb, dtype=np.int64)
        lo = _keys(b / nb)
        hi = _keys((b + 1) / nb) - 1
        hi[-1] = _key(1.0)
        self.seg = np.repeat(np.arange(n_seg, dtype=np.int64), nb)
        self.lo, self.hi = np.tile(lo, n_seg), np.tile(hi, n_seg)
        self.c0, self.pos, self.neg, self.m = c0.ravel(), pos.ravel(), neg.ravel(), m.ravel()

    def request(self):
        """The arguments of :func:`_probe` for the ranges that can still hold an
        extreme, or None."""
        top, bottom = self.top, self.bottom
        seg, lo, hi, c0, m = self.seg, self.lo, self.hi, self.c0, self.m
        keep = (m >= 2) & (lo < hi) & ((c0 + self.pos > top[seg]) | (c0 - self.neg < bottom[seg]))
        if not keep.any():
            return None
        seg, lo, hi, c0, m = seg[keep], lo[keep], hi[keep], c0[keep], m[keep]
        modes = np.full(lo.shape[0], 2, np.int64)
        small = np.flatnonzero(m <= GATHER_MAX)
        small = small[np.argsort(m[small], kind="stable")]
        modes[small[np.cumsum(m[small]) <= GATHER_BUDGET]] = 1
        n_split = max(1, int(np.count_nonzero(modes == 2)))
        bits = int(np.clip(np.log2(SPLIT_CELLS / n_split), 1, MAX_SPLIT_BITS))
        shift = np.maximum(_bit_length(hi - lo) - bits, 0)
        shift[modes != 2] = 0
        sizes = np.where(modes == 2, ((hi - lo) >> shift) + 1, 0).astype(np.int64)
        # ranges are sorted by (segment, lo): so are their (segment, value) buckets
        nb = self.nb
        bucket = seg * nb + np.minimum((lo.view(np.float64) * nb).astype(np.int64), nb - 1)
        first = np.searchsorted(bucket, np.arange(self.n_seg * nb + 1),
                                side="left").astype(np.int64)
        self.seg, self.lo, self.hi, self.c0, self.m = seg, lo, hi, c0, m
        self.shift, self.modes, self.sizes = shift, modes, sizes
        return (not self.one, nb, first, lo, hi, shift, modes, sizes)

    def absorb(self, result):
        found, cells, cell_sums, gathered = result
        m = self.m
        if not np.array_equal(found, m):
            msg = (f"the data changed between passes: {int(m.sum())} rows counted in the "
                   f"ranges probed for ECCE, {int(found.sum())} found there")
            raise ValueError(msg)
        modes, top, bottom = self.modes, self.top, self.bottom
        _gathered(np.flatnonzero(modes == 1), self.seg, self.c0, gathered, top, bottom)
        split = np.flatnonzero(modes == 2)
        (self.seg, self.lo, self.hi, self.c0, self.pos, self.neg,
         self.m) = _cut(split, self.seg, self.lo, self.hi, self.c0, self.shift, self.sizes,
                        cells, cell_sums, top, bottom)

    def result(self, passes):
        weight = self.weight
        with np.errstate(divide="ignore", invalid="ignore"):
            ecce = np.where(weight > 0.0, (self.top - self.bottom) / weight, np.nan)
            sigma = np.sqrt(self.var) / weight
            scaled = np.where(sigma > 0.0, ecce / sigma, np.where(ecce != 0.0, np.inf, 0.0))
        scaled[~(weight > 0.0)] = np.nan
        pvalue = np.array([ecce_pvalue(z) for z in scaled])
        if self.one:
            return float(ecce[0]), float(scaled[0]), float(pvalue[0]), passes
        return ecce, scaled, pvalue, passes


def _gathered(ranges, seg, c0, gathered, top, bottom):
    """Raise ``top`` / lower ``bottom`` (per segment, in place) to the extremes
    of C over the gathered ranges: their rows ranked by value, C at the end of
    each run of equal values."""
    if ranges.size == 0:
        return
    keys = np.concatenate([g[0] for g in gathered])
    labels = np.concatenate([g[1] for g in gathered])
    weights = np.concatenate([g[2] for g in gathered])
    rid = np.concatenate([g[3] for g in gathered])  # then the rows of each range by key
    order = np.lexsort((keys, rid))
    keys, rid = keys[order], rid[order]
    x = keys.view(np.float64)
    one = labels[order] == 1
    if weights.shape[0]:
        w = weights[order]
        d = np.where(one, w * (1.0 - x), -(w * x))
    else:
        d = np.where(one, 1.0 - x, -x)
    start = np.searchsorted(rid, ranges, side="left")
    stop = np.searchsorted(rid, ranges, side="right")
    kec.gathered_extremes(keys, d, start, stop, ranges, c0, seg, top, bottom)


def _cut(split, seg, lo, hi, c0, shift, sizes, cells, cell_sums, top, bottom):
    """The cells of the ranges cut in 2**k: their segments, key ranges, C at
    their starts, rises, falls and rows; C at their ends are boundaries (the
    extremes of their segments grow, in place)."""
    cell_start = np.concatenate([[0], np.cumsum(sizes)])
    out = [[] for _ in range(7)]
    for r in split:
        a, b = cell_start[r], cell_start[r + 1]
        m = cells[a:b]
        pos, neg = cell_sums[a:b, 0], cell_sums[a:b, 1]
        end = c0[r] + np.cumsum(cell_sums[a:b, 2])
        start = np.concatenate([[c0[r]], end[:-1]])
        full = m > 0
        c = seg[r]
        if full.any():
            top[c] = max(top[c], float(end[full].max()))
            bottom[c] = min(bottom[c], float(end[full].min()))
        j = np.flatnonzero(full).astype(np.int64)
        cell_lo = lo[r] + (j << shift[r])
        cell_hi = np.minimum(hi[r], cell_lo + (np.int64(1) << shift[r]) - 1)
        for lst, part in zip(out, (np.full(j.shape[0], c, np.int64), cell_lo, cell_hi,
                                   start[full], pos[full], neg[full], m[full])):
            lst.append(part)
    dtypes = (np.int64, np.int64, np.int64, np.float64, np.float64, np.float64, np.int64)
    return [np.concatenate(lst) if lst else np.zeros(0, dt) for lst, dt in zip(out, dtypes)]


__all__ = ["BUCKETS", "RowParts", "SegmentBuckets", "bucket_state", "exact", "exact_all",
           "segment_buckets", "segment_state"]

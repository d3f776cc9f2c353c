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
   the sums of w y (1 - x) (how far C can rise inside the bucket) and of
   w (1 - y) x (how far it can fall); their cumulative sums are C at every
   bucket boundary. This is part of the fill (the state's ``ecce_*``
   arrays, merged across chunks, files and partitions by addition).
2. A bucket whose C at its start plus its rise cannot pass the largest C
   known at a boundary (nor its fall the smallest) cannot hold the extremes.
   The rows of the few others are gathered (key, label, weight) in one more
   pass and ranked; a bucket of more than ``GATHER_MAX`` rows is cut into
   2**k ranges of float64 bit patterns, whose sums narrow it the same way in
   the next pass. Every pass adds boundaries, so the largest known C only
   grows and the open ranges shrink; a range of one value is a single step.

Memory: the 1.5 MiB of bucket sums, plus at most ``GATHER_BUDGET`` gathered
rows (17 bytes each) or ``SPLIT_CELLS`` cells a pass. Passes: the fill, and
usually one more (more only for buckets of many rows near the extremes).
"""

import numpy as np

from fastcal.accumulators.equal_mass import _bit_length, _key, _keys
from fastcal.reports.stats import ecce_pvalue
from fastcal._kernels import ecce as kec

BUCKETS = kec.BUCKETS
GATHER_MAX = 1 << 18      # a range with more rows is cut, not gathered
GATHER_BUDGET = 1 << 22   # rows gathered in one pass, all ranges together
SPLIT_CELLS = 1 << 20     # cells of the ranges cut in one pass, all together
MAX_SPLIT_BITS = 12
_NO_WEIGHTS = np.zeros(0, np.float64)


def _weights(w):
    return _NO_WEIGHTS if w is None else w


def _bucket_part(y, x, w=None):
    counts = np.zeros(BUCKETS + 1, np.int64)
    sums = np.zeros((BUCKETS + 1, 2), np.float64)
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


class WeightedParts:
    """In-memory parts (an :class:`~fastcal.accumulators.equal_mass.ArrayParts`)
    with a weight per row (``w``, float64, as long as all the parts): every
    pass's function gets its part's weights as its last argument."""

    def __init__(self, parts, w):
        bounds = np.cumsum([0] + [x.shape[0] for _, x in parts.slices])
        self._parts = parts
        self._w = [(w[a:b],) for a, b in zip(bounds[:-1], bounds[1:])]
        self.n_parts = parts.n_parts
        self.gather = None

    def map(self, fn, common, per_part=None, combine=None):
        extra = [(*(per_part[k] if per_part else ()), *self._w[k])
                 for k in range(self.n_parts)]
        return self._parts.map(fn, common, extra, combine)


def _probe(y, x, n_buckets, first, lo, hi, shift, modes, sizes, w=None):
    return kec.probe_ranges(x, y, _weights(w), n_buckets, first, lo, hi, shift, modes, sizes)


def _fold_probe(acc, result):
    """Add up the counts and cells; keep each part's gathered rows (part order)."""
    count, keys, labels, weights, key_start, cells, cell_sums, _ = result
    if acc is None:
        return count.copy(), cells.copy(), cell_sums.copy(), [(keys, labels, weights, key_start)]
    total, cell_total, sums_total, gathered = acc
    total += count
    cell_total += cells
    sums_total += cell_sums
    gathered.append((keys, labels, weights, key_start))
    return acc


def exact(counts, sums, totals, parts):
    """(ecce, ecce_sigma, ecce_pvalue, passes) of the rows of ``parts`` from
    their bucket state (``counts`` (B + 1,), ``sums`` (B + 1, 2), ``totals``
    (2,), as the fill or :func:`bucket_state` made them); NaN when no row
    has weight."""
    nb = counts.shape[0] - 1
    weight, var = float(totals[0]), float(totals[1])
    if not weight > 0.0:
        return float("nan"), float("nan"), float("nan"), 0
    m = counts[:nb].astype(np.int64)
    pos = sums[:nb, 0].astype(np.float64)
    neg = sums[:nb, 1].astype(np.float64)
    end = np.cumsum(pos - neg)
    c0 = np.concatenate([[0.0], end[:-1]])
    top, bottom = max(0.0, float(end.max())), min(0.0, float(end.min()))
    b = np.arange(nb, dtype=np.int64)
    lo = _keys(b / nb)
    hi = _keys((b + 1) / nb) - 1
    hi[-1] = _key(1.0)
    passes = 0
    while True:
        keep = (m >= 2) & (lo < hi) & ((c0 + pos > top) | (c0 - neg < bottom))
        if not keep.any():
            break
        lo, hi, c0, m = lo[keep], hi[keep], c0[keep], m[keep]
        modes = np.full(lo.shape[0], 2, np.int64)
        small = np.flatnonzero(m <= GATHER_MAX)
        small = small[np.argsort(m[small], kind="stable")]
        modes[small[np.cumsum(m[small]) <= GATHER_BUDGET]] = 1
        n_split = max(1, int(np.count_nonzero(modes == 2)))
        bits = int(np.clip(np.log2(SPLIT_CELLS / n_split), 1, MAX_SPLIT_BITS))
        shift = np.maximum(_bit_length(hi - lo) - bits, 0)
        shift[modes != 2] = 0
        sizes = np.where(modes == 2, ((hi - lo) >> shift) + 1, 0).astype(np.int64)
        bucket = np.minimum((lo.view(np.float64) * nb).astype(np.int64), nb - 1)
        first = np.searchsorted(bucket, np.arange(nb + 1), side="left").astype(np.int64)
        found, cells, cell_sums, gathered = parts.map(
            _probe, (nb, first, lo, hi, shift, modes, sizes), combine=_fold_probe)
        passes += 1
        if not np.array_equal(found, m):
            msg = (f"the data changed between passes: {int(m.sum())} rows counted in the "
                   f"ranges probed for ECCE, {int(found.sum())} found there")
            raise ValueError(msg)
        top, bottom = _gathered(np.flatnonzero(modes == 1), c0, gathered, top, bottom)
        split = np.flatnonzero(modes == 2)
        lo, hi, c0, pos, neg, m, top, bottom = _cut(split, lo, hi, c0, shift, sizes, cells,
                                                    cell_sums, top, bottom)
    ecce = (top - bottom) / weight
    sigma = np.sqrt(var) / weight
    if sigma > 0.0:
        scaled = ecce / sigma
    else:
        scaled = float("inf") if ecce != 0.0 else 0.0
    return float(ecce), float(scaled), ecce_pvalue(scaled), passes


def _gathered(ranges, c0, gathered, top, bottom):
    """The extremes of C over the gathered ranges: their rows ranked by value,
    C at the end of each run of equal values."""
    if ranges.size == 0:
        return top, bottom
    keys = np.concatenate([g[0] for g in gathered])
    labels = np.concatenate([g[1] for g in gathered])
    weights = np.concatenate([g[2] for g in gathered])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    x = keys.view(np.float64)
    one = labels[order] == 1
    d = np.where(one, 1.0 - x, -x)
    if weights.shape[0]:
        w = weights[order]
        d = np.where(one, w * (1.0 - x), -(w * x))
    # ranges are disjoint and sorted: each range's rows are one block of the sorted keys
    counts = np.zeros(len(ranges), np.int64)
    for g in gathered:
        counts += np.diff(g[3])[ranges]
    start = np.concatenate([[0], np.cumsum(counts)])
    for j, r in enumerate(ranges):
        a, b = start[j], start[j + 1]
        if a == b:
            continue
        k = keys[a:b]
        cum = c0[r] + np.cumsum(d[a:b])
        last = np.ones(b - a, bool)
        np.not_equal(k[1:], k[:-1], out=last[:-1])
        ends = cum[last]
        top = max(top, float(ends.max()))
        bottom = min(bottom, float(ends.min()))
    return top, bottom


def _cut(split, lo, hi, c0, shift, sizes, cells, cell_sums, top, bottom):
    """The cells of the ranges cut in 2**k: their key ranges, C at their starts,
    rises, falls and rows; C at their ends are boundaries (the extremes grow)."""
    cell_start = np.concatenate([[0], np.cumsum(sizes)])
    out = [[] for _ in range(6)]
    for r in split:
        a, b = cell_start[r], cell_start[r + 1]
        m = cells[a:b]
        pos, neg = cell_sums[a:b, 0], cell_sums[a:b, 1]
        end = c0[r] + np.cumsum(pos - neg)
        start = np.concatenate([[c0[r]], end[:-1]])
        full = m > 0
        if full.any():
            top = max(top, float(end[full].max()))
            bottom = min(bottom, float(end[full].min()))
        j = np.flatnonzero(full).astype(np.int64)
        cell_lo = lo[r] + (j << shift[r])
        cell_hi = np.minimum(hi[r], cell_lo + (np.int64(1) << shift[r]) - 1)
        for lst, part in zip(out, (cell_lo, cell_hi, start[full], pos[full], neg[full],
                                   m[full])):
            lst.append(part)
    arrays = [np.concatenate(lst) if lst else np.zeros(0, dt)
              for lst, dt in zip(out, (np.int64, np.int64, np.float64, np.float64, np.float64,
                                       np.int64))]
    return (*arrays, top, bottom)


__all__ = ["BUCKETS", "WeightedParts", "bucket_state", "exact"]

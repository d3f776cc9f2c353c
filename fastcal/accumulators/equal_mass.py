"""Exact equal-mass bins (ACE, ``strategy="quantile"``) in linear time, for every source.

Definition (unchanged): the rows are put in the stable order by (value, row),
and group g holds the ranks [g n // G, (g + 1) n // G), so group sizes differ
by at most one and rows with equal values are split by their position.

Algorithm, without a sort and without collecting tied rows:

1. A histogram of the values over B buckets floor(x B) (B >= 2**16, a power of
   two) gives the rank range of every bucket. It is filled in the same pass
   as the ordinary fill where the data is read once (files, Dask).
2. Only the buckets holding a wanted rank (the G - 1 cuts, and the ends of
   each group for the table's lower/upper columns) are looked at again: a
   pass over the data gathers the float64 keys of small ranges and
   histograms the keys of big ones (2**k sub-ranges of bit patterns), until
   every wanted rank has its exact value. The keys of a range are gathered
   only while it holds at most ``GATHER_MAX`` rows, so many equal values are
   never collected: a range of one key is counted, not gathered.
3. A last pass puts every row in its group: by a table lookup when its
   bucket holds no cut value, else by comparing with the cut values; a row
   equal to a cut value is placed by counting the rows with that value
   before it (counts per part come from step 2, kept only for the values
   held by several rows, as sparse (value, part, count) entries), so ties
   are split by position without keeping them.

Memory is O(B + G) plus at most max(``GATHER_BUDGET``, 16 G) gathered keys
per pass (two int64 copies while they are ranked) and one part at a time,
whatever the data: the parts' results are folded as they come. Passes: 1 (histogram, often
shared) + usually 1 probe (more only for values that agree to many bits, one per 12 bits) + 1 group pass.

A source is given as parts: slices of an array (``ArrayParts``), the chunks
of a file or Dask partitions (``fastcal.files``, ``fastcal.distributed``).
``parts.map(fn, common, per_part=None, combine=None)`` runs ``fn(y, x,
*common, *per_part[k])`` on the ranking pair (labels, values) of every part k
and returns the results in part order, or, with ``combine``, folds them
(``acc = combine(acc, result)``, acc starting as None) so that big per-part
results need not be kept; ``parts.n_parts`` is known once a first pass has
been made.
"""

import numpy as np

from fastcal._kernels import _config
from fastcal._kernels import binary as kb
from fastcal._kernels import equal_mass as kem
from fastcal.backends.cpu import ranking_pair  # noqa: F401  (the pair every pass ranks)

GATHER_MAX = 1 << 18      # a range with more rows is split, not gathered
GATHER_BUDGET = 1 << 22   # keys gathered in one pass, all ranges together
SPLIT_CELLS = 1 << 22     # histogram cells in one pass, all ranges together
MAX_SPLIT_BITS = 12
SUM_TOL = _config.SUM_TOL


def fine_buckets_for(n_bins, n_rows=None):
    """Value buckets of the statistics that ACE is read from: 2**14 to 2**18, and
    for fewer rows fewer (down to 64, and to about 8 rows a bucket, at least 4 per
    group), which are cheaper to fill, clear and read."""
    b = 1 << 14
    while b < 4 * n_bins and b < (1 << 18):
        b <<= 1
    if n_rows is not None:
        while b > 64 and b > max(4 * n_bins, n_rows // 8):
            b >>= 1
    return b


def n_buckets_for(n_bins):
    """Value buckets of the first histogram: at least 4 per group, 2**16 to 2**22."""
    b = 1 << 16
    while b < 4 * n_bins and b < (1 << 22):
        b <<= 1
    return b


def _key(value):
    """Sort key of a value in [0, 1]: its float64 bit pattern (-0.0 as 0.0)."""
    return max(int(np.array(value, np.float64).view(np.int64)), 0)


def _keys(values):
    """Sort keys of an array of values in [0, 1]."""
    return np.maximum(np.asarray(values, np.float64).view(np.int64), 0)


def _bit_length(x):
    """Bit length of each non-negative int64 (0 for 0)."""
    out = np.zeros(x.shape, np.int64)
    x = x.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        big = x >= (np.int64(1) << shift)
        out[big] += shift
        x[big] >>= shift
    return out + (x > 0)


def _value_histogram(y, x, omit, n_buckets):
    return (kem.value_histogram(x, y, omit, n_buckets),)


def _sorted_unique(a):
    """np.unique of an int64 array by one sort (no hashing, no inverse)."""
    a = np.sort(a)
    keep = np.ones(a.shape[0], bool)
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


class EqualMass:
    """The exact equal-mass groups of n ranked rows, found from a value histogram.

    ``resolve(parts)`` narrows every wanted rank to its value (probe passes),
    then ``fill(parts, ...)`` puts every row in its group (one pass).

    Memory is O(wanted ranks) plus the keys gathered in one pass: the rows of
    each part that equal a cut value are kept as sparse (key, part, count)
    entries, only for keys met in more than one row, never as a table of
    ranks by parts.
    """

    def __init__(self, hist, n_bins, omit):
        self.n_buckets = nb = hist.shape[0]
        self.n_bins = n_bins
        self.omit = omit
        self.hist = hist
        self.n = n = int(hist.sum())
        self.starts = (np.arange(n_bins, dtype=np.int64) * n) // n_bins
        self.stops = np.append(self.starts[1:], n)
        full = self.stops > self.starts
        # The wanted ranks (cuts, and each group's first and last row), as arrays
        # that are narrowed pass by pass: key range [lo, hi] known to hold the
        # rank, rows below lo (before) and in it (m); once resolved, the key and
        # the rows with that key ranked before it (below).
        self.rank = _sorted_unique(np.concatenate(
            [self.starts[1:], self.starts[full], self.stops[full] - 1]))
        self.is_cut = np.zeros(self.rank.shape[0], bool)
        self.is_cut[self._at(self.starts[1:])] = True
        cum = np.cumsum(hist)
        b = np.searchsorted(cum, self.rank, side="right")
        self.lo = _keys(b / nb)
        self.hi = np.where(b == nb - 1, _key(1.0), _keys(np.minimum(b + 1, nb) / nb) - 1)
        self.before = (cum - hist)[b]
        self.m = hist[b].astype(np.int64)
        self.key = np.full(self.rank.shape[0], -1, np.int64)
        self.below = np.zeros(self.rank.shape[0], np.int64)
        # rows equal to a cut value, per part: (key, part, count) entries, only
        # for cut values held by more than one row (the others need no counter)
        self.tie_entries = []
        self.passes = 0

    # -- step 2: probes ---------------------------------------------------

    def _specs(self, open_):
        """Distinct key ranges of the open targets (sorted), what to do with
        each, and the index of each open target's range.

        Open targets are in rank order and their ranges are disjoint (every
        open target of a bucket has been narrowed as often as the others), so
        their lo values are sorted and equal lo means the same range.
        """
        lo_t = self.lo[open_]
        new = np.ones(lo_t.shape[0], bool)
        np.not_equal(lo_t[1:], lo_t[:-1], out=new[1:])
        if np.any(lo_t[1:] < lo_t[:-1]):  # never expected: the ranges would overlap
            msg = "equal-mass ranges out of order (internal error)"
            raise RuntimeError(msg)
        first_t = np.flatnonzero(new)
        inverse = np.cumsum(new) - 1
        lo, hi = lo_t[first_t].copy(), self.hi[open_][first_t].copy()
        m = self.m[open_][first_t]
        # many groups need many boundary rows: the budgets grow with the groups
        budget = max(GATHER_BUDGET, 16 * self.n_bins)
        cells = max(SPLIT_CELLS, 16 * self.n_bins)
        modes = np.full(lo.shape[0], 2, np.int64)
        modes[lo == hi] = 0
        small = np.flatnonzero((lo != hi) & (m <= GATHER_MAX))
        small = small[np.argsort(m[small], kind="stable")]
        take = small[np.cumsum(m[small]) <= budget]
        modes[take] = 1
        n_split = max(1, int(np.count_nonzero(modes == 2)))
        bits = int(np.clip(np.log2(cells / n_split), 1, MAX_SPLIT_BITS))
        width = hi - lo
        shift = np.maximum(_bit_length(width) - bits, 0)
        shift[modes != 2] = 0
        sizes = np.where(modes == 2, (width >> shift) + 1, 0).astype(np.int64)
        buckets = np.minimum((lo.view(np.float64) * self.n_buckets).astype(np.int64),
                             self.n_buckets - 1)
        first = np.searchsorted(buckets, np.arange(self.n_buckets + 1), side="left")
        # ranges of one key that a cut falls in and that hold several rows:
        # their rows are counted per part (the tie counters of the last pass)
        tie = np.zeros(lo.shape[0], bool)
        tie[inverse[self.is_cut[open_]]] = True
        tie &= (modes == 0) & (m > 1)
        return (first.astype(np.int64), lo, hi, shift, modes, sizes), m, tie, inverse

    def resolve(self, parts):
        """Probe until every wanted rank has its key; returns the passes made."""
        while True:
            open_ = np.flatnonzero(self.key < 0)
            if open_.size == 0:
                return self.passes
            specs, m, tie, rid = self._specs(open_)
            first, lo, hi, shift, modes, sizes = specs
            total, hist, hist_start, tie_parts, part_keys = parts.map(
                _probe, (self.omit, self.n_buckets, *specs, np.flatnonzero(tie)),
                combine=_fold_probe)
            self.passes += 1
            if not np.array_equal(total, m):
                msg = (f"the data changed between passes: {int(m.sum())} rows counted in the "
                       f"probed ranges, {int(total.sum())} found there")
                raise ValueError(msg)
            local = self.rank[open_] - self.before[open_]
            mode = modes[rid]
            # one key: it is the value; its rows per part were counted
            t0, r0 = open_[mode == 0], rid[mode == 0]
            self.key[t0] = lo[r0]
            self.below[t0] = local[mode == 0]
            for k, (ranges, counts) in enumerate(tie_parts):
                self._add_ties(lo[ranges], k, counts)
            # gathered keys: ranges are disjoint and sorted, so one sort of all
            # the keys puts each range's keys in one block, in range order
            sel = mode == 1
            if sel.any():
                self._resolve_gathered(open_[sel], rid[sel], local[sel], modes, total,
                                       part_keys)
            del part_keys
            # histograms: narrow to the sub-range holding the rank
            sel = mode == 2
            if sel.any():
                t2, r2 = open_[sel], rid[sel]
                cs = np.cumsum(hist)
                base = np.where(hist_start[r2] > 0, cs[np.maximum(hist_start[r2] - 1, 0)], 0)
                idx = np.searchsorted(cs, local[sel] + base, side="right")
                j = idx - hist_start[r2]
                self.before[t2] += cs[idx] - hist[idx] - base
                sh = shift[r2]
                new_lo = lo[r2] + (j << sh)
                self.hi[t2] = np.minimum(hi[r2], new_lo + (np.int64(1) << sh) - 1)
                self.lo[t2] = new_lo
                self.m[t2] = hist[idx]

    def _add_ties(self, keys, part, counts):
        keep = counts > 0
        if keep.any():
            self.tie_entries.append((keys[keep], np.full(int(keep.sum()), part, np.int64),
                                     counts[keep]))

    def _resolve_gathered(self, t1, r1, local, modes, total, part_keys):
        """Keys of the targets whose ranges were gathered, and the per-part
        rows of the cut values among them held by several rows."""
        part_keys = [k if k.flags.writeable else k.copy() for k in part_keys]
        for k in part_keys:
            k.sort()
        all_keys = np.concatenate(part_keys)
        all_keys.sort()
        found = total * (modes == 1)
        off = np.cumsum(found) - found
        at = off[r1] + local
        key = all_keys[at]
        self.key[t1] = key
        left = np.searchsorted(all_keys, key, side="left")
        self.below[t1] = at - left
        cut = self.is_cut[t1]
        many = np.searchsorted(all_keys, key[cut], side="right") - left[cut] > 1
        del all_keys
        wanted = _sorted_unique(key[cut][many])
        if wanted.size == 0:
            return
        for k, pk in enumerate(part_keys):
            if pk.size == 0:
                continue
            pos = np.minimum(np.searchsorted(wanted, pk), wanted.shape[0] - 1)
            hit = pos[wanted[pos] == pk]  # sorted, as pk is
            if hit.size == 0:
                continue
            starts = np.flatnonzero(np.r_[True, hit[1:] != hit[:-1]])
            counts = np.diff(np.r_[starts, hit.shape[0]])
            self._add_ties(wanted[hit[starts]], k, counts)

    def _at(self, ranks):
        return np.searchsorted(self.rank, ranks)

    def _priors(self, cut_keys, n_parts):
        """Per part: (first cut index of a value, rows with that value in the
        earlier parts), for the cut values held by rows of several parts."""
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        if not self.tie_entries:
            return [empty] * n_parts
        key, part, count = (np.concatenate(c) for c in zip(*self.tie_entries))
        order = np.lexsort((part, key))
        key, part, count = key[order], part[order], count[order]
        dup = np.r_[False, (key[1:] == key[:-1]) & (part[1:] == part[:-1])]
        key, part, count = key[~dup], part[~dup], count[~dup]
        cs = np.cumsum(count)
        run = np.r_[True, key[1:] != key[:-1]]
        run_base = (cs - count)[run][np.cumsum(run) - 1]
        prior = cs - count - run_base  # rows with that key in earlier parts
        idx = np.searchsorted(cut_keys, key, side="left")
        keep = prior > 0
        idx, part, prior = idx[keep], part[keep], prior[keep]
        order = np.argsort(part, kind="stable")
        idx, part, prior = idx[order], part[order], prior[order]
        bounds = np.searchsorted(part, np.arange(n_parts + 1))
        return [(idx[a:b], prior[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]

    # -- step 3: groups ---------------------------------------------------

    def fill(self, parts, *, eps, with_logs):
        """Per-group state (counts, sums, totals) and each group's lowest and
        highest value; one pass over the parts."""
        cuts = self._at(self.starts[1:])
        cut_keys = self.key[cuts]
        cut_values = cut_keys.view(np.float64)
        cut_below = self.below[cuts]
        nb = self.n_buckets
        table = np.searchsorted(cut_values, np.arange(nb) / nb, side="left").astype(np.int64)
        if cuts.shape[0]:
            table[np.minimum((cut_values * nb).astype(np.int64), nb - 1)] = -1
        eps = 0.0 if eps is None else eps
        # end of the run of equal cut values that each cut belongs to
        run_end = np.searchsorted(cut_values, cut_values, side="right").astype(np.int64)
        counts, sums, totals = parts.map(
            _fill_groups, (table, cut_values, cut_below, run_end, eps, with_logs, self.n_bins),
            self._priors(cut_keys, parts.n_parts), combine=_add)
        self.passes += 1
        counts, sums = counts[: self.n_bins], sums[: self.n_bins]
        if int(counts[:, 0].sum()) != self.n:
            msg = (f"the data changed between passes: {self.n} rows ranked, "
                   f"{int(counts[:, 0].sum())} rows grouped")
            raise ValueError(msg)
        lower = np.full(self.n_bins, np.nan)
        upper = np.full(self.n_bins, np.nan)
        full = self.stops > self.starts
        lower[full] = self.key[self._at(self.starts[full])].view(np.float64)
        upper[full] = self.key[self._at(self.stops[full] - 1)].view(np.float64)
        return counts, sums, totals, lower, upper


def _probe(y, x, omit, n_buckets, first, lo, hi, shift, modes, sizes, tie):
    """Probe one part: its counts per range, gathered keys, histograms and,
    for the ranges in ``tie``, (range, count) where it has rows."""
    count, keys, _, hist, hist_start = kem.probe_ranges(
        x, y, omit, n_buckets, first, lo, hi, shift, modes, sizes)
    held = tie[count[tie] > 0]
    return count, keys, hist, hist_start, (held, count[held])


def _fold_probe(acc, result):
    """Add up the counts and histograms; keep each part's keys and tie counts
    (in part order)."""
    count, keys, hist, hist_start, ties = result
    if acc is None:
        return count.copy(), hist.copy(), hist_start, [ties], [keys]
    total, hist_sum, _, tie_parts, part_keys = acc
    total += count
    hist_sum += hist
    tie_parts.append(ties)
    part_keys.append(keys)
    return acc


def _add(acc, result):
    if acc is None:
        return tuple(np.array(r, copy=True) for r in result)
    return tuple(a + r for a, r in zip(acc, result))


def _fill_groups(y, x, table, cut_values, cut_below, run_end, eps, with_logs, n_bins,
                 tie_idx, tie_prior):
    counts, sums, totals, _ = kb.new_state(n_bins)
    seen = np.zeros(cut_values.shape[0], np.int64)
    seen[tie_idx] = tie_prior
    kem.fill_groups_range(x, y, 0, x.shape[0], table, cut_values, cut_below, run_end, seen, eps,
                          with_logs, counts, sums, totals)
    return counts, sums, totals


def groups(parts, n_bins, *, omit, eps, with_logs, hist=None):
    """Equal-mass state of all parts: (counts, sums, totals, lower, upper, passes).

    ``hist`` is the value histogram over ``n_buckets_for(n_bins)`` buckets
    when the caller already filled it (one pass is saved); else it is made here.
    """
    passes = 0
    if hist is None:
        nb = n_buckets_for(n_bins)
        hist, = parts.map(_value_histogram, (omit, nb), combine=_add)
        passes = 1
    em = EqualMass(hist, n_bins, omit)
    em.resolve(parts)
    counts, sums, totals, lower, upper = em.fill(parts, eps=eps, with_logs=with_logs)
    return counts, sums, totals, lower, upper, passes + em.passes


class ArrayParts:
    """Contiguous slices of in-memory arrays, one per thread, run in threads
    (the kernels release the GIL)."""

    def __init__(self, y, x, n_threads, bounds=None):
        n = x.shape[0]
        if bounds is None:
            k = max(1, min(int(n_threads), n // 65536 or 1))
            bounds = [(i * n) // k for i in range(k + 1)]
        self.n_parts = len(bounds) - 1
        self.threads = max(1, min(int(n_threads), self.n_parts))
        self.slices = [(y[a:b], x[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        self.gather = None  # the passes map over the parts

    def map(self, fn, common, per_part=None, combine=None):
        extra = per_part or [()] * self.n_parts
        jobs = zip(self.slices, extra)
        if self.threads == 1:
            return fold((fn(*s, *common, *e) for s, e in jobs), combine)
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        def results(pool):
            # at most two results per thread wait to be folded, in part order
            pending = deque()
            for s, e in jobs:
                pending.append(pool.submit(fn, *s, *common, *e))
                if len(pending) >= 2 * self.threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

        with ThreadPoolExecutor(self.threads) as pool:
            return fold(results(pool), combine)


def fold(results, combine):
    """The results of a map (an iterable, in part order), folded by ``combine``
    as they come if given, else as a list."""
    if combine is None:
        return list(results)
    acc = None
    for r in results:
        acc = combine(acc, r)
    return acc


# -- ACE: equal-mass ECE from bucket statistics ---------------------------------

def bucket_stats(parts, n_buckets, omit):
    """Per value bucket: rows, positives, correct thresholded labels, sum of p
    (the statistics the binary fill also gives, fused, see
    ``binary.fill_range_fine``); one pass. Parts that make their pair and its
    statistics in one pass (``parts.bucket_stats``: a class column of K-class rows
    in memory, for TACE) are asked for them."""
    own = getattr(parts, "bucket_stats", None)
    if own is not None:
        return own(n_buckets, omit)
    return parts.map(_bucket_stats, (n_buckets, omit), combine=_add)


def _bucket_stats(y, x, n_buckets, omit):
    counts = np.zeros((n_buckets + 1, kb.N_COUNTS), np.int64)
    sum_p = np.zeros(n_buckets + 1, np.float64)
    kem.bucket_stats(x, y, omit, counts, sum_p)
    return counts, sum_p


def _gather(y, x, omit, slot, cap_start):
    n_slots = cap_start.shape[0] - 1
    keys = np.empty(cap_start[-1], np.int64)
    labels = np.empty(cap_start[-1], np.uint8)
    filled = np.zeros(n_slots, np.int64)
    kem.gather_buckets(x, y, omit, slot, cap_start, keys, labels, filled)
    n = int(np.minimum(filled, np.diff(cap_start)).sum())  # filled > room: the caller raises
    return keys[:n].copy(), labels[:n].copy(), filled


def light_groups(fine_counts, fine_p, n_bins, parts, omit):
    """(counts, sums, passes) of the equal-mass groups, columns as in the fill
    (counts: rows, positives, correct; sums: p), from bucket statistics.

    A bucket that lies inside one group adds its statistics to that group;
    the rows of the buckets that hold a group boundary strictly inside are
    gathered (key, label) in one pass and ranked. Returns None when those
    buckets hold more than ``GATHER_BUDGET`` rows (then ``groups`` is used).
    """
    nb = fine_counts.shape[0] - 1
    counts = np.zeros((n_bins, kb.N_COUNTS), np.int64)
    sums = np.zeros((n_bins, kb.N_SUMS), np.float64)
    cand = np.empty(nb, np.int64)
    cand_below = np.empty(nb, np.int64)
    n_cand = kem.bucket_groups(fine_counts, fine_p, n_bins, counts, sums, cand, cand_below)
    if n_cand == 0:
        return counts, sums, 0
    cand, cand_below = cand[:n_cand], cand_below[:n_cand]
    cap = fine_counts[cand, 0]
    if int(cap.sum()) > GATHER_BUDGET:
        return None
    slot = np.full(nb, -1, np.int64)
    slot[cand] = np.arange(n_cand)
    cap_start = np.concatenate([[0], np.cumsum(cap)]).astype(np.int64)
    gather = parts.gather  # parts of GPU data gather on the GPU
    results = (gather(omit, slot, cap_start) if gather is not None
               else parts.map(_gather, (omit, slot, cap_start)))
    filled = np.array([r[2] for r in results], np.int64).reshape(len(results), n_cand)
    found = filled.sum(axis=0)
    if not np.array_equal(found, cap):
        s = int(np.flatnonzero(found != cap)[0])
        msg = (f"the data changed between passes: {int(cap[s])} rows counted in a bucket, "
               f"{int(found[s])} found there")
        raise ValueError(msg)
    # part q's rows of slot s at offsets[q, s]:offsets[q, s + 1] (parts one after the other)
    offsets = np.zeros((len(results), n_cand + 1), np.int64)
    offsets[:, 1:] = np.cumsum(filled, axis=1)
    offsets += np.concatenate([[0], np.cumsum(offsets[:-1, -1])])[:, None]
    keys = np.concatenate([r[0] for r in results])
    labels = np.concatenate([r[1] for r in results])
    n = int(fine_counts[:nb, 0].sum())
    starts = (np.arange(n_bins, dtype=np.int64) * n) // n_bins
    _rank_gathered(keys, labels, offsets, cand_below, starts, counts, sums)
    return counts, sums, 1


def _rank_gathered(keys, labels, offsets, slot_below, starts, counts, sums):
    """Add the gathered rows of the buckets that hold a group boundary to
    their groups (counts: rows, positives, correct; sums: p).

    Part q holds the rows of slot s, in row order, at
    keys[offsets[q, s]:offsets[q, s + 1]] (parts in row order);
    slot_below[s] rows have smaller values. Group g holds the ranks
    [starts[g], starts[g + 1]). A bucket with one boundary inside needs no
    sort: the value v at the boundary's rank is selected, rows below v and
    the first rows equal to v (in row order) go to the lower group. A bucket
    with more boundaries is sorted (stable). The selection and the sort are
    NumPy's (no compiling); the rows are added in the order of the ranking.
    """
    n_parts = offsets.shape[0]
    for s in range(offsets.shape[1] - 1):
        k = np.concatenate([keys[offsets[q, s]:offsets[q, s + 1]] for q in range(n_parts)])
        lab = np.concatenate([labels[offsets[q, s]:offsets[q, s + 1]] for q in range(n_parts)])
        m = k.shape[0]
        if m == 0:
            continue
        base = int(slot_below[s])
        g0 = int(np.searchsorted(starts, base, side="right")) - 1
        g1 = int(np.searchsorted(starts, base + m - 1, side="right")) - 1
        if g1 == g0 + 1:
            r = int(starts[g1]) - base  # rows of this bucket in the lower group
            v = np.partition(k, r)[r]
            ties_low = r - int(np.count_nonzero(k < v))
            g = np.where(k > v, g1, g0).astype(np.int64)
            tie = np.flatnonzero(k == v)
            g[tie[ties_low:]] = g1
        else:
            order = np.argsort(k, kind="stable")
            k = k[order]
            lab = lab[order]
            g = np.searchsorted(starts, base + np.arange(m, dtype=np.int64), side="right") - 1
        kem.add_rows(k.view(np.float64), lab, g.astype(np.int64), counts, sums)


def groups_from_buckets(fine_counts, fine_p, n_bins, parts, omit):
    """(counts, sums, passes) of the equal-mass groups given the bucket statistics:
    ``light_groups``, or the exact passes of ``groups`` when the buckets of the
    groups' boundaries hold too many rows (ACE, its sweep, TACE)."""
    got = light_groups(fine_counts, fine_p, n_bins, parts, omit)
    if got is not None:
        return got
    counts, sums, _, _, _, passes = groups(parts, n_bins, omit=omit, eps=None, with_logs=False)
    return counts, sums, passes


def ace(fine_counts, fine_p, n_bins, parts, omit, observed="frac_pos"):
    """ACE (equal-mass ECE) and the passes it took after the bucket statistics."""
    counts, sums, passes = groups_from_buckets(fine_counts, fine_p, n_bins, parts, omit)
    col = 1 if observed == "frac_pos" else 2
    return float(kb.binned_scalars(counts, sums, n_bins, col)[0]), passes

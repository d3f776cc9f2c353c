"""Single-pass fill of per-bin statistics for binary predictions.

Only @njit functions over arrays and scalars: no validation, no objects. The
public modules check arguments once and then call ``fill``.

State layout (one row per bin, plus one "trash" row at index n_bins that
receives rows to be omitted or rows that are invalid, so the hot loop has no
branches):

    counts[b, 0]  number of samples                      int64
    counts[b, 1]  number of positives (y == 1)            int64
    counts[b, 2]  number of correct thresholded labels    int64  ((p > 0.5) == y)
    sums[b, 0]    sum of p                                float64
    sums[b, 1]    sum of ECD terms (p - y) * logit(p)     float64  (eq. 15)
    sums[b, 2]    sum of p (1 - p) logit(p)**2            float64  (Var of ECD term if calibrated)
    totals[0..4]  sums of Brier terms, NLL terms, squared ECD, squared Brier and squared NLL terms
    totals[5..6]  sums of p**2 and p*y (the within-bin terms of the Brier decomposition)
    checks[0..9]  invalid-input counts and first indices (see CHECK_* below)

Per block of BLOCK rows: (1) bins and both logarithms in one vectorised loop
(compiled without reassociation: the logarithm relies on exact float
identities); (2) validity, per-sample terms and the five global sums in a
vectorised loop (reassociated reductions); (3) a scalar scatter, four updates
per row, into COPIES interleaved copies of the per-bin accumulators (the
three counts packed into one int64), flushed into the output every FLUSH
rows. With more than DIRECT_MIN bins the copies would cost more to clear
and flush than they save (rows rarely meet in one bin): the block is added
straight into the output instead. With ACE's value buckets (fill_range_fine)
the scatter goes into one table with a row per (value bucket, bin) pair
instead of the copies, four updates per row as without them, and the table
is added to both the bins and the buckets at each flush (_flush_joint): the
buckets cost an index per row, not two more updates into a second table.
Invalid rows are counted in (2); only a block that holds some is scanned
again for the counts and first indices. docs/contributors/kernel-notes.md has the
measurements behind these choices.
"""

import numpy as np

from ._config import BLOCK, COPIES, FASTMATH, FASTMATH_EXACT, FLUSH
from ._lazy import njit
from ._threads import fill_threads
from .mathfn import log_pair
from .rows import bin_near_edge, bin_search, binary_terms, note_pair

N_COUNTS = 3
N_SUMS = 3
N_TOTALS = 7

# checks[]: counts then first (smallest) row index of each kind, -1 if none
CHECK_NAN_P = 0      # p is NaN
CHECK_RANGE_P = 1    # p is not NaN and outside [0, 1] (includes +-inf)
CHECK_BAD_Y = 2      # label is not NaN and not 0/1
CHECK_NAN_Y = 3      # label is NaN (float labels only)
CHECK_OMITTED = 4    # rows dropped under nan_policy='omit' (p or label NaN)
N_CHECK_KINDS = 5

_LOG_HALF = -0.6931471805599453  # log(0.5), the logs of a neutral trash row
_SHIFT_POS = 21
_SHIFT_OK = 42
_FIELD = (1 << 21) - 1
DIRECT_MIN = 1 << 12  # more bins than this: no interleaved copies (see _scatter_direct)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def _uniform_ok(edges, is32):
    """True if rows.bin_near_edge's edge formula reproduces every stored edge."""
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    invn = 1.0 / nbf
    for k in range(nb + 1):
        kf = np.float64(k)
        e = np.float64(np.float32(kf * invn)) if is32 else kf / nbf
        if e != edges[k]:
            return False
    return True


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def _bins_uniform(p, edges, nb, right, bi):
    """Bins of the block p for uniform edges (vectorised, see rows.bin_near_edge)."""
    nbf = np.float64(nb)
    invn = 1.0 / nbf
    top = nb - 1
    is32 = p.itemsize == 4  # a constant to LLVM: the other branch is dropped
    for j in range(p.shape[0]):
        bi[j] = bin_near_edge(_valid(np.float64(p[j])), nbf, top, invn, right, is32)


@njit(nogil=True, error_model="numpy", cache=True)
def _bins_search(p, edges, nb, right, bi):
    """Bins of the block p for arbitrary sorted edges spanning [0, 1]."""
    for j in range(p.shape[0]):
        bi[j] = bin_search(edges, nb, _valid(np.float64(p[j])), right)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH_EXACT, cache=True)
def _logs(p, lo, hi, lp, lq):
    """log(q) and log(1 - q) of the block, q = p clipped to [lo, hi] (vectorised).

    Compiled without reassociation: the logarithm relies on exact float
    identities. Values outside [0, 1] and NaN are replaced by 0.5.
    """
    for j in range(p.shape[0]):
        lp[j], lq[j] = log_pair(_clip_valid(np.float64(p[j]), lo, hi))


@njit(inline="always", error_model="numpy", cache=True)
def _valid(pj):
    """pj, or 0.5 if pj is NaN or outside [0, 1] (its row goes to the trash row)."""
    return pj if (pj >= 0.0) & (pj <= 1.0) else 0.5


@njit(inline="always", error_model="numpy", cache=True)
def _clip_valid(pj, lo, hi):
    """pj clipped to [lo, hi]; 0.5 if pj is NaN or outside [0, 1]."""
    return min(max(_valid(pj), lo), hi)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def _terms(p, y, nb, lo, hi, with_logs, bi, lpv, lqv, inc, pv, ev, vv, tot):
    """Per-sample terms of one block, the block's global sums added to tot.

    Rows with p outside [0, 1], NaN p or a label other than 0/1 are sent to
    the trash row nb with neutral values (p = 0.5, y = 0) and add nothing to
    tot. Returns the number of valid rows.
    """
    n_good = 0
    s_brier = 0.0
    s_nll = 0.0
    s_ecd2 = 0.0
    s_brier2 = 0.0
    s_nll2 = 0.0
    for j in range(p.shape[0]):
        pj = np.float64(p[j])
        yj = np.float64(y[j])
        good = (pj >= 0.0) & (pj <= 1.0) & ((yj == 0.0) | (yj == 1.0))
        n_good += np.int64(good)
        ps = pj if good else 0.5
        ys = yj if good else 0.0
        pos = ys == 1.0
        ok = (ps > 0.5) == pos
        # Flat index into the interleaved copies: copy (j mod COPIES), then bin.
        bi[j] = (bi[j] if good else nb) + (j & (COPIES - 1)) * (nb + 1)
        inc[j] = 1 + (np.int64(pos) << _SHIFT_POS) + (np.int64(ok) << _SHIFT_OK)
        pv[j] = ps
        if with_logs:
            q = min(max(ps, lo), hi)
            lp = lpv[j] if good else _LOG_HALF
            lq = lqv[j] if good else _LOG_HALF
            e, v, nll, br = binary_terms(q, ps, ys, lp, lq)
            ev[j] = e
            vv[j] = v
            s_brier += br if good else 0.0
            s_brier2 += br * br if good else 0.0
            s_nll += nll if good else 0.0
            s_nll2 += nll * nll if good else 0.0
            s_ecd2 += e * e if good else 0.0
        else:
            ev[j] = 0.0
            vv[j] = 0.0
    if with_logs:
        tot[0] += s_brier
        tot[1] += s_nll
        tot[2] += s_ecd2
        tot[3] += s_brier2
        tot[4] += s_nll2
        _within_sums(pv, inc, p.shape[0], n_good, tot)
    return n_good


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def _within_sums(pv, inc, m, n_good, tot):
    """Add sum p**2 and sum p*y of a block's valid rows to tot[5], tot[6], from the
    values _terms stored (pv, and y as inc's positive bit). A loop of its own: two
    more reductions in _terms' loop cost 8% of the fill, here about 1%. An invalid
    row holds p = 0.5, y = 0: it adds 0.25 to the squares (taken off) and 0."""
    s_p2 = 0.0
    s_py = 0.0
    for j in range(m):
        q = pv[j]
        s_p2 += q * q
        s_py += q * np.float64((inc[j] >> _SHIFT_POS) & 1)
    tot[5] += s_p2 - 0.25 * (m - n_good)
    tot[6] += s_py


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH_EXACT, cache=True)
def _bins_logs_uniform(p, nb, right, lo, hi, bi, lp, lq):
    """_bins_uniform and _logs in one loop: p is read and converted once."""
    nbf = np.float64(nb)
    invn = 1.0 / nbf
    top = nb - 1
    is32 = p.itemsize == 4  # a constant to LLVM: the other branch is dropped
    for j in range(p.shape[0]):
        pj = np.float64(p[j])
        bi[j] = bin_near_edge(_valid(pj), nbf, top, invn, right, is32)
        lp[j], lq[j] = log_pair(_clip_valid(pj, lo, hi))


@njit(inline="always", cache=True)
def bins_and_logs(pb, edges, nb, uniform, right, lo, hi, with_logs, bi, lpv, lqv):
    """A block's stage 1: each row's bin into ``bi`` and, ``with_logs``, log q and
    log(1 - q) of q = p clipped to [lo, hi] into ``lpv`` and ``lqv`` (one loop for
    uniform edges, vectorised)."""
    if uniform and with_logs:
        _bins_logs_uniform(pb, nb, right, lo, hi, bi, lpv, lqv)
    elif uniform:
        _bins_uniform(pb, edges, nb, right, bi)
    else:
        _bins_search(pb, edges, nb, right, bi)
        if with_logs:
            _logs(pb, lo, hi, lpv, lqv)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_range(p, y, start, stop, edges, uniform, right, omit, eps, with_logs,
               counts, sums, totals, checks):
    """Add rows [start, stop) of (p, y) into counts, sums, totals and checks.

    ``checks`` first-index entries are absolute row numbers (start-based).
    """
    fill_range_fine(p, y, start, stop, edges, uniform, right, omit, eps, with_logs,
                    counts, sums, totals, checks, np.zeros((0, N_COUNTS), np.int64),
                    np.zeros(0, np.float64))


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_range_fine(p, y, start, stop, edges, uniform, right, omit, eps, with_logs,
                    counts, sums, totals, checks, fine_counts, fine_p):
    """``fill_range`` that also adds, per value bucket floor(p * B) with
    B = fine_counts.shape[0] - 1 (a power of two; p = 1 in the last bucket),
    the rows, positives and correct thresholded labels (fine_counts[b]) and
    the sum of p (fine_p[b]); invalid rows go to row B. These bucket
    statistics are what ACE needs (fastcal.accumulators.equal_mass); B = 0 turns them off.
    """
    nb = edges.shape[0] - 1
    lo = eps
    hi = 1.0 - eps
    bi, inc, pv, ev, vv, lpv, lqv = block_scratch()
    direct = nb > DIRECT_MIN
    n_fine = fine_counts.shape[0] - 1
    fine = n_fine > 0
    loc_i, loc_p, loc_e, loc_v = copies_scratch(0 if direct or fine else nb)
    # Uniform edges are recomputed in the loop; use the stored ones instead in
    # the (never expected) case that the formula does not reproduce them.
    uniform = uniform and _uniform_ok(edges, p.itemsize == 4)
    fscale = np.float64(max(n_fine, 1))
    ftop = max(n_fine - 1, 0)
    fbi = np.empty(BLOCK if fine else 0, np.int64)
    # Many bins: value buckets in their own scratch. Otherwise one table of
    # value bucket + bin (see _flush_joint) replaces the interleaved copies.
    joint = fine and not direct
    loc_fi = np.zeros(n_fine + 1 if direct else 0, np.int64)
    loc_fp = np.zeros(n_fine + 1 if direct else 0, np.float64)
    n_joint = n_fine + nb
    loc_j = np.zeros((n_joint + 1 if joint else 0, 4), np.float64)
    loc_ji = loc_j.view(np.int64)
    joint_start = _joint_starts(edges, nb, n_fine) if joint else np.zeros(0, np.int64)
    since_flush = 0
    for bstart in range(start, stop, BLOCK):
        m = min(BLOCK, stop - bstart)
        # Stage 1: bins and logarithms (vectorised for uniform edges).
        pb = p[bstart:bstart + m]
        yb = y[bstart:bstart + m]
        bins_and_logs(pb, edges, nb, uniform, right, lo, hi, with_logs, bi, lpv, lqv)
        # Stage 2: validity, per-sample terms, global sums (vectorised).
        n_good = _terms(pb, yb, nb, lo, hi, with_logs, bi, lpv, lqv, inc, pv, ev, vv, totals)
        if n_good < m:
            _record_checks(p, y, bstart, m, omit, checks)
        # Stage 3: scatter into the interleaved copies, the joint table or the
        # output (unsigned indices: no negative-index wraparound in the loops).
        if direct:
            _scatter_direct(m, bi, nb, inc, pv, ev, vv, counts, sums)
            if fine:
                for j in range(m):
                    good = bi[j] - (j & (COPIES - 1)) * (nb + 1) != nb
                    g = np.uint64(min(np.int64(pv[j] * fscale), ftop) if good else n_fine)
                    loc_fi[g] += inc[j]
                    loc_fp[g] += pv[j]
        elif joint:
            # Value bucket plus bin of each valid row (invalid rows, which
            # _terms marked by their bin nb, go to the last row), then one
            # scatter of all four statistics into that row.
            for j in range(m):
                b = bi[j] - (j & (COPIES - 1)) * (nb + 1)
                fbi[j] = min(np.int64(pv[j] * fscale), ftop) + b if b != nb else n_joint
            for j in range(m):
                g = np.uint64(fbi[j])
                loc_ji[g, 3] += inc[j]
                loc_j[g, 0] += pv[j]
                loc_j[g, 1] += ev[j]
                loc_j[g, 2] += vv[j]
        else:
            _scatter(m, bi, inc, pv, ev, vv, loc_i, loc_p, loc_e, loc_v)
        since_flush += m
        if since_flush >= FLUSH:
            _flush_all(loc_i, loc_p, loc_e, loc_v, counts, sums, loc_fi, loc_fp, fine_counts,
                       fine_p, loc_j, joint_start)
            since_flush = 0
    _flush_all(loc_i, loc_p, loc_e, loc_v, counts, sums, loc_fi, loc_fp, fine_counts, fine_p,
               loc_j, joint_start)


@njit(inline="always", cache=True)
def block_scratch():
    """Scratch for one block of rows: bins, packed counts, p, ECD terms, their
    variances, log q and log(1 - q) (see ``_terms``)."""
    return (np.empty(BLOCK, np.int64), np.empty(BLOCK, np.int64), np.empty(BLOCK, np.float64),
            np.empty(BLOCK, np.float64), np.empty(BLOCK, np.float64),
            np.empty(BLOCK, np.float64), np.empty(BLOCK, np.float64))


@njit(inline="always", cache=True)
def copies_scratch(nb):
    """Interleaved per-bin scratch of ``_scatter``, COPIES copies of nb + 1 rows
    one after the other: packed integer counters and the three float sums
    (empty for nb = 0)."""
    n_loc = COPIES * (nb + 1) if nb > 0 else 0
    return (np.zeros(n_loc, np.int64), np.zeros(n_loc, np.float64), np.zeros(n_loc, np.float64),
            np.zeros(n_loc, np.float64))


@njit(inline="always", error_model="numpy", cache=True)
def _flush_all(loc_i, loc_p, loc_e, loc_v, counts, sums, loc_fi, loc_fp, fine_counts, fine_p,
               loc_j, joint_start):
    if loc_i.shape[0]:
        _flush(loc_i, loc_p, loc_e, loc_v, counts, sums)
    if loc_fi.shape[0]:
        _flush_fine(loc_fi, loc_fp, fine_counts, fine_p)
    if loc_j.shape[0]:
        _flush_joint(loc_j, joint_start, counts, sums, fine_counts, fine_p)


@njit(nogil=True, error_model="numpy", cache=True)
def _joint_starts(edges, nb, n_fine):
    """First row of each bin in the joint table: row t holds the rows of bin
    b and value bucket k = t - b, for joint_start[b] <= t < joint_start[b + 1].

    A row of bin b lies between edges b and b + 1 (bin 0 and the last bin
    also take what lies beyond their outer edge), so its bucket lies between
    the buckets of those edges, and t = bucket + bin is below the next
    bin's start, the bucket of edge b + 1 plus b + 1. Both the bin and the
    bucket grow with p, so rows are also in value order across the table.
    """
    scale = np.float64(n_fine)
    top = n_fine - 1
    start = np.zeros(nb + 1, np.int64)
    for b in range(1, nb):
        start[b] = min(np.int64(np.float64(edges[b]) * scale), top) + b
    start[nb] = n_fine + nb
    return start


@njit(nogil=True, error_model="numpy", cache=True)
def _flush_joint(loc_j, joint_start, counts, sums, fine_counts, fine_p):
    """Add the joint table to the bins and to the value buckets, and clear it
    (its last row, the invalid rows, goes to both trash rows)."""
    loc_ji = loc_j.view(np.int64)
    nb = joint_start.shape[0] - 1
    n_fine = fine_counts.shape[0] - 1
    for b in range(nb + 1):
        t_end = joint_start[b + 1] if b < nb else joint_start[nb] + 1
        for t in range(joint_start[b], t_end):
            k = t - b if b < nb else n_fine
            packed = loc_ji[t, 3]
            if packed != 0:
                _add_packed(counts, b, packed)
                _add_packed(fine_counts, k, packed)
                loc_ji[t, 3] = 0
            sums[b, 0] += loc_j[t, 0]
            sums[b, 1] += loc_j[t, 1]
            sums[b, 2] += loc_j[t, 2]
            fine_p[k] += loc_j[t, 0]
            loc_j[t, 0] = 0.0
            loc_j[t, 1] = 0.0
            loc_j[t, 2] = 0.0


@njit(inline="always", error_model="numpy", cache=True)
def _scatter(m, bi, inc, pv, ev, vv, loc_i, loc_p, loc_e, loc_v):
    """Stage 3 of a block: its rows into the interleaved per-bin scratch."""
    # (unsigned indices: no negative-index wraparound in the loop)
    for j in range(m):
        f = np.uint64(bi[j])
        loc_i[f] += inc[j]
        loc_p[f] += pv[j]
        loc_e[f] += ev[j]
        loc_v[f] += vv[j]


@njit(inline="always", error_model="numpy", cache=True)
def _add_packed(counts, b, packed):
    """Add the three counts packed in one int64 (see _terms) to counts[b]."""
    counts[b, 0] += packed & _FIELD
    counts[b, 1] += (packed >> _SHIFT_POS) & _FIELD
    counts[b, 2] += (packed >> _SHIFT_OK) & _FIELD


@njit(inline="always", error_model="numpy", cache=True)
def _scatter_direct(m, bi, nb, inc, pv, ev, vv, counts, sums):
    """Stage 3 for many bins: the block's rows straight into the output
    (bi as _terms leaves it, with the copy offset, which is taken off here)."""
    for j in range(m):
        b = bi[j] - (j & (COPIES - 1)) * (nb + 1)
        _add_packed(counts, b, inc[j])
        sums[b, 0] += pv[j]
        sums[b, 1] += ev[j]
        sums[b, 2] += vv[j]


@njit(nogil=True, error_model="numpy", cache=True)
def _flush_fine(loc_fi, loc_fp, fine_counts, fine_p):
    for b in range(loc_fi.shape[0]):
        packed = loc_fi[b]
        if packed != 0:
            _add_packed(fine_counts, b, packed)
            loc_fi[b] = 0
        fine_p[b] += loc_fp[b]
        loc_fp[b] = 0.0


@njit(nogil=True, error_model="numpy", cache=True)
def _flush(loc_i, loc_p, loc_e, loc_v, counts, sums):
    nb1 = counts.shape[0]
    for c in range(loc_i.shape[0] // nb1):
        for b in range(nb1):
            k = c * nb1 + b
            _add_packed(counts, b, loc_i[k])
            sums[b, 0] += loc_p[k]
            sums[b, 1] += loc_e[k]
            sums[b, 2] += loc_v[k]
            loc_i[k] = 0
            loc_p[k] = 0.0
            loc_e[k] = 0.0
            loc_v[k] = 0.0


@njit(nogil=True, error_model="numpy", cache=True)
def _record_checks(p, y, bstart, m, omit, checks):
    """Slow path, only for blocks holding invalid values: count and locate them."""
    for j in range(m):
        i = bstart + j
        pj = np.float64(p[i])
        yj = np.float64(y[i])
        note_pair(checks, N_CHECK_KINDS, i, pj, (pj >= 0.0) & (pj <= 1.0), yj,
                  (yj == 0.0) | (yj == 1.0), CHECK_NAN_P, CHECK_RANGE_P, CHECK_OMITTED,
                  CHECK_NAN_Y, CHECK_BAD_Y)


def new_state(n_bins):
    """Zeroed state arrays for n_bins bins (plus the trash row)."""
    counts = np.zeros((n_bins + 1, N_COUNTS), np.int64)
    sums = np.zeros((n_bins + 1, N_SUMS), np.float64)
    totals = np.zeros(N_TOTALS, np.float64)
    checks = np.full(2 * N_CHECK_KINDS, -1, np.int64)
    checks[:N_CHECK_KINDS] = 0
    return counts, sums, totals, checks


def fill_parallel(p, y, edges, uniform, right, omit, eps, with_logs, n_threads):
    """Fill fresh state from all of (p, y) with n_threads contiguous ranges.

    Per-thread state, each thread on a contiguous range, then a serial
    reduction in thread order: no shared writes, no atomics.
    """
    counts, sums, totals, checks, _, _ = fill_parallel_fine(
        p, y, edges, uniform, right, omit, eps, with_logs, n_threads, 0)
    return counts, sums, totals, checks


def fill_parallel_fine(p, y, edges, uniform, right, omit, eps, with_logs, n_threads, n_fine):
    """``fill_parallel`` that also returns the value-bucket statistics of
    ``fill_range_fine`` over n_fine buckets (none when n_fine is 0).

    The serial kernel (``nogil``) runs on each range in a thread of a Python
    pool: the same kernel as a serial fill, so nothing more is compiled (a
    ``parallel=True`` prange version compiled for about 17 s, the serial
    kernels it calls included, on the 2-core test machine).
    """
    nb = edges.shape[0] - 1
    rows = n_fine + 1 if n_fine > 0 else 0

    def new_part():
        return (*new_state(nb), np.zeros((rows, N_COUNTS), np.int64), np.zeros(rows, np.float64))

    def fill(start, stop, *part):
        fill_range_fine(p, y, start, stop, edges, uniform, right, omit, eps, with_logs, *part)

    return fill_threads(p.shape[0], n_threads, new_part, fill, 3)


@njit(nogil=True, error_model="numpy", cache=True)
def binned_scalars(counts, sums, n_bins, col):
    """(ECE, ESCE, MCE) of the first n_bins rows of the state, in one loop.

    col 1 compares the fraction of positives with the mean p, col 2 the
    accuracy of the thresholded label. Per non-empty bin: g = counts[b, col] /
    n_b - sums[b, 0] / n_b, weight n_b / n (eq. 3-6); MCE is the largest |g|.
    NaN for all three if every bin is empty.
    """
    n = 0
    for b in range(n_bins):
        n += counts[b, 0]
    if n == 0:
        return np.nan, np.nan, np.nan
    ece = 0.0
    esce = 0.0
    mce = 0.0
    for b in range(n_bins):
        c = counts[b, 0]
        if c == 0:
            continue
        cf = np.float64(c)
        g = counts[b, col] / cf - sums[b, 0] / cf
        w = cf / n
        ece += w * abs(g)
        esce += w * g
        mce = max(mce, abs(g))
    return ece, esce, mce


@njit(nogil=True, error_model="numpy", cache=True)
def binned_measures(counts, col_obs, col_pos, sums, col_p):
    """Per-class sums of the L2 and debiased L2 errors and the Brier decomposition's
    bin sums, from (K, n_bins, .) counts and sums (K = 1: binary or top-label), in one loop.

    Returns ``per_class`` (K, 2): sum_b w_b g_b**2 and the debiased square
    sum_b w_b [g_b**2 - o_b (1 - o_b) / (n_b - 1)] (bins of fewer than 2 rows add 0),
    g_b = o_b - c_b, o_b = counts[k, b, col_obs] / n_b, c_b = sums[k, b, col_p] / n_b,
    w_b = n_b / n; and ``dec`` (5,): sum_b n_b (c_b - y_b)**2, sum_b n_b (y_b - y_k)**2
    and sum_k y_k (1 - y_k) (y_b the frequency of counts[k, b, col_pos], y_k the class's),
    sum_b n_b c_b**2 and sum_b n_b c_b y_b, over every class, and n = sum_b n_b of
    the first class (the rows; dec[5]). Nothing is added when n is 0.
    """
    K = counts.shape[0]
    nb = counts.shape[1]
    per_class = np.zeros((K, 2), np.float64)
    dec = np.zeros(6, np.float64)
    n = 0
    for b in range(nb):
        n += counts[0, b, 0]
    dec[5] = n
    if n == 0:
        return per_class, dec
    nf = np.float64(n)
    for k in range(K):
        pos = 0
        for b in range(nb):
            pos += counts[k, b, col_pos]
        base = pos / nf
        dec[2] += base * (1.0 - base)
        for b in range(nb):
            c = counts[k, b, 0]
            if c == 0:
                continue
            cf = np.float64(c)
            conf = sums[k, b, col_p] / cf
            obs = counts[k, b, col_obs] / cf
            freq = counts[k, b, col_pos] / cf
            g = obs - conf
            w = cf / nf
            per_class[k, 0] += w * g * g
            if c >= 2:
                per_class[k, 1] += w * (g * g - obs * (1.0 - obs) / (cf - 1.0))
            d = conf - freq
            dec[0] += cf * d * d
            r = freq - base
            dec[1] += cf * r * r
            dec[3] += cf * conf * conf
            dec[4] += cf * conf * freq
    return per_class, dec

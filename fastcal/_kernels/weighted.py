"""Fills of the binned state with a weight per row (``sample_weight``).

Only @njit functions over arrays and scalars: no validation, no objects. The
unweighted fills (``binary.py``, ``logits.py``, ``multiclass.py``) are left as
they are; a weighted batch runs these row-at-a-time kernels instead, which
fill the same unweighted state (``counts``, ``sums``, ``totals``, the
class-wise counters and ``checks``, every row counted once whatever its
weight) and, beside it, the weighted sums in float64:

    wsums[b, 0]   sum of w                                   (W_b)
    wsums[b, 1]   sum of w over positives (y == 1; K classes: argmax == label)
    wsums[b, 2]   sum of w over correct thresholded labels (K classes: as col 1)
    wsums[b, 3]   sum of w p (K classes: w times the confidence)
    wsums[b, 4]   sum of w T, T the ECD term (+inf on a certain wrong row)
    wsums[b, 5]   sum of w V, V the ECD term's variance under calibration
    wsums[b, 6]   sum of w**2 (Kish's effective rows: W_b**2 / sum w**2)
    wtotals[0..6] the weighted ``totals``: sums of w times the Brier term, the
                  NLL term, T**2, the squared Brier and NLL terms, p**2 (K
                  classes: sum_k p_k**2) and p y (K classes: p_y)
    wclass[k, b]  K classes, class-wise: sums of w, of w 1[y = k] and of w p_k
                  over the rows whose p_k falls in bin b

Bootstrap replicates of weighted rows (``boot_fill``): row i weighs m w_i in a
replicate, m the Poisson(1) draw of the unweighted replicates.

Columns 0-2 and 3-5 of ``wsums`` are the weighted forms of ``counts`` and
``sums`` column for column, so a report reads them the way it reads the
unweighted state with W_b in place of the row count. A row of weight 0 is
counted (its bin's rows, the checks) but adds nothing to the weighted sums
(so 0 x inf never makes a NaN). Invalid rows add nothing weighted; the
unweighted state gets them as the unweighted kernels put them (the binary
probabilities' trash row).

Sums run in row order without reassociation (``FASTMATH_EXACT``): the same
rows give the same sums bit for bit whatever else is compiled.
"""

import numpy as np

from ._config import FASTMATH_EXACT
from ._lazy import njit
from ._threads import fill_threads, run_threads, thread_range
from .binary import _uniform_ok
from .binary import new_state as new_binary_state
from .bootstrap import draw, poisson1, row_key, seed_key
from .mathfn import exp64, isnan, log64, log_pair
from .multiclass import CHECK_BAD_Y as MC_BAD_Y
from .multiclass import load_row, note
from .multiclass import new_state as new_multiclass_state
from .rows import bin_edges, bin_near_edge, bin_search, binary_terms, label_ok, log_sigmoid, note_pair, row_terms

N_WSUMS = 7
N_WTOTALS = 7
N_WCLASS = 3


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH_EXACT, cache=True)
def fill_binary(p, y, w, start, stop, edges, uniform, right, eps, with_logs, logits, kinds,
                counts, sums, totals, checks, wsums, wtotals):
    """Add rows [start, stop) of (p, y) with weights w into the binary state and its
    weighted sums. ``logits``: p holds logits of class 1 (sigmoid and logs taken
    from them, as ``logits.fill_binary_logits_range``; invalid rows are skipped);
    else probabilities (binned as ``binary.fill_range``; invalid rows go to the
    trash row). ``kinds``: the check kinds NaN p, bad p, bad y, NaN y, omitted."""
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    top = nb - 1
    invn = 1.0 / nbf
    lo = eps
    hi = 1.0 - eps
    nk = kinds.shape[0]
    is32 = p.itemsize == 4
    near = uniform and not logits and _uniform_ok(edges, is32)
    for i in range(start, stop):
        x = np.float64(p[i])
        yi = np.float64(y[i])
        if logits:
            ok_p = (x > -np.inf) & (x < np.inf)
        else:
            ok_p = (x >= 0.0) & (x <= 1.0)
        ok_y = (yi == 0.0) | (yi == 1.0)
        if not (ok_p and ok_y):
            note_pair(checks, nk, i, x, ok_p, yi, ok_y, kinds[0], kinds[1], kinds[4], kinds[3],
                      kinds[2])
            if not logits:  # the unweighted kernel's trash row: p = 0.5, y = 0 (correct)
                _add_row(counts, sums, nb, False, True, 0.5, 0.0, 0.0)
            continue
        pv, q, lp, lq = _probability(x, logits, eps, lo, hi)
        if near:
            b = bin_near_edge(pv, nbf, top, invn, right, is32)
        elif logits:
            b = bin_edges(pv, edges, nb, nbf, uniform, right)
        else:
            b = bin_search(edges, nb, pv, right)
        if with_logs:
            e, v, nll, br = binary_terms(q, pv, yi, lp, lq)
        else:
            e, v, nll = 0.0, 0.0, 0.0
            br = (pv - yi) * (pv - yi)
        pos = yi == 1.0
        ok = (pv > 0.5) == pos
        _add_row(counts, sums, b, pos, ok, pv, e, v)
        if with_logs:
            _totals(totals, 1.0, br, nll, e, pv * pv, pv * yi)
        wi = np.float64(w[i])
        if wi != 0.0:
            _add_weighted(wsums, b, wi, pos, ok, pv, e, v)
            if with_logs:
                _totals(wtotals, wi, br, nll, e, pv * pv, pv * yi)


@njit(inline="always", error_model="numpy", fastmath=FASTMATH_EXACT, cache=True)
def _probability(x, logits, eps, lo, hi):
    """(p, q, log q, log(1 - q)) of a valid row: p the probability (the sigmoid of a
    logit, its logs from the logit), q = p clipped to [eps, 1 - eps]."""
    if logits:
        lp = log_sigmoid(x, log64)
        lq = log_sigmoid(-x, log64)
        pv = exp64(lp)
        q = pv
        if eps > 0.0:
            q = min(max(pv, lo), hi)
            if q != pv:
                lp = log64(q)
                lq = log64(1.0 - q)
        return pv, q, lp, lq
    q = min(max(x, lo), hi)
    lp, lq = log_pair(q)
    return x, q, lp, lq


@njit(inline="always", error_model="numpy", cache=True)
def _add_row(counts, sums, b, pos, ok, pv, e, v):
    """A row into bin b of the unweighted state (as the unweighted kernels add it)."""
    counts[b, 0] += 1
    counts[b, 1] += np.int64(pos)
    counts[b, 2] += np.int64(ok)
    sums[b, 0] += pv
    sums[b, 1] += e
    sums[b, 2] += v


@njit(inline="always", error_model="numpy", cache=True)
def _add_weighted(wsums, b, wi, pos, ok, pv, e, v):
    """A row of weight wi (not 0) into bin b of the weighted sums."""
    wsums[b, 0] += wi
    wsums[b, 1] += wi if pos else 0.0
    wsums[b, 2] += wi if ok else 0.0
    wsums[b, 3] += wi * pv
    wsums[b, 4] += wi * e
    wsums[b, 5] += wi * v
    wsums[b, 6] += wi * wi


@njit(inline="always", error_model="numpy", cache=True)
def _totals(tot, wi, br, nll, e, p2, py):
    tot[0] += wi * br
    tot[1] += wi * nll
    tot[2] += wi * (e * e)
    tot[3] += wi * (br * br)
    tot[4] += wi * (nll * nll)
    tot[5] += wi * p2
    tot[6] += wi * py


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH_EXACT, cache=True)
def fill_multiclass(P, y, w, start, stop, edges, uniform, right, eps, logits, renorm, tol,
                    classwise, with_logs, counts, sums, totals, ccounts, csums, checks, wsums,
                    wtotals, wclass):
    """Add rows [start, stop) of (n, K) rows P with labels y and weights w into the
    K-class state (top-label and class-wise, as ``multiclass.fill_rows``) and its
    weighted sums (``wclass``: class-wise)."""
    K = P.shape[1]
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    kf = np.float64(K)
    lo = eps
    hi = 1.0 - eps
    qv = np.empty(K, np.float64)
    lv = np.empty(K, np.float64)
    ev = np.empty(K, np.float64)
    for i in range(start, stop):
        yi = np.float64(y[i])
        status, am = load_row(P, i, K, logits, renorm, tol, eps, qv, lv, with_logs)
        nan_y = isnan(yi)
        y_ok = label_ok(yi, kf)
        if status >= 0 or not y_ok:
            note(checks, i, status, nan_y, y_ok, MC_BAD_Y)
            continue
        yk = np.int64(yi)
        nll, ecd, brier, var, sq = row_terms(qv, ev, lv, K, yk, with_logs, lo, hi, True, log64)
        qy = qv[yk]
        conf = qv[am]
        b = bin_edges(conf, edges, nb, nbf, uniform, right)
        ok = am == yk
        _add_row(counts, sums, b, ok, ok, conf, ecd, var)
        _totals(totals, 1.0, brier, nll, ecd, sq, qy)
        wi = np.float64(w[i])
        if classwise:
            for k in range(K):
                bk = bin_edges(qv[k], edges, nb, nbf, uniform, right)
                ccounts[k, bk, 0] += 1
                csums[k, bk] += qv[k]
                if wi != 0.0:
                    wclass[k, bk, 0] += wi
                    wclass[k, bk, 2] += wi * qv[k]
            by = bin_edges(qy, edges, nb, nbf, uniform, right)
            ccounts[yk, by, 1] += 1
            if wi != 0.0:
                wclass[yk, by, 1] += wi
        if wi != 0.0:
            _add_weighted(wsums, b, wi, ok, ok, conf, ecd, var)
            _totals(wtotals, wi, brier, nll, ecd, sq, qy)


def binary_state(n_bins):
    """Zeroed binary state (``binary.new_state``) and weighted sums (wsums, wtotals)."""
    return (*new_binary_state(n_bins), np.zeros((n_bins + 1, N_WSUMS), np.float64),
            np.zeros(N_WTOTALS, np.float64))


def multiclass_state(n_bins, n_classes):
    """Zeroed K-class state (``multiclass.new_state``, class-wise) and weighted sums
    (wsums, wtotals, wclass)."""
    return (*new_multiclass_state(n_bins, n_classes, True),
            np.zeros((n_bins + 1, N_WSUMS), np.float64), np.zeros(N_WTOTALS, np.float64),
            np.zeros((n_classes, n_bins, N_WCLASS), np.float64))


def fill_binary_threads(p, y, w, edges, uniform, right, eps, with_logs, logits, kinds,
                        n_threads):
    """``fill_binary`` over all rows: on one thread, or the serial kernel on each of
    n_threads contiguous ranges with its own state, added in thread order
    (``_threads.fill_threads``). Returns ``binary_state``'s arrays, filled."""
    nb = edges.shape[0] - 1

    def fill(start, stop, *part):
        fill_binary(p, y, w, start, stop, edges, uniform, right, eps, with_logs, logits, kinds,
                    *part)

    return _run(p.shape[0], n_threads, lambda: binary_state(nb), fill, 3)


def fill_multiclass_threads(P, y, w, edges, uniform, right, eps, logits, renorm, tol, classwise,
                            with_logs, n_threads):
    """``fill_multiclass`` over all rows, as ``fill_binary_threads``; returns
    ``multiclass_state``'s arrays, filled."""
    nb = edges.shape[0] - 1
    k = P.shape[1]

    def fill(start, stop, *part):
        fill_multiclass(P, y, w, start, stop, edges, uniform, right, eps, logits, renorm, tol,
                        classwise, with_logs, *part)

    return _run(P.shape[0], n_threads, lambda: multiclass_state(nb, k), fill, 5)


def _run(n, n_threads, new_part, fill, checks_at):
    if n_threads == 1:
        part = new_part()
        fill(0, n, *part)
        return part
    return fill_threads(n, n_threads, new_part, fill, checks_at)


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH_EXACT, cache=True)
def boot_fill(x, y, w, row0, edges, uniform, right, seed, r0, r1, bcounts, bsums):
    """Bootstrap replicates r0..r1-1 of ranked rows (labels 0/1, values x in [0, 1];
    NaN rows carry no weight) with weights w: in replicate r, row i weighs
    m w_i with m = Poisson(1) the draw of the unweighted replicates
    (``bootstrap.poisson1`` of (seed, global row row0 + i, r)), so a row's
    multipliers do not depend on the chunking. Adds, per replicate and bin, the
    sums of m w, of m w over positives and over correct thresholded labels
    (``bcounts``, float64) and of m w x (``bsums``), rows in row order."""
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    skey = seed_key(seed)
    for i in range(x.shape[0]):
        xi = np.float64(x[i])
        yi = np.float64(y[i])
        wi = np.float64(w[i])
        if not ((xi == xi) & (yi == yi)) or wi == 0.0:
            continue
        b = bin_edges(xi, edges, nb, nbf, uniform, right)
        pos = yi == 1.0
        ok = (xi > 0.5) == pos
        key = row_key(skey, row0 + i)
        for r in range(r0, r1):
            mw = np.float64(poisson1(draw(key, r))) * wi
            bcounts[r, b, 0] += mw
            bcounts[r, b, 1] += mw if pos else 0.0
            bcounts[r, b, 2] += mw if ok else 0.0
            bsums[r, b] += mw * xi


def boot_fill_threads(x, y, w, row0, edges, uniform, right, seed, n_threads, bcounts, bsums):
    """``boot_fill`` over all replicates, each thread its own contiguous range of
    replicates (as ``bootstrap.boot_fill_parallel``: the result does not depend
    on the thread count)."""
    n_rep = bcounts.shape[0]

    def run(t):
        r0, r1 = thread_range(t, n_rep, n_threads)
        if r1 > r0:
            boot_fill(x, y, w, row0, edges, uniform, right, seed, r0, r1, bcounts, bsums)

    run_threads(n_threads, run)

"""Single-pass fill of the binary per-bin state (the layout of ``binary.py``) from logits.

Only @njit functions over arrays and scalars: no validation, no objects.
"""

import numpy as np

from ._config import FASTMATH
from ._lazy import njit
from .mathfn import close_compensated, exp64, flush_compensated, flush_every, log64
from .rows import bin_edges, binary_terms, log_sigmoid, note_pair


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def fill_binary_logits_range(z, y, start, stop, edges, uniform, right, eps,
                             counts, sums, totals, checks, bin_checks):
    """Binary state (the layout of ``binary.py``) from logits z of class 1.

    p = sigmoid(z) is never stored; log p and log(1 - p) come from z
    directly, so large |z| keep exact ECD (p - y) z and NLL terms where p
    itself rounds to 0 or 1; with eps > 0 only a clipped p takes the logs
    of the clipped value. ``bin_checks`` holds the binary check kinds
    (NaN z, infinite z, bad label, NaN label, omitted) as indices
    0..4 of ``checks``.

    Per-bin sums go through a block-local copy flushed with compensation
    (``mathfn.flush_compensated``): p = sigmoid(z) is a full float64, and one
    long plain sum per bin would depend on how the rows are split at the
    1e-12 level of ECE.
    """
    nb = edges.shape[0] - 1
    nbf = np.float64(nb)
    lo = eps
    hi = 1.0 - eps
    nk = bin_checks.shape[0]
    loc = np.zeros_like(sums)
    comp = np.zeros_like(sums)
    every = flush_every(nb)
    since = 0
    for i in range(start, stop):
        if since == every:
            flush_compensated(loc, sums, comp)
            since = 0
        since += 1
        zi = np.float64(z[i])
        yi = np.float64(y[i])
        fin = (zi > -np.inf) & (zi < np.inf)
        y_ok = (yi == 0.0) | (yi == 1.0)
        if not (fin and y_ok):
            note_pair(checks, nk, i, zi, fin, yi, y_ok, bin_checks[0], bin_checks[1],
                      bin_checks[4], bin_checks[3], bin_checks[2])
            continue
        lp = log_sigmoid(zi, log64)
        lq = log_sigmoid(-zi, log64)
        p = exp64(lp)
        pe = p
        if eps > 0.0:
            pe = min(max(p, lo), hi)
            if pe != p:
                # clipped: logs of the clipped value. Unclipped rows keep lp, lq
                # from z: for p near 1, log(1 - p) turns the last-bit rounding
                # of p into an error of up to 1e-7 (p = 1 - 1e-9).
                lp = log64(pe)
                lq = log64(1.0 - pe)
        # the variance is 0 when p rounds to 0 or 1, where pq * logit**2 would be
        # 0 * inf once |z| > 1.34e154
        e, v, nll, br = binary_terms(pe, p, yi, lp, lq)
        b = bin_edges(p, edges, nb, nbf, uniform, right)
        counts[b, 0] += 1
        counts[b, 1] += np.int64(yi == 1.0)
        counts[b, 2] += np.int64((p > 0.5) == (yi == 1.0))
        loc[b, 0] += p
        loc[b, 1] += e
        loc[b, 2] += v
        totals[0] += br
        totals[1] += nll
        totals[2] += e * e
        totals[3] += br * br
        totals[4] += nll * nll
        totals[5] += p * p
        totals[6] += p * yi
    close_compensated(loc, sums, comp)

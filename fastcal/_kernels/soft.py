"""Single-pass sums of calibration measures for multi-class predictions with soft labels.

Only @njit functions over arrays and scalars: no validation, no objects.
``P`` is (n, K) probabilities or (``logits=True``) scores; ``T`` holds one label
distribution per row. Rows are read and checked as in ``multiclass.py`` (its
``CHECK_*`` kinds, ``CHECK_BAD_T`` for a target row that is not a distribution).
"""

import numpy as np

from ._config import FASTMATH
from ._lazy import njit
from ._threads import fill_threads
from .mathfn import isnan, log64
from .multiclass import CHECK_BAD_T, N_CHECK_KINDS, load_row, note
from .rows import row_clip

N_SOFT = 9
# soft totals: sum |EntCE|, sum EntCE (signed, H(target) - H(model)), RankCS matches,
# sum DistCE (total variation), Brier, cross-entropy, ECD, ECD variance, squared ECD


@njit(nogil=True, error_model="numpy", fastmath=FASTMATH, cache=True)
def soft_range(P, T, start, stop, eps, logits, renorm, tol, totals, checks):
    """Soft-label sums for rows [start, stop): T holds one label distribution per row."""
    K = P.shape[1]
    qv = np.empty(K, np.float64)
    lv = np.empty(K, np.float64)
    tv = np.empty(K, np.float64)
    ev = np.empty(K, np.float64)
    lo = eps
    hi = 1.0 - eps
    for i in range(start, stop):
        status, am = load_row(P, i, K, logits, renorm, tol, eps, qv, lv)
        st = 0.0
        tmn = np.inf
        for k in range(K):
            t = np.float64(T[i, k])
            tv[k] = t
            st += t
            tmn = min(tmn, t)
        t_nan = isnan(st)
        t_ok = (st > -np.inf) & (st < np.inf) & (tmn >= 0.0) & (abs(st - 1.0) <= tol)
        if status >= 0 or not t_ok:
            note(checks, i, status, t_nan, t_ok, CHECK_BAD_T)
            continue
        if eps > 0.0:
            row_clip(qv, ev, lv, K, lo, hi, log64)
        else:
            for k in range(K):
                ev[k] = qv[k]
        hp = 0.0
        ht = 0.0
        ce = 0.0
        tvd = 0.0
        br = 0.0
        for k in range(K):
            q = qv[k]
            t = tv[k]
            qe = ev[k]
            hp += 0.0 if qe == 0.0 else qe * lv[k]
            ht += 0.0 if t == 0.0 else t * log64(t)
            ce += 0.0 if t == 0.0 else t * lv[k]
            tvd += abs(q - t)
            br += (q - t) * (q - t)
        var = 0.0
        for k in range(K):
            q = ev[k]
            d = lv[k] - hp
            var += 0.0 if q == 0.0 else q * d * d
        # Ranking: stable argsorts of the prediction and the target must match.
        rank_ok = 1.0
        op = np.argsort(qv, kind="mergesort")
        ot = np.argsort(tv, kind="mergesort")
        for k in range(K):
            if op[k] != ot[k]:
                rank_ok = 0.0
                break
        # H(.) = -sum p log p; EntCE_i = H(target) - H(model).
        ent = hp - ht
        ecd = hp - ce
        totals[0] += abs(ent)
        totals[1] += ent
        totals[2] += rank_ok
        totals[3] += 0.5 * tvd
        totals[4] += br
        totals[5] += -ce
        totals[6] += ecd
        totals[7] += var
        totals[8] += ecd * ecd


def soft_parallel(P, T, eps, logits, renorm, tol, n_threads):
    """soft_range over n_threads contiguous row ranges, serial reduction in
    thread order (the serial kernel in a Python thread pool, as fill_parallel)."""
    def new_part():
        checks = np.full(2 * N_CHECK_KINDS, -1, np.int64)
        checks[:N_CHECK_KINDS] = 0
        return np.zeros(N_SOFT, np.float64), checks

    def fill(start, stop, totals, checks):
        soft_range(P, T, start, stop, eps, logits, renorm, tol, totals, checks)

    return fill_threads(P.shape[0], n_threads, new_part, fill, 1)

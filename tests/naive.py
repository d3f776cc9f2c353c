"""Slow, obviously-correct float64 references written with loops.

Kernels are compared with these on seeded random data and hand-picked edges.
"""

import math

import numpy as np


def uniform_edges(n_bins, dtype):
    """k / n computed in float64, rounded to dtype, as Python floats."""
    return [float(np.asarray(k / n_bins, dtype=np.float64).astype(dtype)) for k in range(n_bins + 1)]


def bin_of(p, edges, closed):
    """Index of the bin holding p, by linear scan over the edges."""
    n = len(edges) - 1
    for b in range(n):
        lo, hi = edges[b], edges[b + 1]
        if closed == "left":
            if lo <= p < hi or (b == n - 1 and p == hi):
                return b
        else:
            if lo < p <= hi or (b == 0 and p == lo):
                return b
    raise AssertionError(f"no bin for {p}")


def ecd_term(p, y):
    """(p - y) log(p / (1 - p)) with its limits at p in {0, 1}."""
    if p == y:
        return 0.0
    if p in (0.0, 1.0):
        return math.inf
    return (p - y) * (math.log(p) - math.log1p(-p))


def var_term(p):
    if p in (0.0, 1.0):
        return 0.0
    logit = math.log(p) - math.log1p(-p)
    return p * (1 - p) * logit * logit


def nll_term(p, y):
    q = p if y == 1 else 1.0 - p
    return math.inf if q == 0.0 else -(math.log(p) if y == 1 else math.log1p(-p))


def report(y, p, *, n_bins=10, closed="left", observed="frac_pos", edges=None, eps=0.0):
    """Dict of scalars and per-bin lists, by loops in float64."""
    dtype = np.asarray(p).dtype
    if edges is None:
        edges = uniform_edges(n_bins, dtype)
    else:
        edges = [float(e) for e in edges]
    nb = len(edges) - 1
    cnt = [0] * nb
    sp = [0.0] * nb
    pos = [0] * nb
    ok = [0] * nb
    se = [0.0] * nb
    sv = [0.0] * nb
    brier = nll = 0.0
    for pi, yi in zip(np.asarray(p, dtype=np.float64).tolist(), np.asarray(y).tolist()):
        yi = int(yi)
        b = bin_of(pi, edges, closed)
        cnt[b] += 1
        sp[b] += pi
        pos[b] += yi
        ok[b] += int((pi > 0.5) == (yi == 1))
        q = min(max(pi, eps), 1.0 - eps)
        se[b] += ecd_term(q, yi)
        sv[b] += var_term(q)
        brier += (pi - yi) ** 2
        nll += nll_term(q, yi)
    n = sum(cnt)
    conf = [sp[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)]
    frac = [pos[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)]
    acc = [ok[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)]
    obs = frac if observed == "frac_pos" else acc
    esce_b = [obs[b] - conf[b] for b in range(nb)]
    ece = sum(cnt[b] / n * abs(esce_b[b]) for b in range(nb) if cnt[b])
    esce = sum(cnt[b] / n * esce_b[b] for b in range(nb) if cnt[b])
    mce = max(abs(esce_b[b]) for b in range(nb) if cnt[b])
    return {
        "n": n, "ece": ece, "esce": esce, "mce": mce, "ecd": sum(se) / n,
        "brier": brier / n, "nll": nll / n, "ecd_var": sum(sv),
        "count": cnt, "conf": conf, "frac_pos": frac, "accuracy": acc,
        "ecd_bins": [se[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)],
    }


def ace(y, p, n_bins, observed="frac_pos"):
    """ECE over equal-mass groups of the stably sorted data, weighted by size."""
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y)
    order = sorted(range(len(p)), key=lambda i: (p[i], i))
    n = len(p)
    total = 0.0
    for g in range(n_bins):
        idx = order[(g * n) // n_bins:((g + 1) * n) // n_bins]
        if not idx:
            continue
        conf = sum(p[i] for i in idx) / len(idx)
        if observed == "frac_pos":
            obs = sum(int(y[i]) for i in idx) / len(idx)
        else:
            obs = sum(int((p[i] > 0.5) == (y[i] == 1)) for i in idx) / len(idx)
        total += len(idx) / n * abs(obs - conf)
    return total

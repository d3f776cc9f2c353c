"""Slow, obviously-correct float64 loop references for multi-class and soft-label metrics."""

import math

import numpy as np

from .naive import bin_of, uniform_edges


def rows(P):
    return [[float(x) for x in row] for row in np.asarray(P, dtype=np.float64)]


def softmax_row(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = sum(e)
    return [v / s for v in e], [(v - m) - math.log(s) for v in z]


def plogp(p):
    return 0.0 if p == 0.0 else p * math.log(p)


def argmax(row):
    best = 0
    for k in range(1, len(row)):
        if row[k] > row[best]:
            best = k
    return best


def report(y, P, *, n_bins=10, closed="left", edges=None, dtype=np.float64, logits=False):
    """Top-label table, eq. 12 ECD, Brier, NLL and class-wise ECE, by loops."""
    if edges is None:
        edges = uniform_edges(n_bins, dtype)
    nb = len(edges) - 1
    R = rows(P)
    K = len(R[0])
    cnt = [0] * nb
    ok = [0] * nb
    sc = [0.0] * nb
    se = [0.0] * nb
    sv = [0.0] * nb
    ccnt = [[0] * nb for _ in range(K)]
    ctrue = [[0] * nb for _ in range(K)]
    csum = [[0.0] * nb for _ in range(K)]
    brier = nll = 0.0
    for row, yi in zip(R, [int(v) for v in np.asarray(y).tolist()]):
        if logits:
            p, lp = softmax_row(row)
        else:
            p = row
            lp = [math.log(v) if v > 0 else -math.inf for v in p]
        h = sum(0.0 if p[k] == 0 else p[k] * lp[k] for k in range(K))
        var = sum(0.0 if p[k] == 0 else p[k] * (lp[k] - h) ** 2 for k in range(K))
        a = argmax(p)
        b = bin_of(p[a], edges, closed)
        cnt[b] += 1
        ok[b] += int(a == yi)
        sc[b] += p[a]
        se[b] += h - lp[yi]
        sv[b] += var
        brier += sum((p[k] - (1.0 if k == yi else 0.0)) ** 2 for k in range(K))
        nll += -lp[yi]
        for k in range(K):
            bk = bin_of(p[k], edges, closed)
            ccnt[k][bk] += 1
            csum[k][bk] += p[k]
            ctrue[k][bk] += int(yi == k)
    n = sum(cnt)
    conf = [sc[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)]
    acc = [ok[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)]
    gaps = [acc[b] - conf[b] for b in range(nb)]
    class_ece = []
    for k in range(K):
        e = 0.0
        for b in range(nb):
            if ccnt[k][b]:
                e += ccnt[k][b] / n * abs(ctrue[k][b] / ccnt[k][b] - csum[k][b] / ccnt[k][b])
        class_ece.append(e)
    return {
        "n": n,
        "ece": sum(cnt[b] / n * abs(gaps[b]) for b in range(nb) if cnt[b]),
        "esce": sum(cnt[b] / n * gaps[b] for b in range(nb) if cnt[b]),
        "mce": max(abs(gaps[b]) for b in range(nb) if cnt[b]),
        "ecd": sum(se) / n,
        "ecd_var": sum(sv),
        "brier": brier / n,
        "nll": nll / n,
        "count": cnt,
        "conf": conf,
        "accuracy": acc,
        "ecd_bins": [se[b] / cnt[b] if cnt[b] else math.nan for b in range(nb)],
        "class_ece": class_ece,
        "classwise_ece": sum(class_ece) / K,
        "class_count": ccnt,
        "class_true": ctrue,
    }


def top_label_ace(y, P, n_bins):
    """Equal-mass groups of the rows stably sorted by max probability."""
    R = rows(P)
    y = [int(v) for v in np.asarray(y).tolist()]
    conf = [max(r) for r in R]
    ok = [int(argmax(r) == yi) for r, yi in zip(R, y)]
    order = sorted(range(len(R)), key=lambda i: (conf[i], i))
    n = len(R)
    total = 0.0
    for g in range(n_bins):
        idx = order[(g * n) // n_bins:((g + 1) * n) // n_bins]
        if idx:
            total += len(idx) / n * abs(sum(ok[i] for i in idx) / len(idx)
                                        - sum(conf[i] for i in idx) / len(idx))
    return total


def stable_argsort(row):
    return sorted(range(len(row)), key=lambda k: (row[k], k))


def soft(T, P):
    """Soft-label measures by loops (see fastcal.soft)."""
    TT, PP = rows(T), rows(P)
    n = len(PP)
    out = dict.fromkeys(("entce", "entce_signed", "rankcs", "distce", "brier", "nll", "ecd"), 0.0)
    for t, p in zip(TT, PP):
        hp = -sum(plogp(v) for v in p)
        ht = -sum(plogp(v) for v in t)
        ce = 0.0
        for tk, pk in zip(t, p):
            if tk > 0:
                ce += -math.inf if pk == 0 else tk * math.log(pk)
        out["entce"] += abs(ht - hp)
        out["entce_signed"] += ht - hp
        out["rankcs"] += float(stable_argsort(p) == stable_argsort(t))
        out["distce"] += 0.5 * sum(abs(a - b) for a, b in zip(p, t))
        out["brier"] += sum((a - b) ** 2 for a, b in zip(p, t))
        out["nll"] += -ce
        out["ecd"] += -hp - ce
    return {k: v / n for k, v in out.items()}

"""The contenders raced in the binary benchmarks, and the machine's read floor.

Each function takes (y, p, n_bins) and returns a dict of the values it
computes, so that the benchmark can check them against fastcal's report on
the same data. Peers that are not installed raise ImportError at call time;
the benchmarks turn that into a skip with a message.
"""

from numba import njit, prange
import numpy as np

import fastcal
from fastcal._kernels._config import FASTMATH

# -- the read floor ----------------------------------------------------------------

@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _read_sum(p, y, n_threads):
    n = p.shape[0]
    sp = np.zeros(n_threads)
    sy = np.zeros(n_threads, np.int64)
    for t in prange(n_threads):
        # Slice first: indexing p[i] with a computed start would carry a
        # negative-index check per element and not vectorise.
        ps = p[(t * n) // n_threads:((t + 1) * n) // n_threads]
        ys = y[(t * n) // n_threads:((t + 1) * n) // n_threads]
        a = 0.0
        c = 0
        for i in range(ps.shape[0]):
            a += ps[i]
            c += ys[i]
        sp[t] = a
        sy[t] = c
    return sp.sum(), sy.sum()


def read_floor(y, p, n_threads):
    """Sum p and y in one parallel pass: the least any fill over the same bytes can cost."""
    return _read_sum(p, y, n_threads)


# -- numpy ---------------------------------------------------------------------------

def _ecd_terms(p64, y):
    """(p - y) logit(p) with the limits of fastcal (0 at p == y, +inf at p == 1 - y)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logit = np.log(p64) - np.log1p(-p64)
        e = (p64 - y) * logit
    e[p64 == y] = 0.0
    return e, logit


def numpy_loop(y, p, n_bins):
    """A loop over bins with boolean masks (the style of the worked example in
    seed 002), using fastcal's edges and convention [a, b), last bin [a, 1]."""
    edges = fastcal.uniform_edges(n_bins, p.dtype)
    n = p.shape[0]
    ece = 0.0
    for b in range(n_bins):
        lo, hi = edges[b], edges[b + 1]
        in_bin = (p >= lo) & ((p < hi) if b < n_bins - 1 else (p <= hi))
        count = np.count_nonzero(in_bin)
        if count:
            conf = p[in_bin].astype(np.float64).mean()
            frac = y[in_bin].mean()
            ece += count / n * abs(frac - conf)
    p64 = p.astype(np.float64)
    e, _ = _ecd_terms(p64, y)
    return {"ece": ece, "ecd": float(e.mean())}


def numpy_ece(y, p, n_bins):
    """ECE alone with np.searchsorted + np.bincount (fastcal's edges and convention)."""
    edges = fastcal.uniform_edges(n_bins, p.dtype)
    b = np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1)
    sum_p = np.bincount(b, weights=p, minlength=n_bins)
    pos = np.bincount(b, weights=y, minlength=n_bins)
    return {"ece": float(np.sum(np.abs(pos - sum_p)) / p.shape[0])}


def numpy_vectorised(y, p, n_bins):
    """bincount per bin and a vectorised ECD: the same numbers as fastcal's
    report (ECE, ESCE, MCE, ECD, Brier, NLL, per-bin conf, frac_pos, ECD)."""
    edges = fastcal.uniform_edges(n_bins, p.dtype)
    b = np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1)
    p64 = p.astype(np.float64)
    yf = y.astype(np.float64)
    count = np.bincount(b, minlength=n_bins)
    sum_p = np.bincount(b, weights=p64, minlength=n_bins)
    pos = np.bincount(b, weights=yf, minlength=n_bins)
    e, logit = _ecd_terms(p64, yf)
    sum_e = np.bincount(b, weights=e, minlength=n_bins)
    n = p.shape[0]
    full = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = sum_p / count
        frac = pos / count
        ecd_bins = sum_e / count  # NaN in an empty bin, as conf and frac_pos
        nll = -np.where(yf == 1, np.log(p64), np.log1p(-p64))
    gap = (frac - conf)[full]
    w = count[full] / n
    return {"ece": float(np.sum(w * np.abs(gap))), "esce": float(np.sum(w * gap)),
            "mce": float(np.max(np.abs(gap))), "ecd": float(e.sum() / n),
            "brier": float(np.mean((p64 - yf) ** 2)), "nll": float(nll.mean()),
            "count": count, "conf": conf, "frac_pos": frac, "ecd_bins": ecd_bins}


def numpy_sums_chunked(y, p, n_bins, chunk=10**7):
    """Per-bin count, sum of p, positives, sum of ECD terms and the Brier and NLL
    sums of all rows, by numpy in chunks (to check fastcal's report on N rows)."""
    edges = fastcal.uniform_edges(n_bins, p.dtype)
    count = np.zeros(n_bins, np.int64)
    sums = np.zeros((3, n_bins))
    brier = nll = 0.0
    for a in range(0, p.shape[0], chunk):
        pc, yc = p[a:a + chunk], y[a:a + chunk]
        b = np.minimum(np.searchsorted(edges, pc, side="right") - 1, n_bins - 1)
        p64 = pc.astype(np.float64)
        yf = yc.astype(np.float64)
        e, _ = _ecd_terms(p64, yf)
        count += np.bincount(b, minlength=n_bins)
        sums += [np.bincount(b, weights=w, minlength=n_bins) for w in (p64, yf, e)]
        brier += float(np.sum((p64 - yf) ** 2))
        with np.errstate(divide="ignore"):
            nll -= float(np.sum(np.where(yf == 1, np.log(p64), np.log1p(-p64))))
    return {"count": count, "sum_p": sums[0], "pos": sums[1], "sum_ecd": sums[2],
            "brier": brier, "nll": nll}


# -- peers ---------------------------------------------------------------------------

def sklearn_metrics(y, p, n_bins):
    """calibration_curve (bins (a, b], p = 0 in the first), brier_score_loss, log_loss."""
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss, log_loss

    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy="uniform")
    return {"frac_pos": prob_true, "conf": prob_pred, "brier": brier_score_loss(y, p),
            "nll": log_loss(y, p)}


def torchmetrics_ece(y, p, n_bins):
    """torchmetrics binary_calibration_error (L1): sums in p's dtype (float32 here)."""
    import torch
    from torchmetrics.functional.classification import binary_calibration_error

    value = binary_calibration_error(torch.from_numpy(p), torch.from_numpy(y), n_bins=n_bins,
                                     norm="l1", validate_args=False)
    return {"ece": float(value)}


def netcal_ece(y, p, n_bins):
    """netcal ECE: clips p to [eps, 1 - eps] (eps of p's dtype), then numpy
    histogram bins [a, b) with the last bin closed, edges in float64."""
    from netcal.metrics import ECE

    return {"ece": float(ECE(bins=n_bins).measure(p, y))}


def fastcal_report(y, p, n_bins, threads=None):
    """The call as the README shows it: every metric, ACE included (its defaults)."""
    return fastcal.calibration_report(y, p, n_bins=n_bins, threads=threads)


def fastcal_report_one_pass(y, p, n_bins, threads=None):
    return fastcal.calibration_report(y, p, n_bins=n_bins, ace=False, threads=threads)


def ace_by_sort(y, p, n_bins):
    """ACE by a stable sort of all rows (the definition), untimed reference."""
    order = np.argsort(p, kind="stable")
    n = p.shape[0]
    starts = (np.arange(n_bins) * n) // n_bins
    sum_p = np.add.reduceat(p[order].astype(np.float64), starts)
    pos = np.add.reduceat(y[order].astype(np.float64), starts)
    return float(np.sum(np.abs(pos - sum_p)) / n)


def fastcal_ece(y, p, n_bins, threads=None):
    return {"ece": fastcal.ece(y, p, n_bins=n_bins, threads=threads)}

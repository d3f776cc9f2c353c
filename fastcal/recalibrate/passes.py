"""What one pass of a fit computes over one part of a source: the sums of the NLL
and its derivatives, the fine histogram of a binary feature, the value bins of
isotonic regression and histogram binning; and the link functions."""

import numpy as np

from fastcal._kernels import recalibrate as kr
from fastcal.accumulators import equal_mass as em
from fastcal.inputs.batch import prediction_kind
from fastcal.inputs.binning import kernel_edges


def _add(acc, r):
    if acc is None:
        return r
    if isinstance(r, tuple):
        return tuple(a + b for a, b in zip(acc, r))
    return acc + r


def feature_code(logits, on_p=False):
    """The kernels' code of the binary feature f: the logit (``logits``), p itself
    (``on_p``) or logit(p)."""
    if logits:
        return kr.FEATURE_LOGIT
    return kr.FEATURE_P if on_p else kr.FEATURE_LOGIT_OF_P


def _pass_binary(y, x, feature, a, b, keep_certain):
    """The NLL sums of sigmoid(a f + b); ``feature``: :func:`feature_code`."""
    out = np.zeros(kr.N_SUMS, np.float64)
    kr.sums_binary(x, y, feature, a, b, keep_certain, out)
    return out


def _pass_binary_hist(y, x, feature, keep_certain):
    """The sums at (a, b) = (1, 0) and the fine histogram of the feature per label
    (``keep_certain``: rows of p = 0 or 1 are fixed points, see ``kr.sums_binary``)."""
    out = np.zeros(kr.N_SUMS, np.float64)
    kr.sums_binary(x, y, feature, 1.0, 0.0, keep_certain, out)
    counts = np.zeros((2, 2, kr.N_FEATURE_BINS), np.float64)
    sum_f = np.zeros((2, 2, kr.N_FEATURE_BINS), np.float64)
    kr.feature_histogram(x, y, feature, keep_certain, counts, sum_f)
    return out, counts, sum_f


def _pass_multiclass_sample(y, x, logits, stride):
    """The sums at s = 1 and every ``stride``-th row of the part (a start for Newton)."""
    return _pass_multiclass(y, x, logits, 1.0), (np.asarray(y[::stride]),
                                                np.asarray(x[::stride]))


def _add_sample(acc, r):
    if acc is None:
        return r
    return acc[0] + r[0], (np.concatenate([acc[1][0], r[1][0]]),
                           np.concatenate([acc[1][1], r[1][1]]))


SAMPLE_ROWS = 1 << 16  # rows of the sample a K-class temperature fit starts from


class _Points:
    """The fine histogram of a binary feature as weighted point masses (f, y, w):
    the sums of the NLL at any (a, b) in memory, to start the exact passes near
    the answer (f within 1/64 relative of the rows it stands for)."""

    def __init__(self, counts, sum_f):
        nz = counts > 0
        self.w = counts[nz]
        self.f = sum_f[nz] / self.w
        self.y = np.broadcast_to(np.array([0.0, 1.0])[:, None, None], counts.shape)[nz]

    def sums(self, a, b):
        t = a * self.f + b
        q = _sigmoid(t)
        w, f = self.w, self.f
        r = w * (q - self.y)
        ww = w * q * (1.0 - q)
        out = np.zeros(kr.N_SUMS, np.float64)
        out[kr.N_ROWS] = w.sum()
        out[kr.NLL] = np.sum(w * np.logaddexp(0.0, np.where(self.y == 1.0, -t, t)))
        out[kr.G_A] = np.sum(r * f)
        out[kr.G_B] = np.sum(r)
        out[kr.H_AA] = np.sum(ww * f * f)
        out[kr.H_AB] = np.sum(ww * f)
        out[kr.H_BB] = np.sum(ww)
        out[kr.T_AAA] = np.sum(ww * f ** 3 * (1.0 - 2.0 * q))
        return out


def _pass_multiclass(y, x, logits, s):
    out = np.zeros(kr.N_SUMS, np.float64)
    kr.sums_multiclass(x, y, logits, s, out)
    return out


def _edge_dtype(p, logits):
    """The dtype whose rounding of k / n_bins the report's uniform edges use for
    these probabilities: float32 for float32 probabilities, else float64 (logits:
    values computed in float64), as ``Binned.kernel_edges``."""
    return np.float32 if (not logits and p.dtype == np.float32) else np.float64


def _pass_values(y, p, n_bins, logits, report_edges):
    """Per value bin: rows, positives, sum of the value (binary p, sigmoid of the
    logit, or top-label confidence). ``report_edges``: the report's edges for
    p's dtype (histogram binning), else float64 edges (isotonic's fine bins)."""
    dtype = _edge_dtype(p, logits) if report_edges else np.float64
    y, x = em.ranking_pair(y, p, kind=prediction_kind(p, logits=logits), logits=logits)
    counts = np.zeros(n_bins, np.int64)
    positives = np.zeros(n_bins, np.int64)
    sum_x = np.zeros(n_bins, np.float64)
    bad = np.zeros(2, np.int64)
    kr.value_sums(x, y, kernel_edges(n_bins, np.dtype(dtype).str), counts, positives, sum_x,
                  bad)
    return counts, positives, sum_x, bad


def _sigmoid(z):
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _logit(p):
    p = np.clip(np.asarray(p, dtype=np.float64), kr.CLIP, 1.0 - kr.CLIP)
    return np.log(p) - np.log1p(-p)


def _softmax(z):
    """Row softmax of (N, K) float64 values."""
    z = z - np.max(z, axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


# The probabilities a map reads from predictions of each kind (``logits``: K-class
# rows are logits)
PROBABILITIES = {
    "binary": lambda p, logits: p,
    "logits": lambda p, logits: _sigmoid(p),
    "multiclass": lambda p, logits: _softmax(p) if logits else p,
}

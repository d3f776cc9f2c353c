"""Kernels of recalibration (fastcal.recalibrate): mergeable sums for Newton steps and histograms.

Only @njit functions over arrays and scalars. Every function fills float64
sums (counts as float64 too where they sit beside sums, int64 otherwise) that
add exactly across parts, so one pass over any source (thread slices, file
chunks, Dask partitions) gives the gradient and Hessian of the negative log
likelihood (NLL) at the current parameters.

Rows are skipped when a value or label is NaN (counted in ``N_NAN``), or
invalid (probability outside [0, 1], infinite logit, label not 0/1 or not a
class index; counted in ``N_BAD``); the caller decides whether either is an
error.

Binary (``sums_binary``): q = sigmoid(a f + b) with f, by the ``feature``
code, logit(p) for probabilities (FEATURE_LOGIT_OF_P, p clipped to [CLIP,
1 - CLIP]), the logit itself (FEATURE_LOGIT) or p itself (FEATURE_P,
scikit-learn's sigmoid calibration of ``predict_proba``); the NLL of a row is
softplus(-(a f + b)) for y = 1 and softplus(a f + b) for y = 0, computed
stably. Temperature scaling is a = 1 / T, b = 0 on a logit.

K classes (``sums_multiclass``): q = softmax(s z) with z the logits (or
log p, floored at log LOG_FLOOR = log 1e-300 = -690.8: p = 0 is treated as
1e-300, not as -inf); the NLL of a row is logsumexp(s z) - s z_y, its derivatives in s are
E_q[z] - z_y, Var_q[z] and the third central moment E_q[(z - E_q z)^3].
"""

import math

import numpy as np

from ._lazy import njit

# layout of the sums; N_ZERO_TRUE: valid rows of probabilities whose true class
# (binary: label) has probability exactly 0 (certain and wrong)
N_ROWS, N_NAN, N_BAD, NLL, G_A, G_B, H_AA, H_AB, H_BB, T_AAA, N_ZERO_TRUE = range(11)
N_SUMS = 11
LOG_FLOOR = 1e-300  # K classes from probabilities: log p is log(max(p, LOG_FLOOR))

CLIP = 1e-15  # probabilities are clipped to [CLIP, 1 - CLIP] before their logit

# the binary feature f of sums_binary and feature_histogram (0 and 1: False and True of logits)
FEATURE_LOGIT_OF_P, FEATURE_LOGIT, FEATURE_P = 0, 1, 2


@njit(inline="always", cache=True)
def _softplus(x):
    """log(1 + exp(x)), stable for any x."""
    if x > 0.0:
        return x + np.log1p(np.exp(-x))
    return np.log1p(np.exp(x))


@njit(inline="always", cache=True)
def _sigmoid(x):
    if x >= 0.0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


@njit(inline="always", cache=True)
def _feature(v, feature):
    """(feature f, status) of one binary input: status 0 ok, 1 NaN, 2 invalid."""
    if v != v:
        return 0.0, 1
    if feature == FEATURE_LOGIT:
        if np.isinf(v):
            return 0.0, 2
        return v, 0
    if v < 0.0 or v > 1.0:
        return 0.0, 2
    if feature == FEATURE_P:
        return v, 0
    p = min(max(v, CLIP), 1.0 - CLIP)
    return np.log(p) - np.log1p(-p), 0


@njit(nogil=True, error_model="numpy", cache=True)
def sums_binary(x, y, feature, a, b, keep_certain, out):
    """Add the NLL sums of q = sigmoid(a f + b) over the rows of (x, y) to ``out``.

    ``out[G_A], out[G_B]``: gradient in (a, b); ``H_AA, H_AB, H_BB``: Hessian;
    ``T_AAA``: third derivative in a (the safe target's Newton step).
    ``keep_certain`` (FEATURE_LOGIT_OF_P only): a row with p exactly 0 or 1 is a
    fixed point of the map (temperature scaling keeps it, as its transform
    does): it counts in N_ROWS and adds nothing else; with the wrong label it
    is counted in N_ZERO_TRUE (its NLL and ECD term are +inf at every T).
    """
    n = 0.0
    n_nan = 0.0
    n_bad = 0.0
    nll = 0.0
    ga = 0.0
    gb = 0.0
    haa = 0.0
    hab = 0.0
    hbb = 0.0
    taaa = 0.0
    n_zero = 0.0
    for i in range(x.shape[0]):
        f, st = _feature(np.float64(x[i]), feature)
        yi = np.float64(y[i])
        if yi != yi:
            st = max(st, 1)
        elif yi != 0.0 and yi != 1.0:
            st = 2
        if st == 1:
            n_nan += 1.0
            continue
        if st == 2:
            n_bad += 1.0
            continue
        if keep_certain and feature == FEATURE_LOGIT_OF_P:
            v = np.float64(x[i])
            if v == 0.0 or v == 1.0:
                n += 1.0
                if v != yi:
                    n_zero += 1.0
                continue
        t = a * f + b
        q = _sigmoid(t)
        n += 1.0
        nll += _softplus(-t) if yi == 1.0 else _softplus(t)
        r = q - yi
        w = q * (1.0 - q)
        ga += r * f
        gb += r
        wf = w * f
        haa += wf * f
        hab += wf
        hbb += w
        taaa += wf * f * f * (1.0 - 2.0 * q)
    out[N_ROWS] += n
    out[N_NAN] += n_nan
    out[N_BAD] += n_bad
    out[NLL] += nll
    out[G_A] += ga
    out[G_B] += gb
    out[H_AA] += haa
    out[H_AB] += hab
    out[H_BB] += hbb
    out[T_AAA] += taaa
    out[N_ZERO_TRUE] += n_zero


@njit(nogil=True, error_model="numpy", cache=True)
def sums_multiclass(x, y, logits, s, out):
    """Add the NLL sums of q = softmax(s z) over the rows of (x, y) to ``out``
    (the derivatives in s go to G_A, H_AA, T_AAA)."""
    K = x.shape[1]
    z = np.empty(K, np.float64)
    e = np.empty(K, np.float64)
    n = 0.0
    n_nan = 0.0
    n_bad = 0.0
    nll = 0.0
    g = 0.0
    h = 0.0
    t3 = 0.0
    n_zero = 0.0
    for i in range(x.shape[0]):
        yi = np.float64(y[i])
        st = _class_row(x, i, yi, logits, z)
        if st == 1:
            n_nan += 1.0
            continue
        if st == 2:
            n_bad += 1.0
            continue
        lse, mu, v2, v3 = _softmax_moments(z, e, s)
        c = np.int64(yi)
        if not logits and x[i, c] == 0.0:
            n_zero += 1.0
        n += 1.0
        nll += lse - s * z[c]
        g += mu - z[c]
        h += v2
        t3 += v3
    out[N_ROWS] += n
    out[N_NAN] += n_nan
    out[N_BAD] += n_bad
    out[NLL] += nll
    out[G_A] += g
    out[H_AA] += h
    out[T_AAA] += t3
    out[N_ZERO_TRUE] += n_zero


@njit(inline="always", error_model="numpy", cache=True)
def _class_row(x, i, yi, logits, z):
    """Row i of x into z (the logits, or log p with p floored at LOG_FLOOR) and
    the row's status with label yi: 0 valid, 1 NaN (row or label), 2 invalid."""
    K = x.shape[1]
    st = 0
    for k in range(K):
        v = np.float64(x[i, k])
        if v != v:
            st = max(st, 1)
        elif logits:
            if np.isinf(v):
                st = 2
            z[k] = v
        elif v < 0.0 or v > 1.0:
            st = 2
        else:
            z[k] = np.log(max(v, LOG_FLOOR))
    if yi != yi:
        st = max(st, 1)
    elif yi < 0.0 or yi >= K or yi != np.floor(yi):
        st = 2
    return st


@njit(inline="always", error_model="numpy", cache=True)
def _softmax_moments(z, e, s):
    """(logsumexp(s z), E_q[z], Var_q[z], E_q[(z - E_q z)**3]) of q = softmax(s z);
    e is scratch (exp(s z - max))."""
    K = z.shape[0]
    m = s * z[0]
    for k in range(1, K):
        m = max(m, s * z[k])
    tot = 0.0
    for k in range(K):
        e[k] = np.exp(s * z[k] - m)
        tot += e[k]
    lse = m + np.log(tot)
    inv = 1.0 / tot
    mu = 0.0
    for k in range(K):
        mu += e[k] * z[k]
    mu *= inv
    v2 = 0.0
    v3 = 0.0
    for k in range(K):
        d = z[k] - mu
        dd = e[k] * d * d
        v2 += dd
        v3 += dd * d
    return lse, mu, v2 * inv, v3 * inv


@njit(nogil=True, error_model="numpy", cache=True)
def value_sums(x, y, edges, counts, positives, sum_x, bad):
    """Per bin of [0, 1] cut by the uniform ``edges`` (``binning.kernel_edges``:
    k / n_bins rounded to the probabilities' dtype; left-closed, the last
    closed, a value on an edge goes up, as the report's binning): rows,
    positives and the sum of the value. ``bad[0]``: NaN rows, ``bad[1]``:
    invalid rows (value outside [0, 1], label not 0/1)."""
    n_bins = edges.shape[0] - 1
    nb = np.float64(n_bins)
    top = n_bins - 1
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        yi = np.float64(y[i])
        if v != v or yi != yi:
            bad[0] += 1
            continue
        if v < 0.0 or v > 1.0 or (yi != 0.0 and yi != 1.0):
            bad[1] += 1
            continue
        j = min(np.int64(v * nb), top)
        # v * n_bins may round across an edge: compare with the edges themselves
        if j < top and v >= edges[j + 1]:
            j += 1
        elif j > 0 and v < edges[j]:
            j -= 1
        counts[j] += 1
        if yi == 1.0:
            positives[j] += 1
        sum_x[j] += v


@njit(nogil=True, error_model="numpy", cache=True)
def pav(x, y, w, out_y):
    """Pool adjacent violators: the non-decreasing fit of y (weights w > 0) at
    sorted distinct x; returns the number of blocks and writes the fit to out_y."""
    n = y.shape[0]
    val = np.empty(n, np.float64)
    swy = np.empty(n, np.float64)  # blocks keep their sums, their mean is swy / wt
    wt = np.empty(n, np.float64)
    start = np.empty(n, np.int64)
    k = -1
    for i in range(n):
        k += 1
        swy[k] = w[i] * y[i]
        wt[k] = w[i]
        val[k] = y[i]
        start[k] = i
        while k > 0 and val[k - 1] >= val[k]:
            swy[k - 1] += swy[k]
            wt[k - 1] += wt[k]
            val[k - 1] = swy[k - 1] / wt[k - 1]
            k -= 1
    for b in range(k + 1):
        stop = start[b + 1] if b < k else n
        for i in range(start[b], stop):
            out_y[i] = val[b]
    return k + 1


# fine bins of a binary feature f, per label and sign: |f| < 2**-20, then 64
# bins per power of two up to 2**12 (relative width 1/64 at most), then
# |f| >= 2**12; each keeps rows and the sum of f (a point mass at their mean)
_E_MIN = -19
_E_MAX = 12
_PER_OCTAVE = 64
N_FEATURE_BINS = 2 + (_E_MAX - _E_MIN + 1) * _PER_OCTAVE


@njit(inline="always", cache=True)
def _feature_bin(f):
    a = abs(f)
    if a < 2.0 ** (_E_MIN - 1):
        j = 0
    elif a >= 2.0 ** _E_MAX:
        j = N_FEATURE_BINS - 1
    else:
        m, e = math.frexp(a)  # a = m 2**e, m in [0.5, 1)
        k = min(np.int64((m - 0.5) * (2 * _PER_OCTAVE)), _PER_OCTAVE - 1)
        j = 1 + (e - _E_MIN) * _PER_OCTAVE + k
    return j


@njit(nogil=True, error_model="numpy", cache=True)
def feature_histogram(x, y, feature, keep_certain, counts, sum_f):
    """Rows and sum of the feature f per (label, sign, bin); ``counts`` and
    ``sum_f`` have shape (2, 2, N_FEATURE_BINS). Invalid and NaN rows are skipped
    (``sums_binary`` counts them), and with ``keep_certain`` rows of p = 0 or 1."""
    for i in range(x.shape[0]):
        f, st = _feature(np.float64(x[i]), feature)
        yi = np.float64(y[i])
        if st != 0 or (yi != 0.0 and yi != 1.0):
            continue
        if keep_certain and feature == FEATURE_LOGIT_OF_P and (x[i] == 0.0 or x[i] == 1.0):
            continue
        c = np.int64(yi)
        sg = 1 if f < 0.0 else 0
        j = _feature_bin(f)
        counts[c, sg, j] += 1.0
        sum_f[c, sg, j] += f

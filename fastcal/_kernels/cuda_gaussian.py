"""GPU NEES accumulation for ``GaussianAccumulator``: per-group count and NEES sum.

Rows are error vectors (n, d) with covariances (n, d, d); row r belongs to
group r mod G (the accumulator's bins, the trailing ``shape`` axes). Each
row's NEES is the CPU's ``nees_one``: finite check, symmetry check, Cholesky,
one forward substitution, in thread-local arrays of compile-time size d (one
kernel per d, ``kernel(d)``).

Threads form a grid of S slices x G groups: thread (s, g) adds runs
s, s + S, ... of group g into its own cell of the partial arrays, so there are
no atomics and every cell has one writer; the host adds the S slices. S is an
argument (the partial arrays' first axis): threads t >= S * G of the last
block return at once.

Per cell: rows with a valid NEES (count, sum), rows holding NaN or inf
(count), and for each status (NaN, asymmetric, not positive definite) the
count and first flat row index.
"""

import math

import numpy as np

from ._cuda import F64, cuda

STATUS_NAN = 1
STATUS_ASYMMETRIC = 2
STATUS_NOT_PD = 3
N_STATUS = 3

_cache = {}


def kernel(d):
    k = _cache.get(d)
    if k is None:
        k = _make(d)
        _cache[d] = k
    return k


def _make(d):
    @cuda.jit
    def fill(errors, covs, n_groups, n_slices, sym_rtol, part_n, part_s, part_bad, part_k):
        t = cuda.grid(1)
        G = n_groups
        if t >= n_slices * G:
            return
        s = t // G
        g = t - s * G
        L = cuda.local.array((d, d), F64)
        yv = cuda.local.array(d, F64)
        runs = errors.shape[0] // G
        cnt = np.int64(0)
        acc = 0.0
        bad = np.int64(0)
        for k in range(N_STATUS):
            part_k[s, g, k] = 0
            part_k[s, g, N_STATUS + k] = -1
        for r in range(s, runs, n_slices):
            i = r * G + g
            status = 0
            for a in range(d):
                if not (abs(np.float64(errors[i, a])) < math.inf):
                    status = STATUS_NAN
                for c in range(d):
                    if not (abs(np.float64(covs[i, a, c])) < math.inf):
                        status = STATUS_NAN
            if status == 0:
                for a in range(d):
                    for c in range(a):
                        scale = math.sqrt(abs(np.float64(covs[i, a, a]) * np.float64(covs[i, c, c])))
                        if abs(np.float64(covs[i, a, c]) - np.float64(covs[i, c, a])) > sym_rtol * scale:
                            status = STATUS_ASYMMETRIC
            if status == 0:
                # Cholesky of the lower triangle (_kernels.gaussian.cholesky_lower)
                for j in range(d):
                    sj = np.float64(covs[i, j, j])
                    for k in range(j):
                        sj -= L[j, k] * L[j, k]
                    if not sj > 0.0:
                        status = STATUS_NOT_PD
                        break
                    ljj = math.sqrt(sj)
                    L[j, j] = ljj
                    for a in range(j + 1, d):
                        sa = np.float64(covs[i, a, j])
                        for k in range(j):
                            sa -= L[a, k] * L[j, k]
                        L[a, j] = sa / ljj
            if status == 0:
                nees = 0.0
                for a in range(d):
                    sa = np.float64(errors[i, a])
                    for k in range(a):
                        sa -= L[a, k] * yv[k]
                    ya = sa / L[a, a]
                    yv[a] = ya
                    nees += ya * ya
                cnt += 1
                acc += nees
            else:
                if status == STATUS_NAN:
                    bad += 1
                part_k[s, g, status - 1] += 1
                if part_k[s, g, N_STATUS + status - 1] < 0:
                    part_k[s, g, N_STATUS + status - 1] = i
        part_n[s, g] = cnt
        part_s[s, g] = acc
        part_bad[s, g] = bad

    return fill

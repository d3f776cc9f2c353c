"""ECE-sweep (Roelofs, Cain, Shlens and Mozer, 2022): the ECE at the largest
number of bins for which the per-bin frequencies stay monotone.

The number of bins b runs 1, 2, 3, ...; the sweep stops at the first b whose
non-empty bins' frequencies (fraction of positives, or of correct top-label
predictions) are not non-decreasing in the bin order, and reports b - 1 and
its ECE. Equal-mass bins (the paper's choice) come from the one equal-mass
algorithm (:mod:`fastcal.accumulators.equal_mass`): exact ranks out of core,
one light pass per b over the source's parts after the fill's value buckets.
Equal-width bins are counted over the same parts, one pass per b. Both are
therefore exact on files and Dask, at a cost of about b* + 1 passes.

The sweep stops at n bins (one row each) and at ``MAX_BINS``: data whose
frequencies stay monotone that far (labels separated by p) would otherwise
cost a pass per bin; a report whose ``ece_sweep_bins`` is ``MAX_BINS`` hit
this cap, not a monotonicity failure.
"""

import numpy as np

from fastcal._kernels import binary as kb
from fastcal.accumulators import equal_mass as em
from fastcal.backends.cpu import fill_binary as fill
from fastcal.inputs.binning import kernel_edges

SWEEPS = ("quantile", "uniform")
MAX_BINS = 1024  # the most bins ECE-sweep tries (each costs a pass over the data)


def _monotone(counts):
    full = counts[:, 0] > 0
    freq = counts[full, 1] / counts[full, 0]
    return bool(np.all(np.diff(freq) >= 0.0))


def _width_state(y, x, n_bins, right):
    """(counts, sums) over ``n_bins`` uniform bins, by the binary fill kernel (the
    fill's edges for x's dtype, its closed side), for one part of ranked pairs
    (labels 0/1, values in [0, 1]); NaN (omitted) rows skipped."""
    filled = fill(y, x, kernel_edges(n_bins, x.dtype.str), True, right, True, 0.0, False, 1)
    return filled["counts"][:n_bins], filled["sums"][:n_bins]


def _add(acc, r):
    return r if acc is None else (acc[0] + r[0], acc[1] + r[1])


def ece_sweep(fine_counts, fine_p, parts, omit, *, strategy="quantile", right=False):
    """(ece, bins, passes) of ECE-sweep over ``parts`` (ranked pairs of
    :func:`~fastcal.accumulators.equal_mass.ranking_pair`); ``fine_counts`` /
    ``fine_p``: the fill's value buckets (equal-mass bins need them)."""
    n = int(fine_counts[:-1, 0].sum()) if strategy == "quantile" else None
    best = None
    passes = 0
    b = 1
    while b <= MAX_BINS:
        if strategy == "quantile":
            if b > n:
                break
            counts, sums, k = em.groups_from_buckets(fine_counts, fine_p, b, parts, omit)
        else:
            counts, sums = parts.map(_width_state, (b, right), combine=_add)
            k = 1
            n = int(counts[:, 0].sum())
            if b > n:
                break
        passes += k
        if not _monotone(counts):
            break
        best = (float(kb.binned_scalars(counts, sums, b, 1)[0]), b)
        b += 1
    return best[0], best[1], passes

"""TACE, the thresholded adaptive calibration error of Nixon et al. (2019,
"Measuring Calibration in Deep Learning", section 4), for K classes.

For each class k the probabilities p_k above a threshold (1e-3 by default)
are split into R equal-mass ranges by the one equal-mass algorithm
(:mod:`fastcal.accumulators.equal_mass`, exact ranks out of core), and

    TACE = 1 / (K R) sum_k sum_r |freq(r, k) - conf(r, k)|,

freq the fraction of the range's rows with label k and conf its mean p_k;
a range without rows (a class with fewer than R probabilities above the
threshold) adds 0, as in the paper's sum. With no probability above the
threshold in any class the sum has no terms: TACE is undefined, NaN (the
report says why), not 0. Each class costs its own passes
(a value histogram, then the equal-mass resolution and fill), about 2-3 K
passes in all; for arrays in memory the histogram is counted in the pass that
makes the class's column (``backends.cpu.ranked_histogram``), one pass less a
class.
"""

import numpy as np

from fastcal.accumulators import equal_mass as em
from fastcal.inputs.validation import show


def check_threshold(threshold):
    ok = isinstance(threshold, (int, float, np.integer, np.floating)) and not isinstance(
        threshold, bool) and 0.0 <= float(threshold) < 1.0
    if not ok:
        msg = f"tace_threshold must be a number in [0, 1); got {show(threshold)}"
        raise ValueError(msg)
    return float(threshold)


def tace(parts_of, n_classes, n_ranges, threshold):
    """(tace, passes); ``parts_of(k)``: the parts of class k's pairs
    (:func:`~fastcal.accumulators.equal_mass.ranking_pair` with ``column=k``).
    NaN when no probability is above the threshold."""
    total = 0.0
    passes = 0
    ranked = 0
    for k in range(n_classes):
        parts = parts_of(k)
        hist = em.value_histogram(parts, True, em.n_buckets_for(n_ranges))
        passes += 1
        if hist.sum() == 0:
            continue
        ranked += 1
        counts, sums, _, _, _, extra = em.groups(parts, n_ranges, omit=True, eps=None,
                                                 with_logs=False, hist=hist)
        passes += extra
        full = counts[:, 0] > 0
        c = counts[full, 0].astype(np.float64)
        total += float(np.sum(np.abs(counts[full, 1] / c - sums[full, 0] / c)))
    if not ranked:
        return float("nan"), passes
    return total / (n_classes * n_ranges), passes

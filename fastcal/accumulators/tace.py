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
report says why), not 0. Each class's ranges are read off its value bucket
statistics, as ACE's are (``equal_mass.light_groups``: one pass for the
statistics, one that gathers the rows of the buckets holding a range boundary),
with the exact passes of ``equal_mass.groups`` when those buckets hold too many
rows: 2 passes a class. For arrays in memory the statistics are added in the
pass that makes the class's column (``backends.cpu.ranked_buckets``).
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
        fine_counts, fine_p = em.bucket_stats(parts, em.fine_buckets_for(n_ranges), True)
        passes += 1
        if fine_counts[:-1, 0].sum() == 0:
            continue
        ranked += 1
        counts, sums, extra = em.groups_from_buckets(fine_counts, fine_p, n_ranges, parts, True)
        passes += extra
        full = counts[:, 0] > 0
        c = counts[full, 0].astype(np.float64)
        total += float(np.sum(np.abs(counts[full, 1] / c - sums[full, 0] / c)))
    if not ranked:
        return float("nan"), passes
    return total / (n_classes * n_ranges), passes

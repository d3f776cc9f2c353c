"""Fill cost of issue 27's measures: the default report, and each optional measure.

Prints, in seconds (medians of 5 once compiled): the single-pass fill (``ace=False``), which
now also sums p**2 and p*y for the Brier decomposition (run it with PYTHONPATH pointing at
a checkout without them for the before figure), then each ``metrics=`` measure as the time
it adds to that fill and the ratio::

    python benchmarks/measures_cost.py [n_rows]

float64 p and uint8 y (binary, n_rows), and a 4-class float64 report of n_rows // 10 rows.
"""

import sys

from kernel_speed import _median  # benchmarks/ is on the path of a script run from it
import numpy as np

import fastcal


def main():
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 2_000_000
    y, p = fastcal.simulate(n, sigma=0.5, seed=0)
    y = y.astype(np.uint8)
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(4), n // 10)
    yk = (rng.random(n // 10)[:, None] > P.cumsum(axis=1)).sum(axis=1).astype(np.uint8)
    print(f"fastcal {fastcal.__file__}, n = {n:,} binary rows, {n // 10:,} 4-class rows")
    rows = []
    base = _median(lambda: fastcal.calibration_report(y, p, ace=False))
    kbase = _median(lambda: fastcal.calibration_report(yk, P, ace=False))
    rows.append(("binary fill (ace=False)", base, None))
    rows.append(("4-class fill (ace=False)", kbase, None))
    if hasattr(fastcal.calibration_report(y[:10], p[:10], ace=False), "ece_l2"):
        for label, yy, pp, b, kw in (
                ("binary ece_sweep (equal-mass)", y, p, base, dict(metrics=("ece_sweep",))),
                ("binary ece_sweep (equal-width)", y, p, base,
                 dict(metrics=("ece_sweep",), sweep="uniform")),
                ("4-class ece_sweep", yk, P, kbase, dict(metrics=("ece_sweep",))),
                ("4-class tace", yk, P, kbase, dict(metrics=("tace",)))):
            t = _median(lambda: fastcal.calibration_report(yy, pp, ace=False, **kw), reps=3)
            rows.append((label, t - b, (t - b) / b))
    for label, t, ratio in rows:
        extra = "" if ratio is None else f"  (+{100 * ratio:.0f}% of the fill)"
        print(f"{label:34s} {t:8.4f} s{extra}")


if __name__ == "__main__":
    main()

"""ECCE: fastcal against MCGrad's ``ecce`` / ``ecce_sigma`` / ``ecce_pvalue``, in one run.

For each size N (default 1e6) and each kind of data (spread: p uniform on
[0.02, 0.98]; crowded: p in [0.01, 0.03], about 90 rows a value bucket at 1e6,
so the second pass gathers more rows), unweighted and weighted, prints
``RESULT`` lines: MCGrad's three calls (each sorts the rows; ``ecce_sigma``
and ``ecce_pvalue`` compute ECCE again, as a user calling the three would),
MCGrad's ``ecce`` alone, and ``fastcal.ecce`` (the three numbers from one
fill and its second pass), best of 3 after a warm-up, and the ratios. Every
fastcal result is checked against MCGrad's to 1e-12 first.

    python benchmarks/ecce.py                 # 1e6 rows
    python benchmarks/ecce.py --rows 1e6,1e7
"""

import argparse
import time

import numpy as np

import fastcal


def best_of(fn, repeat=3):
    """(fastest wall time of ``repeat`` calls, last result); one warm-up call first."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def data(n, kind, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = (0.02, 0.98) if kind == "spread" else (0.01, 0.03)
    p = rng.uniform(lo, hi, n)
    y = (rng.uniform(size=n) < np.clip(p + 0.01 * np.sin(40 * p), 0, 1)).astype(np.float64)
    return y, p, rng.gamma(0.5, 2.0, n)


def run(n, kind, weighted):
    from mcgrad import metrics

    y, p, w = data(n, kind)
    w = w if weighted else None
    t_mc3, ref = best_of(lambda: (metrics.ecce(y, p, w), metrics.ecce_sigma(y, p, w),
                                  metrics.ecce_pvalue(y, p, w)))
    t_mc1, _ = best_of(lambda: metrics.ecce(y, p, w))
    t_fc, got = best_of(lambda: fastcal.ecce(y, p, sample_weight=w))
    np.testing.assert_allclose(got[:2], ref[:2], rtol=1e-12)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-12, atol=1e-15)
    what = f"n={n:.0e} {kind} {'weighted' if weighted else 'unweighted'}"
    print(f"RESULT {what}: MCGrad ecce+sigma+pvalue {t_mc3:.3f} s, MCGrad ecce {t_mc1:.3f} s, "
          f"fastcal.ecce {t_fc:.4f} s: {t_mc3 / t_fc:.0f}x the three, {t_mc1 / t_fc:.0f}x "
          f"ecce alone (ecce = {got.ecce:.6f}, {got.ecce_sigma:.2f} sigma)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e6", help="comma-separated sizes (default 1e6)")
    args = ap.parse_args(argv)
    for n in (int(float(s)) for s in args.rows.split(",")):
        for kind in ("spread", "crowded"):
            for weighted in (False, True):
                run(n, kind, weighted)


if __name__ == "__main__":
    main()

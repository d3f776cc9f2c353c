"""Smooth ECE: the cost of its grid in the fill, and fastcal against relplot.

Three measurements, printed as ``RESULT`` lines:

1. the in-memory fill of N binary rows (default 1e7) with and without the
   smooth ECE grid (``smooth=True``), and of (N / 10, 10) class rows;
2. smooth ECE of a Parquet file of FILE_ROWS rows (the paper's simulation,
   float32 p, cached under the temp directory) by ``score_file(smooth=True)``;
3. relplot 1.0.3 ``smECE`` on in-memory arrays of each RELPLOT_ROWS size, its
   time per 1e6 rows, and fastcal's smooth ECE of the same arrays (the
   bandwidths must agree within relplot's search resolution, 2/1024).

Small run (a minute on 2 cores)::

    python benchmarks/smooth_ece.py

The issue's run (1e8 rows from Parquet; relplot on the largest size that
runs in about a minute)::

    python benchmarks/smooth_ece.py --rows 1e7 --file-rows 1e8 --relplot-rows 1e6,4e6
"""

import argparse
import os
import tempfile
import time
import warnings

import numpy as np

import fastcal
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.files import score_file
from fastcal.writers import simulate_file

CACHE = os.path.join(tempfile.gettempdir(), "fastcal-bench")


def best_of(fn, repeat=3):
    """(fastest wall time of ``repeat`` calls, last result); one warm-up call first."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def fill_cost(n):
    y, p = fastcal.simulate(n, sigma=0.5, seed=0)
    for smooth in (False, True):
        t, _ = best_of(lambda: CalibrationAccumulator(smooth=smooth).update(y, p))
        print(f"RESULT fill binary n={n:.0e} smooth={smooth}: {t:.3f} s ({n / t / 1e6:.0f} M rows/s)")
    rng = np.random.default_rng(0)
    m = n // 10
    z = rng.normal(size=(m, 10))
    labels = rng.integers(0, 10, m)
    for smooth in (False, True):
        t, _ = best_of(lambda: CalibrationAccumulator(smooth=smooth, logits=True,
                                                      classwise=False).update(labels, z))
        print(f"RESULT fill K=10 logits n={m:.0e} smooth={smooth}: {t:.3f} s "
              f"({m / t / 1e6:.1f} M rows/s)")


def from_file(n):
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, f"sim_n{n}_s0.5_seed0_f32.parquet")
    if not os.path.exists(path):
        simulate_file(path, n=n, sigma=0.5, seed=0, format="parquet", dtype="float32",
                      progress=False)
    for smooth in (False, True):
        t, rep = best_of(lambda: score_file(path, smooth=smooth, progress=False), 1)
        extra = f", smECE = {rep.smece:.6f} at sigma = {rep.smece_sigma:.6f}" if smooth else ""
        print(f"RESULT score_file parquet n={n:.0e} smooth={smooth}: {t:.2f} s "
              f"({n / t / 1e6:.0f} M rows/s){extra}")


def against_relplot(sizes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import relplot
    for n in sizes:
        y, p = fastcal.simulate(n, sigma=0.5, seed=1)
        yf = y.astype(np.float64)
        t0 = time.perf_counter()
        theirs, width = relplot.smECE(p, yf, return_width=True)
        t_rel = time.perf_counter() - t0
        t_ours, (ours, sigma) = best_of(lambda: fastcal.smece(y, p, return_sigma=True), 1)
        ok = abs(sigma - width) <= 2 / 1024
        print(f"RESULT relplot smECE n={n:.0e}: {t_rel:.2f} s ({t_rel / n * 1e6:.2f} s per 1e6 "
              f"rows), {theirs:.6f} at sigma {width:.6f}; fastcal.smece {t_ours:.3f} s "
              f"({t_rel / t_ours:.0f}x), {ours:.6f} at sigma {sigma:.6f}; bandwidths within "
              f"2/1024: {ok}")
        if not ok:
            msg = f"bandwidths differ by more than 2/1024 at n={n}: {sigma} and {width}"
            raise AssertionError(msg)


def _grid(y, x, g):
    """Grid sums of g + 1 points (relplot's smooth_round_to_grid), by numpy."""
    u = x * g
    j = np.minimum(u.astype(np.int64), g - 1)
    w = u - j
    mass = np.bincount(j, 1.0 - w, g + 1) + np.bincount(j + 1, w, g + 1)
    resid = np.bincount(j, (1.0 - w) * (x - y), g + 1) + np.bincount(j + 1, w * (x - y), g + 1)
    return mass, resid


def _exact(y, x, sigma, points=100_001):
    """smECE_sigma by the reflected kernel summed row by row (no interpolation)."""
    t = np.linspace(0.0, 1.0, points)
    r = np.zeros(points)
    d = np.zeros(points)
    for xi, ri in zip(x, x - y):
        k = sum(np.exp(-0.5 * ((t - s * xi - 2.0 * m) / sigma) ** 2)
                for m in (-1, 0, 1) for s in (1.0, -1.0))
        r += ri * k
        d += k
    w = np.full(points, 1.0)
    w[[0, -1]] = 0.5
    return float((np.abs(r) * w).sum() / (d * w).sum())


def grid_error(n=150):
    """Relative error of grids of several sizes and of relplot against the exact sum,
    on the data of tests/reports/test_smooth_ece.py (its residual changes sign)."""
    from fastcal.reports.smooth import SmoothGrid

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import relplot
    rng = np.random.default_rng(6)
    p = rng.beta(2.0, 3.0, n)
    q = np.clip(0.5 + 1.6 * (p - 0.5) + 0.1 * np.sin(9.0 * p), 0.0, 1.0)
    y = (rng.random(n) < q).astype(np.float64)
    for sigma in (0.005, 0.01, 0.02, 0.05, 0.1, 0.2):
        exact = _exact(y, p, sigma)
        cells = [f"{g + 1} points {SmoothGrid(*_grid(y, p, g)).smece(sigma) / exact - 1:+.1e}"
                 for g in (2048, 4096, 8192)]
        rel = relplot.smECE_sigma(p, y, sigma) / exact - 1
        print(f"RESULT grid error sigma={sigma}: " + ", ".join(cells) + f", relplot {rel:+.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7, help="rows of the fill timing (1e7)")
    ap.add_argument("--file-rows", type=float, default=1e6, help="rows of the Parquet file (1e6)")
    ap.add_argument("--relplot-rows", default="1e5,1e6",
                    help="comma-separated in-memory sizes for relplot (1e5,1e6)")
    ap.add_argument("--grid-error", action="store_true",
                    help="only the discretisation error of the grid against the exact kernel sum")
    args = ap.parse_args()
    if args.grid_error:
        grid_error()
        return
    print(f"numba threads: {fastcal.CalibrationAccumulator().threads or 'default'}, "
          f"cpus: {os.cpu_count()}")
    fastcal.smece(*fastcal.simulate(1_000, seed=0))  # compiled, scipy.optimize imported
    fill_cost(int(args.rows))
    from_file(int(args.file_rows))
    against_relplot([int(float(s)) for s in args.relplot_rows.split(",")])


if __name__ == "__main__":
    main()

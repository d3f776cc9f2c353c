"""Coverage of fastcal's 95% intervals against exact population values.

For each setting, many independent samples of N rows are drawn from the
paper's recipe (eq. 16-19: true log-odds u = 0.5 U(-10, 10), y ~
Bernoulli(sigmoid(u)), reported log-odds u + e + shift with e ~ N(0,
sigma^2)); each is scored with ``CalibrationAccumulator(n_boot=B)`` and
``report(ci=0.95)``, and we count how often each interval holds the
population value of its metric over the same 10 uniform bins.

The population values are exact integrals, not a big sample: with L the
reported log-odds, every figure is an integral over (u, L) of a smooth
function, taken bin by bin (L in [logit(a), logit(b)]) with Gauss-Legendre
quadrature; for sigma = 0, L = u + shift and the integral is over u alone.
ECE, ESCE and MCE are then functions of the per-bin masses, mean p and mean
y; ECD, Brier and NLL are expectations of their per-row terms.

The Monte Carlo error of a coverage c over S samples is sqrt(c (1 - c) / S)
(about 0.3 points at S = 5,000 and c = 0.95).

Usage: python examples/coverage_table.py OUT_DIR [--small] [--seeds S] [--n N]
Writes OUT_DIR/coverage.md and coverage.json.
"""

import argparse
import functools
import json
import os
import sys
import time

import numpy as np
from scipy.special import expit

from fastcal import CalibrationAccumulator

METRICS = ("ece", "esce", "mce", "ecd", "brier", "nll")
SETTINGS = (  # (label, sigma, shift)
    ("shift +1 (every bin over-predicts)", 0.0, 1.0),
    ("sigma = 0.5 (close to calibrated)", 0.5, 0.0),
    ("sigma = 0 (calibrated)", 0.0, 0.0),
)
U_LO, U_HI = -5.0, 5.0


@functools.lru_cache(maxsize=4)
def _nodes(k):
    return np.polynomial.legendre.leggauss(k)


def _gl(a, b, k):
    x, w = _nodes(k)
    return 0.5 * (b - a) * x + 0.5 * (b + a), 0.5 * (b - a) * w


def population(sigma, shift, n_bins=10, k=400):
    """Exact per-bin masses, mean p, mean y and the metrics' population values."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    with np.errstate(divide="ignore"):
        cuts = np.log(edges) - np.log1p(-edges)  # -inf .. +inf in log-odds
    mass = np.zeros(n_bins)
    sp = np.zeros(n_bins)
    sy = np.zeros(n_bins)
    ecd = brier = nll = 0.0
    lo_l = U_LO + shift - (12.0 * sigma if sigma else 0.0)
    hi_l = U_HI + shift + (12.0 * sigma if sigma else 0.0)
    for b in range(n_bins):
        a_, b_ = max(cuts[b], lo_l), min(cuts[b + 1], hi_l)
        if sigma == 0.0:
            a_, b_ = max(a_ - shift, U_LO), min(b_ - shift, U_HI)
            if a_ >= b_:
                continue
            u, w = _gl(a_, b_, k)
            w = w / (U_HI - U_LO)
            L = u + shift
        else:
            if a_ >= b_:
                continue
            u1, wu = _gl(U_LO, U_HI, k)
            l1, wl = _gl(a_, b_, k)
            u, L = np.meshgrid(u1, l1, indexing="ij")
            dens = np.exp(-0.5 * ((L - u - shift) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
            w = (wu[:, None] * wl[None, :]) * dens / (U_HI - U_LO)
        p, q = expit(L), expit(u)
        mass[b] = np.sum(w)
        sp[b] = np.sum(w * p)
        sy[b] = np.sum(w * q)
        ecd += np.sum(w * (p - q) * L)
        brier += np.sum(w * (p * p - 2 * p * q + q))
        nll += np.sum(w * (q * np.logaddexp(0, -L) + (1 - q) * np.logaddexp(0, L)))
    total = mass.sum()
    diff = sy - sp
    full = mass > 1e-15
    return {
        "mass_total": float(total),
        "ece": float(np.sum(np.abs(diff))),
        "esce": float(np.sum(diff)),
        "mce": float(np.max(np.abs(diff[full] / mass[full]))),
        "ecd": float(ecd), "brier": float(brier), "nll": float(nll),
    }


def sample(seed, n, sigma, shift):
    rng = np.random.default_rng([seed, 20261123])
    u = rng.uniform(U_LO, U_HI, n)
    y = (rng.random(n) < expit(u)).astype(np.uint8)
    e = sigma * rng.standard_normal(n) if sigma else 0.0
    return y, expit(u + e + shift)


def coverage(truth, n, sigma, shift, seeds, n_boot):
    hit = dict.fromkeys(METRICS, 0)
    width = dict.fromkeys(METRICS, 0.0)
    for s in range(seeds):
        y, p = sample(s, n, sigma, shift)
        rep = CalibrationAccumulator(n_boot=n_boot, seed=s, threads=1).update(y, p).report(ci=0.95)
        for m in METRICS:
            lo, hi = rep.intervals[m]
            hit[m] += bool(lo <= truth[m] <= hi)
            width[m] += hi - lo
    out = {}
    for m in METRICS:
        c = hit[m] / seeds
        out[m] = {"coverage": c, "mc_error": float(np.sqrt(c * (1 - c) / seeds)),
                  "mean_width": width[m] / seeds}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output directory")
    ap.add_argument("--small", action="store_true", help="40 seeds (a smoke test)")
    ap.add_argument("--seeds", type=int, default=5_000)
    ap.add_argument("--n", type=int, default=1_000, help="rows per sample")
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args(argv)
    seeds = 40 if args.small else args.seeds
    os.makedirs(args.out, exist_ok=True)
    rows = []
    t0 = time.perf_counter()
    for label, sigma, shift in SETTINGS:
        truth = population(sigma, shift)
        assert abs(truth["mass_total"] - 1.0) < 1e-9, truth["mass_total"]
        cov = coverage(truth, args.n, sigma, shift, seeds, args.n_boot)
        rows.append({"setting": label, "sigma": sigma, "shift": shift, "n": args.n,
                     "seeds": seeds, "n_boot": args.n_boot, "truth": truth, "coverage": cov})
    elapsed = time.perf_counter() - t0
    head = ("| setting | N | seeds | " + " | ".join(m.upper() if m != "brier" else "Brier"
                                                   for m in METRICS) + " |")
    lines = [head, "|" + "---|" * (3 + len(METRICS))]
    for r in rows:
        cells = [f"{100 * r['coverage'][m]['coverage']:.1f} +- "
                 f"{100 * r['coverage'][m]['mc_error']:.1f}" for m in METRICS]
        lines.append(f"| {r['setting']} | {r['n']:,} | {r['seeds']:,} | " + " | ".join(cells)
                     + " |")
    text = ("Coverage (%) of 95% intervals, +- one Monte Carlo standard error; seeds 0.."
            f"{seeds - 1}, B = {args.n_boot} bootstrap replicates, 10 uniform bins; "
            f"{elapsed:.0f} s.\n\n" + "\n".join(lines) + "\n")
    with open(os.path.join(args.out, "coverage.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(args.out, "coverage.json"), "w") as fh:
        json.dump({"rows": rows, "seconds": elapsed}, fh, indent=1)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()

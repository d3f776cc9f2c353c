"""Reproduce Table I of the paper (Sumler et al., section V-A) over many seeds, beside the paper's numbers.

The simulation of eq. 16-19 exactly as written: u' ~ Uniform(-10, 10),
u = 0.5 u', label ~ Bernoulli(sigmoid(u)), reported p = sigmoid(u + e) with
e ~ N(0, sigma^2), N = 10,000, for sigma in {0, 0.5, 2}, ten bins [a, b) with
the last [0.9, 1]. For each seed we compute the per-bin ECE, ESCE and ECD and
their weighted sums (the table's last row), and report the mean, standard
deviation and the 2.5-97.5% range over seeds. A paper value outside that
range is marked OUTSIDE: our recipe does not produce it.

The recipe is not tuned. A side check at the end (clearly labelled, not part
of the table) tries one possible reading that would explain the gap.

Usage: python examples/paper_table1.py OUT_DIR [--small] [--seeds N]
Writes OUT_DIR/table1.md, table1.json, reliability_sigma_*.png, figure2.png.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

import fastcal
from fastcal.reports.plot import ecd_single_datum

# Table I of the paper, typed in: per bin (1..10) then the weighted sum, (ECE, ESCE, ECD).
PAPER = {
    0.0: [
        (0.0074, 0.0074, 0.0231), (0.0181, -0.0181, -0.0334), (0.0066, 0.0066, 0.0069),
        (0.0306, 0.0306, 0.0153), (0.0059, -0.0059, 0.0019), (0.0193, -0.0193, 0.0036),
        (0.0011, 0.0011, -0.0057), (0.0015, 0.0015, 0.0012), (0.0131, -0.0131, 0.0242),
        (0.0007, 0.0007, -0.0037), (0.0077, 0.0003, 0.0057),
    ],
    0.5: [
        (0.2194, 0.2194, 2.1406), (0.2214, 0.2214, 0.3860), (0.1432, 0.1432, 0.1582),
        (0.0743, 0.0743, 0.0488), (0.0399, 0.0399, 0.0099), (0.0294, -0.0294, 0.0045),
        (0.0911, -0.0911, 0.0597), (0.1010, -0.1010, 0.1143), (0.1574, -0.1574, 0.2771),
        (0.2171, -0.2171, 2.1415), (0.1702, 0.0035, 1.2901),
    ],
    2.0: [
        (0.4473, 0.4473, 4.995), (0.3115, 0.3115, 0.5701), (0.2158, 0.2158, 0.2529),
        (0.1749, 0.1749, 0.1148), (0.0936, 0.0936, 0.0264), (0.0817, -0.0817, 0.0246),
        (0.0803, -0.0803, 0.0534), (0.2672, -0.2672, 0.3034), (0.3439, -0.3439, 0.6044),
        (0.4287, -0.4287, 4.8069), (0.4042, 0.0064, 4.2405),
    ],
}
METRICS = ("ECE", "ESCE", "ECD")
ROWS = [f"{k}" for k in range(1, 11)] + ["weighted sum"]


def table_for_seed(report):
    """(11, 3) array: per-bin ECE, ESCE, ECD, then the weighted sums."""
    b = report.bins
    per_bin = np.column_stack([b["ece"], b["esce"], b["ecd"]])
    return np.vstack([per_bin, [report.ece, report.esce, report.ecd]])


def run(out_dir, n_seeds, n):
    os.makedirs(out_dir, exist_ok=True)
    results = {}
    lines = [f"# Table I reproduced: N = {n:,}, {n_seeds} seeds per sigma", "",
             "Each cell: paper value | our mean +- sd over seeds [2.5%, 97.5%]. "
             "OUTSIDE: the paper's value is outside our 2.5-97.5% range.", ""]
    total_out = {}
    for sigma, paper in PAPER.items():
        tables = []
        for seed in range(n_seeds):
            y, p = fastcal.simulate(n, sigma=sigma, seed=seed)
            rep = fastcal.calibration_report(y, p, n_bins=10, ace=False)
            tables.append(table_for_seed(rep))
            if seed == 0:
                rep.plot(os.path.join(out_dir, f"reliability_sigma_{sigma:g}.png"),
                         title=f"paper simulation, sigma = {sigma:g}, N = {n:,}, seed 0")
        t = np.array(tables)  # (seeds, 11, 3); empty bins are NaN
        mean = np.nanmean(t, axis=0)
        sd = np.nanstd(t, axis=0, ddof=1)
        lo = np.nanquantile(t, 0.025, axis=0)
        hi = np.nanquantile(t, 0.975, axis=0)
        paper = np.array(paper)
        outside = (paper < lo) | (paper > hi)
        total_out[sigma] = int(outside.sum())
        results[f"{sigma:g}"] = {
            "paper": paper.tolist(), "mean": mean.tolist(), "sd": sd.tolist(),
            "q025": lo.tolist(), "q975": hi.tolist(), "outside": outside.tolist(),
        }
        lines += [f"## sigma = {sigma:g}", "",
                  "| bin | " + " | ".join(f"{m} paper | {m} ours" for m in METRICS) + " |",
                  "|---|" + "---|---|" * 3]
        for i, row in enumerate(ROWS):
            cells = []
            for j in range(3):
                flag = " **OUTSIDE**" if outside[i, j] else ""
                cells.append(f"{paper[i, j]:.4f}{flag} | {mean[i, j]:.4f} +- {sd[i, j]:.4f} "
                             f"[{lo[i, j]:.4f}, {hi[i, j]:.4f}]")
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
        lines += ["", f"{total_out[sigma]} of 33 paper values are outside our 2.5-97.5% range "
                      f"at sigma = {sigma:g}.", ""]
    lines += honest_summary(results)
    lines += side_check(n, min(n_seeds, 20))
    ecd_single_datum(os.path.join(out_dir, "figure2.png"))
    text = "\n".join(lines) + "\n"
    _write(os.path.join(out_dir, "table1.md"), text)
    _write(os.path.join(out_dir, "table1.json"), json.dumps(
        {"n": n, "seeds": n_seeds, "sigmas": results, "outside_counts": total_out}, indent=1))
    return text


def honest_summary(results):
    r0, r5, r2 = results["0"], results["0.5"], results["2"]
    ws = 10  # weighted-sum row
    return [
        "## What reproduces", "",
        f"- sigma = 0: the paper's weighted sums (ECE {r0['paper'][ws][0]:.4f}, ECD "
        f"{r0['paper'][ws][2]:.4f}) are of the size our seeds give (ECE "
        f"{r0['mean'][ws][0]:.4f} +- {r0['sd'][ws][0]:.4f}, ECD {r0['mean'][ws][2]:.4f} +- "
        f"{r0['sd'][ws][2]:.4f}): a single seed's noise. {int(np.sum(r0['outside']))} of the "
        "33 paper values fall outside our 2.5-97.5% range, against about 1.7 expected by chance "
        "alone (5% of 33).",
        f"- sigma = 0.5 and 2: the recipe as written does NOT give the paper's numbers. Our ECE "
        f"is {r5['mean'][ws][0]:.4f} (paper {r5['paper'][ws][0]:.4f}) and "
        f"{r2['mean'][ws][0]:.4f} (paper {r2['paper'][ws][0]:.4f}); our ECD is "
        f"{r5['mean'][ws][2]:.4f} (paper {r5['paper'][ws][2]:.4f}) and {r2['mean'][ws][2]:.4f} "
        f"(paper {r2['paper'][ws][2]:.4f}). The qualitative pattern holds (ESCE near 0 by "
        "symmetry, ECD positive and largest in the outer bins, over-confidence growing with "
        "sigma), but the sizes are far outside any seed's spread.",
        "- A possible explanation (not verified against the authors' code): the paper's bins 1 "
        "and 10 at sigma = 2 have a fraction of positives near 0.5 (ECE 0.447 with mean p below "
        "0.1), i.e. labels nearly independent of p there. Noise of sigma = 0.5 in the log-odds "
        "cannot do that; noise added to the probability itself, then clipped to [0, 1], can. The "
        "side check below tries that reading.", "",
    ]


def side_check(n, n_seeds):
    """Not the paper's written recipe: e ~ N(0, sigma^2) added to the probability, clipped."""
    lines = ["## Side check (NOT the recipe as written, not used above)", "",
             "Reported p = clip(sigmoid(u) + e, 1e-4, 1 - 1e-4) with e ~ N(0, sigma^2); the clip "
             "bounds are Figure 2's range. Weighted sums, mean over "
             f"{n_seeds} seeds:", "",
             "| sigma | ECE | ESCE | ECD | paper ECE | paper ESCE | paper ECD |", "|---|---|---|---|---|---|---|"]
    for sigma in (0.5, 2.0):
        vals = []
        for seed in range(n_seeds):
            rng = np.random.default_rng([seed, 17])
            u = 0.5 * rng.uniform(-10.0, 10.0, n)
            pt = 1.0 / (1.0 + np.exp(-u))
            y = (rng.random(n) < pt).astype(np.uint8)
            p = np.clip(pt + sigma * rng.standard_normal(n), 1e-4, 1 - 1e-4)
            rep = fastcal.calibration_report(y, p, ace=False)
            vals.append((rep.ece, rep.esce, rep.ecd))
        m = np.mean(vals, axis=0)
        pw = PAPER[sigma][10]
        lines.append(f"| {sigma:g} | {m[0]:.4f} | {m[1]:.4f} | {m[2]:.4f} | {pw[0]:.4f} | "
                     f"{pw[1]:.4f} | {pw[2]:.4f} |")
    lines += ["", "This reading lands near the paper's magnitudes; it is a hint, not a "
              "reconstruction.", ""]
    return lines


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--small", action="store_true", help="few seeds, for CI")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per sigma (default 200, 5 with --small)")
    ap.add_argument("--n", type=int, default=10_000, help="samples per seed (paper: 10,000)")
    args = ap.parse_args(argv)
    seeds = args.seeds or (5 if args.small else 200)
    t0 = time.perf_counter()
    text = run(args.out_dir, seeds, args.n)
    print(text)
    print(f"done in {time.perf_counter() - t0:.1f} s; files in {args.out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()

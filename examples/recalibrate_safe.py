"""Find an over-confident model with fastcal, fit a safe temperature out of core, check it held out.

The predictions are the paper's simulation (eq. 16-19, sigma = 0.5: noise on
the log-odds, so over-confident), written to Parquet by ``fastcal simulate``.
The script then does what the README's three commands do:

1. score the file: the ECD test flags over-confidence;
2. fit temperature scaling from the file, in a few passes, with the NLL target
   and with the safe target (the smallest T at which the one-sided ECD test
   no longer flags over-confidence at alpha = 0.05), and score the file again
   through each map (the driver applies it chunk by chunk);
3. evaluate both targets honestly on a sample held in memory: cross-fitted
   (every row recalibrated by a map fitted on the other folds).

Usage: python examples/recalibrate_safe.py OUT_DIR [--small] [--rows N] [--keep]
Writes OUT_DIR/recalibrate.json, recalibrate.md, before_after.png and
temperature.json (the safe map, as ``fastcal recalibrate --out`` writes it).
"""

import argparse
import json
import os
import sys
import time

from fastcal import recalibrate as rc
from fastcal.files import score_file
from fastcal.writers import simulate_file

KEYS = (("ECD", "ecd"), ("ECE", "ece"), ("Brier", "brier"), ("NLL", "nll"),
        ("ECD z", "ecd_z"), ("p(over-confident)", "ecd_p_over"))


def table(columns):
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for name, attr in KEYS:
        lines.append(f"| {name} | " + " | ".join(f"{getattr(r, attr):.4g}"
                                                 for r in columns.values()) + " |")
    lines.append("| verdict | " + " | ".join(r.verdict for r in columns.values()) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output directory")
    ap.add_argument("--small", action="store_true", help="200,000 rows (for the tests)")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the Parquet file")
    args = ap.parse_args(argv)
    n = 200_000 if args.small else args.rows
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "preds.parquet")
    simulate_file(path, n=n, sigma=0.5, seed=1, format="parquet", dtype="float32",
                  progress=False)

    # 1. the model is over-confident
    before = score_file(path, prob="p", label="y", n_bins=15)
    # 2. fit from the file, both targets, and score through each map
    t0 = time.perf_counter()
    nll = rc.fit_file(rc.TemperatureScaling(), path, prob="p", label="y")
    t_nll = time.perf_counter() - t0
    t0 = time.perf_counter()
    safe = rc.fit_file(rc.TemperatureScaling(target="safe"), path, prob="p", label="y")
    t_safe = time.perf_counter() - t0
    after = {name: score_file(path, prob="p", label="y", n_bins=15, transform=m)
             for name, m in (("safe", safe), ("NLL", nll))}
    in_sample = {"before": before, "after (safe T)": after["safe"],
                 "after (NLL T)": after["NLL"]}
    # 3. cross-fitted, on a sample held in memory
    import pyarrow.parquet as pq

    t = pq.read_table(path).slice(0, min(n, 1_000_000))
    y, p = t["y"].to_numpy(), t["p"].to_numpy()
    cross = {target: rc.evaluate(y, p, method="temperature", target=target, cv=5, seed=0)
             for target in ("safe", "nll")}
    cross["safe"].plot(os.path.join(args.out, "before_after.png"),
                       title=f"safe temperature T = {safe.temperature_:.4f}, cross-fitted")

    with open(os.path.join(args.out, "temperature.json"), "w") as fh:
        fh.write(safe.to_json(indent=1) + "\n")
    result = {
        "rows": n, "T_safe": safe.temperature_, "T_nll": nll.temperature_,
        "passes": {"nll": nll.passes_, "safe": safe.passes_},
        "fit_seconds": {"nll": round(t_nll, 3), "safe": round(t_safe, 3)},
        "in_sample": {k: {a: float(getattr(r, a)) for _, a in KEYS} | {"verdict": r.verdict}
                      for k, r in in_sample.items()},
        "cost_of_safe": {"nll": after["safe"].nll - after["NLL"].nll,
                         "ece": after["safe"].ece - after["NLL"].ece},
        "cross_fitted": {k: e.to_dict() for k, e in cross.items()},
    }
    with open(os.path.join(args.out, "recalibrate.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    text = "\n".join([
        f"# Safe temperature scaling of {n:,} simulated predictions (sigma = 0.5)", "",
        f"Fitted from the Parquet file: T_safe = {safe.temperature_:.5f} in {safe.passes_} "
        f"passes ({t_safe:.2f} s), T_nll = {nll.temperature_:.5f} in {nll.passes_} passes "
        f"({t_nll:.2f} s).", "",
        "In-sample (the fitting file):", "", table(in_sample), "",
        f"Cost of being safe: NLL {result['cost_of_safe']['nll']:+.2e}, "
        f"ECE {result['cost_of_safe']['ece']:+.2e}.", "",
        "Cross-fitted (5 folds, safe target):", "", cross["safe"].to_markdown(), "",
        "Cross-fitted (5 folds, NLL target):", "", cross["nll"].to_markdown(), ""])
    with open(os.path.join(args.out, "recalibrate.md"), "w") as fh:
        fh.write(text)
    print(text)
    if not args.keep:
        os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

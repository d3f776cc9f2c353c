"""EKF vs UKF consistency on range-bearing tracking (Sumler et al., section III-A).

Runs both filters on the same seeded Monte Carlo truths and measurements,
scores them with NEES / Gaussian ECD (fastcal.gaussian), prints the table and
writes ``ekf_vs_ukf.png`` and ``ekf_vs_ukf.json`` under the output directory.

    python examples/ekf_vs_ukf.py out/            # default scenario, 100 runs x 50 steps
    python examples/ekf_vs_ukf.py out/ --small    # 10 runs x 10 steps, for CI
"""

import argparse
import json
from pathlib import Path
import sys

from tracking.compare import compare, format_table, plot_report, write_atomically
from tracking.scenario import Scenario


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path, help="directory for ekf_vs_ukf.png and ekf_vs_ukf.json")
    parser.add_argument("--small", action="store_true", help="10 runs x 10 steps (fast, for CI)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    scenario = Scenario(runs=10, steps=10, seed=args.seed) if args.small else Scenario(seed=args.seed)
    args.outdir.mkdir(parents=True, exist_ok=True)
    report = compare(scenario)
    plot_report(report, args.outdir / "ekf_vs_ukf.png")
    write_atomically(args.outdir / "ekf_vs_ukf.json",
                     lambda fh: json.dump(report, fh, indent=1, allow_nan=False), mode="w")
    print(format_table(report))
    print(f"\nwrote {args.outdir / 'ekf_vs_ukf.png'} and {args.outdir / 'ekf_vs_ukf.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

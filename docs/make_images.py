"""Redraw every picture under docs/img/ from the code, as a user would make it.

Usage: python docs/make_images.py [--only NAME ...]

- reliability_cli.png: ``fastcal score --plot`` on the paper's simulation (100,000 rows, sigma 0.5, seed 1)
- recalibrate_before_after.png: ``fastcal recalibrate --target safe --plot`` on the same file
- ekf_vs_ukf.png: ``tracking compare --plot`` (range-bearing, 100 runs x 50 steps, seed 0)
- figure2.png: the ECD of a single datum (the paper's Figure 2), ``fastcal.reports.plot.ecd_single_datum``

The commands run in subprocesses of this Python, exactly as typed in a shell; needs the plot extra.
Not API.
"""

import argparse
from pathlib import Path
import subprocess
import sys
import tempfile

IMG = Path(__file__).resolve().parent / "img"
SIM = ["--n", "100000", "--sigma", "0.5", "--seed", "1"]


def run(*args):
    print("$", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", *args], check=True, stdout=subprocess.DEVNULL)


def reliability_cli(tmp):
    preds = str(tmp / "preds.parquet")
    run("fastcal", "simulate", preds, *SIM)
    run("fastcal", "score", preds, "--prob", "p", "--label", "y", "--plot", str(IMG / "reliability_cli.png"))


def recalibrate_before_after(tmp):
    preds = str(tmp / "preds.parquet")
    if not Path(preds).exists():
        run("fastcal", "simulate", preds, *SIM)
    run("fastcal", "recalibrate", preds, "--prob", "p", "--label", "y", "--target", "safe",
        "--out", str(tmp / "params.json"), "--plot", str(IMG / "recalibrate_before_after.png"))


def ekf_vs_ukf(tmp):
    run("tracking", "compare", "--plot", str(IMG / "ekf_vs_ukf.png"))


def figure2(tmp):
    from fastcal.reports.plot import ecd_single_datum

    print("$ ecd_single_datum(docs/img/figure2.png)", flush=True)
    ecd_single_datum(str(IMG / "figure2.png"))


IMAGES = {"reliability_cli": reliability_cli, "recalibrate_before_after": recalibrate_before_after,
          "ekf_vs_ukf": ekf_vs_ukf, "figure2": figure2}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(IMAGES), help="redraw only these pictures")
    args = parser.parse_args(argv)
    IMG.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or IMAGES:
            IMAGES[name](Path(tmp))
    print(f"wrote {', '.join(args.only or IMAGES)} under {IMG}")


if __name__ == "__main__":
    main()

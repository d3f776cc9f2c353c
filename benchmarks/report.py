"""Run the benchmark suite once and write docs/benchmarks/results.md and scaling.png beside it.

Usage: python benchmarks/report.py [--from-json FILE] [extra pytest args]

Everything in RESULTS.md comes from the one run (or the one JSON file given):
the machine, the versions, N, throughput in M predictions/s per contender,
each peer's ratio to fastcal, the read floor and fastcal's fraction of it,
the scaling tables behind the plot, and the start-up times. Both files are
written to a temporary name first and then renamed, so a failed run leaves
the previous ones in place.
"""

import argparse
from collections import defaultdict
import datetime as dt
import importlib.metadata
import json
import os
from pathlib import Path
import platform
import subprocess
import sys
import tempfile

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PACKAGES = ["fastcal", "numpy", "numba", "llvmlite", "scikit-learn", "torch", "torchmetrics",
            "netcal", "filterpy", "pyarrow", "pytest-benchmark"]
TARGETS = {"numpy vectorised": 30.0, "torchmetrics": 100.0}
FLOOR_TARGET = 0.40
ABSOLUTE_TARGET = 500.0  # M predictions/s for the float32 report (issue 2)


def run_suite(json_path, extra):
    """Run pytest once; returns (exit code, the lines the benchmarks printed as figures).

    Output is not captured by pytest (-s) so that benchmark files which print
    their figures (lines starting with RESULT, or the tracking ratios) can be
    quoted in RESULTS.md; everything is echoed to stderr as it comes.
    """
    cmd = [sys.executable, "-m", "pytest", str(HERE), "-q", "-s", "-p", "no:cacheprovider",
           f"--benchmark-json={json_path}", *extra]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")  # see conftest.py
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    print("running:", " ".join(cmd), file=sys.stderr)
    printed = []
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            sys.stderr.write(line)
            text = line.strip()
            if text.startswith(("RESULT", "EKF: filterpy", "UKF: filterpy")) or (
                    text.startswith(("1e7x10:", "1e5x1000:"))):  # tracking, multi-class
                printed.append(text)
    return proc.returncode, printed


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    try:
        import numba

        layer = numba.threading_layer() if hasattr(numba, "threading_layer") else "?"
    except Exception:  # the layer is only known after a parallel kernel ran
        layer = "n/a"
    return {"cpu": cpu, "cores": os.cpu_count(), "load": load, "layer": layer,
            "python": platform.python_version(), "os": platform.platform()}


def versions():
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def rows_by_group(bench):
    groups = defaultdict(list)
    for b in bench["benchmarks"]:
        info = b.get("extra_info", {})
        t = b["stats"]["min"]
        n = info.get("n", info.get("rows"))
        groups[b.get("group") or "other"].append({
            "name": b["name"], "contender": info.get("contender", b["name"]), "n": n,
            "t": t, "mps": n / t / 1e6 if n else None, "info": info})
    return groups


def fmt_mps(x):
    if x is None:
        return ""
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.3f}"


def fmt_n(n):
    if not n:
        return ""
    exp = len(str(int(n))) - 1
    return f"1e{exp}" if n == 10**exp else f"{n:,}"


def headline_table(rows):
    ref = next((r for r in rows if r["info"].get("reference")), None)
    lines = ["| contender | rows | best time (s) | M predictions/s | fastcal report is ... x faster | note |",
             "|---|---:|---:|---:|---:|---|"]
    for r in sorted(rows, key=lambda r: -(r["mps"] or 0)):
        ratio = ref["mps"] / r["mps"] if ref and r["mps"] else None
        note = []
        info = r["info"]
        if "rel_diff" in info:
            note.append(f"value {info['value']:.6g} vs fastcal {info['fastcal']:.6g} "
                        f"(rel. diff {info['rel_diff']:.1e})")
        if info.get("bins_moved_by_edge_rounding"):
            note.append(f"{info['bins_moved_by_edge_rounding']} rows change bin with float64 edges")
        if "brier_rel_diff" in info:
            note.append(f"Brier/NLL rel. diff {info['brier_rel_diff']:.0e}/{info['nll_rel_diff']:.0e}")
        lines.append(f"| {r['contender']} | {fmt_n(r['n'])} | {r['t']:.4g} | {fmt_mps(r['mps'])} | "
                     f"{'' if ratio is None else f'{ratio:,.1f}'} | {'; '.join(note)} |")
    return lines


def summary(groups):
    """Targets of issues 2 and 7 on the float32 group."""
    rows = groups.get("binary-float32", [])
    by = {r["contender"]: r for r in rows}
    lines = []
    ref = by.get("fastcal report")
    if not ref:
        return ["(the float32 headline group did not run)"]
    lines.append(f"- fastcal full report with its defaults (ACE on), float32 p + uint8 y, 15 bins, "
                 f"N = {fmt_n(ref['n'])}: "
                 f"**{fmt_mps(ref['mps'])} M predictions/s** (target {ABSOLUTE_TARGET:.0f}: "
                 f"{'met' if ref['mps'] >= ABSOLUTE_TARGET else 'not met'}).")
    for name, target in TARGETS.items():
        if name in by:
            ratio = ref["mps"] / by[name]["mps"]
            lines.append(f"- {ratio:,.1f}x {name} (target {target:.0f}x: "
                         f"{'met' if ratio >= target else 'not met'}).")
        else:
            lines.append(f"- {name}: did not run (not installed?).")
    one_pass = by.get("fastcal report, ace=False")
    if one_pass:
        frac = ref["mps"] / one_pass["mps"]
        lines.append(f"- the report with its defaults (ACE on) runs at {frac:.0%} of the ace=False "
                     f"report ({fmt_mps(one_pass['mps'])} M/s) (target 60%: "
                     f"{'met' if frac >= 0.6 else 'not met'}).")
    numpy = by.get("numpy vectorised")
    if numpy:
        ratio = ref["mps"] / numpy["mps"]
        lines.append(f"- the default report is {ratio:,.1f}x the numpy bincount contender ("
                     f"target 15x: {'met' if ratio >= 15 else 'not met'}).")
    floor = by.get("read floor")
    if floor:
        frac = ref["mps"] / floor["mps"]
        lines.append(f"- read floor (parallel pass summing p and y): {fmt_mps(floor['mps'])} M/s; "
                     f"the report runs at **{frac:.0%}** of it (target {FLOOR_TARGET:.0%}: "
                     f"{'met' if frac >= FLOOR_TARGET else 'not met'}).")
    return lines


def scaling(groups):
    lines = []
    n_rows = groups.get("scaling-n", [])
    if n_rows:
        sizes = sorted({r["n"] for r in n_rows})
        names = sorted({r["contender"] for r in n_rows})
        lines += ["### Throughput against N (float32, 15 bins; M predictions/s)", "",
                  "| N | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
        for n in sizes:
            cells = []
            for name in names:
                r = next((r for r in n_rows if r["n"] == n and r["contender"] == name), None)
                cells.append(fmt_mps(r["mps"]) if r else "")
            lines.append(f"| {fmt_n(n)} | " + " | ".join(cells) + " |")
        lines.append("")
    b_rows = groups.get("scaling-bins", [])
    if b_rows:
        lines += ["### Throughput against n_bins (float32, fastcal report; M predictions/s)", "",
                  "| n_bins | rows | M predictions/s |", "|---:|---:|---:|"]
        for r in sorted(b_rows, key=lambda r: r["info"]["n_bins"]):
            lines.append(f"| {r['info']['n_bins']:,} | {fmt_n(r['n'])} | {fmt_mps(r['mps'])} |")
        lines.append("")
    t_rows = groups.get("scaling-threads", [])
    if t_rows:
        lines += ["### Throughput against threads (float32, 15 bins; M predictions/s)", "",
                  "| threads | fastcal report | read floor | fraction of floor |", "|---:|---:|---:|---:|"]
        for t in sorted({r["info"]["threads"] for r in t_rows}):
            rep = next((r for r in t_rows if r["info"]["threads"] == t and not r["info"].get("floor")), None)
            flo = next((r for r in t_rows if r["info"]["threads"] == t and r["info"].get("floor")), None)
            frac = f"{rep['mps'] / flo['mps']:.0%}" if rep and flo else ""
            lines.append(f"| {t} | {fmt_mps(rep['mps']) if rep else ''} | "
                         f"{fmt_mps(flo['mps']) if flo else ''} | {frac} |")
        lines.append("")
    return lines


def startup(groups):
    rows = groups.get("startup", [])
    if not rows:
        return []
    lines = ["## Start-up", "",
             "Fresh processes sharing an empty NUMBA_CACHE_DIR; each imports fastcal, then times "
             "one `calibration_report` on 1e6 float32 rows.", "",
             "| process | import fastcal (s) | first report incl. compile or cache load (s) |",
             "|---|---:|---:|"]
    for r in rows:
        i = r["info"]
        lines.append(f"| {r['contender']} | {i.get('import_s', float('nan')):.2f} | "
                     f"{i.get('first_call_s', float('nan')):.2f} |")
    return lines + [""]


def other_groups(groups, shown):
    lines = []
    for g in sorted(set(groups) - shown):
        lines += [f"### {g}", "", "| benchmark | rows | best time (s) | M rows/s |", "|---|---:|---:|---:|"]
        for r in sorted(groups[g], key=lambda r: r["t"]):
            lines.append(f"| {r['contender']} | {fmt_n(r['n'])} | {r['t']:.4g} | {fmt_mps(r['mps'])} |")
        lines.append("")
    return lines


def plot(groups, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    for name in sorted({r["contender"] for r in groups.get("scaling-n", [])}):
        pts = sorted((r["n"], r["mps"]) for r in groups["scaling-n"] if r["contender"] == name)
        ax.plot(*zip(*pts), marker="o", label=name)
    ax.set(xscale="log", yscale="log", xlabel="N (predictions)", ylabel="M predictions/s",
           title="against N (15 bins)")
    ax.legend(fontsize=8)
    ax = axes[1]
    pts = sorted((r["info"]["n_bins"], r["mps"]) for r in groups.get("scaling-bins", []))
    if pts:
        ax.plot(*zip(*pts), marker="o", label="fastcal report")
    ax.set(xscale="log", xlabel="n_bins", ylabel="M predictions/s", title="against n_bins")
    ax.set_ylim(bottom=0)
    ax = axes[2]
    for floor, label in ((False, "fastcal report"), (True, "read floor")):
        pts = sorted((r["info"]["threads"], r["mps"]) for r in groups.get("scaling-threads", [])
                     if bool(r["info"].get("floor")) == floor)
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set(xlabel="threads", ylabel="M predictions/s", title="against threads", xticks=[1, 2])
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def gpu_section(summary_path):
    """RESULTS.md's GPU section: the summary a GPU run wrote (``gpu_run.sh``'s summary.md,
    kept as benchmarks/gpu_summary.md), or what is missing and how to measure it."""
    lines = ["## GPU", ""]
    if summary_path.exists():
        text = summary_path.read_text().strip()
        return lines + [f"From `bash benchmarks/gpu_run.sh` (its summary.md, kept as "
                        f"`benchmarks/{summary_path.name}`); fastcal and torchmetrics on the same "
                        "GPU and data in the same run.", "", text, ""]
    return lines + [
        "**Not measured yet**: no machine with an NVIDIA GPU was lent to the work that built "
        "the GPU fills, so there are no real-GPU figures here. The kernels are tested in CI under "
        "Numba's CUDA simulator against the CPU kernels and compiled for sm_80/sm_90 (PTX and "
        "`ptxas` registers: docs/contributors/kernel-notes.md).",
        "",
        "To measure: on a machine with an NVIDIA GPU, torch, torchmetrics, numba-cuda and "
        "pytest-benchmark, run `bash benchmarks/gpu_run.sh tests` and "
        "`bash benchmarks/gpu_run.sh bench` (each within 10 minutes), copy its `summary.md` to "
        f"`benchmarks/{summary_path.name}` and run `make bench-report`; this section then shows "
        "it. Targets (H100): binary full report on 1e9 float32 predictions at least "
        "100 G predictions/s and 90x torchmetrics `binary_calibration_error`; K = 10 on 1e8 "
        "rows at least 20x torchmetrics `multiclass_calibration_error`; `score_file --device "
        "cuda` limited by reading.",
        "",
    ]


def write_results(bench, mach, path):
    groups = rows_by_group(bench)
    ver = versions()
    from conftest import N_BINS, SIGMA  # noqa: E402  (benchmarks/ is on sys.path)

    when = bench.get("datetime", dt.datetime.now(dt.timezone.utc).isoformat())
    lines = [
        "# Benchmark results", "",
        f"Generated by `make bench-report` (benchmarks/report.py) from one run on {when}. "
        "Every number below comes from that run. Times are the minimum over rounds after a "
        "warm-up round (JIT compiled, caches warm).", "",
        "## Machine", "",
        f"- CPU: {mach['cpu']}, {mach['cores']} cores; {mach['os']}",
        f"- load average (1/5/15 min) when the run ended: {mach['load']} "
        "(a shared machine: other work running at the same time lowers every figure, most of "
        "all the two-thread ones)",
        f"- Python {mach['python']}; " + ", ".join(f"{k} {v}" for k, v in ver.items()),
        f"- OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'passive')} for every contender "
        "(see benchmarks/conftest.py: spinning OpenMP threads of other processes otherwise add "
        "milliseconds to each parallel call on a shared machine)", "",
        "## Headline", "",
        *summary(groups), "",
        f"Data: the paper's simulation (`fastcal.simulate`, sigma = {SIGMA}), {N_BINS} uniform bins. "
        "Slower contenders run on the first rows of the same data; throughput is per prediction. "
        "The ratio column is fastcal report's throughput divided by the contender's.", "",
    ]
    for g, title in (("binary-float32", "float32 p, uint8 y"), ("binary-float64", "float64 p, uint8 y")):
        if g in groups:
            lines += [f"### {title}", "", *headline_table(groups[g]), ""]
    lines += ["## Scaling", "", "![scaling](scaling.png)", "", *scaling(groups)]
    lines += startup(groups)
    first_call = HERE / "first_call.md"  # measured by hand (benchmarks/first_call.py, issue 26)
    if first_call.exists():
        lines += [first_call.read_text().strip(), ""]
    for name in ("targets.md", "torch_batch.md", "segments.md"):  # by hand (their scripts)
        page = HERE / name
        if page.exists():
            lines += [page.read_text().strip(), ""]
    shown = {"binary-float32", "binary-float64", "scaling-n", "scaling-bins", "scaling-threads",
             "startup"}
    rest = other_groups(groups, shown)
    if rest or bench.get("printed"):
        lines += ["## Other benchmarks (out-of-core files, tracking)", "", *rest]
    if bench.get("printed"):
        lines += ["Figures printed by those benchmarks in the same run:", "", "```",
                  *bench["printed"], "```", ""]
    lines += gpu_section(HERE / "gpu_summary.md")
    lines += [
        "## Where the contenders' values differ from fastcal's", "",
        "- scikit-learn `calibration_curve`: bins (a, b] and float64 edges `np.linspace(0, 1, n + 1)`; "
        "fastcal rounds the edges to p's dtype, so for float32 p a value equal to float32(k/n) can land "
        "one bin apart. With the same edges the curves agree to 1e-12. `brier_score_loss` and "
        "`log_loss` compute in p's dtype (float32 input: about 1e-7 relative).",
        "- torchmetrics `binary_calibration_error`: same bins as fastcal's default, but per-bin sums "
        "in p's dtype; on float32 input the ECE drifts (the rel. diff above); float64 agrees to 1e-9.",
        "- netcal `ECE`: clips p to [eps, 1 - eps] (eps of p's dtype), so p = 1.0 is counted at 1 - eps "
        "in the last bin, and uses float64 edges; with the same clipping and edges it agrees to 1e-9.",
        "- numpy contenders use fastcal's edges and conventions and agree to 1e-9 or better.",
        "- fastcal report rows: \"fastcal report\" is the default call (ACE on: value-bucket "
        "statistics fused into the fill, then one light pass over the rows of the buckets that "
        "hold an equal-mass boundary; no sort); \"ace=False\" is the strict one-pass report. "
        "Peers compute no ACE.", "",
    ]
    text = "\n".join(lines) + "\n"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return groups


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-json", type=Path, help="use this pytest-benchmark JSON instead of running")
    parser.add_argument("--keep-json", type=Path, help="also save the run's JSON here")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "results.md")
    args, extra = parser.parse_known_args(argv)
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    if args.from_json:
        bench = json.loads(args.from_json.read_text())
    else:
        with tempfile.TemporaryDirectory() as d:
            json_path = Path(d) / "bench.json"
            code, printed = run_suite(json_path, extra)
            if not json_path.exists():
                print(f"the benchmark run failed (exit {code}); RESULTS.md not written", file=sys.stderr)
                return 1
            if code != 0:
                print(f"some benchmarks failed (exit {code}); RESULTS.md not written", file=sys.stderr)
                return 1
            bench = json.loads(json_path.read_text())
            bench["printed"] = printed
            if args.keep_json:
                args.keep_json.write_text(json.dumps(bench))
    groups = write_results(bench, machine(), args.out)
    plot(groups, args.out.parent / "scaling.png")
    print(f"wrote {args.out} and {args.out.parent / 'scaling.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

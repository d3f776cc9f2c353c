#!/usr/bin/env bash
# One command for the GPU machine: the real-GPU tests, the GPU benchmarks with
# torchmetrics on the same GPU and data, a profiler pass over the binary fill,
# and a summary. Everything lands in $OUT (default ./gpu_out):
#   env.txt         GPU, driver, package versions
#   gpu_tests.log   pytest tests/backends/test_cuda_gpu.py (all simulator cases + 1e7-row checks)
#   bench_binary.log, bench_multiclass.log   pytest benchmarks/test_bench_gpu.py, two groups
#   bench_gpu_binary.json, bench_gpu_multiclass.json   pytest-benchmark's full numbers
#   ncu.txt         Nsight Compute speed-of-light and occupancy of the binary fill (1e8 rows)
#   summary.md / summary.json   throughput table and ratios against torchmetrics
#                   (copy summary.md to benchmarks/gpu_summary.md: RESULTS.md's GPU section shows it)
# Sizes: FASTCAL_GPU_BENCH_N (1e9), FASTCAL_GPU_BENCH_MC_N (1e8), FASTCAL_GPU_BENCH_BOOT_N (1e8),
# FASTCAL_GPU_BENCH_ROUNDS (5).
# Usage there: bash benchmarks/gpu_run.sh [all|tests|bench]   (python3 must have numba-cuda,
# torch, torchmetrics, pytest and pytest-benchmark; the workplace image has them).
# A lent machine runs one command for at most 10 minutes: "tests" (env + GPU tests) and
# "bench" (benchmarks, profile, summary) fit one each; "all" (the default) runs both.
set -uo pipefail
STAGE=${1:-all}
case "$STAGE" in all|tests|bench) ;; *) echo "gpu_run.sh: stage must be all, tests or bench; got '$STAGE'" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
unset NUMBA_ENABLE_CUDASIM
status=0

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  "$PY" - <<'PY'
import numpy, numba, torch, importlib.metadata as md
print("numpy", numpy.__version__, "numba", numba.__version__, "torch", torch.__version__)
for name in ("numba-cuda", "numba-cuda-mlir", "torchmetrics", "pytest-benchmark"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "not installed")
import fastcal.cuda as fc
print("fastcal.cuda.is_available:", fc.is_available())
PY
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ "$STAGE" != bench ]; then
  timeout 540 "$PY" -m pytest -q -rs -p no:cacheprovider tests/backends/test_cuda_gpu.py 2>&1 \
    | tee "$OUT/gpu_tests.log" || status=1
fi
[ "$STAGE" = tests ] && exit $status

# two groups, each with its own JSON: a group cut short by its timeout loses only its own
for group in binary multiclass; do
  if [ $group = binary ]; then sel="not multiclass"; limit=300; else sel="multiclass"; limit=150; fi
  timeout $limit "$PY" -m pytest -q -rs -p no:cacheprovider benchmarks/test_bench_gpu.py \
    -k "$sel" --benchmark-json="$OUT/bench_gpu_$group.json" \
    --benchmark-columns=min,median,max 2>&1 | tee "$OUT/bench_$group.log" || status=1
done

NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 90 "$NCU" --kernel-name regex:fill_prob --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    "$PY" - > "$OUT/ncu.txt" 2>&1 <<'PY' || echo "ncu failed (see ncu.txt)"
import torch
from fastcal.backends import cuda as fc
from fastcal.inputs.binning import kernel_edges
n = 100_000_000
p = torch.rand(n, device="cuda")
y = (torch.rand(n, device="cuda") < p).to(torch.uint8)
e = kernel_edges(15, "<f4")
for _ in range(2):
    fc.fill_binary(y, p, e, True, False, False, 0.0, True)
PY
else
  echo "ncu not found" > "$OUT/ncu.txt"
fi

"$PY" - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
paths = [os.path.join(out, f"bench_gpu_{g}.json") for g in ("binary", "multiclass")]
paths = [p for p in paths if os.path.exists(p)]
if not paths:
    sys.exit("no benchmark JSON")
rows = []
for b in (b for p in paths for b in json.load(open(p))["benchmarks"]):
    x = b["extra_info"]
    rows.append({"test": b["name"], "contender": x.get("contender"), "n": x.get("n"),
                 "device": x.get("device"), "min_s": b["stats"]["min"],
                 "median_s": b["stats"]["median"], "g_per_s": x.get("g_per_s"),
                 "ece": x.get("ece"), "abs_error": x.get("abs_error")})
by = {r["test"]: r for r in rows}
def ratio(a, b):
    if a in by and b in by:
        return by[b]["min_s"] / by[a]["min_s"]
ratios = {
    "binary: fastcal / torchmetrics float32": ratio("test_fastcal_binary_full_report",
                                                    "test_torchmetrics_binary[float32]"),
    "binary: fastcal / torchmetrics float64": ratio("test_fastcal_binary_full_report",
                                                    "test_torchmetrics_binary[float64]"),
    "multi-class K=10: fastcal / torchmetrics": ratio("test_fastcal_multiclass",
                                                      "test_torchmetrics_multiclass"),
    "multi-class K=10 default report with ACE: fastcal / torchmetrics": ratio(
        "test_fastcal_multiclass_default_report", "test_torchmetrics_multiclass"),
    "binary default report with ACE: fastcal / torchmetrics float32": ratio(
        "test_fastcal_default_report_with_ace", "test_torchmetrics_binary[float32]"),
    "binary 100 bins: fastcal / torchmetrics float32": ratio(
        "test_fastcal_binary_many_bins[100]", "test_torchmetrics_binary_100_bins"),
}
json.dump({"rows": rows, "speedups": ratios}, open(os.path.join(out, "summary.json"), "w"), indent=1)
lines = [f"GPU: {rows[0]['device'] if rows else '?'}", "",
         "| test | contender | N | min s | median s | G pred/s | ECE | abs error vs float64 |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
for r in rows:
    fmt = lambda v, f: "" if v is None else format(v, f)
    lines.append(f"| {r['test']} | {r['contender']} | {r['n']:.3g} | {r['min_s']:.4g} | "
                 f"{r['median_s']:.4g} | {fmt(r['g_per_s'], '.3g')} | {fmt(r['ece'], '.6g')} | "
                 f"{fmt(r['abs_error'], '.3g')} |")
lines += ["", "| speed-up (same GPU, same data, minimum times) | x |", "| --- | ---: |"]
lines += [f"| {k} | {'' if v is None else format(v, '.1f')} |" for k, v in ratios.items()]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
exit $status

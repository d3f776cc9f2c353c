"""fastcal.torch.CalibrationMetric against torchmetrics' calibration errors, in batches.

For N predictions fed in batches of 1e5 (float32, on the CPU; one batch drawn
once and fed N / 1e5 times, so that no fresh batch counts), each metric runs
in a fresh process (peak memory is per process): the growth of the peak RSS
from before the first batch to after ``compute()``, the bytes its states hold
at the end, the mean ``update`` time per batch and the time of ``compute()``.
torchmetrics' ``BinaryCalibrationError`` / ``MulticlassCalibrationError`` keep
every confidence and accuracy (list states, ``dist_reduce_fx="cat"``), so their
memory grows with N; fastcal's states are its per-bin sums (a few kilobytes).
The ECE of both is printed: torchmetrics sums in float32.

Run: ``python benchmarks/test_bench_torch.py [--small]`` (--small: N = 1e6
only), or ``python -m pytest benchmarks/test_bench_torch.py -s`` with
``FASTCAL_BENCH_TORCH_N`` (default "1e6,1e7,1e8"; comma-separated). Speed and
memory are reported, never asserted.
"""

import argparse
import json
import os
import subprocess
import sys
import time

BATCH = 100_000
K = 10
N_BINS = 15
WHO = ("fastcal", "torchmetrics")
TASKS = ("binary", "multiclass")


def sizes():
    spec = os.environ.get("FASTCAL_BENCH_TORCH_N", "1e6,1e7,1e8")
    return [int(float(s)) for s in spec.split(",")]


def make(who, task):
    if who == "fastcal":
        from fastcal.torch import CalibrationMetric

        if task == "binary":
            return CalibrationMetric(n_bins=N_BINS)
        return CalibrationMetric("multiclass", num_classes=K, n_bins=N_BINS)
    from torchmetrics.classification import BinaryCalibrationError, MulticlassCalibrationError

    if task == "binary":
        return BinaryCalibrationError(n_bins=N_BINS)
    return MulticlassCalibrationError(num_classes=K, n_bins=N_BINS)


def draw(task, m, gen):
    """A batch of float32 predictions and int64 targets."""
    import torch

    if task == "binary":
        p = torch.rand(m, generator=gen)
        return p, (torch.rand(m, generator=gen) < p ** 1.2).long()
    P = torch.softmax(2.5 * torch.randn(m, K, generator=gen), dim=1)
    return P, torch.randint(0, K, (m,), generator=gen)


def state_bytes(metric):
    total = 0
    for x in metric.metric_state.values():
        total += sum(t.nbytes for t in x) if isinstance(x, list) else x.nbytes
    return total


def measure(who, task, n, batch=BATCH):
    """One metric over n predictions in this process: a dict of figures."""
    import resource

    import torch

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    # one batch, drawn before the baseline and given again and again, so that the growth of
    # the peak is what the metric holds (not the allocator's for fresh batches); imports,
    # compiled kernels and one update's temporaries are in the baseline too
    preds, target = draw(task, batch, gen)
    warm = make(who, task)
    warm.update(preds, target)
    warm.compute()
    del warm
    metric = make(who, task)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spent = 0.0
    batches = 0
    for a in range(0, n, batch):
        m = min(batch, n - a)
        t = time.perf_counter()
        metric.update(preds[:m], target[:m])
        spent += time.perf_counter() - t
        batches += 1
    held = state_bytes(metric)
    t = time.perf_counter()
    value = metric.compute()
    t_compute = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ece = float(value)  # both return the ECE as a 0-d tensor
    return {"who": who, "task": task, "n": n, "batch": batch, "update_ms": 1e3 * spent / batches,
            "compute_s": t_compute, "state_bytes": held, "peak_rss_growth_mb": (rss1 - rss0) / 1024,
            "ece": ece}


def run(who, task, n):
    """``measure`` in a fresh process (its peak RSS is its own)."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import json, sys; sys.path.insert(0, {here!r}); "
            "from test_bench_torch import measure; "
            f"print(json.dumps(measure({who!r}, {task!r}, {n})))")
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=3_600)
    if proc.returncode != 0:
        msg = f"{who} {task} n={n} failed: {proc.stderr[-2000:]}"
        raise RuntimeError(msg)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(ns):
    rows = []
    header = (f"{'task':<10} {'N':>9} {'metric':<12} {'update/batch':>13} {'compute':>9} "
              f"{'state':>12} {'peak RSS +':>11} {'ECE':>10}")
    print(header)
    for n in ns:
        for task in TASKS:
            for who in WHO:
                r = run(who, task, n)
                rows.append(r)
                print(f"{task:<10} {n:>9.0e} {who:<12} {r['update_ms']:>10.2f} ms "
                      f"{r['compute_s']:>7.3f} s {r['state_bytes']:>12,} "
                      f"{r['peak_rss_growth_mb']:>8.1f} MB {r['ece']:>10.6f}", flush=True)
    return rows


def test_torch_metric_memory_and_update_time():
    rows = table(sizes())
    for r in rows:
        if r["who"] == "fastcal":
            assert r["state_bytes"] < 10_000  # the claim measured: constant state


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="N = 1e6 only")
    args = parser.parse_args()
    table([10**6] if args.small else sizes())


if __name__ == "__main__":
    main()

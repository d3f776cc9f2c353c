"""The torch metric per batch: fastcal's ``CalibrationMetric`` against torchmetrics.

Both metrics, made with their defaults but for 15 bins (torchmetrics'
``BinaryCalibrationError`` / ``MulticlassCalibrationError``, K = 10), are given
the same 4,096-row float32 CPU batches (int64 targets) in the same process, in
turns: per round each contender runs ``update`` (then ``forward``) on the same
R batches, timed as a whole; the figure is the median over rounds of the time
per batch. The ratio is torchmetrics' time over fastcal's (above 1: fastcal
faster). One thread each (``torch.set_num_threads(1)``, ``NUMBA_NUM_THREADS=1``
set before numba loads): a 4,096-row batch is filled on one thread anyway.

Run it on two checkouts in turn for a before/after comparison::

    PYTHONPATH=/path/to/before python benchmarks/torch_batch_speed.py
    PYTHONPATH=. python benchmarks/torch_batch_speed.py [--rounds 15] [--batches 200]

``--stages`` prints where fastcal's ``update`` of one batch spends its time
instead (the best of several repeats of each stage alone, this checkout only):
the gate (tensors to validated arrays), the kernel alone, the rest of the fill
(the backend's call, the checks, the chunk's arrays), the state adds and
torchmetrics' wrapper with the metric's own steps (the total less the stages).

Speed is reported, never asserted.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import torch  # noqa: E402
from torchmetrics.classification import (  # noqa: E402
    BinaryCalibrationError,
    MulticlassCalibrationError,
)

from fastcal.torch import CalibrationMetric  # noqa: E402

ROWS = 4096
K = 10
N_BINS = 15


def batches(task, count, seed=0):
    """``count`` distinct batches of float32 predictions and int64 targets."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        if task == "binary":
            p = torch.rand(ROWS, generator=gen)
            out.append((p, (torch.rand(ROWS, generator=gen) < p ** 1.2).long()))
        else:
            P = torch.softmax(2.5 * torch.randn(ROWS, K, generator=gen), dim=1)
            out.append((P, torch.randint(0, K, (ROWS,), generator=gen)))
    return out


def make(who, task):
    if who == "fastcal":
        if task == "binary":
            return CalibrationMetric(n_bins=N_BINS)
        return CalibrationMetric("multiclass", num_classes=K, n_bins=N_BINS)
    if task == "binary":
        return BinaryCalibrationError(n_bins=N_BINS)
    return MulticlassCalibrationError(num_classes=K, n_bins=N_BINS)


def per_batch(metric, data, call):
    """Seconds per batch of ``call`` ("update" or "forward") over ``data``, from a reset."""
    metric.reset()
    fn = metric.update if call == "update" else metric.forward
    t = time.perf_counter()
    for p, y in data:
        fn(p, y)
    return (time.perf_counter() - t) / len(data)


def race(task, call, rounds, count):
    data = batches(task, count)
    metrics = {who: make(who, task) for who in ("fastcal", "torchmetrics")}
    for metric in metrics.values():  # compile and warm up
        per_batch(metric, data[:5], call)
    times = {who: [] for who in metrics}
    for _ in range(rounds):
        for who, metric in metrics.items():
            times[who].append(per_batch(metric, data, call))
    fc, tm = (statistics.median(times[w]) for w in ("fastcal", "torchmetrics"))
    return fc, tm


def stage_times(task, repeat=7, number=2_000):
    """Microseconds of each stage of fastcal's ``update`` of one batch (this checkout's
    private steps: a profile, not an interface)."""
    import timeit

    (p, y), = batches(task, 1)
    metric = make("fastcal", task)
    metric.update(p, y)
    filler = metric._filler
    arrays = filler.chunk_arrays(y, p, start=0)
    kernel = _kernel_call(task, filler._resolve(y, p), filler.spec)

    def best(call):
        return 1e6 * min(timeit.repeat(call, number=number, repeat=repeat)) / number

    total = best(lambda: metric.update(p, y))
    stages = {
        "gate (tensors to checked arrays)": best(lambda: filler._resolve(y, p)),
        "kernel alone": best(kernel),
        "rest of the fill (call, checks, arrays)": best(
            lambda: filler.chunk_arrays(y, p, start=0)) - best(lambda: filler._resolve(y, p)),
        "width check and state adds": best(lambda: (views := metric._state_views(),
                                                    metric._check_width(arrays["edge_dtype"], views),
                                                    metric._add(arrays, None, views))),
    }
    stages["rest of the fill (call, checks, arrays)"] -= stages["kernel alone"]
    stages["torchmetrics' wrapper, metric's own steps"] = total - sum(stages.values())
    return total, stages


def _kernel_call(task, batch, spec):
    """The serial fill kernel of one batch, on fresh state arrays, as the backend calls it."""
    import numpy as np

    from fastcal._kernels import _config
    from fastcal._kernels import binary as kb
    from fastcal._kernels import multiclass as km

    edges, uniform = spec.edges(batch.p.dtype)
    y, p = batch.y, batch.p
    if task == "binary":
        state = kb.new_state(edges.shape[0] - 1)
        fine = np.zeros((0, kb.N_COUNTS), np.int64), np.zeros(0, np.float64)
        return lambda: kb.fill_range_fine(p, y, 0, p.shape[0], edges, uniform, spec.right,
                                          spec.omit, spec.eps, spec.with_logs, *state, *fine)
    state = km.new_state(edges.shape[0] - 1, p.shape[1], spec.classwise)
    return lambda: km.fill_range(p, y, 0, p.shape[0], edges, uniform, spec.right, spec.eps,
                                 spec.logits, spec.renormalize, _config.SUM_TOL, spec.classwise,
                                 *state, *km.NO_RANK, spec.with_logs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--stages", action="store_true",
                        help="fastcal's update of one batch, stage by stage")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.stages:
        for task in ("binary", "multiclass"):
            total, stages = stage_times(task)
            print(f"{task if task == 'binary' else f'K={K}'}: update {total:.1f} us per batch")
            for name, us in stages.items():
                print(f"  {name:<45} {us:7.1f} us")
        return
    print(f"{ROWS:,}-row float32 batches, {N_BINS} bins, median of {args.rounds} rounds of "
          f"{args.batches} batches; us per batch")
    print(f"{'task':<12} {'call':<8} {'fastcal':>9} {'torchmetrics':>13} {'ratio tm/fc':>12}")
    for task in ("binary", "multiclass"):
        for call in ("update", "forward"):
            fc, tm = race(task, call, args.rounds, args.batches)
            name = task if task == "binary" else f"K={K}"
            print(f"{name:<12} {call:<8} {1e6 * fc:>9.1f} {1e6 * tm:>13.1f} {tm / fc:>11.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()

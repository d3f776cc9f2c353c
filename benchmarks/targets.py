"""Issue 38's targets in one run: each call against its peer on the same data, in turns.

    python benchmarks/targets.py [--repeat 3] [--rows 1e8] [--out FILE.md]

Every pair runs in this process on the same arrays, alternated (fastcal, then the peer,
``--repeat`` rounds), and the figure is each side's best round (the machine is shared:
the best round is the one least disturbed). The torch metric's batches run in a child
process of their own (``torch_batch_speed.py``: one thread each, set before Numba
loads), and the first calls in a fresh child with empty caches. Prints one markdown
table: the target, fastcal's time, the peer's, the ratio, the goal and whether it is
met; ``--out`` writes the same table to a file. Speed is reported, never asserted.

The calls, as the README shows them:

- binary: ``calibration_report(y, p, n_bins=15)`` (float32 p, uint8 y, the paper's
  simulation) against torchmetrics' ``binary_calibration_error`` (CPU, float32) and
  the vectorised NumPy contender (``contenders.numpy_vectorised``: bincounts, the
  report's outputs without ACE); the one-pass fill (``ace=False``) against the read
  floor (``contenders.read_floor``: one parallel pass summing p and y);
- K classes: ``calibration_report(y, P, n_bins=15)`` (float32 softmax rows,
  ``test_bench_multiclass.make_data``) against torchmetrics'
  ``multiclass_calibration_error``, at K = 10, 100 and 1000 (``--rows`` values:
  ``--rows`` / K rows), and with ``ace=False``;
- files: ``score_file(path, prob="p", label="y")`` of a Parquet file (row groups of
  2**20 rows) against ``pq.read_table`` of the same two columns, and of a Feather file
  (pyarrow's record batches, uncompressed) and an NPY directory of the same columns
  against their memory-mapped read (both columns mapped and summed);
- TACE: the time ``metrics=("tace",)`` adds to the K = 10 fill (``ace=False``) of
  ``--rows`` / 100 rows, over that fill;
- the batched EKF per run-step (1,000 runs, 100 steps) against filterpy's per step
  (10 runs), ``test_bench_tracking``'s scenario and models.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

N_BINS = 15


def _turns(calls, repeat):
    """Best seconds of each of ``calls`` (name -> fn), run in turns ``repeat`` times after
    one warm-up call each; and each call's last value."""
    best, value = {}, {}
    for name, fn in calls.items():
        value[name] = fn()
        best[name] = float("inf")
    for _ in range(repeat):
        for name, fn in calls.items():
            t = time.perf_counter()
            value[name] = fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best, value


class Table:
    def __init__(self):
        self.rows = []

    def add(self, target, ours, theirs, ratio, goal, met, note=""):
        self.rows.append((target, ours, theirs, ratio, goal, "yes" if met else "**no**", note))
        print(" | ".join(str(x) for x in self.rows[-1]), flush=True)

    def markdown(self):
        head = ("| target | fastcal | peer | ratio | goal | met | note |\n"
                "|---|---:|---:|---:|---:|---|---|\n")
        return head + "".join("| " + " | ".join(r) + " |\n" for r in self.rows)


def _n(x):
    """1e7, 3e7: a row count as the issue writes it."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"


def _s(x):
    return f"{x:.3g} s" if x >= 1e-3 else f"{1e6 * x:.0f} us"


def binary(table, n, repeat):
    import contenders as c
    import numba

    import fastcal

    y, p = fastcal.simulate(n, sigma=0.5, seed=0)
    y, p = y.astype(np.uint8), p.astype(np.float32)
    threads = numba.get_num_threads()
    calls = {
        "report": lambda: fastcal.calibration_report(y, p, n_bins=N_BINS),
        "fill": lambda: fastcal.calibration_report(y, p, n_bins=N_BINS, ace=False),
        "torchmetrics": lambda: c.torchmetrics_ece(y, p, N_BINS),
        "numpy": lambda: c.numpy_vectorised(y, p, N_BINS),
        "floor": lambda: c.read_floor(y, p, threads),
    }
    best, value = _turns(calls, repeat)
    rows = _n(n)
    tm = best["torchmetrics"] / best["report"]
    table.add(f"binary default report vs torchmetrics CPU, {rows} float32", _s(best["report"]),
              _s(best["torchmetrics"]), f"{tm:.1f}x", "15x", tm >= 15,
              f"{n / best['report'] / 1e6:,.0f} M rows/s")
    npv = best["numpy"] / best["report"]
    table.add(f"binary default report vs NumPy vectorised, {rows}", _s(best["report"]),
              _s(best["numpy"]), f"{npv:.1f}x", "40x", npv >= 40, "")
    frac = best["floor"] / best["fill"]
    table.add(f"one-pass fill (`ace=False`) vs read floor, {rows}", _s(best["fill"]),
              _s(best["floor"]), f"{100 * frac:.1f}%", "25%", frac >= 0.25,
              f"floor {n / best['floor'] / 1e9:.1f} G rows/s")
    ece = value["report"].ece
    assert abs(value["numpy"]["ece"] - ece) <= 1e-9 * ece, (value["numpy"]["ece"], ece)


def multiclass(table, n, repeat):
    from test_bench_multiclass import make_data
    import torch
    from torchmetrics.functional.classification import multiclass_calibration_error

    import fastcal

    for k in (10, 100, 1000):
        rows = n // k
        y, P = make_data(rows, k)
        tp, ty = torch.from_numpy(P), torch.from_numpy(y)
        calls = {
            "report": lambda: fastcal.calibration_report(y, P, n_bins=N_BINS),
            "fill": lambda: fastcal.calibration_report(y, P, n_bins=N_BINS, ace=False),
            "torchmetrics": lambda: float(multiclass_calibration_error(
                tp, ty, num_classes=k, n_bins=N_BINS, norm="l1")),
        }
        best, value = _turns(calls, repeat)
        tm = best["torchmetrics"] / best["report"]
        table.add(f"K = {k} default report vs torchmetrics, {_n(rows)} rows", _s(best["report"]),
                  _s(best["torchmetrics"]), f"{tm:.2f}x", "5x", tm >= 5,
                  f"{rows * k / best['report'] / 1e6:,.0f} M values/s")
        tm = best["torchmetrics"] / best["fill"]
        table.add(f"K = {k} `ace=False` vs torchmetrics", _s(best["fill"]),
                  _s(best["torchmetrics"]), f"{tm:.2f}x", "10x", tm >= 10, "")
        assert abs(value["torchmetrics"] - value["report"].ece) < 1e-2 * value["report"].ece
        if k == 10:
            y, P = y[: n // 100], P[: n // 100]
            calls = {
                "fill": lambda: fastcal.calibration_report(y, P, n_bins=N_BINS, ace=False),
                "tace": lambda: fastcal.calibration_report(y, P, n_bins=N_BINS, ace=False,
                                                           metrics=("tace",)),
            }
            best, _ = _turns(calls, repeat)
            added = (best["tace"] - best["fill"]) / best["fill"]
            table.add(f"TACE, K = 10, {_n(n // 100)} rows: its cost over the fill",
                      _s(best["tace"] - best["fill"]), _s(best["fill"]), f"{added:.1f}x",
                      "at most 3x", added <= 3, "the time metrics=('tace',) adds")


def files(table, n, repeat):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import fastcal

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sim.parquet")
        step = 1 << 20
        with pq.ParquetWriter(path, pa.schema([("p", pa.float32()), ("y", pa.uint8())])) as out:
            for k, a in enumerate(range(0, n, step)):
                y, p = fastcal.simulate(min(step, n - a), sigma=0.5, seed=k)
                out.write_table(pa.table({"p": p.astype(np.float32), "y": y.astype(np.uint8)}))
        calls = {
            "score_file": lambda: fastcal.score_file(path, prob="p", label="y"),
            "read_table": lambda: pq.read_table(path, columns=["p", "y"]),
        }
        best, value = _turns(calls, repeat)
        assert value["score_file"].n == n
        r = best["score_file"] / best["read_table"]
        table.add(f"`score_file` Parquet vs `pq.read_table`, {_n(n)} rows",
                  _s(best["score_file"]), _s(best["read_table"]), f"{r:.2f}x the read",
                  "at most 1.2x", r <= 1.2, f"{n / best['score_file'] / 1e6:,.0f} M rows/s")
        mapped = _mapped_files(tmp, pq.read_table(path, columns=["p", "y"]))
        for fmt, (where, read) in mapped.items():
            calls = {"score_file": lambda where=where: fastcal.score_file(where, prob="p",
                                                                          label="y"),
                     "read": read}
            best, value = _turns(calls, repeat)
            assert value["score_file"].n == n and value["read"] > 0
            r = best["score_file"] / best["read"]
            table.add(f"`score_file` {fmt} vs its memory-mapped read, {_n(n)} rows",
                      _s(best["score_file"]), _s(best["read"]), f"{r:.2f}x the read",
                      "at most 2x", r <= 2, f"{n / best['score_file'] / 1e6:,.0f} M rows/s")


def _mapped_files(tmp, columns):
    """A Feather file (pyarrow's own record batches) and an NPY directory of
    ``columns``, each with its memory-mapped read: both columns mapped and summed."""
    import pyarrow as pa
    import pyarrow.feather as feather

    feather_path = os.path.join(tmp, "sim.feather")
    feather.write_feather(columns, feather_path, compression="uncompressed")
    npy = os.path.join(tmp, "npy")
    os.mkdir(npy)
    for name in ("p", "y"):
        np.save(os.path.join(npy, f"{name}.npy"), columns.column(name).to_numpy())

    def read_feather():
        with pa.memory_map(feather_path) as source:
            t = pa.ipc.open_file(source).read_all()
            return sum(float(np.sum(c.to_numpy())) for name in ("p", "y")
                       for c in t.column(name).chunks)

    def read_npy():
        return sum(float(np.load(os.path.join(npy, f"{name}.npy"), mmap_mode="r").sum())
                   for name in ("p", "y"))

    return {"Feather": (feather_path, read_feather), "NPY": (npy, read_npy)}


def torch_metric(table):
    out = subprocess.run([sys.executable, os.path.join(HERE, "torch_batch_speed.py"),
                          "--rounds", "7", "--batches", "100"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"(binary|K=10)\s+update\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x", line)
        if m:
            task, fc, tm, ratio = m.group(1), float(m.group(2)), float(m.group(3)), float(m.group(4))
            table.add(f"torch metric `update`, {task}, 4,096-row batches", f"{fc:.0f} us",
                      f"{tm:.0f} us", f"{ratio:.2f}x", "1x", ratio >= 1,
                      "medians, one thread each")


def ekf(table, repeat):
    from test_bench_tracking import FP_RUNS, RUNS, STEPS, filterpy_ekf

    from tracking import ExtendedKalmanFilter
    from tracking.scenario import Scenario, simulate

    sc = Scenario(runs=RUNS, steps=STEPS, seed=0)
    sim = simulate(sc)
    flt = ExtendedKalmanFilter(sc.motion, sc.sensor)
    calls = {
        "batched": lambda: flt.run(sim.x0, sim.P0, sim.measurements),
        "filterpy": lambda: filterpy_ekf(sc, sim, FP_RUNS),
    }
    best, value = _turns(calls, repeat)
    np.testing.assert_allclose(value["filterpy"][0], value["batched"].means[:FP_RUNS], atol=1e-9)
    ours, theirs = best["batched"] / (RUNS * STEPS), best["filterpy"] / (FP_RUNS * STEPS)
    table.add("batched EKF per run-step vs filterpy per step", f"{1e6 * ours:.3f} us",
              f"{1e6 * theirs:.1f} us", f"{theirs / ours:.0f}x", "200x", theirs / ours >= 200,
              f"{RUNS} runs x {STEPS} steps")


_FIRST = """
import time, numpy as np
t = time.perf_counter()
import fastcal
t_import = time.perf_counter() - t
rng = np.random.default_rng(0)
p = rng.random(10_000).astype(np.float32)
y = (rng.random(10_000) < p).astype(np.uint8)
t = time.perf_counter(); fastcal.calibration_report(y, p); t_bin = time.perf_counter() - t
P = rng.dirichlet(np.ones(4), 10_000).astype(np.float32)
t = time.perf_counter(); fastcal.calibration_report(rng.integers(0, 4, 10_000), P)
t_k = time.perf_counter() - t
print(t_import, t_bin, t_k)
"""


def first_call(table):
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": os.path.join(tmp, "numba"), "HOME": tmp,
               "XDG_CACHE_HOME": os.path.join(tmp, "cache")}
        out = subprocess.run([sys.executable, "-c", _FIRST], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
    t_import, t_bin, t_k = (float(x) for x in out)
    table.add("first binary report, 10,000 rows, empty caches (after the import)", _s(t_bin),
              "", "", "1 s (issue 39)", t_bin <= 1, f"import {_s(t_import)}")
    table.add("first K-class report after it", _s(t_k), "", "", "+1 s (issue 39)", t_k <= 1, "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", type=float, default=1e8)
    ap.add_argument("--out", help="also write the table (markdown) here")
    args = ap.parse_args(argv)
    n = int(args.rows)
    table = Table()
    start = time.time()
    first_call(table)
    for rows in (min(n, 30_000_000), n):
        binary(table, rows, args.repeat)
    multiclass(table, n, args.repeat)
    files(table, n, args.repeat)
    torch_metric(table)
    ekf(table, args.repeat)
    load = os.getloadavg()
    text = (f"{table.markdown()}\nOne run of `benchmarks/targets.py --rows {_n(args.rows)} "
            f"--repeat {args.repeat}`, {time.time() - start:.0f} s, load average at the end "
            f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.\n")
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

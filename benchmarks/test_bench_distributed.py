"""Scoring a Parquet dataset on a 2-worker Dask LocalCluster against score_file in one process.

The dataset is FASTCAL_BENCH_DASK_ROWS rows (default 1e8) of the paper's
simulation (sigma 0.5, float32 p, uint8 y) in FASTCAL_BENCH_DASK_FILES files
(default 8, seeds 0..), written by ``fastcal simulate``'s writer with row groups
of 2**20 rows and cached under the system temp directory (reproducible for a
seed, so a cached file is the same file).

Both sides read the same files from the page cache: score_file streams them in
this process (a reader thread and the fill), score_dataset runs one task per
4 row groups on a LocalCluster of 2 single-threaded worker processes and
merges the accumulators in a tree. The runs are interleaved, round by round,
so machine load hits both alike; each result is checked against the other.

Run: ``pytest benchmarks/test_bench_distributed.py -s``. Lines starting with
``RESULT`` are the figures for docs/benchmarks/results.md.
"""

import os
import platform
import tempfile
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from fastcal import distributed as fd  # noqa: E402
from fastcal.files import score_file  # noqa: E402
from fastcal.writers import simulate_file  # noqa: E402

ROWS = int(float(os.environ.get("FASTCAL_BENCH_DASK_ROWS", 100_000_000)))
FILES = int(os.environ.get("FASTCAL_BENCH_DASK_FILES", 8))
ROUNDS = int(os.environ.get("FASTCAL_BENCH_DASK_ROUNDS", 3))
CACHE = os.path.join(tempfile.gettempdir(), "fastcal-bench")
KEYS = ("n", "ece", "esce", "mce", "ace", "ecd", "brier", "nll")


def dataset():
    root = os.path.join(CACHE, f"dask_n{ROWS}_files{FILES}_s0.5_f32")
    os.makedirs(root, exist_ok=True)
    for k in range(FILES):
        n = (k + 1) * ROWS // FILES - k * ROWS // FILES
        path = os.path.join(root, f"part-{k:03d}.parquet")
        if not os.path.exists(path):
            simulate_file(path, n=n, sigma=0.5, seed=k, format="parquet", dtype="float32",
                          progress=False)
    return root


def assert_same(got, ref):
    for k in KEYS:
        np.testing.assert_allclose(getattr(got, k), getattr(ref, k), rtol=1e-12, atol=1e-13,
                                   err_msg=k)
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def test_dask_cluster_vs_score_file_same_run():
    root = dataset()
    t0 = time.perf_counter()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    client = distributed.Client(cluster, set_as_default=False)
    start_s = time.perf_counter() - t0
    try:
        # warm: JIT (or numba cache load) on the workers and here, page cache
        _, warm_s, _ = timed(lambda: fd.score_dataset(root, client=client, ace=False))
        score_file(root, ace=False)
        # the equal-mass kernels too, on one file split into 12 partitions (both workers)
        first = os.path.join(root, "part-000.parquet")
        fd.score_dataset(first, client=client, strategy="quantile", rows_per_partition=1 << 20)
        score_file(first, strategy="quantile")
        names = ("score_file", "dask")
        wall = {k: [] for k in names}
        cpu = {k: [] for k in names}
        runs = {"score_file": lambda: score_file(root, ace=False),
                "dask": lambda: fd.score_dataset(root, client=client, ace=False)}
        for _ in range(ROUNDS):
            out = {}
            for name in names:
                out[name], w, c = timed(runs[name])
                wall[name].append(w)
                cpu[name].append(c)
            assert_same(out["dask"], out["score_file"])
        # equal-mass bins: the same algorithm and passes in one process and on the cluster
        with distributed.get_task_stream(client) as ts:
            dq, dq_s, _ = timed(lambda: fd.score_dataset(root, client=client,
                                                         strategy="quantile"))
        fq, fq_s, _ = timed(lambda: score_file(root, strategy="quantile"))
        assert_same(dq, fq)
        tasks = [t for t in ts.data if "_fill_part" in str(t["key"])]
        per_task = [sum(s["stop"] - s["start"] for s in t["startstops"]
                        if s["action"] == "compute") for t in tasks]
    finally:
        client.close()
        cluster.close()
    med = {k: float(np.median(v)) for k, v in wall.items()}
    low = {k: float(np.min(v)) for k, v in wall.items()}
    cpuc = {k: float(np.median(v)) for k, v in cpu.items()}
    n_parts = len(tasks)
    print(f"\nRESULT machine: {platform.machine()}, {os.cpu_count()} cores shared with other "
          f"jobs (load average {os.getloadavg()[0]:.1f} at the end), python "
          f"{platform.python_version()}, dask {distributed.__version__}")
    print(f"RESULT dataset: N={ROWS:.0e} rows in {FILES} Parquet files (float32 p, uint8 y, "
          f"row groups of 2**20), {n_parts} partitions of about 2**22 rows")
    print(f"RESULT one pass (ace=False), {ROUNDS} interleaved rounds, wall median (min) in s: "
          f"score_file one process {med['score_file']:.2f} ({low['score_file']:.2f}), "
          f"LocalCluster 2 workers x 1 thread {med['dask']:.2f} ({low['dask']:.2f}); "
          f"ratio dask/score_file {med['dask'] / med['score_file']:.2f} "
          f"(min {low['dask'] / low['score_file']:.2f}); "
          f"throughput {ROWS / med['score_file'] / 1e6:.0f} vs {ROWS / med['dask'] / 1e6:.0f} "
          f"M rows/s; client-process CPU s: score_file {cpuc['score_file']:.2f}, "
          f"dask {cpuc['dask']:.2f}")
    print(f"RESULT cluster start {start_s:.1f} s; first (cold) dask run {warm_s:.2f} s")
    print(f"RESULT equal-mass bins (strategy='quantile'), one run each: score_file ({fq.passes} passes) "
          f"{fq_s:.2f} s, dask ({dq.passes} passes) {dq_s:.2f} s; pass-1 task compute time "
          f"per partition: median {np.median(per_task):.3f} s, max {np.max(per_task):.3f} s")

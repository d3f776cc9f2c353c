"""Out-of-core scoring: throughput against a bare pyarrow read, peak memory, start-up.

Files are the paper's simulation written by ``fastcal simulate`` (float32 p,
uint8 y, row groups of 2**20 rows) and cached under the system temp directory
(they are reproducible for a seed, so a cached file is the same file).

Sizes (environment variables):
    FASTCAL_BENCH_ROWS      rows of the throughput file (default 10_000_000)
    FASTCAL_BENCH_BIG_ROWS  rows of the large peak-memory file (default 100_000_000)

Run: ``pytest benchmarks/test_bench_files.py -s`` (not --benchmark-only: the ratio
and memory tests time themselves). Lines
starting with ``RESULT`` are the figures for docs/benchmarks/results.md.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

import fastcal
from fastcal.files import score_file
from fastcal.writers import simulate_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = int(float(os.environ.get("FASTCAL_BENCH_ROWS", 10_000_000)))
BIG_ROWS = int(float(os.environ.get("FASTCAL_BENCH_BIG_ROWS", 100_000_000)))
CACHE = os.path.join(tempfile.gettempdir(), "fastcal-bench")
KEYS = ("n", "ece", "esce", "mce", "ecd", "brier", "nll")


def sim_file(n, sigma=0.5, seed=0):
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, f"sim_n{n}_s{sigma:g}_seed{seed}_f32.parquet")
    if not os.path.exists(path):
        simulate_file(path, n=n, sigma=sigma, seed=seed, format="parquet", dtype="float32",
                      progress=False)
    return path


def assert_same(got, ref):
    for k in KEYS:
        np.testing.assert_allclose(got[k] if isinstance(got, dict) else getattr(got, k),
                                   getattr(ref, k), rtol=1e-12, atol=0, err_msg=k)


def bare_read_table(path):
    t = pq.read_table(path, columns=["p", "y"])
    return t["p"].to_numpy(), t["y"].to_numpy()


def bare_row_groups(path):
    """The streaming read score_file does, without scoring: row group by row group."""
    pf = pq.ParquetFile(path)
    rows = 0
    for g in range(pf.metadata.num_row_groups):
        t = pf.read_row_group(g, columns=["p", "y"])
        p, y = t["p"].to_numpy(), t["y"].to_numpy()
        rows += p.shape[0] + 0 * y.shape[0]
    return rows


@pytest.fixture(scope="module")
def big():
    path = sim_file(ROWS)
    p, y = bare_read_table(path)
    ref = fastcal.calibration_report(y, p, ace=False)
    score_file(path, prob="p", label="y")  # JIT and page cache warm
    return path, ref


@pytest.mark.benchmark(group="files-throughput")
def test_bare_pyarrow_read_table(benchmark, big):
    path, ref = big
    p, y = benchmark.pedantic(bare_read_table, args=(path,), rounds=5, warmup_rounds=1)
    assert p.shape[0] == ROWS and int(y.sum()) == round(ref.sums["n_pos"])
    benchmark.extra_info["rows_per_s"] = ROWS / benchmark.stats.stats.median


@pytest.mark.benchmark(group="files-throughput")
def test_bare_pyarrow_row_groups(benchmark, big):
    path, _ = big
    rows = benchmark.pedantic(bare_row_groups, args=(path,), rounds=5, warmup_rounds=1)
    assert rows == ROWS
    benchmark.extra_info["rows_per_s"] = ROWS / benchmark.stats.stats.median


@pytest.mark.benchmark(group="files-throughput")
def test_score_file_parquet(benchmark, big):
    path, ref = big
    rep = benchmark.pedantic(score_file, args=(path,), kwargs={"prob": "p", "label": "y"},
                             rounds=5, warmup_rounds=1)
    assert_same(rep, ref)
    benchmark.extra_info["rows_per_s"] = ROWS / benchmark.stats.stats.median


def test_throughput_ratio_same_run(big):
    """score_file / bare read, interleaved in one run so machine load hits all three alike.

    Wall-clock medians and minima, and process CPU time (all threads), of 5 rounds each.
    """
    path, ref = big
    names = ("read_table", "row_groups", "score_file")
    wall = {k: [] for k in names}
    cpu = {k: [] for k in names}
    for _ in range(5):
        for name, fn in (("read_table", lambda: bare_read_table(path)),
                         ("row_groups", lambda: bare_row_groups(path)),
                         ("score_file", lambda: score_file(path, prob="p", label="y"))):
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    assert_same(out, ref)
    med = {k: float(np.median(v)) for k, v in wall.items()}
    low = {k: float(np.min(v)) for k, v in wall.items()}
    cpu = {k: float(np.median(v)) for k, v in cpu.items()}
    print(f"\nRESULT throughput N={ROWS:.0e} float32 p, uint8 y: wall median (min) in s: "
          f"score_file {med['score_file']:.3f} ({low['score_file']:.3f}), "
          f"pq.read_table {med['read_table']:.3f} ({low['read_table']:.3f}), "
          f"row_groups {med['row_groups']:.3f} ({low['row_groups']:.3f}); "
          f"ratio score/read_table {med['score_file'] / med['read_table']:.2f} "
          f"(min {low['score_file'] / low['read_table']:.2f}), score/row_groups "
          f"{med['score_file'] / med['row_groups']:.2f} "
          f"(min {low['score_file'] / low['row_groups']:.2f}); "
          f"CPU s: score_file {cpu['score_file']:.3f}, read_table {cpu['read_table']:.3f}, "
          f"row_groups {cpu['row_groups']:.3f}; "
          f"score_file {ROWS / med['score_file'] / 1e6:.0f} M rows/s")


# -- peak memory, in fresh processes ---------------------------------------------------

_RSS_SCRIPT = """
import json, resource, sys, time
from fastcal.files import score_file
t0 = time.perf_counter()
rep = score_file(sys.argv[1], prob="p", label="y", progress=False)
dt = time.perf_counter() - t0
d = rep.to_dict()
d["seconds"] = dt
# VmHWM: this process's own peak (ru_maxrss can carry the parent's peak over exec)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
d["peak_rss_mb"] = (int(hwm[0].split()[1]) if hwm else
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024
print(json.dumps(d))
"""


def run_rss(path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, path], capture_output=True, text=True,
                       env=env, check=True)
    return json.loads(r.stdout)


def test_peak_rss_small_vs_large():
    small = sim_file(1_000_000)
    large = sim_file(BIG_ROWS)
    run_rss(small)  # kernels compiled and cached before measuring
    a = run_rss(small)
    b = run_rss(large)
    ref_small = fastcal.calibration_report(*reversed(bare_read_table(small)), ace=False)
    assert_same(a, ref_small)
    assert b["n"] == BIG_ROWS
    # the large file's numbers against an in-memory reference, read chunk-free by pyarrow
    p, y = bare_read_table(large)
    ref_large = fastcal.calibration_report(y, p, ace=False)
    del p, y
    assert_same(b, ref_large)
    print(f"\nRESULT peak RSS: {a['peak_rss_mb']:.0f} MB at 1e6 rows, {b['peak_rss_mb']:.0f} MB at "
          f"{BIG_ROWS:.0e} rows (difference {b['peak_rss_mb'] - a['peak_rss_mb']:.0f} MB); "
          f"{BIG_ROWS:.0e} rows scored in {b['seconds']:.1f} s "
          f"({BIG_ROWS / b['seconds'] / 1e6:.0f} M rows/s)")


_QUANTILE_SCRIPT = """
import json, sys, time
from fastcal.files import score_file
t0 = time.perf_counter()
rep = score_file(sys.argv[1], prob="p", label="y", n_bins=int(sys.argv[2]), strategy="quantile",
                 progress=False)
dt = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(json.dumps({"seconds": dt, "peak_rss_mb": int(hwm[0].split()[1]) / 1024,
                  "ece": rep.ece, "passes": rep.passes, "n": rep.n}))
"""


def test_quantile_bins_peak_rss_and_time():
    """Equal-mass bins from a file (issue 12 item 10): 15 and 1e6 quantile bins on
    the throughput file, each in a fresh process (peak RSS, wall time)."""
    path = sim_file(ROWS)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run(n_bins):
        r = subprocess.run([sys.executable, "-c", _QUANTILE_SCRIPT, path, str(n_bins)],
                           capture_output=True, text=True, env=env, check=True)
        return json.loads(r.stdout)

    run(15)  # kernels compiled and cached before measuring
    few, many = run(15), run(1_000_000)
    assert few["n"] == many["n"] == ROWS
    for name, r in (("15", few), ("1e6", many)):
        print(f"\nRESULT quantile bins from a file, N={ROWS:.0e}, {name} bins: "
              f"{r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB, {r['passes']} passes")


# -- start-up of the command line -----------------------------------------------------------

def test_cli_startup_1000_rows(benchmark):
    path = sim_file(1_000)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "fastcal.cli", "score", path, "--prob", "p", "--label", "y",
           "--json"]
    t0 = time.perf_counter()
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    first_s = time.perf_counter() - t0

    def once():
        return subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout

    out = benchmark.pedantic(once, rounds=5, warmup_rounds=0)
    p, y = bare_read_table(path)
    assert_same(json.loads(out), fastcal.calibration_report(y, p, ace=False))
    assert json.loads(first.stdout)["n"] == 1_000
    print(f"\nRESULT start-up: first call {first_s:.2f} s, then median "
          f"{benchmark.stats.stats.median:.2f} s (min {benchmark.stats.stats.min:.2f} s) for "
          "`fastcal score` on a 1,000-row file")

"""Recalibration: temperature scaling fitted out of core, and in memory against netcal.

- A Parquet file of FASTCAL_BENCH_RECAL_ROWS (default 1e7) float32 logits and
  uint8 labels (over-confident: labels drawn from sigmoid(z / 1.7)), row groups
  of 2**20 rows, cached under the system temp directory. Fitting temperature
  (NLL target, then the safe target) is timed against one ``score_file`` of
  the same file with ``logits=True``; the issue's target is at most 6 passes
  and 3x one score.
- In memory on N x K = 1e6 x 10 logits (FASTCAL_BENCH_RECAL_MEM_ROWS): fastcal's
  TemperatureScaling against netcal's TemperatureScaling (its default MLE fit);
  both temperatures are checked against each other.

Run: ``pytest benchmarks/test_bench_recalibrate.py -s``. Lines starting with
``RESULT`` are the figures; timings are the minimum over rounds after a warm-up.
"""

import os
import tempfile
import time
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastcal import recalibrate as rc
from fastcal.files import score_file

ROWS = int(float(os.environ.get("FASTCAL_BENCH_RECAL_ROWS", 10_000_000)))
MEM_ROWS = int(float(os.environ.get("FASTCAL_BENCH_RECAL_MEM_ROWS", 1_000_000)))
CACHE = os.path.join(tempfile.gettempdir(), "fastcal-bench")
CHUNK = 1 << 20


def _chunk(start, n, seed=0):
    rng = np.random.default_rng([seed, start])
    z = rng.normal(0.2, 3.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z / 1.7))).astype(np.uint8)
    return y, z.astype(np.float32)


def logit_file(n):
    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, f"recal_logits_n{n}_f32.parquet")
    if not os.path.exists(path):
        tmp = path + ".tmp"
        schema = pa.schema([("z", pa.float32()), ("y", pa.uint8())])
        with pq.ParquetWriter(tmp, schema) as w:
            for start in range(0, n, CHUNK):
                y, z = _chunk(start, min(CHUNK, n - start))
                w.write_table(pa.table({"z": z, "y": y}, schema=schema), row_group_size=CHUNK)
        os.replace(tmp, path)
    return path


def best(fn, rounds=3):
    out, times = None, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times)


def test_temperature_from_parquet_vs_one_score():
    path = logit_file(ROWS)
    score_file(path, prob="z", label="y", logits=True)  # warm-up: compiles, caches the file
    rc.fit_file(rc.TemperatureScaling(logits=True), path, prob="z", label="y")
    rep, t_score = best(lambda: score_file(path, prob="z", label="y", logits=True))
    fit, t_fit = best(lambda: rc.fit_file(rc.TemperatureScaling(logits=True), path,
                                          prob="z", label="y"))
    safe, t_safe = best(lambda: rc.fit_file(
        rc.TemperatureScaling(logits=True, target="safe"), path, prob="z", label="y"))
    # the same fit in memory (when it fits): the file's answer to 1e-10
    if ROWS <= 20_000_000:
        t = pq.read_table(path)
        mem = rc.TemperatureScaling(logits=True).fit(t["y"].to_numpy(), t["z"].to_numpy())
        assert fit.temperature_ == pytest.approx(mem.temperature_, rel=1e-10)
    assert fit.n_ == rep.n == ROWS
    assert 1.0 < safe.temperature_ < fit.temperature_
    print(f"\nRESULT recal_file rows={ROWS} score_s={t_score:.3f} "
          f"fit_nll_s={t_fit:.3f} passes={fit.passes_} ratio={t_fit / t_score:.2f} "
          f"fit_safe_s={t_safe:.3f} passes={safe.passes_} ratio={t_safe / t_score:.2f} "
          f"T={fit.temperature_:.6f} T_safe={safe.temperature_:.6f}")


def test_temperature_in_memory_vs_netcal():
    netcal = pytest.importorskip("netcal.scaling")
    rng = np.random.default_rng(0)
    K = 10
    L = rng.normal(0, 2.0, (MEM_ROWS, K))
    P = np.exp(L / 1.5)
    P /= P.sum(1, keepdims=True)
    y = (P.cumsum(1) > rng.random(MEM_ROWS)[:, None]).argmax(1)
    Pm = np.exp(L - L.max(1, keepdims=True))
    Pm /= Pm.sum(1, keepdims=True)  # what netcal takes: the model's probabilities
    rc.TemperatureScaling(logits=True).fit(y[:1000], L[:1000])  # compile
    ours, t_ours = best(lambda: rc.TemperatureScaling(logits=True).fit(y, L))

    def run_netcal():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = netcal.TemperatureScaling()
            m.fit(Pm, y)
        return m

    theirs, t_netcal = best(run_netcal, rounds=1)
    t_netcal_T = 1.0 / float(np.ravel(theirs.temperature)[0])
    assert t_netcal_T == pytest.approx(ours.temperature_, rel=1e-4)
    print(f"\nRESULT recal_memory rows={MEM_ROWS} K={K} fastcal_s={t_ours:.3f} "
          f"passes={ours.passes_} netcal_s={t_netcal:.3f} speedup={t_netcal / t_ours:.1f}x "
          f"T={ours.temperature_:.8f} T_netcal={t_netcal_T:.8f}")

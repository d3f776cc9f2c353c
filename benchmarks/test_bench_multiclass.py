"""Multi-class throughput: fastcal's full report against torchmetrics, same data, same run.

Two shapes, both float32 probabilities (1e8 elements each):

- N = 1e7 rows, K = 10 classes
- N = 1e5 rows, K = 1000 classes

fastcal: ``calibration_report(y, P, ace=False)``, one compiled pass giving
top-label ECE/ESCE/MCE, eq.-12 ECD and its variance, Brier, NLL, class-wise
ECE and the per-class tables. torchmetrics: ``multiclass_calibration_error``
(top-label ECE only, its defaults: validate_args=True). Both are warmed up
before timing. Each benchmark asserts that its ECE equals a float64 NumPy
reference computed here; torchmetrics is held to float32 accuracy because it
casts the confidences to float32 and sums them in float32 (``scatter_add_``),
and the drift is recorded in ``extra_info`` and printed.

Run: ``python -m pytest benchmarks/test_bench_multiclass.py`` (the ratio is
printed by the last test; speed is reported, never asserted: the machine is
shared and timings are noisy).
"""

import time

import numpy as np
import pytest

import fastcal

SHAPES = {"1e7x10": (10_000_000, 10), "1e5x1000": (100_000, 1000)}
N_BINS = 10
TIMES = {}  # (shape, who) -> best seconds, filled by the benchmarks


def make_data(n, k, seed=0):
    """Softmax of scaled normal logits (float32) and labels drawn from a sharper softmax."""
    rng = np.random.default_rng(seed)
    P = np.empty((n, k), np.float32)
    y = np.empty(n, np.int64)
    step = max(1, 2_000_000 // k)
    for a in range(0, n, step):
        b = min(n, a + step)
        z = rng.standard_normal((b - a, k), dtype=np.float32) * np.float32(2.5)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        P[a:b] = e / e.sum(axis=1, keepdims=True)
        # labels from softmax(0.8 z): the model is over-confident
        q = np.exp(0.8 * z.astype(np.float64))
        q /= q.sum(axis=1, keepdims=True)
        u = rng.random(b - a)[:, None]
        y[a:b] = np.minimum((q.cumsum(axis=1) < u).sum(axis=1), k - 1)
    return y, P


def reference_ece(y, P, n_bins=N_BINS):
    """Top-label ECE in float64 with NumPy (bins [a, b), last bin closed, float32-rounded edges)."""
    conf = P.max(axis=1).astype(np.float64)
    correct = (P.argmax(axis=1) == y).astype(np.float64)
    edges = fastcal.uniform_edges(n_bins, np.float32)
    b = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, n_bins - 1)
    n = np.bincount(b, minlength=n_bins).astype(np.float64)
    sc = np.bincount(b, weights=conf, minlength=n_bins)
    sa = np.bincount(b, weights=correct, minlength=n_bins)
    full = n > 0
    return float(np.sum(np.abs(sa[full] - sc[full]) / len(conf)))


@pytest.fixture(scope="module", params=list(SHAPES))
def dataset(request):
    n, k = SHAPES[request.param]
    y, P = make_data(n, k)
    return request.param, y, P, reference_ece(y, P)


def test_fastcal_full_report(benchmark, dataset):
    name, y, P, ref = dataset
    fastcal.calibration_report(y[:1000], P[:1000], ace=False)  # compile (cached after first run)
    rep = benchmark.pedantic(fastcal.calibration_report, args=(y, P), kwargs={"ace": False},
                             rounds=3, iterations=1, warmup_rounds=1)
    assert rep.n == len(y)
    assert rep.ece == pytest.approx(ref, rel=1e-9)
    assert np.isfinite(rep.ecd) and np.isfinite(rep.classwise_ece)
    TIMES[(name, "fastcal")] = benchmark.stats.stats.min
    benchmark.extra_info.update(rows=len(y), classes=P.shape[1], ece=rep.ece, ref=ref,
                                elements_per_s=P.size / benchmark.stats.stats.min)


def test_fastcal_ece_only(benchmark, dataset):
    """Like for like with torchmetrics: top-label ECE alone (no logarithms, no class-wise state)."""
    name, y, P, ref = dataset
    fastcal.ece(y[:1000], P[:1000])
    val = benchmark.pedantic(fastcal.ece, args=(y, P), rounds=3, iterations=1, warmup_rounds=1)
    assert val == pytest.approx(ref, rel=1e-9)
    TIMES[(name, "fastcal ece")] = benchmark.stats.stats.min
    benchmark.extra_info.update(rows=len(y), classes=P.shape[1], ece=val, ref=ref,
                                elements_per_s=P.size / benchmark.stats.stats.min)


def test_torchmetrics_multiclass_calibration_error(benchmark, dataset):
    tmc = pytest.importorskip(
        "torchmetrics.functional.classification",
        reason="torchmetrics not installed (pip install -e '.[bench]')")
    import torch

    name, y, P, ref = dataset
    tp, ty = torch.from_numpy(P), torch.from_numpy(y)
    k = P.shape[1]
    val = benchmark.pedantic(
        lambda: float(tmc.multiclass_calibration_error(tp, ty, num_classes=k, n_bins=N_BINS,
                                                       norm="l1")),
        rounds=2, iterations=1, warmup_rounds=1)
    drift = abs(val - ref) / ref
    # torchmetrics casts confidences to float32 and sums each bin with a float32
    # scatter_add_: with ~1e6 rows per bin the sums drift (2.3e-3 relative at
    # N = 1e7 in our runs). Held to 1e-2 (same quantity), the drift is recorded.
    assert drift < 1e-2
    TIMES[(name, "torchmetrics")] = benchmark.stats.stats.min
    benchmark.extra_info.update(rows=len(y), classes=k, ece=val, ref=ref, relative_drift=drift)
    print(f"\n{name}: torchmetrics ECE {val!r} vs float64 reference {ref!r}: "
          f"relative drift {drift:.2e}")


def test_ratio_summary():
    """Print fastcal's speed-up over torchmetrics per shape (measured above, same run)."""
    lines = []
    for name in SHAPES:
        a, b = TIMES.get((name, "fastcal")), TIMES.get((name, "torchmetrics"))
        c = TIMES.get((name, "fastcal ece"))
        if a is None or b is None:
            continue
        line = (f"{name}: fastcal full report {a:.3f} s (ratio {b / a:.1f}x), torchmetrics ECE "
                f"{b:.3f} s")
        if c is not None:
            line += f", fastcal ECE alone {c:.3f} s (ratio {b / c:.1f}x)"
        lines.append(line)
    if not lines:
        pytest.skip("nothing to compare (torchmetrics missing or benchmarks deselected)")
    print("\n" + "\n".join(lines) + f"\n(measured {time.strftime('%Y-%m-%d %H:%M')}; shared "
          "machine, noisy)")

"""Where a row's nanoseconds go in the binary fill and the K-class row (one thread).

Prints ns/row per stage, each stage timed as a loop of its own over the same
blocks the fill uses (so a figure is that stage's cost with the others
absent), then the whole kernels::

    python benchmarks/kernel_profile.py [n_rows] [--bins N] [--rounds R]

float32 p, uint8 y (``fastcal.simulate``-like: y ~ Bernoulli(p)), ``n_bins``
uniform bins (default 10, the reports' default), one thread, CPU time of
the calling thread (``time.thread_time``: the machine is shared, and a
descheduled thread's wall time says nothing about the kernel), minimum and
median over ``rounds`` runs (default 7). The K-class rows: float32 Dirichlet rows of K = 10,
100 and 1000 classes, n_rows // K rows each.

Stages of the binary fill (``fastcal/_kernels/binary.py``):

- ``read``: sum of p and y, the memory floor of one thread;
- ``bins``: the bin index of each row (``_bins_uniform``), ``bins (search)``
  the same by binary search over the stored edges;
- ``logs``: log q and log(1 - q) (``_logs``); ``bins + logs`` the fused loop;
- ``terms``: per-row terms and the global sums (``_terms``), after bins + logs;
- ``scatter``: the four updates per row into the interleaved copies, given
  the block's terms (``_scatter``);
- ``fill``: ``fill_range`` (the report with ``ace=False``), ``fill + buckets``
  ``fill_range_fine`` with ACE's value buckets (the default report's pass);
- ``ACE pass 2``: the gather of the rows of the buckets that hold an
  equal-mass boundary (``gather_buckets``), as the default report runs it.
"""

import statistics
import sys
import time

import numpy as np

from fastcal._kernels import _config
from fastcal._kernels import binary as kb
from fastcal._kernels import equal_mass as kem
from fastcal._kernels import multiclass as km
from fastcal.accumulators import equal_mass as em
from fastcal.backends import cpu
from fastcal.inputs.binning import uniform_edges
from fastcal.jit import njit

BLOCK = _config.BLOCK


def _arg(name, default):
    return type(default)(float(sys.argv[sys.argv.index(name) + 1])) if name in sys.argv else default


@njit(nogil=True, fastmath=True)
def _read(p, y):
    s = 0.0
    t = 0
    for i in range(p.shape[0]):
        s += p[i]
    for i in range(y.shape[0]):
        t += y[i]
    return s + t


@njit(nogil=True)
def _stage_bins(p, nb, search, edges):
    bi = np.empty(BLOCK, np.int64)
    acc = 0
    for s in range(0, p.shape[0], BLOCK):
        m = min(BLOCK, p.shape[0] - s)
        pb = p[s:s + m]
        if search:
            kb._bins_search(pb, edges, nb, True, bi)
        else:
            kb._bins_uniform(pb, edges, nb, True, bi)
        acc += bi[0]
    return acc


@njit(nogil=True)
def _stage_logs(p):
    lp = np.empty(BLOCK, np.float64)
    lq = np.empty(BLOCK, np.float64)
    acc = 0.0
    for s in range(0, p.shape[0], BLOCK):
        m = min(BLOCK, p.shape[0] - s)
        kb._logs(p[s:s + m], 0.0, 1.0, lp, lq)
        acc += lp[0]
    return acc


@njit(nogil=True)
def _stage_bins_logs(p, nb):
    bi, _inc, _pv, _ev, _vv, lpv, lqv = kb.block_scratch()
    acc = 0.0
    for s in range(0, p.shape[0], BLOCK):
        m = min(BLOCK, p.shape[0] - s)
        kb._bins_logs_uniform(p[s:s + m], nb, True, 0.0, 1.0, bi, lpv, lqv)
        acc += lpv[0]
    return acc


@njit(nogil=True)
def _stage_terms(p, y, nb, tot):
    bi, inc, pv, ev, vv, lpv, lqv = kb.block_scratch()
    for s in range(0, p.shape[0], BLOCK):
        m = min(BLOCK, p.shape[0] - s)
        pb = p[s:s + m]
        kb._bins_logs_uniform(pb, nb, True, 0.0, 1.0, bi, lpv, lqv)
        kb._terms(pb, y[s:s + m], nb, 0.0, 1.0, True, bi, lpv, lqv, inc, pv, ev, vv, tot)
    return tot[0]


@njit(nogil=True)
def _prepare_block(p, y, nb):
    """One block's bins and terms, as stage 3 receives them."""
    bi, inc, pv, ev, vv, lpv, lqv = kb.block_scratch()
    tot = np.zeros(kb.N_TOTALS)
    m = min(BLOCK, p.shape[0])
    kb._bins_logs_uniform(p[:m], nb, True, 0.0, 1.0, bi, lpv, lqv)
    kb._terms(p[:m], y[:m], nb, 0.0, 1.0, True, bi, lpv, lqv, inc, pv, ev, vv, tot)
    return bi, inc, pv, ev, vv


@njit(nogil=True)
def _stage_scatter(n, nb, bi, inc, pv, ev, vv):
    loc_i, loc_p, loc_e, loc_v = kb.copies_scratch(nb)
    for _ in range(0, n, BLOCK):
        kb._scatter(BLOCK, bi, inc, pv, ev, vv, loc_i, loc_p, loc_e, loc_v)
    return loc_p[0]


def _best(call, rounds):
    call()
    times = []
    for _ in range(rounds):
        t0 = time.thread_time()
        call()
        times.append(time.thread_time() - t0)
    return min(times), statistics.median(times)


def _binary_stages(n, nb, rounds):
    rng = np.random.default_rng(0)
    p = rng.random(n).astype(np.float32)
    y = (rng.random(n) < p).astype(np.uint8)
    edges = uniform_edges(nb, np.float32)
    n_fine = em.fine_buckets_for(nb, n)
    blk = _prepare_block(p, y, nb)
    stages = {
        "read (p and y)": lambda: _read(p, y),
        "bins": lambda: _stage_bins(p, nb, False, edges),
        "bins (search)": lambda: _stage_bins(p, nb, True, edges),
        "logs": lambda: _stage_logs(p),
        "bins + logs": lambda: _stage_bins_logs(p, nb),
        "bins + logs + terms": lambda: _stage_terms(p, y, nb, np.zeros(kb.N_TOTALS)),
        "scatter (from one block's terms)": lambda: _stage_scatter(n, nb, *blk),
    }

    def fill(fine):
        state = kb.new_state(nb)
        fc = np.zeros((n_fine + 1 if fine else 0, kb.N_COUNTS), np.int64)
        fp = np.zeros(n_fine + 1 if fine else 0)
        kb.fill_range_fine(p, y, 0, n, edges, True, True, False, 0.0, True, *state, fc, fp)
        return fc, fp

    stages["fill (ace=False)"] = lambda: fill(False)
    stages[f"fill + {n_fine} value buckets"] = lambda: fill(True)
    fc, fp = fill(True)
    parts = em.ArrayParts(y, p, 1)
    counts = np.zeros((nb, kb.N_COUNTS), np.int64)
    sums = np.zeros((nb, kb.N_SUMS))
    cand = np.empty(n_fine, np.int64)
    below = np.empty(n_fine, np.int64)
    n_cand = kem.bucket_groups(fc, fp, nb, counts, sums, cand, below)
    slot = np.full(n_fine, -1, np.int64)
    slot[cand[:n_cand]] = np.arange(n_cand)
    cap_start = np.concatenate([[0], np.cumsum(fc[cand[:n_cand], 0])]).astype(np.int64)
    stages["ACE pass 2 (gather)"] = lambda: em._gather(y, p, False, slot, cap_start)
    stages["ACE (bucket_groups + gather + rank)"] = lambda: em.light_groups(
        fc, fp, nb, parts, False)
    print(f"binary fill, {n:.0e} rows, float32 p, uint8 y, {nb} bins, one thread")
    print(f"{'stage':<40} {'ns/row min':>10} {'median':>8}")
    for name, call in stages.items():
        lo, med = _best(call, rounds)
        print(f"{name:<40} {lo / n * 1e9:>10.2f} {med / n * 1e9:>8.2f}")


def _kclass_stages(n, nb, rounds):
    rng = np.random.default_rng(1)
    edges = uniform_edges(nb, np.float32)
    print(f"\nK-class fill, float32 rows, int64 labels, {nb} bins, one thread "
          "(ns per row, and per value)")
    print(f"{'K':>5} {'stage':<34} {'ns/row':>9} {'ns/value':>9}")
    for k in (10, 100, 1000):
        rows = max(n // k, 1000)
        P = rng.dirichlet(np.ones(k), rows).astype(np.float32)
        yk = rng.integers(0, k, rows)
        for name, call in _kclass_calls(P, yk, edges).items():
            lo, _ = _best(call, rounds)
            print(f"{k:>5} {name:<34} {lo / rows * 1e9:>9.1f} {lo / rows / k * 1e9:>9.2f}")


def _kclass_calls(P, yk, edges):
    rows, k = P.shape
    nb = edges.shape[0] - 1
    fill_range = km.fill_rows if k >= km.ROWWISE_K else km.fill_range

    def fill(classwise, with_logs):
        state = km.new_state(nb, k, classwise)
        fill_range(P, yk, 0, rows, edges, True, True, 0.0, False, False, _config.SUM_TOL,
                   classwise, *state, *km.NO_RANK, with_logs)

    return {
        "read (P)": lambda: _read(P.reshape(-1), yk),
        "top-label, no logs": lambda: fill(False, False),
        "top-label + logs (ECD, NLL)": lambda: fill(False, True),
        "+ class-wise bins (default fill)": lambda: fill(True, True),
        "confidence (ACE's ranked pair)": lambda: cpu.ranking_pair(yk, P, kind="multiclass"),
    }


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    args = [a for a in args if sys.argv[sys.argv.index(a) - 1] not in ("--bins", "--rounds")]
    n = int(float(args[0])) if args else 10_000_000
    nb = _arg("--bins", 10)
    rounds = _arg("--rounds", 7)
    _binary_stages(n, nb, rounds)
    _kclass_stages(n, nb, rounds)


if __name__ == "__main__":
    main()

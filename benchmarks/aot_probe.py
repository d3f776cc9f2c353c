"""Issue 39's untried candidate, measured: the binary fill compiled ahead of time.

``numba.pycc`` compiles ``binary.fill_range_fine`` (float32 probabilities, uint8
labels) into an extension module, once for each of two baseline CPUs (``x86-64-v3``,
AVX2, what a wheel for any recent x86-64 machine could carry; ``x86-64-v4``, AVX-512)
and once for this machine's CPU, in a temporary directory. Then, against the JIT kernel of this checkout:

- the build time of each module;
- ns a row on 1e7 rows, one thread, and whether the state is the same to the bit;
- ns a row with the rows split over two Python threads (a JIT kernel compiled
  ``nogil`` runs them at once; an exported AOT function holds the GIL);
- a whole process that fills 10,000 rows with the AOT module (NumPy, the module,
  no Numba), against a later process's first ``calibration_report(ace=False)``
  of the same rows (kernels from the cache), medians of ``--runs`` processes.

Nothing of it is in the package: it measures a design (see the kernel notes,
"An ahead-of-time fill, measured"). ``numba.pycc`` needs a C compiler; without
one the script says so and stops::

    python benchmarks/aot_probe.py [--runs 7]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import numpy as np

ROWS = 10**7
SMALL = 10_000
N_BINS = 10

BUILD = textwrap.dedent("""
    import sys, time
    t = time.perf_counter()
    from numba import types as T
    from numba.pycc import CC
    from fastcal._kernels import binary as kb
    name, cpu, out = sys.argv[1:4]
    cc = CC(name)
    cc.output_dir, cc.target_cpu, cc.verbose = out, cpu, False
    ro = lambda dt: T.Array(dt, 1, "C", readonly=True)
    a = lambda dt, nd: T.Array(dt, nd, "C")
    sig = T.void(ro(T.float32), ro(T.uint8), T.int64, T.int64, a(T.float64, 1), T.boolean,
                 T.boolean, T.boolean, T.float64, T.boolean, a(T.int64, 2), a(T.float64, 2),
                 a(T.float64, 1), a(T.int64, 1), a(T.int64, 2), a(T.float64, 1))
    cc.export("fill_range_fine", sig)(kb.fill_range_fine.py_func)
    cc.compile()
    print(time.perf_counter() - t)
""")

# A process that fills SMALL rows with the AOT module: NumPy and the module only.
AOT_PROCESS = textwrap.dedent(f"""
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import {{name}} as aot
    rng = np.random.default_rng(0)
    p = rng.random({SMALL}, dtype=np.float32)
    y = (rng.random({SMALL}) < p).astype(np.uint8)
    p.flags.writeable = y.flags.writeable = False
    edges = np.arange({N_BINS + 1}, dtype=np.float64) / {N_BINS}
    state = (np.zeros(({N_BINS + 1}, 3), np.int64), np.zeros(({N_BINS + 1}, 3)), np.zeros(7),
             np.zeros(10, np.int64))
    aot.fill_range_fine(p, y, 0, {SMALL}, edges, True, False, False, 0.0, True, *state,
                        np.zeros((0, 3), np.int64), np.zeros(0))
    assert "numba" not in sys.modules
""")

JIT_PROCESS = textwrap.dedent(f"""
    import numpy as np
    import fastcal
    rng = np.random.default_rng(0)
    p = rng.random({SMALL}, dtype=np.float32)
    y = (rng.random({SMALL}) < p).astype(np.uint8)
    fastcal.calibration_report(y, p, n_bins={N_BINS}, ace=False)
""")


def build(out, name, cpu):
    """Seconds to build module ``name`` for ``cpu`` into ``out`` (None: no C compiler)."""
    run = subprocess.run([sys.executable, "-c", BUILD, name, cpu, out],
                         capture_output=True, text=True)
    if run.returncode:
        if "without the compiler" in run.stderr:
            return None
        raise RuntimeError(run.stderr.strip().splitlines()[-1])
    return float(run.stdout.strip().splitlines()[-1])


def fill(kernel, p, y, edges, lo, hi, state=None):
    from fastcal._kernels import binary as kb

    state = kb.new_state(N_BINS) if state is None else state
    kernel(p, y, lo, hi, edges, True, False, False, 0.0, True, *state,
           np.zeros((0, 3), np.int64), np.zeros(0))
    return state


def ns_a_row(kernel, p, y, edges, repeat=5):
    n = p.shape[0]
    best = best2 = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fill(kernel, p, y, edges, 0, n)
        best = min(best, time.perf_counter() - t)
        halves = [threading.Thread(target=fill, args=(kernel, p, y, edges, a, b))
                  for a, b in ((0, n // 2), (n // 2, n))]
        t = time.perf_counter()
        for h in halves:
            h.start()
        for h in halves:
            h.join()
        best2 = min(best2, time.perf_counter() - t)
    return 1e9 * best / n, 1e9 * best2 / n


def process_seconds(argv, runs):
    times = []
    for _ in range(runs + 1):  # the first run warms the caches, not counted
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    import importlib

    from fastcal._kernels import binary as kb
    from fastcal.inputs.binning import uniform_edges

    rng = np.random.default_rng(0)
    p = rng.random(ROWS, dtype=np.float32)
    y = (rng.random(ROWS) < p).astype(np.uint8)
    p.flags.writeable = y.flags.writeable = False
    edges = uniform_edges(N_BINS, np.float32)
    with tempfile.TemporaryDirectory() as out:
        built = {}
        for name, cpu in (("aot_v3", "x86-64-v3"), ("aot_v4", "x86-64-v4"), ("aot_host", "host")):
            seconds = build(out, name, cpu)
            if seconds is None:
                print("numba.pycc needs a C compiler, and none was found: nothing measured")
                return
            built[name] = seconds
        sys.path.insert(0, out)
        jit = fill(kb.fill_range_fine, p, y, edges, 0, ROWS)
        print(f"binary fill, {ROWS:,} float32 rows, {N_BINS} bins; ns a row (best of 5)")
        print(f"{'kernel':<26} {'build s':>8} {'1 thread':>9} {'2 threads':>10} same bits")
        one, two = ns_a_row(kb.fill_range_fine, p, y, edges)
        print(f"{'JIT (nogil), this checkout':<26} {'':>8} {one:9.2f} {two:10.2f}")
        for name, seconds in built.items():
            kernel = importlib.import_module(name).fill_range_fine
            same = all(np.array_equal(a, b) for a, b in
                       zip(fill(kernel, p, y, edges, 0, ROWS), jit))
            one, two = ns_a_row(kernel, p, y, edges)
            print(f"{'AOT ' + name:<26} {seconds:8.1f} {one:9.2f} {two:10.2f} {same}")
        aot = process_seconds([sys.executable, "-c", AOT_PROCESS.replace("{name}", "aot_host"),
                               out], args.runs)
        jit_s = process_seconds([sys.executable, "-c", JIT_PROCESS], args.runs)
        print(f"whole process, {SMALL:,} rows, median of {args.runs}: AOT fill {aot:.3f} s, "
              f"later process's first report (JIT, cached) {jit_s:.3f} s; "
              f"`python -c 'import numpy'` "
              f"{process_seconds([sys.executable, '-c', 'import numpy'], args.runs):.3f} s")


if __name__ == "__main__":
    main()

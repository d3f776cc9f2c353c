"""GPU kernels under Numba's CUDA simulator, compared with the CPU kernels.

The cases that run the same through both backends (reports, equal-mass
ranking, bootstrap, Gaussian NEES, bad input) are tests/backends/test_backends.py's
table; this file keeps what only the GPU has: the fills against the CPU
kernels launch by launch (every edge, warp-private bins, the chunk pipeline,
staging buffers, warp sums) and the GPU's files, Dask and tests of calibration.

Why a subprocess: ``NUMBA_ENABLE_CUDASIM`` is read once, when numba reads its
configuration, and the first ``import numba.cuda`` then binds either the
simulator or the real driver for the whole process. Flipping it inside the
main pytest process would turn ``numba.cuda`` into the simulator for every
test collected after this file (the real-GPU tests included) or fail if
something imported ``numba.cuda`` first. So in the main process this file is
one test that runs itself under ``python -m pytest`` with the variable set;
there (``NUMBA_ENABLE_CUDASIM=1``) the cases below run, one test each.
Run them directly with ``NUMBA_ENABLE_CUDASIM=1 pytest tests/backends/test_cuda_sim.py``.
"""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from tests import subsuites

SIM = subsuites.SIM
# tests/backends/test_cuda_gpu.py runs the same cases on a real GPU with FASTCAL_CUDA_CASES=1
CASES = subsuites.CASES


suite_run = subsuites.simulator_run  # started early, beside the rest (tests/subsuites.py)


def test_simulator_cases_in_subprocess():
    if CASES:
        pytest.skip("already running the cases (simulator or real GPU)")
    subsuites.check_file(__file__, *suite_run())


@pytest.mark.skipif(CASES, reason="a main-process test (it starts its own Python)")
def test_import_fastcal_does_not_import_numba_cuda():
    code = ("import sys, numpy as np, fastcal, fastcal.cuda as fc; "
            "assert not fc.is_device_array(np.zeros(3)); "
            "fastcal.calibration_report(np.array([0, 1]), np.array([0.2, 0.9])); "
            "print(any(m == 'numba.cuda' or m.startswith('numba.cuda.') or m.startswith('numba_cuda')"
            " for m in sys.modules))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


if SIM:
    # Simulated threads are Python threads that meet at every syncthreads (and the
    # warp exchanges, which the simulator builds from it): a short switch interval
    # lets them meet in microseconds rather than the default 5 ms.
    sys.setswitchinterval(1e-5)

if CASES:
    from numba import cuda

    from fastcal._kernels import binary as kb
    from fastcal._kernels import gaussian as kg
    from fastcal._kernels import logits as kl
    from fastcal._kernels import multiclass as km
    from fastcal.accumulators import checks as ck
    from fastcal.accumulators.calibration import CalibrationAccumulator
    from fastcal.backends import cpu as mc
    from fastcal.backends import cuda as fc
    from fastcal.inputs.binning import kernel_edges
    from tests.backends.test_backends import _dtype_inputs, _same_acc, _spd, _tracks

    def _cpu_binary(y, p, edges, uniform, right, eps=0.0, with_logs=True):
        state = kb.new_state(edges.shape[0] - 1)
        kb.fill_range(p, y, 0, p.shape[0], edges, uniform, right, True, eps, with_logs, *state)
        return mc.named(mc.BINARY, state)

    def _same(gpu, cpu, rtol=1e-12):
        """The same named arrays (the binary kernels' tuples named as the backends do)."""
        if not isinstance(cpu, dict):
            cpu = mc.named(mc.BINARY, cpu)
        assert list(gpu) == list(cpu)
        for name in cpu:
            g, c = gpu[name], cpu[name]
            assert g.shape == c.shape and g.dtype == c.dtype
            if c.dtype.kind in "iu":
                np.testing.assert_array_equal(g, c)
            else:
                fin = np.abs(c[np.isfinite(c)])
                scale = fin.max() if fin.size else 0.0
                np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol * scale)

    def _edge_values(n_bins, dtype):
        """Every edge of n_bins bins in dtype, its neighbours, and 0 and 1."""
        e = kernel_edges(n_bins, np.dtype(dtype).str).astype(dtype)
        vals = np.concatenate([e, np.nextafter(e, dtype(-1)), np.nextafter(e, dtype(2))])
        return vals[(vals >= 0) & (vals <= 1)].astype(dtype)

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    @pytest.mark.parametrize("right", [False, True])
    def test_binary_every_edge_matches_cpu(dtype, right):
        # n_bins 1..20 in one launch each: every stored edge and its two neighbours
        for n_bins in range(1, 21):
            p = _edge_values(n_bins, dtype)
            y = (np.arange(p.shape[0]) % 2).astype(np.int8)
            edges = kernel_edges(n_bins, np.dtype(dtype).str)
            gpu = fc.fill_binary(y, p, edges, True, right, False, 0.0, True)
            _same(gpu, _cpu_binary(y, p, edges, True, right))

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_binary_random_matches_cpu_with_eps_and_edges(dtype):
        rng = np.random.default_rng(1)
        p = rng.random(700).astype(dtype)
        p[:10] = [0, 1, 0.5, 0.1, 0.9, 0, 1, 0.25, 0.75, 1e-30]
        y = (rng.random(700) < p).astype(np.float64)
        for edges, uniform in ((kernel_edges(15, np.dtype(dtype).str), True),
                               (np.array([0.0, 0.05, 0.3, 0.31, 0.8, 1.0]), False)):
            for eps in (0.0, 1e-6):
                for right in (False, True):
                    gpu = fc.fill_binary(y, p, edges, uniform, right, False, eps, True)
                    _same(gpu, _cpu_binary(y, p, edges, uniform, right, eps))
        gpu = fc.fill_binary(y, p, edges, False, False, False, 0.0, False)
        _same(gpu, _cpu_binary(y, p, edges, False, False, 0.0, False))

    def test_binary_bad_input_same_counts_first_index_and_message():
        rng = np.random.default_rng(2)
        p = rng.random(300)
        y = (rng.random(300) < p).astype(np.float64)
        p[[40, 7, 250]] = np.nan
        p[[90, 12]] = [1.5, -np.inf]
        y[[33, 260]] = [2.0, np.nan]
        edges = kernel_edges(10, "<f8")
        gpu = fc.fill_binary(y, p, edges, True, False, True, 0.0, True)
        cpu = _cpu_binary(y, p, edges, True, False)
        _same(gpu, cpu)
        assert list(gpu["checks"]) == [3, 2, 1, 1, 4, 7, 12, 33, 260, 7]
        msgs = []
        for checks in (gpu["checks"], cpu["checks"]):
            with pytest.raises(ValueError) as err:
                ck.raise_for(ck.BINARY, checks, "raise", 1000)
            msgs.append(str(err.value))
        assert msgs[0] == msgs[1] and "first at index 1007" in msgs[0]

    def test_binary_device_input_host_chunks_and_merge_with_cpu_state():
        rng = np.random.default_rng(3)
        p = rng.random(500).astype(np.float32)
        y = (rng.random(500) < p).astype(np.int64)
        p[321] = np.nan
        edges = kernel_edges(12, "<f4")
        d_p, d_y = cuda.to_device(p), cuda.to_device(y)
        assert fc.is_device_array(d_p) and not fc.is_device_array(p)
        on_dev = fc.fill_binary(d_y, d_p, edges, True, True, True, 0.0, True)
        chunked = fc.fill_binary(y, p, edges, True, True, True, 0.0, True, chunk_rows=128)
        cpu = _cpu_binary(y, p, edges, True, True)
        _same(on_dev, cpu)
        _same(chunked, cpu)
        assert chunked["checks"][kb.N_CHECK_KINDS + kb.CHECK_NAN_P] == 321
        # GPU state of the first half + CPU state of the second = CPU state of all
        half = fc.fill_binary(y[:250], p[:250], edges, True, True, True, 0.0, True)
        rest = _cpu_binary(y[250:], p[250:], edges, True, True)
        acc_g = CalibrationAccumulator(n_bins=12, closed="right", nan_policy="omit")
        acc_g.counts += half["counts"] + rest["counts"]
        acc_g.sums += half["sums"] + rest["sums"]
        acc_g.totals += half["totals"] + rest["totals"]
        acc_c = CalibrationAccumulator(n_bins=12, closed="right", nan_policy="omit")
        acc_c.update(y, p)
        a, b = acc_g.report(), acc_c.report()
        for name in ("ece", "ecd", "brier", "nll", "mce"):
            assert np.isclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-15), name

    def test_binary_logits_match_cpu():
        rng = np.random.default_rng(4)
        z = rng.normal(scale=4, size=400)
        z[:6] = [0.0, 40.0, -40.0, 800.0, -800.0, 1e-9]
        z[50] = np.nan
        z[51] = np.inf
        y = (rng.random(400) < 0.5).astype(np.int8)
        y[60] = 5
        kinds = np.array([0, 1, 2, 3, 4], np.int64)
        for n_bins in (1, 2, 7, 10, 20):
            edges = kernel_edges(n_bins, "<f8")
            for right in (False, True):
                for eps in (0.0, 1e-7):
                    cpu = kb.new_state(n_bins)
                    kl.fill_binary_logits_range(z, y, 0, 400, edges, True, right, eps, *cpu, kinds)
                    gpu = fc.fill_binary_logits(y, z, edges, True, right, eps)
                    _same(gpu, cpu)

    def test_binary_logits_with_eps_match_cpu_for_large_logits():
        import fastcal

        # p just below 1 - eps is not clipped: its logs must come from z on both
        # devices (log(1 - p) turned a last-bit difference of p into 1e-10 of the ECD)
        rng = np.random.default_rng(13)
        z = rng.uniform(-40, 40, 600)
        z[300:] = rng.choice([-1.0, 1.0], 300) * rng.uniform(14, 20.7, 300)  # p near eps, 1 - eps
        z[:8] = [1e154, -1.5e154, 1e300, -np.finfo(float).max, 20.7, -20.7, 36.0, -36.0]
        y = (rng.random(600) < 0.5).astype(np.uint8)
        kinds = np.array([0, 1, 2, 3, 4], np.int64)
        edges = kernel_edges(10, "<f8")
        for eps in (0.0, 1e-9, 1e-7, 1e-4):
            cpu = kb.new_state(10)
            kl.fill_binary_logits_range(z, y, 0, 600, edges, True, False, eps, *cpu, kinds)
            # squared ECD and NLL terms of 1e300 are inf; the simulator's threads do not
            # see this thread's np.errstate, so the (numpy scalar) warning is filtered
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
                gpu = fc.fill_binary_logits(y, z, edges, True, False, eps)
            _same(gpu, cpu)
            ref = fastcal.calibration_report(y[8:], z[8:], logits=True, eps=eps)
            got = fastcal.calibration_report(cuda.to_device(y[8:]), cuda.to_device(z[8:]),
                                             logits=True, eps=eps)
            for name in ("ecd", "ecd_var", "nll", "brier", "ece"):
                np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12,
                                           atol=0, err_msg=f"{name}, eps={eps}")

    @pytest.mark.parametrize("logits", [False, True])
    def test_multiclass_matches_cpu(logits):
        rng = np.random.default_rng(5)
        n, K = 160, 4
        Z = rng.normal(scale=2, size=(n, K))
        P = np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True)
        y = rng.integers(0, K, n)
        X = Z if logits else P.astype(np.float32)
        X[9, 2] = np.nan
        X[30, 1] = np.inf
        y[12] = K
        if not logits:
            X[40, 0] = -0.2
            X[41] = [0.5, 0.5, 0.5, 0.5]
            X[42] = [0.25, 0.25, 0.25, 0.25]  # on the edge 0.25 for 4 or 8 bins
        else:
            X[43, 3] = -np.inf
        for n_bins in (1, 4, 15):
            dt = "<f8" if logits else "<f4"
            for edges, uniform in ((kernel_edges(n_bins, dt), True),
                                   (np.linspace(0, 1, n_bins + 1) ** 2, False)):
                for right, eps in ((False, 0.0), (True, 1e-4)):
                    cpu = mc.fill_multiclass(y, X, edges, uniform, right, eps, logits, False, True, 1)
                    gpu = fc.fill_multiclass(y, X, edges, uniform, right, eps, logits, False, True)
                    _same(gpu, cpu)
        cpu = mc.fill_multiclass(y, X, edges, uniform, right, 0.0, logits, True, False, 1, False)
        gpu = fc.fill_multiclass(y, X, edges, uniform, right, 0.0, logits, True, False, False)
        _same(gpu, cpu)
        assert gpu["checks"][km.N_CHECK_KINDS + km.CHECK_NAN_P] == 9

    def test_multiclass_global_classwise_state_and_device_input():
        rng = np.random.default_rng(6)
        n, K = 64, 40  # 3 * K * n_bins * 8 bytes > 16 KB: class-wise state in global memory
        P = rng.dirichlet(np.ones(K), size=n)
        y = rng.integers(0, K, n)
        edges = kernel_edges(20, "<f8")
        cpu = mc.fill_multiclass(y, P, edges, True, False, 0.0, False, False, True, 1)
        gpu = fc.fill_multiclass(cuda.to_device(y), cuda.to_device(P), edges, True, False, 0.0,
                                 False, False, True)
        _same(gpu, cpu)

    def test_warp_group_sums_in_lane_order():
        from fastcal._kernels import _cuda as kc

        @cuda.jit
        def sums(keys, vals, grps, out):
            tid = cuda.threadIdx.x
            key = keys[tid]
            grp = kc.warp_match(key)
            a, b, c = kc.group_sum(grp, tid % 32, 3, vals[tid], 2.0 * vals[tid], 1.0)
            grps[tid] = grp
            out[tid, 0] = a
            out[tid, 1] = b
            out[tid, 2] = c

        # warp 0: groups of several sizes and a lone -1; warp 1: one key (the butterfly)
        keys = np.array([j % 5 for j in range(32)] + [7] * 32, np.int64)
        keys[[3, 8, 13]] = 9
        keys[31] = -1
        vals = np.arange(64, dtype=np.float64) + 0.25
        vals[[3, 8, 13]] = [1e16, 1.0, -1e16]  # in lane order: (1e16 + 1) - 1e16 == 0
        d_grps = cuda.to_device(np.zeros(64, np.int64))
        d_out = cuda.to_device(np.zeros((64, 3)))
        sums[1, 64](cuda.to_device(keys), cuda.to_device(vals), d_grps, d_out)
        grps, out = d_grps.copy_to_host(), d_out.copy_to_host()
        for t in range(64):
            w = t - t % 32
            same = [j for j in range(w, w + 32) if keys[j] == keys[t]]
            assert grps[t] == sum(1 << (j - w) for j in same)
            if w == 0:  # pulled lane by lane, in increasing order
                want = 0.0
                for j in same:
                    want += vals[j]
            else:
                want = vals[same].sum()  # exact: quarter-integers far below 2**53
            assert out[t, 0] == want and out[t, 1] == 2.0 * want and out[t, 2] == len(same)
        assert out[3, 0] == 0.0

    @pytest.mark.parametrize("n_bins", [48, 300, 1100, 3000])
    def test_binary_many_bins_warp_private_matches_cpu(n_bins, monkeypatch):
        # 48 and 300: per-warp bins in shared memory; 1100 and 3000: in global rows
        from fastcal._kernels import _cuda as kc

        rng = np.random.default_rng(8)
        n = 130
        p = rng.random(n)
        p[:4] = [0.0, 1.0, 0.5, 17 / n_bins]
        p[5:40] = 0.3  # one bin shared by most lanes of a warp
        y = (rng.random(n) < p).astype(np.uint8)
        p[9] = np.nan
        plan = kc.plan_launch(n, n_bins, 15)
        assert plan.warp_bins and plan.bins_global == (n_bins > 1000)
        if n_bins == 300:  # the blocks' partial rows added on the GPU (_cuda.sum_rows)
            monkeypatch.setattr(fc, "DEVICE_SUM_MIN", 0)
        for dtype in (np.float32, np.float64):
            edges = kernel_edges(n_bins, np.dtype(dtype).str)
            x = p.astype(dtype)
            gpu = fc.fill_binary(y, x, edges, True, n_bins % 2 == 0, False, 0.0, True)
            _same(gpu, _cpu_binary(y, x, edges, True, n_bins % 2 == 0))
        # random logits: one whose sigmoid is within an ulp of an edge may bin
        # differently on the GPU (libdevice's log, see docs/guide/gpu.md)
        z = rng.normal(scale=3, size=n)
        cpu = kb.new_state(n_bins)
        kl.fill_binary_logits_range(z, y, 0, n, kernel_edges(n_bins, "<f8"), True, False, 0.0,
                                    *cpu, np.arange(5, dtype=np.int64))
        _same(fc.fill_binary_logits(y, z, kernel_edges(n_bins, "<f8"), True, False, 0.0), cpu)
        P = rng.dirichlet(np.ones(3), size=n)
        yk = rng.integers(0, 3, n)
        edges = kernel_edges(n_bins, "<f8")
        _same(fc.fill_multiclass(yk, P, edges, True, False, 0.0, False, False, True),
              mc.fill_multiclass(yk, P, edges, True, False, 0.0, False, False, True, 1))

    def test_host_chunks_pipeline_two_streams_in_order(monkeypatch):
        # host rows go through pinned buffers on two alternating streams: results are
        # collected in chunk order, so first indices and sums match one launch
        rng = np.random.default_rng(9)
        # (each chunk is a simulated launch: few rows keep it quick)
        n, K = 100, 3
        P = rng.dirichlet(np.ones(K), size=n).astype(np.float32)
        y = rng.integers(0, K, n)
        y[[83, 96]] = K  # bad labels in the last chunks
        edges = kernel_edges(6, "<f4")
        cpu = mc.fill_multiclass(y, P, edges, True, False, 0.0, False, False, True, 1)
        # 12 bytes a row: 64 bytes a chunk -> 5 rows, 20 chunks
        monkeypatch.setattr(fc, "CHUNK_BYTES", 64)
        got = fc.fill_multiclass(y, P, edges, True, False, 0.0, False, False, True)
        _same(got, cpu)
        assert got["checks"][km.CHECK_BAD_Y] == 2
        assert got["checks"][km.N_CHECK_KINDS + km.CHECK_BAD_Y] == 83
        monkeypatch.undo()
        _same(fc.fill_multiclass(y, P, edges, True, False, 0.0, False, False, True,
                                 chunk_rows=7), cpu)
        # a device label column with host probabilities: only the host column is staged
        p = P[:, 0].astype(np.float64)
        yb = (y == 0).astype(np.uint8)
        edges = kernel_edges(9, "<f8")
        _same(fc.fill_binary(cuda.to_device(yb), p, edges, True, True, False, 0.0, True,
                             chunk_rows=32), _cpu_binary(yb, p, edges, True, True))

    def test_gaussian_matches_cpu_kernel():
        rng = np.random.default_rng(7)
        d, G, runs = 3, 5, 30
        A = rng.normal(size=(runs * G, d, d))
        C = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(d)
        E = rng.normal(size=(runs * G, d))
        E[17, 1] = np.nan
        C[23, 2, 2] = np.inf
        C[40, 0, 1] += 0.5
        C[61] = -np.eye(d)
        out = fc.fill_gaussian(E, C, G)
        val = np.empty(runs * G)
        st = np.empty(runs * G, np.int8)
        kg.nees_batch(E, C, val, st, 1e-8, 1)
        ok = (st == kg.STATUS_OK).reshape(-1, G)
        np.testing.assert_array_equal(out["count"], ok.sum(axis=0))
        np.testing.assert_allclose(out["nees_sum"],
                                   np.where(ok, val.reshape(-1, G), 0).sum(axis=0), rtol=1e-13)
        np.testing.assert_array_equal(out["n_bad"], (st == kg.STATUS_NAN).reshape(-1, G).sum(0))
        assert out["checks"] == {"nan": (2, 17), "asymmetric": (1, 40), "not_pd": (1, 61)}

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    @pytest.mark.parametrize("G,runs", [(1, 20), (3, 20), (5, 30), (7, 1), (4, 0), (70, 2)])
    def test_gaussian_grid_of_any_size_matches_cpu_kernel(dtype, G, runs):
        # slices x groups rarely fill the last block: threads past them must not write
        rng = np.random.default_rng(G * 100 + runs)
        for d in (1, 2, 3, 4, 5, 6):
            n = G * runs
            C = _spd(rng, n, d, dtype)
            E = rng.normal(size=(n, d)).astype(dtype)
            if n > 5:
                E[n // 2, 0] = np.nan
                C[n - 1, 0, 0] = -1.0
            out = fc.fill_gaussian(E, C, G)
            val = np.empty(n)
            st = np.empty(n, np.int8)
            kg.nees_batch(E.astype(np.float64), C.astype(np.float64), val, st, 1e-8, 1)
            ok = (st == kg.STATUS_OK).reshape(-1, G)
            np.testing.assert_array_equal(out["count"], ok.sum(axis=0))
            np.testing.assert_allclose(out["nees_sum"],
                                       np.where(ok, val.reshape(-1, G), 0).sum(axis=0), rtol=1e-12)
            np.testing.assert_array_equal(out["n_bad"], (st == kg.STATUS_NAN).reshape(-1, G).sum(0))
            bad = (1, n // 2) if n > 5 else (0, -1)
            assert out["checks"]["nan"] == bad
            assert out["checks"]["not_pd"] == ((1, n - 1) if n > 5 else (0, -1))

    # -- GaussianAccumulator of device arrays (more: tests/backends/test_backends.py) ------------

    def test_gaussian_device_fill_merges_with_cpu_and_strided_inputs():
        from fastcal.gaussian import GaussianAccumulator, nees

        rng = np.random.default_rng(23)
        E, C = _tracks(rng, (12, 5), 3, np.float64)
        whole = GaussianAccumulator(3, shape=(5,)).update(E, C)
        a = GaussianAccumulator(3, shape=(5,)).update(cuda.to_device(E[:7]), cuda.to_device(C[:7]))
        b = GaussianAccumulator(3, shape=(5,)).update(E[7:], C[7:])
        _same_acc(a + b, whole)
        a += b
        _same_acc(a, whole)
        # strided device views: 2-D/3-D read in place, others through the host
        # (device arrays take no Ellipsis on a real GPU, only in the simulator)
        Ew = cuda.to_device(np.concatenate([E, E], axis=-1))[:, :, ::2]
        ref = GaussianAccumulator(3, shape=(5,)).update(np.concatenate([E, E], -1)[..., ::2], C)
        _same_acc(GaussianAccumulator(3, shape=(5,)).update(Ew, cuda.to_device(C)), ref)
        E2, C2 = E.reshape(-1, 3), C.reshape(-1, 3, 3)
        ref = GaussianAccumulator(3).update(E2[::2], C2[::2])
        _same_acc(GaussianAccumulator(3).update(cuda.to_device(E2)[::2], cuda.to_device(C2)[::2]),
                  ref)
        # nees stays on the host: one value per vector
        np.testing.assert_array_equal(nees(cuda.to_device(E), cuda.to_device(C)), nees(E, C))
        # no rows: nothing added
        empty = GaussianAccumulator(3, shape=(5,)).update(cuda.to_device(E[:0]),
                                                          cuda.to_device(C[:0]))
        np.testing.assert_array_equal(empty.count, np.zeros(5, np.int64))

    # -- the public entry point: calibration_report(device arrays) --------------------

    def _same_report(got, ref):
        for name in ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll"):
            np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12,
                                       atol=1e-15, err_msg=name)
        np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])

    @pytest.mark.parametrize("kind", ["binary", "logits", "multiclass"])
    def test_gpu_fills_take_values_and_return_the_cpu_names(kind):
        # one interface: a batch and the state's spec in, the layout's named arrays out
        from fastcal import backends
        from fastcal.backends.spec import FillSpec
        from fastcal.inputs.binning import Bins

        rng = np.random.default_rng(14)
        n = 48
        p = rng.random(n)
        y = (rng.random(n) < p).astype(np.uint8)
        if kind == "logits":
            p = np.log(p / (1 - p))
        if kind == "multiclass":
            p = rng.dirichlet(np.ones(3), size=n)
            p[0] = [1 + 2e-7, 0.0, 0.0]  # valid (sum within the tolerance): ranked as 1
            y = rng.integers(0, 3, n)
        spec = FillSpec(kind, Bins(4), computed64=kind != "binary", logits=kind == "logits",
                        n_boot=3, ace_buckets=16, smooth=True, ecce=True)
        host = backends.resolve(y, p, logits=kind == "logits")
        dev = backends.resolve(*_on_gpu(y, p), logits=kind == "logits")
        assert (host.device, dev.device) == ("cpu", "cuda")
        want = {**mc.fill(host, spec)}
        want.update(mc.fill_parts(host, spec, 0, want))
        got = {**fc.fill(dev, spec)}
        got.update(fc.fill_parts(dev, spec, 0, got))
        assert sorted(got) == sorted(want)
        for name in want:
            assert (got[name].shape, got[name].dtype) == (want[name].shape, want[name].dtype)
            np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12,
                                       err_msg=name)
        # the parts of a ranked pair in GPU memory, one by one
        ry, rx = fc.ranking_pair(*_on_gpu(y, p), kind=kind, logits=kind == "logits")
        hy, hx = ry.copy_to_host(), rx.copy_to_host()
        if kind == "multiclass":
            assert hx[0] == 1.0 and mc.ranking_pair(y, p, kind=kind)[1][0] == 1.0
        for fill, args in ((fc.fill_replicates, (5, spec, host.dtype)),
                           (fc.fill_buckets, (spec,)), (fc.fill_grid, (spec,))):
            part = fill(ry, rx, *args)
            ref = getattr(mc, fill.__name__)(hy, hx, *args)
            assert list(part) == list(ref) and part
            for name in ref:
                np.testing.assert_allclose(part[name], ref[name], rtol=1e-12, atol=1e-12)

    def test_ecce_of_device_arrays_equals_cpu():
        import fastcal

        rng = np.random.default_rng(15)
        p = rng.uniform(0.3, 0.3 + 2.0 ** -12, 600)  # crowded buckets: the second pass runs
        y = (rng.random(600) < p).astype(np.uint8)
        ref = fastcal.calibration_report(y, p, metrics=("ecce",))
        got = fastcal.calibration_report(*_on_gpu(y, p), metrics=("ecce",))
        np.testing.assert_allclose([got.ecce, got.ecce_sigma], [ref.ecce, ref.ecce_sigma],
                                   rtol=1e-12)
        assert got.pass_steps == ref.pass_steps and dict(ref.pass_steps)["ecce"] == 1
        np.testing.assert_allclose(fastcal.ecce(*_on_gpu(y, p)), fastcal.ecce(y, p), rtol=1e-12)

    def test_bootstrap_replicates_match_cpu_weights():
        # the same Poisson(1) weights of (seed, global row, replicate): counts exact,
        # any split into chunks (row0) gives the same replicates
        from fastcal._kernels import bootstrap as kboot

        rng = np.random.default_rng(3)
        n, n_boot = 400, 70  # 70: two blocks of replicates, the second part-filled
        p = rng.random(n)
        p[:30] = np.arange(30) % 11 / 10  # values on edges
        p[5] = np.nan  # an omitted row carries no weight
        y = (rng.random(n) < p).astype(np.uint8)
        cases = [(kernel_edges(10, "<f8"), True, False, np.float64),
                 (kernel_edges(10, "<f4"), True, True, np.float32),
                 (np.r_[0.0, np.sort(rng.random(14)), 1.0], False, True, np.float64),
                 (kernel_edges(90, "<f8"), True, False, np.float64)]  # 32 replicates a block
        for edges, uniform, right, dt in cases:
            x = p.astype(dt)
            nb = edges.shape[0] - 1
            counts = np.zeros((n_boot, nb, 3), np.int64)
            sums = np.zeros((n_boot, nb))
            kboot.boot_fill_range(x, y, 1000, edges, uniform, right, 7, 0, n_boot, counts,
                                  sums)
            got = fc.fill_bootstrap(cuda.to_device(y), cuda.to_device(x), 1000, edges,
                                    uniform, right, 7, n_boot)
            np.testing.assert_array_equal(got["boot_counts"], counts)
            np.testing.assert_allclose(got["boot_sums"], sums, rtol=1e-12)
        a = fc.fill_bootstrap(y[:150], x[:150], 1000, edges, True, False, 7, n_boot)
        b = fc.fill_bootstrap(y[150:], x[150:], 1150, edges, True, False, 7, n_boot)
        np.testing.assert_array_equal(a["boot_counts"] + b["boot_counts"], counts)
        assert not fc.bootstrap_fits(95) and fc.bootstrap_fits(94)

    def _on_gpu(*arrays):
        return tuple(cuda.to_device(np.ascontiguousarray(a)) for a in arrays)

    def _same_full_report(got, ref):
        _same_report(got, ref)
        np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
        for name in ref.intervals or {}:
            np.testing.assert_allclose(got.intervals[name], ref.intervals[name], rtol=1e-12,
                                       atol=1e-15, err_msg=name)

    def test_score_file_of_integer_and_float16_columns_on_the_gpu(tmp_path):
        # batches of integer and float16 columns, streamed to the GPU, are read as on
        # the CPU (the arrays: tests/backends/test_backends.py's dtype cases)
        y, p_int, _ = _dtype_inputs()[0]
        p16 = _dtype_inputs()[3][1]
        import pyarrow as pa
        import pyarrow.parquet as pq

        from fastcal.files import score_file

        pq.write_table(pa.table({"p": p_int.astype(np.int32), "h": p16, "y": y}),
                       tmp_path / "d.parquet", row_group_size=150)
        for col in ("p", "h"):
            ref = score_file(tmp_path / "d.parquet", prob=col, label="y", ace=True)
            _same_full_report(score_file(tmp_path / "d.parquet", prob=col, label="y", ace=True,
                                         device="cuda"), ref)

    def test_tests_of_calibration_take_device_arrays():
        import fastcal

        rng = np.random.default_rng(8)
        p = rng.random(200)
        y = (rng.random(200) < p).astype(np.uint8)
        assert fastcal.ecd_test(*_on_gpu(y, p)) == fastcal.ecd_test(y, p)
        assert (fastcal.ece_test(*_on_gpu(y, p), n_resamples=30)
                == fastcal.ece_test(y, p, n_resamples=30))

    def test_staging_buffers_are_per_thread():
        # two fills of host data at once (Dask's threaded workers) must not share
        # the pinned and device buffers their queued copies still read
        import threading

        got = []
        t = threading.Thread(target=lambda: got.append(fc._Staging.buffers(0, 0, np.float64,
                                                                            (8,))))
        mine = fc._Staging.buffers(0, 0, np.float64, (8,))
        t.start()
        t.join()
        assert mine is fc._Staging.buffers(0, 0, np.float64, (8,))  # kept between calls
        assert got[0][0] is not mine[0] and got[0][1] is not mine[1]

    def test_score_file_and_dask_on_the_gpu_equal_cpu(tmp_path):
        da = pytest.importorskip("dask.array")  # the GPU machine's image has no Dask
        import pyarrow as pa
        import pyarrow.parquet as pq

        import fastcal
        from fastcal.distributed import score_dask
        from fastcal.files import score_file

        rng = np.random.default_rng(13)
        p = rng.random(2_000)
        y = (rng.random(2_000) < p).astype(np.uint8)
        pq.write_table(pa.table({"p": p, "y": y}), tmp_path / "f.parquet", row_group_size=300)
        ref = fastcal.calibration_report(y, p)
        _same_report(score_file(tmp_path / "f.parquet", device="cuda", ace=True,
                                chunk_rows=256), ref)
        import dask

        with dask.config.set(scheduler="synchronous"):  # the simulator runs one kernel at a time
            _same_report(score_dask(da.from_array(y, chunks=500), da.from_array(p, chunks=500),
                                    device="cuda", ace=True), ref)

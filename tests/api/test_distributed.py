"""Scoring on Dask: a real LocalCluster (2 worker processes, loopback only), a
multi-file Parquet dataset, results equal to the single-process report."""

import json
import os
import signal
import socket
import time

import numpy as np
import pytest

pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from distributed import Client, LocalCluster, get_task_stream  # noqa: E402
import pandas as pd  # noqa: E402

import fastcal  # noqa: E402
from fastcal import cli  # noqa: E402
from fastcal import distributed as fd  # noqa: E402
from fastcal._kernels import binary as kb  # noqa: E402
from fastcal.accumulators import equal_mass as em  # noqa: E402
from fastcal.files import score_file  # noqa: E402
from tests import naive  # noqa: E402

SCALARS = ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll", "ecd_var")
# (rows, rows per row group, seed) of each file, written by `fastcal simulate`:
# uneven on purpose, one file of a single row
FILES = [(40_000, 3_000, 1), (70_000, 70_000, 2), (1, 1, 3), (30_000, 2_000, 4),
         (60_000, 5_000, 5)]
SIGMA = 0.5


def assert_same(rep, ref, *, rtol=1e-12, atol=1e-13):
    """Raw sums equal to rtol; counts exactly; every scalar and bin column to rtol,
    with the core tests' atol for ECE-type values, which are differences of
    numbers of order 1 (a 1e-16 change in a bin's mean p is a 1e-12 relative
    change of a small |frac_pos - conf|)."""
    assert rep.n == ref.n and rep.n_omitted == ref.n_omitted
    for key, value in ref.sums.items():
        np.testing.assert_allclose(rep.sums[key], value, rtol=rtol, atol=0, err_msg=key)
    for name in SCALARS:
        np.testing.assert_allclose(getattr(rep, name), getattr(ref, name), rtol=rtol, atol=atol,
                                   err_msg=name)
    assert rep.strategy == ref.strategy and rep.n_bins == ref.n_bins
    np.testing.assert_array_equal(rep.bins["count"], ref.bins["count"])
    for col in ref.bins:
        np.testing.assert_allclose(rep.bins[col], ref.bins[col], rtol=rtol, atol=atol,
                                   err_msg=col)


def assert_identical(a, b):
    for name in SCALARS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for col in a.bins:
        np.testing.assert_array_equal(a.bins[col], b.bins[col], err_msg=col)


def write_dataset(root, files=FILES):
    """One Parquet file per entry, written by `fastcal simulate`; returns the
    rows (y, p) concatenated in file order, from fastcal.simulate directly."""
    os.makedirs(root, exist_ok=True)
    ys, ps = [], []
    for i, (rows, group, seed) in enumerate(files):
        path = os.path.join(root, f"part-{i:02d}.parquet")
        status = cli.main(["simulate", path, "--n", str(rows), "--seed", str(seed),
                           "--sigma", str(SIGMA), "--chunk-rows", str(group), "--quiet"])
        assert status == 0
        y, p = fastcal.simulate(rows, sigma=SIGMA, seed=seed)
        ys.append(y)
        ps.append(p)
    return np.concatenate(ys), np.concatenate(ps)


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("ds") / "preds")
    y, p = write_dataset(root)
    return root, y, p


# -- results equal the single-process report -----------------------------------

@pytest.mark.parametrize("rows_per_partition, options", [
    (10**9, dict(ace=True)),  # one partition per file
    (5_000, dict(strategy="quantile", n_bins=7, closed="right")),
    (30_000, dict(n_bins=15, observed="accuracy", eps=1e-6, ace=False)),
])
def test_dataset_equals_single_process(client, dataset, rows_per_partition, options):
    root, y, p = dataset
    rep = fd.score_dataset(root, client=client, rows_per_partition=rows_per_partition, **options)
    assert_same(rep, fastcal.calibration_report(y, p, **options))


def test_dask_arrays_any_chunking(client):
    y, p = fastcal.simulate(150_001, sigma=2.0, seed=5, dtype=np.float32)
    ref = fastcal.calibration_report(y, p, n_bins=12, strategy="quantile")
    chunkings = [(150_001,), (9_000,) * 16 + (6_001,), (1, 77_777, 72_223)]
    for chunks in chunkings:
        rep = fd.score_dask(da.from_array(y, chunks=((150_001 // 2, 150_001 - 150_001 // 2),)),
                            da.from_array(p, chunks=(chunks,)), n_bins=12, strategy="quantile",
                            client=client)
        assert_same(rep, ref)
    # Dask's default (threaded) scheduler in this process
    rep = fd.score_dask(da.from_array(y, chunks=40_000), da.from_array(p, chunks=40_000),
                        n_bins=12, strategy="quantile")
    assert_same(rep, ref)


def test_read_parquet_dataframe(client, dataset):
    root, y, p = dataset
    df = dd.read_parquet(root)
    rep = fd.score_dataframe(df, prob="p", label="y", client=client, split_every=2, ace=True)
    assert_same(rep, fastcal.calibration_report(y, p))


def test_nan_omit_counts_the_same_rows(client):
    y, p = fastcal.simulate(50_000, sigma=0.5, seed=9)
    y = y.astype(np.float64)
    rng = np.random.default_rng(0)
    p[rng.integers(0, 50_000, 300)] = np.nan
    y[rng.integers(0, 50_000, 200)] = np.nan
    df = dd.from_pandas(pd.DataFrame({"p": p, "y": y}), npartitions=6)
    for strategy in ("uniform", "quantile"):
        rep = fd.score_dataframe(df, nan_policy="omit", strategy=strategy, ace=True,
                                 client=client)
        ref = fastcal.calibration_report(y, p, nan_policy="omit", strategy=strategy)
        assert rep.n_omitted == ref.n_omitted > 0
        assert_same(rep, ref)


def test_equal_mass_bins_split_ties_by_global_row(client, monkeypatch):
    # Few distinct values, so every cut falls inside a run of ties that spans
    # partitions; a small gather limit also exercises the bit-pattern split
    # and the single-value count of the exact search.
    rng = np.random.default_rng(3)
    values = np.array([0.0, -0.0, 0.1, 0.3, 0.3000000000000001, 0.5, 0.9, 1.0])
    p = values[rng.integers(0, len(values), 40_000)]
    y = (rng.random(40_000) < np.abs(p)).astype(np.uint8)
    yd, pd_ = da.from_array(y, chunks=3_001), da.from_array(p, chunks=3_001)
    for gather_max, n_bins in ((em.GATHER_MAX, 16), (50, 10)):
        monkeypatch.setattr(em, "GATHER_MAX", gather_max)
        rep = fd.score_dask(yd, pd_, n_bins=n_bins, strategy="quantile", client=client)
        assert_same(rep, fastcal.calibration_report(y, p, n_bins=n_bins, strategy="quantile"))
    # ACE from bucket statistics, and with boundary buckets too big to gather
    for budget in (em.GATHER_BUDGET, 0):
        monkeypatch.setattr(em, "GATHER_BUDGET", budget)
        rep = fd.score_dask(yd, pd_, n_bins=7, ace=True, client=client)
        np.testing.assert_allclose(rep.ace, fastcal.calibration_report(y, p, n_bins=7).ace,
                                   rtol=1e-12)
    # and the loop reference on a small slice
    ys, ps = y[:3_000], p[:3_000]
    rep = fd.score_dask(da.from_array(ys, chunks=701), da.from_array(ps, chunks=701), n_bins=9,
                        ace=True, client=client)
    np.testing.assert_allclose(rep.ace, naive.ace(ys, ps, 9), rtol=1e-12)


def test_multiclass_passes_through_when_supported(client):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2_000, 3))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = rng.integers(0, 3, 2_000)
    try:
        ref = fastcal.CalibrationAccumulator(n_bins=10).update(y, p).report()
    except ValueError:
        pytest.skip("CalibrationAccumulator does not take (N, K) probabilities yet")
    rep = fd.score_dask(da.from_array(y, chunks=500), da.from_array(p, chunks=(300, 2)),
                        ace=False, client=client)
    assert_same(rep, ref)


# -- failures -------------------------------------------------------------------

def test_worker_killed_mid_job_gives_identical_numbers(client, dataset, tmp_path):
    """One worker process is SIGKILLed while it runs a partition (after it has
    computed others that are still in its memory); Dask recomputes what was
    lost and the numbers are exactly those of an undisturbed run."""
    root, y, p = dataset
    df = dd.read_parquet(root, split_row_groups=True)
    assert df.npartitions >= 10
    calm = fd.score_dataframe(df, client=client, ace=False)
    marker = str(tmp_path / "killed")
    victim = df.npartitions - 2

    def kill_once(frame, partition_info=None):
        if partition_info is not None and partition_info["number"] == victim:
            try:
                fd_ = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return frame
            os.write(fd_, str(os.getpid()).encode())
            os.close(fd_)
            os.kill(os.getpid(), signal.SIGKILL)
        return frame

    pids_before = set(client.run(os.getpid).values())
    with get_task_stream(client) as ts:
        rep = fd.score_dataframe(df.map_partitions(kill_once, meta=df._meta), client=client,
                                 ace=False)
    with open(marker) as fh:
        killed = int(fh.read())
    client.wait_for_workers(2, timeout=60)
    assert killed in pids_before
    assert killed not in set(client.run(os.getpid).values())  # the nanny started a new one
    fills = [t["key"] for t in ts.data if "_fill_part" in str(t["key"])]
    assert len(fills) >= df.npartitions  # every partition filled (lost ones again)
    assert_identical(rep, calm)
    assert_same(rep, fastcal.calibration_report(y, p, ace=False))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once closed


def test_unreachable_scheduler_fails_fast_in_one_line(dataset, capsys):
    root, _, _ = dataset
    address = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(ConnectionError) as info:
        fd.score_dataset(root, scheduler=address, timeout=1)
    elapsed = time.monotonic() - t0
    text = str(info.value)
    assert "\n" not in text and address in text and "within 1 s" in text
    assert elapsed < 20  # Dask's own default would keep retrying for 30 s
    # the command line: exit 2, one line on stderr, nothing on stdout
    status = cli.main(["score", root, "--prob", "p", "--label", "y", "--scheduler", address,
                       "--timeout", "1"])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("fastcal score: error: could not reach")


def test_bad_value_gives_the_message_of_score_file(client, tmp_path):
    root = str(tmp_path / "bad")
    write_dataset(root, files=[(5_000, 1_000, 1), (8_000, 3_000, 2), (4_000, 4_000, 3)])
    path = os.path.join(root, "part-01.parquet")
    table = pq.read_table(path)
    pb = table.column("p").to_numpy().copy()
    pb[6_500] = 1.5  # row 6500 of the second file, global row 11500
    pb[7_000] = np.nan  # global row 12000
    pq.write_table(pa.table({"p": pb, "y": table.column("y")}), path, row_group_size=3_000)
    for nan_policy, found in (("raise", "NaN"), ("omit", "outside [0, 1]")):
        with pytest.raises(ValueError) as ours:
            fd.score_dataset(root, client=client, rows_per_partition=1_000,
                             nan_policy=nan_policy)
        with pytest.raises(ValueError) as theirs:
            score_file(root, nan_policy=nan_policy)
        text = str(ours.value)
        assert text == str(theirs.value)
        assert found in text and "part-01.parquet" in text and "column 'p'" in text
        row = 12000 if nan_policy == "raise" else 11500
        assert f"row {row} (row {row - 5000} of this file)" in text


def test_bad_value_in_dataframe_partition(client):
    y, p = fastcal.simulate(10_000, seed=1)
    y = y.astype(np.int64)
    y[7_321] = 2
    df = dd.from_pandas(pd.DataFrame({"p": p, "y": y}), npartitions=5)
    with pytest.raises(ValueError, match=r"labels other than 0 and 1 \(first at index 7321\)"
                                         r".*partition 3 of 5"):
        fd.score_dataframe(df, client=client)


def test_bad_arguments(client, dataset):
    root, _, _ = dataset
    with pytest.raises(ValueError, match="no column 'prob'; the file has columns: 'p', 'y'"):
        fd.score_dataset(root, prob="prob", client=client)
    with pytest.raises(ValueError, match="at most one of client, scheduler and workers"):
        fd.score_dataset(root, client=client, workers=2)
    with pytest.raises(ValueError, match="strategy must be one of"):
        fd.score_dataset(root, client=client, strategy="equal")
    with pytest.raises(ValueError, match="preds-missing: no such file or directory"):
        fd.score_dataset(root + "-missing", client=client)
    with pytest.raises(ValueError, match="different lengths: 10 and 11"):
        fd.score_dask(da.zeros(10, chunks=5), da.zeros(11, chunks=5), client=client)
    with pytest.raises(ValueError, match="take one probability column; y_prob holds 3 classes: .* ace=True"):
        fd.score_dask(da.zeros(10, chunks=5), da.full((10, 3), 1 / 3, chunks=5),
                      strategy="quantile", client=client)


def test_multiclass_and_logits_ace_on_dask(client):
    """ACE of K classes and of logits: the gaps of the first version, now filled
    by the one equal-mass algorithm."""
    rng = np.random.default_rng(6)
    z = rng.normal(size=(3_000, 4)) * 2
    y = rng.integers(0, 4, 3_000)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    for arr, logits in ((p, False), (z, True)):
        rep = fd.score_dask(da.from_array(y, chunks=700), da.from_array(arr, chunks=(700, 4)),
                            ace=True, logits=logits, client=client)
        ref = fastcal.calibration_report(y, arr, logits=logits)
        np.testing.assert_allclose([rep.ace, rep.ece, rep.ecd], [ref.ace, ref.ece, ref.ecd],
                                   rtol=1e-12)
    zb = z[:, 0]
    yb = (y == 0).astype(np.uint8)
    rep = fd.score_dask(da.from_array(yb, chunks=600), da.from_array(zb, chunks=600),
                        strategy="quantile", logits=True, client=client)
    assert_same(rep, fastcal.calibration_report(yb, zb, logits=True, strategy="quantile"))


# -- compilation ----------------------------------------------------------------

def test_kernels_compile_once_per_worker_not_per_partition(client, dataset):
    """Each worker process compiles (or loads from numba's cache) the fill
    kernel once per argument signature over its whole life (all the tests
    before this one included), never once per partition: 40+ partitions here
    add at most the two signatures of this input (arrays from Arrow are
    read-only), each loaded once."""
    root, y, p = dataset

    def kernel_loads(dask_worker=None):
        from fastcal._kernels import _aot

        st = kb.fill_range_fine.stats
        return (sum(st.cache_hits.values()) + sum(st.cache_misses.values()),
                len(kb.fill_range_fine.signatures), _aot.status() == "")

    before = client.run(kernel_loads)
    with get_task_stream(client) as ts:
        rep = fd.score_dataset(root, client=client, rows_per_partition=1, ace=False)
    assert_same(rep, fastcal.calibration_report(y, p, ace=False))
    after = client.run(kernel_loads)
    fills = {}
    for t in ts.data:
        if "_fill_part" in str(t["key"]):
            fills[t["worker"]] = fills.get(t["worker"], 0) + 1
    assert sum(fills.values()) >= 40  # one partition per row group
    for worker in fills:
        (loads0, sigs0, _), (loads1, sigs1, aot) = before[worker], after[worker]
        if aot:  # the ahead-of-time module fills these inputs (fastcal._kernels._aot): no JIT kernel
            assert (loads1, sigs1) == (loads0, sigs0) and loads1 == sigs1
            continue
        assert 1 <= loads1 == sigs1  # never loaded twice for one signature
        assert loads1 - loads0 == sigs1 - sigs0 <= 2
    assert sum(after[w][0] - before[w][0] for w in fills) <= 4 < sum(fills.values())


# -- command line -----------------------------------------------------------------

def test_cli_scheduler_and_workers(client, dataset, capsys):
    root, y, p = dataset
    ref = fastcal.calibration_report(y, p, n_bins=8, strategy="quantile")
    for flags in (["--scheduler", client.scheduler.address], ["--workers", "1"]):
        status = cli.main(["score", root, "--prob", "p", "--label", "y", "--bins", "8",
                           "--strategy", "quantile", "--json", *flags])
        out, _ = capsys.readouterr()
        assert status == 0
        got = json.loads(out)
        assert got["n"] == ref.n and got["n_rows"] == len(p) and got["passes"] >= 3
        for name in ("ece", "esce", "mce", "ace", "ecd", "brier", "nll"):
            np.testing.assert_allclose(got[name], getattr(ref, name), rtol=1e-12, atol=1e-13)
        np.testing.assert_array_equal([b["count"] for b in got["bins"]], ref.bins["count"])
    status = cli.main(["score", root, "--prob", "p", "--label", "y", "--workers", "0"])
    assert status == 2 and "--workers must be >= 1" in capsys.readouterr().err


# -- soft labels: a mergeable state, so Dask scores them too (issue 11) -----------------

def test_soft_labels_from_dask_arrays_equal_the_in_memory_report(client):
    from fastcal.soft import soft_label_report

    rng = np.random.default_rng(11)
    t = rng.dirichlet(np.ones(4), 9_000)
    p = rng.dirichlet(np.ones(4) * 2, 9_000)
    t[4321] = np.nan
    ref = soft_label_report(t, p, nan_policy="omit")
    rep = fd.score_dask(da.from_array(t, chunks=(2_000, 2)), da.from_array(p, chunks=(3_000, 4)),
                        nan_policy="omit", client=client)
    assert type(rep).__name__ == "SoftLabelReport" and rep.n == 8_999 and rep.n_omitted == 1
    for name in ("entce", "entce_signed", "rankcs", "distce", "brier", "nll", "ecd", "ecd_var"):
        assert getattr(rep, name) == pytest.approx(getattr(ref, name), rel=1e-12), name
    bad = t.copy()
    bad[4321] = 0.25
    bad[7777] = [0.5, 0.5, 0.5, 0.0]
    with pytest.raises(ValueError, match=r"1 rows that are not label distributions \(first at "
                                         r"row 7777.*rows 6000-8999"):
        fd.score_dask(da.from_array(bad, chunks=(3_000, 4)), da.from_array(p, chunks=(3_000, 4)),
                      client=client)


# -- K class and soft-label columns of dataframes, datasets and --workers ---------------

@pytest.fixture(scope="module")
def class_columns(tmp_path_factory):
    """3-class probabilities p0..p2, labels y and label distributions t0..t2, as a
    pandas frame and as a dataset of three Parquet files (the middle one float32)."""
    rng = np.random.default_rng(21)
    n = 6_000
    p = rng.dirichlet(np.ones(3) * 2, n)
    t = rng.dirichlet(np.ones(3), n)
    frame = pd.DataFrame({"y": rng.integers(0, 3, n),
                          **{f"p{i}": p[:, i] for i in range(3)},
                          **{f"t{i}": t[:, i] for i in range(3)}})
    root = tmp_path_factory.mktemp("classes") / "preds"
    root.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(n), 3)):
        part = frame.iloc[rows]
        if i == 1:
            part = part.astype({f"p{j}": np.float32 for j in range(3)})
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False),
                       root / f"part-{i}.parquet", row_group_size=700)
    # what the files hold, in file order: one float32 file is widened to float64
    whole = pd.concat([pq.read_table(root / f"part-{i}.parquet").to_pandas()
                       for i in range(3)])
    return frame, str(root), whole


def test_class_and_soft_label_columns_of_dataframes_and_datasets(client, class_columns):
    from fastcal.soft import soft_label_report

    frame, root, whole = class_columns
    df = dd.from_pandas(frame, npartitions=4)
    for score, where, rows in ((fd.score_dataframe, df, frame), (fd.score_dataset, root, whole)):
        p = rows[["p0", "p1", "p2"]].to_numpy(np.float64)
        t = rows[["t0", "t1", "t2"]].to_numpy()
        ref = fastcal.calibration_report(rows["y"].to_numpy(), p, n_bins=10)
        for prob in ("p*", ["p0", "p1", "p2"]):
            rep = score(where, prob=prob, label="y", n_bins=10, ace=True, client=client)
            assert type(rep).__name__ == "MulticlassReport"
            assert_same(rep, ref)
        soft_ref = soft_label_report(t, p)
        for label in ("t*", ["t0", "t1", "t2"]):
            rep = score(where, prob="p*", label=label, client=client)
            assert type(rep).__name__ == "SoftLabelReport" and rep.n == soft_ref.n
            for name in ("entce", "entce_signed", "rankcs", "distce", "brier", "nll", "ecd"):
                assert getattr(rep, name) == pytest.approx(getattr(soft_ref, name),
                                                           rel=1e-12), name


def test_class_columns_name_their_problems(client, class_columns):
    frame, root, _ = class_columns
    df = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(ValueError, match=r"the dataframe has no column 'p9'"):
        fd.score_dataframe(df, prob=["p0", "p9"], label="y", client=client)
    with pytest.raises(ValueError, match=r"one label column per class: label= gives 2"):
        fd.score_dataframe(df, prob="p*", label=["t0", "t1"], client=client)
    with pytest.raises(ValueError, match=r"prob='q\*' matches 0 column"):
        fd.score_dataset(root, prob="q*", label="y", client=client)
    bad = frame.copy()
    bad.loc[4321, "t1"] = 0.9  # this row's labels no longer sum to 1
    with pytest.raises(ValueError, match=r"row 4321.*\[in partition 2 of 3\]"):
        fd.score_dataframe(dd.from_pandas(bad, npartitions=3), prob="p*", label="t*",
                           client=client)


def test_cli_workers_take_class_and_soft_label_columns(class_columns, capsys):
    _, root, whole = class_columns
    p = whole[["p0", "p1", "p2"]].to_numpy(np.float64)
    ref = fastcal.calibration_report(whole["y"].to_numpy(), p, n_bins=10, ace=False)
    status = cli.main(["score", root, "--prob", "p0,p1,p2", "--label", "y", "--bins", "10",
                       "--workers", "1", "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    got = json.loads(out)
    assert got["n"] == ref.n
    for name in ("ece", "ecd", "brier", "nll"):
        np.testing.assert_allclose(got[name], getattr(ref, name), rtol=1e-12, atol=1e-13)
    status = cli.main(["score", root, "--prob", "p*", "--label", "t*", "--workers", "1",
                       "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    from fastcal.soft import soft_label_report

    soft_ref = soft_label_report(whole[["t0", "t1", "t2"]].to_numpy(), p)
    np.testing.assert_allclose(json.loads(out)["entce"], soft_ref.entce, rtol=1e-12)


def test_segments_of_a_dataset_on_the_cluster(client, tmp_path, capsys):
    """by= on worker processes: the segments' states, pickled between processes and
    merged in the tree, give score_file's segmented report; more keys over the
    partitions than max_segments are refused at a merge, in one line naming the column
    (tests/api/test_segments_dask.py holds the rest of by= on Dask)."""
    rng = np.random.default_rng(3)
    n = 2_000
    y, p = fastcal.simulate(n, sigma=0.5, seed=11)
    g = np.array(["DE", "FR", "IT"], dtype=object)[rng.integers(0, 3, n)]
    g[::37] = None
    frame = pd.DataFrame({"p": p, "y": y, "w": rng.random(n) * 3, "country": g,
                          "block": np.arange(n) // 500})
    root = tmp_path / "keys"
    root.mkdir()
    for i, rows in enumerate((slice(0, 1_300), slice(1_300, n))):
        pq.write_table(pa.Table.from_pandas(frame.iloc[rows], preserve_index=False),
                       root / f"part-{i}.parquet", row_group_size=250)
    got = fd.score_dataset(root, by=["country", "block"], weight="w", client=client,
                           rows_per_partition=250, split_every=2)
    ref = score_file(root, by=["country", "block"], weight="w")
    assert list(got.keys()) == list(ref.keys()) and len(ref) == 3 * 4 + 4
    for key in ref:
        assert_same(got[key], ref[key])
    assert_same(got.overall, ref.overall)
    assert got.verdict == ref.verdict
    with pytest.raises(ValueError) as exc:  # at most 2 blocks in a partition, 4 in all
        fd.score_dataset(root, by="block", client=client, rows_per_partition=250,
                         max_segments=3)
    assert str(exc.value).endswith(
        "keys: by='block' has 4 distinct segments, more than max_segments=3; pass a larger "
        "max_segments (each segment keeps a state of its own) or coarser keys")
    # the command line on the same cluster: segments, weights and ECCE's passes on workers
    ref = score_file(root, by="country", weight="w", metrics=("ecce",))
    flags = ["--scheduler", client.scheduler.address]
    status = cli.main(["score", str(root), "--prob", "p", "--label", "y", "--by", "country",
                       "--weight", "w", "--metrics", "ecce", "--json", *flags])
    out, _ = capsys.readouterr()
    assert status == 0
    got = json.loads(out)
    assert [r["segment"] for r in got["segments"]] == ref.table()["segment"]
    for row, sigma in zip(got["segments"], ref.table()["ecce_sigma"]):
        np.testing.assert_allclose(row["ecce_sigma"], sigma, rtol=1e-12)
    np.testing.assert_allclose(got["overall"]["ecce"], ref.overall.ecce, rtol=1e-12)
    status = cli.main(["score", str(root), "--prob", "p", "--label", "y", "--by", "block",
                       "--max-segments", "3", "--chunk-rows", "250", *flags])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "--by block has 4 distinct segments, more than --max-segments 3; pass a larger " \
           "--max-segments" in err

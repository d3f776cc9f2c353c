"""The streaming bootstrap and the ECD test on a real Dask LocalCluster (2 worker processes)."""

import numpy as np
import pytest

import fastcal
from fastcal import CalibrationAccumulator


def _fill_partition(lo, hi, n_boot, seed):
    y, p = fastcal.simulate(hi - lo, sigma=0.5, seed=21, start=lo)
    return CalibrationAccumulator(n_boot=n_boot, seed=seed).update(y, p, start=lo)


def test_bootstrap_and_test_on_a_dask_local_cluster():
    """Partitions filled in two worker processes, merged: the same replicates,
    intervals and z as one accumulator over all rows in this process."""
    distributed = pytest.importorskip("distributed")
    bounds = [(0, 17_000), (17_000, 40_000), (40_000, 41_000), (41_000, 60_000)]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        futures = [client.submit(_fill_partition, lo, hi, 24, 8) for lo, hi in bounds]
        parts = client.gather(futures)
    merged = parts[0]
    for part in parts[1:]:
        merged = merged + part
    y, p = fastcal.simulate(60_000, sigma=0.5, seed=21)
    one = CalibrationAccumulator(n_boot=24, seed=8).update(y, p)
    np.testing.assert_array_equal(merged.boot_counts, one.boot_counts)
    np.testing.assert_allclose(merged.boot_sums, one.boot_sums, rtol=1e-12)
    a, b = merged.report(ci=0.95), one.report(ci=0.95)
    assert a.ecd_z == pytest.approx(b.ecd_z, rel=1e-12)
    for k in b.intervals:
        np.testing.assert_allclose(a.intervals[k], b.intervals[k], rtol=1e-10)

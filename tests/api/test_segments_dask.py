"""Segments (``by=``) on Dask: score_dask, score_dataframe and score_dataset give the
segmented report of calibration_report(by=) and score_file(by=), whatever the
partitioning and the merge tree; bad input is one line. On Dask's threaded scheduler
(tests/api/test_distributed.py runs a dataset's segments on its cluster of worker
processes)."""

import numpy as np
import pytest

pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402

import fastcal  # noqa: E402
from fastcal.distributed import score_dask, score_dataframe, score_dataset  # noqa: E402

N = 2_000
KEYS = ["DE", "FR", "IT"]
SCALARS = ("n", "n_omitted", "ece", "esce", "mce", "ecd", "ecd_z", "brier", "nll")


def _close(got, ref):
    """Counts exactly, float fields to 1e-12 relative."""
    assert got.n == ref.n and got.n_omitted == ref.n_omitted
    np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    for name in SCALARS:
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12, atol=0,
                                   err_msg=name)


def _same(got, ref):
    """The same segments in the same order, each equal; the whole and the verdict too."""
    assert type(got).__name__ == "SegmentedReport"
    assert list(got.keys()) == list(ref.keys())
    for key in ref:
        _close(got[key], ref[key])
    _close(got.overall, ref.overall)
    np.testing.assert_allclose(got.table()["p_adjusted"], ref.table()["p_adjusted"], rtol=1e-12)
    assert got.miscalibrated == ref.miscalibrated


@pytest.fixture(scope="module")
def data():
    """Binary and K = 3 predictions, weights, a country per row (FR over-confident,
    every 37th row's country null) and a second key column of ints."""
    rng = np.random.default_rng(5)
    g = np.array(KEYS, dtype=object)[rng.integers(0, len(KEYS), N)]
    g[::37] = None
    h = rng.integers(0, 2, N)
    p = rng.beta(2.0, 3.0, N)
    y = (rng.random(N) < np.where(g == "FR", 0.5 + 0.4 * (p - 0.5), p)).astype(np.int64)
    z = 1.5 * rng.normal(size=(N, 3))
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    c = (rng.random(N)[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    w = rng.random(N) * 3
    return dict(y=y, p=p, g=g, h=h, P=P, c=c, w=w)


@pytest.fixture(scope="module")
def frame(data):
    return pd.DataFrame({"p": data["p"], "y": data["y"], "w": data["w"], "country": data["g"],
                         "h": data["h"], "block": np.arange(N) // 500})


@pytest.fixture(scope="module")
def dataset(frame, tmp_path_factory):
    """The rows as two Parquet files of several row groups each."""
    root = tmp_path_factory.mktemp("segdask") / "preds"
    root.mkdir()
    for i, rows in enumerate((slice(0, 1_300), slice(1_300, N))):
        pq.write_table(pa.Table.from_pandas(frame.iloc[rows], preserve_index=False),
                       root / f"part-{i}.parquet", row_group_size=250)
    return str(root)


# -- equal to the in-memory and file reports -------------------------------------------

@pytest.mark.parametrize("chunks, split_every", [(N, 8), (700, 2), ((1, 998, 1_001), 3)])
def test_score_dask_by_equals_calibration_report(data, chunks, split_every):
    y, p, g, w = data["y"], data["p"], data["g"], data["w"]
    dy, dp = da.from_array(y, chunks=chunks), da.from_array(p, chunks=chunks)
    got = score_dask(dy, dp, by=g, split_every=split_every)
    _same(got, fastcal.calibration_report(y, p, by=g, ace=False))
    assert None in got and got.overall.n_rows == N and got.overall.passes == 1
    # weights, and the keys as a dask array chunked otherwise (realigned)
    got = score_dask(dy, dp, by=da.from_array(g, chunks=600), split_every=split_every,
                     sample_weight=da.from_array(w, chunks=500), correction="bh", alpha=0.1)
    ref = fastcal.calibration_report(y, p, by=g, sample_weight=w, correction="bh", alpha=0.1)
    _same(got, ref)
    assert got.correction == "bh" and got.alpha == 0.1


def test_score_dask_by_classes_and_two_key_columns(data):
    c, P, g, h = data["c"], data["P"], data["g"], data["h"]
    got = score_dask(da.from_array(c, chunks=450), da.from_array(P, chunks=(450, 3)),
                     by=[da.from_array(g, chunks=450), h], split_every=2)
    ref = fastcal.calibration_report(c, P, by=[g, h], ace=False)
    assert len(ref) == 2 * (len(KEYS) + 1) and (None, 1) in ref
    _same(got, ref)


def test_score_dataframe_by_equals_calibration_report_and_score_file(data, frame, dataset):
    y, p, g, h, w = data["y"], data["p"], data["g"], data["h"], data["w"]
    # an empty first partition, then three
    df = dd.concat([dd.from_pandas(frame.iloc[:0], npartitions=1),
                    dd.from_pandas(frame, npartitions=3)])
    assert df.npartitions == 4
    got = score_dataframe(df, by="country", split_every=2)
    _same(got, fastcal.calibration_report(y, p, by=g, ace=False))
    _same(got, fastcal.score_file(dataset, by="country"))
    assert got.columns == ["country"]
    got = score_dataframe(df, by=["country", "h"], weight="w")
    _same(got, fastcal.calibration_report(y, p, by=[g, h], sample_weight=w))
    _same(got, fastcal.score_file(dataset, by=["country", "h"], weight="w"))
    assert got.columns == ["country", "h"]


def test_score_dataset_by_equals_score_file(data, dataset):
    y, p, g, h, w = data["y"], data["p"], data["g"], data["h"], data["w"]
    for rows, split_every in ((250, 2), (10**6, 8)):  # 9 partitions, or one per file
        got = score_dataset(dataset, by=["country", "h"], weight="w", rows_per_partition=rows,
                            split_every=split_every)
        _same(got, fastcal.score_file(dataset, by=["country", "h"], weight="w"))
        _same(got, fastcal.calibration_report(y, p, by=[g, h], sample_weight=w))
        assert got.overall.provenance.dask == "default scheduler"
        assert got.overall.source.endswith("preds") and got.overall.n_rows == N
    # more keys over all partitions than max_segments, though no partition has as many
    # (at most 2 blocks of 500 rows in 250): refused by the driver at a merge, in one line
    # naming the column
    with pytest.raises(ValueError) as exc:
        score_dataset(dataset, by="block", rows_per_partition=250, max_segments=3)
    text = str(exc.value)
    assert exc.value.__cause__ is None and "\n" not in text
    assert text.endswith("preds: by='block' has 4 distinct segments, more than "
                         "max_segments=3; pass a larger max_segments (each segment keeps a "
                         "state of its own) or coarser keys")


def test_bad_value_gives_the_message_of_score_file(frame, tmp_path):
    bad = frame.copy()
    bad.loc[1_700, "p"] = np.nan  # row 400 of the second file
    root = tmp_path / "bad"
    root.mkdir()
    for i, rows in enumerate((slice(0, 1_300), slice(1_300, N))):
        pq.write_table(pa.Table.from_pandas(bad.iloc[rows], preserve_index=False),
                       root / f"part-{i}.parquet", row_group_size=250)
    with pytest.raises(ValueError) as ours:
        score_dataset(root, by="country", rows_per_partition=250)
    with pytest.raises(ValueError) as theirs:
        fastcal.score_file(root, by="country")
    assert str(ours.value) == str(theirs.value)
    assert "part-1.parquet" in str(ours.value) and "at row 1700 (row 400 of this file)" in str(
        ours.value)
    with pytest.raises(ValueError, match=r"^y_prob contains 1 NaN values? \(first at index 1700\)"
                                         r".* \[in partition 2 of 3\]$"):
        score_dataframe(dd.from_pandas(bad, npartitions=3), by=["country", "h"])


# -- refusals ----------------------------------------------------------------------------

def test_too_many_segments_in_a_partition_or_at_a_merge(data):
    y, p = da.from_array(data["y"], chunks=500), da.from_array(data["p"], chunks=500)
    keys = np.arange(N) // 250  # 2 keys a chunk, 8 in all
    for max_segments, count in ((1, 2), (5, 6)):  # a chunk's own keys; a merge of 3 chunks
        with pytest.raises(ValueError) as exc:
            score_dask(y, p, by=keys, max_segments=max_segments, split_every=3)
        assert str(exc.value) == (
            f"by has {count} distinct segments, more than max_segments={max_segments}; pass a "
            "larger max_segments (each segment keeps a state of its own) or coarser keys")
    with pytest.raises(ValueError, match=r"^max_segments must be an integer >= 1; got 0$"):
        score_dask(y, p, by=keys, max_segments=0)


def test_bad_by_is_one_line_naming_it(data, frame, dataset):
    y, p = da.from_array(data["y"], chunks=500), da.from_array(data["p"], chunks=500)
    g = data["g"]
    dh = da.from_array(data["h"], chunks=500)
    cases = [
        (lambda: score_dask(y, p, by=g[1:]),
         "by has 1,999 keys; y_prob has 2,000 rows (one segment key per row)"),
        (lambda: score_dask(y, p, by=da.from_array(g[:-2], chunks=500)),
         "by has 1,998 keys; y_prob has 2,000 rows (one segment key per row)"),
        (lambda: score_dask(y, p, by=[g, np.c_[g, g]]),
         "by must be 1-D with one segment key per row; got shape (2000, 2) (for several key "
         "columns pass a list of 1-D columns)"),
        (lambda: score_dask(y, p, by=dh[dh >= 0]),
         "by has unknown chunk sizes; call .compute_chunk_sizes() first so that its chunks "
         "can be aligned with y_prob's"),
        (lambda: score_dataframe(dd.from_pandas(frame, npartitions=2), by=["country", "hh"]),
         "by=['country', 'hh'] names no column 'hh' of the dataframe; its columns are "
         "['p', 'y', 'w', 'country', 'h', 'block']"),
        (lambda: score_dataframe(dd.from_pandas(frame, npartitions=2), by="w", weight="w"),
         "the dataframe: by=['w'] names 'w', a probability, label or weight column; name the "
         "columns of the segment keys"),
        (lambda: score_dataset(dataset, by="cntry"),
         "preds: no column 'cntry'; the file has columns: 'p', 'y', 'w', 'country', "
         "'h', 'block'"),
        (lambda: score_dataset(dataset, by=["country", "p"]),
         "preds: by=['country', 'p'] names 'p', a probability, label or weight column; name "
         "the columns of the segment keys"),
        (lambda: score_dataset(dataset, by=3),
         "by must be a column name or a list of column names; got 3"),
        (lambda: score_dataset(dataset, by="country", correction="bonferroni"),
         "correction must be one of 'holm', 'bh'; got 'bonferroni'"),
        (lambda: score_dask(y, p, by=g, ace=True),
         "by= scores each segment in one pass over the partitions: ace=True needs more passes "
         "over each segment's rows; leave it out (or score the segments' rows in memory with "
         "fastcal.calibration_report(..., by=...))"),
        (lambda: score_dataframe(dd.from_pandas(frame, npartitions=2), by="country",
                                 metrics=("ece_sweep",)),
         "by= scores each segment in one pass over the partitions: metrics 'ece_sweep' needs"),
        (lambda: score_dask(da.from_array(np.c_[data["p"], 1 - data["p"]], chunks=500),
                            da.from_array(np.c_[data["p"], 1 - data["p"]], chunks=500), by=g),
         "by= needs 0/1 labels or class indices; y_true holds label distributions (2-D)"),
    ]
    for call, text in cases:
        with pytest.raises(ValueError) as exc:
            call()
        assert text in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_ecce_of_every_segment_and_the_whole_with_weights(data, frame, dataset):
    # the ECCE passes run on the partitions, each row with its weight and its segment
    ref = fastcal.calibration_report(data["y"], data["p"], by=data["g"], sample_weight=data["w"],
                                     metrics=("ecce",), ace=False)
    got = [score_dataframe(dd.from_pandas(frame, npartitions=3), by="country", weight="w",
                           metrics=("ecce",)),
           score_dask(da.from_array(data["y"], chunks=700), da.from_array(data["p"], chunks=700),
                      by=data["g"], sample_weight=da.from_array(data["w"], chunks=700),
                      metrics=("ecce",))]
    names = ("ecce", "ecce_sigma", "ecce_pvalue")
    for rep in got:
        assert list(rep.keys()) == list(ref.keys())
        for key in [*ref.keys(), None]:
            a, b = (rep.overall, ref.overall) if key is None else (rep[key], ref[key])
            np.testing.assert_allclose([getattr(a, n) for n in names],
                                       [getattr(b, n) for n in names], rtol=1e-12, atol=1e-15)
    # the whole alone, weighted
    one = score_dataset(dataset, weight="w", metrics=("ecce",), rows_per_partition=600)
    np.testing.assert_allclose(one.ecce_sigma, ref.overall.ecce_sigma, rtol=1e-12)


def test_segment_intervals_do_not_depend_on_the_partitions(data, frame):
    # each segment numbers its own rows (its bootstrap weights hang on the numbers): a
    # light pass counts each partition's rows of each key, so partitions filled apart
    # give the replicates of one update
    ref = fastcal.calibration_report(data["y"], data["p"], by=data["g"], ci=0.9, n_boot=40,
                                     ace=False)
    got = [score_dask(da.from_array(data["y"], chunks=700), da.from_array(data["p"], chunks=700),
                      by=data["g"], ci=0.9, n_boot=40),
           score_dataframe(dd.from_pandas(frame, npartitions=3), by="country", ci=0.9,
                           n_boot=40)]
    for rep in got:
        for key in [*ref.keys(), None]:
            a, b = (rep.overall, ref.overall) if key is None else (rep[key], ref[key])
            for name in ("ece", "mce", "ecd"):
                np.testing.assert_allclose(a.intervals[name], b.intervals[name], rtol=1e-12)

"""What a fit reads: the parts of a source of the driver (arrays, a file read in
chunks, Dask partitions) in passes; and the fits from files and Dask arrays.

A source other than arrays answers two questions before it is read:
``known_rows()`` (its rows, or None) and ``known_classes()`` (K for K class
columns or a fixed-size-list column, -1 for K classes of unknown K, None for
one value per row)."""

from fastcal import backends
from fastcal.accumulators import equal_mass as em
from fastcal.backends import resolve
from fastcal.inputs import validation as v
from fastcal.recalibrate.passes import _add
from fastcal.score import Options, score
from fastcal.sources.arrays import ArraySource
from fastcal.sources.dask import DaskSource, _array_source
from fastcal.sources.files import FileSource
from fastcal.sources.io import DEFAULT_CHUNK_ROWS


class _Data:
    """What a fit reads: the parts of a source (raw inputs, or the values that
    isotonic / histogram binning rank), a pass counter, and how to name a bad row.

    ``n_classes``: K, -1 for K classes of unknown K, None for one value per row.
    ``batch``: the resolved arrays of a fit in memory, else None."""

    batch = None

    def __init__(self, source, *, logits, nan_policy, n_classes=None):
        self.source = source
        self.logits = bool(logits)
        self.nan_policy = nan_policy
        self._n_classes = n_classes
        self.passes = 0

    @classmethod
    def arrays(cls, y_true, y_prob, *, logits, nan_policy, threads=None):
        d = cls(ArraySource(y_true, y_prob), logits=logits, nan_policy=nan_policy)
        d.batch = resolve(y_true, y_prob, logits=logits, soft=False)  # a map fits hard labels
        if d.batch.n == 0:
            raise ValueError(ArraySource.empty)
        d.threads = v.check_threads(threads)
        d._n_classes = d.batch.p.shape[1] if d.batch.kind == "multiclass" else None
        return d

    @classmethod
    def of_source(cls, source, *, logits, nan_policy, n_classes=None):
        """A source read in passes; ``n_classes`` None: as the source knows it."""
        k = n_classes if n_classes is not None else source.known_classes()
        return cls(source, logits=logits, nan_policy=nan_policy, n_classes=k)

    @property
    def multiclass(self):
        return self._n_classes is not None

    def parts(self, raw):
        pair = dict(logits=self.logits, renormalize=False, eps=None, raw=raw)
        batch = self.batch
        if batch is not None:
            y, x = backends.of(batch).ranked(batch, pair)
            return em.ArrayParts(y, x, self.threads)
        return self.source.parts(pair)

    def map(self, raw, fn, common, combine=_add):
        self.passes += 1
        return self.parts(raw).map(fn, common, combine=combine)

    def n_rows(self):
        """Rows of the source when known before reading it (arrays, files), else None."""
        if self.batch is not None:
            return self.batch.n
        return self.source.known_rows()

    def check(self, n_nan, n_bad, n_rows):
        """Raise on invalid rows (or NaN rows unless omitted), with the driver's message."""
        if n_bad == 0 and (n_nan == 0 or self.nan_policy == "omit") and n_rows > 0:
            return
        # the driver's one pass names the first bad row the way the source counts rows
        score(self.source, Options(n_bins=1, ace=False, logits=self.logits,
                                   nan_policy=self.nan_policy, with_logs=False))
        what = f"{int(n_bad)} invalid rows" if n_bad else f"{int(n_nan)} NaN rows"
        msg = (f"{self.source.prefix}{what} (labels not 0/1 or not a class index, values outside "
               "[0, 1], infinite logits); expected valid rows" if n_rows > 0 else
               f"{self.source.prefix}no rows left to fit on")
        raise ValueError(msg)


def fit_file(model, path, *, prob="p", label="y", chunk_rows=None, progress=None, format=None,
             verify_checksums=True, where=None):
    """Fit ``model`` from a prediction file read in chunks (as :func:`fastcal.score_file`:
    a local path or a URL, and ``where``, a filter on the partition columns of a Hive
    dataset), in ``model.passes_`` passes. Returns the model."""
    source = FileSource(path, prob=prob, label=label,
                        chunk_rows=int(chunk_rows or DEFAULT_CHUNK_ROWS), progress=progress,
                        format=format, verify_checksums=verify_checksums, where=where)
    return model.fit_source(source)


class _Runner:
    def __init__(self, client):
        self.client = client

    def compute(self, obj):
        if self.client is not None:
            return self.client.gather(self.client.compute(obj))
        import dask

        return dask.compute(obj)[0]


def fit_dask(model, y_true, y_prob, *, client=None, split_every=8):
    """Fit ``model`` from dask arrays, one task per block and pass (on ``client``'s
    cluster, or Dask's default scheduler). Returns the model."""
    source = DaskSource(_array_source(y_true, y_prob), _Runner(client), split_every)
    return model.fit_source(source)

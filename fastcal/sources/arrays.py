"""Arrays in memory as a source of the driver (NumPy and friends, or GPU arrays)."""

from fastcal import backends
from fastcal.accumulators import equal_mass as em
from fastcal.inputs import validation as v

TRANSFORM_ON_GPU = ("a recalibration (transform) is applied on the host; pass host arrays "
                    "and device=None or 'cpu'")


class ArraySource:
    """Arrays in memory: one chunk (the kernels run it on all threads), and
    thread slices as the parts of the equal-mass passes. Where the chunk is
    filled is the gate's answer (``batch.device``), asked once."""

    prefix = ""  # what error messages start with
    what = "y_prob"  # how messages name the probabilities
    empty = "y_true and y_prob are empty; need at least one sample"

    def __init__(self, y_true, y_prob, *, soft=None, sample_weight=None):
        self.y_true = y_true
        self.y_prob = y_prob
        self.sample_weight = sample_weight  # a weight per row, or None
        self.soft = soft  # True: label distributions only (see resolve)
        self.provenance = {}  # arrays: no file, format or cluster to name

    def fill(self, opts):
        batch = backends.resolve(self.y_true, self.y_prob, logits=opts.logits, soft=self.soft,
                                 device=opts.device, sample_weight=self.sample_weight)
        if opts.transform is not None:
            if batch.device == "cuda":
                raise ValueError(TRANSFORM_ON_GPU)
            batch = backends.resolve(batch.y, opts.transform(batch.p), soft=self.soft,
                                     sample_weight=self.sample_weight)
        if batch.n == 0:
            raise ValueError(self.empty)
        self.batch = batch
        acc = opts.accumulator(batch.n)
        acc.update_batch(batch)
        self.threads = acc.threads
        return acc, acc.n_rows

    @property
    def weighted(self):
        """True if the rows carry weights (``sample_weight``)."""
        return self.sample_weight is not None

    def weights(self):
        """The rows' weights (float64, checked at the gate), or None when every
        weight is 1 or none was given."""
        return self.batch.w

    def parts(self, pair):
        return BatchParts(self.batch, pair, v.check_threads(self.threads))


class BatchParts:
    """The parts of a batch for the equal-mass passes: its backend's gather of
    boundary rows (None on the CPU: the host parts gather in threads), and the
    ranked pair on the host as thread slices (made once, when a pass needs it)."""

    def __init__(self, batch, pair, threads):
        backend = backends.of(batch)
        self.gather = backend.gather(batch, pair)
        self._ranked = lambda: backend.ranked(batch, pair)
        self._ranked_buckets = lambda nb, omit: backend.ranked_buckets(batch, pair, omit, nb,
                                                                       threads)
        self._threads = threads
        self._host = None

    def bucket_stats(self, n_buckets, omit):
        """The pair's value bucket statistics (:func:`~fastcal.accumulators.equal_mass.bucket_stats`):
        made with the pair in one pass where the backend can (a class column), else a pass."""
        if self._host is None:
            made = self._ranked_buckets(n_buckets, omit)
            if made is not None:
                pair, stats = made
                self._host = em.ArrayParts(*pair, self._threads)
                return stats
        return em.bucket_stats(self.host, n_buckets, omit)

    @property
    def host(self):
        if self._host is None:
            self._host = em.ArrayParts(*self._ranked(), self._threads)
        return self._host

    @property
    def n_parts(self):
        return self.host.n_parts

    def map(self, fn, common, per_part=None, combine=None):
        return self.host.map(fn, common, per_part, combine)

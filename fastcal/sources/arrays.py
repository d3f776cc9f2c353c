"""Arrays in memory as a source of the driver (NumPy and friends, or GPU arrays)."""

from fastcal.accumulators import equal_mass as em
from fastcal.inputs import validation as v
from fastcal.inputs.batch import is_soft, resolve, resolve_device


class ArraySource:
    """Arrays in memory: one chunk (the kernels run it on all threads), and
    thread slices as the parts of the equal-mass passes."""

    prefix = ""  # what error messages start with
    what = "y_prob"  # how messages name the probabilities
    empty = "y_true and y_prob are empty; need at least one sample"

    def __init__(self, y_true, y_prob):
        self.y_true = y_true
        self.y_prob = y_prob

    def fill(self, opts):
        from fastcal import cuda

        on_gpu = cuda.is_device_array(self.y_prob)
        if opts.transform is not None and (on_gpu or opts.device == "cuda"):
            msg = ("a recalibration (transform) is applied on the host; pass host arrays "
                   "and device=None or 'cpu'")
            raise ValueError(msg)
        # soft labels have no GPU kernel: scored on the host unless device="cuda"
        if opts.device == "cuda" or (opts.device is None and on_gpu
                                     and not is_soft(self.y_true)):
            return self._fill_device(opts)
        if on_gpu:  # device="cpu", or soft labels: copy to the host first
            self.y_prob = cuda.to_host("y_prob", self.y_prob)
            if cuda.is_device_array(self.y_true):
                self.y_true = cuda.to_host("y_true", self.y_true)
        if opts.transform is not None:
            self.y_prob = opts.transform(v.to_array("y_prob", self.y_prob))
        self.batch = resolve(self.y_true, self.y_prob,
                             logits=opts.logits and opts.transform is None)
        if self.batch.n == 0:
            raise ValueError(self.empty)
        acc = opts.accumulator(self.batch.n)
        acc.update_batch(self.batch)
        self.threads = acc.threads
        return acc, acc.n_rows

    def _fill_device(self, opts):
        """The fill on the GPU (fastcal.cuda); host data is streamed to it in chunks."""
        batch = resolve_device(self.y_true, self.y_prob, logits=opts.logits)
        y, p = batch.y, batch.p
        if batch.kind != "soft" and int(p.shape[0]) == 0:
            raise ValueError(self.empty)
        acc = opts.accumulator(int(p.shape[0]))
        acc.update_device(y, p)  # soft labels: its one-line refusal
        self.threads = acc.threads
        self.batch = None
        self.device_pair = (y, p)
        self.ranked_pair = None
        return acc, acc.n_rows

    def parts(self, pair):
        if self.batch is None:
            return DeviceParts(self, pair)
        y, x = em.ranking_pair(self.batch.y, self.batch.p, **pair)
        return em.ArrayParts(y, x, v.check_threads(self.threads))

    def ranked(self, pair):
        """The (labels, values) that equal-mass bins rank, on the host (made once).
        Logits and K classes in GPU memory are ranked on the GPU (the values its
        fill bucketed: libdevice's exp may differ from the host's by an ulp) and
        only the pair is copied; other data is ranked on the host."""
        if pair.get("column") is not None:  # a class column (TACE): from host rows
            from fastcal import cuda

            y, p = (cuda.to_host(n, a) for n, a in zip(("y_true", "y_prob"), self.device_pair))
            batch = resolve(y, p, logits=pair["logits"], multiclass=True)
            return em.ranking_pair(batch.y, batch.p, **pair)
        if self.ranked_pair is None:
            from fastcal import cuda

            y, p = self.device_pair
            if cuda.is_device_array(p) and (pair["logits"] or p.ndim == 2):
                ry, rx = (a.copy_to_host() for a in cuda.ranking_pair(
                    y, p, logits=pair["logits"], renormalize=pair["renormalize"]))
                self.ranked_pair = v.as_labels_1d(ry), rx
            else:  # binary probabilities are ranked as they are: the same on both
                y, p = (cuda.to_host(n, a) for n, a in zip(("y_true", "y_prob"), (y, p)))
                batch = resolve(y, p, logits=pair["logits"])
                self.ranked_pair = em.ranking_pair(batch.y, batch.p, **pair)
        return self.ranked_pair


class DeviceParts:
    """The parts of data filled on the GPU: ACE's gather of boundary rows runs
    there; every other pass (equal-mass bins, the certain-wrong count) runs on
    the ranked pair copied to the host, made once (``ArraySource.ranked``)."""

    def __init__(self, source, pair):
        self.source = source
        self.pair = pair

    @property
    def gather(self):
        from fastcal import cuda

        y, p = self.source.device_pair
        if not cuda.is_device_array(p) and (self.pair["logits"] or p.ndim != 1):
            return None  # host data is ranked on the host

        def gather(omit, slot, cap_start):
            ry, rx = cuda.ranking_pair(y, p, logits=self.pair["logits"],
                                       renormalize=self.pair["renormalize"])
            return [cuda.gather_buckets(ry, rx, slot, cap_start[-1])]

        return gather

    @property
    def host(self):
        """The ranked pair on the host, as thread slices."""
        y, x = self.source.ranked(self.pair)
        return em.ArrayParts(y, x, v.check_threads(self.source.threads))

    @property
    def n_parts(self):
        return self.host.n_parts

    def map(self, fn, common, per_part=None, combine=None):
        return self.host.map(fn, common, per_part, combine)

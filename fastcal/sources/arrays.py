"""Arrays in memory as a source of the driver (NumPy and friends, or GPU arrays)."""

from fastcal.accumulators import equal_mass as em
from fastcal.inputs import validation as v
from fastcal.inputs.batch import resolve


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
        if opts.device == "cuda" or (opts.device is None and on_gpu):
            return self._fill_device(opts, on_gpu)
        if on_gpu:  # device="cpu": copy to the host first
            self.y_prob = cuda.as_device_array("y_prob", self.y_prob).copy_to_host()
            if cuda.is_device_array(self.y_true):
                self.y_true = cuda.as_device_array("y_true", self.y_true).copy_to_host()
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

    def _fill_device(self, opts, on_gpu):
        """The fill on the GPU (fastcal.cuda); host data is streamed to it in chunks."""
        p = self.y_prob if on_gpu else v.to_array("y_prob", self.y_prob)
        if int(p.shape[0]) == 0:
            raise ValueError(self.empty)
        acc = opts.accumulator(int(p.shape[0]))
        acc.update_device(self.y_true, p)
        self.threads = acc.threads
        self.batch = None
        self.device_pair = (self.y_true, p)
        return acc, acc.n_rows

    def parts(self, pair):
        if self.batch is None:
            return DeviceParts(self, pair)
        y, x = em.ranking_pair(self.batch.y, self.batch.p, **pair)
        return em.ArrayParts(y, x, v.check_threads(self.threads))

    def host_batch(self, pair):
        """The device data copied to the host (once), resolved like host input."""
        if self.batch is None:
            from fastcal import cuda

            y, p = (cuda.as_device_array(n, a).copy_to_host() if cuda.is_device_array(a)
                    else v.to_array(n, a) for n, a in zip(("y_true", "y_prob"),
                                                          self.device_pair))
            self.batch = resolve(y, p, logits=pair["logits"])
        return self.batch


class DeviceParts:
    """The parts of data filled on the GPU. ACE's gather of boundary rows runs
    there (binary probabilities); every other pass (equal-mass bins, logits,
    K classes, the certain-wrong count) runs on a host copy, made once."""

    def __init__(self, source, pair):
        self.source = source
        self.pair = pair

    @property
    def gather(self):
        if self.pair["logits"] or self.source.device_pair[1].ndim != 1:
            return None  # ranked values are computed on the host

        def gather(omit, slot, cap_start):
            from fastcal import cuda

            y, p = self.source.device_pair
            return [cuda.gather_buckets(y, p, slot, cap_start[-1])]

        return gather

    def map(self, fn, common, per_part=None, combine=None):
        batch = self.source.host_batch(self.pair)
        y, x = em.ranking_pair(batch.y, batch.p, **self.pair)
        return em.ArrayParts(y, x, v.check_threads(self.source.threads)).map(
            fn, common, per_part, combine)

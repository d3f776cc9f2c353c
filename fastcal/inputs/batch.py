"""The input gate: what the user passed, resolved once into a typed batch.

``resolve`` turns labels and predictions (NumPy, pandas, polars, pyarrow,
torch, lists, or arrays in GPU memory) into validated arrays, decides their
kind and where they are filled; nothing after the gate asks either question
again. Kinds:

- ``"binary"``: y 0/1 (n,), p probabilities of class 1 (n,)
- ``"logits"``: y 0/1 (n,), p logits of class 1 (n,)
- ``"multiclass"``: y class indices (n,), p (n, K) probabilities or logits;
  K = 2 too (scikit-learn's ``predict_proba`` of a binary model): scored as 2
  classes, top-label, and the report says so (:data:`TWO_CLASSES`)
- ``"soft"``: y (n, K) label distributions, p (n, K) probabilities or logits

Devices: ``"cpu"`` (host numpy arrays) or ``"cuda"`` (arrays in GPU memory,
or host arrays that the GPU backend streams to the device). The gate asks
where the data lives and where it is filled (:func:`placement`) and checks
what it can without reading GPU memory (:func:`device_kind`); bringing data
there (device views, casts on the GPU, host copies) is the GPU backend's,
and :func:`fastcal.backends.resolve` is the door that does both.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from fastcal.inputs import device as dev
from fastcal.inputs import validation as v

KINDS = ("binary", "logits", "multiclass", "soft")
DEVICES = ("cpu", "cuda")

# What a report of (n, 2) predictions says: the gate scores them as 2 classes, top-label
TWO_CLASSES = ("2 probability columns are scored as K = 2 classes, top-label: a row's bin is "
               "that of its larger probability, and accuracy that of the argmax. For the binary "
               "report of class 1, pass its column alone: y_prob[:, 1] in Python (logits: "
               "z[:, 1] - z[:, 0]), --prob with that one column on the command line.")

SOFT_ON_GPU = ("device='cuda': soft labels (a 2-D y_true, one label distribution per row) "
               "have no GPU kernel; score them on the host (device=None or 'cpu', or "
               "update() with host arrays)")


@dataclass(kw_only=True)
class OnDevice:
    """What a batch of arrays filled on ``device`` shares: ``host()``, its arrays
    on the host (themselves on the CPU; GPU data copied once, by ``to_host``,
    which the GPU backend's batches define). A subclass names its array
    ``fields`` and the arguments they came from (``names``, for messages)."""

    device: str = "cpu"
    _host: tuple | None = field(default=None, repr=False)

    fields: ClassVar[tuple[str, ...]] = ()
    names: ClassVar[tuple[str, ...]] = ()

    def host(self):
        """The arrays of ``fields`` on the host: themselves on the CPU, a copy (made
        once) of GPU data."""
        arrays = tuple(getattr(self, f) for f in self.fields)
        if self.device == "cpu":
            return arrays
        if self._host is None:
            self._host = tuple(self.to_host(name, x) for name, x in zip(self.names, arrays))
        return self._host

    @staticmethod
    def to_host(name, x):
        """Host arrays as they are (GPU data: see the GPU backend's batches)."""
        return x


@dataclass
class Batch(OnDevice):
    """Validated labels ``y`` and predictions ``p`` of one ``kind``, filled on ``device``
    (``y`` None for predictions alone: :func:`resolve_predictions`)."""

    kind: str
    y: object
    p: object
    # a weight per row (float64, on the host) or None; ``weighted``: the rows carry
    # weights (True also when every weight is 1, which ``w`` then leaves out: those
    # rows are filled by the unweighted kernels, and their state is the same)
    w: object = None
    weighted: bool = False

    fields = ("y", "p")
    names = ("y_true", "y_prob")

    @property
    def n(self):
        return int(self.p.shape[0])

    @property
    def dtype(self):
        """The numpy dtype of ``p`` (GPU arrays too)."""
        return dev.dtype_of(self.p)

    def context(self):
        """What error messages quote: the rows, on the host (GPU data: copied only
        when a message needs it)."""
        return {"y": lambda: self.host()[0], "p": lambda: self.host()[1],
                "t": lambda: self.host()[0]}


def kind_of(y, p, *, logits=False, multiclass=False, soft=None):
    """The kind of input ("binary", "logits", "multiclass" or "soft") of y_true
    and y_prob from their shapes alone (anything with ``.shape``: GPU and Dask
    arrays too), with the messages of the checks of :mod:`fastcal.inputs.validation`
    for shapes that fit none. ``multiclass`` insists on (n, K) class indices;
    ``soft``: None reads a 2-D y_true as label distributions, True insists on
    them, False refuses them (hard labels only)."""
    ys, ps = tuple(y.shape), tuple(p.shape)
    if soft:
        v.check_soft_labels_shape(ys)
    if soft or (soft is None and not multiclass and len(ys) == 2):
        v.check_prob_2d_shape(ps, logits)
        v.check_soft_shape(ys, ps)
        return "soft"
    if len(ps) == 2 or multiclass:
        v.check_prob_2d_shape(ps, logits)
        v.check_class_labels_shape(ys, ps[0])
        return "multiclass"
    v.check_labels_1d_shape(ys)
    v.check_prob_1d_shape(ps)
    v.check_lengths(ys, ps)
    return "logits" if logits else "binary"


def declared_kind(*, logits=False, n_classes=None):
    """The kind an accumulator's options declare before any data: "multiclass"
    with ``n_classes``, else "logits" or "binary" (a first batch of K classes or
    soft labels replaces an empty binary state)."""
    if v.check_n_classes(n_classes) is not None:
        return "multiclass"
    return "logits" if logits else "binary"


def prediction_kind(p, *, logits=False):
    """The kind of predictions alone (anything with ``.shape``): "binary" or
    "logits" for one value per row, "multiclass" for (N, K)."""
    if len(p.shape) not in (1, 2):
        msg = f"y_prob must be 1-D or (N, K); got shape {p.shape}"
        raise ValueError(msg)
    if len(p.shape) == 2:
        return "multiclass"
    return "logits" if logits else "binary"


def resolve_predictions(y_prob, *, logits=False):
    """The batch of predictions without labels (``y`` None), on the host: what
    a fitted recalibration map transforms. ``p`` is converted, not cast."""
    p = v.to_array("y_prob", y_prob)
    return Batch(prediction_kind(p, logits=logits), None, v.kernel_view(p))


def lazy_kind(y_true, y_prob, *, logits=False):
    """The kind of lazy arrays (Dask) from their shapes, before any block is
    computed: 1-D labels with 1-D or (N, K) predictions, or (N, K) label
    distributions with (N, K) predictions."""
    kind = prediction_kind(y_prob, logits=logits)
    if y_true.ndim == 2 and kind == "multiclass":  # label distributions, one per row
        return "soft"
    if y_true.ndim != 1:
        msg = (f"y_true must be 1-D with one label per sample, or (N, K) label distributions "
               f"with an (N, K) y_prob; got shapes {y_true.shape} and {y_prob.shape}")
        raise ValueError(msg)
    return kind


def placement(y_true, y_prob, *, multiclass=False, soft=None, device=None):
    """Where a pair is filled: "cuda" or "cpu". ``device`` None fills where
    ``y_prob`` is (arrays in GPU memory on the GPU; soft labels, which have no
    GPU kernel, on the host); "cpu" and "cuda" as asked."""
    if device is not None:
        v.check_choice("device", device, DEVICES)
    if soft:
        v.check_soft_labels_shape(_shape_of("y_true", y_true))
    if device == "cuda" or (device is None and dev.is_device_array(y_prob)
                            and (multiclass or soft is False or not is_soft(y_true))):
        return "cuda"
    return "cpu"


def resolve(y_true, y_prob, *, logits=False, multiclass=False, soft=None, sample_weight=None,
            first_row=0):
    """The validated batch of host (y_true, y_prob) (NumPy and friends; arrays in
    GPU memory come through :func:`fastcal.backends.resolve`); ``multiclass``
    insists on (n, K) class indices. A 2-D ``y_true`` holds soft labels (kind
    "soft"); ``soft`` True insists on them, False refuses them (a pass that
    ranks hard labels). ``sample_weight``: a weight per row, checked here
    (:func:`weigh`; ``first_row``: the global row of the first, for its messages)."""
    p = v.to_array("y_prob", y_prob)
    if soft or (soft is None and not multiclass and is_soft(y_true)):
        if sample_weight is not None:
            raise ValueError(SOFT_WEIGHTS)
        t, p = v.check_soft_pair(y_true, p, logits)
        return Batch("soft", t, p)
    if p.ndim == 2 or multiclass:
        y, p = v.check_class_pair(y_true, p, logits)
        return weigh(Batch("multiclass", y, p), sample_weight, first_row)
    y, p = v.check_pair(y_true, p)
    return weigh(Batch("logits" if logits else "binary", y, p), sample_weight, first_row)


SOFT_WEIGHTS = ("sample_weight: soft labels (a 2-D y_true, one label distribution per row) "
                "take no weights; pass hard labels or leave sample_weight out")


def weigh(batch, sample_weight, first_row=0):
    """``batch`` with its rows' weights: ``sample_weight`` checked (a 1-D array of
    one finite weight >= 0 per row, not all 0; one line naming it, the count and
    the first index, counted from ``first_row``, otherwise) and kept as float64
    whatever its dtype. Weights
    that are all 1 mark the batch weighted and are dropped: the unweighted fill
    gives the same state."""
    if sample_weight is None:
        return batch
    w = v.check_sample_weight(sample_weight, batch.n, start=int(first_row)).view()
    w.setflags(write=False)  # one array type for the kernels, whatever the caller passed
    batch.weighted = True
    batch.w = None if bool((w == 1.0).all()) else w
    return batch


def _shape_of(name, x):
    shape = getattr(x, "shape", None)
    return tuple(v.to_array(name, x).shape if shape is None else shape)


def is_soft(y_true):
    """True if y_true is 2-D (one label distribution per row)."""
    return len(_shape_of("y_true", y_true)) == 2


def check_hard_labels(y_true):
    """Refuse label distributions (2-D ``y_true``): the segments' verdict tests each
    segment's ECD, which soft labels do not have."""
    if is_soft(y_true):
        msg = ("by= needs 0/1 labels or class indices; y_true holds label distributions "
               "(2-D), whose reports have no ECD test to name miscalibrated segments: score "
               "each segment's rows with calibration_report instead")
        raise ValueError(msg)


def device_kind(y, p, *, logits=False, multiclass=False, soft=None):
    """(kind, labels dtype, probabilities dtype) of a pair filled on the GPU, from
    shapes and dtypes alone (anything with ``.shape`` and ``.dtype``): the same
    checks and messages as on the host, without reading the data. Probabilities
    are scored as float16 -> float32, integer and bool -> float64; labels
    in GPU memory are read in their own dtype (bool as uint8, float16 as
    float32), host class indices as on the CPU."""
    kind = kind_of(y, p, logits=logits, multiclass=multiclass, soft=soft)
    if kind == "soft":
        raise ValueError(SOFT_ON_GPU)
    y_type = dev.dtype_of(y)
    y_dtype = v.class_label_dtype(y_type) if kind == "multiclass" else v.label_dtype(y_type)
    if dev.is_device_array(y):  # class indices are read on the GPU in their own dtype
        y_dtype = v.label_dtype(y_type)
    return kind, y_dtype, v.prob_dtype("y_prob", dev.dtype_of(p))


__all__ = ["Batch", "DEVICES", "KINDS", "OnDevice", "device_kind", "kind_of", "placement",
           "resolve", "resolve_predictions"]

"""One suite of backend cases, run through the CPU and the CUDA backend.

Each case is a row of a table: host inputs, options and the agreement expected
(fields equal to the reference at 1e-12 relative, counts exact; or the CPU's
error message). ``test_report_case[<backend>-<case>]`` and
``test_gaussian_case[<backend>-<case>]`` run it with the data placed on that
backend (``cpu``: host arrays, ``device="cpu"``; ``cuda``: Numba device arrays,
or host arrays streamed with ``device="cuda"``) and compare it with the same
reference: the report of the host arrays (the CPU's), or NumPy's NEES for the
Gaussian cases.

The ``cuda`` half runs under Numba's CUDA simulator, which has to be switched on
before numba is imported, so in the main process each ``cuda`` case waits for
the same test in a child ``python -m pytest`` with ``NUMBA_ENABLE_CUDASIM=1``
(started early and run beside the suite: tests/subsuites.py) and takes its
outcome; inside that child (or tests/backends/test_cuda_gpu.py's real-GPU run) only the
``cuda`` half is collected. Kernel-level checks with no CPU counterpart (launch
plans, warp sums, staging buffers) stay in tests/backends/test_cuda_sim.py.

Cases are small: every simulated launch is Python threads, and the simulator's
time is the suite's. Paths that cost a launch (``stream``, ``merge``) are on
the cases that need them.
"""

from dataclasses import dataclass, field
import functools
import operator
import sys

import numpy as np
import pytest

import fastcal
from fastcal.accumulators.calibration import CalibrationAccumulator
from fastcal.gaussian import GaussianAccumulator, gaussian_ecd
from tests import naive, subsuites
from tests.api.test_multiclass import TIED, tied_rows

CASES = subsuites.CASES  # in the child (simulator) or on a real GPU: the cuda half only
BACKENDS = ("cuda",) if CASES else ("cpu", "cuda")

suite_run = subsuites.simulator_run  # started early, beside the rest (tests/subsuites.py)


def in_child(item):
    """True for a test that runs in the child (the cuda half, seen from the main process)."""
    callspec = getattr(item, "callspec", None)
    return not CASES and callspec is not None and callspec.params.get("backend") == "cuda"


if subsuites.SIM:
    # simulated threads meet at every syncthreads: a short switch interval lets them
    # meet in microseconds rather than 5 ms (as tests/backends/test_cuda_sim.py)
    sys.setswitchinterval(1e-5)

REPORT = ("n", "n_omitted", "ece", "esce", "mce", "ace", "ecd", "brier", "nll")
MEASURES = ("brier", "ece_l2", "ece_debiased", "brier_reliability", "brier_resolution",
            "brier_uncertainty", "brier_within_variance", "brier_within_covariance")
MERGED = ("n", "ece", "ecd", "brier", "nll")  # binned fields of a merged accumulator


# -- where the data lives -------------------------------------------------------

def _place(backend, *arrays):
    """The arrays as the backend holds them: host arrays for the CPU, device
    arrays (any shape, 0-D included) for CUDA."""
    if backend == "cpu":
        return arrays
    from numba import cuda

    return tuple(cuda.to_device(np.ascontiguousarray(a).reshape(-1)).reshape(np.shape(a))
                 for a in arrays)


def _guard(monkeypatch, backend, names):
    """Make the named host paths (dotted names) raise for data on the GPU: what a
    case says must stay on the device. The CPU backend is the host: nothing to guard."""
    if backend != "cuda":
        return
    for name in names:
        def no_copy(*args, _name=name, **kwargs):
            raise AssertionError(f"device rows copied to the host ({_name})")

        monkeypatch.setattr(name, no_copy)


# -- the report cases -----------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One report case: ``data()`` gives host (y, p); ``opts`` the keywords of
    ``entry`` (``calibration_report``, or ``smece`` with ``args``)."""

    name: str
    data: object
    opts: dict = field(default_factory=dict)
    fields: tuple = REPORT          # equal to the reference (rtol 1e-12, atol 1e-15)
    bins: bool = True               # the per-bin counts equal
    intervals: tuple = ()           # bootstrap intervals equal (rtol 1e-12); "all": every one
    equal: tuple = ()               # attributes equal exactly (==)
    finite: tuple = ()              # fields finite on the backend
    omitted: int = None             # n_omitted of both
    stream: bool = False            # also host arrays with device=backend
    merge: int = 0                  # also rows [:merge] on the backend + the rest merged
    merge_state: tuple = ("counts",)  # accumulator arrays the merge must equal exactly
    merge_close: tuple = ()         # accumulator arrays equal at 1e-12
    merge_fields: tuple = MERGED    # fields of the merged report (rtol 1e-12)
    buckets: bool = False           # ACE's value buckets of an accumulator equal
    on_device: tuple = ()           # host paths that must not run for data on the GPU
    error: tuple = None             # bad input: the CPU's message, which contains these
    refuse: dict = None             # backend -> the message it refuses with
    n: int = None                   # the reference's row count
    naive: bool = False             # also equal to tests/naive.py's loops (binary p)
    zero_sums: tuple = ()           # entries of report.sums exactly 0 on the backend
    verdict: str = None             # the backend's verdict
    entry: str = "calibration_report"
    args: tuple = ()


def _close(got, ref, names, rtol=1e-12, atol=1e-15):
    for name in names:
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=rtol,
                                   atol=atol, err_msg=name)


@functools.lru_cache(maxsize=None)
def _binary(dtype, seed, n, edge_rows, tie=None, nan=()):
    rng = np.random.default_rng(seed)
    p = rng.random(n).astype(dtype)
    if tie is not None:
        p[:300] = dtype(tie)  # ties across a group boundary: split by row order
    else:
        p[:edge_rows] = (np.arange(edge_rows) % 11 / 10).astype(dtype)  # values on edges
    y = (rng.random(n) < p).astype(np.uint8)
    for i in nan:
        p[i] = np.nan
    return y, p


@functools.lru_cache(maxsize=None)
def _logit_rows(kind):
    """(y, x) of 800 rows of 3 classes: class logits, their softmax, or the first
    column as binary logits."""
    rng = np.random.default_rng(12)
    z = rng.normal(size=(800, 3)) * 2
    y = rng.integers(0, 3, 800)
    if kind == "class logits":
        return y, z
    if kind == "classes":
        return y, np.exp(z) / np.exp(z).sum(1, keepdims=True)
    return (y == 0).astype(np.uint8), z[:, 0].copy()


RANKED_OPTS = {"classes": {}, "classes, renormalize": dict(renormalize=True),
               "class logits": dict(logits=True), "binary logits": dict(logits=True)}


@functools.lru_cache(maxsize=None)
def _ranked(kind, nan=False, sigmoid=False):
    """(y, scores) of one input kind (options: RANKED_OPTS), with 300 tied rows
    whose ranked values sit across a group boundary (split by row order); ``nan``:
    rows 3 and 900 NaN; ``sigmoid``: binary logits as probabilities."""
    n = 1200
    rng = np.random.default_rng(21)
    z = rng.normal(size=(n, 3)) * 2
    z[200:500] = [1.0, 0.25, -0.5]
    if kind == "binary logits":
        y, s = (rng.random(n) < 1 / (1 + np.exp(-z[:, 0]))).astype(np.uint8), z[:, 0].copy()
    else:
        y = rng.integers(0, 3, n)
        P = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        s = {"class logits": z, "classes, renormalize": (P * 3).astype(np.float32)}.get(kind, P)
    if nan:
        s = s.copy()
        s[[3, 900]] = np.nan
    return y, (1 / (1 + np.exp(-s)) if sigmoid else s)


@functools.lru_cache(maxsize=None)
def _dtype_inputs():
    # integer and bool probabilities are float64 on the CPU, float16 ones float32
    rng = np.random.default_rng(21)
    y = (rng.random(400) < 0.6).astype(np.uint8)
    p_int = (rng.random(400) < 0.6).astype(np.int64)
    p16 = rng.random(400).astype(np.float16)
    p16[:30] = (np.arange(30) % 11 / 10).astype(np.float16)  # on the edges
    cases = [(y, p_int, {}), (y, p_int.astype(np.uint8), {"closed": "right"}),
             (y, p_int.astype(bool), {"closed": "right"}),
             (y, p16, {"ci": 0.9, "n_boot": 10}), (y.astype(np.float16), p16, {}),
             (y.astype(bool), p16, {"strategy": "quantile", "n_bins": 7})]
    K = 3
    yk = rng.integers(0, K, 300)
    Pk = np.eye(K, dtype=np.int32)[rng.integers(0, K, 300)]
    cases += [(yk, Pk, {}), (yk.astype(np.float16), rng.dirichlet([1] * K, 300)
                             .astype(np.float16), {"n_bins": 15, "renormalize": True})]
    return cases


def _tied_pair(kind):
    return tied_rows(kind)[:2]


def _dtype_pair(i):
    return _dtype_inputs()[i][:2]


@functools.lru_cache(maxsize=None)
def _measures_binary(dtype, logits):
    rng = np.random.default_rng(3)
    p = rng.random(1500).astype(dtype)
    y = (rng.random(1500) < p ** 1.2).astype(np.uint8)
    return (y, np.log(p.astype(np.float64) / (1 - p))) if logits else (y, p)


@functools.lru_cache(maxsize=None)
def _measures_classes(logits):
    rng = np.random.default_rng(4)
    z = rng.normal(size=(900, 3)) * 1.5
    y = rng.integers(0, 3, 900)
    return y, (z if logits else np.exp(z) / np.exp(z).sum(1, keepdims=True))


@functools.lru_cache(maxsize=None)
def _smooth(n, seed, nan=False, logits=False):
    """(y, p) with p holding 0, 1 and 0.5; ``nan``: row 17 NaN; ``logits``: the
    rows after those three, as logits."""
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    p[:3] = [0.0, 1.0, 0.5]
    y = (rng.random(n) < p).astype(np.uint8)
    if nan:
        p[17] = np.nan
    if logits:
        return y[3:], np.log(p[3:] / (1 - p[3:]))
    return y, p


@functools.lru_cache(maxsize=None)
def _smooth_classes():
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(3), 600)
    return rng.integers(0, 3, 600), probs


@functools.lru_cache(maxsize=None)
def _soft():
    rng = np.random.default_rng(5)
    P, T = rng.dirichlet([1, 1, 1], 60), rng.dirichlet([1, 1, 1], 60)
    return T, P


_ROWS = np.array([[0.2, 0.3, 0.5]] * 4)


def _rows(i, row):
    out = _ROWS.copy()
    out[i] = row
    return out


BAD_INPUT = [  # (name, y, p, options, words of the message): invalid rows of each kind
    ("range", np.array([0, 1, 1, 0, 1], np.uint8), np.array([0.1, 0.5, 1.5, 0.2, 2.0]), {},
     ("2 values outside [0, 1]", "index 2")),
    ("label", np.array([0, 1, 2, 0, 1, 2], np.uint8), np.full(6, 0.5), {},
     ("2 labels other than 0 and 1", "index 2")),
    ("nan p", np.array([0, 1, 1, 0], np.uint8), np.array([0.1, np.nan, 0.3, np.nan]), {},
     ("2 NaN values", "index 1")),
    ("nan y", np.array([0, 1, np.nan, 0]), np.array([0.1, 0.2, 0.3, 0.4]), {},
     ("y_true contains 1 NaN", "index 2")),
    ("nan logit", np.array([0, 1, 1, 0], np.uint8), np.array([0.1, 2.0, np.nan, -1.0]),
     {"logits": True}, ("1 NaN values", "index 2")),
    ("class label", np.array([0, 1, 3, 2]), np.full((4, 3), 1 / 3), {},
     ("1 labels outside the class indices 0..2", "label 3 at row 2")),
    ("class nan", np.array([0, 1, 2, 2]), _rows(2, [np.nan, 0.5, 0.5]), {},
     ("NaN in 1 rows", "row 2")),
    ("class negative", np.array([0, 1, 2, 2]), _rows(1, [-0.2, 0.7, 0.5]), {},
     ("negative probabilities in 1 rows", "row 1")),
    ("class sum", np.array([0, 1, 2, 2]), _rows(1, [0.2, 0.3, 0.6]), {},
     ("1 rows that do not sum to 1", "row 1")),
    ("class logit inf", np.array([0, 1, 2, 2]), _rows(1, [0.2, np.inf, 0.6]), {"logits": True},
     ("+inf, or every logit -inf in 1 rows", "row 1")),
]
BAD_SHAPES = [
    ("lengths", np.zeros(3, np.uint8), np.full(4, 0.5)),
    ("empty p", np.zeros(4, np.uint8), np.zeros(0)),
    ("one class column", np.zeros(6, np.int64), np.full((6, 1), 1.0)),
    ("rows", np.zeros(6, np.int64), np.full((5, 3), 1 / 3)),
    ("3-D p", np.zeros(6, np.uint8), np.full((6, 3, 1), 0.5)),
    ("0-D", np.array(1), np.array(0.5)),
    ("2-D y, 1-D p", np.zeros((6, 1)), np.full(6, 0.5)),
    ("complex p", np.zeros(6, np.uint8), np.full(6, 0.5, np.complex128)),
    ("string labels", np.array(["a", "b"]), np.full(2, 0.5)),
]

_NO_RANK_COPY = ("fastcal.backends.cuda.ranked",)  # the ranked pair copied to the host
_SOFT_REFUSAL = r"^device='cuda': soft labels .* no GPU kernel"


def _report_cases():
    cases = []
    for dt, tag in ((np.float32, "f32"), (np.float64, "f64")):
        # device arrays, host data streamed, and the merged state of both devices
        cases.append(Case(f"binary-{tag}-ci", functools.partial(_binary, dt, 11, 3000, 40),
                          dict(n_bins=10, ci=0.9, n_boot=10), intervals=("ece",),
                          stream=True, merge=1000, naive=True))
        # ACE's buckets and its gather of boundary rows run on the GPU: no host copy
        cases.append(Case(f"binary-{tag}-ace", functools.partial(_binary, dt, 12, 2500, 0, 0.375),
                          dict(n_bins=10), finite=("ace",), buckets=True,
                          on_device=_NO_RANK_COPY, naive=True))
        # NaN rows under omit: the buckets come from the host
        cases.append(Case(f"binary-{tag}-omit",
                          functools.partial(_binary, dt, 12, 2500, 0, 0.375, (7,)),
                          dict(n_bins=10, nan_policy="omit")))
    cases += [Case("class-logits", functools.partial(_logit_rows, "class logits"),
                   dict(logits=True)),
              Case("classes", functools.partial(_logit_rows, "classes")),
              Case("binary-logits", functools.partial(_logit_rows, "binary logits"),
                   dict(logits=True))]
    for kind, kw in RANKED_OPTS.items():
        # ranked on the GPU, buckets filled and boundary rows gathered there: no host
        # copy of the rows, and the CPU's ACE (ties split in row order)
        tag = kind.replace(", ", "-").replace(" ", "-")
        cases.append(Case(f"ranked-{tag}", functools.partial(_ranked, kind),
                          dict(n_bins=10, **kw), finite=("ace",), buckets=True,
                          equal=("passes",), on_device=_NO_RANK_COPY
                          + ("fastcal.backends.cpu.fill_parts",)))
    for kind in ("classes", "binary logits"):
        # NaN rows under omit: the ranked pair comes to the host for the buckets (not
        # the rows); bootstrap replicates are filled on the GPU
        tag = kind.replace(" ", "-")
        data = functools.partial(_ranked, kind, True)
        kw = RANKED_OPTS[kind]
        boot = ("fastcal.backends.cpu.fill_replicates",)  # replicates: on the GPU
        cases += [Case(f"omit-{tag}", data, dict(n_bins=10, nan_policy="omit", **kw),
                       omitted=2, on_device=boot),
                  Case(f"omit-ci-{tag}", data, dict(n_bins=10, nan_policy="omit", ci=0.9,
                                                    n_boot=20, **kw),
                       omitted=2, intervals=("ece", "ecd"), on_device=boot)]
    # quantile bins of binary logits rank the pair on the host, and of their probabilities
    q = dict(n_bins=10, strategy="quantile", nan_policy="omit")
    cases += [Case("quantile-binary-logits", functools.partial(_ranked, "binary logits", True),
                   dict(q, logits=True)),
              Case("quantile-binary-probs",
                   functools.partial(_ranked, "binary logits", True, True), q)]
    # integer, bool and float16 inputs are read as on the CPU (before, integer p met
    # integer edges and every row went to the last bin; float16 crashed with ACE or ci)
    for i, (y, p, opts) in enumerate(_dtype_inputs()):
        tag = f"dtype-{np.dtype(y.dtype).name}-{np.dtype(p.dtype).name}-{i}"
        cases.append(Case(tag, functools.partial(_dtype_pair, i), opts, intervals="all",
                          stream=True))
    # issue 27's measures from the GPU-filled totals (sum p**2, sum p*y)
    for dt, tag in ((np.float32, "f32"), (np.float64, "f64")):
        cases += [Case(f"measures-binary-{tag}", functools.partial(_measures_binary, dt, False),
                       dict(n_bins=8, metrics=("ece_sweep",)),
                       fields=MEASURES + ("ece_sweep",), equal=("ece_sweep_bins",),
                       naive=True),
                  Case(f"measures-binary-logits-{tag}",
                       functools.partial(_measures_binary, dt, True),
                       dict(logits=True, ace=False), fields=MEASURES)]
    for logits in (False, True):
        cases.append(Case("measures-class-logits" if logits else "measures-classes",
                          functools.partial(_measures_classes, logits),
                          dict(n_bins=6, logits=logits, metrics=("tace",)),
                          fields=MEASURES + ("classwise_ece_debiased", "sce", "tace")))
    # smooth ECE: the GPU ranks the values (sigmoid, confidence), the grid is filled
    # from that pair
    cases += [
        Case("smooth-binary", functools.partial(_smooth, 2000, 2), dict(smooth=True, ace=False),
             fields=("smece", "smece_sigma"), naive=True),
        Case("smooth-binary-logits", functools.partial(_smooth, 2000, 2, False, True),
             dict(logits=True), entry="smece"),
        Case("smooth-classes", _smooth_classes, entry="smece", args=(0.05,)),
        # the device state merges with host state, NaN rows omitted
        Case("smooth-omit", functools.partial(_smooth, 1200, 4, True),
             dict(smooth=True, nan_policy="omit", ace=False), fields=("smece",),
             stream=True, merge=500, merge_state=("smooth_n",), merge_close=("smooth_mass",),
             merge_fields=("smece",)),
    ]
    # rows of equal probabilities: the row code takes H of tied rows exactly
    # (multiclass._flat_h), so the ECD sums are 0, not rounding noise read as a signal
    for kind in TIED:
        for closed in ("left", "right"):
            cases.append(Case(f"tied-{kind.replace(' ', '-')}-{closed}",
                              functools.partial(_tied_pair, kind),
                              dict(n_bins=15, closed=closed, **tied_rows(kind)[2]),
                              zero_sums=("sum_ecd", "sum_ecd_var"),
                              verdict="consistent with calibration"))
    # soft labels have no GPU kernel: data in GPU memory is copied to the host,
    # device="cuda" says so in one line
    cases.append(Case("soft", _soft, fields=(), bins=False, equal=("ecd", "n"), n=60,
                      refuse={"cuda": _SOFT_REFUSAL}))
    # bad input and bad shapes: the CPU's message, word for word
    for name, y, p, opts, words in BAD_INPUT + [(*c, {}, ()) for c in BAD_SHAPES]:
        cases.append(Case("bad-" + name.replace(" ", "-").replace(",", ""),
                          functools.partial(tuple, (y, p)), opts, error=words))
    return cases


REPORT_CASES = _report_cases()


def _entry(case):
    """``case.entry`` with the case's options; ``device`` only where it takes one
    (smece follows the data)."""
    fn = getattr(fastcal, case.entry)

    def call(y, p, device=None):
        kw = {} if case.entry != "calibration_report" else {"device": device}
        return fn(y, p, *case.args, **case.opts, **kw)

    return call


def _same(case, got, ref):
    if case.entry != "calibration_report":  # a number
        assert got == pytest.approx(ref, rel=1e-12)
        return
    _close(got, ref, case.fields)
    for name in case.equal:
        assert getattr(got, name) == getattr(ref, name), name
    for name in case.finite:
        assert np.isfinite(getattr(got, name)), name
    if case.bins:
        np.testing.assert_array_equal(got.bins["count"], ref.bins["count"])
    names = (ref.intervals or {}) if case.intervals == "all" else case.intervals
    for name in names:
        np.testing.assert_allclose(got.intervals[name], ref.intervals[name], rtol=1e-12,
                                   atol=1e-15, err_msg=name)
    if case.omitted is not None:
        assert got.n_omitted == ref.n_omitted == case.omitted
    if case.n is not None:
        assert ref.n == case.n
    for name in case.zero_sums:
        assert got.sums[name] == 0.0, name
    if case.verdict is not None:
        assert got.verdict == case.verdict


def _matches_naive(got, y, p, opts):
    """The binary report equals tests/naive.py's float64 loops (as tests/api/test_core.py)."""
    ref = naive.report(y, p, n_bins=opts.get("n_bins", 10), closed=opts.get("closed", "left"))
    assert got.n == ref["n"]
    for name in ("ece", "esce", "mce", "ecd", "brier", "nll", "ecd_var"):
        np.testing.assert_allclose(getattr(got, name), ref[name], rtol=1e-12, atol=1e-13,
                                   err_msg=name)
    np.testing.assert_array_equal(got.bins["count"], ref["count"])


def _accumulator_opts(opts):
    skip = ("ace", "ci", "n_boot", "metrics", "strategy", "seed")
    return {k: v for k, v in opts.items() if k not in skip}


def _check_errors(case, backend, y, p):
    call = _entry(case)
    with pytest.raises(ValueError) as cpu:
        call(y, p)
    msg = str(cpu.value)
    assert all(word in msg for word in case.error), msg
    with pytest.raises(ValueError) as host:
        call(y, p, device=backend)  # host arrays, filled on the backend
    assert str(host.value) == msg
    if y.dtype.kind != "U":  # strings have no device array
        with pytest.raises(ValueError) as placed:
            call(*_place(backend, y, p))
        assert str(placed.value) == msg


@pytest.mark.parametrize("case", REPORT_CASES, ids=[c.name for c in REPORT_CASES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_report_case(backend, case, monkeypatch, request):
    if in_child(request.node):
        subsuites.check_case(request.node, *suite_run())
        return
    y, p = case.data()
    if case.error is not None:
        _check_errors(case, backend, y, p)
        return
    call = _entry(case)
    ref = call(y, p)  # the reference: the CPU's report of the host arrays
    if case.entry == "calibration_report" and case.bins and not ref.n_omitted:
        assert ref.bins["count"].sum() == len(y)
    refusal = (case.refuse or {}).get(backend)
    with monkeypatch.context() as m:
        _guard(m, backend, case.on_device)
        # the data where the backend holds it (a refused device: where the data says)
        got = call(*_place(backend, y, p), device=None if refusal else backend)
    _same(case, got, ref)
    if case.naive:
        _matches_naive(got, y, p, case.opts)
    if case.stream:  # host data streamed to the backend
        _same(case, call(y, p, device=backend), ref)
    if refusal:
        for args in (_place(backend, y, p), (y, p)):
            with pytest.raises(ValueError, match=refusal):
                call(*args, device=backend)
        with pytest.raises(ValueError, match=refusal):
            CalibrationAccumulator().update(*_place(backend, y, p), device=backend)
    acc_opts = _accumulator_opts(case.opts)
    if case.merge:  # the first rows on the backend + the rest on the host
        k = case.merge
        a = CalibrationAccumulator(**acc_opts).update(*_place(backend, y[:k], p[:k]),
                                                      device=backend)
        b = CalibrationAccumulator(**acc_opts).update(y[k:], p[k:], start=k)
        whole = CalibrationAccumulator(**acc_opts).update(y, p)
        merged = a + b
        for name in case.merge_state:
            get = operator.attrgetter(name)
            np.testing.assert_array_equal(get(merged), get(whole), err_msg=name)
        for name in case.merge_close:
            get = operator.attrgetter(name)
            np.testing.assert_allclose(get(merged), get(whole), rtol=1e-12, atol=1e-12,
                                       err_msg=name)
        _close(merged.report(), whole.report(), case.merge_fields)
        _close(whole.report(), ref, case.merge_fields)
    if case.buckets:  # ACE's value buckets of an accumulator
        kw = dict(acc_opts, ace_buckets=256)
        got_acc = CalibrationAccumulator(**kw).update(*_place(backend, y, p), device=backend)
        ref_acc = CalibrationAccumulator(**kw).update(y, p)
        np.testing.assert_array_equal(got_acc.fine_counts, ref_acc.fine_counts)
        np.testing.assert_allclose(got_acc.fine_p, ref_acc.fine_p, rtol=1e-12)


# -- the Gaussian cases ---------------------------------------------------------

def _spd(rng, n, d, dtype=np.float64):
    A = rng.normal(size=(n, d, d))
    return (A @ A.transpose(0, 2, 1) + 0.5 * np.eye(d)).astype(dtype)


def _tracks(rng, shape, d, dtype):
    E = rng.normal(size=(*shape, d)).astype(dtype)
    C = _spd(rng, int(np.prod(shape)), d, dtype).reshape(*shape, d, d)
    return E, C


def _same_acc(got, ref):
    np.testing.assert_array_equal(got.count, ref.count)
    assert got.count.dtype == ref.count.dtype == np.int64
    np.testing.assert_array_equal(np.isnan(got.nees_sum), np.isnan(ref.nees_sum))
    np.testing.assert_allclose(got.nees_sum, ref.nees_sum, rtol=1e-12)


def _numpy_nees(E, C, shape, policy):
    """NumPy's per-group (count, sum) of e^T C^-1 e over the rows (float64)."""
    d = E.shape[-1]
    e = E.astype(np.float64).reshape(-1, d)
    c = C.astype(np.float64).reshape(-1, d, d)
    bad = ~(np.isfinite(e).all(1) & np.isfinite(c).all((1, 2)))
    vals = np.zeros(e.shape[0])
    good = ~bad
    solved = np.linalg.solve(c[good], e[good][..., None])[..., 0]
    vals[good] = np.einsum("ni,ni->n", e[good], solved)
    groups = int(np.prod(shape, dtype=np.int64))
    vals, bad = vals.reshape(-1, groups), bad.reshape(-1, groups)
    if policy == "omit":
        return (~bad).sum(0), vals.sum(0)
    return np.full(groups, vals.shape[0]), np.where(bad.any(0), np.nan, vals.sum(0))


def _gaussian_tracks(backend, dtype, steps, monkeypatch):
    # NaN and inf rows under each policy, raise's message, a host input beside a
    # device one; the device rows are never scored on the host
    from fastcal.backends import cpu as cpu_backend

    cpu_nees = cpu_backend.nees_checked
    host_calls = []

    def counted(*args):
        host_calls.append(1)
        return cpu_nees(*args)

    if backend == "cuda":
        monkeypatch.setattr(cpu_backend, "nees_checked", counted)
    rng = np.random.default_rng(21)
    shape = () if steps is None else (steps,)
    for d in (1, 2, 3, 4):
        E, C = _tracks(rng, (9, *shape), d, dtype)
        E[(2, *(1,) * len(shape))][0] = np.nan  # one bad row, in bin 1 if binned
        C[(5, *(0,) * len(shape))][d - 1, d - 1] = np.inf
        ok_E, ok_C = E[[0, 1, 3, 4, 6, 7, 8]], C[[0, 1, 3, 4, 6, 7, 8]]
        dE, dC = _place(backend, E, C)
        for policy in ("omit", "propagate"):
            ref = GaussianAccumulator(d, shape=shape).update(E, C, nan_policy=policy)
            count, total = _numpy_nees(E, C, shape or (1,), policy)
            np.testing.assert_array_equal(ref.count.reshape(-1), count)
            np.testing.assert_allclose(ref.nees_sum.reshape(-1), total,
                                       rtol=1e-5 if dtype == np.float32 else 1e-10)
            del host_calls[:]
            got = GaussianAccumulator(d, shape=shape).update(dE, dC, nan_policy=policy)
            assert not host_calls, "device rows scored on the host"
            _same_acc(got, ref)
            if not shape:
                np.testing.assert_allclose(gaussian_ecd(dE, dC, nan_policy=policy),
                                           gaussian_ecd(E, C, nan_policy=policy), rtol=1e-12)
        ref = GaussianAccumulator(d, shape=shape).update(ok_E, ok_C)
        got = GaussianAccumulator(d, shape=shape).update(*_place(backend, ok_E, ok_C))
        _same_acc(got, ref)
        # one input on the host, the other on the backend
        _same_acc(GaussianAccumulator(d, shape=shape).update(ok_E, *_place(backend, ok_C)), ref)
        with pytest.raises(ValueError) as cpu:
            GaussianAccumulator(d, shape=shape).update(E, C)
        with pytest.raises(ValueError) as gpu:
            GaussianAccumulator(d, shape=shape).update(dE, dC)
        assert str(gpu.value) == str(cpu.value) and "errors contains NaN" in str(cpu.value)
        with pytest.raises(ValueError) as cpu:
            gaussian_ecd(E, C)
        with pytest.raises(ValueError) as gpu:
            gaussian_ecd(dE, dC)
        assert str(gpu.value) == str(cpu.value)


def _gaussian_covariance_errors(backend, dtype, steps, monkeypatch):
    # covariances that are not symmetric positive definite, and bad shapes: the
    # CPU's message under every policy
    rng = np.random.default_rng(22)
    for d in (2, 3):
        E, C = _tracks(rng, (6, 4), d, dtype)
        asym, not_pd = C.copy(), C.copy()
        asym[3, 2, 0, 1] += 0.5
        not_pd[4, 1] = -np.eye(d)
        for bad in (asym, not_pd):
            for policy in ("raise", "propagate", "omit"):
                with pytest.raises(ValueError) as cpu:
                    GaussianAccumulator(d, shape=(4,)).update(E, bad, nan_policy=policy)
                with pytest.raises(ValueError) as gpu:
                    GaussianAccumulator(d, shape=(4,)).update(*_place(backend, E, bad),
                                                              nan_policy=policy)
                assert str(gpu.value) == str(cpu.value)
            with pytest.raises(ValueError) as cpu:
                gaussian_ecd(E, bad)
            with pytest.raises(ValueError) as gpu:
                gaussian_ecd(*_place(backend, E, bad))
            assert str(gpu.value) == str(cpu.value)
        for args in ((E[:, :3], C), (E, C[..., :1])):
            with pytest.raises(ValueError) as cpu:
                GaussianAccumulator(d, shape=(4,)).update(*args)
            with pytest.raises(ValueError) as gpu:
                GaussianAccumulator(d, shape=(4,)).update(*_place(backend, *args))
            assert str(gpu.value) == str(cpu.value)


GAUSSIAN_CASES = [(f"tracks-{np.dtype(dt).name}-{'flat' if s is None else f'steps{s}'}",
                   _gaussian_tracks, dt, s)
                  for dt in (np.float32, np.float64) for s in (None, 7)]
GAUSSIAN_CASES += [(f"covariance-errors-{np.dtype(dt).name}", _gaussian_covariance_errors, dt,
                    None) for dt in (np.float32, np.float64)]


@pytest.mark.parametrize("case", GAUSSIAN_CASES, ids=[c[0] for c in GAUSSIAN_CASES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gaussian_case(backend, case, monkeypatch, request):
    if in_child(request.node):
        subsuites.check_case(request.node, *suite_run())
        return
    _, check, dtype, steps = case
    check(backend, dtype, steps, monkeypatch)

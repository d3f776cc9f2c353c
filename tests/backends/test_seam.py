"""The device seam (issue 25): the gate records kind and device, backends share
one interface, collaborators follow written protocols, provenance is set by
the driver, and unknown options are errors."""

import inspect
import pickle
import subprocess
import sys

import numpy as np
import pytest

import fastcal
from fastcal import backends
from fastcal.accumulators import base as acc_base
from fastcal.accumulators import ecce as ec
from fastcal.accumulators import equal_mass as em
from fastcal.accumulators.calibration import CLASSES, CalibrationAccumulator, accumulator_for
from fastcal.backends import cpu
from fastcal.gaussian import GaussianAccumulator
from fastcal.inputs.batch import resolve
from fastcal.inputs.gaussian import resolve_gaussian
from fastcal.sources import Parts, Source
from fastcal.sources.arrays import ArraySource, BatchParts
from fastcal.sources.dask import DaskSource, _DaskParts
from fastcal.sources.files import FileSource, _FileParts


def _members(proto):
    """The names a Protocol declares: methods and annotated attributes."""
    names = {n for n, x in vars(proto).items() if inspect.isfunction(x) and not n.startswith("_")}
    names |= {n for n in ("__add__",) if n in vars(proto)}
    return names | set(getattr(proto, "__annotations__", {}))


def _instance_names(cls):
    """Names a class offers: methods, class attributes, and the attributes its
    __init__ sets on self (read from the source: no instance needed)."""
    names = set(dir(cls))
    src = inspect.getsource(cls)
    names |= {m.group(1) for m in __import__("re").finditer(r"self\.(\w+) = ", src)}
    return names


@pytest.mark.parametrize("cls", [ArraySource, FileSource, DaskSource])
def test_every_source_follows_the_source_protocol(cls):
    missing = _members(Source) - _instance_names(cls)
    assert not missing, f"{cls.__name__} lacks {sorted(missing)}"


@pytest.mark.parametrize("cls", [BatchParts, _FileParts, _DaskParts, em.ArrayParts, ec.RowParts])
def test_every_parts_class_follows_the_parts_protocol(cls):
    missing = _members(Parts) - _instance_names(cls)
    assert not missing, f"{cls.__name__} lacks {sorted(missing)}"


def test_both_backends_offer_the_same_interface():
    from fastcal.backends import cuda as gpu  # imports no numba.cuda until a fill runs

    for module in (cpu, gpu):
        assert isinstance(module, backends.Backend), module.__name__
        for name in _members(backends.Backend):
            mine = inspect.signature(getattr(module, name)).parameters
            want = list(inspect.signature(getattr(backends.Backend, name)).parameters)[1:]
            assert list(mine)[: len(want)] == want, (module.__name__, name)


@pytest.mark.parametrize("cls", [*CLASSES.values(), CalibrationAccumulator, GaussianAccumulator])
def test_every_accumulator_follows_the_accumulator_protocol(cls):
    missing = _members(acc_base.Accumulator) - set(dir(cls))
    assert not missing, f"{cls.__name__} lacks {sorted(missing)}"


def test_the_gate_records_kind_and_device_once():
    y = np.array([0, 1, 1, 0], np.uint8)
    p = np.array([0.1, 0.8, 0.6, 0.3])
    batch = resolve(y, p)
    assert (batch.kind, batch.device, batch.n) == ("binary", "cpu", 4)
    assert batch.host()[1] is batch.p  # host data is not copied
    assert resolve(y, np.log(p / (1 - p)), logits=True).kind == "logits"
    P = np.array([[0.2, 0.8], [0.6, 0.4]])
    assert resolve(np.array([1, 0]), P).kind == "multiclass"
    assert resolve(P, P).kind == "soft"
    assert backends.of(batch) is cpu
    assert backends.resolve(y, p).device == "cpu"
    with pytest.raises(ValueError, match=r"^device must be one of"):
        backends.resolve(y, p, device="gpu")
    # soft labels have no GPU kernel: refused at the gate, in one line
    with pytest.raises(ValueError, match=r"^device='cuda': soft labels .* have no GPU kernel"):
        backends.resolve(P, P, device="cuda")


def test_host_scoring_never_imports_the_gpu_backend():
    code = ("import sys, fastcal\n"
            "y, p = fastcal.simulate(2000, seed=0)\n"
            "fastcal.calibration_report(y, p, n_bins=5, ci=0.9, n_boot=5)\n"
            "acc = fastcal.CalibrationAccumulator(n_bins=5).update(y, p)\n"
            "from fastcal.gaussian import gaussian_ecd\n"
            "gaussian_ecd([[1.0, 0.0]], [[[1.0, 0.0], [0.0, 1.0]]])\n"
            "print('fastcal.backends.cuda' in sys.modules, 'numba.cuda' in sys.modules)\n")
    assert _printed(code) == ["False", "False"]


def _printed(code):
    """The words a fresh interpreter running ``code`` prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


def test_a_report_its_verdict_and_its_text_import_no_scipy_module():
    # start-up: scipy.linalg (Numba's BLAS check) and scipy.special (the normal p-values
    # and the bin test's critical value) are half a second of a later process's first
    # report; a binary report, its verdicts and its Markdown need neither (only numba's
    # import of the top-level package)
    code = ("import sys, fastcal\n"
            "y, p = fastcal.simulate(2000, seed=0)\n"
            "r = fastcal.calibration_report(y, p, n_bins=5)\n"
            "r.to_markdown()\n"
            "print(r.verdict in ('over-confident', 'under-confident', "
            "'consistent with calibration'), r.bin_test().critical_z > 2)\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy.') and "
            "m.split('.')[1] in ('linalg', 'special', 'stats')))\n")
    assert _printed(code) == ["True", "True", "[]"]


def test_unknown_accumulator_options_are_an_error_not_dropped():
    with pytest.raises(TypeError, match=r"unknown accumulator option\(s\) n_bin; expected"):
        accumulator_for("binary", n_bin=5)
    # an option of another kind is not used (soft labels have no bins)
    assert accumulator_for("soft", n_bins=5).n_classes is None
    with pytest.raises(TypeError):
        CalibrationAccumulator(n_bin=5)


def test_provenance_is_a_field_set_by_the_driver(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    y, p = fastcal.simulate(3000, sigma=0.5, seed=3)
    rep = fastcal.calibration_report(y, p, n_bins=5)
    assert (rep.provenance.n_rows, rep.provenance.passes) == (3000, rep.passes)
    assert rep.pass_steps == [("fill", 1), ("ACE", 1)] and rep.source is None
    path = tmp_path / "preds.parquet"
    pq.write_table(pa.table({"y": y, "p": p}), path)
    got = fastcal.score_file(str(path), n_bins=5)
    assert (got.source, got.format, got.n_rows, got.passes) == (str(path), "parquet", 3000, 1)
    # provenance is not part of the numbers: the same data from two entry points agree
    assert got.ece == pytest.approx(rep.ece, rel=1e-12)
    assert pickle.loads(pickle.dumps(got)).source == str(path)


def test_gaussian_batches_go_through_the_backend():
    rng = np.random.default_rng(4)
    E = rng.normal(size=(6, 3, 2))
    C = np.broadcast_to(np.eye(2), (6, 3, 2, 2)).copy()
    batch = resolve_gaussian(E, C, (3,))
    assert (batch.d, batch.device) == (2, "cpu")
    acc = GaussianAccumulator(2, shape=(3,)).update_batch(batch)
    filled = cpu.fill_nees(batch, (3,), "raise")
    assert set(filled) == {"count", "nees_sum"}
    np.testing.assert_array_equal(acc.count, filled["count"])
    np.testing.assert_allclose(acc.nees_sum, (E ** 2).sum(axis=(0, 2)), rtol=1e-12)
    with pytest.raises(ValueError, match=r"dimension d=2 on its last axis; this accumulator "
                                         r"expects dim=3"):
        GaussianAccumulator(3, shape=(3,)).update_batch(batch)


# -- the kind of input is decided at the gate only (issue 25) -------------------------

# what asks "what kind of input is this" of arrays: their ndim, a 2-D test of a shape,
# is_soft, or a logits flag choosing between binary kinds
_KIND_QUESTION = (r"\b(?:p|q|y|dp|dy|y_prob|y_true|preds|target)\.ndim\b|np\.ndim\(|is_soft\("
                  r"|len\(\w*shape\) [!=]= 2|\"logits\" if ")
# the gate, its shape checks (messages), and a reader's column count
_KIND_ALLOWED = {"inputs/batch.py", "inputs/validation.py", "sources/readers/npy.py"}


def test_only_the_gate_decides_the_kind_of_input():
    import pathlib
    import re

    root = pathlib.Path(fastcal.__file__).parent
    found = sorted(str(f.relative_to(root)) for f in root.rglob("*.py")
                   if "_kernels" not in f.parts
                   and re.search(_KIND_QUESTION, f.read_text(encoding="utf-8")))
    assert set(found) <= _KIND_ALLOWED, sorted(set(found) - _KIND_ALLOWED)


def test_the_gate_insists_on_or_refuses_soft_labels():
    from fastcal.inputs.batch import kind_of, lazy_kind, prediction_kind, resolve_predictions

    P = np.array([[0.2, 0.8], [0.6, 0.4]])
    y = np.array([1, 0])
    assert resolve(P, P, soft=True).kind == "soft"
    with pytest.raises(ValueError, match=r"^y_true must have shape \(n_samples, n_classes\) "
                                         r"holding label distributions; got shape \(2,\)$"):
        resolve(y, P, soft=True)
    with pytest.raises(ValueError, match=r"^y_true must be 1-D with one class index per sample"):
        resolve(P, P, soft=False)
    assert resolve(y, P, soft=False).kind == "multiclass"
    assert kind_of(P, P) == "soft" and kind_of(y, P) == "multiclass"
    assert prediction_kind(P[:, 0], logits=True) == "logits"
    assert resolve_predictions(P).kind == "multiclass"
    with pytest.raises(ValueError, match=r"^y_prob must be 1-D or \(N, K\); got shape \(1, 2, 2\)$"):
        prediction_kind(P[None])
    assert lazy_kind(P, P) == "soft" and lazy_kind(y, P) == "multiclass"
    with pytest.raises(ValueError, match=r"^y_true must be 1-D with one label per sample, or"):
        lazy_kind(P, P[:, 0])


def test_options_are_checked_when_made_and_carried_as_one_object():
    from fastcal.score import Options

    with pytest.raises(ValueError, match=r"^strategy must be one of"):
        Options(strategy="equal")
    opts = Options(n_bins=7, metrics="ece_sweep")
    assert opts.checked() is opts and opts.metrics == ("ece_sweep",)
    acc = opts.accumulator()
    # the accumulator keeps the settings the options made, not a re-packed copy of them
    assert acc.state.n_bins == 7 and acc._options["n_bins"] == 7
    fresh = CalibrationAccumulator(**acc._options)
    y, p = np.array([0, 1, 1]), np.array([0.2, 0.7, 0.9])
    assert fresh.update(y, p).report().ece == acc.update(y, p).report().ece


# -- values across the seam: the measures of benchmarks/structure.py ------------------

def _structure():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "structure.py"
    spec = importlib.util.spec_from_file_location("structure", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_backends_take_values_and_the_gate_only_asks_where_data_lives():
    structure = _structure()
    # a backend reads no accumulator: it is handed a batch and a spec
    assert structure.accumulator_reads() == []
    # kernel loads, launches, casts and host copies of GPU data are the GPU backend's
    assert structure.gpu_work_outside_backend() == []
    assert len(structure.gate_device_questions()) <= 6
    # fills return named arrays, read by name
    assert structure.positional_state() == []

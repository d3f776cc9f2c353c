"""The docstring examples of every module that holds an exported name run and print what they say."""

import doctest
import importlib
import inspect

import pytest

import fastcal
import tracking

# every module holding a name of fastcal.__all__ or tracking.__all__, and the public modules
# beside them (test_every_export_has_an_example checks that none is missing)
MODULES = [
    "fastcal.metrics", "fastcal.accumulators.calibration", "fastcal.simulate", "fastcal.distributed",
    "fastcal.gaussian", "fastcal.accumulators.gaussian", "fastcal.files", "fastcal.reports.report",
    "fastcal.reports.multiclass_report", "fastcal.reports.stats", "fastcal.significance",
    "fastcal.inputs.binning", "fastcal.score", "fastcal.recalibrate.temperature", "fastcal.soft",
    "fastcal.sklearn", "fastcal.noisy", "fastcal.torch", "fastcal.accumulators.settings",
    "fastcal.io", "fastcal.jit", "fastcal.messages", "fastcal.reports.segmented",
    "fastcal.accumulators.segmented", "fastcal.inputs.segments",
    "tracking", "tracking.models", "tracking.models.base", "tracking.models.motion", "tracking.models.sensors",
    "tracking.filters.kalman", "tracking.kernels.factory", "tracking.montecarlo.scenario",
    "tracking.scoring.consistency", "tracking.montecarlo.compare", "tracking.scoring.files",
    "tracking.scoring.report",
]


def _exported():
    for package in (fastcal, tracking):
        for name in package.__all__:
            yield package.__name__, name, getattr(package, name)
    yield "fastcal.torch", "CalibrationMetric", importlib.import_module("fastcal.torch").CalibrationMetric


# these compile the batched filters of the default scenario (about 20 s each): they run in
# the background child, beside the suite, and leave the kernels cached for the tracking tests
_BACKGROUND = {"tracking", "tracking.montecarlo.compare"}


@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.background)
                                  if m in _BACKGROUND else m for m in MODULES])
def test_docstring_examples(name):
    # import_module: fastcal.simulate the attribute is the function, not the module
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_every_export_has_an_example():
    missing = [f"{package}.{name}" for package, name, obj in _exported()
               if ">>>" not in (inspect.getdoc(obj) or "")]
    assert missing == []
    modules = {obj.__module__ for _, _, obj in _exported()}
    assert sorted(modules - set(MODULES)) == []

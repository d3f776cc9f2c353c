"""The docstring examples of the core modules run and print what they say."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["fastcal.metrics", "fastcal.accumulators.calibration", "fastcal.simulate",
                                  "fastcal.distributed", "fastcal.gaussian"])
def test_docstring_examples(name):
    # import_module: fastcal.simulate the attribute is the function, not the module
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0

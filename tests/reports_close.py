"""Reports compared as the engine promises: counts exactly, floats to 1e-12 relative.

Float sums depend on the order of their additions, and that order on the
machine's vector width (a state filled on an AVX2 machine and the same data
filled on an AVX-512 one differ in the last digits), on the chunking and on
the thread count; ``fastcal._kernels._config`` promises 1e-12 relative across
all of them, never the same bits.
"""

import pytest


def assert_close(x, y, where="report"):
    """``x`` and ``y`` (nested dicts, lists, floats and exact values) agree."""
    if isinstance(x, dict):
        assert isinstance(y, dict) and x.keys() == y.keys(), where
        for key in x:
            assert_close(x[key], y[key], f"{where}.{key}")
    elif isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y), where
        for i, (a, b) in enumerate(zip(x, y)):
            assert_close(a, b, f"{where}[{i}]")
    elif isinstance(x, float) and isinstance(y, float):
        assert x == pytest.approx(y, rel=1e-12, abs=1e-15, nan_ok=True), where
    else:
        assert x == y, where


def assert_reports_close(a, b):
    """Every field of two reports (their ``to_dict()``) agrees."""
    assert_close(a.to_dict(), b.to_dict(), "report")

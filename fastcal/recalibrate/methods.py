"""The four methods by name."""

from fastcal.inputs import validation as v
from fastcal.recalibrate.histogram import HistogramBinning
from fastcal.recalibrate.isotonic import IsotonicCalibration
from fastcal.recalibrate.platt import PlattScaling
from fastcal.recalibrate.temperature import TemperatureScaling

METHODS = ("temperature", "platt", "isotonic", "histogram")


_CLASSES = {"temperature": TemperatureScaling, "platt": PlattScaling,
            "isotonic": IsotonicCalibration, "histogram": HistogramBinning}


def make(method, **options):
    """A fresh recalibration object of ``method`` ("temperature", "platt",
    "isotonic", "histogram") with ``options``."""
    v.check_choice("method", method, METHODS)
    return _CLASSES[method](**options)

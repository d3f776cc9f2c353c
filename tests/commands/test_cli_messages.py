"""A value in a message is shown as plain Python: a numpy scalar the user passed (an
element of an array, a value read from a file) reads 0.9, never np.float64(0.9)."""

import numpy as np
import pytest

import fastcal
from fastcal import noisy, recalibrate
from fastcal.inputs.validation import show
import tracking

Y, P = fastcal.simulate(200, seed=1)

CASES = {
    "n_bins": (lambda: fastcal.calibration_report(Y, P, n_bins=np.float64(2.5)), "got 2.5"),
    "ci": (lambda: fastcal.calibration_report(Y, P, ci=np.float64(1.5)), "got 1.5"),
    "n_boot": (lambda: fastcal.calibration_report(Y, P, ci=0.9, n_boot=np.int64(-1)), "got -1"),
    "seed": (lambda: fastcal.calibration_report(Y, P, ci=0.9, seed=np.float64(1.5)), "got 1.5"),
    "threads": (lambda: fastcal.calibration_report(Y, P, threads=np.int64(0)), "got 0"),
    "tace_threshold": (lambda: fastcal.calibration_report(Y, P, metrics=["tace"],
                                                          tace_threshold=np.float64(2)),
                       "got 2.0"),
    "sweep": (lambda: fastcal.calibration_report(Y, P, sweep=np.str_("uniform")),
              "sweep='uniform'"),
    "closed": (lambda: fastcal.CalibrationAccumulator(closed=np.str_("middle")), "got 'middle'"),
    "alpha": (lambda: fastcal.ece_test(Y, P, alpha=np.float64(2)), "got 2.0"),
    "safe alpha": (lambda: recalibrate.TemperatureScaling(target="safe",
                                                          alpha=np.float64(0.9)).fit(Y, P),
                   "got 0.9"),
    "cv": (lambda: recalibrate.evaluate(Y, P, cv=np.int64(1)), "got 1"),
    "runs": (lambda: fastcal.anees_bounds(np.int64(0), np.int64(4)), "got 0"),
    "dim": (lambda: fastcal.GaussianAccumulator(dim=np.int64(0)), "got 0"),
    "shape": (lambda: fastcal.GaussianAccumulator(dim=2, shape=(np.int64(-1),)), "got (-1,)"),
    "sigma": (lambda: fastcal.simulate(10, sigma=np.float64(-1)), "got -1.0"),
    "smece sigma": (lambda: fastcal.smece(Y, P, sigma=np.float64(-1)), "got -1.0"),
    "n_classes": (lambda: noisy.true_accuracy(0.8, 0.9, n_classes=np.int64(1)), "got 1"),
    "chunk_rows": (lambda: fastcal.score_file("x.parquet", chunk_rows=np.int64(0)), "got 0"),
    "scenario runs": (lambda: tracking.Scenario(runs=np.float64(2.5)), "got 2.5"),
    "motion dt": (lambda: tracking.ConstantVelocity(dt=np.float64(-1)), "got -1.0"),
    "sensor sigma": (lambda: tracking.RangeBearingSensor(sigma_r=np.float64(-1),
                                                         sigma_theta=0.1), "got -1.0"),
}


@pytest.mark.parametrize("name", CASES)
def test_a_numpy_value_is_shown_as_plain_python(name):
    call, text = CASES[name]
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "np." not in message and text in message, message


def test_show_is_repr_of_the_plain_value():
    assert show(np.float32(0.5)) == "0.5"
    assert show(np.int64(3)) == "3"
    assert show(np.str_("left")) == "'left'"
    assert show((np.int64(2), 3)) == "(2, 3)"
    assert show([np.float64(1.5)]) == "[1.5]"
    assert show("x.parquet") == "'x.parquet'"
    assert show(None) == "None"

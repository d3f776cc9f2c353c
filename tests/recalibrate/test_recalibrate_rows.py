"""K-class rows after a top-label map (isotonic, histogram binning): the other
classes rescaled to share the rest stay finite, non-negative and sum to 1,
whatever their own sum is (subnormal and zero included)."""

import warnings

import numpy as np
import pytest

import fastcal
from fastcal import recalibrate as rc
from fastcal.recalibrate.binned import with_top_label

METHODS = ("isotonic", "histogram")


def _check_rows(q):
    assert np.isfinite(q).all() and (q >= 0).all()
    assert np.abs(q.sum(axis=1) - 1.0).max() <= 4e-16


@pytest.mark.parametrize("method", METHODS)
def test_other_classes_summing_to_a_subnormal_stay_finite(method):
    p = np.array([[1.0, 3e-317, 0.0], [1.0, 3e-317, 1e-320], [0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    y = np.array([0, 1, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or invalid-value warning either
        q = rc.make(method).fit(y, p).transform(p)
    _check_rows(q)
    top = q[0, 0]
    assert top < 1.0
    # the other classes keep their ratios: all of the rest to the one that is not 0
    assert q[0].tolist() == [top, 1.0 - top, 0.0]
    assert q[1, 1] / q[1, 2] == pytest.approx(3e-317 / 1e-320, rel=1e-3)  # subnormal digits


def test_the_rescale_by_hand():
    q = np.array([[1.0, 3e-317, 0.0], [1.0, 0.0, 0.0], [0.5, 0.3, 0.2], [np.nan] * 3])
    k = np.array([0, 0, 0, 0])
    out = with_top_label(q, k, np.array([0.75, 0.75, 0.5, np.nan]))
    np.testing.assert_array_equal(out[:3], [[0.75, 0.25, 0.0], [0.75, 0.125, 0.125],
                                            [0.5, 0.3, 0.2]])
    assert np.isnan(out[3]).all()  # a NaN row stays NaN


@pytest.fixture(scope="module")
def digits_half():
    """scikit-learn's digits, GaussianNB fitted on a stratified half, probabilities
    of the other half: row 194 is 1 for class 7 and 3.1e-317 for class 9."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    X, y = load_digits(return_X_y=True)
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
    return yb, GaussianNB().fit(Xa, ya).predict_proba(Xb)


@pytest.mark.parametrize("method", METHODS)
def test_digits_gaussian_nb_row_194(digits_half, method):
    y, p = digits_half
    rest = np.delete(p[194], 7)
    assert p[194, 7] == 1.0 and 0.0 < rest.sum() < np.finfo(np.float64).tiny
    q = rc.make(method).fit(y, p).transform(p)
    _check_rows(q)
    assert q[194, 9] == 1.0 - q[194, 7] and np.delete(q[194], [7, 9]).max() == 0.0
    rep = fastcal.calibration_report(y, q)  # the report accepts the output
    assert rep.n == len(y)

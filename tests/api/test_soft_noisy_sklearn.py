"""Soft labels and noisy-label accuracy (the Towards Data Science posts on calibration), scikit-learn scorers."""


import numpy as np
import pytest

import fastcal
from fastcal import soft
from fastcal.noisy import true_accuracy
from tests import naive_multiclass as nm


def soft_data(n, k, seed):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(k), size=n)
    # annotator votes: 5 annotators per item, frequencies as the soft label
    votes = np.array([rng.multinomial(5, p) for p in P])
    T = votes / 5.0
    return T, P


@pytest.mark.parametrize("k", [2, 3, 6])
def test_soft_report_matches_reference(k):
    T, P = soft_data(500, k, seed=k)
    P[0] = np.eye(k)[0]  # exact zeros in the prediction
    T[0] = np.eye(k)[0]
    r = soft.soft_label_report(T, P)
    ref = nm.soft(T, P)
    for name in ("entce", "entce_signed", "rankcs", "distce", "brier", "nll", "ecd"):
        assert getattr(r, name) == pytest.approx(ref[name], rel=1e-12, abs=1e-14), name
    assert r.n == 500
    assert soft.entce(T, P) == r.entce and soft.rankcs(T, P) == r.rankcs
    assert soft.distce(T, P) == r.distce


def test_soft_labels_through_the_main_functions_and_one_hot_agreement():
    T, P = soft_data(300, 4, seed=1)
    assert fastcal.brier_score(T, P) == pytest.approx(nm.soft(T, P)["brier"], rel=1e-12)
    assert fastcal.log_loss(T, P) == pytest.approx(nm.soft(T, P)["nll"], rel=1e-12)
    assert fastcal.ecd(T, P) == pytest.approx(nm.soft(T, P)["ecd"], rel=1e-12)
    # one-hot soft labels give the hard-label eq. 12 ECD, NLL and Brier
    y = np.random.default_rng(2).integers(0, 4, 300)
    H = np.eye(4)[y]
    assert fastcal.ecd(H, P) == pytest.approx(fastcal.ecd(y, P), rel=1e-12)
    assert fastcal.log_loss(H, P) == pytest.approx(fastcal.log_loss(y, P), rel=1e-12)
    assert fastcal.brier_score(H, P) == pytest.approx(fastcal.brier_score(y, P), rel=1e-12)
    # logits inside the kernel
    Z = np.log(P) + 3.0
    assert fastcal.ecd(T, Z, logits=True) == pytest.approx(fastcal.ecd(T, P), rel=1e-11)


def test_seed003_human_uncertainty_examples():
    # EntCE is 0 for a permutation of the human distribution (same entropy) ...
    t = [[0.7, 0.2, 0.1]]
    assert soft.entce(t, [[0.1, 0.2, 0.7]]) == pytest.approx(0.0, abs=1e-15)
    # ... which RankCS and DistCE catch
    assert soft.rankcs(t, [[0.1, 0.2, 0.7]]) == 0.0
    assert soft.distce(t, [[0.1, 0.2, 0.7]]) == pytest.approx(0.6, rel=1e-14)
    # the model matches the annotators: every measure at its best
    r = soft.soft_label_report(t, t)
    assert (r.entce, r.rankcs, r.distce, r.brier, r.ecd) == (0.0, 1.0, 0.0, 0.0, 0.0)
    # RankCS ignores the size of the probabilities, only the order counts
    assert soft.rankcs(t, [[0.5, 0.3, 0.2]]) == 1.0
    assert soft.distce(t, [[0.5, 0.3, 0.2]]) == pytest.approx(0.2, rel=1e-14)


def test_soft_bad_input():
    with pytest.raises(ValueError, match=r"same shape; got \(2, 3\) and \(2, 2\)"):
        soft.soft_label_report(np.full((2, 3), 1 / 3), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match=r"y_true has 1 rows that are not label distributions "
                                         r"\(first at row 1: min -0\.1"):
        soft.soft_label_report([[0.5, 0.5], [-0.1, 1.1]], [[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"y_true has 1 rows .*row 0.*sum 0\.9"):
        soft.soft_label_report([[0.5, 0.4]], [[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"y_prob has 1 rows that do not sum to 1"):
        soft.soft_label_report([[0.5, 0.5]], [[0.5, 0.6]])
    with pytest.raises(ValueError, match=r"y_true contains NaN in 1 rows \(first at row 1\)"):
        soft.soft_label_report([[0.5, 0.5], [np.nan, 0.5]], [[0.5, 0.5], [0.5, 0.5]])
    r = soft.soft_label_report([[0.5, 0.5], [np.nan, 0.5]], [[0.5, 0.5], [0.9, 0.1]],
                               nan_policy="omit")
    assert r.n == 1 and r.n_omitted == 1 and r.distce == 0.0


def test_soft_parallel_equals_serial():
    T, P = soft_data(60_000, 20, seed=3)  # 1.2e6 elements: the parallel kernel
    a = soft.soft_label_report(T, P, threads=1)
    b = soft.soft_label_report(T, P, threads=2)
    for name in ("entce", "rankcs", "distce", "brier", "nll", "ecd"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-12)


# -- noisy labels ---------------------------------------------------------------

def test_seed003_noisy_label_example():
    # 90% measured against labels that are 96% correct: 86% to 94%, 93.5% if independent
    r = true_accuracy(0.90, 0.96)
    assert r.lower == pytest.approx(0.86, abs=1e-12)
    assert r.upper == pytest.approx(0.94, abs=1e-12)
    assert round(r.independent, 3) == 0.935
    assert r.independent == pytest.approx((0.90 + 0.96 - 1) / (2 * 0.96 - 1), rel=1e-15)


def test_noisy_label_general_k_and_errors():
    # K classes: A_model = A A_l + (1 - A)(1 - A_l)/(K - 1) solved for A
    a, g, k = 0.8, 0.9, 5
    m = a * g + (1 - a) * (1 - g) / (k - 1)
    assert true_accuracy(m, g, n_classes=k).independent == pytest.approx(a, rel=1e-14)
    with pytest.raises(ValueError, match=r"must lie between 0\.1 and 0\.9"):
        true_accuracy(0.99, 0.9)  # better than the labels: impossible if errors are independent
    with pytest.raises(ValueError, match=r"label_accuracy must be above 1/n_classes"):
        true_accuracy(0.9, 0.5)
    with pytest.raises(ValueError, match=r"model_accuracy 0\.02 cannot arise"):
        true_accuracy(0.02, 0.96)
    with pytest.raises(ValueError, match=r"model_accuracy must be in \[0, 1\]"):
        true_accuracy(1.2, 0.96)


# -- scikit-learn -------------------------------------------------------------------

def test_scorers_in_cross_val_score_and_grid_search():
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

    from fastcal.sklearn import ecd_scorer, ece_scorer, make_ecd_scorer

    X, y = make_classification(n_samples=600, n_classes=3, n_informative=5, random_state=0)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    clf = LogisticRegression(max_iter=500)
    scores = cross_val_score(clf, X, y, scoring=ecd_scorer, cv=cv)
    # the same numbers by hand: -|ECD| of each fold's predict_proba
    by_hand = []
    for tr, te in cv.split(X, y):
        proba = LogisticRegression(max_iter=500).fit(X[tr], y[tr]).predict_proba(X[te])
        by_hand.append(-abs(fastcal.ecd(y[te], proba)))
    np.testing.assert_allclose(scores, by_hand, rtol=1e-10)
    ece_scores = cross_val_score(clf, X, y, scoring=ece_scorer, cv=cv)
    assert (ece_scores <= 0).all() and (ece_scores > -1).all()
    # GridSearchCV picks the C whose fitted model is best calibrated by |ECD|
    grid = GridSearchCV(clf, {"C": [1e-3, 1.0, 1e3]}, scoring=ecd_scorer, cv=cv).fit(X, y)
    means = grid.cv_results_["mean_test_score"]
    assert grid.best_params_["C"] == [1e-3, 1.0, 1e3][int(np.argmax(means))]
    # string labels need labels= in column order
    ys = np.array(["a", "b", "c"])[y]
    sc = make_ecd_scorer(labels=np.array(["a", "b", "c"]))
    np.testing.assert_allclose(cross_val_score(clf, X, ys, scoring=sc, cv=cv), scores, rtol=1e-10)
    # binary problems get the positive-class column
    Xb, yb = make_classification(n_samples=300, random_state=1)
    sb = cross_val_score(clf, Xb, yb, scoring=ecd_scorer, cv=3)
    assert np.isfinite(sb).all() and (sb <= 0).all()


def test_sklearn_label_errors():
    from fastcal.sklearn import abs_ecd

    with pytest.raises(ValueError, match=r"y_true has a value not in labels: 'z' at row 1"):
        abs_ecd(np.array(["a", "z"]), np.full((2, 2), 0.5), labels=["a", "b"])


@pytest.mark.parametrize("name", ["fastcal.soft", "fastcal.noisy",
                                  "fastcal.sklearn", "fastcal.metrics"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0

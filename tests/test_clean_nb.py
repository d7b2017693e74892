"""The ``clean-nb`` oracle: categorical naive Bayes on the clean records (the naive-Bayes ceiling drawn in
the scale report) is sklearn's CategoricalNB on the same rows and the records' own domain, is an oracle
(needs a learner on releases beside it, listed among the oracles), scores near the Bayes rule of a
naive-Bayes population, and refuses numeric fields by name."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.naive_bayes import CategoricalNB

from fedrr import learners
from fedrr.errors import ValidationError
from fedrr.learners import FitData, fit_and_score
from fedrr.mechanisms import LaplaceMechanism, PairedRecordMechanism, RandomizedResponse, RecordMechanism

K = 4


def _nb_population(n: int, seed: int):
    """Records from a naive Bayes model: y ~ Bernoulli(0.4), x_j | y ~ Cat(θ_jy), 3 attributes of K states
    (state K - 1 never drawn: the domain, not the data, must give the number of states)."""
    rng = np.random.default_rng(seed)
    theta = np.array([[[0.6, 0.3, 0.1, 0.0], [0.1, 0.3, 0.6, 0.0]]] * 3)  # (j, y, state)
    y = (rng.random(n) < 0.4).astype(int)
    X = np.stack([(rng.random(n)[:, None] > np.cumsum(theta[j, y], axis=1)).sum(axis=1) for j in range(3)], axis=1)
    return X, y


def test_clean_nb_is_categorical_nb_on_the_clean_rows():
    X, y = _nb_population(3000, 0)
    rm = RecordMechanism(RandomizedResponse(K, epsilon=1.0), RandomizedResponse(2, epsilon=1.0), n_features=3)
    Xt, yt = rm.release(X, y, rng=np.random.default_rng(1))
    Xte, yte = _nb_population(4000, 2)
    Xte[0, 0] = K - 1  # a state the training rows never hold: scored, not an error
    out = fit_and_score("clean-nb", FitData(Xt, yt, rm, clean_X=X, clean_y=y), (Xte, yte))
    assert "error" not in out.entry, out.entry
    ref = CategoricalNB(alpha=1.0, min_categories=K).fit(X, y)
    np.testing.assert_allclose(out.estimator.predict_proba(Xte), ref.predict_proba(Xte), rtol=1e-12)
    assert out.entry["accuracy"] == pytest.approx(ref.score(Xte, yte), abs=1e-12)
    # the Bayes rule of the population (the true θ): n = 3,000 estimates it closely, within
    # 4 binomial standard errors of the 4,000 test points
    bayes = float(np.mean(_bayes(Xte) == yte))
    se = np.sqrt(bayes * (1 - bayes) / len(yte))
    assert out.entry["accuracy"] >= bayes - 4 * se
    assert {"balanced_accuracy", "auc"} <= set(out.entry)


def _bayes(X: np.ndarray) -> np.ndarray:
    """The Bayes rule of ``_nb_population``: log-odds log(0.4/0.6) + Σ_j log θ_j1(x_j)/θ_j0(x_j)."""
    ratio = np.log(np.array([0.1 / 0.6, 1.0, 6.0, 1.0]))
    return (np.log(0.4 / 0.6) + ratio[X].sum(axis=1) > 0).astype(int)


def test_clean_nb_reads_the_domain_of_a_paired_release():
    X, y = _nb_population(2000, 3)
    pm = PairedRecordMechanism([K] * 3, 2, epsilon=2.0)
    Xt, yt = pm.release(X, y, rng=np.random.default_rng(4))
    out = fit_and_score("clean-nb", FitData(Xt, yt, pm, clean_X=X, clean_y=y), _nb_population(1000, 5))
    assert "error" not in out.entry, out.entry
    assert out.estimator.n_categories_.tolist() == [K] * 3


def test_clean_nb_is_an_oracle():
    assert learners.get("clean-nb").oracle
    with pytest.raises(ValidationError, match="oracles"):
        learners.check_names(["clean", "clean-nb"])
    assert learners.check_names(["ldp-nb", "clean-nb"]) == ("ldp-nb", "clean-nb")


def test_clean_nb_refuses_numeric_fields():
    rng = np.random.default_rng(6)
    X, y = rng.random((50, 2)), rng.integers(0, 2, 50)
    rm = RecordMechanism(LaplaceMechanism(1.0), RandomizedResponse(2, epsilon=1.0), n_features=2)
    out = fit_and_score("clean-nb", FitData(X, y, rm, clean_X=X, clean_y=y), None)
    assert "discrete features" in out.entry["error"]

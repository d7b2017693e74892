"""LDPNaiveBayes: the debiased joint tables are unbiased (exact standard errors), the noiseless limit
is categorical naive Bayes, the projection and the MLE are what they claim, bad input is named,
scikit-learn's conventions hold, and the Adult figure is reproducible."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from conftest import load_simulation
from sklearn.naive_bayes import CategoricalNB
from sklearn.utils.estimator_checks import parametrize_with_checks

from fedrr._validation import as_state_array
from fedrr.errors import ValidationError
from fedrr.estimators import LDPNaiveBayes, joint_frequencies, project_to_simplex
from fedrr.estimators._naive_bayes import LOG_FLOOR, check_releases, simplex_mle
from fedrr.mechanisms import DiscreteMechanism, LaplaceMechanism, RandomizedResponse, RecordMechanism, TransitionMatrix

# deviations are compared with Z standard errors (two-sided ~6e-5 per comparison; seeds are fixed)
Z = 4.0
K = (2, 3, 5)


def make_nb_data(n: int, rng: np.random.Generator, C: int = 2, concentration: float = 1.0):
    """Records (X, y) from a naive Bayes model: y ~ Cat(prior), x_j | y ~ Cat(θ_jy) with θ_jy drawn from
    a symmetric Dirichlet(concentration) (large: every state common), attributes with K states."""
    prior = np.linspace(1.0, 2.0, C) / np.linspace(1.0, 2.0, C).sum()
    y = rng.choice(C, size=n, p=prior)
    X = np.empty((n, len(K)), dtype=np.int64)
    for j, k in enumerate(K):
        theta = rng.dirichlet(np.full(k, concentration), size=C)  # (C, k)
        u = rng.random(n)[:, None]
        X[:, j] = np.minimum((np.cumsum(theta[y], axis=1) < u).sum(axis=1), k - 1)
    return X, y


def sample_attributes(X_tilde: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Each client keeps m attributes chosen uniformly without replacement (NaN elsewhere)."""
    n, D = X_tilde.shape
    chosen = rng.permuted(np.tile(np.arange(D), (n, 1)), axis=1)[:, :m]
    out = np.full((n, D), np.nan)
    np.put_along_axis(out, chosen, np.take_along_axis(X_tilde, chosen, axis=1), axis=1)
    return out


class PackedUnaryEncoding(DiscreteMechanism):
    """Optimised unary encoding (Wang et al. 2017) whose k bits are released packed into one integer:
    a test oracle whose release is NOT a state, used only through the DiscreteMechanism contract."""

    kind = "test_packed_oue"

    def __init__(self, k: int, epsilon: float):
        self.k, self.p, self.q = k, 0.5, 1.0 / (math.exp(epsilon) + 1.0)

    @property
    def epsilon(self) -> float:
        return math.log(self.p * (1 - self.q) / ((1 - self.p) * self.q))

    def _bits(self, x_tilde) -> np.ndarray:
        xt = self.validate_release(x_tilde)
        return (xt[..., None] >> np.arange(self.k)) & 1

    def release(self, x, rng):
        xx = self.validate_input(x)
        onehot = xx[..., None] == np.arange(self.k)
        bits = rng.random(onehot.shape) < np.where(onehot, self.p, self.q)
        return (bits * (1 << np.arange(self.k))).sum(axis=-1)

    def validate_release(self, x_tilde, field: str = "x_tilde") -> np.ndarray:
        return as_state_array(field, x_tilde, 2**self.k)

    def log_likelihood_matrix(self, x_tilde) -> np.ndarray:
        b = self._bits(x_tilde)[..., None, :]  # (..., 1, k): bit t; state s on the new axis
        on = np.eye(self.k, dtype=bool)  # on[s, t]: bit t is the true one when x = s
        return np.where(on, np.where(b == 1, np.log(self.p), np.log(1 - self.p)), 0.0).sum(-1) + np.where(
            on, 0.0, np.where(b == 1, np.log(self.q), np.log(1 - self.q))
        ).sum(-1)

    def unbiased_onehot(self, x_tilde) -> np.ndarray:
        return (self._bits(x_tilde) - self.q) / (self.p - self.q)

    def to_spec(self) -> dict:
        return {"kind": self.kind, "k": self.k, "epsilon": self.epsilon}


def exact_table_se(rel_x: np.ndarray, y: np.ndarray, mech, label) -> np.ndarray:
    """Standard error (k, C) of mean_i û(x̃_i) ⊗ v̂(ỹ_i) given the clean data: per client
    Var = E[û_s² | x] E[v̂_c² | y] − [x = s][y = c], with E[û_s² | x] = frequency_variance(1, e_x)[s] + [x = s]."""
    k, C = mech.k, label.k
    a = np.array([mech.frequency_variance(1, np.eye(k)[x]) for x in range(k)]) + np.eye(k)  # a[x, s]
    b = np.array([label.frequency_variance(1, np.eye(C)[c]) for c in range(C)]) + np.eye(C)  # b[y, c]
    counts = np.bincount(rel_x * C + y, minlength=k * C).reshape(k, C)
    second = np.einsum("xy,xs,yc->sc", counts, a, b)
    return np.sqrt(second - counts) / rel_x.size


# --------------------------------------------------------------------------- (a) debiasing


LABELS = {
    "rr": RandomizedResponse(2, 0.2),
    "asymmetric": TransitionMatrix.binary(0.1, 0.3),
    "asymmetric-3": TransitionMatrix([[0.7, 0.1, 0.2], [0.2, 0.6, 0.1], [0.1, 0.3, 0.7]]),
}


@pytest.mark.parametrize("n_sampled", [None, 1], ids=["all", "sampled"])
@pytest.mark.parametrize("label", sorted(LABELS))
def test_joint_frequencies_recover_the_clean_tables(label, n_sampled):
    rng = np.random.default_rng([1, len(label), n_sampled or 0])
    lab = LABELS[label]
    X, y = make_nb_data(20_000, rng, C=lab.k)
    feats = [RandomizedResponse(2, 0.25), RandomizedResponse(3, 0.3), RandomizedResponse(5, 0.4)]
    rm = RecordMechanism(feats, lab)
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    if n_sampled:
        X_tilde = sample_attributes(X_tilde, n_sampled, rng)
    tables, n_released, freq = joint_frequencies(X_tilde, y_tilde, rm)
    V = lab.unbiased_onehot(y_tilde)
    for j, (m, T) in enumerate(zip(feats, tables)):
        rows = ~np.isnan(X_tilde[:, j])
        assert n_released[j] == rows.sum() and (n_sampled is None or abs(rows.mean() - 1 / 3) < 0.02)
        truth = np.bincount(X[rows, j] * lab.k + y[rows], minlength=m.k * lab.k).reshape(m.k, lab.k) / rows.sum()
        se = exact_table_se(X[rows, j], y[rows], m, lab)
        assert np.all(np.abs(T - truth) <= Z * se), (np.abs(T - truth) / se).max()
        # the exact second moment agrees with the per-client products' empirical one (SE from 4th moments)
        prod = m.unbiased_onehot(X_tilde[rows, j].astype(int))[:, :, None] * V[rows][:, None, :]
        emp2, se2 = (prod**2).mean(axis=0), (prod**2).std(axis=0) / np.sqrt(rows.sum())
        exact2 = (se * rows.sum()) ** 2 / rows.sum() + truth
        assert np.all(np.abs(emp2 - exact2) <= Z * se2)
    counts_y = np.bincount(y, minlength=lab.k)
    b = np.array([lab.frequency_variance(1, np.eye(lab.k)[c]) for c in range(lab.k)])
    se_y = np.sqrt(counts_y @ b) / y.size
    assert np.all(np.abs(freq - counts_y / y.size) <= Z * se_y)


def test_joint_frequencies_through_a_non_state_release():
    """A packed unary-encoding oracle (releases are integers in [0, 2^k)), sampled attributes."""
    rng = np.random.default_rng(2)
    X, y = make_nb_data(20_000, rng)
    feats = [PackedUnaryEncoding(k, 1.5) for k in K]
    rm = RecordMechanism(feats, RandomizedResponse(2, 0.2))
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    assert X_tilde.max() > max(K)  # the releases are not states
    X_tilde = sample_attributes(X_tilde, 2, rng)
    tables, _, _ = joint_frequencies(X_tilde, y_tilde, rm)
    V = rm.label.unbiased_onehot(y_tilde)
    for j, (m, T) in enumerate(zip(feats, tables)):
        rows = ~np.isnan(X_tilde[:, j])
        prod = m.unbiased_onehot(X_tilde[rows, j].astype(int))[:, :, None] * V[rows][:, None, :]
        np.testing.assert_allclose(T, prod.mean(axis=0))
        truth = np.bincount(X[rows, j] * 2 + y[rows], minlength=m.k * 2).reshape(m.k, 2) / rows.sum()
        se = prod.std(axis=0) / np.sqrt(rows.sum())  # empirical SE of the per-client estimates
        assert np.all(np.abs(T - truth) <= Z * se)
    model = LDPNaiveBayes(method="mle").fit(X_tilde, y_tilde, mechanism=rm)
    assert model.score(X, y) > np.mean(y == np.bincount(y).argmax())


def test_fedrr_oracles_with_attribute_sampling():
    """fedrr's own unary encoding and local hashing with RecordMechanism(n_sampled=1), once they are on
    this branch (they are being added in parallel; skipped until then)."""
    import fedrr.mechanisms as fm

    if not hasattr(fm, "UnaryEncoding") or not hasattr(fm, "LocalHashing"):
        pytest.skip("fedrr.mechanisms has no UnaryEncoding / LocalHashing yet")
    rng = np.random.default_rng(9)
    X, y = make_nb_data(20_000, rng)
    for make in (fm.UnaryEncoding, fm.LocalHashing):
        rm = RecordMechanism([make(k, 1.0) for k in K], RandomizedResponse(2, 0.2), n_sampled=1)
        X_tilde, y_tilde = rm.release(X, y, rng=rng)
        assert np.all(np.isnan(X_tilde).sum(axis=1) == len(K) - 1)
        tables, _, _ = joint_frequencies(X_tilde, y_tilde, rm)
        V = rm.label.unbiased_onehot(y_tilde)
        for j, (f, T) in enumerate(zip(rm.fields, tables)):
            rows = ~np.isnan(X_tilde[:, j])
            prod = f.mechanism.unbiased_onehot(X_tilde[rows, j])[:, :, None] * V[rows][:, None, :]
            truth = np.bincount(X[rows, j] * 2 + y[rows], minlength=K[j] * 2).reshape(K[j], 2) / rows.sum()
            assert np.all(np.abs(T - truth) <= Z * prod.std(axis=0) / np.sqrt(rows.sum()))
        for method in ("projection", "mle"):
            model = LDPNaiveBayes(method=method).fit(X_tilde, y_tilde, mechanism=rm)
            assert model.score(X, y) > np.mean(y == np.bincount(y).argmax())


# --------------------------------------------------------------------------- (b) noiseless limit


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_clean_mode_is_categorical_naive_bayes(alpha):
    rng = np.random.default_rng(3)
    X, y = make_nb_data(2_000, rng, C=3)
    ours = LDPNaiveBayes(alpha=alpha).fit(X, y)
    ref = CategoricalNB(alpha=alpha, min_categories=list(K)).fit(X, y)
    np.testing.assert_allclose(ours.predict_log_proba(X), ref.predict_log_proba(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    for a, b in zip(ours.feature_log_prob_, ref.feature_log_prob_):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("n_sampled", [None, 1], ids=["all", "sampled"])
def test_tiny_noise_limit_is_clean_naive_bayes(n_sampled):
    rng = np.random.default_rng(4)
    X, y = make_nb_data(5_000, rng)
    tiny = 1e-12
    rm = RecordMechanism([RandomizedResponse(k, tiny) for k in K], TransitionMatrix.binary(tiny, 2 * tiny))
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    assert np.array_equal(X_tilde, X) and np.array_equal(y_tilde, y)  # no flip at all, as expected
    if n_sampled:
        X_tilde = sample_attributes(X_tilde, n_sampled, rng)
    model = LDPNaiveBayes(method="projection").fit(X_tilde, y_tilde, mechanism=rm)  # exact in this limit
    if n_sampled is None:
        ref = CategoricalNB(alpha=1.0, min_categories=list(K)).fit(X, y)
        np.testing.assert_allclose(model.predict_proba(X), ref.predict_proba(X), atol=1e-9)
        np.testing.assert_array_equal(model.predict(X), ref.predict(X))
    else:  # Laplace-smoothed counts among the clients that released each attribute
        for j, k in enumerate(K):
            rows = ~np.isnan(X_tilde[:, j])
            counts = np.bincount(y[rows] * k + X[rows, j], minlength=2 * k).reshape(2, k) + 1.0
            np.testing.assert_allclose(model.feature_log_prob_[j], np.log(counts / counts.sum(1, keepdims=True)))
    np.testing.assert_allclose(model.class_log_prior_, np.log(np.bincount(y) / y.size), atol=1e-9)


# --------------------------------------------------------------------------- (c) projection and MLE


def _small_noisy_fit(alpha: float, n: int = 300, method: str = "projection"):
    rng = np.random.default_rng(5)
    X, y = make_nb_data(n, rng)
    rm = RecordMechanism([RandomizedResponse(k, epsilon=0.5) for k in K], RandomizedResponse(2, epsilon=0.5))
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    return LDPNaiveBayes(alpha=alpha, method=method).fit(X_tilde, y_tilde, mechanism=rm), X


@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_projection_gives_valid_distributions(alpha):
    model, X = _small_noisy_fit(alpha)
    assert any(np.any(t < 0) for t in model.joint_unbiased_)  # the debiased tables leave the simplex
    for raw, P in zip(model.joint_unbiased_, model.joint_):
        assert np.all(P >= 0) and abs(P.sum() - 1) < 1e-12
        # Euclidean projection ⇔ P = max(v − θ, 0) for one θ with Σ P = 1 (KKT of min ‖P − v‖²)
        pos = P > 0
        theta = (raw - P)[pos]
        np.testing.assert_allclose(theta, theta[0], atol=1e-12)
        assert np.all(raw[~pos] <= theta[0] + 1e-12)
    for logp in model.feature_log_prob_:
        np.testing.assert_allclose(np.exp(logp).sum(axis=1), 1.0, rtol=1e-12)
        assert np.all(logp >= LOG_FLOOR)
    np.testing.assert_allclose(model.class_prior_.sum(), 1.0)
    proba = model.predict_proba(X)
    assert np.all(np.isfinite(proba)) and np.allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(model.predict_log_proba(X), np.log(proba))
    if alpha == 0.0:
        assert any(np.any(logp == LOG_FLOOR) for logp in model.feature_log_prob_)  # zeros are floored


def test_alpha_zero_class_without_mass_gets_uniform_conditional():
    model = LDPNaiveBayes(alpha=0.0)
    model.classes_ = np.arange(2)
    model._set_model([np.array([[0.5, 0.0], [0.5, 0.0]])], np.array([1.0, 0.0]), np.array([10]))
    np.testing.assert_allclose(model.feature_log_prob_[0][1], np.log([0.5, 0.5]))
    assert model.class_log_prior_[1] == LOG_FLOOR


def test_mle_equals_debiased_table_when_it_is_interior():
    """For matrix oracles the pair's transition P_x ⊗ P_y is square and invertible, so the MLE on the
    simplex is the inversion (= the mean of û ⊗ v̂) whenever that one has all cells > 0."""
    rng = np.random.default_rng(6)
    X, y = make_nb_data(20_000, rng, concentration=20.0)
    rm = RecordMechanism([RandomizedResponse(k, 0.2) for k in K], TransitionMatrix.binary(0.1, 0.2))
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    proj = LDPNaiveBayes().fit(X_tilde, y_tilde, mechanism=rm)
    mle = LDPNaiveBayes(method="mle", tol=1e-12).fit(X_tilde, y_tilde, mechanism=rm)
    assert all(np.all(t > 0) for t in proj.joint_unbiased_)
    for a, b in zip(proj.joint_, mle.joint_):
        np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(proj.class_prior_, mle.class_prior_, atol=1e-5)
    assert mle.n_iter_ >= 1


def test_simplex_mle_matches_a_generic_optimiser_on_the_boundary():
    from scipy.optimize import minimize

    rng = np.random.default_rng(7)
    X, y = make_nb_data(200, rng)
    rm = RecordMechanism([RandomizedResponse(k, epsilon=0.3) for k in K], RandomizedResponse(2, epsilon=0.3))
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    rel = check_releases(X_tilde, y_tilde, rm)
    m = rel.mechs[2]
    L = (
        m.log_likelihood_matrix(rel.values[2])[:, :, None] + rel.label.log_likelihood_matrix(rel.y)[:, None, :]
    ).reshape(len(rel.y), -1)
    w = np.ones(len(rel.y))
    pi, _ = simplex_mle(L, w, np.full(L.shape[1], 1 / L.shape[1]), tol=1e-10, max_iter=1000)
    loglik = lambda p: float(np.mean(np.log(np.exp(L) @ p)))  # noqa: E731
    ref = minimize(
        lambda p: -loglik(np.maximum(p, 0)),
        np.full(L.shape[1], 1 / L.shape[1]),
        method="SLSQP",
        bounds=[(0, 1)] * L.shape[1],
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert np.any(pi < 1e-6)  # the maximiser is on the boundary here
    assert loglik(pi) >= loglik(np.maximum(ref.x, 0)) - 1e-9
    proj = project_to_simplex(joint_frequencies(X_tilde, y_tilde, rm)[0][2].ravel())
    assert loglik(pi) >= loglik(np.maximum(proj, 1e-300))


# --------------------------------------------------------------------------- (d) validation


def _release(n=200, seed=8):
    rng = np.random.default_rng(seed)
    X, y = make_nb_data(n, rng)
    rm = RecordMechanism([RandomizedResponse(k, 0.2) for k in K], RandomizedResponse(2, 0.2))
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    return sample_attributes(X_tilde, 1, rng), y_tilde, rm, X


BAD_FIT = [
    ("NaN label", lambda Xt, yt, rm: (Xt, np.where(np.arange(yt.size) == 3, np.nan, yt), rm), "y_tilde"),
    ("label out of domain", lambda Xt, yt, rm: (Xt, np.where(yt == 1, 2, yt), rm), "y_tilde"),
    ("label length", lambda Xt, yt, rm: (Xt, yt[:-1], rm), "y_tilde"),
    ("label 2-d", lambda Xt, yt, rm: (Xt, yt[:, None], rm), "y_tilde"),
    ("too few columns", lambda Xt, yt, rm: (Xt[:, :2], yt, rm), "X_tilde"),
    ("1-d features", lambda Xt, yt, rm: (Xt[:, 0], yt, rm), "X_tilde"),
    ("no clients", lambda Xt, yt, rm: (Xt[:0], yt[:0], rm), "X_tilde"),
    ("state out of domain", lambda Xt, yt, rm: (np.where(Xt == 0, 7, Xt), yt, rm), "X_tilde"),
    ("fractional state", lambda Xt, yt, rm: (np.where(Xt == 1, 0.5, Xt), yt, rm), "X_tilde"),
    ("inf release", lambda Xt, yt, rm: (np.where(Xt == 1, np.inf, Xt), yt, rm), "X_tilde"),
    ("strings", lambda Xt, yt, rm: (Xt.astype(str), yt, rm), "X_tilde"),
    ("attribute never released", lambda Xt, yt, rm: (np.where(np.arange(3) == 1, np.nan, Xt), yt, rm), "X_tilde"),
    ("no label mechanism", lambda Xt, yt, rm: (Xt, yt, RecordMechanism([RandomizedResponse(k, 0.2) for k in K])),
     "mechanism"),
    ("numeric feature field", lambda Xt, yt, rm: (Xt, yt, RecordMechanism(
        [RandomizedResponse(2, 0.2), LaplaceMechanism(1.0, 0.0, 1.0), RandomizedResponse(5, 0.2)],
        RandomizedResponse(2, 0.2))), "mechanism"),
    ("not a record mechanism", lambda Xt, yt, rm: (Xt, yt, RandomizedResponse(2, 0.2)), "mechanism"),
]  # fmt: skip


@pytest.mark.parametrize("name, corrupt, field", BAD_FIT, ids=[b[0] for b in BAD_FIT])
def test_bad_releases_are_named(name, corrupt, field):
    Xt, yt, rm, _ = _release()
    Xb, yb, mb = corrupt(Xt, yt, rm)
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes().fit(Xb, yb, mechanism=mb)
    assert e.value.field == field, e.value


def test_nan_marks_unreleased_attributes_and_mechanism_can_be_a_parameter():
    Xt, yt, rm, X = _release()
    assert np.isnan(Xt).mean() == pytest.approx(2 / 3)
    a = LDPNaiveBayes().fit(Xt, yt, mechanism=rm)
    b = LDPNaiveBayes(mechanism=rm).fit(Xt, yt)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.n_released_.sum() == len(yt) and a.n_features_in_ == 3


BAD_PREDICT = [
    ("state out of domain", lambda X: np.where(X == 0, 5, X)),
    ("negative", lambda X: -X),
    ("NaN", lambda X: np.where(X == 0, np.nan, X)),
    ("fractional", lambda X: X + 0.5),
    ("wrong width", lambda X: X[:, :2]),
]


@pytest.mark.parametrize("name, corrupt", BAD_PREDICT, ids=[b[0] for b in BAD_PREDICT])
def test_bad_clean_records_are_named(name, corrupt):
    Xt, yt, rm, X = _release()
    model = LDPNaiveBayes().fit(Xt, yt, mechanism=rm)
    with pytest.raises(ValidationError) as e:
        model.predict_proba(corrupt(X))
    assert e.value.field == "X"


@pytest.mark.parametrize(
    "params, field",
    [
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": np.nan}, "alpha"),
        ({"alpha": "1"}, "alpha"),
        ({"method": "em"}, "method"),
        ({"tol": 0.0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
    ],
)
def test_bad_parameters_are_named(params, field):
    Xt, yt, rm, _ = _release()
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes(**params).fit(Xt, yt, mechanism=rm)
    assert e.value.field == field


# --------------------------------------------------------------------------- (e) scikit-learn


@parametrize_with_checks([LDPNaiveBayes(), LDPNaiveBayes(alpha=0.0), LDPNaiveBayes(method="mle")])
def test_sklearn_compatible(estimator, check):
    # Without a mechanism the estimator is categorical naive Bayes on integer states (tags
    # categorical and positive_only, as CategoricalNB). Nothing is skipped or expected to fail;
    # check_array_api_input skips itself unless SCIPY_ARRAY_API is set.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


# --------------------------------------------------------------------------- (f) Adult


@pytest.mark.parametrize("method, measured", [("projection", 0.8066), ("mle", 0.8099)])
def test_adult_one_sampled_attribute_at_epsilon_4(method, measured):
    """The ε = 4 cell of `python simulations/adult_ldp_baselines.py --part naive-bayes [--method mle]` (one sampled
    attribute at ε/2 and the label at ε/2, seeds 0-2 of master seed 0, load_adult_binned() with its public
    edges, closed="left", alpha=1): its mean accuracy when measured. The seeds' sd there is ~0.009 (over
    100 seeds; 3-seed mean ~0.005), so a change of method or data preparation beyond noise moves it out of
    ±0.01. With the former training-quantile bins it was 0.7899 / 0.7931; with the public edges cut
    closed="right" 0.8015 / 0.8058."""
    sim = load_simulation("adult_ldp_baselines")
    rows = sim.nb_rows([4.0], 3, method=method, protocols=("one sampled attribute",))
    assert [r["seed"] for r in rows] == [0, 1, 2]
    assert abs(np.mean([r["accuracy"] for r in rows]) - measured) <= 0.01

"""LDP-SGD in its one-release form (Wang, Xiao, Yang, Zhao, Hui, Shin, Shin & Yu, "Collecting and
Analyzing Multidimensional Data with Local Differential Privacy", ICDE 2019, §V): the clients are split
into disjoint groups; group t answers ONE query, the clipped gradient of the loss at the current model
θ_t, released with dimension sampling (their Algorithm 4: m of the d coordinates, each by the Piecewise
Mechanism or Duchi et al.'s at ε/m, scaled by d/m by the server); the server averages and steps. Every
client releases once. Flower-free: the clients are ``fedrr.gradient_release`` (``GradientClients``,
``client_answer``); the server is ``LDPSGDServer``, and ``LDPSGDClassifier.fit(clients)`` runs it
against a ``GradientClients``, seeing their releases only. fedrr's Flower apps call the same two sides,
so a federation's model equals the offline one for a seed.

Model: multinomial logistic regression, class 0 the reference (binary: ordinary logistic), on
z = [1, x']: x' has k − 1 indicators per k-state attribute (state 0 the base) and the numeric ones
(in [−1, 1]), so every gradient coordinate (p_k − 1[y = k])·z_j lies in [−1, 1]. θ is (K − 1, 1 + p).

Rounds, each answered by its own group (fedrr's additions are 1 and 3):

1. intercept: the gradient of the intercept-only model at b = 0, p(0) − e_y (K − 1 coordinates in
   [−1, 1]). Its mean is 1/K − π_k (π: class frequencies), so one round gives the intercept-only optimum
   b_k = log π̂_k − log π̂_0 in closed form (π̂ projected on the simplex, floored at 1/(2·group size));
   more intercept-only rounds would only split the same information. θ_0 = (b, 0) starts SGD and is
   the fallback model (it predicts the majority class).
2. model rounds t = 1..T: θ_{t+1} = θ_t − η (ĝ_t + λ W_t), λ = 1/(C n) (the penalty is data-free:
   the server adds it exactly), η = 32/(L T) by default: the T steps add up to 32 steps of 1/L, with
   L = c_K (1 + D) + λ a bound on the loss's smoothness (c_2 = 1/4, else 1/2 (Böhning); ‖z‖² ≤ 1 + D),
   whatever T. The model is the mean of the iterates θ_{⌈T/2⌉+1..T+1} (suffix averaging).
3. check: 1[model right] − 1[θ_0 right] ∈ {−1, 0, 1}, one coordinate at full ε. The model is kept only
   if the mean released gain exceeds two standard errors; otherwise θ = θ_0 (``fallback_``).

Group sizes: Wang et al.'s |G| = Ω(d log d / ε²) (each step's mean gradient accurate to a constant in
every coordinate), with the constant made explicit: v = the worst-case per-client variance of one scaled
coordinate in clip² units (exact for the mechanism: PM (d/m)(s² + 1) − 1 with s² = Var[t̃ | t = ±1],
Duchi (d/m)B²) and G* = ⌈2 v ln(2d/β)⌉, β = 0.05: every coordinate of a group's mean within ±clip of its
expectation with probability ≈ 1 − β (Gaussian tail, union bound). The intercept and check groups hold
10% of the clients each, the T = ⌊rest/G*⌋ model groups the rest. T = 0 means the groups are too small
to move the model: every client answers the intercept round and θ = θ_0 (``fallback_``, reason stated).
m = max(1, min(d, ⌊ε/2.5⌋)) is Wang et al.'s rule.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._params import Boolean, Interval, IsNone, Options, random_state_constraints, seed_from, validate_estimator
from ..errors import ValidationError
from ..gradient_release import (
    GROUPS_KEY,
    MECHANISMS,
    GradientClients,
    Query,
    check_n_states,
    encode,
    n_inputs,
    probabilities,
    query_mechanism,
)
from ..mechanisms import PiecewiseMechanism, RecordMechanism
from ._frequencies import project_to_simplex
from ._sklearn import validate

HOLDOUT = 0.1  # fraction of the clients in the intercept group, and in the check group
BETA = 0.05  # group-size rule: every coordinate within ±clip with probability ≈ 1 − β
Z_CHECK = 2.0  # the check's one-sided threshold, in standard errors
HORIZON = 32.0  # default steps: η = HORIZON / (L T), T steps adding up to 32 steps of 1/L


# ------------------------------------------------------------------------------------ the design
def coordinate_variance(rm: RecordMechanism) -> float:
    """Worst case over the input of Var[(d/m)·x̃_j·1[j released]] in bound² units (module doc)."""
    mech, d, m = rm.fields[0].mechanism, rm.n_features, rm.n_sampled
    s2 = (mech.noise_std / mech.half) ** 2
    return d / m * (s2 + 1) - 1 if isinstance(mech, PiecewiseMechanism) else d / m * s2


# ----------------------------------------------------------------------------------- the server
def group_plan(n: int, variance: float, d: int, *, groups: int | None, fallback: bool, seed: int) -> tuple[list, Any]:
    """[(kind, rows)] in round order (rows index the clients in client-id order), shuffled once from
    the seed, and the reason for an a-priori fallback (None). ``variance``: mean coordinate variance."""
    n_int = max(1, round(HOLDOUT * n))
    n_chk = max(2, round(HOLDOUT * n)) if fallback else 0
    rest = n - n_int - n_chk
    g_star = math.ceil(2 * variance * math.log(2 * d / BETA))
    T = groups if groups is not None else max(rest, 0) // g_star
    reason = None
    if T == 0 and fallback:
        reason = (
            f"groups too small to move the model: the rule's group size {g_star} exceeds the "
            f"{max(rest, 0)} clients left after the intercept and check groups"
        )
        n_int, rest, n_chk = n, 0, 0
    T = max(T, 1) if reason is None else 0
    if rest < T:
        raise ValidationError(
            "groups" if groups is not None else "X",
            f"{n} clients cannot form {T} model groups besides the intercept ({n_int}) and check ({n_chk}) groups",
        )
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(GROUPS_KEY,))).permutation(n)
    plan = [("intercept", order[:n_int])]
    plan += [("gradient", rows) for rows in np.array_split(order[n_int : n_int + rest], T)] if T else []
    plan += [("check", order[n - n_chk :])] if n_chk else []
    return plan, reason


class LDPSGDServer:
    """The server's side: the query of each round (``query(r)``) and what it does with the answers
    (``update(r, R)``: round r's releases (G, d_q), NaN where not released, in the group's order)."""

    def __init__(self, n_classes, n_inputs, n_clients, max_sq_norm, plan, reason=None, *, learning_rate=None, C=1.0):
        self.K, self.plan, self.apriori_reason = n_classes, plan, reason
        self.T = sum(kind == "gradient" for kind, _ in plan)
        self.lam = 1.0 / (C * n_clients)
        L = (0.25 if n_classes == 2 else 0.5) * max_sq_norm + self.lam
        self.eta = learning_rate if learning_rate is not None else HORIZON / (L * max(self.T, 1))
        self.theta = np.zeros((n_classes - 1, 1 + n_inputs))
        self.theta0, self.iterates, self.t = self.theta.copy(), [], 0
        self.intercept_freq = self.check = None

    def query(self, r: int) -> Query:
        if self.plan[r][0] == "check":
            return Query("check", r, self.candidate(), self.theta0)
        return Query(self.plan[r][0], r, self.theta.copy())

    def candidate(self) -> np.ndarray:
        its = self.iterates
        return np.mean(its[(len(its) - 1) // 2 :], axis=0) if its else self.theta0.copy()

    def update(self, r: int, R: np.ndarray) -> None:
        kind, R = self.plan[r][0], np.atleast_2d(np.asarray(R, float))
        if R.size == 0:
            return  # nobody answered: nothing moves
        est = R.shape[1] / np.sum(~np.isnan(R), axis=1, keepdims=True) * np.nan_to_num(R, nan=0.0)  # (d/m)·x̃
        g = est.mean(axis=0)  # unbiased for the group's mean answer
        if kind == "intercept":
            pi = np.r_[0.0, 1.0 / self.K - g]
            pi[0] = 1.0 - pi[1:].sum()
            pi = np.maximum(project_to_simplex(pi), 0.5 / R.shape[0])
            self.intercept_freq = pi / pi.sum()
            self.theta[:, 0] = np.log(self.intercept_freq[1:]) - np.log(self.intercept_freq[0])
            self.theta0 = self.theta.copy()
        elif kind == "gradient":
            pen = self.lam * self.theta
            pen[:, 0] = 0.0
            self.theta = self.theta - self.eta * (g.reshape(self.theta.shape) + pen)
            self.iterates.append(self.theta.copy())
            self.t += 1
        else:
            se = float(est[:, 0].std(ddof=1) / math.sqrt(est.shape[0])) if est.shape[0] > 1 else math.inf
            self.check = {"gain": float(g[0]), "se": se, "n": int(est.shape[0])}

    def result(self) -> tuple[np.ndarray, bool, str | None]:
        """(θ, fallback, its reason) once every round is done."""
        c = self.check
        if self.apriori_reason is not None:
            return self.theta0.copy(), True, self.apriori_reason
        if c is None or c["gain"] > Z_CHECK * c["se"]:
            return self.candidate(), False, None
        why = f"the check's released accuracy gain {c['gain']:.4g} ± {c['se']:.2g} is not above {Z_CHECK:g} se"
        return self.theta0.copy(), True, why


# -------------------------------------------------------------------------------- the estimator
class LDPSGDClassifier(ClassifierMixin, BaseEstimator):
    """LDP-SGD (Wang et al. 2019, §V), the server's side: ``fit(clients)`` runs the protocol of the
    module docstring against a ``fedrr.gradient_release.GradientClients``, which holds the clients'
    records, ids and budgets. It sends each group its query and steps on the releases it gets back;
    it never reads a record. Each client releases once, at its own ε (``GradientClients(epsilon=...)``).

    Parameters
    ----------
    mechanism : "piecewise" or "duchi", per released coordinate.
    n_sampled : coordinates released per client (None: Wang et al.'s ⌊ε/2.5⌋ rule, at least 1).
    clip : gradient coordinates are clipped to [−clip, clip] (they lie in [−1, 1]: 1 clips nothing).
    groups : model rounds T (None: the group-size rule of the module docstring).
    learning_rate : the step η (None: 32/(L T), L the loss's smoothness bound, T the model rounds).
    C : inverse L2 strength, λ = 1/(C n) on the non-intercept weights.
    n_states : None (numeric attributes in [−1, 1]), an int k, or one int per attribute (0 = numeric):
        k-state attributes are one-hot encoded as k − 1 indicators (the clients encode with it).
    fallback : hold out the check group and fall back to θ_0 when the model does not beat it.
    random_state : the server's seed, of the group shuffle (int; None: fresh entropy; a Generator: a
        seed drawn from it). The clients' noise has its own seed (``GradientClients(seed=...)``); in a
        simulation both are the run seed.

    Attributes: ``classes_``, ``coef_`` (binary (1, p), else (K, p) with row 0 the reference class, p
    the encoded inputs), ``intercept_``, ``theta_``, ``epsilon_`` (largest realised per-client ε, from
    the mechanisms' own accounting), ``client_epsilon_`` (per client), ``groups_`` ([(kind, size)]),
    ``fallback_`` and ``fallback_reason_``, ``n_iter_`` (model rounds), ``check_``, ``candidate_`` (the
    SGD model θ before the check decided).
    """

    _parameter_constraints = {
        "mechanism": [Options(*MECHANISMS)],
        "n_sampled": [IsNone(), Interval(int, 1, None)],
        "clip": [Interval(float, 0, None, closed="neither")],
        "groups": [IsNone(), Interval(int, 1, None)],
        "learning_rate": [IsNone(), Interval(float, 0, None, closed="neither")],
        "C": [Interval(float, 1e-12, None, closed="left", inf=True)],  # 1/C must stay finite
        "fallback": [Boolean()],
        "random_state": random_state_constraints(),
    }

    def __init__(
        self,
        *,
        mechanism: str = "piecewise",
        n_sampled: int | None = None,
        clip: float = 1.0,
        groups: int | None = None,
        learning_rate: float | None = None,
        C: float = 1.0,
        n_states: Any = None,
        fallback: bool = True,
        random_state: Any = None,
    ):
        self.mechanism = mechanism
        self.n_sampled = n_sampled
        self.clip = clip
        self.groups = groups
        self.learning_rate = learning_rate
        self.C = C
        self.n_states = n_states
        self.fallback = fallback
        self.random_state = random_state

    def fit(self, clients: GradientClients, y: None = None):
        """Run the protocol with ``clients`` (a ``GradientClients``): their public ids, budgets and
        classes plan the groups, and ``clients.answer`` returns each group's releases. ``y``: None
        (scikit-learn's signature; the labels stay with the clients)."""
        p = validate_estimator(self)
        if not isinstance(clients, GradientClients):
            raise ValidationError(
                "clients",
                f"must be a fedrr.gradient_release.GradientClients, got {type(clients).__name__}: LDP-SGD's server "
                "never takes clean records; wrap them as GradientClients(X, y, epsilon, seed=...) and fit(clients)",
            )
        if y is not None:
            raise ValidationError("y", "must be None: the labels stay with the clients (GradientClients(X, y, ...))")
        self.classes_, self.n_features_in_ = clients.classes, clients.n_features
        self.n_states_ = check_n_states(self.n_states, clients.n_features)
        seed = seed_from(p["random_state"])
        eps, ids = clients.epsilon, clients.client_ids
        server = make_server(len(self.classes_), n_inputs(self.n_states_), clients.n_features, eps, p, seed)
        kw = {"n_states": self.n_states_, "mechanism": p["mechanism"], "n_sampled": p["n_sampled"], "clip": p["clip"]}
        self.client_epsilon_ = np.full(clients.n_clients, np.nan)
        for r, (_, rows) in enumerate(server.plan):
            got = clients.answer(server.query(r), ids[rows], **kw)
            self.client_epsilon_[rows] = got.epsilon
            server.update(r, got.x)
        self._set_result(server)
        return self

    def _set_result(self, server: LDPSGDServer) -> None:
        self.theta_, self.fallback_, self.fallback_reason_ = server.result()
        self.epsilon_ = float(np.nanmax(self.client_epsilon_))
        self.groups_ = [(kind, int(len(rows))) for kind, rows in server.plan]
        self.n_iter_, self.check_, self.eta_ = server.t, server.check, server.eta
        self.intercept_freq_, self.candidate_ = server.intercept_freq, server.candidate()  # candidate: before the check
        W = np.vstack([np.zeros((1, self.theta_.shape[1])), self.theta_]) if len(self.classes_) > 2 else self.theta_
        self.coef_, self.intercept_ = W[:, 1:], W[:, 0]

    def diagnostics(self) -> dict:
        check_is_fitted(self, "theta_")
        freq = None if self.intercept_freq_ is None else self.intercept_freq_.tolist()
        keys = ("fallback", "fallback_reason", "epsilon", "groups", "check")
        return {
            **{k: getattr(self, k + "_") for k in keys},
            "model_rounds": self.n_iter_,
            "learning_rate": self.eta_,
            "intercept_frequencies": freq,
        }

    # ---------------------------------------------------------------------------- predict
    def decision_function(self, X):
        check_is_fitted(self, "theta_")
        Z = encode(validate(self, X, reset=False), self.n_states_)
        s = Z @ self.theta_.T
        return s[:, 0] if len(self.classes_) == 2 else np.hstack([np.zeros((Z.shape[0], 1)), s])

    def predict_proba(self, X):
        check_is_fitted(self, "theta_")
        return probabilities(self.theta_, encode(validate(self, X, reset=False), self.n_states_))

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def make_server(n_classes: int, n_inputs: int, n_attributes: int, eps: np.ndarray, p: dict, seed: int) -> LDPSGDServer:
    """The server of a run: the group plan from the clients' budgets (the mean over the clients of the
    coordinate variance) and the estimator's parameters ``p``."""
    d = (n_classes - 1) * (1 + n_inputs)
    vals, counts = np.unique(eps, return_counts=True)
    rms = [query_mechanism(p["mechanism"], float(e), d, p["n_sampled"], 1.0) for e in vals]
    var = sum(c * coordinate_variance(rm) for rm, c in zip(rms, counts)) / len(eps)
    plan, reason = group_plan(len(eps), var, d, groups=p["groups"], fallback=p["fallback"], seed=seed)
    lr = p["learning_rate"]
    return LDPSGDServer(n_classes, n_inputs, len(eps), 1.0 + n_attributes, plan, reason, learning_rate=lr, C=p["C"])

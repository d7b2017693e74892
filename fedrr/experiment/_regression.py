"""Regression scenarios (Farokhi 2020, Figs 1-2): one-record clients release their inputs through
one Gaussian or Laplace mechanism on the whole input vector in [0, 1]^p (Thm 1), and the target
either in the clear (the paper's ỹ = y: the label is public, which every output flags) or with
Laplace noise on y in [0, 1]. Learners are fitted on the releases and scored by test MSE on a
clean held-out split. Offline only: the Flower protocol's label is categorical.

Learners: ``ls`` (least squares on the releases = W-DRO at ρ = 0), ``ridge-cv`` (ridge with α by
leave-one-out CV on the releases), ``wdro`` (WassersteinDRORegression, ρ from the mechanism,
eq 8 with the corrected squared-loss constant; with a noised target its target bounds are the
observed range), ``gauss-dro`` (GaussianDROLinearRegression, Thm 6
as its SOCP), ``mean`` (the training mean of the released y), and the oracle ``clean`` (least
squares on the clean records of the same clients)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ValidationError
from ..learners import FitData, fit_and_score
from ._cells import PrivacyParams


def load_regression_data(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) with every input and the target in [0, 1]. Adult (Fig 2): 5 numeric inputs plus the
    7 categoricals integer-coded and scaled to [0, 1], the 0/1 income label as the target (the
    paper fits it by linear regression); p_x = 12, as simulations/farokhi_fig1_fig2.py."""
    from ..datasets import load_adult, load_diabetes, load_lending_club

    if name == "lending_club":
        d = load_lending_club(scale="unit")
        return np.asarray(d.X, float), np.asarray(d.y, float)
    if name == "diabetes":
        d = load_diabetes(scale="unit")
        return np.asarray(d.X, float), np.asarray(d.y, float)
    if name == "adult":
        d = load_adult(encoding="ordinal", scale="unit")
        X = np.asarray(d.X, float)
        top = X.max(axis=0)
        return X / np.where(top > 0, top, 1.0), np.asarray(d.y, float)
    raise ValidationError("population.dataset", f"no regression view of {name!r}; valid: adult, diabetes, lending_club")


def regression_mechanisms(p: int, params: PrivacyParams) -> tuple[Any, Any]:
    """(input block mechanism, target mechanism or None = public) from a cell's privacy params."""
    from ..mechanisms import GaussianMechanism, LaplaceMechanism

    lo, hi = np.zeros(p), np.ones(p)
    eps = params.feature_epsilon
    if params.mechanism == "gaussian":
        feat = GaussianMechanism(eps, params.delta, lo, hi, calibration=params.calibration)
    else:
        feat = LaplaceMechanism(eps, lo, hi)
    label = LaplaceMechanism(params.label_epsilon, 0.0, 1.0) if params.label_epsilon else None
    return feat, label


def run_regression_cell(
    n_clients: int,
    n_test: int,
    dataset: str,
    params: PrivacyParams,
    learners: list[str],
    seed_seq: np.random.SeedSequence,
) -> dict:
    """One cell: a random split (n_clients training rows, one per client; n_test clean test rows),
    each client's release with its own generator, every learner fitted and scored. Returns the
    cell's n_releases, the record accounting and the per-learner {mse, seconds} or {error}."""
    X, y = load_regression_data(dataset)
    N, p = X.shape
    if n_clients + n_test > N:
        raise ValidationError(
            "population.n_clients", f"{n_clients} clients + {n_test} test rows exceed the {N} rows of {dataset!r}"
        )
    feat, label = regression_mechanisms(p, params)
    ss_split, ss_clients = np.random.SeedSequence(seed_seq.entropy, spawn_key=seed_seq.spawn_key).spawn(2)
    idx = np.random.default_rng(ss_split).permutation(N)
    tr, te = idx[:n_clients], idx[n_clients : n_clients + n_test]
    # each client releases its own record with its own generator (the offline stand-in for a node)
    gens = [np.random.default_rng(s) for s in ss_clients.spawn(n_clients)]
    Xt = np.stack([feat.release(X[i], g) for i, g in zip(tr, gens)])
    yt = (
        np.array([label.release(np.array([y[i]]), g)[0] for i, g in zip(tr, gens)])
        if label is not None
        else y[tr].copy()
    )
    Xte, yte = X[te], y[te]
    out: dict[str, dict] = {}
    for name in learners:
        data = FitData(
            Xt,
            yt,
            clean_X=X[tr],
            clean_y=y[tr],
            feature_mechanism=feat,
            label_noised=label is not None and name != "clean",
        )
        out[name] = fit_and_score(name, data, (Xte, yte), task="regression").entry
    # with Farokhi's calibration GaussianMechanism.epsilon is the larger of the nominal and the exact ε
    exact = float(feat.epsilon_exact) if params.calibration == "farokhi" else float(feat.epsilon)
    eps_feat = float(feat.epsilon)
    eps_label = float(label.epsilon) if label is not None else None
    record = eps_feat + (eps_label or 0.0)
    delta = float(getattr(feat, "delta", 0.0))
    acc = {
        "record": record,
        "min": record,
        "max": record,
        "delta": delta,
        "features": eps_feat,
        "label": eps_label if label is not None else "public",
        "exact_features": exact,
    }
    return {
        "n_releases": n_clients,
        "eps": acc,
        "learners": out,
        "sigma": float(getattr(feat, "sigma", float("nan"))),
        "p": p,
        "n_test": len(te),
    }

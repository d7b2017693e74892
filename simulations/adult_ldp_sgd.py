"""LDP-SGD in its one-release form (Wang et al., ICDE 2019, §V) on UCI Adult: the competitor that
releases a gradient instead of the record.

Data: ``load_adult_binned`` — adult.data's 30,162 rows are the clients, adult.test's 15,060 clean rows
the test set; 12 discrete attributes, one-hot encoded (k − 1 indicators each: 91 inputs, d = 92 with the
intercept). Each client releases ONE thing once, at ε per client: a clipped logistic-loss gradient
(m = max(1, ⌊ε/2.5⌋) of the 92 coordinates by the Piecewise Mechanism at ε/m), or — in the intercept
and check groups — the intercept-only gradient / its accuracy gain (``fedrr.gradient_release.GradientClients``
for the clients, ``fedrr.estimators.LDPSGDClassifier`` for the server). The
model falls back to the intercept-only model (the majority class) when the group-size rule leaves no
model round or the check group's released gain is not two standard errors above zero.

Every (ε, seed s) has its own run seed SeedSequence([--seed, round(1000 ε), s]), so a cell's number
does not depend on which other cells are run.

    python simulations/adult_ldp_sgd.py                      # 5 ε x 3 seeds (~1 min per fit on 2 cores)
    python simulations/adult_ldp_sgd.py --mechanism duchi --seeds 5
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

import numpy as np

from fedrr.datasets import load_adult_binned
from fedrr.estimators import LDPSGDClassifier
from fedrr.gradient_release import GradientClients

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)


def run_seed(seed: int, eps: float, s: int) -> int:
    return int(np.random.SeedSequence([seed, round(1000 * eps), s]).generate_state(1)[0])


def run(epsilons=EPSILONS, n_seeds: int = 3, *, seed: int = 0, mechanism: str = "piecewise") -> list[dict]:
    """One row per (ε, seed): test accuracy and what the protocol did."""
    train, test = load_adult_binned()
    k = train.schema.states()
    rows = []
    for eps in epsilons:
        for s in range(n_seeds):
            t0 = time.perf_counter()
            clients = GradientClients(train.X, train.y, eps, seed=run_seed(seed, eps, s))
            est = LDPSGDClassifier(mechanism=mechanism, n_states=k, random_state=run_seed(seed, eps, s))
            est.fit(clients)
            assert est.epsilon_ <= eps  # every client's one release, by the mechanisms' own accounting
            c = est.check_ or {}
            unchecked = copy.copy(est)  # the SGD model itself, before the check group decided
            unchecked.theta_ = est.candidate_
            rows.append(
                {
                    "epsilon": eps,
                    "seed": s,
                    "accuracy": est.score(test.X, test.y),
                    "fallback": est.fallback_,
                    "unchecked": unchecked.score(test.X, test.y),
                    "model_rounds": est.n_iter_,
                    "group": dict(est.groups_).get("gradient", 0),
                    "gain": c.get("gain"),
                    "se": c.get("se"),
                    "eps_client": est.epsilon_,
                    "seconds": time.perf_counter() - t0,
                }
            )
            print(
                f"  ε={eps:g} seed {s}: accuracy {rows[-1]['accuracy']:.4f}, fallback {est.fallback_}, "
                f"T={est.n_iter_} ({rows[-1]['seconds']:.0f} s)",
                flush=True,
            )
    return rows


def references() -> dict[str, float]:
    """Majority class and clean one-hot logistic regression (C = 1) on the same split."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    train, test = load_adult_binned()
    enc = OneHotEncoder(categories=[list(range(kj)) for kj in train.schema.states()], drop="first").fit(train.X)
    lr = LogisticRegression(C=1.0, max_iter=5000).fit(enc.transform(train.X), train.y)
    return {
        "majority class": float(np.mean(test.y == np.bincount(train.y).argmax())),
        "clean logistic regression": lr.score(enc.transform(test.X), test.y),
    }


def table(rows: list[dict], epsilons) -> str:
    """Per ε: test accuracy (mean, its se, the seeds' sd, the worst seed), how often it fell back, the
    SGD model's own accuracy before the check decided (mean; worst), T model rounds x group size, and
    each seed's released check gain ± se."""
    head = (
        f"{'ε':>4} | {'accuracy: mean (se; sd)':>24} | {'min':>6} | fallbacks | {'before check: mean; min':>23} "
        f"| {'T x group':>11} | check gain ± se"
    )
    lines = [head, "-" * len(head)]
    for eps in epsilons:
        r = [x for x in rows if x["epsilon"] == eps]
        acc, raw = np.array([x["accuracy"] for x in r]), np.array([x["unchecked"] for x in r])
        sd = acc.std(ddof=1) if acc.size > 1 else float("nan")
        T = sorted({(x["model_rounds"], x["group"]) for x in r})
        gains = ", ".join("-" if x["gain"] is None else f"{x['gain']:.3f}±{x['se']:.3f}" for x in r)
        lines.append(
            f"{eps:4g} | {f'{acc.mean():.4f} ({sd / np.sqrt(acc.size):.4f}; {sd:.4f})':>24} | {acc.min():.4f} | "
            f"{sum(x['fallback'] for x in r)}/{len(r):<7} | {f'{raw.mean():.4f}; {raw.min():.4f}':>23} | "
            f"{', '.join(f'{t} x {g}' for t, g in T):>11} | {gains}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per ε (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    parser.add_argument("--mechanism", choices=("piecewise", "duchi"), default="piecewise")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    print("command: python simulations/adult_ldp_sgd.py " + " ".join(argv))
    t0 = time.perf_counter()
    rows = run(EPSILONS, args.seeds, seed=args.seed, mechanism=args.mechanism)
    print(
        f"test accuracy over {args.seeds} seeds, LDPSGDClassifier(mechanism={args.mechanism!r}) defaults, "
        "load_adult_binned(), 30,162 clients"
    )
    print(table(rows, EPSILONS))
    for name, acc in references().items():
        print(f"{name:>26}: {acc:.4f}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return rows


if __name__ == "__main__":
    main()

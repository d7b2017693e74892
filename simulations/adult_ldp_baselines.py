"""Two LDP baselines on UCI Adult, one ``--part`` each: LDP naive Bayes and LDP-SGD, each against the
majority class and clean references, test accuracy per ε (mean, se and sd over seeds).
Data: ``load_adult_binned`` — adult.data's 30,162 rows are the clients, adult.test's 15,060 clean
rows the test set, 12 discrete attributes.

``--part naive-bayes``: naive Bayes from locally private releases (after Yilmaz, Al-Rubaie & Chang 2019,
"Locally differentially private naive Bayes classification").

Each training client releases once, at ε per record:

* one sampled attribute: its label by k-RR at ε/2 and ONE uniformly chosen attribute by k-RR at
  ε/2 (the other 11 are not released: NaN);
* all attributes: its label by k-RR at ε/2 and each of the 12 attributes by k-RR at ε/24.

The server fits ``LDPNaiveBayes`` on the releases; the table gives test accuracy (mean ± sd over
seeds) with the majority class and clean naive Bayes / one-hot logistic regression (C = 1) for
reference. Every (protocol p, ε, seed s) has its own generator SeedSequence(--seed, spawn_key=(p,
round(1000 ε), s)), so a cell's number does not depend on which other cells are run.
Attribute sampling is done here by releasing every attribute and discarding the unsampled ones
(the same distribution as a client releasing only the sampled one; a simulation shortcut).

``--part sgd``: LDP-SGD in its one-release form (Wang et al., ICDE 2019, §V): the competitor that
releases a gradient instead of the record.

The 12 attributes one-hot encoded (k − 1 indicators each: 91 inputs, d = 92 with the
intercept). Each client releases ONE thing once, at ε per client: a clipped logistic-loss gradient
(m = max(1, ⌊ε/2.5⌋) of the 92 coordinates by the Piecewise Mechanism at ε/m), or — in the intercept
and check groups — the intercept-only gradient / its accuracy gain (``fedrr.gradient_release.GradientClients``
for the clients, ``fedrr.estimators.LDPSGDClassifier`` for the server). The
model falls back to the intercept-only model (the majority class) when the group-size rule leaves no
model round or the check group's released gain is not two standard errors above zero.

Every (ε, seed s) has its own run seed SeedSequence([--seed, round(1000 ε), s]), so a cell's number
does not depend on which other cells are run.

    python simulations/adult_ldp_baselines.py --part naive-bayes              # 5 ε x 3 seeds, ~15 s
    python simulations/adult_ldp_baselines.py --part naive-bayes --method mle --seeds 30 --closed left   # ~8 min
    python simulations/adult_ldp_baselines.py --part sgd                      # 5 ε x 3 seeds (~1 min a fit on 2 cores)
    python simulations/adult_ldp_baselines.py --part sgd --mechanism duchi --seeds 5
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np

from fedrr.datasets import load_adult_binned
from fedrr.estimators import LDPNaiveBayes, LDPSGDClassifier
from fedrr.gradient_release import GradientClients
from fedrr.io import command_line, part_parser, run_part
from fedrr.mechanisms import RandomizedResponse, RecordMechanism

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: --part NAME: what it measures (its function is part_NAME, "-" read as "_")
PARTS = {
    "naive-bayes": "LDPNaiveBayes on one sampled attribute or on all attributes at ε per record",
    "sgd": "LDPSGDClassifier, one gradient release per client",
}


def _parser(part: str) -> argparse.ArgumentParser:
    return part_parser(f"{__doc__.splitlines()[0]} --part {part}: {PARTS[part]}.", PARTS)


# --- --part naive-bayes

PROTOCOLS = ("one sampled attribute", "all attributes")


def sampled_release(rm: RecordMechanism, X, y, n_sampled: int | None, rng: np.random.Generator):
    """Each client releases its label and ``n_sampled`` attributes chosen uniformly without
    replacement, independently of its data (None: all of them); unreleased attributes are NaN."""
    X_tilde, y_tilde = rm.release(X, y, rng=rng)
    if n_sampled is None:
        return X_tilde, y_tilde
    n, D = X_tilde.shape
    chosen = rng.permuted(np.tile(np.arange(D), (n, 1)), axis=1)[:, :n_sampled]
    out = np.full((n, D), np.nan)
    np.put_along_axis(out, chosen, np.take_along_axis(X_tilde, chosen, axis=1), axis=1)
    return out, y_tilde


def protocol(name: str, k: np.ndarray, epsilon: float) -> tuple[RecordMechanism, int | None]:
    """The record mechanism and number of sampled attributes of one protocol at ε per record."""
    label = RandomizedResponse(2, epsilon=epsilon / 2)
    if name == "one sampled attribute":
        return RecordMechanism([RandomizedResponse(int(kj), epsilon=epsilon / 2) for kj in k], label), 1
    return RecordMechanism([RandomizedResponse(int(kj), epsilon=epsilon / (2 * len(k))) for kj in k], label), None


def record_epsilon(rm: RecordMechanism, n_sampled: int | None) -> float:
    """ε one client spends: its label plus the (worst case) n_sampled attributes it releases."""
    eps = sorted((f.mechanism.epsilon for f in rm.fields), reverse=True)
    return rm.label.epsilon + sum(eps[: len(eps) if n_sampled is None else n_sampled])


def nb_rows(epsilons=EPSILONS, n_seeds: int = 3, *, seed: int = 0, closed: str | None = None, alpha: float = 1.0,
        method: str = "projection", protocols=PROTOCOLS) -> list[dict]:  # fmt: skip
    """One row per (protocol, ε, seed): test accuracy of LDPNaiveBayes fitted on the releases."""
    train, test = load_adult_binned(closed=closed)
    k = train.schema.states()
    rows = []
    for p, name in enumerate(PROTOCOLS):
        if name not in protocols:
            continue
        for eps in epsilons:
            rm, m = protocol(name, k, eps)
            assert abs(record_epsilon(rm, m) - eps) < 1e-9  # the budget split is what the table says
            for s in range(n_seeds):
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(p, round(1000 * eps), s)))
                X_tilde, y_tilde = sampled_release(rm, train.X, train.y, m, rng)
                model = LDPNaiveBayes(alpha=alpha, method=method).fit(X_tilde, y_tilde, mechanism=rm)
                rows.append({"protocol": name, "epsilon": eps, "seed": s, "accuracy": model.score(test.X, test.y)})
    return rows


def clean_references(closed: str | None = None, alpha: float = 1.0) -> dict[str, float]:
    """Majority class, clean naive Bayes (same smoothing) and clean one-hot logistic regression (C = 1)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    train, test = load_adult_binned(closed=closed)
    enc = OneHotEncoder(categories=[list(range(kj)) for kj in train.schema.states()]).fit(train.X)
    lr = LogisticRegression(C=1.0, max_iter=5000).fit(enc.transform(train.X), train.y)
    return {
        "majority class": float(np.mean(test.y == np.bincount(train.y).argmax())),
        "clean naive Bayes": LDPNaiveBayes(alpha=alpha).fit(train.X, train.y).score(test.X, test.y),
        "clean logistic regression": lr.score(enc.transform(test.X), test.y),
    }


def nb_table(rows: list[dict], epsilons) -> str:
    """Mean test accuracy per ε and protocol, its standard error and the seeds' sd."""
    lines = [f"{'ε':>5} | " + " | ".join(f"{p + ': mean (se; sd)':>36}" for p in PROTOCOLS), "-" * 86]
    for eps in epsilons:
        cells = []
        for p in PROTOCOLS:
            acc = np.array([r["accuracy"] for r in rows if r["protocol"] == p and r["epsilon"] == eps])
            sd = acc.std(ddof=1) if acc.size > 1 else float("nan")
            cells.append(f"{acc.mean():.4f} ({sd / np.sqrt(acc.size):.4f}; {sd:.4f})")
        lines.append(f"{eps:5g} | " + " | ".join(f"{c:>36}" for c in cells))
    return "\n".join(lines)


def part_naive_bayes(argv: list[str]) -> int:
    parser = _parser("naive-bayes")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per ε (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    parser.add_argument(
        "--closed",
        choices=("right", "left"),
        default=None,
        help="load_adult_binned(closed=); default: the loader's (left for the public edges)",
    )
    parser.add_argument("--alpha", type=float, default=1.0, help="LDPNaiveBayes pseudo-count (default 1)")
    parser.add_argument("--method", choices=("projection", "mle"), default="projection")
    args = parser.parse_args(argv)
    print("command: " + command_line(argv))
    t0 = time.perf_counter()
    rows = nb_rows(EPSILONS, args.seeds, seed=args.seed, closed=args.closed, alpha=args.alpha, method=args.method)
    print(
        f"test accuracy over {args.seeds} seeds, LDPNaiveBayes(alpha={args.alpha:g}, method={args.method!r}), "
        f"load_adult_binned(closed={args.closed!r})"
    )
    print(nb_table(rows, EPSILONS))
    for name, acc in clean_references(args.closed, args.alpha).items():
        print(f"{name:>26}: {acc:.4f}")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


# --- --part sgd


def run_seed(seed: int, eps: float, s: int) -> int:
    return int(np.random.SeedSequence([seed, round(1000 * eps), s]).generate_state(1)[0])


def sgd_rows(epsilons=EPSILONS, n_seeds: int = 3, *, seed: int = 0, mechanism: str = "piecewise") -> list[dict]:
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


def sgd_table(rows: list[dict], epsilons) -> str:
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


def part_sgd(argv: list[str]) -> int:
    parser = _parser("sgd")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per ε (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    parser.add_argument("--mechanism", choices=("piecewise", "duchi"), default="piecewise")
    args = parser.parse_args(argv)
    print("command: " + command_line(argv))
    t0 = time.perf_counter()
    rows = sgd_rows(EPSILONS, args.seeds, seed=args.seed, mechanism=args.mechanism)
    print(
        f"test accuracy over {args.seeds} seeds, LDPSGDClassifier(mechanism={args.mechanism!r}) defaults, "
        "load_adult_binned(), 30,162 clients"
    )
    print(sgd_table(rows, EPSILONS))
    for name, acc in references().items():
        print(f"{name:>26}: {acc:.4f}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_part(__doc__.split("\n\n")[0], {"naive-bayes": part_naive_bayes, "sgd": part_sgd}, argv)


if __name__ == "__main__":
    raise SystemExit(main())

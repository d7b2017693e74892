"""Naive Bayes from locally private releases on UCI Adult (after Yilmaz, Al-Rubaie & Chang 2019,
"Locally differentially private naive Bayes classification").

Data: ``load_adult_binned`` — adult.data to train on (30,162 clients), adult.test to test on
(15,060 clean records), 12 discrete attributes. Each training client releases once, at ε per record:

* one sampled attribute: its label by k-RR at ε/2 and ONE uniformly chosen attribute by k-RR at
  ε/2 (the other 11 are not released: NaN);
* all attributes: its label by k-RR at ε/2 and each of the 12 attributes by k-RR at ε/24.

The server fits ``LDPNaiveBayes`` on the releases; the table gives test accuracy (mean ± sd over
seeds) with the majority class and clean naive Bayes / one-hot logistic regression (C = 1) for
reference. Every (protocol p, ε, seed s) has its own generator SeedSequence(--seed, spawn_key=(p,
round(1000 ε), s)), so a cell's number does not depend on which other cells are run.
Attribute sampling is done here by releasing every attribute and discarding the unsampled ones
(the same distribution as a client releasing only the sampled one; a simulation shortcut).

    python simulations/adult_ldp_naive_bayes.py                     # 5 ε x 3 seeds, ~15 s
    python simulations/adult_ldp_naive_bayes.py --method mle --seeds 30 --closed left   # ~8 min
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from fedrr.datasets import load_adult_binned
from fedrr.estimators import LDPNaiveBayes
from fedrr.mechanisms import RandomizedResponse, RecordMechanism

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
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


def run(epsilons=EPSILONS, n_seeds: int = 3, *, seed: int = 0, closed: str | None = None, alpha: float = 1.0,
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


def table(rows: list[dict], epsilons) -> str:
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


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    argv = sys.argv[1:] if argv is None else argv
    print("command: python simulations/adult_ldp_naive_bayes.py " + " ".join(argv))
    t0 = time.perf_counter()
    rows = run(EPSILONS, args.seeds, seed=args.seed, closed=args.closed, alpha=args.alpha, method=args.method)
    print(
        f"test accuracy over {args.seeds} seeds, LDPNaiveBayes(alpha={args.alpha:g}, method={args.method!r}), "
        f"load_adult_binned(closed={args.closed!r})"
    )
    print(table(rows, EPSILONS))
    for name, acc in clean_references(args.closed, args.alpha).items():
        print(f"{name:>26}: {acc:.4f}")
    print(f"({time.perf_counter() - t0:.1f} s)")
    return rows


if __name__ == "__main__":
    main()

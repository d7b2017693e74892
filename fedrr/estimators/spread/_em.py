"""Spread-EM's iterations over a group of shards (``_runtime``): independent chains,
each its own EM trajectory from the same start, so that their agreement says whether the answer
is signal or Monte Carlo noise.

Phase 1 (stochastic EM, burn-in): per iteration an E-step per chain, then a few L-BFGS steps of
the M-step (Barber eq 60 with the labels summed out), over-relaxed by ω. It ends when no chain
drifts any more: the mean parameter norm of its last two windows of 5 iterates (of each logit row,
with more than two classes) differs by less than ``tol`` (relative), or at half the budget.

Phase 2 (stochastic approximation): per iteration an E-step, then θ ← θ − γ_t·H⁻¹∇, where ∇ is the
gradient of the complete-data objective at θ over the current samples — by Fisher's identity an
unbiased estimate of the observed-data gradient when the chain is stationary — and H the
complete-data Hessian at the end of phase 1 (block-diagonal across classes; it bounds the
observed-data curvature, so a step is never longer than an EM step); γ = ``SA_STEP``, and the
estimate is the Polyak average of the phase-2 iterates. Unlike a full M-step on a finite sample (whose fixed point
moves with S: at N = 300, S = 2 gave a coefficient norm 1.14× the exact MLE), the update is linear
in the samples, so its fixed point is the MLE's. The averaging window grows until the chains agree
in prediction — the root-mean-square difference of their logits at the pool's posterior samples is
at most ``agreement_tol`` times the logits' standard deviation (``prediction_distance``: ≈ 0 for
chains that predict alike, ≈ √2 for unrelated noise) — or ``max_iter`` is spent, and the result
says which. The cosine, relative distance and R-hat of the coefficients are reported too; they do
not decide, because in many dimensions poorly identified directions that barely move a prediction
dominate them (MNIST 7v9 at flip 0.3, N = 9,000: cosine 0.95, relative distance 0.31, max R-hat
4.2 after 90 averaged iterations, prediction distance 0.12).

Chain agreement measures Monte Carlo noise only: whether the releases carry signal at all is a
statistical question, which ``SpreadLogisticRegressionCV`` answers on held-out releases."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from ._mstep import ChainObjective, msteps
from ._runtime import ShardGroup

#: phase 2's step, a fraction of the EM-like step H⁻¹∇ (constant: the iterates form a stationary
#: chain around the fixed point, on which R-hat is meaningful; the Polyak average removes the noise)
SA_STEP = 0.5
#: samples (over all shards) the preconditioning Hessian is computed on, at least 2 per parameter
HESSIAN_ROWS = 4096


@dataclass(frozen=True)
class EMOptions:
    """What ``run_em`` reads of a fit: the estimator's validated parameters of the same names (their
    defaults and rules live on ``SpreadLogisticRegression`` only; ``from_params`` picks them by name),
    and the four ``DERIVED`` from them at fit time."""

    C: float
    fit_intercept: bool
    n_chains: int
    n_samples: int  # resolved: the parameter's None is 1 (mcmc) or 10 (importance)
    max_iter: int
    burn_in: int | None
    n_average: int
    tol: float
    m_step_iter: int
    relaxation: float
    learn_prior: bool  # prior="learned": the prior is refined during EM
    agreement_tol: float
    verbose: int
    #: resolved ``init``: None for the calibration start (an M-step on the regression-calibration
    #: inputs), else θ (coefficients row-major, then the intercepts) whose E-step's samples the
    #: start's M-step fits (from θ: naive Bayes's log-odds, whose rare states' coefficients the
    #: penalty shrinks there; EM's partial M-steps took 200 iterations to, results/adult_scale_designs)
    start: np.ndarray | None
    #: resolved ``shrink_to``: None for 0 (the ridge), else the (rows, n_inputs) coefficients the
    #: penalty ‖coef − center‖²/(2C) shrinks toward (naive Bayes's log-odds on the same releases)
    center: np.ndarray | None

    #: the fields not copied from a parameter of the same name
    DERIVED: ClassVar[tuple[str, ...]] = ("n_samples", "learn_prior", "start", "center")

    @classmethod
    def from_params(cls, params: dict, **derived: Any) -> EMOptions:
        """The options from the estimator's validated parameters ``params`` (by field name) and the
        ``DERIVED`` values."""
        if set(derived) != set(cls.DERIVED):
            raise TypeError(f"EMOptions.from_params needs exactly {cls.DERIVED}, got {sorted(derived)}")
        names = [f.name for f in fields(cls)]
        return cls(**{k: params[k] for k in names if k not in derived}, **derived)


@dataclass(kw_only=True)
class EMResult:
    """What ``run_em`` returns (built by keyword: 16 fields)."""

    coef: np.ndarray
    intercept: np.ndarray
    chain_coef: np.ndarray  # (n_chains, Rn, n_inputs): each chain's averaged coefficients
    chain_intercept: np.ndarray
    priors: list
    n_iter: int
    burn_in: int
    converged: bool
    convergence: str
    rhat_max: float
    rhat_median: float
    cosine: float
    distance: float
    prediction_distance: float
    history: list = field(default_factory=list)
    bytes_per_iter: float = 0.0


def drifting(iterates: list[np.ndarray], tol: float, window: int = 5, rows: int = 1, d: int = 0) -> bool:
    """Is the chain still moving? The mean parameter norm of the last window of iterates differs
    from the window before by more than ``tol`` (relative) — a chain that only fluctuates around
    its fixed point has the same mean norm in both. With ``rows`` > 1 logit rows of ``d`` inputs
    (multi-class: coefficients row-major, then one intercept per row if any) the test is per row, each row's
    coefficients with its intercept: mass moving between rows at a constant total norm is drift
    (results/multiclass_burn_in: the whole-vector test stopped the burn-in 1.4 from the MLE)."""
    if len(iterates) < 2 * window:
        return True
    it = np.asarray(iterates[-2 * window :])
    if rows > 1:
        coef, b = it[:, : rows * d].reshape(len(it), rows, d), it[:, rows * d :]  # b: intercepts, or none
        it = np.concatenate([coef, b.reshape(len(it), rows, 1)], axis=2) if b.size else coef  # (2w, rows, d [+1])
    norms = np.linalg.norm(it, axis=-1)  # (2w,) or (2w, rows)
    a, b = norms[:window].mean(axis=0), norms[window:].mean(axis=0)
    return bool(np.any(np.abs(b - a) > tol * np.maximum(np.maximum(a, b), 1e-12)))


def inverse_hessian(H: np.ndarray, lam: float, fit_intercept: bool) -> list[np.ndarray]:
    """Per logit row, the inverse of the penalised complete-data Hessian, from ``H``: the group's
    unpenalised sum of ``Shard.hessian`` at θ (Rn, d+1, d+1)."""
    d = H.shape[1] - 1
    H[:, np.arange(d), np.arange(d)] += lam
    if not fit_intercept:
        H = H[:, :d, :d]
    H[:, np.arange(H.shape[1]), np.arange(H.shape[1])] += 1e-9 * (1 + np.abs(np.diagonal(H, axis1=1, axis2=2)))
    return [cho_solve(cho_factor(h), np.eye(h.shape[0])) for h in H]


def _local_preconditioner(block, chain: int, coef, b, lam: float, fit_intercept: bool) -> list[np.ndarray]:
    """One chain's ``inverse_hessian`` on the actor holding its shards: the chains' run in parallel."""
    return inverse_hessian(block.reduce("hessian", chain, coef, b, HESSIAN_ROWS), lam, fit_intercept)


def _inverse_hessians(
    group: ShardGroup, probs: list[ChainObjective], theta: list[np.ndarray]
) -> list[list[np.ndarray]]:
    """Every chain's ``inverse_hessian`` at its θ: where its shards are if one actor holds them all."""
    if group.solo_chains:
        jobs = [(p.chain, (p.chain, *p.unpack(theta[p.chain]), p.lam, p.fit_intercept)) for p in probs]
        return group.run_each(_local_preconditioner, jobs, one_off=True)
    H = group.reduce_each("hessian", [(p.chain, *p.unpack(theta[p.chain]), HESSIAN_ROWS) for p in probs])
    return [inverse_hessian(h, p.lam, p.fit_intercept) for p, h in zip(probs, H)]


def preconditioner(problem: ChainObjective, inv: list[np.ndarray]):
    """x -> H⁻¹x with H the penalised complete-data Hessian at θ (block-diagonal across logit
    rows), from its inverse per row (``inverse_hessian``)."""
    rows, d = problem.rows, problem.d

    def apply(g: np.ndarray) -> np.ndarray:
        gc, gb = g[: rows * d].reshape(rows, d), g[rows * d :]
        out_c, out_b = np.empty_like(gc), np.empty(rows)
        for r in range(rows):
            v = np.concatenate([gc[r], gb[r : r + 1]]) if problem.fit_intercept else gc[r]
            x = inv[r] @ v
            out_c[r] = x[:d]
            if problem.fit_intercept:
                out_b[r] = x[d]
        return np.concatenate([out_c.ravel(), out_b if problem.fit_intercept else np.zeros(0)])

    return apply


def diagnostics(
    iterates: list[np.ndarray], averages: list[np.ndarray], d_coef: int
) -> tuple[float, float, float, float]:
    """(max R-hat, median R-hat, min pairwise cosine, max relative distance) of the chains:
    Gelman–Rubin per parameter on the second half of each chain's phase-2 iterates, and the cosine
    and relative distance ‖θ̄_a − θ̄_b‖ / ‖(θ̄_a + θ̄_b)/2‖ between the chains' averaged coefficients."""
    T = min(len(it) for it in iterates) // 2
    A = np.stack([np.asarray(it[-T:]) for it in iterates]) if T else np.zeros((len(iterates), 0, 1))
    cos, dist = _cosine(averages, d_coef), _distance(averages, d_coef)
    if T < 2:
        return float("inf"), float("inf"), cos, dist
    W = A.var(axis=1, ddof=1).mean(axis=0)
    B = T * A.mean(axis=1).var(axis=0, ddof=1)
    V = (T - 1) / T * W + B / T
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(np.where(W > 1e-300, V / W, 1.0))
    return float(np.max(rhat)), float(np.median(rhat)), cos, dist


def prediction_distance(group: ShardGroup, averages: list[np.ndarray], problem) -> float:
    """The largest over chain pairs of the root-mean-square difference of their logits at the pool's
    current posterior samples, relative to the standard deviation of the mean model's logits:
    ≈ 0 when the chains predict alike, ≈ √2 when their models are unrelated noise."""
    parts = [problem.unpack(a) for a in averages]
    mom = group.reduce("logit_moments", 0, [p[0] for p in parts], [p[1] for p in parts])
    W, s1, G = mom["w"], mom["s1"], mom["G"]
    m = len(averages)
    spread = G.sum() / (m * m * W) - float(np.sum((s1.sum(axis=0) / (m * W)) ** 2))
    worst = 0.0
    for a in range(m):
        for b in range(a + 1, m):
            gap = max(G[a, a] - 2 * G[a, b] + G[b, b], 0.0) / W
            worst = max(worst, float(np.sqrt(gap / spread)) if spread > 0 else float("inf"))
    return worst


def _distance(averages: list[np.ndarray], d_coef: int) -> float:
    worst = 0.0
    for i in range(len(averages)):
        for j in range(i + 1, len(averages)):
            a, b = averages[i][:d_coef], averages[j][:d_coef]
            mid = np.linalg.norm(0.5 * (a + b))
            worst = max(worst, float(np.linalg.norm(a - b) / mid) if mid > 0 else float("inf"))
    return worst


def _cosine(averages: list[np.ndarray], d_coef: int) -> float:
    best = 1.0
    for i in range(len(averages)):
        for j in range(i + 1, len(averages)):
            a, b = averages[i][:d_coef], averages[j][:d_coef]
            na, nb = np.linalg.norm(a), np.linalg.norm(b)
            best = min(best, float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0)
    return best


# C901: one EM loop; its phases (burn-in, averaging, stopping) share the chains' state
def run_em(group: ShardGroup, n_inputs: int, n_classes: int, priors: list, opts: EMOptions) -> EMResult:  # noqa: C901
    rows = 1 if n_classes == 2 else n_classes
    m = opts.n_chains
    probs = [ChainObjective(group, c, rows, n_inputs, opts.C, opts.fit_intercept, opts.center) for c in range(m)]
    bytes0 = group.bytes
    for c in range(m):
        group.call("set_prior", c, priors[c])
    if opts.start is None:  # calibration: an M-step on the regression-calibration inputs
        group.call("init_samples", 0)
        start = msteps(group, probs[:1], [np.zeros(rows * n_inputs + (rows if opts.fit_intercept else 0))], 50)[0]
    else:  # the same M-step on an E-step's samples at the given θ (iteration 0's stream of chain 0)
        theta0 = np.array(opts.start, dtype=float)
        probs[0].know(theta0, group.reduce_each("estep", [(0, 0, *probs[0].unpack(theta0), opts.n_samples)])[0])
        start = msteps(group, probs[:1], [theta0], 50)[0]
    theta = [start.copy() for _ in range(m)]
    hess = [None] * m
    history: list[dict] = []
    burn_in = opts.burn_in
    it = 0
    phase1: list[list[np.ndarray]] = [[] for _ in range(m)]
    phase2: list[list[np.ndarray]] = [[] for _ in range(m)]
    avg = [np.zeros_like(start) for _ in range(m)]
    converged, message, held = False, "", False
    rhat_max = rhat_med = float("nan")
    cos = dist = pdist = float("nan")
    next_check = None if burn_in is None else burn_in + opts.n_average  # a given burn-in, 0 included
    while it < opts.max_iter:
        it += 1
        in_phase2 = burn_in is not None and it > burn_in
        stats = group.reduce_each("estep", [(c, it, *probs[c].unpack(theta[c]), opts.n_samples) for c in range(m)])
        for c in range(m):
            probs[c].know(theta[c], stats[c])
        if not in_phase2:
            fits = msteps(group, probs, theta, opts.m_step_iter)
        elif hess[0] is None:
            inv = _inverse_hessians(group, probs, theta)
            hess = [preconditioner(probs[c], inv[c]) for c in range(m)]
        change = []
        for c in range(m):
            prev = theta[c]
            if not in_phase2:
                theta[c] = theta[c] + opts.relaxation * (fits[c] - theta[c])
                phase1[c].append(theta[c].copy())
            else:
                t = it - burn_in
                _, g = probs[c].fg(theta[c])  # the E-step's own evaluation: no round trip
                step = hess[c](g)
                theta[c] = theta[c] - SA_STEP * step
                phase2[c].append(theta[c].copy())
                avg[c] += (theta[c] - avg[c]) / t
            change.append(float(np.linalg.norm(theta[c] - prev) / max(np.linalg.norm(theta[c]), 1e-3)))
        if opts.learn_prior:
            gamma = 1.0 / (it + 1)
            new = group.update_priors([(c, stats[c].get("stats"), gamma, priors[c]) for c in range(m)])
            held = new is None  # the group's actors own the priors (one per chain): fetched at the end
            if not held:
                priors[:] = new
        acc = float(np.mean([s["accepted"] / max(s["proposed"], 1) for s in stats]))
        history.append(
            {
                "iter": it,
                "phase": 2 if in_phase2 else 1,
                "change": max(change),
                "acceptance": acc,
                "coef_norm": float(np.mean([np.linalg.norm(probs[0].unpack(th)[0]) for th in theta])),
            }
        )
        if opts.verbose:
            print(f"[spread-EM] iter {it} phase {history[-1]['phase']}: change {max(change):.3g} accept {acc:.3f}")
        if burn_in is None:
            if not any(drifting(ph, opts.tol, rows=rows, d=n_inputs) for ph in phase1) or it >= opts.max_iter // 2:
                burn_in = it
                next_check = it + opts.n_average
        if in_phase2 and it >= next_check and m == 1:  # nothing to compare: one averaging window
            break
        if in_phase2 and it >= next_check:
            rhat_max, rhat_med, cos, dist = diagnostics(phase2, avg, rows * n_inputs)
            pdist = prediction_distance(group, avg, probs[0])
            history[-1].update(rhat_max=rhat_max, rhat_median=rhat_med, cosine=cos, distance=dist, pdist=pdist)
            if opts.verbose:
                print(f"[spread-EM] check: cosine {cos:.3f} distance {dist:.3f} prediction distance {pdist:.3f}")
            if pdist <= opts.agreement_tol:
                converged = True
                break
            next_check = it + opts.n_average
    if burn_in is None or not phase2[0]:  # the budget ran out in phase 1
        avg = [th.copy() for th in theta]
        message = (
            f"budget spent in burn-in ({it} iterations): the chains never settled; the estimate is the last iterate"
        )
    elif m == 1:
        message = (
            f"one chain, {it - burn_in} iterations averaged: its Monte Carlo noise was not assessed "
            "(n_chains >= 2 compares independent chains)"
        )
    elif converged:
        message = (
            f"chains agree after {it} iterations ({it - burn_in} averaged): prediction distance {pdist:.3f}; "
            f"coefficients: cosine {cos:.3f}, relative distance {dist:.3f}, median R-hat {rhat_med:.2f} "
            f"(max {rhat_max:.2f})"
        )
    else:
        rhat_max, rhat_med, cos, dist = diagnostics(phase2, avg, rows * n_inputs)
        pdist = prediction_distance(group, avg, probs[0])
        message = (
            f"budget spent (max_iter = {opts.max_iter}) before the chains agreed: prediction distance "
            f"{pdist:.3f} (tolerance {opts.agreement_tol}); coefficients: cosine {cos:.3f}, relative distance "
            f"{dist:.3f}, median R-hat {rhat_med:.2f} (max {rhat_max:.2f}); the estimate may be Monte Carlo noise"
        )
    if held:
        priors[:] = group.fetch_priors(range(m))
    coefs = np.stack([probs[0].unpack(a)[0] for a in avg])
    bs = np.stack([probs[0].unpack(a)[1] for a in avg])
    return EMResult(
        coef=coefs.mean(axis=0),
        intercept=bs.mean(axis=0),
        chain_coef=coefs,
        chain_intercept=bs,
        priors=priors,
        n_iter=it,
        burn_in=burn_in if burn_in is not None else it,
        converged=converged,
        convergence=message,
        rhat_max=rhat_max,
        rhat_median=rhat_med,
        cosine=cos,
        distance=dist,
        prediction_distance=pdist,
        history=history,
        bytes_per_iter=(group.bytes - bytes0) / max(it, 1),
    )

"""A shard of spread-EM's pool: a block of records and everything the EM keeps about them for the
whole fit — the releases, the label terms, each chain's state and last samples, a copy of each
chain's prior. The driver sends it models and prior updates and gets back sufficient statistics,
losses and gradients: O(model) bytes per call, whatever the shard's size. The same object serves
serial, threaded and Ray-actor execution (``_runtime``); every random draw comes
from ``SeedSequence(entropy, spawn_key=(shard, chain, iteration))``, so the fit does not depend on
who runs the shard.

E-step (Barber §5): a persistent independence-Metropolis chain per record whose proposal is the
exact posterior ρ(x | x̃) ∝ p(x̃ | x) p(x) (eq 58) and whose stationary law is p(x | x̃, c̃) (accept
with min(1, g(x')/g(x)), g(x) = Σ_c p(c̃|c) p_θ(c|x)); labels are summed out exactly. Attributes a
client did not release (NaN) are drawn from the prior. ``mode="importance"`` is Barber §5.1 as
printed: fresh draws with self-normalised weights (biased at finite S; for reproduction)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...mechanisms import DiscreteMechanism, MatrixMechanism, RandomizedResponse, RecordMechanism, guide_table
from ...parallel import shard_bounds
from ._design import Design
from ._logexp import logsumexp
from ._mstep import class_log_softmax, log_class_probs, logits, soft_ce
from ._paired import PairedView, PairTerms, as_view
from ._priors._factorised import SpreadPrior, release_counts
from ._priors._joint import JointSpreadPrior, PatternSampler
from ._priors._mixture import MixtureSpreadPrior
from ._runtime._wire import Shipped


def _posterior_mean(mech, x_tilde: np.ndarray, pi: np.ndarray, T: np.ndarray) -> np.ndarray:
    """E[T[x] | x̃] under prior π for releases of one discrete column: (n, w). Randomised response
    in O(w) per release: ρ(x) ∝ π(x)(r + (q − r)·1{x = x̃}) gives (r·π@T + (q − r)π(x̃)T[x̃]) /
    (r + (q − r)π(x̃)); any other oracle through its likelihood matrix, O(k·w)."""
    if isinstance(mech, RandomizedResponse):
        xt = x_tilde.astype(np.int64)
        q, r = mech.keep_prob, mech.other_prob
        a = (q - r) * pi[xt]
        return ((r * (pi @ T))[None, :] + a[:, None] * T[xt]) / (r + a)[:, None]
    L = mech.log_likelihood_matrix(x_tilde) + np.log(np.maximum(pi, 1e-300))
    post = np.exp(L - L.max(axis=1, keepdims=True))
    return (post / post.sum(axis=1, keepdims=True)) @ T


def _states_dtype(k: int) -> type:
    """The smallest integer type of the column-major draws of states 0..k−1: the memory to write."""
    return np.int16 if k <= np.iinfo(np.int16).max else np.int32


class Shard:
    def __init__(
        self,
        index: int,
        rm: RecordMechanism,
        X_tilde: np.ndarray | Shipped,
        y_tilde: np.ndarray,
        design: Design,
        n_classes: int,
        entropy: int,
        n_chains: int,
        mode: str = "mcmc",
        n_total: int = 0,
    ):
        rm = as_view(rm)  # a PairedRecordMechanism as the E-step reads it (uniform w unless given a view)
        self.index, self.rm, self.design, self.C, self.entropy, self.mode = index, rm, design, n_classes, entropy, mode
        self.X = np.asarray(X_tilde.array if isinstance(X_tilde, Shipped) else X_tilde, float)
        self.b, self.D = self.X.shape
        self.n_total = n_total or self.b
        self.released = ~np.isnan(self.X)
        #: paired releases: the label terms t_j(x_j, c) of the released pairs (``_paired``), else None
        self.pairs = PairTerms(rm, self.X, self.released) if isinstance(rm, PairedView) else None
        if self.pairs is not None:  # no label report: the label lives in the pairs (y_tilde is all NaN)
            self.y = np.zeros(self.b, np.int64)
            self._yterm = np.zeros((self.b, n_classes))
        elif rm.label is None:  # clean labels: p(c̃ | c) is the identity
            self.y = np.asarray(y_tilde, np.int64)
            self._yterm = np.where(np.arange(n_classes) == self.y[:, None], 0.0, -np.inf)
        else:  # log p(c̃ | c) for every class, from any discrete label oracle
            self.y = np.asarray(y_tilde, np.int64)
            self._yterm = np.ascontiguousarray(rm.label.log_likelihood_matrix(self.y), dtype=float)
        self.compiled = mode == "mcmc" and all(isinstance(m, DiscreteMechanism) for m, _ in rm.groups())
        if self.compiled:
            self._compile_releases()
        self.state: list[Any] = [None] * n_chains
        self.Z: list[Any] = [None] * n_chains  # model inputs of the last samples (S·b, n_inputs) float32
        self.R: list[Any] = [None] * n_chains  # responsibilities (S·b, C)
        self.w: list[Any] = [None] * n_chains  # sample weights (S·b,)
        self.prior: list[Any] = [None] * n_chains
        self._joint: tuple | None = None  # a fixed prior's kept CDFs: (its rows or log_p, their samplers)

    def _compile_releases(self) -> None:
        """Kernel inputs: randomised-response columns keep their released state (q, r per column);
        any other oracle's released entries become rows of a likelihood table ``lik`` (each row
        p(x̃ | x = s) / max_s, zero-padded), and the column holds the row index."""
        D = self.D
        q, r = np.ones(D), np.zeros(D)
        row_cols = np.zeros(D, bool)
        kcol = np.array([self.design.layout.k[c] for c in range(D)], np.int64)
        xt = np.where(self.released, self.X, -1)
        rows = []
        n_rows = 0
        for mech, cols in self.rm.groups():
            if isinstance(mech, RandomizedResponse):
                q[cols], r[cols] = mech.keep_prob, mech.other_prob
                continue
            row_cols[cols] = True
            for c in cols:
                idx = np.flatnonzero(self.released[:, c])
                L = mech.log_likelihood_matrix(self.X[idx, c])
                rows.append(np.exp(L - L.max(axis=-1, keepdims=True)))
                xt[idx, c] = n_rows + np.arange(idx.size)
                n_rows += idx.size
        K = int(kcol.max())
        lik = np.zeros((n_rows, K))
        at = 0
        for block in rows:
            lik[at : at + block.shape[0], : block.shape[1]] = block
            at += block.shape[0]
        self.q, self.r, self.row_cols, self.kcol, self.lik = q, r, row_cols, kcol, lik
        # released states (int16 where k allows); int32 where a column holds likelihood rows, whose
        # count depends on the shard: one type for every shard of a pool, so one compiled kernel
        self.xtT = np.ascontiguousarray(xt.T, dtype=np.int32 if row_cols.any() else _states_dtype(K))

    @property
    def yterm(self) -> np.ndarray:
        """log p(c̃ | c) per record (b, C): the label term of record releases. Paired releases have no
        such per-record term (it depends on the sampled attributes): ``label_terms(x)``."""
        if self.pairs is not None:
            raise ValidationError(
                "mechanism", "paired releases have no per-record label term: it depends on x (Shard.label_terms)"
            )
        return self._yterm

    def label_terms(self, x: np.ndarray) -> np.ndarray:
        """The label term of states x (..., b, D): log p(c̃ | c) of record releases, (b, C) broadcast;
        for paired releases Σ_j t_j(x_j, c) (``_paired``), (..., b, C)."""
        if self.pairs is None:
            return self._yterm
        return self.pairs.terms(x)

    # ----------------------------------------------------------------------- priors
    def set_prior(self, chain: int, prior) -> None:
        self.prior[chain] = prior

    # ------------------------------------------------------------------------ E-step
    def estep(self, chain: int, it: int, coef: np.ndarray, intercept: np.ndarray, n_samples: int) -> dict:
        """S steps of chain ``chain`` at θ = (coef, intercept); keeps the samples for ``loss_grad``
        and returns the prior's statistics, the acceptance count, and ``fit``: the M-step's first
        evaluation, ``loss_grad`` at the same θ on the new samples, and their total ``weight`` —
        so that the M-step's first call, and phase 2's only one, need no round trip of their own."""
        rng = np.random.default_rng(np.random.SeedSequence(self.entropy, spawn_key=(self.index, chain, it)))
        if self.compiled and not isinstance(self.prior[chain], (JointSpreadPrior, MixtureSpreadPrior)):
            out = self._estep_compiled(chain, rng, coef, intercept, n_samples)
        elif self.mode == "mcmc":
            out = self._estep_mcmc(chain, rng, coef, intercept, n_samples)
        else:
            out = self._estep_importance(chain, rng, coef, intercept, n_samples)
        out["fit"] = self.loss_grad(chain, coef, intercept)
        out["weight"] = self.n_samples_weight(chain)
        return out

    def _estep_compiled(self, chain, rng, coef, intercept, S) -> dict:
        from ._kernels import rr_chain  # numba: compiled at first use, not when spread is imported

        prior = self.prior[chain]
        K = prior.disc.shape[1]
        stay, jump, P, A, cdf, guide = prior.rr_tables(self.q, self.r)
        design, b, D, C = self.design, self.b, self.D, self.C
        W = np.ascontiguousarray(design.logit_table(coef))
        E = design.state_table if design.scalar else np.zeros((0, K), np.float32)
        has = self.state[chain] is not None
        states = _states_dtype(K)  # the chain's states, its proposals and kept states (int16 where k allows)
        stateT = self.state[chain] if has else np.zeros((0, 0), states)
        Zt = np.empty((D, S * b) if design.scalar else (0, 0), np.float32)
        R = np.empty((S, b, C))
        counts = np.zeros((D, K))
        new_stateT = np.empty((D, b), states)
        statesT = np.empty((0, 0) if design.scalar else (D, S * b), np.int32)  # scalar designs read Zt
        stream = rng.integers(0, 2**64, dtype=np.uint64, endpoint=False)  # the kernel's SplitMix64 key
        acc = rr_chain(
            stream,
            self.xtT,
            self._yterm,
            stateT,
            has,
            S,
            stay,
            jump,
            P,
            A,
            cdf,
            guide,
            self.q,
            self.r,
            W,
            np.asarray(intercept, float),
            E,
            Zt,
            R,
            counts,
            new_stateT,
            statesT,
            self.row_cols,
            prior.disc,
            self.lik,
            self.kcol,
            *self._pair_args(),
        )
        self.state[chain] = new_stateT
        self.Z[chain] = Zt.T if design.scalar else design.decode(statesT.T)
        self.R[chain] = R.reshape(S * b, C)
        self.w[chain] = np.full(S * b, 1.0 / S)
        return {"stats": {"counts": counts}, "accepted": int(acc), "proposed": S * b}

    def _pair_args(self) -> tuple:
        """The compiled E-step's paired-release tables (``rr_chain``): none for record releases."""
        if self.pairs is None:
            return np.zeros((self.b, 0), np.int32), np.zeros((self.b, 0), np.int64), np.zeros(0)
        return self.pairs.cols, self.pairs.off, self.pairs.tab

    def _propose(self, rng, prior, S: int) -> np.ndarray:
        """S draws per record from ρ(x | x̃) (the prior where nothing was released): (S, b, D)."""
        if isinstance(prior, JointSpreadPrior):
            return self._propose_joint(rng, prior, S)
        if isinstance(prior, MixtureSpreadPrior):  # exact: class from p(c | x̃), then each attribute
            joint = self._joint  # read once: another chain's thread may replace it meanwhile
            if joint is None or joint[0] is not prior.log_p:  # fixed prior: CDFs kept
                joint = self._joint = (prior.log_p, prior.sampler(self.rm, self.X, self.released))
            return joint[1].draw(rng.random((S, self.b, self.D + 1)))
        from ._kernels import scatter_columns  # numba: compiled at first use, not when spread is imported

        out = np.empty((S, self.b, self.D))
        for mech, cols in self.rm.column_groups():
            if type(mech) is RandomizedResponse and isinstance(prior, SpreadPrior):
                drawn = np.empty((len(cols), S, self.b), _states_dtype(mech.k))  # column-major: each contiguous
                self._propose_rr(rng, prior, S, mech, np.asarray(cols), drawn, np.arange(len(cols)))
                scatter_columns(drawn, np.asarray(cols, np.int64), out)
                continue
            for c in cols:
                pri = prior.for_column(c)
                rel = np.flatnonzero(self.released[:, c])
                miss = np.flatnonzero(~self.released[:, c])
                if rel.size:
                    xt = self.X[rel, c]
                    xt = xt.astype(np.int64) if isinstance(mech, DiscreteMechanism) else xt
                    out[:, rel, c] = np.asarray(mech.posterior(xt, pri).sample(rng, S)).reshape(S, rel.size)
                if miss.size:
                    out[:, miss, c] = prior.sample_column(c, rng, (S, miss.size))
        return out

    def _propose_columns(self, rng, prior, S: int) -> np.ndarray | None:
        """``_propose``'s draws, the same ones from the same stream, column-major (D, S, b) integers and
        never scattered into records (at held-out sizes, writing that array is most of the cost),
        when every column is randomised response under a factorised prior; else None."""
        groups = self.rm.column_groups()
        if isinstance(prior, (JointSpreadPrior, MixtureSpreadPrior)) or not isinstance(prior, SpreadPrior):
            return None
        if any(type(mech) is not RandomizedResponse for mech, _ in groups):
            return None
        drawn = np.empty((self.D, S, self.b), _states_dtype(max(mech.k for mech, _ in groups)))
        for mech, cols in groups:
            self._propose_rr(rng, prior, S, mech, np.asarray(cols), drawn, np.asarray(cols))
        return drawn

    def _propose_rr(self, rng, prior: SpreadPrior, S: int, mech: RandomizedResponse, cols, drawn, slots) -> None:
        """``_propose`` for randomised-response columns, into drawn[slots[j]] (S, b) for column cols[j]:
        the same draws, from the same stream in the same order, as ``RRPosterior.sample`` column by
        column (then ``sample_column`` for records that did not release), with the prior's tables
        built once for all the columns and each column's stay-or-move decisions and inverse-CDF
        search compiled (``rr_moves``, ``rr_fill``)."""
        from ._kernels import rr_fill, rr_moves  # numba: compiled at first use, not when spread is imported

        k = mech.k
        raw = prior.disc[cols, :k]
        pi = raw / raw.sum(axis=1, keepdims=True)  # as CategoricalPrior: each row over its sum
        cdf = np.cumsum(pi, axis=1)
        cdf = cdf / cdf[:, -1:]
        guide = guide_table(cdf)
        q, r = mech.keep_prob, mech.other_prob
        for j, c in enumerate(cols):
            rel = np.flatnonzero(self.released[:, c])
            miss = np.flatnonzero(~self.released[:, c])
            if rel.size:
                xt = self.X[rel, c].astype(np.int64)
                moved = np.empty((S, rel.size), np.bool_)
                n_moved = rr_moves(xt, pi[j], q, r, rng.random((S, rel.size)), moved)
                v = rng.random(n_moved) if n_moved else np.empty(0)
                rr_fill(xt, moved, v, cdf[j], guide[j], rel, drawn[slots[j]])
            if miss.size:
                drawn[slots[j]][:, miss] = prior.sample_column(c, rng, (S, miss.size))

    def _propose_joint(self, rng, prior: JointSpreadPrior, S: int) -> np.ndarray:
        """S exact draws per record from ρ(x | x̃) ∝ p(x̃ | x)·p(x) under an empirical joint prior:
        public rows (``PatternSampler``; its CDFs kept for the fit, the prior being fixed, unless
        they would take more than 64 MB: then built per call, 512 records at a time)."""
        u = rng.random((S, self.b))
        out = np.empty((S, self.b, self.D))
        joint = self._joint  # read once (see _propose)
        if joint is not None and joint[0] is prior.rows:
            samplers = joint[1]
        else:
            step = self.b if PatternSampler.size(self.X, self.released, len(prior.rows)) <= 2**26 else 512
            blocks = [slice(a, min(a + step, self.b)) for a in range(0, self.b, step)]
            samplers = ((z, PatternSampler(prior, self.rm, self.X[z], self.released[z])) for z in blocks)
            if step == self.b:  # small enough to keep
                samplers = list(samplers)
                self._joint = (prior.rows, samplers)
        for z, sampler in samplers:
            for s in range(S):
                out[s, z] = sampler.draw(u[s, z])
        return out

    def _log_class_probs(self, x: np.ndarray, coef, intercept) -> np.ndarray:
        """log p_θ(c | x) for samples x (..., D): (..., C); for all-discrete records the logits are
        sums of table lookups (``logits_lookup``), without decoding x into model inputs."""
        if self.design.layout.discrete.all():
            from ._kernels import logits_lookup  # numba: compiled at first use, not when spread is imported

            xs = np.ascontiguousarray(x.reshape(-1, self.D))
            z = np.empty((xs.shape[0], coef.shape[0]))
            W = np.ascontiguousarray(self.design.logit_table(coef), dtype=float)
            logits_lookup(xs, W, np.asarray(intercept, float), z)
            return class_log_softmax(z).reshape(x.shape[:-1] + (-1,))
        return self._log_class_probs_decoded(x, coef, intercept)

    def _log_class_probs_columns(self, drawn: np.ndarray, coef, intercept) -> np.ndarray:
        """``_log_class_probs`` of column-major draws (D, S, b) (``_propose_columns``): (S, b, C)."""
        from ._kernels import logits_from_columns  # numba: compiled at first use

        z = np.empty(drawn.shape[1:] + (coef.shape[0],))
        W = np.ascontiguousarray(self.design.logit_table(coef), dtype=float)
        logits_from_columns(drawn, W, np.asarray(intercept, float), z)
        return class_log_softmax(z)

    def _log_class_probs_decoded(self, x: np.ndarray, coef, intercept) -> np.ndarray:
        """``_log_class_probs`` through the model inputs (any column type): decode, product."""
        Z = self.design.decode(x.reshape(-1, self.D)).reshape(x.shape[:-1] + (-1,))
        return log_class_probs(Z, coef, intercept)

    def _log_g(self, x: np.ndarray, coef, intercept) -> tuple[np.ndarray, np.ndarray]:
        """log g(x) and the responsibilities, for samples x (..., b, D); compiled table lookups
        (``log_g_lookup``) when every column is discrete."""
        if self.design.layout.discrete.all() and self.b:
            from ._kernels import log_g_lookup  # numba: compiled at first use, not when spread is imported

            xs = np.ascontiguousarray(x.reshape(-1, self.b, self.D))
            lg = np.empty(xs.shape[:2])
            resp = np.empty(xs.shape[:2] + (self.C,))
            yterm = np.ascontiguousarray(np.broadcast_to(self._yterm, (self.b, self.C)))
            W = np.ascontiguousarray(self.design.logit_table(coef), dtype=float)
            log_g_lookup(xs, W, np.asarray(intercept, float), yterm, *self._pair_args(), lg, resp)
            return lg.reshape(x.shape[:-1]), resp.reshape(x.shape[:-1] + (self.C,))
        return self._log_g_numpy(x, coef, intercept)

    def _log_g_numpy(self, x: np.ndarray, coef, intercept) -> tuple[np.ndarray, np.ndarray]:
        """``_log_g`` through the model inputs (any column type): decode, product, log-softmax."""
        terms = self._log_class_probs_decoded(x, coef, intercept) + self.label_terms(x)
        lg = logsumexp(terms, axis=-1)
        return lg, np.exp(terms - lg[..., None])

    def _estep_mcmc(self, chain, rng, coef, intercept, S) -> dict:
        prior = self.prior[chain]
        props = self._propose(rng, prior, S + (1 if self.state[chain] is None else 0))
        if self.state[chain] is None:
            state, props = props[0], props[1:]
        else:
            state = self.state[chain]
        lg_cur, resp = self._log_g(state, coef, intercept)
        kept = np.empty((S, self.b, self.D))
        R = np.empty((S, self.b, self.C))
        accepted = 0
        for s in range(S):
            lg_prop, resp_prop = self._log_g(props[s], coef, intercept)
            acc = np.log(rng.random(self.b)) < lg_prop - lg_cur
            accepted += int(acc.sum())
            state = np.where(acc[:, None], props[s], state)
            lg_cur = np.where(acc, lg_prop, lg_cur)
            resp = np.where(acc[:, None], resp_prop, resp)
            kept[s], R[s] = state, resp
        self.state[chain] = state
        w = np.full((S, self.b), 1.0 / S)
        return self._keep(chain, kept, R, w, accepted)

    def _estep_importance(self, chain, rng, coef, intercept, S) -> dict:
        """Barber §5.1: S fresh draws x ~ ρ(x | x̃), c ~ ρ(c | c̃) ∝ p(c̃ | c), self-normalised weights
        ∝ p_θ(c | x) (eq 59). Paired releases: c ~ ∝ exp(Σ_j t_j(x_j, c)), weights ∝ p_θ(c | x) times that
        term's normaliser (which depends on x), so that the weighted draws target p(x, c | x̃) alike."""
        kept = self._propose(rng, self.prior[chain], S)
        Z = self.design.decode(kept.reshape(-1, self.D)).reshape(S, self.b, -1)
        logp = log_class_probs(Z, coef, intercept)  # (S, b, C)
        yt = np.broadcast_to(self.label_terms(kept), logp.shape)
        norm = logsumexp(yt, axis=-1)  # (S, b)
        cdf = np.cumsum(np.exp(yt - norm[..., None]), axis=-1)
        c = np.minimum((cdf < rng.random((S, self.b, 1))).sum(-1), self.C - 1)
        logw = np.take_along_axis(logp, c[..., None], axis=-1)[..., 0] + (norm if self.pairs is not None else 0.0)
        w = np.exp(logw - logsumexp(logw, axis=0, keepdims=True))
        return self._keep(chain, kept, np.eye(self.C)[c], w, 0)

    def _keep(self, chain, kept, R, w, accepted) -> dict:
        S = kept.shape[0]
        flat = kept.reshape(-1, self.D)
        fw = w.reshape(-1)
        self.Z[chain] = self.design.decode(flat)
        self.R[chain] = R.reshape(-1, self.C)
        self.w[chain] = fw
        return {"stats": self.prior[chain].statistics(flat, fw), "accepted": accepted, "proposed": S * self.b}

    # ------------------------------------------------------------------------ M-step
    def init_samples(self, chain: int) -> None:
        """Regression calibration, the EM's start: each record's features replaced by their posterior
        mean E[x | x̃] under the prior (the prior mean where nothing was released) — less attenuated
        than the raw releases — with the released labels as they are."""
        prior = self.prior[chain]
        design = self.design
        Z = np.zeros((self.b, design.n_inputs), np.float32)
        for mech, cols in self.rm.column_groups():
            for c in cols:
                rel = np.flatnonzero(self.released[:, c])
                o, w = design.offsets[c], design.widths[c]
                if design.layout.discrete[c]:
                    k = design.layout.k[c]
                    # T: the model input of each state, (k, w)
                    T = design.state_table[c, :k, None] if design.scalar else np.eye(k, dtype=np.float32)[:, 1:k]
                    pi = prior.disc[c, :k] / prior.disc[c, :k].sum()
                    Z[:, o : o + w] = pi @ T
                    if rel.size:
                        Z[rel, o : o + w] = _posterior_mean(mech, self.X[rel, c], pi, T)
                else:
                    mean = np.full(self.b, prior.column_means()[c])
                    if rel.size:
                        mean[rel] = mech.posterior(self.X[rel, c], prior.for_column(c)).mean()
                    Z[:, o] = mean
        self.Z[chain] = Z
        # paired releases: the class posterior of each release under the view's pair tables
        self.R[chain] = np.eye(self.C)[self.y] if self.pairs is None else self.pairs.class_posterior(self.rm.tables)
        self.w[chain] = np.ones(self.b)

    def n_samples_weight(self, chain: int) -> float:
        return float(self.w[chain].sum())

    def loss_grad(self, chain: int, coef: np.ndarray, intercept: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Σ_i w_i CE(R_i, p_θ(·|Z_i)) and its gradient over this shard's samples (no penalty)."""
        Z, R, w = self.Z[chain], self.R[chain], self.w[chain]
        loss, gz = soft_ce(logits(Z, coef, intercept), R, w)
        return float(loss), (gz.T.astype(Z.dtype) @ Z).astype(np.float64), gz.sum(axis=0)

    def hessian(self, chain: int, coef: np.ndarray, intercept: np.ndarray, rows: int = 4096) -> np.ndarray:
        """Per logit row r, Σ_i w_i p_r(1 − p_r) [z_i, 1][z_i, 1]ᵀ over an evenly spaced subsample of
        this shard's samples, rescaled to the whole shard (Rn, d+1, d+1): the complete-data Hessian
        (block-diagonal across classes), as a preconditioner. ``rows``: the subsample size over all
        shards (at least two per parameter)."""
        Z, w = self.Z[chain], self.w[chain]
        take = max(2 * (Z.shape[1] + 1), int(np.ceil(rows * self.b / max(self.n_total, 1))))
        if take < Z.shape[0]:
            idx = np.linspace(0, Z.shape[0] - 1, take).astype(np.int64)
            Z, w = Z[idx], w[idx] * (self.w[chain].sum() / w[idx].sum())
        z = logits(Z, coef, intercept)
        if coef.shape[0] == 1:
            p = 1.0 / (1.0 + np.exp(-z))
        else:
            p = np.exp(z - logsumexp(z, axis=1, keepdims=True))
        Z1 = np.hstack([Z.astype(np.float64), np.ones((Z.shape[0], 1))])
        return np.stack([(Z1 * (w * p[:, r] * (1 - p[:, r]))[:, None]).T @ Z1 for r in range(coef.shape[0])])

    def logit_moments(self, chain: int, coefs: list, intercepts: list) -> dict:
        """Weighted moments of the logits of several models at this shard's current samples of
        ``chain`` (softmax logits centred per sample): Σw, Σw·z_a (m, Rn) and the Gram matrix
        Σ_i Σ_r w_i z_a,ir z_b,ir (m, m) — what the chains' agreement in prediction needs."""
        Z, w = self.Z[chain], self.w[chain]
        zs = []
        for coef, b in zip(coefs, intercepts):
            z = logits(Z, coef, b)
            zs.append(z - z.mean(axis=1, keepdims=True) if z.shape[1] > 1 else z)
        A = np.stack(zs)  # (m, n, Rn)
        return {"w": float(w.sum()), "s1": np.einsum("anr,n->ar", A, w), "G": np.einsum("anr,bnr,n->ab", A, A, w)}

    def release_counts(self, slot_of: list[int], n_slots: int) -> dict:
        """Released-value counts per column, in the slot of this shard's record mechanism
        (``slot_of[index]`` of ``n_slots``; zeros in the others, so that the shards' results add up
        group by group): the learned prior's data, (n_slots, D, Kmax), counted where the rows are."""
        out = np.zeros((n_slots, self.D, max(int(self.design.layout.k.max()), 1)))
        slot = slot_of[self.index]
        for mech, cols in self.rm.groups():
            if isinstance(mech, MatrixMechanism):
                out[slot, cols, : mech.k] = release_counts(mech, self.X[:, cols])
        return {"counts": out}


def shard_factories(
    groups: list,
    Xv: np.ndarray,
    yi: np.ndarray,
    design: Design,
    n_classes: int,
    entropy: int,
    n_chains: int,
    mode: str,
    shard_size: int,
) -> list:
    """Zero-argument builders of the fit's shards: fixed-size blocks of each group's rows (records
    sharing a mechanism), numbered in order, so that a shard's seed does not depend on who builds it.
    The releases are pickled compact (``Shipped``): a Ray actor is sent small integers, not float64."""
    factories: list = []
    for rm, rows in groups:
        for s0, s1 in shard_bounds(len(rows), shard_size):
            idx = rows[s0:s1]
            factories.append(
                functools.partial(
                    Shard,
                    len(factories),
                    rm,
                    Shipped(Xv[idx]),
                    yi[idx],
                    design,
                    n_classes,
                    entropy,
                    n_chains,
                    mode,
                    len(Xv),
                )
            )
    return factories

"""Spread-EM logistic regression (Barber 2020 §5): maximise the likelihood of the noisy records
log Σ_{c,x} p(c̃|c) p(x̃|x) p_θ(c|x) p(x) (eq 47) by Monte Carlo EM over independent chains, learning
the input prior on the way (``_em``: the algorithm, ``_estep``: the E-step). The chains'
agreement is on the fitted estimator, so a user can tell signal from Monte Carlo noise without clean data."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from ..._params import (
    Interval,
    IsNone,
    Options,
    Satisfies,
    random_state_constraints,
    seed_from,
    validate_estimator,
)
from ..._resources import available_bytes
from ..._validation import as_array, as_float_array
from ...errors import ValidationError
from ...parallel import ThreadExecutor
from .._sklearn import class_labels, validate, warn_clean
from ._design import ENCODINGS, ColumnLayout, Design
from ._direct import blocker as direct_blocker
from ._direct import check_direct, check_tree, fit_direct, pair_likelihood
from ._em import EMOptions, run_em
from ._estep import shard_factories
from ._mstep import fit_soft_logistic, log_class_probs
from ._pair_reports import is_triple, release_units
from ._paired import PairedView, paired_view
from ._pool import PoolSource, group_records
from ._prior_setup import PAIR_TABLE_PRIORS, auto_prior, check_triple_prior, initial_prior, releases_key
from ._priors._factorised import (
    SpreadPrior,
    marginal_mle_prior_from_counts,
)
from ._priors._mixture import choose_latent_class
from ._robust import ROBUST, drop_inconsistent, no_test
from ._runtime import ShardGroup, holds_shards, shard_group, traffic_report
from ._start import INITS, SHRINK_TO, fit_naive_bayes, naive_bayes_blocker, naive_bayes_start

E_STEPS = ("mcmc", "importance")
_INT1 = Interval(int, 1, None)


class SpreadLogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression for clean data, fitted from LDP releases only.

    Parameters
    ----------
    C : inverse L2 penalty on ``coef_`` as in scikit-learn (np.inf: none; at least 1e-12, so 1/C is finite).
    prior : "auto" (the default: "pairwise" for triples; for paired releases of two or more pairs per
        record, "latent-class" when its held-out likelihood on the releases beats naive Bayes's, else "naive-bayes"
        (``choose_latent_class``; learned: ``prior_choice_``); "naive-bayes" for one pair or records
        releasing sampled attributes through discrete oracles with a label; else "learned"; ``auto_prior``;
        ``fit_pool``, which streams the pool and cannot fit naive Bayes on it, uses "learned"),
        "learned" (from the releases, refined during EM, pulled toward the mechanism-debiased
        marginals by ``prior_strength``), "flat", or a given prior (CategoricalPrior / (D, k)
        array, GaussianPrior, HistogramPrior, per-column list), or an EmpiricalPrior: public clean
        rows whose joint distribution is the prior (it keeps how attributes co-occur; not learned),
        or "naive-bayes": the joint p(x) = Σ_c p(c) Π_d p(x_d | c) of naive Bayes fitted on the
        releases, fixed (discrete oracles and label; for records that release sampled attributes;
        for paired releases, from the maximum-likelihood pair tables p(x_j, y)), or "latent-class":
        p(x) = Σ_m π_m Π_d p(x_d | m) with ``n_latent_classes`` components fitted to the releases by
        EM, fixed (discrete columns and a label, or pairs); unlike naive Bayes it can model how
        attributes co-occur, which records releasing two or more attributes show; or "tree": the
        Chow–Liu tree p(x) = Π_v p(x_v | x_pa(v)) of the pair tables p(x_j, x_k) that paired releases
        of two pairs per record identify (maximum likelihood per released pair, ``_priors._tree``),
        fixed, fitted by the direct solver only (learned: ``prior_["tree"]``), or "class-tree": one
        such tree per class over the structure of I(x_j; x_k | y) (tree-augmented naive Bayes's p(x)),
        or "pairwise": rows drawn from that tree, reweighted by EM on the releases so that every
        released pair's table is fitted, not only the tree's edges (``_priors._pairwise``; learned:
        ``prior_["pairwise"]``); for triples and two pairs per record.
    n_latent_classes : components of the "latent-class" prior.
    init : where EM starts: "calibration" (default: an M-step on the regression-calibration inputs,
        each record's features replaced by their posterior mean under the prior), "naive-bayes"
        (the same M-step on an E-step's samples at the log-odds of ``LDPNaiveBayes()`` fitted on the
        same releases, ``_start``: exact with one-hot inputs, a weighted least-squares projection
        with "unit"/"index"; needs discrete attributes, one mechanism, released labels or pairs,
        and fit_intercept), or "auto" ("naive-bayes" when the prior is naive Bayes, the encoding
        one-hot and the releases allow it, else "calibration"). On Adult with one pair per person
        the naive-Bayes start put spread at or just above paired naive Bayes, at ~4× the
        iterations, and not always above the calibration start (results/adult_scale_designs).
        Learned: ``init_``, the start used.
    shrink_to : what the penalty ‖coef − centre‖²/(2C) shrinks toward: "zero" (default:
        scikit-learn's ridge, centre 0), "naive-bayes" (centre: the log-odds of ``LDPNaiveBayes()``
        fitted on the same releases, as ``init``'s start: one-hot exactly, else projected; same
        needs), or "auto" ("naive-bayes" where it can be built, else "zero"). A small C then gives
        naive Bayes instead of the majority class; C is fixed, so the penalty's weight still falls
        as 1/N and the fit stays consistent (shrinkage to a generative model's solution, as in
        Lasserre, Bishop & Minka 2006's hybrids). Measured on Adult (one pair per person,
        ``SpreadLogisticRegressionCV``, C by the held-out pair likelihood, 3 seeds, 3·10⁵ people,
        ``simulations/adult_scale_designs.py``): the likelihood, which scores the pair tables naive
        Bayes fits, picks a C near naive Bayes; at ε 1 balanced accuracy rises from 0.698 to 0.767
        (naive Bayes 0.763) and accuracy falls from 0.794 to 0.777 (naive Bayes 0.803); at ε 2 and
        4 it ties naive Bayes, 0.6 and 1.1 points below "zero" on accuracy. So not the default.
        Learned: ``shrink_to_``, the centre used.
    prior_strength : weight of the debiased marginals in the learned prior, as a fraction of the
        number of records (Dirichlet pseudo-counts; 0: none).
    solver : "auto" (default): "direct" where it applies, else "em". "em": spread-EM, stochastic, on
        every release. "direct": on paired releases of
        one pair per record with a fixed prior, the same penalised likelihood maximised by L-BFGS
        (``_direct``: θ enters a record's likelihood only through the model's pair table of the
        attribute it released, an expectation over the prior taken on 16,384 fixed draws, or on a prior
        of public rows (``EmpiricalPrior``) over its rows, up to 65,536 whole). No
        Monte Carlo noise and no slow EM steps where most information is missing: at 3·10⁵ people
        on Adult, ε 1, C 1, 49 L-BFGS iterations (3 s) give 0.812 / 0.767 / 0.875 (accuracy /
        balanced / AUC) where 1,000 EM iterations give 0.807 / 0.762 / 0.871
        (results/adult_scale_designs/summary.md). Asked for, it also fits two pairs per record, through
        the joint tables of the two attributes (``TwoPairLikelihood``; "auto" leaves those to EM but with
        ``prior="tree"``, "class-tree" or "pairwise", which only it fits; and triples, always). It
        refuses other releases, naming ``solver``; the EM options (``e_step``, ``n_chains``,
        ``burn_in``, ...) do not apply, ``max_iter`` bounds its iterations.
        Learned: ``solver_``, the solver used.
    e_step : "mcmc" (default; exact-posterior Metropolis chains, labels summed out) or
        "importance" (Barber §5.1 self-normalised importance sampling, for reproduction).
    n_chains : independent EM chains (≥ 2 for the agreement diagnostics ``cosine_``, ``rhat_``).
    n_samples : samples per record, chain and iteration.
    max_iter : most EM iterations in all (the budget the averaging window may grow into).
    burn_in : iterations of stochastic EM before stochastic approximation starts; None detects it
        (see ``tol``), and at most half of ``max_iter``.
    n_average : the averaging window; it grows by this much until the chains agree.
    tol : the burn-in ends when the mean parameter norm of the last two windows of 5 iterates
        differs by less than ``tol`` (relative), per logit row with more than two classes: the
        chains have stopped drifting (``simulations/multiclass_burn_in.py``).
    encoding : model input of a discrete state s of k: "unit" s/(k−1) (one slope per attribute),
        "index" s, "onehot" (a coefficient per state but the first), or "auto" (default): "onehot" when
        that gives at most ``AUTO_ONEHOT_INPUTS`` (512) model inputs, else "unit". A logistic model
        represents naive Bayes's log-odds only with one-hot inputs. On Adult (one pair per person,
        ``SpreadLogisticRegressionCV``, the same releases) one-hot classified 0.9 points above "unit"
        at 30,000 people, ε 2 and ε 4 (means of 3 seeds), 2.5 at 3·10⁵, ε 4, and 1.7 / 2.8 at 10⁶,
        ε 2 / 4 (0.8220 / 0.8252 against 0.8048 / 0.7977; naive Bayes 0.8153 / 0.8131; AUC 0.885 /
        0.896 against 0.834 / 0.836): "unit" stops near 0.80 whatever N. At ε 1 and 30,000 people
        "unit" was 0.2–1.2 points above (results/adult_scale_designs/runs.csv). ``design_.encoding`` is the one used.
    numeric_prior, n_bins : prior family of numeric columns ("gaussian" or "histogram").
    relaxation : over-relaxation ω of the burn-in's EM steps, in (0, 2).
    executor : where the shards live: None (threads over all CPUs), or a Serial/Thread/Ray executor.
    shard_size : records per shard (each with its own seed: results do not depend on the executor).
    agreement_tol : the chains agree when the root-mean-square difference of their logits at the
        pool's posterior samples is at most this fraction of the logits' standard deviation (two
        models of unrelated noise: ≈ √2). Agreement rules out Monte Carlo noise, not the absence of
        signal in the releases (``SpreadLogisticRegressionCV`` checks that).
    robust : a defence against fake clients (``fedrr.fake``): "none" (default) or "margins", the
        cross-attribute consistency test of ``LDPNaiveBayes(robust="margins")`` on the releases
        (``margin_consistency``, level ``robust_alpha``) detects an attribute whose table's class
        margin disagrees with the other attributes'; the recovery (``margin_trim``) then drops only
        the records whose reports on it carry the excess, the fewest that bring its margin back to
        the others' median (≈ the fakes' number when they all release the crafted pair), never the
        attribute's other records (``_robust``; issue 45: a few fakes cannot make it discard an
        attribute's honest reports). It acts
        on attacks that put their crafted reports on one attribute more than on the others (the
        maximal-gain and output attacks). It does NOT defend: releases without attribute sampling;
        fakes that release at the honest sampling rate ("mga-sampled", "output-sampled") or spread
        their targets over more than half of the attributes; crafted reports that leave the target
        table's class margin where it was (the input attack, labels at the honest class
        frequencies); an attack below the test's power; damage to the attributes not rejected. An
        honest pool is rejected with probability ≤ ``robust_alpha`` and then loses the few records
        its noise excess implies. Needs discrete
        oracles with a label, or pairs, and one mechanism for every record; not in ``fit_pool``.
    robust_alpha : the consistency test's level (Bonferroni over attributes and classes).
    mechanism : default RecordMechanism when ``fit`` gets none; None there means clean data.

    Learned (besides the model's): ``consistent_`` (F,) bool, the attributes the test did not
    reject (all True with robust="none" or clean data), ``margin_z_`` (F,) and ``margin_z_critical_`` (the
    test's statistics; 0 and ∞ when not run), ``n_dropped_`` (records the recovery dropped),
    ``prior_choice_`` (``prior="auto"`` on two or more pairs per record: the held-out comparison
    ``choose_latent_class`` returned, its "chosen" prior used; None when no choice was made).
    """

    _parameter_constraints = {
        "C": [Interval(float, 1e-12, None, closed="left", inf=True)],  # 1/C must stay finite
        "prior": [
            Options("auto", "learned", "flat", "naive-bayes", "latent-class", "tree", "class-tree", "pairwise"),
            Satisfies(lambda v: not isinstance(v, str), "a prior"),
        ],
        "n_latent_classes": [_INT1],
        "init": [Options(*INITS)],
        "shrink_to": [Options(*SHRINK_TO)],
        "prior_strength": [Interval(float, 0, None)],
        "solver": [Options("em", "direct", "auto")],
        "e_step": [Options(*E_STEPS)],
        "n_chains": [_INT1],
        "n_samples": [_INT1, IsNone()],
        "max_iter": [_INT1],
        "burn_in": [Interval(int, 0, None), IsNone()],
        "n_average": [_INT1],
        "tol": [Interval(float, 0, None, closed="neither")],
        "m_step_iter": [_INT1],
        "encoding": [Options(*ENCODINGS)],
        "numeric_prior": [Options("gaussian", "histogram")],
        "n_bins": [_INT1],
        "fit_intercept": [Satisfies(lambda v: isinstance(v, (bool, np.bool_)), "True or False")],
        "relaxation": [Interval(float, 0, 2, closed="neither")],
        "executor": [IsNone(), Satisfies(holds_shards, "an executor that keeps shards (serial, threads or Ray)")],
        "shard_size": [_INT1],
        "random_state": random_state_constraints(),
        "agreement_tol": [Interval(float, 0, None, closed="neither")],
        "verbose": [Interval(int, 0, None)],
        "robust": [Options(*ROBUST)],
        "robust_alpha": [Interval(float, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        C: float = 1.0,
        *,
        prior: Any = "auto",
        n_latent_classes: int = 4,
        init: str = "calibration",
        shrink_to: str = "zero",
        prior_strength: float = 0.1,
        solver: str = "auto",
        e_step: str = "mcmc",
        n_chains: int = 2,
        n_samples: int | None = None,
        max_iter: int = 200,
        burn_in: int | None = None,
        n_average: int = 20,
        tol: float = 0.01,
        m_step_iter: int = 5,
        encoding: str = "auto",
        numeric_prior: str = "gaussian",
        n_bins: int = 10,
        fit_intercept: bool = True,
        relaxation: float = 1.8,
        executor: Any = None,
        shard_size: int = 2048,
        random_state: Any = None,
        agreement_tol: float = 0.2,
        mechanism: Any = None,
        verbose: int = 0,
        robust: str = "none",
        robust_alpha: float = 0.01,
    ):
        self.C = C
        self.prior = prior
        self.n_latent_classes = n_latent_classes
        self.init = init
        self.shrink_to = shrink_to
        self.prior_strength = prior_strength
        self.solver = solver
        self.e_step = e_step
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.max_iter = max_iter
        self.burn_in = burn_in
        self.n_average = n_average
        self.tol = tol
        self.m_step_iter = m_step_iter
        self.encoding = encoding
        self.numeric_prior = numeric_prior
        self.n_bins = n_bins
        self.fit_intercept = fit_intercept
        self.relaxation = relaxation
        self.executor = executor
        self.shard_size = shard_size
        self.random_state = random_state
        self.agreement_tol = agreement_tol
        self.mechanism = mechanism
        self.verbose = verbose
        self.robust = robust
        self.robust_alpha = robust_alpha

    def _params(self) -> dict:
        return validate_estimator(self)

    # --------------------------------------------------------------------------------- fit
    def fit(self, X, y, mechanism: Any = None):
        """Fit from released features X (n, D) — NaN where an attribute was not released — and
        released labels y (n,) produced by ``mechanism`` (a RecordMechanism, or one per record).
        Paired releases (a PairedRecordMechanism, or one per record): X holds the pair reports, y is
        all NaN (or None) — the labels are inside the pairs, and the E-step's posterior runs over the
        unreleased attributes and the label given them (``_paired``); the classes are 0..C−1.
        With no mechanism the data are taken as clean, with a ``CleanDataWarning``: a warning, not an
        error, so that it stays a scikit-learn estimator (``check_estimator`` fits plain arrays), yet
        releases fitted without their mechanism are never read as clean data silently."""
        return self._fit(X, y, mechanism, memo=None)

    def _fit(self, X, y, mechanism: Any, memo: dict | None):
        """``fit``, with the starting priors shared through ``memo`` by the fits of one
        cross-validation (``SpreadLogisticRegressionCV``; None: not shared). A shared start is the
        one this fit would compute (``initial_prior``), so the numbers do not change."""
        p = self._params()
        mechanism = self.mechanism if mechanism is None else mechanism
        if mechanism is None:
            warn_clean(self)
        auto = isinstance(p["prior"], str) and p["prior"] == "auto"
        if auto:
            p["prior"] = auto_prior(mechanism)
        self.prior_choice_ = None
        # the work is matrix-vector products on shards: multi-threaded BLAS only contends
        with threadpool_limits(limits=1, user_api="blas"):
            if mechanism is None:
                self._fit_clean(X, y, p)
                self._set_robust(no_test(self.n_features_in_), 0)
                return self
            if p["robust"] == "margins":
                n = np.shape(X)[0]
                X, y, mechanism, kept, *test = drop_inconsistent(X, y, mechanism, p["robust_alpha"])
                self._fit_noisy(X, y, mechanism, p, memo, auto)
                self._set_robust(test, n - kept.size)
                return self
            self._fit_noisy(X, y, mechanism, p, memo, auto)
            self._set_robust(no_test(self.n_features_in_), 0)
            return self

    def _set_robust(self, test: tuple, n_dropped: int) -> None:
        """``consistent_``, ``margin_z_``, ``margin_z_critical_`` (the defence's test) and ``n_dropped_``."""
        self.consistent_, self.margin_z_, self.margin_z_critical_ = test
        self.n_dropped_ = int(n_dropped)

    def _fit_clean(self, X, y, p):
        """No mechanism: ordinary L2-penalised logistic regression (scikit-learn's input rules)."""
        Xa, ya = validate(self, X, y)
        self.classes_, yi = class_labels(ya)
        self.design_ = None
        self.n_features_in_ = Xa.shape[1]
        rows = 1 if len(self.classes_) == 2 else len(self.classes_)
        coef, b, obj = fit_soft_logistic(
            Xa,
            np.eye(len(self.classes_))[yi],
            np.ones(len(yi)),
            np.zeros((rows, Xa.shape[1])),
            np.zeros(rows),
            p["C"],
            p["fit_intercept"],
            max_iter=1000,
        )
        self.coef_, self.intercept_, self.prior_ = coef, b, None
        self.n_iter_, self.history_ = 1, [{"iter": 1, "objective": obj}]
        self.solver_ = "clean"  # plain logistic regression: no releases to solve for
        return self

    def _prepare(self, X, y, mechanism, p):
        """Validated releases and labels, the layout, label terms and record groups."""
        Xa = as_array("X", X, "must be a 2-d array (n_records, n_features)")
        if Xa.ndim != 2:
            raise ValidationError("X", f"must be 2-d (n_records, n_features), got shape {np.shape(X)}")
        n = Xa.shape[0]
        if n == 0:
            raise ValidationError("X", "needs at least one record")
        groups = group_records(mechanism, n)
        if any(is_triple(rm) for rm, _ in groups):
            return self._prepare_triple(Xa, y, groups)
        if any(rm.label_in_pairs for rm, _ in groups):
            return self._prepare_paired(Xa, y, groups)
        layout = ColumnLayout.from_mechanism(groups[0][0])
        has_label = groups[0][0].label is not None
        ya = as_array("y", y, f"must be an array of shape ({n},)")
        if ya.shape != (n,):
            raise ValidationError("y", f"must have shape ({n},) to match X, got {ya.shape}")
        Xv = np.empty(Xa.shape, dtype=float)
        for rm, rows in groups:
            if not ColumnLayout.from_mechanism(rm).same_domain(layout):
                raise ValidationError(
                    "mechanism",
                    "all record mechanisms in one pool must share the feature domains "
                    "(k per discrete column, bounds per numeric column)",
                )
            if (rm.label is not None) != has_label:
                raise ValidationError("mechanism", "either every record mechanism has a label mechanism or none does")
            Xv[rows] = rm.validate_release(Xa[rows], ya[rows] if has_label else None)[0]
        if has_label:
            k = groups[0][0].label.k
            if any(rm.label.k != k for rm, _ in groups):
                raise ValidationError("mechanism", "label mechanisms must all have the same number of classes")
            self.classes_, yi = np.arange(k), np.asarray(ya, np.int64)
        else:  # clean labels with released features: the label values are the classes
            self.classes_, yi = class_labels(ya)
        return Xv, yi, groups, layout

    def _prepare_paired(self, Xa, y, groups):
        """Paired releases (``_paired``): y None or all NaN (the labels are inside the pairs); each
        group's mechanism becomes a ``PairedView`` whose w is its pair reports' maximum-likelihood p(y | x_j).
        A ``PairedView`` given as the mechanism (a re-fit on a subset, as cross-validation does) is re-derived
        from its paired mechanism on these releases, and y is not read (its class indices carry nothing)."""
        n = Xa.shape[0]
        if not all(rm.label_in_pairs for rm, _ in groups):
            raise ValidationError("mechanism", "a pool mixes paired and record mechanisms: spread-EM takes one kind")
        if any(isinstance(rm, PairedView) for rm, _ in groups):
            groups, y = [(rm.paired if isinstance(rm, PairedView) else rm, rows) for rm, rows in groups], None
        first = groups[0][0]
        if any(rm.n_states != first.n_states or rm.n_classes != first.n_classes for rm, _ in groups):
            raise ValidationError("mechanism", "paired mechanisms in one pool must share n_states and n_classes")
        if y is not None and np.shape(y) != (n,):
            raise ValidationError("y", f"must be None or all NaN of shape ({n},) (paired releases), got {np.shape(y)}")
        Xv = np.empty(Xa.shape, dtype=float)
        views = []
        for rm, rows in groups:
            Xv[rows] = rm.validate_release(Xa[rows], None if y is None else np.asarray(y, float)[rows])[0]
            views.append((paired_view(rm, Xv[rows]), rows))
        self.classes_ = np.arange(first.n_classes)
        return Xv, np.zeros(n, np.int64), views, ColumnLayout.from_mechanism(views[0][0])

    def _prepare_triple(self, Xa, y, groups):
        """Triple releases (``TripleRecordMechanism``): y None or all NaN (the labels are inside the
        reports); every group's mechanism a triple release on one domain. Fitted by the direct solver
        only: the E-step samples records of pair reports, not of triples."""
        n = Xa.shape[0]
        if not all(is_triple(rm) for rm, _ in groups):
            raise ValidationError(
                "mechanism", "a pool mixes triple releases with other releases: spread takes one kind"
            )
        first = groups[0][0]
        if any(rm.n_states != first.n_states or rm.n_classes != first.n_classes for rm, _ in groups):
            raise ValidationError("mechanism", "triple mechanisms in one pool must share n_states and n_classes")
        if y is not None:
            y = as_array("y", y, f"must be None or all NaN of shape ({n},) (triple releases)")
            if y.shape != (n,) or y.dtype.kind != "f":
                raise ValidationError("y", f"must be None or all NaN of shape ({n},) (triple releases)")
        Xv = np.empty(Xa.shape, dtype=float)
        for rm, rows in groups:
            Xv[rows] = rm.validate_release(Xa[rows], None if y is None else y[rows])[0]
        self.classes_ = np.arange(first.n_classes)
        return Xv, np.zeros(n, np.int64), groups, ColumnLayout.from_states(first.n_states)

    def _fit_noisy(self, X, y, mechanism, p, memo: dict | None = None, auto: bool = False):
        Xv, yi, groups, layout = self._prepare(X, y, mechanism, p)
        n, C = Xv.shape[0], len(self.classes_)
        design = Design(layout, p["encoding"])
        entropy = seed_from(p["random_state"])
        if auto and p["prior"] == "latent-class":  # the releases decide (``choose_latent_class``)
            self.prior_choice_ = choose_latent_class(Xv, yi, groups, layout, p["n_latent_classes"], entropy)
            p["prior"] = self.prior_choice_["chosen"]
        tree = isinstance(p["prior"], str) and p["prior"] in PAIR_TABLE_PRIORS
        triple = is_triple(groups[0][0])
        if tree:
            check_tree(groups, p["solver"], p["prior"])
        if triple:
            check_triple_prior(p["prior"])
            if p["solver"] == "em":
                raise ValidationError("solver", "'em' does not fit triple releases: 'direct' (or 'auto') does")
        pools = [(rm, Xv[rows]) for rm, rows in groups]
        # the tree's pair tables and likelihood read them, as naive Bayes on triples does
        units = release_units(groups, Xv)[0] if tree or triple else None
        prior = initial_prior(layout, pools, p, n, (Xv, yi, groups), entropy, memo, units)
        start, center = self._naive_bayes_uses(Xv, yi, groups, design, p)
        self.solver_ = p["solver"]
        if self.solver_ == "auto":  # two pairs per record go to the direct solver with a prior of pair tables only
            two = tree or triple
            why = direct_blocker([rm for rm, _ in groups], p["prior"], 2 if two else 1)
            self.solver_ = "direct" if triple or why is None else "em"
        if self.solver_ == "direct":
            lik = self._direct_likelihood(Xv, groups, design, prior, p, entropy, units, memo)
            return self._fit_direct(design, layout, prior, p, start, center, lik)
        S = p["n_samples"] or (1 if p["e_step"] == "mcmc" else 10)  # EM's shards: their memory is checked
        check_memory(n, layout.n_features, design.n_inputs, C, S, p["n_chains"], p["shard_size"], layout.kmax)
        executor = p["executor"] if p["executor"] is not None else ThreadExecutor()
        factories = shard_factories(groups, Xv, yi, design, C, entropy, p["n_chains"], p["e_step"], p["shard_size"])
        group = shard_group(executor, factories, chains=p["n_chains"])
        return self._fit_group(group, design, layout, prior, p, S, start, center)

    def _direct_likelihood(self, Xv, groups, design: Design, prior, p: dict, entropy, units, memo: dict | None):
        """The direct solver's likelihood of these releases under ``prior``. A CV's fits on the same
        releases, prior object and draw seed (its Cs on one fold) share the last one built: building it
        is most of a tree fit's cost at small N (each pair's cell weights over the draws), and it does
        not change with C."""
        check_direct(groups, p["prior"])
        if memo is None:
            return pair_likelihood(groups, Xv, design, prior, len(self.classes_), entropy, units)
        key = (releases_key(Xv, np.empty(0), groups), p["encoding"], len(self.classes_), entropy)
        last = memo.get("direct likelihood")
        if last is not None and last[0] == key and last[1] is prior:  # holding the prior keeps its id unique
            return last[2]
        lik = pair_likelihood(groups, Xv, design, prior, len(self.classes_), entropy, units)
        memo["direct likelihood"] = (key, prior, lik)
        return lik

    def _fit_direct(self, design: Design, layout, prior, p: dict, start, center, lik):
        """``solver="direct"``: the penalised pair-report likelihood ``lik`` maximised by L-BFGS (``_direct``)."""
        res = fit_direct(lik, p["C"], p["fit_intercept"], center, start, p["max_iter"])
        self.design_, self.layout_ = design, layout
        self.n_features_in_ = layout.n_features
        self.coef_, self.intercept_ = res.coef, res.intercept
        self.chain_coef_, self.chain_intercept_ = res.coef[None], res.intercept[None]
        norm = float(np.linalg.norm(res.coef))
        self.n_iter_, self.burn_in_ = res.n_iter, 0
        self.history_ = [{"iter": res.n_iter, "objective": res.objective, "coef_norm": norm}]  # keys as EM's
        self.converged_, self.convergence_ = res.converged, res.message
        self.rhat_ = self.rhat_median_ = self.cosine_ = self.chain_distance_ = float("nan")
        self.prediction_distance_ = float("nan")
        self.traffic_, self.bytes_per_iter_, self.bytes_setup_, self.shard_restarts_ = {}, 0.0, 0.0, 0
        self._prior_state = prior
        self.prior_ = prior.public()
        return self

    def _naive_bayes_uses(self, Xv, yi, groups, design: Design, p: dict) -> tuple:
        """The resolved ``init`` and ``shrink_to`` (set as ``init_``, ``shrink_to_``) -> (start,
        center): θ of naive Bayes's log-odds on these releases (``_start``) or None for the
        calibration start; its coefficients (Rn, n_inputs) or None for the ridge's 0. Naive Bayes
        is fitted once for both."""
        init, shrink = p["init"], p["shrink_to"]
        has_label = not isinstance(groups[0][0], PairedView) and groups[0][0].label is not None
        blocker = naive_bayes_blocker(groups, design, has_label, p["fit_intercept"])
        if init == "auto":
            nb = isinstance(p["prior"], str) and p["prior"] == "naive-bayes" and design.encoding == "onehot"
            init = "naive-bayes" if nb and blocker is None else "calibration"
        if shrink == "auto":
            shrink = "naive-bayes" if blocker is None else "zero"
        self.init_, self.shrink_to_ = init, shrink
        for name, value in (("init", init), ("shrink_to", shrink)):
            if value == "naive-bayes" and blocker is not None:
                raise ValidationError(name, f"'naive-bayes' {blocker}")
        if init == "calibration" and shrink == "zero":
            return None, None
        coef, intercept = naive_bayes_start(*fit_naive_bayes(Xv, yi, groups), design)
        start = np.concatenate([coef.ravel(), intercept]) if init == "naive-bayes" else None
        return start, (coef if shrink == "naive-bayes" else None)

    def _fit_group(
        self,
        group: ShardGroup,
        design: Design,
        layout: ColumnLayout,
        prior: SpreadPrior,
        p: dict,
        S: int,
        start: np.ndarray | None = None,
        center: np.ndarray | None = None,
    ):
        """Spread-EM over a built shard group (closed at the end) from ``start`` (None: the
        calibration start), its penalty shrinking toward ``center`` (None: 0) -> the fitted attributes."""
        C = len(self.classes_)
        try:
            learn_prior = isinstance(p["prior"], str) and p["prior"] == "learned"
            opts = EMOptions.from_params(p, n_samples=S, learn_prior=learn_prior, start=start, center=center)
            res = run_em(group, design.n_inputs, C, [prior.copy() for _ in range(p["n_chains"])], opts)
        finally:
            group.close()
        self.design_, self.layout_ = design, layout
        self.n_features_in_ = layout.n_features
        self.coef_, self.intercept_ = res.coef, res.intercept
        self.chain_coef_, self.chain_intercept_ = res.chain_coef, res.chain_intercept
        self.n_iter_, self.burn_in_, self.history_ = res.n_iter, res.burn_in, res.history
        self.converged_, self.convergence_ = res.converged, res.convergence
        self.rhat_, self.rhat_median_, self.cosine_ = res.rhat_max, res.rhat_median, res.cosine
        self.chain_distance_ = res.distance
        self.prediction_distance_ = res.prediction_distance
        # what the shard group reports: traffic per call and direction, actors rebuilt (Ray); the
        # steady state per iteration and the one-off set-up (a group that cannot tell them apart:
        # all traffic over the iterations, and no set-up figure)
        self.traffic_ = traffic_report(group, res.n_iter)
        self.bytes_per_iter_ = float(self.traffic_.get("per_iteration", res.bytes_per_iter))
        self.bytes_setup_ = float(self.traffic_.get("setup", float("nan")))
        self.shard_restarts_ = int(group.restarts)
        self._prior_state = _mean_prior(res.priors)
        self.prior_ = self._prior_state.public()
        return self

    def fit_pool(self, path):
        """``fit`` on the pool directory at ``path`` (``Pool.save(path, layout="dir")``) without the
        driver ever holding the releases: each shard's factory memory-maps the pool's arrays and reads
        its own rows where it runs (a Ray actor on whichever node: the path must be visible there),
        validates them and builds the shard ``fit`` builds from arrays. The learned prior's data, the
        released-value counts per column, are counted on the shards and summed (integers: exact in
        any order), so the result is ``fit``'s bit for bit for the same seed and shard size. The
        driver reads the pool's metadata, its labels only when they were not released through a
        mechanism (to find the classes) and the mechanism index, never X. ``prior="auto"`` is
        "learned" here and ``init="auto"`` "calibration" (naive Bayes is fitted on the releases)."""
        p = self._params()
        if p["robust"] != "none":
            raise ValidationError("robust", f"{p['robust']!r} tests the releases in memory: use fit, not fit_pool")
        if p["init"] == "naive-bayes":
            raise ValidationError("init", "'naive-bayes' is fitted on the released records: use fit, not fit_pool")
        if p["shrink_to"] == "naive-bayes":
            raise ValidationError("shrink_to", "'naive-bayes' is fitted on the released records: use fit, not fit_pool")
        if p["solver"] == "direct":
            raise ValidationError("solver", "'direct' counts the released reports in memory: use fit, not fit_pool")
        self.solver_ = "em"
        # "auto" too: naive Bayes is fitted on releases the driver does not hold
        self.init_, self.shrink_to_ = "calibration", "zero"
        self.prior_choice_ = None  # "auto" is "learned" here: no choice on releases the driver does not hold
        if isinstance(p["prior"], str) and p["prior"] == "auto":
            p["prior"] = "learned"
        with threadpool_limits(limits=1, user_api="blas"):
            src = PoolSource(path)
            self.classes_ = src.classes
            layout, n = src.layout, src.n
            design = Design(layout, p["encoding"])
            S = p["n_samples"] or (1 if p["e_step"] == "mcmc" else 10)
            executor = p["executor"] if p["executor"] is not None else ThreadExecutor()
            factories, slot_of = src.factories(
                design, seed_from(p["random_state"]), p["n_chains"], p["e_step"], p["shard_size"]
            )
            group = shard_group(executor, factories, chains=p["n_chains"])
            try:
                if isinstance(p["prior"], str) and p["prior"] == "learned":
                    src.check_learnable()
                    counts = group.reduce("release_counts", slot_of, len(src.groups))["counts"]
                    center = marginal_mle_prior_from_counts(
                        layout,
                        [(rm, counts[g]) for g, (rm, _) in enumerate(src.groups)],
                        p["numeric_prior"],
                        p["n_bins"],
                    )
                    prior = center.smoothed(center, p["prior_strength"] * n)
                else:
                    prior = initial_prior(layout, [], p, n)
            except BaseException:
                group.close()
                raise
            self._fit_group(group, design, layout, prior, p, S)
            self._set_robust(no_test(layout.n_features), 0)
            return self

    def diagnostics(self) -> dict:
        """The fit's convergence record, for results files: did the chains agree, and how well."""
        check_is_fitted(self, "coef_")
        if getattr(self, "design_", None) is None:
            return {"converged": True, "convergence": "clean data: exact logistic regression"}
        return {
            "converged": bool(self.converged_),
            "convergence": self.convergence_,
            "cosine": float(self.cosine_),
            "distance": float(self.chain_distance_),
            "prediction_distance": float(self.prediction_distance_),
            "rhat_max": float(self.rhat_),
            "rhat_median": float(self.rhat_median_),
            "n_iter": int(self.n_iter_),
            "bytes_per_iter": float(self.bytes_per_iter_),
            "bytes_setup": float(self.bytes_setup_),
        }

    # ---------------------------------------------------------------------------- predict
    def _model_input(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        if getattr(self, "design_", None) is None:
            return validate(self, X, reset=False)
        return self.design_.decode(check_clean_X(X, self.design_.layout))

    def decision_function(self, X) -> np.ndarray:
        z = self._model_input(X) @ self.coef_.T + self.intercept_
        return z[:, 0] if self.coef_.shape[0] == 1 else z

    def predict_log_proba(self, X) -> np.ndarray:
        return log_class_probs(self._model_input(X), self.coef_, self.intercept_)

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        lp = self.predict_log_proba(X)  # checks fitted first
        return self.classes_[np.argmax(lp, axis=1)]


def check_clean_X(X, layout: ColumnLayout) -> np.ndarray:
    """Clean records (n, D) in the layout's domain, as floats: the input of ``predict``. Numeric
    values beyond their column's declared bounds are clipped to them: the model was fitted on that
    domain, and a value of 1e300 would otherwise overflow its logits into NaN probabilities."""
    Xa = as_array("X", X, f"must be a 2-d array (n_records, {layout.n_features})")
    if Xa.ndim != 2:
        raise ValidationError("X", f"must be 2-d (n_records, {layout.n_features}), got shape {Xa.shape}")
    Xa = as_float_array("X", Xa, ndim=2)
    if Xa.shape[0] == 0:
        raise ValidationError("X", "needs at least one record")
    if Xa.shape[1] != layout.n_features:
        raise ValidationError("X", f"has {Xa.shape[1]} features, but the model was fitted with {layout.n_features}")
    if layout.discrete.any():
        kk = layout.k[layout.discrete]
        sub = Xa[:, layout.discrete]
        if np.any(sub != np.round(sub)) or np.any(sub < 0) or np.any(sub >= kk):
            raise ValidationError("X", "discrete columns must hold integer states in {0, ..., k-1}")
    bounded = ~layout.discrete & np.isfinite(layout.lower) & np.isfinite(layout.upper)
    if bounded.any():
        Xa = Xa.copy()  # never the caller's array
        Xa[:, bounded] = np.clip(Xa[:, bounded], layout.lower[bounded], layout.upper[bounded])
    return Xa


def check_memory(
    n: int, D: int, n_inputs: int, C: int, S: int, chains: int, shard_size: int, K: int, available: int | None = None
) -> int:
    """Peak bytes of a fit (releases, per chain: samples' model inputs float32, responsibilities,
    chain state; the E-step's scratch per shard; prior tables), or ValidationError naming the knob
    that drives it if it exceeds 80 % of the available memory."""
    per_chain = n * S * (n_inputs * 4 + C * 8 + 8) + n * D * 4
    scratch = (S + 1) * D * min(shard_size, n) * (4 + 8 * max(C - 1, 1)) * 2
    need = n * (D * 8 + C * 8) + chains * per_chain + scratch + chains * D * K * 8 * 6
    avail = available if available is not None else available_bytes()
    if need > 0.8 * avail:
        # the knob whose lowering saves most; chains only when nothing else weighs (two chains are the diagnostics)
        terms = {
            "n_samples": chains * n * S * (n_inputs * 4 + C * 8 + 8) if S > 1 else 0,
            "encoding": chains * n * S * (n_inputs - D) * 4 if n_inputs > D else 0,
            "shard_size": scratch,
        }
        knob = max(terms, key=terms.get)
        if terms[knob] < need / 4:
            knob = "n_chains" if chains > 1 else knob
        raise ValidationError(
            knob,
            f"the fit would need about {need / 2**30:.1f} GiB (N = {n:,}, D = {D}, "
            f"{n_inputs} model inputs, {chains} chain(s) × {S} sample(s)), more than 80% of the "
            f"{avail / 2**30:.1f} GiB available; lower {knob}",
        )
    return need


def _mean_prior(priors: list[SpreadPrior]) -> SpreadPrior:
    """The chains' priors averaged (a running mean of their parameters)."""
    out = priors[0].copy()
    for i, p in enumerate(priors[1:], start=2):
        out = out.blend(p, 1.0 / i)
    return out

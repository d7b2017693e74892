"""Spread-EM with its penalty and prior smoothing chosen without clean data, as scikit-learn's
``LogisticRegressionCV``: k-fold cross-validation on the releases, each fit scored by the held-out
*noisy* log-likelihood of the model composed with the known mechanism — the only likelihood the
releases have. It splits as log p(x̃, c̃) = log p(x̃) + log p(c̃ | x̃): the prior's smoothing is chosen
on the first part (what the prior models), C on the second (what the classifier models; the joint
is dominated by the D features' marginal and chose C badly, docs/results.md), or on the clean-label
accuracy of the decisions estimated through the label mechanism (``scoring="accuracy"``).

The selection is ``_cv_select``'s; the fallback's test, and the model it keeps or drops, are
``_cv_fallback``'s, whose module doc says what the test guarantees and what not; on paired releases
the test is ``_cv_paired``'s."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..._params import (
    Interval,
    IsNone,
    ListOf,
    Options,
    Satisfies,
    random_state_constraints,
    seed_from,
    validate_estimator,
)
from ...errors import CleanDataWarning, ValidationError
from .._sklearn import warn_clean
from ._cv_fallback import FallbackMixin, heldout_mask, split_rng
from ._cv_scores import debiased_hits
from ._cv_select import SelectionMixin
from ._cv_tasks import final_fit, task_data
from ._estimator import SpreadLogisticRegression, check_clean_X
from ._mstep import log_class_probs
from ._pair_reports import is_triple
from ._paired import PairedView
from ._prior_setup import auto_prior
from ._priors._mixture import choose_latent_class
from ._robust import ROBUST, drop_inconsistent, no_test
from ._runtime import HeldData


class SpreadLogisticRegressionCV(SelectionMixin, FallbackMixin, ClassifierMixin, BaseEstimator):
    """Spread-EM with C and ``prior_strength`` chosen by k-fold cross-validation on the releases.

    Parameters
    ----------
    Cs : the penalties tried (scikit-learn's C: inverse L2 strength).
    prior_strengths : the learned prior's pseudo-count weights tried (fractions of the records).
    cv : folds.
    scoring : what chooses C: "loglik", the held-out log p(c̃ | x̃) (a proper score of the model
        composed with the mechanism), or "accuracy", the clean-label accuracy of the model's
        decisions on the held-out released records (argmax of p̂(c | x̃)), estimated without bias
        through the label mechanism (``debiased_hits``; needs
        randomised-response labels): under heavy label noise the log-likelihood differences
        between Cs are noise-sized and it chose intercept-dominated fits (docs: spread diagnostics).
    selection : which C the scores choose: "best" (the highest mean score), "2se" (the weakest
        penalty, the largest C, whose mean score is within two standard errors of the best's, the
        standard error that of the per-fold differences), or "auto" (default: "2se" on paired
        releases unless the prior is an ``EmpiricalPrior``, "best" elsewhere). On paired releases the held-out
        pair likelihood tells the C's apart by 1e-5 to 1e-4 nats per record, about its fold-to-fold
        noise, and where it leans it leans to shrinkage, which costs balanced accuracy: on a validation
        split of Adult's training rows (one pair per person, N 3·10⁴ to 10⁶, ε 0.5 to 2, 3 seeds)
        "2se" raised balanced accuracy in 11 of 12 cells (the twelfth equal) and moved accuracy by
        −0.006 to +0.008
        (``simulations/adult_scale_designs.py --c-rule``, results/adult_scale_designs/summary.md).
        With a prior of public rows (``EmpiricalPrior``) "auto" is "best": the prior makes the
        likelihood tell the C's apart, and on the same validation split (1,000 public rows smoothed by
        1,000 pseudo-rows, N 3·10⁵ and 10⁶, ε 0.5 to 2, 2 seeds) "best" was at or above "2se" on
        accuracy in all 12 cells (+0.4 points on average) and on AUC in 11 (+0.6), at 0.5 points of
        balanced accuracy. Elsewhere it is not measured, so "best" stays. Learned: ``selection_``.
    fallback : True: fall back to the intercept-only model unless the model chosen and fitted on
        the selection part beats it on the test part (permutation p-value ≤ ``alpha``;
        ``_cv_fallback``'s module doc), or, on paired releases, unless the releases' pair tables show
        an association between the label and some attribute (``_cv_paired``). False: the test still
        runs and reports ``p_value_``, but the model is always kept. "auto" (default): True on releases with a label
        of their own, False on paired releases. There the independence test finds only what the
        pair tables hold, which at small n·ε is weak evidence that a model can still use: on the
        tutorial survey's generator at 3·10⁴ people and ε 0.5 it keeps a model on 2 of 6 seeds, and
        spread scores 0.543 falling back against 0.630 keeping its model (paired naive Bayes 0.642);
        on a validation split of Adult 0.761 against 0.763 (ε 0.5) and 0.793 against 0.797 (ε 1).
        Where the labels carry nothing the kept model, its C chosen by the "2se" rule, costs 0.6
        points against the majority class on Adult (3·10⁴, ε 0.5; 1.4 at 2,000 people) and −0.9 to +1.8
        against the intercept-only fallback on the survey (results/adult_scale_designs/summary.md,
        tenth session). Learned: ``fallback_``.
    test_fraction : the share of the records held out to test (part B); the rest (A) selects and
        fits the tested model. Both parts must be large enough: B at least 2 records, A 2 per fold.
        Not used on paired releases, whose test needs no model and so no held-out part.
    test_statistic : the permutation test's statistic on B: "loglik", Σ log p(c̃ | x̃) (the default:
        the likelihood ratio against the intercept-only model, with the model fixed), "accuracy",
        the debiased clean accuracy of the model's decisions (needs randomised-response labels; it
        cannot see a model whose decisions are all one class), or "auc" (two classes), the rank sum
        of p̂(1 | x̃) over the records released with label 1. Measured
        (``simulations/spread_fallback_level.py --part power``): "loglik" as powerful as "auc", and
        "accuracy" well below both, for two and three classes.
    alpha : the test's level: the largest p-value that keeps the model. 0.05 by default: the
        question is one-sided (does the model beat the intercept-only one?) and the level exact, so
        it needs no margin for an approximation; 0.025 keeps fewer models with a signal (0.63
        instead of 0.74 of synthetic pools of 1,000 records, ``results/spread_fallback_level/``).
    n_permutations : permutations of B's released labels; p is a multiple of 1/(n_permutations + 1).
    heldout_samples : posterior draws per held-out record for its noisy likelihood.
    selection_size : the most records the selection's fits see (None: all of part A). With more in
        A, a random subset of this many (drawn with the CV's split, without replacement) is cut into
        the folds. The chosen C is kept as chosen for the fits on A and on all the releases, as
        scikit-learn's CV keeps it for a refit on more records than its folds: C multiplies a sum
        over records, so a fixed C is a fixed prior on the coefficients whose weight against the data
        falls as records are added. (Until 2026-12-02 C was scaled by n_cut / |A|, the penalty kept
        as heavy per record: on a validation split of Adult's training rows it lost 0.12-0.13 of
        balanced accuracy at ε 0.5 above 10⁵ people, ``simulations/adult_scale_designs.py --c-rule``.)
        The independence test and the refit read every record.
    cv_max_iter : EM budget of each cross-validation fit, which runs one chain (burn-in, then one
        averaging window of ``n_average``); the final refit uses ``max_iter`` and ``n_chains``.
        With ``solver="direct"`` every fit takes ``max_iter`` (each converges in a few seconds).
    robust, robust_alpha : the defence against fake clients of ``SpreadLogisticRegression`` (see there
        for what it does not defend), run once before anything else: the selection, the fallback's
        test, the intercept-only model and the refit all see the kept records only. Split releases:
        the split is drawn first and the consistency test and the recovery (``margin_trim``) read
        selection part A only, so only A's records are trimmed: B is kept whole (its fakes too), its
        labels cannot move the decision, and the permutation test on B stays exact given A and B's
        releases X_B (its null:
        B's released labels exchangeable given X_B). Paired releases have no held-out part: the test
        reads every record, and the independence test then runs on the records its decision kept: after
        a drop its level is conditional on a selection made from the same reports, and no exact
        guarantee is claimed there. Learned: ``consistent_``, ``margin_z_``,
        ``margin_z_critical_``, ``n_dropped_``.
    Other parameters: as ``SpreadLogisticRegression``. On a Ray ``executor`` the releases go to the
        actors once and every fit runs whole on one actor (a serial executor there): the
        selection's fits spread over the actors, and on two actors the tested fit beside the refit
        (else the refit is sharded over all). The result is the serial CV's for an int
        ``random_state``; for None or a Generator the fits on the actors take the CV's one seed.
        Their warnings are raised on the driver; their ``verbose`` output stays on the actors.

    Attributes: ``C_`` (the penalty of the returned model: the chosen candidate's C), ``selection_``
    (the rule that chose it, "best" or "2se"), ``best_params_`` (the chosen candidate, as listed in
    ``cv_results_``),
    ``prior_strength_``, ``n_selection_fit_`` (the records cut into the selection's
    folds: all of A, or ``selection_size`` of them; None on clean data), ``scores_`` ({(C, strength):
    mean held-out log p(x̃, c̃)} over A's folds), ``cond_scores_`` (the same for log p(c̃ | x̃)), ``accuracy_scores_`` (with
    ``scoring="accuracy"``: the estimated clean accuracy per pair), ``cv_results_`` (as scikit-learn's:
    ``params``, ``param_C``, ``param_prior_strength``, ``split{k}_test_score`` (the scoring's value
    on fold k of A), ``mean_test_score``, ``std_test_score``, ``rank_test_score`` (by the mean; with
    several prior strengths the strength is chosen first, by ``mean_test_marginal``, the held-out
    log p(x̃), then C at it), ``mean_test_loglik``, and ``heldout_statistic`` / ``heldout_p_value``
    (the test on B, or on paired releases the independence test on all releases: set for the
    chosen candidate, NaN for the others, which are not tested)),
    ``p_value_`` (the decision's p-value), ``fallback_``, ``fallback_reason_`` (why it fell back, or
    None), ``gain_`` (on B: the mean gain in log p(c̃ | x̃) over the intercept-only model fitted on A
    and its standard error, the statistic's name, its value and its permutation mean and sd (per
    record, or as an AUC), the p-value, alpha, the sizes of A and B, and with two classes the AUC
    against the released labels; on paired releases the independence test's score statistic on all the
    releases, its degrees of freedom ``df``, ``z`` (the p-value as a normal quantile), the p-value
    and alpha), ``estimator_`` (the refit spread-EM, or None after a fallback). On paired releases the
    test runs first, and when it keeps no model no candidate is fitted: ``C_`` and
    ``prior_strength_`` are None and ``cv_results_`` lists the candidates with NaN scores.
    """

    _parameter_constraints = {
        "Cs": [ListOf(Interval(float, 0, None, closed="neither", inf=True))],
        "prior_strengths": [ListOf(Interval(float, 0, None))],
        "cv": [Interval(int, 2, None)],
        "scoring": [Options("loglik", "accuracy")],
        "selection": [Options("best", "2se", "auto")],
        "fallback": [Satisfies(lambda v: isinstance(v, (bool, np.bool_)) or v == "auto", "True, False or 'auto'")],
        "test_fraction": [Interval(float, 0, 1, closed="neither")],
        "test_statistic": [Options("loglik", "accuracy", "auc")],
        "alpha": [Interval(float, 0, 1, closed="neither")],
        "n_permutations": [Interval(int, 1, None)],
        "heldout_samples": [Interval(int, 1, None)],
        "selection_size": [Interval(int, 2, None), IsNone()],
        "cv_max_iter": [Interval(int, 1, None)],
        "random_state": random_state_constraints(),
        "robust": [Options(*ROBUST)],
        "robust_alpha": [Interval(float, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        Cs=(0.01, 0.1, 1.0, 10.0),
        *,
        prior_strengths=(0.1,),
        cv: int = 3,
        scoring: str = "loglik",
        selection: str = "auto",
        fallback: bool | str = "auto",
        test_fraction: float = 0.5,
        test_statistic: str = "loglik",
        alpha: float = 0.05,
        n_permutations: int = 1999,
        heldout_samples: int = 32,
        selection_size: int | None = 100_000,
        cv_max_iter: int = 40,
        prior: Any = "auto",
        n_latent_classes: int = 4,
        init: str = "calibration",
        shrink_to: str = "zero",
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
        self.Cs = Cs
        self.prior_strengths = prior_strengths
        self.cv = cv
        self.scoring = scoring
        self.selection = selection
        self.fallback = fallback
        self.test_fraction = test_fraction
        self.test_statistic = test_statistic
        self.alpha = alpha
        self.n_permutations = n_permutations
        self.heldout_samples = heldout_samples
        self.selection_size = selection_size
        self.cv_max_iter = cv_max_iter
        self.prior = prior
        self.n_latent_classes = n_latent_classes
        self.init = init
        self.shrink_to = shrink_to
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

    def _spread_params(self) -> dict:
        """The spread-EM parameters the fits take from this CV (``SHARED``), with "auto" resolved
        once, on the whole pool."""
        kw = {k: getattr(self, k) for k in SHARED}
        kw["prior"] = getattr(self, "_prior", kw["prior"])
        return kw

    def _spread(self, **changes) -> SpreadLogisticRegression:
        return SpreadLogisticRegression(random_state=self.random_state, **{**self._spread_params(), **changes})

    def fit(self, X, y, mechanism: Any = None):
        """Select, test and fit on releases X, y of ``mechanism`` (or ``self.mechanism``). Without one
        X, y are clean data (plain logistic regression at Cs[0]), with a ``CleanDataWarning``: a warning,
        not an error, so that it stays a scikit-learn estimator (``check_estimator`` fits plain arrays)."""
        if (self.mechanism if mechanism is None else mechanism) is None:
            warn_clean(self)
        # the learned prior's center (``marginal_mle_prior``) depends on the releases only: the
        # candidates of a fold share one, computed once (the same numbers, a fraction of the time);
        # the memo goes to every fit as an argument and lives for this fit only
        memo: dict = {}
        try:
            return self._fit(X, y, mechanism, memo)
        finally:
            memo.clear()

    def _fit(self, X, y, mechanism: Any, memo: dict):  # noqa: C901  select, test, refit: one sequence on shared state
        p = validate_estimator(self)
        mechanism = self.mechanism if mechanism is None else mechanism
        prior = self.prior
        if isinstance(prior, str) and prior == "auto":
            prior = auto_prior(mechanism)  # one prior for every fit of the selection, the test and the refit
        self._prior = prior
        if mechanism is None:  # clean data: spread-EM is ordinary logistic regression; no selection to make
            with warnings.catch_warnings():  # said once, by fit
                warnings.simplefilter("ignore", CleanDataWarning)
                self.estimator_ = self._spread(C=p["Cs"][0]).fit(X, y)
            self._copy_from(self.estimator_)
            self.C_, self.prior_strength_, self.fallback_, self.gain_ = p["Cs"][0], None, False, None
            self.best_params_ = self.selection_ = None
            self.scores_, self.cond_scores_, self.accuracy_scores_ = {}, {}, {}
            self.cv_results_, self.p_value_, self.fallback_reason_ = {}, None, None
            self.consistent_, self.margin_z_, self.margin_z_critical_ = no_test(self.n_features_in_)
            self.n_dropped_, self.prior_choice_, self.n_selection_fit_ = 0, None, None
            return self
        n_given = np.shape(X)[0]
        rng = split_rng(p["random_state"])
        # the one split, drawn on the records as given: selection part A, test part B (held)
        held = heldout_mask(n_given, p["test_fraction"], rng)
        if p["robust"] == "margins":  # once: every fit below sees the kept records only
            # the consistency test reads A only (split releases), so B's labels cannot move the drop
            X, y, mechanism, kept, *test = drop_inconsistent(X, y, mechanism, p["robust_alpha"], np.flatnonzero(~held))
            self.consistent_, self.margin_z_, self.margin_z_critical_ = test
            self.n_dropped_ = n_given - kept.size
            held = held[kept]
        base = self._spread()
        Xv, yi, groups, layout = base._prepare(X, y, mechanism, base._params())
        self.prior_choice_ = None
        if isinstance(self.prior, str) and self.prior == "auto" and prior == "latent-class":
            # the releases decide, once for every fit (``choose_latent_class``: no label read)
            seed = seed_from(p["random_state"])
            self.prior_choice_ = choose_latent_class(Xv, yi, groups, layout, self.n_latent_classes, seed)
            self._prior = self.prior_choice_["chosen"]
        if p["robust"] == "none":
            self.consistent_, self.margin_z_, self.margin_z_critical_ = no_test(layout.n_features)
            self.n_dropped_ = 0
        n = Xv.shape[0]
        if n < 2 * p["cv"]:
            raise ValidationError("cv", f"{p['cv']} folds need at least {2 * p['cv']} records, got {n}")
        mechs = [None] * n
        for rm, rows in groups:
            for i in rows:
                mechs[i] = rm
        n_classes = len(base.classes_)
        triple = is_triple(groups[0][0])
        paired = isinstance(groups[0][0], PairedView) or triple  # the label inside the reports
        if isinstance(p["fallback"], str):  # "auto": the held-out test decides where the label is released
            p["fallback"] = not paired
        if triple and p["fallback"]:
            msg = "True needs the independence test of (attribute, label) pair reports: triple releases have none"
            raise ValidationError("fallback", msg)
        if paired:  # the label is inside the pairs: no released label to score or permute
            for field, allowed in (("scoring", "loglik"), ("test_statistic", "loglik")):
                if p[field] != allowed:
                    raise ValidationError(
                        field,
                        f"must be {allowed!r} for paired releases, got {p[field]!r}: a paired release has no "
                        "label of its own (the held-out pair likelihood and the independence test are used)",
                    )
        elif p["scoring"] == "accuracy" or p["test_statistic"] == "accuracy":  # refuse before any fit
            field = "scoring" if p["scoring"] == "accuracy" else "test_statistic"
            try:
                debiased_hits(np.zeros(n, dtype=np.int64), yi, mechs, n_classes)
            except ValidationError as e:
                raise ValidationError(field, e.message) from None
        if p["test_statistic"] == "auc" and n_classes != 2:
            raise ValidationError("test_statistic", f"'auc' needs two classes, got {n_classes}")
        seed = seed_from(p["random_state"])
        if paired:  # the test needs no held-out part
            held[:] = False
        n_test = int(held.sum())
        if not paired and (n_test < 2 or n - n_test < 2 * p["cv"]):
            raise ValidationError(
                "test_fraction",
                f"{p['test_fraction']} of {n} records leaves {n_test} to test and {n - n_test} to select with "
                f"{p['cv']} folds: needs at least 2 and {2 * p['cv']}",
            )
        sel, test = np.flatnonzero(~held), np.flatnonzero(held)
        size = p["selection_size"]
        if size is not None and size < 2 * p["cv"]:
            raise ValidationError("selection_size", f"{p['cv']} folds need at least {2 * p['cv']} records, got {size}")
        # at large N the selection fits a random subset of A (no draw when A fits: the same folds as before)
        cut = np.sort(rng.choice(sel, size, replace=False)) if size is not None and sel.size > size else sel
        fold = np.full(n, -1)
        fold[cut] = rng.permutation(cut.size) % p["cv"]
        self.n_selection_fit_ = int(cut.size)
        # the releases as given go along only for a refit beside the test (record releases)
        fit_args = None if paired else (X, y, mechanism)
        data = task_data(self, p, (Xv, yi, mechs, fold), n_classes, seed, paired, fit_args, memo)
        n_tasks = max(2, p["cv"] * len(p["Cs"]) * len(p["prior_strengths"]))  # the most actors that have work
        if paired:  # the test needs no model: run it first, and fit no candidate when it keeps none
            if triple:  # no test of triples: the fallback is off (checked above), the model is kept
                self._no_test(p, n)
            else:
                self._test_paired(p, Xv, groups, seed)
            if p["fallback"] and not self.p_value_ <= p["alpha"]:  # as _finish decides (a NaN p keeps none)
                self._no_selection(p)
                return self._finish(p, (X, y, mechanism, memo), Xv, yi, groups, layout, n, n, None, base.classes_)
            with HeldData(self.executor, data, n_tasks) as held:
                self._select(p, fold, paired, held)
            best = self.C_, self.prior_strength_
            return self._finish(p, (X, y, mechanism, memo), Xv, yi, groups, layout, n, n, best, base.classes_)
        with HeldData(self.executor, data, n_tasks) as held:
            self._select(p, fold, paired, held)
            best = self.C_, self.prior_strength_
            # the test: the chosen candidate fitted on A, scored on B, against B's labels permuted. On
            # two actors the refit on all releases runs beside it (kept if the test passes; an error
            # of its own raised only then); elsewhere it follows, sharded over every actor
            beside = held.remote and len(held.actors) == 2
            tasks = [("test", *best, sel, test)] + ([("refit", *best)] if beside else [])
            (cond, proba), *refit = held.run(final_fit, tasks)
        self._test_heldout(p, Xv, yi, mechs, sel, test, cond, proba, n_classes, seed)
        given = (X, y, mechanism, memo)
        return self._finish(p, given, Xv, yi, groups, layout, sel.size, n_test, best, base.classes_, *refit)

    def _copy_from(self, est: SpreadLogisticRegression) -> None:
        for k in ("classes_", "coef_", "intercept_", "n_features_in_", "design_", "prior_", "n_iter_"):
            if hasattr(est, k):
                setattr(self, k, getattr(est, k))

    def diagnostics(self) -> dict:
        check_is_fitted(self, "coef_")
        out = {
            "fallback": bool(self.fallback_),
            "C": self.C_,
            "prior_strength": self.prior_strength_,
            "heldout_gain": self.gain_,
            "p_value": self.p_value_,
            "fallback_reason": self.fallback_reason_,
        }
        if self.robust != "none":  # the defence: which attributes it rejected, how many records it dropped
            out["robust_dropped"] = [int(j) for j in np.flatnonzero(~self.consistent_)]
            out["robust_n_dropped"] = int(self.n_dropped_)
        if self.estimator_ is not None and hasattr(self.estimator_, "converged_"):
            out.update(self.estimator_.diagnostics())
        elif self.fallback_:
            out.update(converged=None, convergence=f"fell back to the intercept-only model: {self.fallback_reason_}")
        return out

    # ---------------------------------------------------------------------------- predict
    def _inputs(self, X):
        check_is_fitted(self, "coef_")
        if self.design_ is None:
            return self.estimator_._model_input(X)
        return self.design_.decode(check_clean_X(X, self.design_.layout))

    def decision_function(self, X):
        z = self._inputs(X) @ self.coef_.T + self.intercept_
        return z[:, 0] if self.coef_.shape[0] == 1 else z

    def predict_log_proba(self, X):
        return log_class_probs(self._inputs(X), self.coef_, self.intercept_)

    def predict_proba(self, X):
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        lp = self.predict_log_proba(X)  # checks fitted first
        return self.classes_[np.argmax(lp, axis=1)]


#: the parameters of SpreadLogisticRegression the CV declares (for its sklearn signature) but uses itself:
#: the defence runs once (reading the selection part of split releases), the seed and the mechanism are
#: handed on by the CV's own rules
OWN = ("random_state", "mechanism", "robust", "robust_alpha")
#: the spread-EM parameters the CV passes to its fits unchanged: those both signatures declare, but ``OWN``
#: (one declaration each, on SpreadLogisticRegression; tests/test_spread_cv.py checks the defaults agree)
SHARED = tuple(
    k
    for k in SpreadLogisticRegressionCV._get_param_names()
    if k in SpreadLogisticRegression._get_param_names() and k not in OWN
)

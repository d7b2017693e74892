"""The CV's choice among its candidates (``SpreadLogisticRegressionCV``): every (C, prior smoothing)
fitted on k − 1 folds and scored on the held-out fold (``_cv_tasks.fold_scores``); the smoothing
chosen on the held-out log p(x̃), C on log p(c̃ | x̃) (or the debiased accuracy) by the best mean or
the "2se" rule; the scores as scikit-learn's ``cv_results_``."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import rankdata

from ...mechanisms import EmpiricalPrior
from ._cv_tasks import fold_scores
from ._runtime import HeldData


class SelectionMixin:
    """The selection of ``SpreadLogisticRegressionCV`` (``_select``), and its record when the paired
    test keeps no model and nothing is selected (``_no_selection``)."""

    def _select(self, p: dict, fold: np.ndarray, paired: bool, held: HeldData) -> None:
        """k-fold cross-validation over the records with fold ≥ 0 (the selection part), its fits
        where ``held`` keeps the releases (``fold_scores``): sets ``C_``,
        ``prior_strength_``, ``scores_``, ``cond_scores_``, ``accuracy_scores_`` and ``cv_results_``."""
        cands = [(C, a) for C in p["Cs"] for a in p["prior_strengths"]]
        full_s = {k: np.empty(p["cv"]) for k in cands}  # per fold: mean held-out log p(x̃, c̃)
        cond_s = {k: np.empty(p["cv"]) for k in cands}  # log p(c̃ | x̃)
        acc_s = {k: np.empty(p["cv"]) for k in cands}  # debiased clean accuracy
        n_held = np.array([np.sum(fold == f) for f in range(p["cv"])], dtype=float)
        tasks = [(f, C, a) for f in range(p["cv"]) for C, a in cands]
        for (f, C, a), (full, cond, acc) in zip(tasks, held.run(fold_scores, tasks)):
            full_s[C, a][f], cond_s[C, a][f], acc_s[C, a][f] = full, cond, acc
        w = n_held / n_held.sum()  # record-weighted means, as over the pooled held-out records
        self.scores_ = {k: float(w @ v) for k, v in full_s.items()}
        self.cond_scores_ = {k: float(w @ v) for k, v in cond_s.items()}
        self.accuracy_scores_ = {k: float(w @ v) for k, v in acc_s.items()} if p["scoring"] == "accuracy" else {}
        # prior smoothing on the held-out log p(x̃) (joint − conditional), averaged over the Cs;
        # then C by the scoring at that smoothing
        marg = {  # paired: the pairs' likelihood is not split into p(x̃) and p(c̃ | x̃); the whole chooses
            a: np.mean([self.scores_[C, a] - (0.0 if paired else self.cond_scores_[C, a]) for C in p["Cs"]])
            for a in p["prior_strengths"]
        }
        a_best = max(p["prior_strengths"], key=marg.get)
        chosen = self.accuracy_scores_ if p["scoring"] == "accuracy" else self.cond_scores_
        split = acc_s if p["scoring"] == "accuracy" else cond_s
        self.selection_ = p["selection"]
        if self.selection_ == "auto":  # "2se" where the pair likelihood barely tells the C's apart (the doc)
            self.selection_ = "2se" if paired and not isinstance(self._prior, EmpiricalPrior) else "best"
        best_C = max(p["Cs"], key=lambda C: chosen[C, a_best])
        if self.selection_ == "2se":  # the weakest penalty within two standard errors of the best
            best_C = max(C for C in p["Cs"] if within_2se(split[best_C, a_best], split[C, a_best], w))
        self.C_, self.prior_strength_ = best_C, a_best
        self.best_params_ = {"C": self.C_, "prior_strength": a_best}
        mean = np.array([chosen[k] for k in cands])
        res: dict[str, Any] = {
            "params": [{"C": C, "prior_strength": a} for C, a in cands],
            "param_C": np.array([C for C, _ in cands], dtype=float),
            "param_prior_strength": np.array([a for _, a in cands], dtype=float),
        }
        for f in range(p["cv"]):
            res[f"split{f}_test_score"] = np.array([split[k][f] for k in cands])
        res["mean_test_score"] = mean
        res["std_test_score"] = np.array([split[k].std() for k in cands])
        res["rank_test_score"] = (rankdata(-mean, method="min")).astype(np.int64)
        res["mean_test_loglik"] = np.array([self.cond_scores_[k] for k in cands])
        res["mean_test_marginal"] = np.array([self.scores_[k] - self.cond_scores_[k] for k in cands])
        self.cv_results_ = res

    def _no_selection(self, p: dict) -> None:
        """Paired releases whose independence test keeps no model: the fallback does not depend on
        any candidate, so none is fitted. ``cv_results_`` lists the candidates with NaN scores;
        ``C_``, ``prior_strength_`` and ``selection_`` are None."""
        cands = [(C, a) for C in p["Cs"] for a in p["prior_strengths"]]
        nan = np.full(len(cands), np.nan)
        self.C_ = self.prior_strength_ = self.best_params_ = self.selection_ = None
        self.scores_, self.cond_scores_, self.accuracy_scores_ = {}, {}, {}
        res: dict[str, Any] = {
            "params": [{"C": C, "prior_strength": a} for C, a in cands],
            "param_C": np.array([C for C, _ in cands], dtype=float),
            "param_prior_strength": np.array([a for _, a in cands], dtype=float),
        }
        for f in range(p["cv"]):
            res[f"split{f}_test_score"] = nan.copy()
        for k in ("mean_test_score", "std_test_score", "mean_test_loglik", "mean_test_marginal"):
            res[k] = nan.copy()
        res["rank_test_score"] = np.ones(len(cands), np.int64)
        self.cv_results_ = res


def within_2se(best: np.ndarray, other: np.ndarray, w: np.ndarray) -> bool:
    """Is ``other``'s mean fold score within two standard errors of ``best``'s? The difference's
    record-weighted mean against twice the standard error of its per-fold values (sd/√k)."""
    d = best - other
    return bool(w @ d <= 2.0 * d.std(ddof=1) / np.sqrt(d.size))

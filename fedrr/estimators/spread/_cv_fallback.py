"""The fallback of ``SpreadLogisticRegressionCV``: a test of whether the chosen model carries signal,
and the model kept or the intercept-only model returned in its place.

How it runs. The releases are split once, at random (seeded by ``random_state``), into a
selection part A and a test part B (``test_fraction`` of the records). C and the smoothing are
chosen by cross-validation on A alone; the chosen candidate is fitted on A; its p̂(c | x̃) on B's
released records gives a statistic T (``test_statistic``: B's log p(c̃ | x̃), the debiased clean
accuracy of its decisions, or for two classes the rank sum of p̂(1 | x̃) over records released with
label 1), and T is compared with its values when B's released labels are permuted among B's
records that share a label mechanism (nothing is refitted): p = (1 + #{T_perm ≥ T})/(n_perm + 1).
The model is kept if p ≤ ``alpha``, else the fit falls back to the intercept-only model
(``fallback_``, ``fallback_reason_``). When kept, the chosen candidate is refitted on all releases,
and that refit is what is returned.

What the test guarantees. Under "no signal", meaning the clean labels are independent of the
clean records (and people are independent), each released label is independent of its released
record and of A, and B's released labels are exchangeable within a label mechanism (which
mechanism a person uses must not depend on their label), whatever the
mechanism of the attributes (all attributes released, or sampled ones). Then, given A (and so given
the model, whatever the selection did), P(p ≤ alpha) ≤ alpha exactly — no normal approximation and
no assumption on the model: the kept rate on no-signal releases is at most ``alpha``. This needs the
label released by its own mechanism, independently of the attributes (``RecordMechanism``'s
``label``). Paired releases (``PairedRecordMechanism``, the label inside each (attribute, label)
report) have no released label to permute: there nothing is held out, C is chosen by the held-out
likelihood of the pair reports in folds over all the releases, and the test is
``_cv_paired``'s test of independence of the label and the attributes on all the releases
(a score test, its p-value by a parametric bootstrap through the mechanism seeded by
``random_state``; its level is measured, not exact).

What it does not guarantee. It tests "the model fitted on A beats the intercept-only model on
B's releases", not "beats some competitor" (a better model than the one kept may exist), and it
certifies the model fitted on A, not the refit on all releases that is returned (which has seen
more data, B included). Holding out B costs power twice: the selection and the tested fit see
(1 − ``test_fraction``) of the records, and the test sees only B. The former test (per-fold
Mann–Whitney on the cross-validation folds, summed) was anti-conservative: the folds' statistics
are dependent, sd(z) 1.43 instead of 1 (issue 29)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._params import seed_from
from ._cv_paired import independence_test, paired_class_prior
from ._cv_scores import _null_loglik, class_freqs, label_blocks, label_terms, permutation_test
from ._design import Design
from ._paired import PairedView


class FallbackMixin:
    """The fallback of ``SpreadLogisticRegressionCV``: its test (``_test_heldout`` on releases with a
    label of their own, ``_test_paired`` on paired releases) and the model it keeps or the
    intercept-only model it falls back to (``_finish``)."""

    def _test_heldout(self, p: dict, Xv, yi, mechs: list, sel, test, cond, proba, n_classes: int, seed: int) -> None:
        """The held-out test on releases with a label of their own (module doc): the chosen candidate,
        fitted on A, scored on B (``cond``: its held-out log p(c̃ | x̃) per record, ``proba``: its
        p̂(c | x̃)) against B's released labels permuted within a label mechanism. Sets ``p_value_``
        and ``gain_``."""
        n_test = test.size
        mech_a, mech_b = [mechs[i] for i in sel], [mechs[i] for i in test]
        gain = cond - _null_loglik(Xv[sel], yi[sel], Xv[test], yi[test], mech_a, mech_b, n_classes)
        M, codes = label_terms(p["test_statistic"], proba, yi[test], mech_b, n_classes)
        prng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7919, 1)))
        t_obs, p_value, t_perm = permutation_test(M, codes, label_blocks(mech_b), p["n_permutations"], prng)
        self.p_value_ = p_value
        n1 = int((yi[test] == 1).sum())  # the same under every permutation
        stat = p["test_statistic"]
        self.gain_ = {
            "mean": float(gain.mean()),
            "se": float(gain.std(ddof=1) / np.sqrt(gain.size)),
            "statistic": p["test_statistic"],
            "value": float(_on_scale(t_obs, stat, n_test, n1)),
            "null_mean": float(np.mean(_on_scale(t_perm, stat, n_test, n1))),
            "null_sd": float(np.std(_on_scale(t_perm, stat, n_test, n1))),
            "p_value": p_value,
            "alpha": p["alpha"],
            "n_selection": int(sel.size),
            "n_test": n_test,
        }
        if n_classes == 2:  # the held-out AUC against the released labels, for the reader
            Ma, ca = label_terms("auc", proba, yi[test], mech_b, 2)
            self.gain_["auc"] = float(_on_scale(Ma[np.arange(n_test), ca].sum(), "auc", n_test, n1))

    def _test_paired(self, p: dict, Xv, groups: list, seed: int) -> None:
        """The fallback's test on paired releases (``_cv_paired.independence_test``): is the label
        associated with any attribute in the pair tables of all the releases? No model enters it; its
        bootstrap draws take the CV's one seed, so a ``random_state`` gives the same p-value."""
        res = independence_test(groups, Xv, seed=seed)
        self.p_value_ = res["p_value"]
        self.gain_ = {
            "statistic": "independence",
            "value": res["statistic"],  # the score statistic T
            "df": res["df"],
            "z": res["z"],  # the p-value as a one-sided normal quantile, for the reader
            "p_value": res["p_value"],  # by the parametric bootstrap
            "p_chi2": res["p_chi2"],  # the statistic's chi-square reference, for the reader
            "n_boot": res["n_boot"],  # the bootstrap draws made
            "alpha": p["alpha"],
            "n_selection": int(Xv.shape[0]),
            "n_test": int(Xv.shape[0]),
        }

    def _no_test(self, p: dict, n: int) -> None:
        """No fallback test (triple releases: ``fallback`` is False there): p-value NaN, the model kept."""
        self.p_value_ = float("nan")
        nan = float("nan")
        self.gain_ = {"statistic": "none", "value": nan, "alpha": p["alpha"], "n_selection": n, "n_test": n}

    def _finish(
        self, p: dict, given: tuple, Xv, yi, groups, layout, n_sel: int, n_test: int, best, classes, refit=None
    ) -> FallbackMixin:  # the estimator itself (a typing-only import of _cv would be a circle)
        """Record the test in ``cv_results_`` (the chosen candidate's row; the others are not tested), then
        keep the model (refit on all releases as ``given``: X, y, mechanism and the fits' memo, unless
        ``refit`` is that fit, made already) or fall back, by the test's p-value."""
        p_value = self.p_value_
        for k in ("heldout_statistic", "heldout_p_value"):
            self.cv_results_[k] = np.full(len(self.cv_results_["params"]), np.nan)
        if best is not None:  # None: paired releases whose test kept no model, so no candidate was fitted
            chosen = self.cv_results_["params"].index(self.best_params_)
            self.cv_results_["heldout_statistic"][chosen] = self.gain_["value"]
            self.cv_results_["heldout_p_value"][chosen] = p_value
        supported = p_value <= p["alpha"]
        self.fallback_ = bool(p["fallback"] and not supported)
        if not self.fallback_:
            self.fallback_reason_ = None
        elif self.gain_["statistic"] == "independence":
            self.fallback_reason_ = (
                f"the {n_test} paired releases show no association between the label and any attribute: "
                f"score statistic {self.gain_['value']:.4g} on {self.gain_['df']} degrees of freedom, "
                f"bootstrap p = {p_value:.3g} > alpha = {p['alpha']:g}"
            )
        else:
            self.fallback_reason_ = (
                f"on {n_test} held-out releases the model fitted on the other {n_sel} (C = {best[0]:g}, "
                f"prior strength {best[1]:g}) did not beat the intercept-only model: {self.gain_['statistic']} "
                f"{self.gain_['value']:.4g} against {self.gain_['null_mean']:.4g} ± {self.gain_['null_sd']:.2g} "
                f"with the released labels permuted, permutation p = {p_value:.3g} > alpha = {p['alpha']:g}"
            )
        self.classes_ = classes
        if self.fallback_:
            self.estimator_ = None
            self._intercept_only(Xv, yi, groups, layout)
        else:
            if isinstance(refit, Exception):  # the refit beside the test failed, and it is needed
                raise refit
            if refit is None:
                X, y, mechanism, memo = given
                refit = self._spread(C=best[0], prior_strength=best[1])._fit(X, y, mechanism, memo)
            else:  # fitted on an actor by a serial executor there (its traffic_ says so): the CV's own here
                refit.set_params(executor=self.executor)
            self.estimator_ = refit
            self._copy_from(self.estimator_)
        return self

    def _intercept_only(self, Xv, yi, groups, layout) -> None:
        """coef 0, intercept the log-odds of the label frequencies debiased through the label
        mechanism (maximum likelihood on the simplex)."""
        if isinstance(groups[0][0], PairedView):
            pi = paired_class_prior(groups)
        else:
            pi = class_freqs(yi, [(rm, rows) for rm, rows in groups], len(self.classes_))
        logit = np.log(np.maximum(pi, 1e-12))
        rows_n = 1 if len(self.classes_) == 2 else len(self.classes_)
        self.design_ = Design(layout, self.encoding)
        self.n_features_in_ = layout.n_features
        self.coef_ = np.zeros((rows_n, self.design_.n_inputs))
        self.intercept_ = np.array([logit[1] - logit[0]]) if rows_n == 1 else logit - logit.mean()
        self.n_iter_, self.prior_ = 0, None


def _on_scale(t, statistic: str, n: int, n1: int):
    """A permutation statistic on its reader's scale: the AUC against the released labels for the
    rank sum ("auc"; 0.5 when one released label is missing), else per held-out record."""
    if statistic != "auc":
        return np.asarray(t) / n
    if n1 in (0, n):
        return np.full(np.shape(t), 0.5)
    return (np.asarray(t) - n1 * (n1 + 1) / 2) / (n1 * (n - n1))


def split_rng(random_state: Any) -> np.random.Generator:
    """The generator of the CV's one split and its folds (a fixed stream of ``random_state``)."""
    return np.random.default_rng(np.random.SeedSequence(seed_from(random_state), spawn_key=(7919,)))


def heldout_mask(n: int, test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """(n,) bool: the records of test part B, round(test_fraction·n) of them drawn uniformly."""
    mask = np.zeros(n, dtype=bool)
    mask[rng.permutation(n)[: int(round(test_fraction * n))]] = True
    return mask

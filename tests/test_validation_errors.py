"""Bad input is rejected with fedrr.errors.ValidationError naming the field and the allowed range.

Table-driven: each case gives the call, the expected ``.field`` and a regex the message must match
(the allowed range / the reason). A hypothesis property test checks RandomizedResponse's ε round
trip and that releases always stay in {0, …, k−1}.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedrr.errors import FedrrError, ValidationError
from fedrr.estimators import estimate_frequencies, warner_estimate
from fedrr.mechanisms import (
    CategoricalPrior,
    GaussianMechanism,
    GaussianPrior,
    HistogramPrior,
    LaplaceMechanism,
    RandomizedResponse,
    RecordMechanism,
    TransitionMatrix,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    laplace_scale,
    mechanism_from_spec,
)

RNG = np.random.default_rng(0)
RR3 = RandomizedResponse(3, 0.3)
TM2 = TransitionMatrix.binary(0.1, 0.2)
LAP = LaplaceMechanism(1.0, 0.0, 1.0)
LAP3 = LaplaceMechanism(1.0, [0.0] * 3, [1.0] * 3)
GAU = GaussianMechanism(1.0, 1e-5, -1.0, 1.0)
REC = RecordMechanism(RR3, TM2, n_features=3)
REC_NOLABEL = RecordMechanism(RR3, n_features=3)

POS = r"> 0"  # "must be a (finite) real number > 0"
UNIT = r"\(0, 1\)"  # "(0, 1)"

CASES = [
    # --- ε ----------------------------------------------------------------------------------------
    ("rr_eps_zero", lambda: RandomizedResponse(2, epsilon=0), "epsilon", POS),
    ("rr_eps_neg", lambda: RandomizedResponse(2, epsilon=-1.0), "epsilon", POS),
    ("rr_eps_nan", lambda: RandomizedResponse(2, epsilon=float("nan")), "epsilon", POS),
    ("rr_eps_inf", lambda: RandomizedResponse(2, epsilon=float("inf")), "epsilon", POS),
    ("rr_eps_str", lambda: RandomizedResponse(2, epsilon="abc"), "epsilon", POS),
    ("rr_eps_none_type", lambda: RandomizedResponse(2, epsilon=[1.0]), "epsilon", POS),
    ("lap_eps_zero", lambda: LaplaceMechanism(0.0), "epsilon", POS),
    ("lap_eps_nan", lambda: LaplaceMechanism(float("nan")), "epsilon", POS),
    ("lap_eps_inf", lambda: LaplaceMechanism(math.inf), "epsilon", POS),
    ("gau_eps_neg", lambda: GaussianMechanism(-0.5), "epsilon", POS),
    ("gau_eps_str", lambda: GaussianMechanism("x"), "epsilon", POS),
    ("gau_eps_and_sigma", lambda: GaussianMechanism(1.0, sigma=1.0), "epsilon", r"exactly one of epsilon or sigma"),
    ("gau_neither", lambda: GaussianMechanism(), "epsilon", r"exactly one of epsilon or sigma"),
    ("gau_sigma_zero", lambda: GaussianMechanism(sigma=0.0), "sigma", POS),
    (
        "gau_sigma_classic",
        lambda: GaussianMechanism(sigma=1.0, calibration="classic"),
        "sigma",
        r"only supported with calibration='analytic'",
    ),
    ("cal_laplace_eps", lambda: laplace_scale(0, 1), "epsilon", POS),
    ("cal_analytic_eps", lambda: analytic_gaussian_sigma(-1, 1e-5, 1), "epsilon", POS),
    ("cal_analytic_sigma", lambda: analytic_gaussian_epsilon(0, 1e-5, 1), "sigma", POS),
    # --- δ ----------------------------------------------------------------------------------------
    ("gau_delta_zero", lambda: GaussianMechanism(1.0, 0.0), "delta", UNIT),
    ("gau_delta_one", lambda: GaussianMechanism(1.0, 1.0), "delta", UNIT),
    ("gau_delta_big", lambda: GaussianMechanism(1.0, 2.0), "delta", UNIT),
    ("gau_delta_neg", lambda: GaussianMechanism(1.0, -1e-5), "delta", UNIT),
    ("gau_delta_nan", lambda: GaussianMechanism(1.0, float("nan")), "delta", UNIT),
    ("gau_delta_str", lambda: GaussianMechanism(1.0, "tiny"), "delta", UNIT),
    ("cal_classic_delta", lambda: classic_gaussian_sigma(0.5, 1.5, 1), "delta", UNIT),
    # --- calibration ------------------------------------------------------------------------------
    (
        "gau_unknown_cal",
        lambda: GaussianMechanism(1.0, calibration="magic"),
        "calibration",
        r"one of \('analytic', 'classic', 'farokhi'\)",
    ),
    ("gau_classic_eps1", lambda: GaussianMechanism(1.0, calibration="classic"), "epsilon", r"\(0, 1\) for the classic"),
    ("gau_classic_eps5", lambda: GaussianMechanism(5.0, calibration="classic"), "epsilon", r"\(0, 1\) for the classic"),
    ("lap_sens_zero", lambda: LaplaceMechanism(1.0, sensitivity=0.0), "sensitivity", POS),
    ("gau_sens_neg", lambda: GaussianMechanism(1.0, sensitivity=-1.0), "sensitivity", POS),
    # --- flip_prob / k ----------------------------------------------------------------------------
    ("rr_flip_uniform_k2", lambda: RandomizedResponse(2, 0.5), "flip_prob", r"\(k-1\)/k = 0\.5.*not invertible"),
    ("rr_flip_uniform_k3", lambda: RandomizedResponse(3, 2 / 3), "flip_prob", r"\(k-1\)/k = 0\.666667.*not invertible"),
    (
        "rr_flip_uniform_k256",
        lambda: RandomizedResponse(256, 255 / 256),
        "flip_prob",
        r"\(k-1\)/k = 0\.996094.*not invertible",
    ),
    ("rr_flip_zero", lambda: RandomizedResponse(2, 0.0), "flip_prob", UNIT),
    ("rr_flip_one", lambda: RandomizedResponse(2, 1.0), "flip_prob", UNIT),
    ("rr_flip_neg", lambda: RandomizedResponse(4, -0.1), "flip_prob", UNIT),
    ("rr_flip_big", lambda: RandomizedResponse(4, 1.5), "flip_prob", UNIT),
    ("rr_flip_nan", lambda: RandomizedResponse(4, float("nan")), "flip_prob", UNIT),
    ("rr_flip_str", lambda: RandomizedResponse(4, "half"), "flip_prob", UNIT),
    ("rr_neither", lambda: RandomizedResponse(2), "flip_prob", r"exactly one of flip_prob or epsilon"),
    ("rr_both", lambda: RandomizedResponse(2, 0.2, epsilon=1.0), "flip_prob", r"exactly one of flip_prob or epsilon"),
    ("rr_k1", lambda: RandomizedResponse(1, 0.2), "k", r"integer >= 2"),
    ("rr_k0", lambda: RandomizedResponse(0, 0.2), "k", r"integer >= 2"),
    ("rr_k_float", lambda: RandomizedResponse(2.0, 0.2), "k", r"integer >= 2"),
    ("rr_k_bool", lambda: RandomizedResponse(True, 0.2), "k", r"integer >= 2"),
    ("rr_k_str", lambda: RandomizedResponse("3", 0.2), "k", r"integer >= 2"),
    ("rr_eps_too_large", lambda: RandomizedResponse(2, epsilon=1e4), "epsilon", r"too large"),
    # --- TransitionMatrix -------------------------------------------------------------------------
    ("tm_non_square", lambda: TransitionMatrix([[0.5, 0.5], [0.3, 0.3], [0.2, 0.2]]), "P", r"square \(k x k\)"),
    ("tm_1d", lambda: TransitionMatrix([0.5, 0.5]), "P", r"2 dimension"),
    ("tm_k1", lambda: TransitionMatrix([[1.0]]), "P", r"k >= 2"),
    ("tm_not_stochastic", lambda: TransitionMatrix([[0.9, 0.2], [0.2, 0.8]]), "P", r"column-stochastic.*sums to 1"),
    ("tm_row_stochastic", lambda: TransitionMatrix([[0.9, 0.1], [0.5, 0.5]]), "P", r"column-stochastic"),
    ("tm_zero_entry", lambda: TransitionMatrix([[1.0, 0.2], [0.0, 0.8]]), "P", r"strictly positive \(0 < P\[i, j\]\)"),
    ("tm_negative", lambda: TransitionMatrix([[1.1, 0.2], [-0.1, 0.8]]), "P", r"strictly positive"),
    (
        "tm_singular",
        lambda: TransitionMatrix([[0.5, 0.5], [0.5, 0.5]]),
        "P",
        r"invertible \(condition number <= 1e\+10",
    ),
    (
        "tm_singular_3x3",
        lambda: TransitionMatrix([[0.2, 0.2, 0.6], [0.3, 0.3, 0.2], [0.5, 0.5, 0.2]]),
        "P",
        r"invertible",
    ),
    ("tm_nan", lambda: TransitionMatrix([[np.nan, 0.2], [0.5, 0.8]]), "P", r"finite \(no NaN or inf\)"),
    ("tm_binary_p10", lambda: TransitionMatrix.binary(1.2, 0.1), "P", r"strictly positive"),
    # --- discrete release / likelihood domain -----------------------------------------------------
    ("rr_state_k", lambda: RR3.release([0, 3], RNG), "x", r"\{0, \.\.\., 2\}; got 3 at index \(1,\)"),
    ("rr_state_neg", lambda: RR3.release([-1], RNG), "x", r"\{0, \.\.\., 2\}; got -1"),
    ("rr_state_frac", lambda: RR3.release([0.5], RNG), "x", r"integer states; found non-integer"),
    ("rr_state_nan", lambda: RR3.release([np.nan], RNG), "x", r"integer states; found NaN or inf"),
    ("rr_state_inf", lambda: RR3.release([np.inf], RNG), "x", r"integer states; found NaN or inf"),
    ("rr_state_bool", lambda: RR3.release(np.array([True]), RNG), "x", r"integer states, got dtype bool"),
    ("rr_state_str", lambda: RR3.release(["a"], RNG), "x", r"integer states"),
    ("tm_state_k", lambda: TM2.release([2], RNG), "x", r"\{0, \.\.\., 1\}"),
    ("rr_ll_xt", lambda: RR3.log_likelihood([5], [0]), "x_tilde", r"\{0, \.\.\., 2\}"),
    ("rr_ll_x", lambda: RR3.log_likelihood([0], [5]), "x", r"\{0, \.\.\., 2\}"),
    ("tm_ll_xt", lambda: TM2.log_likelihood([-1], [0]), "x_tilde", r"\{0, \.\.\., 1\}"),
    ("rr_post_xt", lambda: RR3.posterior([3]), "x_tilde", r"\{0, \.\.\., 2\}"),
    # --- numeric release / domain -----------------------------------------------------------------
    (
        "lap_above",
        lambda: LAP.release([0.5, 1.5], RNG),
        "x",
        r"\[lower, upper\]; got \S*1\.5\S* at index \(1,\) outside \[0\.0, 1\.0\]",
    ),
    ("lap_below", lambda: LAP.release([-0.1], RNG), "x", r"outside \[0\.0, 1\.0\]"),
    ("lap_nan", lambda: LAP.release([np.nan], RNG), "x", r"finite \(no NaN or inf\)"),
    ("gau_inf", lambda: GAU.release([np.inf], RNG), "x", r"finite \(no NaN or inf\)"),
    ("gau_above", lambda: GAU.release(2.0, RNG), "x", r"outside \[-1\.0, 1\.0\]"),
    ("gau_str", lambda: GAU.release(["a"], RNG), "x", r"array of real numbers"),
    ("lap3_width", lambda: LAP3.release(np.zeros((4, 2)), RNG), "x", r"last axis must have length 3"),
    ("lap3_scalar", lambda: LAP3.release(0.5, RNG), "x", r"last axis must have length 3"),
    ("lap3_box", lambda: LAP3.release(np.array([[0.5, 0.5, 1.5]]), RNG), "x", r"outside \[0\.0, 1\.0\]"),
    ("gau_ll_xt_nan", lambda: GAU.log_likelihood([np.nan], [0.0]), "x_tilde", r"finite"),
    ("gau_post_xt_inf", lambda: GAU.posterior([np.inf], GaussianPrior(0.0, 1.0)), "x_tilde", r"finite"),
    ("lap_upper_eq_lower", lambda: LaplaceMechanism(1.0, 1.0, 1.0), "upper", r"must be > lower"),
    ("lap_upper_lt_lower", lambda: LaplaceMechanism(1.0, 2.0, 1.0), "upper", r"must be > lower"),
    ("gau_upper_block", lambda: GaussianMechanism(1.0, 1e-5, [0.0, 0.0], [1.0, 0.0]), "upper", r"must be > lower"),
    ("lap_lower_nan", lambda: LaplaceMechanism(1.0, np.nan, 1.0), "lower", r"finite"),
    ("lap_upper_inf", lambda: LaplaceMechanism(1.0, 0.0, np.inf), "upper", r"finite"),
    ("lap_bounds_2d", lambda: LaplaceMechanism(1.0, np.zeros((2, 2)), np.ones((2, 2))), "lower", r"0 or 1 dimension"),
    # --- priors -----------------------------------------------------------------------------------
    ("prior_negative", lambda: CategoricalPrior(np.array([1.2, -0.2])), "prior.probs", r">= 0"),
    ("prior_sum", lambda: CategoricalPrior(np.array([0.5, 0.2])), "prior.probs", r"sum to 1"),
    ("prior_nan", lambda: CategoricalPrior(np.array([np.nan, 1.0])), "prior.probs", r"finite"),
    ("prior_k_mismatch", lambda: RR3.posterior([0, 1], [0.5, 0.5]), "prior", r"must have 3 states"),
    (
        "prior_rows_mismatch",
        lambda: RR3.posterior(np.zeros((4, 2), int), np.full((3, 3), 1 / 3)),
        "prior",
        r"3 feature rows",
    ),
    ("prior_var_zero", lambda: GaussianPrior(0.0, 0.0), "prior.var", r"> 0"),
    (
        "hist_edges",
        lambda: HistogramPrior(np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.5])),
        "prior.edges",
        r"strictly increasing",
    ),
    ("hist_bins", lambda: HistogramPrior(np.array([0.0, 0.5, 1.0]), np.array([1.0])), "prior.probs", r"needs 2 bins"),
    (
        "num_post_categorical",
        lambda: GAU.posterior([0.0], CategoricalPrior(np.array([0.5, 0.5]))),
        "prior",
        r"GaussianPrior or HistogramPrior",
    ),
    (
        "hist_post_features",
        lambda: LAP.posterior(np.zeros((3, 2)), HistogramPrior(np.tile([0.0, 0.5, 1.0], (3, 1)), np.full((3, 2), 0.5))),
        "prior.edges",
        r"3 per-feature entries",
    ),
    # --- RecordMechanism --------------------------------------------------------------------------
    (
        "rec_nfeat",
        lambda: REC.release(np.zeros((5, 2), int), np.zeros(5, int), rng=RNG),
        "X",
        r"shape \(n_records, 3\)",
    ),
    (
        "rec_ndim",
        lambda: REC.release(np.zeros((5, 3, 1), int), np.zeros(5, int), rng=RNG),
        "X",
        r"shape \(n_records, 3\)",
    ),
    ("rec_y_len", lambda: REC.release(np.zeros((5, 3), int), np.zeros(4, int), rng=RNG), "y", r"shape \(5,\)"),
    ("rec_y_2d", lambda: REC.release(np.zeros((5, 3), int), np.zeros((5, 1), int), rng=RNG), "y", r"shape \(5,\)"),
    ("rec_y_missing", lambda: REC.release(np.zeros((5, 3), int), rng=RNG), "y", r"is required"),
    (
        "rec_y_unexpected",
        lambda: REC_NOLABEL.release(np.zeros((5, 3), int), np.zeros(5, int), rng=RNG),
        "y",
        r"no label mechanism; pass y=None",
    ),
    ("rec_y_domain", lambda: REC.release(np.zeros((5, 3), int), np.full(5, 2), rng=RNG), "y", r"\{0, \.\.\., 1\}"),
    ("rec_x_domain", lambda: REC.release(np.full((5, 3), 3), np.zeros(5, int), rng=RNG), "X", r"\{0, \.\.\., 2\}"),
    ("rec_x_nan", lambda: RecordMechanism(LAP, n_features=2).release(np.full((2, 2), np.nan), rng=RNG), "X", r"finite"),
    (
        "rec_rng_int",
        lambda: REC.release(np.zeros((5, 3), int), np.zeros(5, int), rng=42),
        "rng",
        r"numpy\.random\.Generator",
    ),
    (
        "rec_rng_legacy",
        lambda: REC.release(np.zeros((5, 3), int), np.zeros(5, int), rng=np.random.RandomState(0)),
        "rng",
        r"numpy\.random\.Generator",
    ),
    (
        "rec_rng_none",
        lambda: REC.release(np.zeros((5, 3), int), np.zeros(5, int), rng=None),
        "rng",
        r"numpy\.random\.Generator",
    ),
    (
        "rec_ll_xt_shape",
        lambda: REC.log_likelihood(np.zeros((2, 4), int), np.zeros(2, int), np.zeros((2, 3), int), np.zeros(2, int)),
        "X_tilde",
        r"\(n_records, 3\)",
    ),
    (
        "rec_ll_yt_missing",
        lambda: REC.log_likelihood(np.zeros((2, 3), int), None, np.zeros((2, 3), int), np.zeros(2, int)),
        "y_tilde",
        r"is required",
    ),
    ("rec_block_width", lambda: RecordMechanism(LAP3, n_features=4), "features", r"width 3 cannot cover n_features=4"),
    ("rec_nfeat_zero", lambda: RecordMechanism(RR3, n_features=0), "n_features", r"integer >= 1"),
    ("rec_nfeat_list", lambda: RecordMechanism([RR3, LAP3], n_features=5), "n_features", r"widths add up to 4"),
    ("rec_empty", lambda: RecordMechanism([]), "features", r"non-empty sequence of Mechanism"),
    ("rec_not_mech", lambda: RecordMechanism([RR3, "laplace"]), "features", r"non-empty sequence of Mechanism"),
    ("rec_label_type", lambda: RecordMechanism(RR3, "rr", n_features=2), "label", r"Mechanism or None"),
    ("rec_label_block", lambda: RecordMechanism(RR3, LAP3, n_features=2), "label", r"scalar mechanism \(width 1\)"),
    ("rec_column", lambda: REC.mechanism_for(3), "column", r"\[0, 2\]"),
    # --- specs ------------------------------------------------------------------------------------
    (
        "spec_unknown_kind",
        lambda: mechanism_from_spec({"kind": "exponential"}),
        "spec.kind",
        r"unknown mechanism 'exponential'; known: \[",
    ),
    ("spec_no_kind", lambda: mechanism_from_spec({"k": 2}), "spec", r"dict with a 'kind' entry"),
    ("spec_not_dict", lambda: mechanism_from_spec("randomized_response"), "spec", r"dict with a 'kind' entry"),
    (
        "spec_bad_values",
        lambda: mechanism_from_spec({"kind": "randomized_response", "k": 2, "flip_prob": 0.5}),
        "flip_prob",
        r"not invertible",
    ),
    (
        "spec_record_features",
        lambda: mechanism_from_spec({"kind": "record", "n_features": 1, "features": "rr", "label": None}),
        "spec.features",
        r"list of mechanism specs",
    ),
    # --- estimators -------------------------------------------------------------------------------
    ("est_method", lambda: estimate_frequencies([0, 1], RR3, method="em"), "method", r"one of \('inversion', 'mle'\)"),
    ("est_mech", lambda: estimate_frequencies([0.1], LAP), "mechanism", r"RandomizedResponse or TransitionMatrix"),
    ("est_2d", lambda: estimate_frequencies(np.zeros((2, 2), int), RR3), "x_tilde", r"non-empty 1-d array"),
    ("est_empty", lambda: estimate_frequencies(np.array([], dtype=int), RR3), "x_tilde", r"non-empty 1-d array"),
    ("est_domain", lambda: estimate_frequencies([0, 3], RR3), "x_tilde", r"\{0, \.\.\., 2\}"),
    (
        "est_weights_neg",
        lambda: estimate_frequencies([0, 1], RR3, weights=[1.0, -1.0]),
        "weights",
        r">= 0 and of shape \(2,\)",
    ),
    ("est_weights_shape", lambda: estimate_frequencies([0, 1], RR3, weights=[1.0]), "weights", r"of shape \(2,\)"),
    ("est_weights_nan", lambda: estimate_frequencies([0, 1], RR3, weights=[1.0, np.nan]), "weights", r"finite"),
    ("warner_noninvertible", lambda: warner_estimate(0.5, 0.3, 0.7), "p10", r"P10 \+ P01 = 1"),
]


@pytest.mark.parametrize("call, field, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_validation_error(call, field, message):
    with pytest.raises(ValidationError, match=message) as ei:
        call()
    assert ei.value.field == field
    assert str(ei.value).startswith(f"{field}: ")
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, FedrrError)


def test_case_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


def test_valid_inputs_next_to_the_boundaries_are_accepted():
    RandomizedResponse(2, 0.4999)
    RandomizedResponse(2, 0.5001)
    RandomizedResponse(2, 1e-12)
    RandomizedResponse(np.int64(3), 0.2)
    GaussianMechanism(0.999, 1e-5, calibration="classic")
    GaussianMechanism(1.0, 1 - 1e-12)
    LaplaceMechanism(1e-6)
    TransitionMatrix([[0.5 + 1e-3, 0.5], [0.5 - 1e-3, 0.5]])
    assert LAP.release([0.0, 1.0], RNG).shape == (2,)
    assert RR3.release([0.0, 2.0], RNG).dtype.kind in "iu"
    # released numeric values outside the box are legitimate (noise) and accepted by the server side
    assert np.isfinite(LAP.log_likelihood([-50.0, 50.0], [0.0, 1.0])).all()


# --- pinned bugs ---------------------------------------------------------------------------------

MECHANISMS_FOR_RNG = [
    ("rr", RR3, [0, 1]),
    ("tm", TM2, [0, 1]),
    ("laplace", LAP, [0.2, 0.7]),
    ("gaussian", GAU, [0.2, 0.7]),
]


@pytest.mark.parametrize("name, mech, x", MECHANISMS_FOR_RNG, ids=[m[0] for m in MECHANISMS_FOR_RNG])
def test_mechanism_release_rejects_non_generator_rng(name, mech, x):
    """BUG (pinned): only RecordMechanism.release checks ``rng``. Mechanism.release(x, rng) with an
    int / None raises AttributeError ('int' object has no attribute 'random'), and with a legacy
    np.random.RandomState Laplace/Gaussian silently run on the legacy stream while RR/TM crash
    (RandomState has no .integers). Expected: ValidationError(field='rng') for each bad rng."""
    wrong = {}
    for label, bad_rng in [("int", 42), ("None", None), ("RandomState", np.random.RandomState(0))]:
        try:
            mech.release(x, bad_rng)
            wrong[label] = "accepted"
        except ValidationError as e:
            if e.field != "rng" or "numpy.random.Generator" not in str(e):
                wrong[label] = repr(e)
        except Exception as e:  # noqa: BLE001 - the point is which exception type escapes
            wrong[label] = f"{type(e).__name__}: {e}"
    assert not wrong, wrong


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: RandomizedResponse(2, epsilon="1.0"), "epsilon"),
        (lambda: RandomizedResponse(2, flip_prob="0.25"), "flip_prob"),
        (lambda: GaussianMechanism(1.0, "1e-5"), "delta"),
        (lambda: LaplaceMechanism("2"), "epsilon"),
    ],
    ids=["rr_eps", "rr_flip", "gau_delta", "lap_eps"],
)
def test_numeric_strings_are_rejected(call, field):
    """BUG (pinned, low severity): check_positive / check_open_unit / RR's flip_prob use float(value),
    so the *string* "1.0" is silently accepted as ε = 1.0 (a typo'd config value becomes a privacy
    parameter). The messages say "must be a real number"; strings should be rejected."""
    with pytest.raises(ValidationError) as ei:
        call()
    assert ei.value.field == field


def test_tiny_epsilon_error_names_epsilon():
    """BUG (pinned, low severity): RandomizedResponse(2, epsilon=1e-9) is rejected with
    field='flip_prob' ("= (k-1)/k ... not invertible"), although the caller passed ``epsilon``;
    the error should name ``epsilon`` and its usable range."""
    with pytest.raises(ValidationError) as ei:
        RandomizedResponse(2, epsilon=1e-9)
    assert ei.value.field == "epsilon"


# --- property test -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    k=st.integers(min_value=2, max_value=300),
    eps=st.floats(min_value=1e-3, max_value=30.0, allow_nan=False, allow_infinity=False),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_rr_epsilon_round_trip_and_release_in_range(k, eps, seed):
    m = RandomizedResponse(k, epsilon=eps)
    assert m.epsilon == pytest.approx(eps, rel=1e-9)
    assert 0 < m.flip_prob < (k - 1) / k
    back = RandomizedResponse(k, flip_prob=m.flip_prob)
    assert back.epsilon == pytest.approx(eps, rel=1e-9)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, k, size=200)
    out = m.release(x, rng)
    assert out.shape == x.shape and out.dtype.kind in "iu"
    assert out.min() >= 0 and out.max() <= k - 1
    # ε bounds the likelihood ratio of every observed release
    ll = m.log_likelihood(out[:, None], np.arange(k)[None, :])
    assert np.max(ll.max(axis=1) - ll.min(axis=1)) <= eps * (1 + 1e-9)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(k=st.integers(min_value=2, max_value=50), f=st.floats(min_value=1e-6, max_value=1 - 1e-6))
def test_rr_flip_prob_property(k, f):
    if abs(f - (k - 1) / k) < 1e-6:
        return
    m = RandomizedResponse(k, f)
    assert m.epsilon == pytest.approx(abs(math.log((1 - f) * (k - 1) / f)), rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(m.matrix.sum(axis=0), 1.0, atol=1e-12)

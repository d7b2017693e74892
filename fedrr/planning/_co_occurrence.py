"""What a design tells the learner about how the attributes depend on each other: the three-way
tables P(x_j = s, x_k = s', y = c) of two attributes and the label, which only people who release
both attributes inform (m ≥ 2 per person). With one attribute per person the releases identify the
pair tables P(x_j, y) alone, and every learner's model of the attributes' dependence is then its
prior's, not the data's (issue 46: on Adult the best such model, naive Bayes's tables, stops 3 points
below clean logistic regression at any N).

One person who releases j and k gives each three-way cell an unbiased estimate, the product of the
debiased indicators of their reports: paired, û_j(s, c)·û_k(s', c) (both pairs carry the person's one
label); split, û_j(s)·û_k(s')·û_L(c). The reports' noise is independent given the record, so with
G_i = g₀ + (g₁ − g₀)·1{u = v} (``debiased_second_moments``, a_i = g₁ − g₀) the second moment is a sum
over the subsets S of the factors, Σ_S Π_{i∉S} g₀ᵢ Π_{i∈S} aᵢ · π_S, π_S the reference's margin on S:

* paired: E = g₀ⱼg₀ₖ + aⱼg₀ₖ π_j(s, c) + g₀ⱼaₖ π_k(s', c) + aⱼaₖ π(s, s', c);
* split: the same over the three factors j, k, L and the seven margins of π(s, s', c).

Var = E − π², and a cell is estimated by the n·m(m − 1)/(F(F − 1)) people who release both
attributes (attribute sampling: m of F uniformly; without it every person, m = F). The reference
π(s, s', c) = π_j(s, c)·π_k(s', c)/ρ_c: the attributes independent given the class, the most a planner
that has seen no record can assume (the pair tables: ``plan_release``'s ``reference``).

``co_occurrence_error``: the RMS of sd/π over every three-way cell of every pair of attributes, the
three-way analogue of the plan's ``relative_error_``; ∞ for m = 1. ``DEPENDENCE_TARGET``: the error
under which the planner counts the dependence as identified, calibrated on measured fits."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ..mechanisms import DiscreteMechanism
from ._moments import debiased_second_moments

#: a design identifies how the attributes co-occur when its ``co_occurrence_error`` is at most this.
#: Calibrated on a validation split of Adult's training rows (12 attributes of 2-41 states; people drawn
#: from 80 %, scored on the other 20 %, 2 seeds a cell; results/adult_scale_designs/summary.md, the
#: nineteenth session): spread's CV defaults on the triple against one pair per person on the same
#: people, by the triple's error: it paid at 1.2-8.4 (+2.1 to +2.9 points), 15.3 (3·10⁵, ε 1: +0.7) and
#: 17.4 (10⁶, ε 0.5: +1.0), and did not at 21.5 (3·10⁴, ε 2: −0.6), 31.7 (3·10⁵, ε 0.5: −1.6) and
#: 48.5-100 (3·10⁴, ε ≤ 1: −1.1 to −2.5); 20 lies between. (Two pairs per person, with a latent-class
#: prior, paid up to 27.8 and not from 65: the line serves them too.) The RMS is dominated by the sparse
#: cells of the largest tables (41 × 14 states × 2 classes on Adult), so it is a calibrated line, not
#: "sd 20× a typical cell". Accuracy only: where the triple pays, its balanced accuracy was up to 9.4
#: points below one pair's (10⁶, ε 0.5), and its AUC from 1.2 points below to 0.7 above.
DEPENDENCE_TARGET = 20.0
#: most kinds of attribute pairs summed exactly (distinct reference tables make every attribute a kind)
MAX_KIND_PAIRS = 2000


def three_way_reference(table_j: np.ndarray, table_k: np.ndarray) -> np.ndarray:
    """(k_j, k_k, C): π(s, s', c) = π_j(s, c)·π_k(s', c)/ρ_c, ρ_c the class margin of ``table_j``."""
    rho = table_j.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(rho > 0, 1.0 / rho, 0.0)
    return table_j[:, None, :] * table_k[None, :, :] * inv


def paired_three_way_variance(oj: DiscreteMechanism, ok: DiscreteMechanism, pi3: np.ndarray) -> np.ndarray:
    """(k_j, k_k, C): the variance of one person's estimate û_j(s, c)·û_k(s', c) of π(s, s', c)."""
    g0j, g1j = debiased_second_moments(oj)
    g0k, g1k = debiased_second_moments(ok)
    aj, ak = g1j - g0j, g1k - g0k
    tj, tk = pi3.sum(axis=1), pi3.sum(axis=0)  # π_j(s, c), π_k(s', c)
    second = g0j * g0k + aj * g0k * tj[:, None, :] + g0j * ak * tk[None, :, :] + aj * ak * pi3
    return second - pi3**2


def split_three_way_variance(
    oj: DiscreteMechanism, ok: DiscreteMechanism, label: DiscreteMechanism, pi3: np.ndarray
) -> np.ndarray:
    """(k_j, k_k, C): the variance of one person's estimate û_j(s)·û_k(s')·û_L(c) of π(s, s', c)."""
    (g0j, g1j), (g0k, g1k), (g0l, g1l) = (debiased_second_moments(o) for o in (oj, ok, label))
    aj, ak, al = g1j - g0j, g1k - g0k, g1l - g0l
    p_jk, p_jl, p_kl = pi3.sum(axis=2)[:, :, None], pi3.sum(axis=1)[:, None, :], pi3.sum(axis=0)[None, :, :]
    p_j, p_k, p_l = p_jk.sum(axis=1, keepdims=True), p_jk.sum(axis=0, keepdims=True), p_jl.sum(axis=0, keepdims=True)
    second = (
        g0j * g0k * g0l
        + aj * g0k * g0l * p_j
        + g0j * ak * g0l * p_k
        + g0j * g0k * al * p_l
        + aj * ak * g0l * p_jk
        + aj * g0k * al * p_jl
        + g0j * ak * al * p_kl
        + aj * ak * al * pi3
    )
    return second - pi3**2


def triple_cell_variance(oracle: DiscreteMechanism, pi3: np.ndarray) -> np.ndarray:
    """(k_j, k_k, C): the variance of one triple report's estimate û_(s, s', c) of π(s, s', c), the report
    one value of the k_j·k_k·C domain (``TripleRecordMechanism``): a paired cell's formula on that domain."""
    g0, g1 = debiased_second_moments(oracle)
    return g0 + (g1 - g0) * pi3 - pi3**2


def co_occurrence_error(oracles: list, tables: list, m: int, n: int, label: DiscreteMechanism | None = None) -> float:
    """The RMS of sd/π over every three-way cell (π > 0) of every pair of attributes, for ``n`` people
    each releasing ``m`` of the F attributes through ``oracles`` (paired when ``label`` is None, else
    split with that label mechanism); ∞ when m < 2 or F < 2. Attributes with the same oracle and
    reference table are counted once per kind of pair."""
    F = len(oracles)
    if m < 2 or F < 2:
        return math.inf
    share = m * (m - 1) / (F * (F - 1))  # of the people, those who release a given pair of attributes
    kinds: dict = {}  # one (oracle, table) per kind of attribute, and how many attributes are of it
    count: Counter = Counter()
    for o, t in zip(oracles, tables):
        key = (id(o), t.tobytes(), t.shape)
        kinds.setdefault(key, (o, t))
        count[key] += 1
    keys = list(kinds)
    kind_pairs = [(ka, kb) for a, ka in enumerate(keys) for kb in keys[a:]]
    if len(kind_pairs) > MAX_KIND_PAIRS:  # many distinct reference tables: a fixed uniform subset of the kinds'
        # pairs, each weighted by its count (an unbiased estimate of both sums below)
        pick = np.random.default_rng(0).choice(len(kind_pairs), MAX_KIND_PAIRS, replace=False)
        scale, kind_pairs = len(kind_pairs) / MAX_KIND_PAIRS, [kind_pairs[i] for i in np.sort(pick)]
    else:
        scale = 1.0
    total, cells = 0.0, 0.0
    for ka, kb in kind_pairs:
        pairs = scale * (count[ka] * (count[ka] - 1) // 2 if ka == kb else count[ka] * count[kb])
        if pairs == 0:
            continue
        (oj, tj), (ok, tk) = kinds[ka], kinds[kb]
        pi3 = three_way_reference(tj, tk)
        if label is None:
            v = paired_three_way_variance(oj, ok, pi3)
        else:
            v = split_three_way_variance(oj, ok, label, pi3)
        keep = pi3 > 0
        total += pairs * float((v[keep] / (n * share) / pi3[keep] ** 2).sum())
        cells += pairs * int(keep.sum())
    return math.sqrt(total / cells) if cells else math.inf

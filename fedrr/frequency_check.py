"""The server's frequency check: could the pooled releases have come from the mechanisms they claim?

Honest releases of any records give debiased frequencies (the mean of ``unbiased_onehot`` over the
reports that released a field) that are unbiased for a distribution, so inside [0, 1] up to their
sampling error; and, with attribute sampling, each field is released by a Binomial(n, m/F) number of
clients whatever their data. Crafted releases (``fedrr.fake``'s "output" attack) push a debiased
frequency outside [0, 1] and make their target field over-released. Two families of one-sided z-tests:

* frequency: for every discrete field (and the label) and state s, π̂_s < −z·se_s or π̂_s > 1 + z·se_s;
* sampling: for every field, |count − E count| > z·sd (only with attribute sampling).

The standard error se_s is the mechanism's exact variance (``frequency_variance``) at the boundary
of the null, combined over the record mechanisms in the pool: Var π̂_s = Σ_g n_g v_g,s / n², v_g,s
one report's variance given x = s for the test above 1, and its largest given x = t ≠ s for the
test below 0. (At the plug-in distribution instead — π̂ clipped and renormalised — it flagged every
honest quickstart pool at pixel flip 0.987: a noisy π̂ puts little mass on a state that has much.)
Level: π_s ≥ 0, so P(π̂_s < −z se_s) ≤ P(π̂_s − π_s < −z se_s) ≈ Φ(−z) (likewise above 1); π̂_s is
an affine function of a count of reports supporting s (a sum of independent Bernoullis), whose
normal approximation is taken at n ≥ ``MIN_REPORTS``. Its upper tail is heavier than the normal's
when that count is small (a few reports expected); measured on honest quickstart pools (MNIST,
300 records, 10 seeds at each of ε 1,000 / 3,000 / 10,000): nothing flagged, largest z 4.1
against 5.45. With M tests in all (2 per state of every checked field, 2 per
sampled field), z = Φ⁻¹(1 − α/M) (Bonferroni) makes the family-wise false-alarm probability of an
honest run at most α: α = 0.01 flags two or more of 10 honest runs with probability ≤ 0.0043.

What it cannot see: any release distributed like an honest one — the "input" attack (a fake record,
honestly randomised), or crafted releases too few, or spread too thin, to leave [0, 1] by z standard
errors. A flag says the releases are impossible under the mechanisms; it does not say which clients
are fake: a crafted randomised-response report is a possible honest report (likelihood ≥ the
mechanism's smallest p(x̃ | x) > 0), so no per-release rule can remove it. ``impossible`` counts the
releases with zero likelihood under every clean value, which the pool's validation already rejects
for every fedrr mechanism (0 in a validated pool).

The aggregate test, ``support_count_check`` (a separate call; ``check_pool`` does not run it): how many
values each unary-encoding or local-hashing report supports has a law fixed by the mechanism's p and
q (``support_count_distribution``), whatever the data for OUE. Cao, Jia & Gong's padded MGA reports
all have ⌊p + (k − 1)q⌋ ones, each one a possible honest report, but together a point mass that a
χ² goodness-of-fit test on the pool's histogram sees (level and power: results/support_count_check)."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
from scipy.stats import binom, chi2

from .errors import ValidationError
from .mechanisms import (
    RECORD_MECHANISMS,
    DiscreteMechanism,
    LocalHashing,
    PairedRecordMechanism,
    RecordMechanism,
    TripleRecordMechanism,
    UnaryEncoding,
)

#: fewer reports of a field and it is not tested (the normal approximation is not trusted)
MIN_REPORTS = 100


@dataclass(frozen=True)
class FieldCheck:
    """One field's debiased frequencies and their worst violation of [0, 1], in standard errors."""

    name: str  # "x<column>", "label", or "pair x<column>" (a paired release's pair reports)
    n: int  # reports that released the field
    estimate: np.ndarray  # (k,) debiased frequencies
    se: np.ndarray  # (k,) standard errors
    z: float  # max over states of max(−π̂_s, π̂_s − 1)/se_s (negative: inside [0, 1])
    state: int  # the state where it is attained
    flagged: bool


@dataclass(frozen=True)
class SamplingCheck:
    """How often one field was released, against Binomial(n, m/F) under uniform attribute sampling."""

    name: str
    count: int
    expected: float
    z: float  # (count − expected)/sd
    flagged: bool


@dataclass(frozen=True)
class FrequencyCheck:
    alpha: float
    z_critical: float
    n_tests: int
    fields: tuple[FieldCheck, ...]
    sampling: tuple[SamplingCheck, ...]
    skipped: tuple[str, ...]  # fields with fewer than MIN_REPORTS reports
    impossible: int  # releases with zero likelihood under every clean value

    @property
    def frequency_flagged(self) -> bool:
        return any(f.flagged for f in self.fields)

    @property
    def sampling_flagged(self) -> bool:
        return any(s.flagged for s in self.sampling)

    @property
    def flagged(self) -> bool:
        return self.frequency_flagged or self.sampling_flagged or self.impossible > 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the verdicts, and per field its largest violation (flagged fields in full)."""
        return {
            "flagged": self.flagged,
            "frequency_flagged": self.frequency_flagged,
            "sampling_flagged": self.sampling_flagged,
            "alpha": self.alpha,
            "z_critical": self.z_critical,
            "n_tests": self.n_tests,
            "impossible_releases": self.impossible,
            "skipped": list(self.skipped),
            "flagged_fields": [f.name for f in self.fields if f.flagged]
            + [f"{s.name} (count)" for s in self.sampling if s.flagged],
            "fields": {
                f.name: {
                    "n": f.n,
                    "z": round(f.z, 3),
                    "state": f.state,
                    **({"estimate": f.estimate.round(4).tolist(), "se": f.se.round(4).tolist()} if f.flagged else {}),
                }
                for f in self.fields
            },
            "sampling": {
                s.name: {"count": s.count, "expected": round(s.expected, 1), "z": round(s.z, 3)} for s in self.sampling
            },
        }


def z_critical(alpha: float, n_tests: int) -> float:
    """Φ⁻¹(1 − α/M): the Bonferroni threshold of M one-sided tests at family-wise level α."""
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValidationError("alpha", f"must be a number in (0, 1), got {alpha!r}")
    return NormalDist().inv_cdf(1.0 - alpha / max(int(n_tests), 1))


def frequency_check(
    X: Any,
    y: Any,
    mechanisms: RecordMechanism | PairedRecordMechanism | list[RecordMechanism | PairedRecordMechanism],
    *,
    alpha: float = 0.01,
) -> FrequencyCheck:
    """Test pooled releases (X (n, D), y (n,)) against their record mechanisms (one, or one per
    release: ``Pool.mechanism_arg()``); see the module doc. Fields that are not discrete scalar
    fields in every record mechanism (numeric, blocks) are not tested.

    Paired releases (``PairedRecordMechanism``): each attribute j's pair reports are tested against its
    pair oracle on the k_j·C values (field ``"pair x<j>"``: the debiased frequencies of the pairs
    (x_j = s, y = c) at index s·C + c), and column j's release count against Binomial(n, m/F); there is
    no label field (y is all NaN, the label being inside the pairs)."""
    parts, counts, impossible = _collect(X, y, mechanisms)
    fields, skipped = [], []
    for name, lst in parts.items():
        if any(p is None for p in lst) or len({m.k for m, _ in lst}) != 1:
            continue
        if sum(len(r) for _, r in lst) < MIN_REPORTS:
            skipped.append(name)
            continue
        fields.append((name, lst))
    sampled = [(name, c) for name, c in counts.items() if any(p < 1 for _, p, _ in c)]
    n_tests = 2 * sum(lst[0][0].k for _, lst in fields) + 2 * len(sampled)
    z = z_critical(alpha, n_tests)
    cache: dict = {}  # per mechanism object: its boundary variances (it also keeps the object alive)
    checks = tuple(_field_check(name, lst, z, cache) for name, lst in fields)
    samp = []
    for name, c in sampled:
        count = sum(k for _, _, k in c)
        expected = sum(ng * p for ng, p, _ in c)
        sd = float(np.sqrt(sum(ng * p * (1 - p) for ng, p, _ in c)))
        zs = (count - expected) / sd
        samp.append(SamplingCheck(name, count, expected, zs, abs(zs) > z))
    return FrequencyCheck(float(alpha), z, n_tests, checks, tuple(samp), tuple(skipped), int(impossible.sum()))


def _collect(X: Any, y: Any, mechanisms: Any) -> tuple[dict, dict, np.ndarray]:
    """The pool's reports per field: {field name: [(mechanism, reports), ...] (None for a field that is
    not a discrete scalar field of that mechanism)}, the release counts {field name: [(n_g, p_g, count),
    ...]} and each release's impossibility (zero likelihood under every clean value)."""
    X = np.asarray(X)
    n = X.shape[0] if X.ndim == 2 else 0
    mechs = [mechanisms] * n if isinstance(mechanisms, RECORD_MECHANISMS) else list(mechanisms)
    if n == 0 or len(mechs) != n or not all(isinstance(m, RECORD_MECHANISMS) for m in mechs):
        raise ValidationError(
            "mechanisms",
            "must be a RecordMechanism or PairedRecordMechanism, or one per release of a non-empty (n, D) X",
        )
    groups: dict[int, list[int]] = {}
    by_id: dict[int, Any] = {}
    for i, m in enumerate(mechs):
        groups.setdefault(id(m), []).append(i)
        by_id[id(m)] = m
    parts: dict[str, list] = {}  # field name -> [(mechanism, reports), ...]
    counts: dict[str, list] = {}  # field name -> [(n_g, p_g, count), ...] (attribute sampling)
    impossible = np.zeros(n, dtype=bool)
    y = None if y is None else np.asarray(y)
    for gid, rows in groups.items():
        rm, rows = by_id[gid], np.asarray(rows)
        Xg = X[rows]
        if isinstance(rm, TripleRecordMechanism):
            _triple_group(rm, rows, Xg, parts, counts, impossible)
            continue
        if rm.label_in_pairs:
            _paired_group(rm, rows, Xg, parts, counts, impossible)
            continue
        released = rm.released_fields(Xg)
        p = 1.0 if rm.n_sampled is None else rm.n_sampled / len(rm.fields)
        for f, fld in enumerate(rm.fields):
            name = f"x{fld.columns[0]}"
            counts.setdefault(name, []).append((len(rows), p, int(released[:, f].sum())))
            mech = fld.mechanism
            if not (isinstance(mech, DiscreteMechanism) and mech.width == 1):
                parts[name] = parts.get(name, []) + [None]
                continue
            rel = released[:, f]
            reports = Xg[rel, fld.columns[0]]
            parts.setdefault(name, []).append((mech, reports))
            impossible[rows[rel]] |= _impossible(mech, reports)
        if isinstance(rm.label, DiscreteMechanism) and y is not None:
            parts.setdefault("label", []).append((rm.label, y[rows]))
            impossible[rows] |= _impossible(rm.label, y[rows])
    return parts, counts, impossible


def _paired_group(
    rm: PairedRecordMechanism, rows: np.ndarray, Xg: np.ndarray, parts: dict, counts: dict, impossible: np.ndarray
) -> None:
    """The reports and release counts of one paired mechanism's releases: per attribute j, its pair
    reports under field ``"pair x<j>"`` (the oracle on k_j·C values) and its count under ``"x<j>"``
    (released with probability m/F, whatever the data)."""
    released = rm.released_fields(Xg)
    p = rm.n_sampled / rm.n_features
    for j, oracle in enumerate(rm.oracles):
        rel = released[:, j]
        counts.setdefault(f"x{j}", []).append((len(rows), p, int(rel.sum())))
        reports = Xg[rel, j]
        parts.setdefault(f"pair x{j}", []).append((oracle, reports))
        impossible[rows[rel]] |= _impossible(oracle, reports)


def _triple_group(
    rm: TripleRecordMechanism, rows: np.ndarray, Xg: np.ndarray, parts: dict, counts: dict, impossible: np.ndarray
) -> None:
    """The reports and release counts of one triple mechanism's releases: per pair of attributes j < k,
    its triple reports under field ``"triple x<j> x<k>"`` (the oracle on k_j·k_k·C values) and its count
    under ``"x<j> x<k>"`` (drawn with probability 2/(F(F − 1)), whatever the data)."""
    released = rm.released_fields(Xg)
    p = 1.0 / len(rm.pairs)
    for (j, k), oracle in zip(rm.pairs, rm.oracles):
        rel = released[:, j] & released[:, k]
        counts.setdefault(f"x{j} x{k}", []).append((len(rows), p, int(rel.sum())))
        reports = Xg[rel, j]
        parts.setdefault(f"triple x{j} x{k}", []).append((oracle, reports))
        impossible[rows[rel]] |= _impossible(oracle, reports)


def check_pool(pool: Any, alpha: float = 0.01) -> FrequencyCheck:
    """``frequency_check`` of a ``fedrr.pool.Pool``."""
    return frequency_check(pool.X, pool.y, pool.mechanism_arg(), alpha=alpha)


def _impossible(mech: DiscreteMechanism, reports: np.ndarray) -> np.ndarray:
    if len(reports) == 0:
        return np.zeros(0, dtype=bool)
    return ~np.isfinite(mech.log_likelihood_matrix(reports)).any(axis=-1)


def _field_check(name: str, lst: list, z: float, cache: dict) -> FieldCheck:
    n = sum(len(r) for _, r in lst)
    total = sum(mech.unbiased_onehot(r).sum(axis=0) for mech, r in lst if len(r))
    est = np.asarray(total, float) / n
    groups = [(len(r), _boundary_variances(mech, cache)) for mech, r in lst if len(r)]
    var_up = sum(m * up for m, (up, _) in groups) / n**2
    var_lo = sum(m * lo for m, (_, lo) in groups) / n**2
    se_up, se_lo = np.sqrt(np.maximum(var_up, 1e-300)), np.sqrt(np.maximum(var_lo, 1e-300))
    viol = np.maximum(-est / se_lo, (est - 1.0) / se_up)
    s = int(np.argmax(viol))
    se = np.where(est > 0.5, se_up, se_lo)
    return FieldCheck(name, n, est, se, float(viol[s]), s, bool(viol[s] > z))


def _boundary_variances(mech: DiscreteMechanism, cache: dict) -> tuple[np.ndarray, np.ndarray]:
    """One report's variance of the debiased frequency of each state s where the null is hardest
    to tell from a violation: π_s = 1 for "above 1", π_s = 0 for "below 0" (the largest over the
    other states' point masses). The plug-in distribution is no substitute: with a noisy estimate
    it puts little mass on a state that has much, under-states that state's variance, and flagged
    an honest quickstart pool (MNIST, 300 records, pixel flip 0.987)."""
    key = id(mech)
    if key not in cache:
        k = mech.k
        V = np.stack([mech.frequency_variance(1, np.eye(k)[t]) for t in range(k)])  # V[t, s]: given x = t
        off = np.where(np.eye(k, dtype=bool), -np.inf, V)  # a discrete mechanism has k ≥ 2 states
        cache[key] = (np.diag(V).copy(), off.max(axis=0), mech)  # mech: keeps id(mech) from being reused
    up, lo, _ = cache[key]
    return up, lo


# --- the aggregate test: how many values each report supports -----------------------------------
#: least expected count of a pooled bin of the support-count histogram (Cochran's rule for χ²)
MIN_EXPECTED = 5.0
#: OLH: the exact support-size distribution enumerates every hash seed for every state (n_seeds·k at most this)
MAX_SEED_STATES = 2**26


@dataclass(frozen=True)
class SupportCountField:
    """One field's histogram of supported values per report against its honest distribution."""

    name: str
    n: int  # reports tested (the field's unary-encoding and local-hashing reports)
    lower: np.ndarray  # (bins,) each pooled bin holds the counts from lower[b] to lower[b + 1] − 1
    observed: np.ndarray  # (bins,) reports per bin
    expected: np.ndarray  # (bins,) n · P(bin) under honest use
    statistic: float  # Pearson's Σ (O − E)²/E
    df: int  # bins − 1
    p_value: float  # χ²(df) upper tail
    flagged: bool  # p_value ≤ α / n_tests


@dataclass(frozen=True)
class SupportCountCheck:
    alpha: float
    n_tests: int
    fields: tuple[SupportCountField, ...]
    skipped: tuple[str, ...]  # fewer than MIN_REPORTS reports, under two bins, or an OLH domain too large

    @property
    def flagged(self) -> bool:
        return any(f.flagged for f in self.fields)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the verdict and per field its statistic and p-value (flagged fields' histograms in full)."""
        return {
            "flagged": self.flagged,
            "alpha": self.alpha,
            "n_tests": self.n_tests,
            "skipped": list(self.skipped),
            "flagged_fields": [f.name for f in self.fields if f.flagged],
            "fields": {
                f.name: {
                    "n": f.n,
                    "statistic": round(f.statistic, 3),
                    "df": f.df,
                    "p_value": f.p_value,
                    **(
                        {
                            "lower": f.lower.tolist(),
                            "observed": f.observed.tolist(),
                            "expected": f.expected.round(2).tolist(),
                        }
                        if f.flagged
                        else {}
                    ),
                }
                for f in self.fields
            },
        }


def support_counts(mech: UnaryEncoding | LocalHashing, reports: Any) -> np.ndarray:
    """(n,) int: how many clean values each report supports — a unary report's ones, a local-hashing
    report's #{s < k : H_seed(s) = y}."""
    if isinstance(mech, UnaryEncoding):
        return mech.bits(reports).sum(axis=-1)
    if isinstance(mech, LocalHashing):
        seed, y = mech.split(reports)
        out = np.empty(seed.shape, dtype=np.int64)
        step = max(1, 2**22 // mech.k)
        for lo in range(0, seed.size, step):
            s, v = seed.ravel()[lo : lo + step], y.ravel()[lo : lo + step]
            out.ravel()[lo : lo + step] = (mech.hash(s[:, None], np.arange(mech.k)) == v[:, None]).sum(axis=1)
        return out
    raise ValidationError("mechanism", f"must be UnaryEncoding or LocalHashing, got {type(mech).__name__}")


def support_count_distribution(mech: UnaryEncoding | LocalHashing) -> np.ndarray:
    """(k, k + 1): P(a report supports j values | x) of an honest report, row x, column j.

    Unary encoding (Wang et al. 2017, §4.3: bit x is 1 with p = 1/2, every other bit with q): the ones
    are Bernoulli(p) + Binomial(k − 1, q), whatever x — every row is that law, of mean p + (k − 1)q.

    Local hashing (§4.4: y = H(x) with p, else one of the g − 1 other buckets uniformly): the support is
    the bucket y's preimage, B_y = #{s < k : H(s) = y}, so P(j | x) = p·P(B_H(x) = j) +
    (1 − p)/(g − 1)·(Σ_r P(B_r = j) − P(B_H(x) = j)) over the seeds. For an ideal hash this is
    Bernoulli(p) + Binomial(k − 1, 1/g); fedrr's ((a·x + b) mod P) mod g family is far from it (at
    k = P every seed's bucket sizes are P's residues per bucket: k 41, g 8 supports 5 or 6 values only),
    and for P − k ≥ 2 the law depends on x (by up to 0.04 in a bin, measured at k 8 to 90). So it is
    computed exactly, every seed enumerated (n_seeds·k ≤ ``MAX_SEED_STATES``, else ValidationError)."""
    k = mech.k
    j = np.arange(k + 1)
    if isinstance(mech, UnaryEncoding):
        others = binom.pmf(j, k - 1, mech.q)  # Binomial(k − 1, q) at j
        row = mech.p * np.concatenate([[0.0], others[:-1]]) + (1 - mech.p) * others
        return np.tile(row, (k, 1))
    if not isinstance(mech, LocalHashing):
        raise ValidationError("mechanism", f"must be UnaryEncoding or LocalHashing, got {type(mech).__name__}")
    if mech.n_seeds * k > MAX_SEED_STATES:
        raise ValidationError(
            "mechanism",
            f"local hashing with k = {k} has {mech.n_seeds} seeds: n_seeds·k must be <= {MAX_SEED_STATES} to enumerate",
        )
    own, every = np.zeros(k * (k + 1)), np.zeros(k + 1)
    step = max(1, 2**20 // k)
    for lo in range(0, mech.n_seeds, step):
        seeds = np.arange(lo, min(lo + step, mech.n_seeds))
        S = seeds.size
        H = mech.hash(seeds[:, None], np.arange(k))  # (S, k)
        B = np.bincount((np.arange(S)[:, None] * mech.g + H).ravel(), minlength=S * mech.g).reshape(S, mech.g)
        every += np.bincount(B.ravel(), minlength=k + 1)
        Bx = np.take_along_axis(B, H, axis=1)  # (S, k): the size of x's bucket
        own += np.bincount((np.arange(k)[None, :] * (k + 1) + Bx).ravel(), minlength=k * (k + 1))
    own, every = own.reshape(k, k + 1) / mech.n_seeds, every / mech.n_seeds
    return mech.p * own + mech.other * (every[None, :] - own)


def support_count_check(
    X: Any,
    y: Any,
    mechanisms: RecordMechanism | PairedRecordMechanism | list[RecordMechanism | PairedRecordMechanism],
    *,
    alpha: float = 0.01,
) -> SupportCountCheck:
    """The aggregate test of the pool's unary-encoding and local-hashing fields (a paired release's pair
    oracles and a label too): does the histogram of supported values per report (``support_counts``)
    follow its honest law (``support_count_distribution``)? Per field, Pearson's χ² over bins pooled
    from the low end until each expects ≥ ``MIN_EXPECTED`` reports, on bins − 1 degrees of freedom;
    Bonferroni over the fields tested, so an honest pool is flagged with probability ≤ α (up to the χ²
    approximation; measured in results/support_count_check).

    Why: a padded MGA unary report (``fedrr.fake.padded_ones``) always has ⌊p + (k − 1)q⌋ ones, a
    possible honest count, so no per-report rule removes it, but a share of fakes is a point mass in
    the histogram. The honest OUE law does not depend on x; OLH's does when P − k ≥ 2, and its null
    is then the mixture at the field's debiased frequencies (clipped at 0, renormalised): a plug-in,
    whose level is measured, not claimed. Fields with fewer than ``MIN_REPORTS`` reports, fewer than
    two bins, or an OLH domain too large to enumerate are skipped."""
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValidationError("alpha", f"must be a number in (0, 1), got {alpha!r}")
    parts, _, _ = _collect(X, y, mechanisms)
    cache: dict = {}  # per mechanism object: its support-count law (it also keeps the object alive)
    tested, skipped = [], []
    for name, lst in parts.items():
        lst = [(m, r) for m, r in (e for e in lst if e is not None) if isinstance(m, (UnaryEncoding, LocalHashing))]
        if not lst:
            continue
        if sum(len(r) for _, r in lst) < MIN_REPORTS or len({m.k for m, _ in lst}) != 1:
            skipped.append(name)
            continue
        try:
            laws = [_count_law(m, cache) for m, _ in lst]
        except ValidationError:
            skipped.append(name)
            continue
        observed = sum(np.bincount(support_counts(m, r), minlength=m.k + 1) for m, r in lst if len(r))
        if any(np.ptp(D, axis=0).max() > 1e-12 for D in laws):  # the law depends on x: at the debiased π̂
            total = sum(m.unbiased_onehot(r).sum(axis=0) for m, r in lst if len(r))
            pi = np.clip(np.asarray(total, float), 0.0, None)
            pi = pi / pi.sum() if pi.sum() > 0 else np.full(pi.size, 1.0 / pi.size)
        else:
            pi = np.full(lst[0][0].k, 1.0 / lst[0][0].k)
        expected = sum(len(r) * (pi @ D) for (_, r), D in zip(lst, laws, strict=True))
        row = _pooled_chi_square(name, observed, expected)
        if row is None:
            skipped.append(name)
        else:
            tested.append(row)
    M = max(len(tested), 1)
    fields = tuple(SupportCountField(*row, p_value=p, flagged=bool(p <= alpha / M)) for *row, p in tested)
    return SupportCountCheck(float(alpha), len(tested), fields, tuple(skipped))


def check_pool_support_counts(pool: Any, alpha: float = 0.01) -> SupportCountCheck:
    """``support_count_check`` of a ``fedrr.pool.Pool``."""
    return support_count_check(pool.X, pool.y, pool.mechanism_arg(), alpha=alpha)


def _count_law(mech: Any, cache: dict) -> np.ndarray:
    key = id(mech)
    if key not in cache:
        cache[key] = (support_count_distribution(mech), mech)  # mech: keeps id(mech) from being reused
    return cache[key][0]


def _pooled_chi_square(name: str, observed: np.ndarray, expected: np.ndarray) -> tuple | None:
    """Pearson's χ² of the counts 0..k pooled from the low end into bins expecting ≥ ``MIN_EXPECTED``
    each (a short last bin joins the one before); None under two bins."""
    lower, acc = [0], 0.0
    for j, e in enumerate(expected):
        acc += e
        if acc >= MIN_EXPECTED and j + 1 < expected.size:
            lower.append(j + 1)
            acc = 0.0
    if acc < MIN_EXPECTED and len(lower) > 1:
        lower.pop()
    if len(lower) < 2:
        return None
    idx = np.asarray(lower)
    O, E = np.add.reduceat(observed, idx).astype(np.int64), np.add.reduceat(expected, idx)
    stat = float(((O - E) ** 2 / E).sum())
    df = idx.size - 1
    return name, int(O.sum()), idx, O, E, stat, df, float(chi2.sf(stat, df))

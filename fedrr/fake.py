"""Fake clients (simulation): an attacker controls a fraction of the clients and sends releases
crafted to move the server's estimates. Every fake release is *valid-looking*: the right shape, the
honest clients' mechanism spec, values in that mechanism's range, the attribute-sampling pattern —
it passes all of the pool's validation.

Three attacks, after Cheu, Smith & Ullman ("Manipulation attacks in local differential privacy",
IEEE S&P 2021: input vs output manipulation) and Cao, Jia & Gong ("Data poisoning attacks to local
differential privacy protocols", USENIX Security 2021: the maximal gain attack, MGA). Both target one
attribute state and one label: the frequency of ``x_j = s`` (j = ``attribute``, s = ``state``), of
``label = c`` and of the pair, i.e. the association between ``x_j = s`` and ``c`` that naive Bayes's
tables and any learner pick up.

* ``"mga"`` — Cao, Jia & Gong's maximal gain attack as the paper describes it (``mga_release``), on a
  target set T of r states of attribute j (``state`` an int or a sequence): k-RR a target drawn
  uniformly from T; OUE every target bit set AND padded with randomly chosen other bits to
  l = max(r, ⌊p + (k − 1)q⌋) ones, the honest expected count; OLH the best of ``MGA_SEEDS`` sampled
  hash seeds (the most targets in one bucket) and that bucket. The label is crafted the same way (its
  one target c). Released fields as ``"output"``: j always, plus n_sampled − 1 honest others.
* ``"mga-sampled"`` — the same reports at the honest sampling rate (as ``"output-sampled"``).
* ``"output"`` — the UNPADDED variant of the maximal gain attack (kept as the earlier design):
  the fake client bypasses its randomiser. For
  attribute j it sends the release that maximises the debiased frequency of s, for the label the one
  that maximises that of c (``crafted_release``): randomised response (any matrix oracle) the report
  x̃ maximising (P⁻¹)[s, x̃] — for k-RR, s itself; unary encoding only bit s set (every other state's
  debiased frequency at its minimum −q/(p − q): an OUE report with one 1 where an honest one
  has p + (k − 1)q on average, which is what makes it easy to flag); local hashing a uniformly drawn
  seed and y = H_seed(s). With attribute sampling it always releases j, plus n_sampled − 1 other fields drawn
  uniformly and released honestly from uniformly drawn states. Each fake adds (1 − b)/(a − b) to the
  sum behind the debiased frequency of s (a = P(x̃ supports s | x = s), b the same for x ≠ s) where
  an honest client adds 1 at most: the gain is amplified by the noise (Cheu et al.).
* ``"output-sampled"`` — the same crafting under the honest sampling distribution: the fake releases
  j only when its uniform draw of n_sampled fields includes it (n_sampled/F of the gain on j, and no
  over-release of j for the server to count); the label is always crafted.
* ``"input"`` — input manipulation: the fake client runs the honest randomiser (attribute sampling
  included) on a fake record: x_j = s (drawn uniformly from T), label c, every other attribute
  uniformly at random. Its
  release is distributed exactly like an honest client's with that record: no test on the releases
  can tell it apart, and it is the weaker attack (no amplification).

Paired releases (``PairedRecordMechanism``: each released value is a pair v = x_j·C + y through
attribute j's pair oracle) are attacked the same way, on the pair v* = s·C + c: ``"output"`` sends
attribute j's maximal-gain report of v* through j's pair oracle (``crafted_release``), plus n_sampled − 1
other attributes' pairs drawn uniformly and released honestly; ``"mga"`` sends the MGA report of the
target pairs {s·C + c : s ∈ T} the same way; ``"output-sampled"`` and ``"mga-sampled"`` draw the released
attributes uniformly and craft j's pair only when drawn; ``"input"`` randomises the fake record honestly.
The label is never sent on its own (y is NaN), as in an honest paired release.

The defence that acts on these attacks is ``LDPNaiveBayes(robust="margins")`` (learner
``ldp-nb-robust``); what it does not defend is listed there.

Fake clients replace honest ones (N stays the same): client i is fake when
``unit_uniform(seed, i, "fake") < fraction``. They hold no clean record, never drop out, and draw
from the generator an honest client i would use, so a run is reproducible and a Flower simulation's
pool equals ``fedrr.release.offline_release``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._names import FAKE_ATTACKS
from ._validation import check_int
from .errors import ValidationError
from .mechanisms import (
    DiscreteMechanism,
    LocalHashing,
    MatrixMechanism,
    PairedRecordMechanism,
    RecordMechanism,
    TripleRecordMechanism,
    UnaryEncoding,
)
from .population import ClientPopulation, unit_uniform

#: hash seeds an OLH MGA fake samples, keeping one that maps the most targets to one bucket (CJG §4.2)
MGA_SEEDS = 1000


def crafted_release(mech: DiscreteMechanism, target: int, rng: np.random.Generator) -> Any:
    """The release of one discrete field that maximises the debiased frequency of state ``target``
    (``mech.unbiased_onehot(x̃)[target]`` is the largest any valid release gives), a valid release of
    ``mech``. Local hashing draws its seed from ``rng``."""
    if isinstance(mech, UnaryEncoding):
        return float(2**target)  # only bit ``target``: +(1 − q)/(p − q) for it, −q/(p − q) for the rest
    if isinstance(mech, LocalHashing):
        seed = int(rng.integers(0, mech.n_seeds))
        return float(seed * mech.g + int(mech.hash(np.int64(seed), np.int64(target))))
    if isinstance(mech, MatrixMechanism):
        return np.int64(np.argmax(mech.unbiased_onehot(np.arange(mech.k))[:, target]))
    raise ValidationError(
        "mechanism",
        f"fake clients craft releases of randomised response, unary encoding or local hashing, not {mech!r}",
    )


def padded_ones(mech: UnaryEncoding, n_targets: int = 1) -> int:
    """The number of ones in an MGA unary report with ``n_targets`` = r targets: the r target bits and
    l − r padding bits, l = max(r, ⌊p + (k − 1)q⌋). p + (k − 1)q is the expected number of ones in an
    honest OUE report (E Σ_j b_j = p + (k − 1)q whatever x); Cao, Jia & Gong (2021, §4.2, MGA for OUE)
    pad to l = ⌊p + (d − 1)q⌋ (our reading of their rounding: down), and never fewer than the r targets."""
    r = check_int("n_targets", n_targets, minimum=1, maximum=mech.k)
    return max(r, math.floor(mech.p + (mech.k - 1) * mech.q))


def mga_release(mech: DiscreteMechanism, targets: Any, rng: np.random.Generator, *, n_seeds: int = MGA_SEEDS) -> Any:
    """Cao, Jia & Gong's maximal gain attack (MGA, USENIX Security 2021, §4.2): the report of one
    discrete field that a fake user sends to promote the target set T = ``targets`` (r states), a valid
    release of ``mech``:

    * randomised response (any matrix oracle): the report x̃ maximising Σ_{t∈T} (P⁻¹)[t, x̃], ties
      drawn uniformly — for k-RR a target drawn uniformly from T (every target report gives the same
      sum, (1 − r·q)/(p − q));
    * unary encoding (OUE): every target bit set to 1 and l − r other bits, drawn uniformly without
      replacement, set to 1: l = ``padded_ones`` ones, the honest expected number, so that the report
      "looks like" an honest one by its count of ones;
    * local hashing (OLH): among ``n_seeds`` uniformly drawn hash seeds, one that maps the most targets
      to one bucket (uniformly among the best), and the report y = that bucket.

    Expected gain on each target t ∈ T, per fake among N reports (CJG Theorems 1–3; the debiased
    frequency of t moves by β(g_t − f_t), β the fakes' share, f_t t's honest frequency): k-RR
    g_t = (1/r − q)/(p − q); OUE g_t = (1 − q)/(p − q); OLH g_t = (1{H(t) = y} − q*)/(p − q*), which
    is (1 − q*)/(p − q*) when all targets share the chosen bucket (q* = 1/g for an ideal hash; fedrr's
    exact q* otherwise, see ``LocalHashing``)."""
    T = np.unique(np.asarray(targets, dtype=np.int64).reshape(-1))
    if T.size == 0 or T.min() < 0 or T.max() >= mech.k:
        raise ValidationError("targets", f"must be 1 to {mech.k} states in [0, {mech.k - 1}], got {targets!r}")
    if isinstance(mech, UnaryEncoding):
        pad = rng.permutation(np.setdiff1d(np.arange(mech.k), T))[: padded_ones(mech, T.size) - T.size]
        return float(sum(2 ** int(b) for b in np.concatenate([T, pad])))
    if isinstance(mech, LocalHashing):
        seeds = rng.integers(0, mech.n_seeds, size=check_int("n_seeds", n_seeds, minimum=1))
        H = mech.hash(seeds[:, None], T[None, :])  # (seeds, r)
        together = (H[:, :, None] == H[:, None, :]).sum(axis=2)  # per seed and target: targets in its bucket
        most = together.max(axis=1)
        best = np.flatnonzero(most == most.max())
        i = int(best[rng.integers(0, best.size)])
        y = int(H[i, int(np.argmax(together[i]))])
        return float(int(seeds[i]) * mech.g + y)
    if isinstance(mech, MatrixMechanism):
        gain = mech.unbiased_onehot(np.arange(mech.k))[:, T].sum(axis=1)  # per report x̃
        best = np.flatnonzero(gain >= gain.max() - 1e-12 * max(1.0, abs(gain.max())))
        return np.int64(best[rng.integers(0, best.size)])
    raise ValidationError(
        "mechanism",
        f"fake clients craft releases of randomised response, unary encoding or local hashing, not {mech!r}",
    )


class FakeClients(ClientPopulation):
    """``base``'s clients, a ``fraction`` of them fake (see the module doc for the attacks). The
    population's other methods pass through: an honest client releases as in ``base``; a fake one
    claims ``base``'s mechanism for it, never drops out and has no clean record (``record`` raises)."""

    def __init__(
        self,
        base: ClientPopulation,
        fraction: float,
        *,
        attack: str = "output",
        attribute: int = 0,
        state: int = 0,
        label: int = 1,
    ):
        if not isinstance(base, ClientPopulation):
            raise ValidationError("base", f"must be a ClientPopulation, got {type(base).__name__}")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
            raise ValidationError("fraction", f"must be a number in [0, 1), got {fraction!r}")
        if attack not in FAKE_ATTACKS:
            raise ValidationError("attack", f"must be one of {FAKE_ATTACKS}, got {attack!r}")
        self.base, self.fraction, self.attack = base, float(fraction), attack
        self.seed, self.dropout = base.seed, base.dropout
        rm = base.mechanism(0)
        if isinstance(rm, TripleRecordMechanism):
            raise ValidationError(
                "base",
                f"releases through a mechanism that {TripleRecordMechanism.NOT_PAIRS}; fake clients forge pairs",
            )
        if rm.label_in_pairs:
            self.attribute = check_int("attribute", attribute, minimum=0, maximum=rm.n_features - 1)
            self.state, self.states = self._check_states(state, rm.n_states[self.attribute])
            self.label = check_int("label", label, minimum=0, maximum=rm.n_classes - 1)
            return
        fields = rm.fields
        self.attribute = check_int("attribute", attribute, minimum=0, maximum=len(fields) - 1)
        for i, f in enumerate(fields):
            if not (isinstance(f.mechanism, DiscreteMechanism) and f.mechanism.width == 1):
                raise ValidationError(
                    "mechanism", f"fake clients need discrete fields only (mechanism rr or oracle); field {i} is not"
                )
        k = fields[self.attribute].mechanism.k
        self.state, self.states = self._check_states(state, k)
        if not isinstance(rm.label, DiscreteMechanism):
            raise ValidationError("mechanism", "fake clients need a discrete label mechanism")
        self.label = check_int("label", label, minimum=0, maximum=rm.label.k - 1)

    def _check_states(self, state: Any, k: int) -> tuple[Any, tuple[int, ...]]:
        """``state`` as given (an int, or a sequence of distinct ints: the MGA's target set) and the
        target states as a tuple; only ``"mga*"`` and ``"input"`` take more than one."""
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            return check_int("state", state, minimum=0, maximum=k - 1), (int(state),)
        try:
            if isinstance(state, (str, bytes)):
                raise TypeError
            states = tuple(check_int("state", s, minimum=0, maximum=k - 1) for s in state)
        except TypeError:
            msg = f"must be an integer in [0, {k - 1}] or a sequence of them, got {state!r}"
            raise ValidationError("state", msg) from None
        if not states or len(set(states)) != len(states):
            raise ValidationError("state", f"must list 1 to {k} distinct states in [0, {k - 1}], got {state!r}")
        if len(states) > 1 and self.attack.startswith("output"):
            raise ValidationError(
                "state", f"the {self.attack!r} attack targets one state; 'mga', 'mga-sampled' and 'input' take several"
            )
        return states if len(states) > 1 else states[0], states

    @property
    def _crafts(self):
        """The crafted report of one field toward the target set: the MGA or the single-target output attack."""
        if self.attack.startswith("mga"):
            return mga_release
        return lambda mech, targets, rng: crafted_release(mech, int(targets[0]), rng)

    # --- the population's contract -----------------------------------------------------------
    @property
    def n_clients(self) -> int:
        return self.base.n_clients

    def is_fake(self, client_id: int) -> bool:
        """Whether client i is controlled by the attacker (decided per client from the seed)."""
        return self.fraction > 0 and unit_uniform(self.seed, self.check_client(client_id), "fake") < self.fraction

    def fake_ids(self, client_ids: Any = None) -> np.ndarray:
        """The fake clients among ``client_ids`` (default: all clients)."""
        ids = range(self.n_clients) if client_ids is None else client_ids
        return np.array([int(c) for c in ids if self.is_fake(int(c))], dtype=np.int64)

    def is_present(self, client_id: int) -> bool:
        return self.is_fake(client_id) or self.base.is_present(client_id)

    def record(self, client_id: int) -> tuple[np.ndarray, Any]:
        if self.is_fake(client_id):
            raise ValidationError("client_id", f"client {client_id} is fake: it holds no clean record")
        return self.base.record(client_id)

    def mechanism(self, client_id: int) -> RecordMechanism | PairedRecordMechanism:
        return self.base.mechanism(client_id)

    def test_set(self):
        return self.base.test_set()

    def public_sample(self):
        return self.base.public_sample()

    def release_record(self, client_id: int, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        if not self.is_fake(client_id):
            return self.base.release_record(client_id, rng)
        rm = self.mechanism(client_id)
        if rm.label_in_pairs:
            return self._paired_release(rm, rng)
        if self.attack == "input":
            x = np.array([rng.integers(0, f.mechanism.k) for f in rm.fields], dtype=np.int64)
            x[self.attribute] = self.states[rng.integers(0, len(self.states))]
            xt, yt = rm.release(x[None, :], np.array([self.label]), rng=rng)
            return xt[0], yt[0]
        return self._output_release(rm, rng)

    def _output_release(self, rm: RecordMechanism, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        """The maximal-gain release: attribute j and the label crafted; with attribute sampling j plus
        n_sampled − 1 uniformly drawn fields, released honestly from uniformly drawn states."""
        F, j = len(rm.fields), self.attribute
        if rm.n_sampled is None:
            released = range(F)
        elif self.attack.endswith("-sampled"):  # the honest sampling distribution: j only when drawn
            released = rng.permutation(F)[: rm.n_sampled].tolist()
        else:
            others = rng.permutation(np.delete(np.arange(F), j))[: rm.n_sampled - 1]
            released = [j, *others.tolist()]
        x = np.full(rm.n_features, np.nan)
        for f in released:
            mech, col = rm.fields[f].mechanism, rm.fields[f].columns[0]
            if f == j:
                x[col] = self._crafts(mech, self.states, rng)
            else:
                x[col] = mech.release(np.array([rng.integers(0, mech.k)]), rng)[0]
        if rm.n_sampled is None and all(isinstance(f.mechanism, MatrixMechanism) for f in rm.fields):
            x = x.astype(np.int64)  # an honest release of states only is an integer array
        return x, self._crafts(rm.label, (self.label,), rng)

    def _paired_release(self, rm: PairedRecordMechanism, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """A fake client's paired release (see the module doc): the target pair v* = state·C + label of
        attribute j crafted, or (``"input"``) a fake record with x_j = state, y = label, every other
        attribute uniform, released honestly."""
        F, j, C = rm.n_features, self.attribute, rm.n_classes
        if self.attack == "input":
            x = np.array([rng.integers(0, k) for k in rm.n_states], dtype=np.int64)
            x[j] = self.states[rng.integers(0, len(self.states))]
            xt, yt = rm.release(x[None, :], np.array([self.label]), rng=rng)
            return xt[0], yt[0]
        if self.attack.endswith("-sampled"):  # the honest sampling distribution: j only when drawn
            released = rng.permutation(F)[: rm.n_sampled].tolist()
        else:
            others = rng.permutation(np.delete(np.arange(F), j))[: rm.n_sampled - 1]
            released = [j, *others.tolist()]
        x = np.full(F, np.nan)
        for f in released:
            oracle = rm.oracles[f]
            if f == j:
                x[f] = float(self._crafts(oracle, [s * C + self.label for s in self.states], rng))
            else:
                x[f] = float(oracle.release(np.array([rng.integers(0, oracle.k)]), rng)[0])
        return x, np.nan

    def describe(self) -> dict:
        out = self.base.describe()
        out["fake_clients"] = {
            "fraction": self.fraction,
            "n_fake": int(len(self.fake_ids())),
            "attack": self.attack,
            "attribute": self.attribute,
            "state": list(self.state) if isinstance(self.state, tuple) else self.state,
            "label": self.label,
        }
        return out

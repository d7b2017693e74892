"""What a learner accepts of ``FitData.mechanism`` (one, or one per record) and reads of it: the paired
checks its ``accepts`` and ``fit`` share, the records' clean domain, paired reports decoded, spread's prior."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..errors import ValidationError


def _first(mechanism: Any) -> Any:
    return mechanism[0] if isinstance(mechanism, (list, tuple)) else mechanism


def _mechanisms(mechanism: Any) -> list:
    """The distinct mechanism objects of ``FitData.mechanism`` (one, or one per record)."""
    ms = mechanism if isinstance(mechanism, (list, tuple)) else [mechanism]
    return list({id(m): m for m in ms}.values())


def _has_paired(mechanism: Any) -> bool:
    from ..mechanisms import is_paired

    return any(is_paired(m) for m in _mechanisms(mechanism))


def _refuse_paired(name: str, mechanism: Any, why: str) -> None:
    """A clear error for a learner that cannot use paired releases (instead of a crash inside it)."""
    if _has_paired(mechanism):
        raise ValidationError(
            "learners", f"{name!r} cannot learn from paired releases (mechanism 'paired', PairedRecordMechanism): {why}"
        )


def _one_mechanism(name: str, mechanism: Any) -> None:
    """A clear error for a learner that needs one record mechanism for every client (no budget mix)."""
    if isinstance(mechanism, (list, tuple)) and len(_mechanisms(mechanism)) > 1:
        raise ValidationError("learners", f"{name!r} needs one record mechanism for every client (no budget mix)")


#: why each learner that refuses paired releases does
_PAIRED_WHY = {
    "spread-true": "its prior is a per-feature table of a split release's features",
    "wdro": "its radius bounds the noise of released features, and a pair report is not one",
    "wdro-cv": "it fits on released features and labels, and a paired release has neither",
}


def _no_paired(name: str) -> Callable[[Any], None]:
    return partial(_refuse_paired, name, why=_PAIRED_WHY[name])


def _paired_only(name: str, mechanism: Any) -> None:
    """A learner that reads one paired mechanism's pair tables (``ldp-nb-ldprecover``): paired releases,
    one mechanism for every client."""
    _one_mechanism(name, mechanism)
    if not _has_paired(mechanism):
        raise ValidationError(
            "learners", f"{name!r} needs paired releases (PairedRecordMechanism): it recovers pair tables"
        )


def _paired_one(name: str, mechanism: Any) -> None:
    """Paired releases read by one paired mechanism's tables (``naive``, ``majority``): one for every client."""
    if _has_paired(mechanism) and isinstance(mechanism, (list, tuple)):
        if len({repr(m.to_spec()) for m in _mechanisms(mechanism)}) > 1:
            raise ValidationError(
                "learners", f"{name!r} on paired releases (PairedRecordMechanism) needs one mechanism for every client"
            )


def record_domain(mechanism: Any) -> Any:
    """``mechanism`` (one, or a list) with every record mechanism replaced by its ``domain_record()``
    (shared objects kept shared; a split record mechanism is its own): for code that needs only the
    records' clean domain (the ``clean`` oracle's encoding, LDP-SGD's model in sweeps and in its federation)."""
    made: dict[int, Any] = {}

    def one(m):
        if id(m) not in made:
            made[id(m)] = m.domain_record()
        return made[id(m)]

    return [one(m) for m in mechanism] if isinstance(mechanism, (list, tuple)) else one(mechanism)


def decode_paired(X: Any, mechanism: Any) -> tuple[np.ndarray, np.ndarray]:
    """Paired releases read as clean records (the ``naive`` learner): each pair report's point guess
    v̂ = argmax_v P(report | v) (``decode``; the report itself for randomised response, ties to the
    lowest value for OUE and OLH) gives x̂_j = v̂ // C and ŷ = v̂ mod C; a triple report's gives both
    of its attributes and the label. Returns (X̂ (n, F) with NaN
    where no pair was released, ŷ (n,) int: the label guess of the row's lowest released attribute)."""
    from ..estimators.spread import group_records
    from ..mechanisms import TripleRecordMechanism

    X = np.asarray(X, dtype=float)
    out, y = np.full(X.shape, np.nan), np.full(X.shape[0], -1, dtype=np.int64)
    for pm, rows in group_records(mechanism, X.shape[0]):
        if not pm.label_in_pairs:
            raise ValidationError("mechanism", "decode_paired takes paired mechanisms only (no mix with split ones)")
        Xg, _ = pm.validate_release(X[rows])
        released = ~np.isnan(Xg)
        if isinstance(pm, TripleRecordMechanism):  # v̂ = (x̂_j·k_k + x̂_k)·C + ŷ, in both columns
            for (j, k), o in zip(pm.pairs, pm.oracles):
                r = np.flatnonzero(released[:, j] & released[:, k])
                if r.size:
                    v = o.decode(Xg[r, j])
                    out[rows[r], j] = v // (pm.n_states[k] * pm.n_classes)
                    out[rows[r], k] = (v // pm.n_classes) % pm.n_states[k]
                    y[rows[r]] = v % pm.n_classes
            continue
        for j in range(pm.n_features - 1, -1, -1):  # last write wins: the lowest released attribute's label
            r = np.flatnonzero(released[:, j])
            if r.size:
                v = pm.oracles[j].decode(Xg[r, j])
                out[rows[r], j] = v // pm.n_classes
                y[rows[r]] = v % pm.n_classes
    return out, y


def release_prior(mechanism: Any) -> str:
    """The spread learners' prior: the estimators' ``prior="auto"`` (``auto_prior``), resolved."""
    from ..estimators.spread import auto_prior

    return auto_prior(mechanism)

"""The two kinds of *record* mechanism — what one person releases once: ``RecordMechanism`` (each field,
label included, through its own mechanism; optionally a uniform sample of the attributes) and
``PairedRecordMechanism`` (sampled (attribute, label) pairs, each one value of the product domain).

The pool, the release ledger and the federation rebuild a reply's mechanism from its spec with
``record_mechanism_from_spec``: only these two kinds are accepted, so a reply cannot claim a plain
field mechanism (or any other registered kind) as the mechanism of a whole record."""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ._base import _from_kind
from ._paired import PairedRecordMechanism
from ._record import RecordMechanism

#: the classes of a whole record's mechanism (``isinstance(m, RECORD_MECHANISMS)``)
RECORD_MECHANISMS = (RecordMechanism, PairedRecordMechanism)
#: their spec kinds
RECORD_KINDS = {RecordMechanism.kind: RecordMechanism, PairedRecordMechanism.kind: PairedRecordMechanism}


def is_record_mechanism(m: Any) -> bool:
    """True for a RecordMechanism or a PairedRecordMechanism."""
    return isinstance(m, RECORD_MECHANISMS)


def is_paired(m: Any) -> bool:
    """True for a PairedRecordMechanism (the label travels inside the pair reports; ``y_tilde`` is all NaN)."""
    return isinstance(m, PairedRecordMechanism)


def record_mechanism_from_spec(spec: Any) -> RecordMechanism | PairedRecordMechanism:
    """Rebuild a record mechanism from its ``to_spec()``; a spec of another kind is refused
    (``ValidationError("spec.kind", ...)``). A spec without ``kind`` is read as a RecordMechanism's,
    as pools written before paired releases existed hold only those."""
    if not isinstance(spec, dict):
        raise ValidationError("spec", f"must be a dict (a record mechanism spec), got {type(spec).__name__}")
    kind = spec.get("kind", RecordMechanism.kind)
    unknown = f"must be a record mechanism, one of {sorted(RECORD_KINDS)}, got {kind!r}"
    return _from_kind(RECORD_KINDS, kind, spec, unknown)

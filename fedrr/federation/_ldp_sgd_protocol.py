"""The LDP-SGD wire protocol (Flower Message API) between ``ldp_sgd_server`` and ``ldp_sgd_client``.

* ``query.identify`` -> ConfigRecord "identity": client_id and the client's ε (public, as in the record
  protocol's replies; a dropped-out client answers with an error);
* ``train`` (intercept and gradient rounds) and ``evaluate`` (the check round): ConfigRecord "query"
  (protocol, kind, round) and ArrayRecord "model" (theta, and theta0 for the check). The reply is the
  node's one release in the record protocol's reply format (``protocol.release_content``): x (1, d_q)
  with NaN where not released, y = NaN (no label is released), and as its one "mechanism" a JSON spec
  {"kind": "ldp-sgd", "query", "round", "model" (SHA-256 of the model it answered), "mechanism"}. A node
  replays that release for every later query, so the server drops any reply whose query, round or
  model is not the one it asked (``stale_replay``): it is an old answer, not an answer to this round.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict

from ..errors import ValidationError
from ..gradient_release import KINDS, Query
from ..mechanisms import RecordMechanism
from ..pool import ReplyRejected
from ..release import Release
from ._protocol import META_KEY, RELEASE_KEY

SGD_PROTOCOL = "fedrr-ldp-sgd/1"
IDENTIFY = "query.identify"
QUERY_KEY, MODEL_KEY, IDENTITY_KEY = "query", "model", "identity"


def model_hash(q: Query) -> str:
    h = hashlib.sha256(np.ascontiguousarray(q.theta, dtype=np.float64).tobytes())
    if q.theta0 is not None:
        h.update(np.ascontiguousarray(q.theta0, dtype=np.float64).tobytes())
    return h.hexdigest()


def query_content(q: Query) -> RecordDict:
    arrays = {"theta": Array(np.ascontiguousarray(q.theta, dtype=np.float64))}
    if q.theta0 is not None:
        arrays["theta0"] = Array(np.ascontiguousarray(q.theta0, dtype=np.float64))
    return RecordDict(
        {
            QUERY_KEY: ConfigRecord({"protocol": SGD_PROTOCOL, "kind": q.kind, "round": int(q.round)}),
            MODEL_KEY: ArrayRecord(arrays),
        }
    )


def content_query(content: RecordDict, shape: tuple[int, int]) -> Query:
    """The query a node received, checked: protocol, kind and a finite model of the run's shape."""
    cfg, arrays = content.config_records.get(QUERY_KEY), content.array_records.get(MODEL_KEY)
    if cfg is None or arrays is None or cfg.get("protocol") != SGD_PROTOCOL or cfg.get("kind") not in KINDS:
        raise ValidationError("message", f"expected a {SGD_PROTOCOL!r} query")
    models = []
    for key in ("theta", "theta0") if cfg["kind"] == "check" else ("theta",):
        t = arrays[key].numpy() if key in arrays else None
        if t is None or t.shape != shape or t.dtype.kind != "f" or not np.all(np.isfinite(t)):
            raise ValidationError("message", f"{key} must be a finite float array of shape {shape}")
        models.append(t)
    return Query(str(cfg["kind"]), int(cfg["round"]), models[0], models[1] if len(models) > 1 else None)


def release_of(q: Query, x: np.ndarray, rm: RecordMechanism, client_id: int) -> Release:
    """A node's gradient (or check) release as the one Release its ledger keeps."""
    spec = {"kind": "ldp-sgd", "query": q.kind, "round": q.round, "model": model_hash(q), "mechanism": rm.to_spec()}
    return Release(
        np.asarray(x, float).reshape(1, -1),
        np.array([np.nan]),
        np.array([client_id], np.int64),
        np.zeros(1, np.int64),
        (json.dumps(spec, sort_keys=True),),
    )


def parse_answer(msg: Message, q: Query, client_id: int, expected: RecordMechanism) -> np.ndarray:
    """A reply to query q from the node of ``client_id``, released with the ``expected`` mechanism (the
    run's family at the ε the node announced) -> its release (d_q,), or ReplyRejected."""
    if msg.has_error():
        reason = "dropped_out" if "dropped out" in (msg.error.reason or "") else "error_reply"
        raise ReplyRejected(reason, (msg.error.reason or "")[:200])
    arrays, meta = msg.content.array_records.get(RELEASE_KEY), msg.content.config_records.get(META_KEY)
    try:
        x, cid = arrays["x"].numpy(), arrays["client_id"].numpy()
        spec = json.loads(json.loads(str(meta["mechanisms"]))[0])
        rm = RecordMechanism.from_spec(spec["mechanism"])
    except Exception as exc:  # missing records or keys, undecodable arrays or JSON, unknown mechanisms
        raise ReplyRejected("malformed", f"not an LDP-SGD answer: {str(exc)[:200]}") from None
    if spec.get("kind") != "ldp-sgd" or cid.shape != (1,) or int(cid[0]) != client_id:
        raise ReplyRejected("malformed", "not this node's LDP-SGD answer")
    if (spec.get("query"), spec.get("round"), spec.get("model")) != (q.kind, q.round, model_hash(q)):
        raise ReplyRejected("stale_replay", f"answers {spec.get('query')} round {spec.get('round')}, not this query")
    if rm != expected:
        raise ReplyRejected("unknown_mechanism", f"released with {rm!r}, expected {expected!r}")
    if x.shape != (1, expected.n_features):
        raise ReplyRejected("wrong_shape", f"x must have shape (1, {expected.n_features}), got {x.shape}")
    try:
        expected.validate_release(x)
    except ValidationError as exc:
        raise ReplyRejected("out_of_domain", str(exc)[:200]) from None
    return x[0].astype(float)

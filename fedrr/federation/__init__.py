"""Flower only: fedrr's ClientApp (``client_app.app``) and ServerApp (``server_app.app``), the
wire protocol, the collection round, ``run_federation`` (Flower's simulation runtime from Python)
and ``flwr_cli`` (``flwr run`` with its pitfalls handled). Everything else — mechanisms,
populations, releases, pools, estimators — is Flower-free and lives one level up.

The other modules are private (``_name.py``) and the names below are the public surface. Three
modules keep public paths because they are entry points named from outside Python:
``client_app`` and ``server_app`` (Flower's ``[tool.flwr.app.components]``, ``module:app``) and
``flwr_cli`` (``python -m fedrr.federation.flwr_cli``). The names are imported on first use, so
``import fedrr.federation`` does not import Flower."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

#: public name -> the private module that defines it (imported on first access)
_HOMES = {
    "run_federation": "._run",
    "load_run_config": "._run",
    "backend_config": "._run",
    "collect_releases": "._collect",
    "wait_for_nodes": "._collect",
    "validate_replies": "._collect",
    "ServerSchema": "._collect",
    "PROTOCOL": "._protocol",
    "MESSAGE_TYPE": "._protocol",
    "RELEASE_KEY": "._protocol",
    "META_KEY": "._protocol",
    "query_content": "._protocol",
    "release_content": "._protocol",
    "content_release": "._protocol",
    "parse_reply": "._protocol",
    "create_credentials": "._credentials",
    "public_key_fingerprint": "._credentials",
    "DEFAULT_HOSTS": "._credentials",
    "error_reply": "._compat",
    "ray_kept_up": "._compat",
}

__all__ = [
    "run_federation",
    "load_run_config",
    "backend_config",
    "collect_releases",
    "wait_for_nodes",
    "validate_replies",
    "ServerSchema",
    "PROTOCOL",
    "MESSAGE_TYPE",
    "RELEASE_KEY",
    "META_KEY",
    "query_content",
    "release_content",
    "content_release",
    "parse_reply",
    "create_credentials",
    "public_key_fingerprint",
    "DEFAULT_HOSTS",
    "error_reply",
    "ray_kept_up",
]


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())


if TYPE_CHECKING:  # for static tools (type checkers, the API docs): the same names, eagerly
    from ._collect import ServerSchema, collect_releases, validate_replies, wait_for_nodes
    from ._compat import error_reply, ray_kept_up
    from ._credentials import DEFAULT_HOSTS, create_credentials, public_key_fingerprint
    from ._protocol import (
        MESSAGE_TYPE,
        META_KEY,
        PROTOCOL,
        RELEASE_KEY,
        content_release,
        parse_reply,
        query_content,
        release_content,
    )
    from ._run import backend_config, load_run_config, run_federation

"""Credentials for a deployment (``fedrr credentials``), the TLS connection ``flwr_run`` writes, and
the deployment ledger keyed by the node's credential. Flower's own loaders read what fedrr writes;
a real TLS handshake checks the certificate chain and its names. (The real SuperLink and SuperNodes
with these files: tests/test_federation_deploy.py.)"""

from __future__ import annotations

import shutil
import socket
import ssl
import stat
import subprocess
import threading
from argparse import Namespace

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from fedrr.errors import ValidationError
from fedrr.experiment.cli import main as fedrr_main
from fedrr.federation import create_credentials, public_key_fingerprint
from fedrr.federation.flwr_cli import DEPLOY_CONNECTION, flwr_run, write_connection
from fedrr.federation.flwr_cli import main as flwr_cli_main
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.release import DiskLedger, Release, write_record_file

MECH = RecordMechanism(RandomizedResponse(17, 0.2), RandomizedResponse(2, 0.1), n_features=64)


@pytest.fixture(scope="module")
def creds(tmp_path_factory):
    return create_credentials(tmp_path_factory.mktemp("creds"), 3)


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_files_and_private_key_permissions(creds):
    d = creds.ca_cert.parent
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["ca.crt", "ca.key", "server.crt", "server.key"] + [f"node-{i}.{e}" for i in range(3) for e in ("key", "pub")]
    )
    for p in (creds.ca_key, creds.server_key, *creds.node_keys):
        assert _mode(p) == 0o600, p.name
    for p in (creds.ca_cert, creds.server_cert, *creds.node_public_keys):
        assert _mode(p) == 0o644, p.name


def _handshake(creds, server_name: str, cafile) -> str:
    """A real TLS handshake with server.crt/server.key; returns what the client read."""
    srv_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    srv_ctx.load_cert_chain(creds.server_cert, creds.server_key)
    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]

    def serve():
        conn, _ = lsock.accept()
        try:
            with srv_ctx.wrap_socket(conn, server_side=True) as s:
                s.sendall(b"hello")
        except (ssl.SSLError, OSError):
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        cli_ctx = ssl.create_default_context(cafile=str(cafile))
        cli_ctx.verify_flags |= getattr(ssl, "VERIFY_X509_STRICT", 0)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with cli_ctx.wrap_socket(raw, server_hostname=server_name) as s:
                return s.recv(5).decode()
    finally:
        t.join(timeout=10)
        lsock.close()


def test_server_certificate_verifies_against_the_ca_for_each_host(creds, tmp_path):
    for name in ("127.0.0.1", "localhost"):
        assert _handshake(creds, name, creds.ca_cert) == "hello"
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|doesn't match"):
        _handshake(creds, "example.org", creds.ca_cert)  # not a name the certificate carries
    other = create_credentials(tmp_path / "other", 1)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(creds, "127.0.0.1", other.ca_cert)  # another CA does not vouch for it


def test_node_keys_are_what_flower_reads(creds):
    """Flower 1.41's own loaders: ``flwr supernode register``'s public-key reader and
    ``flower-supernode --auth-supernode-private-key``'s private-key reader."""
    from flwr.cli.supernode.register import try_load_public_key
    from flwr.supercore.primitives.asymmetric import public_key_to_bytes
    from flwr.supernode.cli.flower_supernode import _try_setup_client_authentication

    seen = set()
    for key, pub in zip(creds.node_keys, creds.node_public_keys):
        priv, derived = _try_setup_client_authentication(
            Namespace(auth_supernode_private_key=str(key), auth_supernode_public_key=None)
        )
        assert isinstance(priv.curve, ec.SECP384R1)
        assert try_load_public_key(pub) == public_key_to_bytes(derived)
        assert public_key_fingerprint(pub) == public_key_fingerprint(key)
        seen.add(public_key_fingerprint(pub))
    assert len(seen) == 3


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs ssh-keygen")
def test_fingerprint_is_ssh_keygens(creds):
    out = subprocess.run(["ssh-keygen", "-lf", str(creds.node_public_keys[1])], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == public_key_fingerprint(creds.node_public_keys[1])


def test_fingerprint_of_a_non_key_is_a_validation_error(tmp_path):
    (tmp_path / "x.pub").write_text("not a key")
    with pytest.raises(ValidationError, match="node-public-key: x.pub is not an OpenSSH key"):
        public_key_fingerprint(tmp_path / "x.pub")
    with pytest.raises(ValidationError, match="node-public-key: cannot read"):
        public_key_fingerprint(tmp_path / "missing.pub")


@pytest.mark.parametrize("n", [0, -1, True, 2.0, "3", 100_001])
def test_bad_node_counts(tmp_path, n):
    with pytest.raises(ValidationError, match=r"--nodes: must be an integer in \[1, 100000\]"):
        create_credentials(tmp_path / "c", n)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("hosts", [[], "127.0.0.1", ["bad host"], ["-x.org"], ["a" * 64 + ".org"]])
def test_bad_hosts(tmp_path, hosts):
    with pytest.raises(ValidationError, match="--host"):
        create_credentials(tmp_path / "c", 1, hosts=hosts)


def test_existing_files_need_force_and_force_tightens_permissions(tmp_path):
    c = create_credentials(tmp_path, 1, hosts=["::1", "superlink.example.org"])
    before = c.node_keys[0].read_bytes()
    with pytest.raises(ValidationError, match="already holds ca.crt.*pass --force"):
        create_credentials(tmp_path, 1)
    assert c.node_keys[0].read_bytes() == before  # nothing was touched
    c.node_keys[0].chmod(0o644)
    c2 = create_credentials(tmp_path, 1, force=True)
    assert c2.node_keys[0].read_bytes() != before and _mode(c2.node_keys[0]) == 0o600
    (tmp_path / "file").write_text("")
    with pytest.raises(ValidationError, match="is not a directory"):
        create_credentials(tmp_path / "file", 1)


def test_fedrr_credentials_command(tmp_path, capsys):
    d = tmp_path / "certs"
    assert fedrr_main(["credentials", str(d), "--nodes", "2", "--host", "127.0.0.1"]) == 0
    out = capsys.readouterr().out
    assert "--enable-supernode-auth" in out and "flwr supernode register" in out
    assert (d / "node-1.pub").exists() and not (d / "node-2.pub").exists()
    assert fedrr_main(["credentials", str(d), "--nodes", "2"]) == 2
    assert "fedrr: error: DIR:" in capsys.readouterr().err
    assert fedrr_main(["credentials", str(tmp_path / "x"), "--nodes", "0"]) == 2
    assert "--nodes: must be an integer" in capsys.readouterr().err


# ---------------------------------------------------------------- flwr's TLS connection
def test_tls_connection_is_what_flwr_reads(creds, tmp_path, monkeypatch):
    from flwr.cli.config_utils import load_certificate_in_connection
    from flwr.cli.flower_config import read_superlink_connection

    home = tmp_path / "home"
    monkeypatch.chdir(creds.ca_cert.parent)
    write_connection(home, DEPLOY_CONNECTION, "127.0.0.1:9093", root_certificates="ca.crt")  # relative: made absolute
    monkeypatch.setenv("FLWR_HOME", str(home))
    conn = read_superlink_connection(DEPLOY_CONNECTION)
    assert conn.address == "127.0.0.1:9093" and conn.insecure is False and conn._insecure is None
    assert conn.root_certificates == str(creds.ca_cert)
    assert load_certificate_in_connection(conn) == creds.ca_cert.read_bytes()
    write_connection(home, DEPLOY_CONNECTION, "127.0.0.1:9093")  # the insecure path is still there
    assert read_superlink_connection(DEPLOY_CONNECTION).insecure is True
    with pytest.raises(ValidationError, match="root_certificates: .* is not a file"):
        write_connection(home, DEPLOY_CONNECTION, "127.0.0.1:9093", root_certificates=str(tmp_path / "none.crt"))
    with pytest.raises(ValidationError, match="only for a running SuperLink"):
        flwr_run(tmp_path, root_certificates=creds.ca_cert)
    with pytest.raises(SystemExit) as exc:  # python -m fedrr.federation.flwr_cli
        flwr_cli_main(["--root-certificates", str(creds.ca_cert)])
    assert exc.value.code == 2


# ------------------------------------------------------- one release per credential
def _release(v: int) -> Release:
    return Release(np.full((1, 3), v), np.array([v]), np.array([0]), np.array([0]), ("{}",))


def test_disk_ledger_replays_only_to_the_credential_that_made_it(tmp_path):
    a, b = DiskLedger(tmp_path, credential="SHA256:a"), DiskLedger(tmp_path, credential="SHA256:b")
    assert a.get() is None
    a.put(_release(1))
    raw = a.path.read_bytes()
    assert a.get().x.tolist() == [[1, 1, 1]]
    with pytest.raises(ValidationError, match="ledger-dir: holds the release of another node credential"):
        b.get()
    with pytest.raises(ValidationError, match="made under a node credential, and this node has none"):
        DiskLedger(tmp_path).get()
    assert a.path.read_bytes() == raw
    legacy = tmp_path / "legacy"
    DiskLedger(legacy).put(_release(2))  # written by a node without a credential
    assert DiskLedger(legacy).get().y.tolist() == [2]
    with pytest.raises(ValidationError, match="made without a node credential, and this node has one"):
        DiskLedger(legacy, credential="SHA256:a").get()
    with pytest.raises(ValidationError, match="credential: must be a non-empty string"):
        DiskLedger(tmp_path, credential="")


@pytest.fixture
def _task_identity():
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    if saved[1] is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def test_client_app_started_with_another_key_on_the_same_ledger_refuses(creds, tmp_path, _task_identity):
    """fedrr's ClientApp in deployment mode, called as Flower calls it: the node releases under key
    0; the same ledger-dir under key 1 gets an error reply (a one-line message, no traceback, no
    release) and the ledger is untouched; key 0 again replays its release byte for byte."""
    from flwr.app import Context, Message, RecordDict

    from fedrr.federation import MESSAGE_TYPE, query_content
    from fedrr.federation.client_app import app

    write_record_file(tmp_path / "record.npz", np.arange(64) % 17, 1, MECH, client_id=0)

    def ask(node_public_key):
        cfg = {"ledger-dir": str(tmp_path / "ledger"), "record-file": str(tmp_path / "record.npz")}
        if node_public_key is not None:
            cfg["node-public-key"] = str(node_public_key)
        ctx = Context(run_id=1, node_id=1, node_config=cfg, state=RecordDict(), run_config={})
        return app(Message(content=query_content(), dst_node_id=1, message_type=MESSAGE_TYPE, group_id="g"), ctx)

    def blob(reply):
        arrays = reply.content.array_records["release"]
        return b"".join(arrays[k].numpy().tobytes() for k in ("x", "y", "client_id", "mechanism_index"))

    first = ask(creds.node_public_keys[0])
    assert not first.has_error()
    ledger = (tmp_path / "ledger" / "fedrr-release.npz").read_bytes()
    with np.load(tmp_path / "ledger" / "fedrr-release.npz") as f:
        assert str(f["credential"]) == public_key_fingerprint(creds.node_public_keys[0])
    for other in (creds.node_public_keys[1], creds.node_keys[2], None):
        refused = ask(other)
        assert refused.has_error() and not refused.has_content()
        reason = refused.error.reason
        assert reason.startswith("ValidationError: ledger-dir: holds ") and "(one per credential)" in reason, reason
        assert "Traceback" not in reason and "\n" not in reason and str(tmp_path) not in reason
    assert (tmp_path / "ledger" / "fedrr-release.npz").read_bytes() == ledger
    assert blob(ask(creds.node_keys[0])) == blob(first)  # the private key file names the same credential
    bad = tmp_path / "bad.pub"
    bad.write_bytes(b"ssh-ed25519 garbage")
    reply = ask(bad)
    assert reply.has_error() and "node-public-key: bad.pub is not an OpenSSH key" in reply.error.reason

"""Credentials for a test deployment: a local CA, a TLS certificate for the SuperLink signed by it,
and one authentication key pair per SuperNode in the format Flower 1.41 reads (``fedrr credentials``).

Files written to DIR:
* ``ca.crt``, ``ca.key`` — the CA (SuperLink ``--ssl-ca-certfile``; SuperNodes and ``flwr``
  verify the SuperLink with ``ca.crt``: ``--root-certificates`` / ``root-certificates``);
* ``server.crt``, ``server.key`` — the SuperLink's certificate (``--ssl-certfile``,
  ``--ssl-keyfile``), with every ``--host`` as a subject alternative name (IP or DNS);
* ``node-<i>.key``, ``node-<i>.pub`` for i in [0, N) — SuperNode i's ECDSA P-384 key: the private
  key in OpenSSH format (``flower-supernode --auth-supernode-private-key``, read with
  ``load_ssh_private_key``), the public key in OpenSSH format (``flwr supernode register``, read
  with ``load_ssh_public_key``; the SuperLink learns the allowed keys only that way in 1.41).

Private keys are written 0600. This is a CA for testing on one machine: it has no revocation and
its key sits next to the certificates; a real deployment uses its own PKI."""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import ValidationError

DEFAULT_HOSTS = ("127.0.0.1", "localhost")
MAX_NODES = 100_000
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


@dataclass(frozen=True)
class Credentials:
    """Paths of what ``create_credentials`` wrote."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    node_keys: tuple[Path, ...]  # OpenSSH private keys, 0600
    node_public_keys: tuple[Path, ...]  # OpenSSH public keys


def _san(hosts) -> list[x509.GeneralName]:
    if isinstance(hosts, str) or not list(hosts):
        raise ValidationError("--host", "give at least one host name or IP address the SuperLink is reached at")
    names: list[x509.GeneralName] = []
    for h in hosts:
        h = str(h).strip()
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            if not _DNS.match(h):
                raise ValidationError("--host", f"{h!r} is neither an IP address nor a DNS name") from None
            names.append(x509.DNSName(h.lower()))
    return list(dict.fromkeys(names))


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), 0o600 if private else 0o644)  # also when overwriting a looser file
        fh.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(subject, issuer, public_key, signer, ca: bool, san=None, issuer_key=None, days: int = 365):
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=not ca,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if issuer_key is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key), critical=False)
    if san is not None:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return b.sign(signer, hashes.SHA384())


def create_credentials(
    directory: str | os.PathLike,
    n_nodes: int,
    hosts=DEFAULT_HOSTS,
    force: bool = False,
    days: int = 365,
) -> Credentials:
    """Write a CA, a SuperLink certificate for ``hosts`` and ``n_nodes`` SuperNode key pairs to
    ``directory`` (created if needed). Refuses to overwrite any existing file unless ``force``."""
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, int) or not 1 <= n_nodes <= MAX_NODES:
        raise ValidationError("--nodes", f"must be an integer in [1, {MAX_NODES}], got {n_nodes!r}")
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
        raise ValidationError("days", f"must be an integer in [1, 3650], got {days!r}")
    san = _san(hosts)
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise ValidationError("DIR", f"{d} exists and is not a directory")
    names = ["ca.crt", "ca.key", "server.crt", "server.key"]
    names += [f"node-{i}.{ext}" for i in range(n_nodes) for ext in ("key", "pub")]
    existing = [n for n in names if (d / n).exists()]
    if existing and not force:
        shown = ", ".join(existing[:4]) + (f" and {len(existing) - 4} more" if len(existing) > 4 else "")
        raise ValidationError("DIR", f"{d} already holds {shown}; pass --force to overwrite")
    d.mkdir(parents=True, exist_ok=True)

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedrr test deployment CA")])
    ca_cert = _cert(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True, days=days)
    server_key = ec.generate_private_key(ec.SECP384R1())
    cn = str(san[0].value)
    server_cert = _cert(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]),
        ca_name,
        server_key.public_key(),
        ca_key,
        ca=False,
        san=san,
        issuer_key=ca_key.public_key(),
        days=days,
    )
    _write(d / "ca.key", _pem_key(ca_key), private=True)
    _write(d / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    _write(d / "server.key", _pem_key(server_key), private=True)
    _write(d / "server.crt", server_cert.public_bytes(serialization.Encoding.PEM), private=False)
    keys, pubs = [], []
    for i in range(n_nodes):
        key = ec.generate_private_key(ec.SECP384R1())  # what flwr's own generate_key_pairs uses
        private = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        _write(d / f"node-{i}.key", private, private=True)
        _write(d / f"node-{i}.pub", public + f" fedrr-node-{i}\n".encode(), private=False)
        keys.append(d / f"node-{i}.key")
        pubs.append(d / f"node-{i}.pub")
    return Credentials(d / "ca.crt", d / "ca.key", d / "server.crt", d / "server.key", tuple(keys), tuple(pubs))


def public_key_fingerprint(path: str | os.PathLike) -> str:
    """``SHA256:<base64>`` of a SuperNode's public key, as ``ssh-keygen -lf`` prints it. ``path`` is
    the OpenSSH public key (``node-<i>.pub``) or the OpenSSH private key it belongs to."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ValidationError("node-public-key", f"cannot read {p.name}: {exc.strerror}") from None
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            key = serialization.load_ssh_private_key(data, None).public_key()
        else:
            key = serialization.load_ssh_public_key(data.strip())
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ValidationError("node-public-key", f"{p.name} is not an OpenSSH key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValidationError("node-public-key", f"{p.name} is not an EC key (Flower's node keys are ECDSA)")
    blob = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).split()[1]
    digest = hashlib.sha256(base64.b64decode(blob)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")

"""Certificates and keys of one API server: CA, serving certificate, client certificates, kubeconfigs."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=3650)


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys are generated in microseconds (RSA takes tens of milliseconds), which matters with
    # hundreds of tenants; every Kubernetes client accepts them.
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("only EC private keys are supported")
    return key


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA that signs the serving certificate and client certificates of one tenant."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def create(cls, common_name: str) -> CertificateAuthority:
        key = _new_key()
        now = dt.datetime.now(dt.UTC)
        name = _name(common_name)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> tuple[bytes, bytes]:
        ca_key = load_key(self.key_pem)
        ca_cert = self.certificate
        key = _new_key()
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), key_pem(key)

    def issue_serving(
        self, hosts: Sequence[str] = ("127.0.0.1", "localhost"), common_name: str = "kube-apiserver"
    ) -> tuple[bytes, bytes]:
        """A serving certificate (PEM cert, PEM key) whose SANs cover `hosts` (IPs or DNS names)."""
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        return self._issue(_name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def issue_client(self, user: str, groups: Sequence[str] = ()) -> tuple[bytes, bytes]:
        """A client certificate: CN is the user name and each O a group, as kube-apiserver reads them."""
        return self._issue(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


SERVING_HOSTS = (
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class ServerPKI:
    """Everything secret an API server needs; persisted by its owner so a restart keeps credentials."""

    ca: CertificateAuthority
    serving_cert_pem: bytes
    serving_key_pem: bytes
    service_account_key_pem: bytes

    @classmethod
    def create(cls, name: str, hosts: Sequence[str] = SERVING_HOSTS) -> ServerPKI:
        ca = CertificateAuthority.create(f"{name}-ca")
        cert, key = ca.issue_serving(hosts)
        return cls(ca, cert, key, key_pem(_new_key()))

    _FILES = ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key")

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        contents = (
            self.ca.cert_pem,
            self.ca.key_pem,
            self.serving_cert_pem,
            self.serving_key_pem,
            self.service_account_key_pem,
        )
        for file, content in zip(self._FILES, contents, strict=True):
            path = directory / file
            path.write_bytes(content)
            path.chmod(0o600)

    @classmethod
    def load(cls, directory: Path) -> ServerPKI:
        ca_crt, ca_key, crt, key, sa = (directory / f for f in cls._FILES)
        return cls(
            CertificateAuthority(ca_crt.read_bytes(), ca_key.read_bytes()),
            crt.read_bytes(),
            key.read_bytes(),
            sa.read_bytes(),
        )

    @classmethod
    def load_or_create(cls, directory: Path, name: str) -> ServerPKI:
        if (directory / "ca.crt").exists():
            return cls.load(directory)
        pki = cls.create(name)
        pki.save(directory)
        return pki


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def render_kubeconfig(
    cluster: str,
    server_url: str,
    ca_pem: bytes,
    user: str,
    *,
    client_cert_pem: bytes | None = None,
    client_key_pem: bytes | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> str:
    """A kubeconfig (YAML) with one cluster, one user (client certificate or token) and one context."""
    credentials: dict[str, str] = {}
    if client_cert_pem is not None and client_key_pem is not None:
        credentials["client-certificate-data"] = _b64(client_cert_pem)
        credentials["client-key-data"] = _b64(client_key_pem)
    if token is not None:
        credentials["token"] = token
    context = f"{user}@{cluster}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server_url, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {"name": context, "context": {"cluster": cluster, "user": user, "namespace": namespace}}
        ],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def admin_kubeconfig(
    cluster: str, server_url: str, ca: CertificateAuthority, user: str = "kubernetes-admin"
) -> str:
    """A kubeconfig for a `system:masters` user, like Kamaji's `admin.conf`."""
    cert, key = ca.issue_client(user, ["system:masters"])
    return render_kubeconfig(cluster, server_url, ca.cert_pem, user, client_cert_pem=cert, client_key_pem=key)

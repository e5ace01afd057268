"""A tenant's public-key infrastructure: its own CA, the API server's serving certificate, the admin client
certificate and the service-account signing key, with the Secret encoding Kamaji uses to keep them."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# kubeadm's file names, which Kamaji reuses as the keys of its certificate Secrets.
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
APISERVER_CERT_KEY = "apiserver.crt"
APISERVER_KEY_KEY = "apiserver.key"
SA_PUBLIC_KEY = "sa.pub"
SA_PRIVATE_KEY = "sa.key"

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUP = "system:masters"

_CA_VALIDITY = dt.timedelta(days=3650)
_LEAF_VALIDITY = dt.timedelta(days=365)
# Backdate so a certificate is valid at once even if clocks of a client and the lab differ a little.
_BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate (or a bare public key) and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256 rather than RSA: minting is ~1 ms instead of ~100 ms, which is what lets a tenant be Ready fast.
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def generate_ca(common_name: str = "kubernetes") -> KeyPair:
    """A self-signed certificate authority, as `kubeadm init phase certs ca` makes."""
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _issue(
    ca: KeyPair,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None = None,
) -> KeyPair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _LEAF_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_serving_certificate(
    ca: KeyPair, common_name: str, *, ips: list[str], dns_names: list[str]
) -> KeyPair:
    """A server certificate whose SANs cover every address clients use (kubectl checks `IP:127.0.0.1`)."""
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    return _issue(ca, _name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, sans)


def issue_client_certificate(ca: KeyPair, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
    """A client certificate: the API server takes the user from CN and the groups from O."""
    return _issue(ca, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def generate_signing_key() -> KeyPair:
    """The service-account token signing key pair (`sa.key` / `sa.pub`); `cert_pem` holds the public key."""
    key = _new_key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public, _key_pem(key))


def certificate_subject(cert_pem: bytes) -> tuple[str, tuple[str, ...]]:
    """The (CN, O…) of a certificate: what the API server will see as user and groups."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cn[0].value) if cn else "", tuple(str(o.value) for o in orgs))


def is_signed_by(cert_pem: bytes, ca: KeyPair) -> bool:
    """Whether `cert_pem` was issued by `ca` (its signature verifies with the CA's key)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def b64(data: bytes) -> str:
    """Secret `data` values are base64 text."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))

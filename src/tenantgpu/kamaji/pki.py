"""A tenant's public-key infrastructure as Kamaji keeps it in Secrets: kubeadm's key names, the signing key,
and key pairs minted by the API server's `CertificateAuthority` (one implementation of CA and issuing)."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tenantgpu.apiserver.pki import CertificateAuthority, key_pem

# kubeadm's file names, which Kamaji reuses as the keys of its certificate Secrets.
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
APISERVER_CERT_KEY = "apiserver.crt"
APISERVER_KEY_KEY = "apiserver.key"
APISERVER_KUBELET_CLIENT_CERT_KEY = "apiserver-kubelet-client.crt"
APISERVER_KUBELET_CLIENT_KEY_KEY = "apiserver-kubelet-client.key"
SA_PUBLIC_KEY = "sa.pub"
SA_PRIVATE_KEY = "sa.key"

ADMIN_USER = "kubernetes-admin"
ADMIN_GROUP = "system:masters"
# kubeadm's apiserver-kubelet-client certificate (certlist.go), which Kamaji issues with kubeadm's code
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
KUBELET_CLIENT_GROUP = "kubeadm:cluster-admins"


@dataclass(frozen=True)
class KeyPair:
    """A certificate (or a bare public key) and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes


def _authority(ca: KeyPair) -> CertificateAuthority:
    return CertificateAuthority(ca.cert_pem, ca.key_pem)


def generate_ca(common_name: str = "kubernetes") -> KeyPair:
    """A self-signed certificate authority for one tenant (the API server's own CA type)."""
    ca = CertificateAuthority.create(common_name)
    return KeyPair(ca.cert_pem, ca.key_pem)


def issue_serving_certificate(
    ca: KeyPair, common_name: str, *, ips: list[str], dns_names: list[str]
) -> KeyPair:
    """A server certificate whose SANs cover every address clients use (kubectl checks `IP:127.0.0.1`)."""
    cert, key = _authority(ca).issue_serving([*dns_names, *ips], common_name)
    return KeyPair(cert, key)


def issue_client_certificate(ca: KeyPair, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
    """A client certificate: the API server takes the user from CN and the groups from O."""
    cert, key = _authority(ca).issue_client(user, groups)
    return KeyPair(cert, key)


def generate_signing_key() -> KeyPair:
    """The service-account token signing key pair (`sa.key` / `sa.pub`); `cert_pem` holds the public key."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(public, key_pem(key))


def certificate_subject(cert_pem: bytes) -> tuple[str, tuple[str, ...]]:
    """The (CN, O…) of a certificate: what the API server will see as user and groups."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cn[0].value) if cn else "", tuple(str(o.value) for o in orgs))


def is_signed_by(cert_pem: bytes, ca: KeyPair) -> bool:
    """Whether `cert_pem` was issued by `ca` (its signature verifies with the CA's key)."""
    return issued_by(cert_pem, ca.cert_pem)


def issued_by(cert_pem: bytes, ca_cert_pem: bytes) -> bool:
    """Whether `cert_pem` was issued by the CA whose certificate is `ca_cert_pem`."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
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

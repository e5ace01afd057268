"""The kubelet's TLS bootstrap: its client certificate as `system:node:<name>`, asked for with a
CertificateSigningRequest and kept in its certificate directory.

Facts from Kubernetes 1.33, pkg/kubelet/certificate/bootstrap/bootstrap.go: the kubelet makes an ECDSA
P-256 key, a request with subject `CN=system:node:<name>, O=system:nodes` and no SANs, usages `digital
signature` and `client auth` (`key encipherment` only for an RSA key), signer
`kubernetes.io/kube-apiserver-client-kubelet`, named `node-csr-<digest>` (SHA-512/256 over the base64url
of the public key, the common name, each organization and each usage, each followed by `|`; the digest
in unpadded base64url) so a retried bootstrap finds its own request. It waits for the certificate (an
hour at most), and a Denied or Failed request is an error. It keeps key and certificate in one PEM file,
`kubelet-client-current.pem`, and uses it while it is valid. The credentials it asks with are the
bootstrap kubeconfig's (kubeadm's bootstrap token); in the lab the tenant's admin joins the workers.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tenantgpu.kamaji import pki
from tenantgpu.kubeclient import ApiError, KubeClient

SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
USAGES = ("digital signature", "client auth")
NODES_GROUP = "system:nodes"
CURRENT_FILE = "kubelet-client-current.pem"
WAIT_SECONDS = 3600.0
# A certificate this close to its end is asked for again rather than used.
RENEW_MARGIN = timedelta(hours=1)


class BootstrapError(Exception):
    """The request was denied or failed, or no certificate came."""


def node_user(node_name: str) -> str:
    return f"system:node:{node_name}"


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def digested_name(public_key: ec.EllipticCurvePublicKey, common_name: str, organizations: list[str]) -> str:
    """The request's name, stable for one key and subject: a retry finds the request it made."""
    digest = hashlib.new("sha512_256")
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    for part in (
        der,
        common_name.encode(),
        *(o.encode() for o in organizations),
        *(u.encode() for u in USAGES),
    ):
        digest.update(_encode(part).encode())
        digest.update(b"|")
    return f"node-csr-{_encode(digest.digest())}"


def certificate_request(node_name: str) -> tuple[bytes, dict[str, object]]:
    """A fresh key (PEM) and the CertificateSigningRequest object asking for its certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
            x509.NameAttribute(NameOID.COMMON_NAME, node_user(node_name)),
        ]
    )
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    body: dict[str, object] = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": digested_name(key.public_key(), node_user(node_name), [NODES_GROUP])},
        "spec": {
            "request": base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode(),
            "signerName": SIGNER,
            "usages": list(USAGES),
        },
    }
    return key_pem, body


def usable_certificate(pem: bytes, node_name: str, ca_pem: bytes | None, now: datetime | None = None) -> bool:
    """Whether a kept certificate still serves: this node's, issued by the cluster's CA, not near its end."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        serialization.load_pem_private_key(pem, password=None)
    except ValueError:
        return False
    if pki.certificate_subject(pem)[0] != node_user(node_name):
        return False
    if ca_pem is not None and not pki.issued_by(pem, ca_pem):  # another cluster's CA: bootstrap again
        return False
    return cert.not_valid_after_utc - RENEW_MARGIN > (now or datetime.now(UTC))


async def request_certificate(client: KubeClient, node_name: str, timeout: float = WAIT_SECONDS) -> bytes:
    """Ask for this node's client certificate and wait for it; returns certificate and key in one PEM."""
    key_pem, body = certificate_request(node_name)
    name = str(body["metadata"]["name"])  # type: ignore[index]
    try:
        await client.create("certificatesigningrequests", body)
    except ApiError as err:
        if err.reason != "AlreadyExists":  # the same key and subject: our own earlier request
            raise
    async with asyncio.timeout(timeout):
        while True:
            csr = await client.get("certificatesigningrequests", name)
            if (found := _outcome(csr)) is not None:
                return found + key_pem
            with contextlib.suppress(ApiError, OSError, asyncio.IncompleteReadError):
                async for event in client.watch(
                    "certificatesigningrequests",
                    field_selector=f"metadata.name={name}",
                    resource_version=csr["metadata"].get("resourceVersion"),
                    timeout_seconds=60,
                ):
                    if event.type in ("ADDED", "MODIFIED") and (found := _outcome(event.object)) is not None:
                        return found + key_pem


def _outcome(csr: dict) -> bytes | None:
    status = csr.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") in ("Denied", "Failed") and condition.get("status", "True") == "True":
            raise BootstrapError(
                f"certificate request {csr['metadata']['name']} {condition['type'].lower()}: "
                f"{condition.get('reason', '')} {condition.get('message', '')}".rstrip()
            )
    encoded = status.get("certificate")
    return base64.b64decode(encoded) if encoded else None


def kept_certificate(directory: Path, node_name: str, ca_pem: bytes | None) -> bytes | None:
    """The certificate and key the kubelet kept in `directory`, while they still serve."""
    with contextlib.suppress(OSError):
        kept = (directory / CURRENT_FILE).read_bytes()
        if usable_certificate(kept, node_name, ca_pem):
            return kept
    return None


def keep_certificate(directory: Path, pem: bytes) -> None:
    """Store certificate and key for the next start, private to the lab's user, replaced atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    current = directory / CURRENT_FILE
    partial = current.with_suffix(".tmp")
    partial.write_bytes(pem)
    partial.chmod(0o600)
    partial.replace(current)

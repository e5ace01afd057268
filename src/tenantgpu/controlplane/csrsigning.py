"""kube-controller-manager's certificate duties: the csrsigning controller, which signs approved
CertificateSigningRequests of the kubernetes.io signers with the cluster CA, and the CSR cleaner.

Facts from Kubernetes 1.33: pkg/controller/certificates/signer/signer.go (the four signers one
`--cluster-signing-{cert,key}-file` pair serves, each signer's checks of the request, the
`Failed`/`SignerValidationFailure` condition, the duration: `--cluster-signing-duration` (8760h) capped,
`spec.expirationSeconds` honoured below it with a 10-minute floor), authority/{authority,policies}.go
(subject and SANs from the request, usages to key usages and extended key usages, 5 minutes of
backdating, taken off the end of durations of 8 h and more, never past the CA's own expiry),
pkg/apis/certificates/helpers.go (the kubelet signers' rules) and cleaner/cleaner.go (hourly: issued or
denied or failed for an hour, pending for a day, or issued and expired, the request goes). Neither
records events.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tenantgpu.apiserver.certificates import (
    APPROVED,
    DENIED,
    FAILED,
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
    LEGACY_UNKNOWN,
    conditions,
    decode_bytes,
    parse_request,
    pem_blocks,
)
from tenantgpu.apiserver.tables import parse_timestamp
from tenantgpu.controlplane.certificatecontroller import CertificateController
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

CLUSTER_SIGNING_DURATION = timedelta(hours=8760)
BACKDATE = timedelta(minutes=5)
SHORT = timedelta(hours=8)
MIN_DURATION = timedelta(minutes=10)
SIGNERS = (KUBELET_SERVING, KUBE_APISERVER_CLIENT_KUBELET, KUBE_APISERVER_CLIENT, LEGACY_UNKNOWN)

# --- what a signer accepts -------------------------------------------------------------------------


def _organizations(request: x509.CertificateSigningRequest) -> list[str]:
    return [str(a.value) for a in request.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def request_common_name(request: x509.CertificateSigningRequest) -> str:
    found = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(found[0].value) if found else ""


def _sans(request: x509.CertificateSigningRequest) -> x509.SubjectAlternativeName | None:
    with contextlib.suppress(x509.ExtensionNotFound):
        return request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return None


def _san_count(sans: x509.SubjectAlternativeName | None, kind: type[x509.GeneralName]) -> int:
    return 0 if sans is None else len(sans.get_values_for_type(kind))  # type: ignore[arg-type]


def _go_list(values: Sequence[str]) -> str:
    return "[" + " ".join(sorted(values)) + "]"


_KUBELET_SERVING = frozenset({"digital signature", "key encipherment", "server auth"})
_KUBELET_CLIENT = frozenset({"digital signature", "key encipherment", "client auth"})


def _kubelet_serving_error(request: x509.CertificateSigningRequest, usages: set[str]) -> str | None:
    sans = _sans(request)
    if _organizations(request) != ["system:nodes"]:
        return "subject organization is not system:nodes"
    if not _san_count(sans, x509.DNSName) and not _san_count(sans, x509.IPAddress):
        return "DNS or IP subjectAltName is required"
    if _san_count(sans, x509.RFC822Name):
        return "Email subjectAltNames are not allowed"
    if _san_count(sans, x509.UniformResourceIdentifier):
        return "URI subjectAltNames are not allowed"
    if usages not in (_KUBELET_SERVING, _KUBELET_SERVING - {"key encipherment"}):
        return f"usages did not match {_go_list(list(_KUBELET_SERVING))}"
    if not request_common_name(request).startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    return None


def kubelet_client_error(request: x509.CertificateSigningRequest, usages: set[str]) -> str | None:
    sans = _sans(request)
    if _organizations(request) != ["system:nodes"]:
        return "subject organization is not system:nodes"
    for kind, what in (
        (x509.DNSName, "DNS"),
        (x509.RFC822Name, "Email"),
        (x509.IPAddress, "IP"),
        (x509.UniformResourceIdentifier, "URI"),
    ):
        if _san_count(sans, kind):
            return f"{what} subjectAltNames are not allowed"
    if not request_common_name(request).startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    if usages not in (_KUBELET_CLIENT, _KUBELET_CLIENT - {"key encipherment"}):
        return f"usages did not match {_go_list(list(_KUBELET_CLIENT))}"
    return None


def _client_usages_error(usages: Sequence[str]) -> str | None:
    client_auth = False
    for usage in usages:
        if usage == "client auth":
            client_auth = True
        elif usage not in ("digital signature", "key encipherment"):
            return f"invalid usage for client certificate: {usage}"
    return None if client_auth else "missing required usage for client certificate: client auth"


def signer_error(signer: str, request: x509.CertificateSigningRequest, usages: Sequence[str]) -> str | None:
    """Why the signer refuses a request it recognizes (the message of its `Failed` condition), or None."""
    if signer == KUBELET_SERVING:
        return _kubelet_serving_error(request, set(usages))
    if signer == KUBE_APISERVER_CLIENT_KUBELET:
        return kubelet_client_error(request, set(usages))
    if signer == KUBE_APISERVER_CLIENT:
        return _client_usages_error(usages)
    return None  # legacy-unknown: no restrictions


# --- the certificate -------------------------------------------------------------------------------


def certificate_duration(
    expiration_seconds: int | None, maximum: timedelta = CLUSTER_SIGNING_DURATION
) -> timedelta:
    """The requested duration, at most the cluster's, at least 10 minutes; the cluster's if none asked."""
    if expiration_seconds is None:
        return maximum
    requested = timedelta(seconds=expiration_seconds)
    return maximum if requested > maximum else max(requested, MIN_DURATION)


def validity(now: datetime, duration: timedelta, ca_not_after: datetime) -> tuple[datetime, datetime]:
    """notBefore and notAfter: backdated 5 minutes, the backdate taken off the end of long durations,
    never past the CA's expiry."""
    not_before = now - BACKDATE
    not_after = now + duration if duration < SHORT else now + duration - BACKDATE
    if not_after >= ca_not_after:
        not_after = ca_not_after
    if not_before >= ca_not_after:
        raise ValueError(f"the signer has expired: NotAfter={ca_not_after}")
    if now >= ca_not_after:
        raise ValueError(f"refusing to sign a certificate that expired in the past: NotAfter={ca_not_after}")
    return not_before, not_after


_KEY_USAGE_BITS = {
    "signing": "digital_signature",
    "digital signature": "digital_signature",
    "content commitment": "content_commitment",
    "key encipherment": "key_encipherment",
    "key agreement": "key_agreement",
    "data encipherment": "data_encipherment",
    "cert sign": "key_cert_sign",
    "crl sign": "crl_sign",
    "encipher only": "encipher_only",
    "decipher only": "decipher_only",
}
# In Go's ExtKeyUsage order, which kube sorts them by.
_EXTENDED = {
    "any": (0, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE),
    "server auth": (1, ExtendedKeyUsageOID.SERVER_AUTH),
    "client auth": (2, ExtendedKeyUsageOID.CLIENT_AUTH),
    "code signing": (3, ExtendedKeyUsageOID.CODE_SIGNING),
    "email protection": (4, ExtendedKeyUsageOID.EMAIL_PROTECTION),
    "s/mime": (4, ExtendedKeyUsageOID.EMAIL_PROTECTION),
    "ipsec end system": (5, x509.ObjectIdentifier("1.3.6.1.5.5.7.3.5")),
    "ipsec tunnel": (6, x509.ObjectIdentifier("1.3.6.1.5.5.7.3.6")),
    "ipsec user": (7, x509.ObjectIdentifier("1.3.6.1.5.5.7.3.7")),
    "timestamping": (8, ExtendedKeyUsageOID.TIME_STAMPING),
    "ocsp signing": (9, ExtendedKeyUsageOID.OCSP_SIGNING),
    "microsoft sgc": (10, x509.ObjectIdentifier("1.3.6.1.4.1.311.10.3.3")),
    "netscape sgc": (11, x509.ObjectIdentifier("2.16.840.1.113730.4.1")),
}


def _key_usages(usages: Sequence[str]) -> tuple[x509.KeyUsage | None, list[x509.ObjectIdentifier]]:
    unknown = [u for u in usages if u not in _KEY_USAGE_BITS and u not in _EXTENDED]
    if unknown:
        raise ValueError("unrecognized usage values: [" + " ".join(f'"{u}"' for u in unknown) + "]")
    bits = {_KEY_USAGE_BITS[u] for u in usages if u in _KEY_USAGE_BITS}
    key_usage = None
    if bits:
        flags = {name: name in bits for name in set(_KEY_USAGE_BITS.values())}
        # cryptography asks for encipher_only/decipher_only only with key_agreement, as X.509 defines them
        if not flags["key_agreement"]:
            flags["encipher_only"] = flags["decipher_only"] = False
        key_usage = x509.KeyUsage(**flags)
    extended = sorted({_EXTENDED[u] for u in usages if u in _EXTENDED}, key=lambda item: item[0])
    return key_usage, [oid for _, oid in extended]


def sign_request(
    request: x509.CertificateSigningRequest,
    usages: Sequence[str],
    expiration_seconds: int | None,
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    *,
    maximum: timedelta = CLUSTER_SIGNING_DURATION,
    now: datetime | None = None,
) -> bytes:
    """The PEM certificate the CA issues for `request`: its subject and subjectAltNames, the usages
    asked for, not a CA, a random 128-bit serial."""
    if not request.is_signature_valid:
        raise ValueError("unable to verify certificate request signature")
    ca = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    moment = now or datetime.now(UTC)
    not_before, not_after = validity(
        moment, certificate_duration(expiration_seconds, maximum), ca.not_valid_after_utc
    )
    key_usage, extended = _key_usages(usages)
    builder = (
        x509.CertificateBuilder()
        .subject_name(request.subject)
        .issuer_name(ca.subject)
        .public_key(request.public_key())  # type: ignore[arg-type]
        .serial_number(secrets.randbits(128) or 1)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if key_usage is not None:
        builder = builder.add_extension(key_usage, critical=True)
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    with contextlib.suppress(x509.ExtensionNotFound):
        ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
    sans = _sans(request)
    if sans is not None and len(sans):
        builder = builder.add_extension(sans, critical=False)
    digest = (
        None if isinstance(ca_key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey) else hashes.SHA256()
    )
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey):
        raise ValueError("the CA's key cannot sign certificates")
    certificate = builder.sign(ca_key, digest)
    return certificate.public_bytes(serialization.Encoding.PEM)


# --- the controller --------------------------------------------------------------------------------


def _approved(csr: dict[str, Any]) -> bool:
    """IsCertificateRequestApproved and not Failed: Approved and not Denied, no Failed condition that is
    True (or has no status)."""
    types = [c.get("type") for c in conditions(csr)]
    failed = any(c.get("type") == FAILED and c.get("status") in (None, "", "True") for c in conditions(csr))
    return APPROVED in types and DENIED not in types and not failed


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CSRSigningController(CertificateController):
    """Signs every approved request for one of the kubernetes.io signers with the cluster CA, or marks it
    `Failed` (reason SignerValidationFailure) when the signer refuses it."""

    def __init__(
        self,
        client: KubeClient,
        *,
        ca_cert_pem: bytes,
        ca_key_pem: bytes,
        duration: timedelta = CLUSTER_SIGNING_DURATION,
        requests: Informer | None = None,
    ) -> None:
        super().__init__(client, requests)
        self.ca_cert_pem = ca_cert_pem
        self.ca_key_pem = ca_key_pem
        self.duration = duration

    def decide(self, csr: dict[str, Any]) -> tuple[str, str | bytes]:
        """("skip", why), ("fail", message) or ("sign", PEM certificate) for one request."""
        status, spec = csr.get("status") or {}, csr.get("spec") or {}
        if status.get("certificate"):
            return "skip", "issued"
        if not _approved(csr):
            return "skip", "not approved"
        signer = spec.get("signerName")
        if signer not in SIGNERS:
            return "skip", "another signer's"
        try:
            request = parse_request(decode_bytes(spec.get("request")) or b"")
        except ValueError as exc:
            return "skip", f"unable to parse csr: {exc}"
        usages = [str(u) for u in spec.get("usages") or []]
        why = signer_error(signer, request, usages)
        if why is not None:
            return "fail", why
        seconds = spec.get("expirationSeconds")
        pem = sign_request(
            request,
            usages,
            seconds if isinstance(seconds, int) else None,
            self.ca_cert_pem,
            self.ca_key_pem,
            maximum=self.duration,
        )
        return "sign", pem

    async def handle(self, csr: dict[str, Any]) -> None:
        try:
            verdict, result = self.decide(csr)
        except ValueError:
            log.exception("error auto signing csr %s", (csr.get("metadata") or {}).get("name"))
            return
        if verdict == "skip":
            return
        body = {**csr, "status": dict(csr.get("status") or {})}
        if verdict == "fail":
            body["status"]["conditions"] = [
                *conditions(csr),
                {
                    "type": FAILED,
                    "status": "True",
                    "reason": "SignerValidationFailure",
                    "message": str(result),
                    "lastUpdateTime": _now_rfc3339(),
                },
            ]
        else:
            assert isinstance(result, bytes)
            body["status"]["certificate"] = base64.b64encode(result).decode()
        with contextlib.suppress(ApiError):  # a newer version, or the request is gone: the watch tells
            await self.client.update_status("certificatesigningrequests", body)


# --- the cleaner -----------------------------------------------------------------------------------

POLLING_INTERVAL = 3600.0
APPROVED_EXPIRATION = timedelta(hours=1)
DENIED_EXPIRATION = timedelta(hours=1)
PENDING_EXPIRATION = timedelta(hours=24)


def _older_than(value: Any, age: timedelta, now: datetime) -> bool:
    moment = parse_timestamp(value)
    return moment is not None and now - moment > age


def _expired(csr: dict[str, Any], now: datetime) -> bool:
    pem = decode_bytes((csr.get("status") or {}).get("certificate"))
    blocks = pem_blocks(pem or b"")
    if not blocks or blocks[0][2] is None:
        return False
    try:
        certificate = x509.load_der_x509_certificate(blocks[0][2])
    except ValueError:
        return False
    return now > certificate.not_valid_after_utc


def cleanup_reason(csr: dict[str, Any], now: datetime) -> str | None:
    """Why the cleaner deletes the request now, or None: issued and approved an hour ago, denied or
    failed an hour ago (by the condition's lastUpdateTime), pending (no condition at all) for a day
    since its creation, or issued with a certificate that has expired."""
    issued = bool((csr.get("status") or {}).get("certificate"))
    listed = conditions(csr)
    for condition in listed:
        kind, updated = condition.get("type"), condition.get("lastUpdateTime")
        if kind == APPROVED and issued and _older_than(updated, APPROVED_EXPIRATION, now):
            return "approved"
    for condition in listed:
        if condition.get("type") == DENIED and _older_than(
            condition.get("lastUpdateTime"), DENIED_EXPIRATION, now
        ):
            return "denied"
    for condition in listed:
        if condition.get("type") == FAILED and _older_than(
            condition.get("lastUpdateTime"), DENIED_EXPIRATION, now
        ):
            return "failed"
    created = (csr.get("metadata") or {}).get("creationTimestamp")
    if not listed and _older_than(created, PENDING_EXPIRATION, now):
        return "pending"
    if issued and any(c.get("type") == APPROVED for c in listed) and _expired(csr, now):
        return "expired"
    return None


class CSRCleaner:
    """Every hour (and once at start), deletes the requests `cleanup_reason` names."""

    def __init__(self, client: KubeClient, *, requests: Informer, interval: float = POLLING_INTERVAL) -> None:
        self.client = client
        self.requests = requests
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.requests.start()
        self._task = asyncio.create_task(self._run(), name="csr-cleaner")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self.sweep()
            await asyncio.sleep(self.interval)

    async def sweep(self, now: datetime | None = None) -> list[str]:
        moment = now or datetime.now(UTC)
        removed = []
        for csr in self.requests.items():
            reason = cleanup_reason(csr, moment)
            if reason is None:
                continue
            name = csr["metadata"]["name"]
            log.info("cleaning CSR %s (%s)", name, reason)
            with contextlib.suppress(ApiError):
                await self.client.delete("certificatesigningrequests", name)
                removed.append(name)
        return removed

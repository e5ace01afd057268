"""kube-controller-manager's csrsigning controller (what it signs and how) and the CSR cleaner's timing."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.controlplane.csrsigning import (
    CSRSigningController,
    certificate_duration,
    cleanup_reason,
    sign_request,
)

CA = CertificateAuthority.create("tenant-a")
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _request(
    common_name: str, organizations: tuple[str, ...] = (), dns: tuple[str, ...] = ()
) -> x509.CertificateSigningRequest:
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), False)
    return builder.sign(key, hashes.SHA256())


def _sign(
    request: x509.CertificateSigningRequest, usages: list[str], seconds: int | None = None
) -> x509.Certificate:
    pem = sign_request(request, usages, seconds, CA.cert_pem, CA.key_pem, now=NOW)
    return x509.load_pem_x509_certificate(pem)


def test_the_certificate_carries_the_requested_subject_and_usages() -> None:
    cert = _sign(_request("alice", ("dev", "qa")), ["digital signature", "key encipherment", "client auth"])
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["dev", "qa"]
    assert cert.issuer == CA.certificate.subject
    cert.verify_directly_issued_by(CA.certificate)
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_subject_alt_names_come_from_the_request() -> None:
    request = _request("system:node:w1", ("system:nodes",), ("w1.example",))
    cert = _sign(request, ["digital signature", "server auth"])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["w1.example"]


def test_validity_is_backdated_five_minutes() -> None:
    # the cluster's year: the backdate comes off the end too
    cert = _sign(_request("alice"), ["client auth"])
    assert cert.not_valid_before_utc == NOW - timedelta(minutes=5)
    assert cert.not_valid_after_utc == NOW + timedelta(hours=8760) - timedelta(minutes=5)
    # a short request (under 8 h) keeps its full length after now
    short = _sign(_request("alice"), ["client auth"], 3600)
    assert short.not_valid_after_utc == NOW + timedelta(hours=1)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (None, timedelta(hours=8760)),
        (86400, timedelta(days=1)),
        (60, timedelta(minutes=10)),  # the API refuses it; the signer's own floor still holds
        (10 * 365 * 86400, timedelta(hours=8760)),
    ],
)
def test_expiration_seconds_within_the_cluster_duration(seconds: int | None, expected: timedelta) -> None:
    assert certificate_duration(seconds) == expected


def _csr(
    signer: str, request: x509.CertificateSigningRequest, usages: list[str], *conditions: str
) -> dict[str, Any]:
    pem = request.public_bytes(serialization.Encoding.PEM)
    return {
        "metadata": {"name": "x", "creationTimestamp": "2026-06-01T00:00:00Z"},
        "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": usages},
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


@pytest.fixture
def controller() -> CSRSigningController:
    return CSRSigningController(None, ca_cert_pem=CA.cert_pem, ca_key_pem=CA.key_pem)  # type: ignore[arg-type]


def test_only_approved_requests_of_kubernetes_signers_are_signed(controller: CSRSigningController) -> None:
    request = _request("alice")
    client = "kubernetes.io/kube-apiserver-client"
    assert controller.decide(_csr(client, request, ["client auth"]))[0] == "skip"
    assert controller.decide(_csr(client, request, ["client auth"], "Denied"))[0] == "skip"
    assert controller.decide(_csr("example.com/mine", request, ["client auth"], "Approved"))[0] == "skip"
    assert controller.decide(_csr(client, request, ["client auth"], "Approved", "Failed"))[0] == "skip"
    verdict, pem = controller.decide(_csr(client, request, ["client auth"], "Approved"))
    assert verdict == "sign" and isinstance(pem, bytes) and pem.startswith(b"-----BEGIN CERTIFICATE-----")


@pytest.mark.parametrize(
    ("signer", "subject", "usages", "message"),
    [
        (
            "kubernetes.io/kube-apiserver-client",
            ("alice", ()),
            ["client auth", "server auth"],
            "invalid usage for client certificate: server auth",
        ),
        (
            "kubernetes.io/kube-apiserver-client",
            ("alice", ()),
            ["digital signature"],
            "missing required usage for client certificate: client auth",
        ),
        (
            "kubernetes.io/kube-apiserver-client-kubelet",
            ("system:node:w1", ()),
            ["digital signature", "client auth"],
            "subject organization is not system:nodes",
        ),
        (
            "kubernetes.io/kube-apiserver-client-kubelet",
            ("system:node:w1", ("system:nodes",)),
            ["client auth"],
            "usages did not match [client auth digital signature key encipherment]",
        ),
        (
            "kubernetes.io/kubelet-serving",
            ("system:node:w1", ("system:nodes",)),
            ["digital signature", "server auth"],
            "DNS or IP subjectAltName is required",
        ),
    ],
)
def test_a_refused_request_fails_with_the_signers_reason(
    controller: CSRSigningController,
    signer: str,
    subject: tuple[str, tuple[str, ...]],
    usages: list[str],
    message: str,
) -> None:
    verdict, why = controller.decide(_csr(signer, _request(*subject), usages, "Approved"))
    assert (verdict, why) == ("fail", message)


def _stamped(kind: str, updated: datetime, certificate: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [
            {"type": kind, "status": "True", "lastUpdateTime": updated.strftime("%Y-%m-%dT%H:%M:%SZ")}
        ]
    }
    if certificate:
        status["certificate"] = certificate
    return {"metadata": {"name": "x", "creationTimestamp": "2026-06-01T00:00:00Z"}, "status": status}


def _issued(not_after: datetime) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(not_after - timedelta(days=2))
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


def test_the_cleaner_keeps_and_removes_by_kubes_deadlines() -> None:
    later = NOW + timedelta(days=30)
    valid = _issued(later)
    # issued: an hour after approval
    assert cleanup_reason(_stamped("Approved", NOW - timedelta(minutes=59), valid), NOW) is None
    assert cleanup_reason(_stamped("Approved", NOW - timedelta(minutes=61), valid), NOW) == "approved"
    # approved but not issued stays (the signer may still come)
    assert cleanup_reason(_stamped("Approved", NOW - timedelta(hours=5)), NOW) is None
    # denied or failed: an hour after the condition
    assert cleanup_reason(_stamped("Denied", NOW - timedelta(minutes=61)), NOW) == "denied"
    assert cleanup_reason(_stamped("Failed", NOW - timedelta(minutes=61)), NOW) == "failed"
    assert cleanup_reason(_stamped("Denied", NOW - timedelta(minutes=30)), NOW) is None
    # pending: a day after creation (2026-06-01T00:00Z)
    pending = {"metadata": {"name": "x", "creationTimestamp": "2026-06-01T00:00:00Z"}, "status": {}}
    assert cleanup_reason(pending, NOW) is None
    assert cleanup_reason(pending, datetime(2026, 6, 2, 0, 1, tzinfo=UTC)) == "pending"
    # issued and expired, however recently approved
    expired = _stamped("Approved", NOW - timedelta(minutes=5), _issued(NOW - timedelta(seconds=1)))
    assert cleanup_reason(expired, NOW) == "expired"

"""CertificateSigningRequests' validation and strategy as kube-apiserver 1.33 has them."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.certificates import (
    condition_summary,
    prepare_create,
    prepare_update,
    signer_name_causes,
)
from tenantgpu.apiserver.tables import to_table
from tenantgpu.apiserver.validation import validate

KEY = ec.generate_private_key(ec.SECP256R1())


def _request(common_name: str = "alice") -> bytes:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    built = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(KEY, hashes.SHA256())
    return built.public_bytes(serialization.Encoding.PEM)


def _csr(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": "alice"},
        "spec": {
            "request": base64.b64encode(_request()).decode(),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
            **spec,
        },
    }


def _messages(obj: dict[str, Any], old: dict[str, Any] | None = None, subresource: str = "") -> list[str]:
    return [str(c) for c in validate("CertificateSigningRequest", obj, old=old, subresource=subresource)]


def _certificate() -> str:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(KEY.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .sign(KEY, hashes.SHA256())
    )
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


def test_a_well_formed_request_is_valid_whatever_its_name() -> None:
    obj = _csr()
    obj["metadata"]["name"] = "Alice:Team@Example"
    assert _messages(obj) == []


def test_the_request_must_be_a_pem_certificate_request() -> None:
    not_pem = base64.b64encode(b"hello").decode()
    [message] = _messages(_csr(request=not_pem))
    assert message == (
        "spec.request: Invalid value: []byte{0x68, 0x65, 0x6c, 0x6c, 0x6f}: "
        "PEM block type must be CERTIFICATE REQUEST"
    )


def test_a_request_whose_signature_does_not_verify_is_refused() -> None:
    pem = _request()
    der = x509.load_pem_x509_csr(pem).public_bytes(serialization.Encoding.DER)
    tampered = der[:-3] + bytes([der[-3] ^ 0xFF]) + der[-2:]  # a byte of the signature
    tampered_pem = (
        b"-----BEGIN CERTIFICATE REQUEST-----\n"
        + base64.encodebytes(tampered)
        + (b"-----END CERTIFICATE REQUEST-----\n")
    )
    messages = _messages(_csr(request=base64.b64encode(tampered_pem).decode()))
    assert len(messages) == 1 and messages[0].startswith("spec.request: Invalid value: []byte{")


def test_usages_are_required_known_and_unique() -> None:
    assert _messages(_csr(usages=[])) == ["spec.usages: Required value"]
    [unknown] = _messages(_csr(usages=["client auth", "flying"]))
    assert unknown.startswith(
        'spec.usages[1]: Unsupported value: "flying": supported values: "any", "cert sign"'
    )
    assert _messages(_csr(usages=["client auth", "client auth"])) == [
        'spec.usages[1]: Duplicate value: "client auth"'
    ]


@pytest.mark.parametrize(
    ("signer", "expected"),
    [
        ("", ["spec.signerName: Required value"]),
        (
            "example",
            [
                'spec.signerName: Invalid value: "example": must be a fully qualified domain and path of '
                "the form 'example.com/signer-name'"
            ],
        ),
        (
            "example/signer",
            [
                'spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots'
            ],
        ),
        ("example.com/my-signer", []),
    ],
)
def test_signer_names(signer: str, expected: list[str]) -> None:
    assert [str(c) for c in signer_name_causes("spec.signerName", signer)] == expected


def test_legacy_unknown_is_refused_on_create() -> None:
    assert _messages(_csr(signerName="kubernetes.io/legacy-unknown")) == [
        'spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": '
        "the legacy signerName is not allowed via this API version"
    ]


def test_expiration_seconds_has_a_floor_of_ten_minutes() -> None:
    assert _messages(_csr(expirationSeconds=599)) == [
        "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"
    ]
    assert _messages(_csr(expirationSeconds=600)) == []


def _approved(old: dict[str, Any], *types: str) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["status"] = {"conditions": [{"type": t, "status": "True"} for t in types]}
    return new


def test_approved_and_denied_are_exclusive_and_each_once() -> None:
    old = _csr()
    both = _approved(old, "Approved", "Denied")
    assert _messages(both, old, "approval") == [
        'status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive'
    ]
    twice = _approved(old, "Approved", "Approved")
    assert _messages(twice, old, "approval") == ['status.conditions[1].type: Duplicate value: "Approved"']
    false = _approved(old, "Approved")
    false["status"]["conditions"][0]["status"] = "False"
    assert _messages(false, old, "approval") == [
        'status.conditions[0].status: Unsupported value: "False": supported values: "True"'
    ]


def test_approval_conditions_only_through_approval() -> None:
    old = _csr()
    new = _approved(old, "Approved")
    assert _messages(new, old, "approval") == []
    assert _messages(new, old, "status") == [
        'status.conditions: Forbidden: updates may not add a condition of type "Approved"'
    ]
    assert _messages(old, new, "approval") == [
        'status.conditions: Forbidden: updates may not remove a condition of type "Approved"'
    ]


def test_the_certificate_only_through_status_and_only_once() -> None:
    old = _approved(_csr(), "Approved")
    issued = copy.deepcopy(old)
    issued["status"]["certificate"] = _certificate()
    assert _messages(issued, old, "status") == []
    assert _messages(issued, old, "approval") == [
        "status.certificate: Forbidden: updates may not set certificate content"
    ]
    again = copy.deepcopy(issued)
    again["status"]["certificate"] = _certificate()
    assert _messages(again, issued, "status") == [
        "status.certificate: Forbidden: updates may not modify existing certificate content"
    ]
    garbage = copy.deepcopy(old)
    garbage["status"]["certificate"] = base64.b64encode(b"not a certificate").decode()
    assert _messages(garbage, old, "status") == [
        'status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block'
    ]


def test_create_records_the_requester_and_drops_the_status() -> None:
    obj = _csr(username="root", groups=["system:masters"])
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    prepare_create(obj, UserInfo("alice", ("dev", "system:authenticated"), "u-1", {"scope": ["a"]}))
    spec = obj["spec"]
    assert (spec["username"], spec["groups"], spec["uid"], spec["extra"]) == (
        "alice",
        ["dev", "system:authenticated"],
        "u-1",
        {"scope": ["a"]},
    )
    assert obj["status"] == {}


def test_each_subresource_changes_only_its_part() -> None:
    old = _csr()
    old["status"] = {}
    # the resource: spec and status stay as stored
    new = _approved(old, "Approved")
    new["spec"]["usages"] = ["server auth"]
    prepare_update(new, old, "")
    assert new["spec"] == old["spec"] and new["status"] == {}
    # approval: the conditions, stamped with times; spec and certificate as stored
    new = _approved(old, "Approved")
    new["status"]["certificate"] = "Zm9v"
    prepare_update(new, old, "approval")
    [condition] = new["status"]["conditions"]
    assert condition["lastUpdateTime"] and condition["lastTransitionTime"]
    assert "certificate" not in new["status"]
    # status: the Approved condition as stored, whatever the writer says of it
    stored = copy.deepcopy(new)
    changed = copy.deepcopy(stored)
    changed["status"]["conditions"][0]["reason"] = "Rewritten"
    changed["status"]["certificate"] = "Zm9v"
    prepare_update(changed, stored, "status")
    assert changed["status"]["conditions"] == stored["status"]["conditions"]
    assert changed["status"]["certificate"] == "Zm9v"


def test_the_condition_column() -> None:
    assert condition_summary(_csr()) == "Pending"
    approved = _approved(_csr(), "Approved", "Failed")
    assert condition_summary(approved) == "Approved,Failed"
    approved["status"]["certificate"] = "Zm9v"
    assert condition_summary(approved) == "Approved,Failed,Issued"
    assert condition_summary(_approved(_csr(), "Denied")) == "Denied"


def test_the_table_columns() -> None:
    obj = _csr(expirationSeconds=3600, username="alice")
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    table = to_table("CertificateSigningRequest", [obj], now=datetime(2026, 1, 1, 0, 5, tzinfo=UTC))
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Age",
        "SignerName",
        "Requestor",
        "RequestedDuration",
        "Condition",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[:2] == ["alice", "5m"] and cells[2:] == [
        "kubernetes.io/kube-apiserver-client",
        "alice",
        "60m",
        "Pending",
    ]

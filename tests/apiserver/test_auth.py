"""Service-account tokens, client-certificate identities and impersonation headers."""

from __future__ import annotations

import time

import pytest
from multidict import CIMultiDict

from tenantgpu.apiserver.auth import Authenticator, TokenSigner, UserInfo
from tenantgpu.apiserver.pki import ServerPKI


def test_tokens_verify_only_where_they_were_signed() -> None:
    ours, theirs = ServerPKI.create("a"), ServerPKI.create("b")
    signer = TokenSigner(ours.service_account_key_pem)
    token = signer.issue("kube-system", "hami-scheduler")
    user = signer.verify(token)
    assert user is not None and user.name == "system:serviceaccount:kube-system:hami-scheduler"
    assert "system:serviceaccounts:kube-system" in user.groups
    assert TokenSigner(theirs.service_account_key_pem).verify(token) is None
    assert signer.verify(token[:-2] + ("AA" if not token.endswith("AA") else "BB")) is None
    assert signer.verify("not-a-jwt") is None


def test_expired_tokens_are_refused() -> None:
    signer = TokenSigner(ServerPKI.create("a").service_account_key_pem)
    token = signer.issue("default", "robot", expiration_seconds=-1)
    time.sleep(0.01)
    assert signer.verify(token) is None


def test_certificates_of_another_ca_are_refused_when_other_cas_are_trusted() -> None:
    ours, theirs = ServerPKI.create("a"), ServerPKI.create("b")
    authenticator = Authenticator(
        ours.ca.cert_pem, TokenSigner(ours.service_account_key_pem), check_issuer=True
    )
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    def der(pem: bytes) -> bytes:
        return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)

    subject = ((("organizationName", "system:masters"),), (("commonName", "admin"),))
    own_cert, _ = ours.ca.issue_client("admin", ["system:masters"])
    foreign_cert, _ = theirs.ca.issue_client("admin", ["system:masters"])
    user = authenticator.from_certificate({"subject": subject}, der(own_cert))
    assert isinstance(user, UserInfo) and user.groups[0] == "system:masters"
    assert authenticator.from_certificate({"subject": subject}, der(foreign_cert)) is False


def test_impersonation_headers_name_the_user_and_what_to_check() -> None:
    from tenantgpu.apiserver.auth import ImpersonationError, impersonation

    assert impersonation(CIMultiDict()) is None
    asked = impersonation(
        CIMultiDict(
            [
                ("Impersonate-User", "alice"),
                ("Impersonate-Group", "devs"),
                ("Impersonate-Group", "ops"),
                ("Impersonate-Extra-Scopes", "view"),
                ("Impersonate-Uid", "42"),
            ]
        )
    )
    assert asked is not None
    assert asked.user == UserInfo(
        "alice", ("devs", "ops", "system:authenticated"), "42", {"scopes": ["view"]}
    )
    assert asked.checks == (
        ("", "users", "alice"),
        ("", "groups", "devs"),
        ("", "groups", "ops"),
        ("authentication.k8s.io", "userextras/scopes", "view"),
        ("authentication.k8s.io", "uids", "42"),
    )
    anonymous = impersonation(CIMultiDict([("Impersonate-User", "system:anonymous")]))
    assert anonymous is not None and anonymous.user.groups == ()
    with pytest.raises(ImpersonationError, match=r"requested \[group devs\] without impersonating a user"):
        impersonation(CIMultiDict([("Impersonate-Group", "devs")]))


def test_a_service_account_brings_its_groups_unless_groups_are_asked_for() -> None:
    from tenantgpu.apiserver.auth import impersonation

    account = impersonation(CIMultiDict([("Impersonate-User", "system:serviceaccount:ci:robot")]))
    assert account is not None and account.checks == (("", "serviceaccounts", "robot"),)
    assert account.user.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:ci",
        "system:authenticated",
    )
    grouped = impersonation(
        CIMultiDict([("Impersonate-User", "system:serviceaccount:ci:robot"), ("Impersonate-Group", "devs")])
    )
    assert grouped is not None and grouped.user.groups == ("devs", "system:authenticated")

"""Bootstrap tokens (kube-apiserver's `--enable-bootstrap-token-auth`): which bearer tokens are bootstrap
tokens, which Secrets let them in, and the user they authenticate as. Facts from Kubernetes 1.33's
bootstrap token authenticator and `k8s.io/cluster-bootstrap`."""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from tenantgpu.apiserver.auth import Authenticator, TokenSigner, UserInfo
from tenantgpu.apiserver.bootstraptoken import (
    BootstrapToken,
    BootstrapTokenAuthenticator,
    expiration,
    groups,
    parse_token,
)
from tenantgpu.apiserver.pki import ServerPKI

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()
TOKEN = "abcdef.0123456789abcdef"


def _secret(
    token_id: str = "abcdef",
    token_secret: str = "0123456789abcdef",
    *,
    name: str | None = None,
    type: str = "bootstrap.kubernetes.io/token",
    deleting: bool = False,
    **data: str,
) -> dict[str, Any]:
    values = {
        "token-id": token_id,
        "token-secret": token_secret,
        "usage-bootstrap-authentication": "true",
        **{key.replace("_", "-"): value for key, value in data.items()},
    }
    meta: dict[str, Any] = {"name": name or f"bootstrap-token-{token_id}", "namespace": "kube-system"}
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T11:59:00Z"
        meta["finalizers"] = ["example.com/hold"]
    return {
        "metadata": meta,
        "type": type,
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items() if value},
    }


def _authenticator(*secrets: dict[str, Any]) -> BootstrapTokenAuthenticator:
    stored = {s["metadata"]["name"]: s for s in secrets}
    return BootstrapTokenAuthenticator(stored.get, clock=lambda: NOW)


def test_a_token_is_six_and_sixteen_lowercase_letters_or_digits() -> None:
    assert parse_token(TOKEN) == BootstrapToken("abcdef", "0123456789abcdef")
    assert parse_token(TOKEN).secret_name == "bootstrap-token-abcdef"  # type: ignore[union-attr]
    for other in (
        "ABCDEF.0123456789abcdef",
        "abcdef.0123456789ABCDEF",
        "abcde.0123456789abcdef",
        "abcdef.0123456789abcde",
        "abcdef.0123456789abcdef0",
        "abcdef:0123456789abcdef",
        "abcdef.0123456789abcdef\n",
        " abcdef.0123456789abcdef",
        "abcdef.0123456789abcd.f",
        "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
    ):
        assert parse_token(other) is None, other


def test_a_valid_token_is_its_bootstrap_user_with_its_extra_groups() -> None:
    secret = _secret(auth_extra_groups="system:bootstrappers:worker,system:bootstrappers:gpu:a-1")
    user = _authenticator(secret).authenticate(TOKEN)
    # kube's groups are a sorted set; system:authenticated comes after them, as the group adder appends it
    assert user == UserInfo(
        "system:bootstrap:abcdef",
        (
            "system:bootstrappers",
            "system:bootstrappers:gpu:a-1",
            "system:bootstrappers:worker",
            "system:authenticated",
        ),
    )
    assert _authenticator(_secret()).authenticate(TOKEN) == UserInfo(
        "system:bootstrap:abcdef", ("system:bootstrappers", "system:authenticated")
    )


def test_extra_groups_are_deduplicated_and_one_invalid_group_refuses_the_token() -> None:
    twice = _secret(auth_extra_groups="system:bootstrappers:b,system:bootstrappers:b")
    assert groups(twice) == ("system:bootstrappers", "system:bootstrappers:b")
    for invalid in (
        "system:nodes",
        "system:bootstrappers",  # the default group cannot be listed: the pattern wants a suffix
        "system:bootstrappers:",
        "system:bootstrappers:Worker",
        "system:bootstrappers:w-",
        "system:bootstrappers:a,",
        "system:bootstrappers:a, system:bootstrappers:b",
        "system:bootstrappers:" + "a" * 257,
    ):
        with pytest.raises(ValueError):
            groups(_secret(auth_extra_groups=invalid))
        assert _authenticator(_secret(auth_extra_groups=invalid)).authenticate(TOKEN) is None, invalid
    assert groups(_secret(auth_extra_groups="system:bootstrappers:" + "a" * 256)) == (
        "system:bootstrappers",
        "system:bootstrappers:" + "a" * 256,
    )


def test_expiration_is_rfc3339_and_unreadable_counts_as_expired() -> None:
    assert expiration(_secret(), NOW) == (0.0, False)
    assert expiration(_secret(expiration="2026-03-01T12:00:30Z"), NOW) == (30.0, False)
    assert expiration(_secret(expiration="2026-03-01T13:00:30+01:00"), NOW) == (30.0, False)
    assert expiration(_secret(expiration="2026-03-01T11:00:30.5-01:00"), NOW) == (30.5, False)
    assert expiration(_secret(expiration="2026-03-01T12:00:00Z"), NOW) == (0.0, True)
    assert expiration(_secret(expiration="2026-03-01T11:59:59Z"), NOW) == (0.0, True)
    for unreadable in (
        "2026-03-01 12:00:30Z",
        "2026-03-01t12:00:30z",
        "2026-03-01T12:00:30",
        "2026-02-30T12:00:30Z",
        "2026-03-01T24:00:30Z",
        "tomorrow",
    ):
        assert expiration(_secret(expiration=unreadable), NOW) == (0.0, True), unreadable


@pytest.mark.parametrize(
    ("what", "secret", "token"),
    [
        ("no such secret", _secret("ghijkl"), TOKEN),
        ("wrong secret", _secret(), "abcdef.0123456789abcdee"),
        ("another type", _secret(type="Opaque"), TOKEN),
        ("token-id differs", _secret(name="bootstrap-token-abcdef", token_id="abcdeg"), TOKEN),
        ("being deleted", _secret(deleting=True), TOKEN),
        ("expired", _secret(expiration="2026-03-01T11:00:00Z"), TOKEN),
        ("unreadable expiration", _secret(expiration="soon"), TOKEN),
        ("no authentication usage", _secret(usage_bootstrap_authentication=""), TOKEN),
        ("usage not exactly true", _secret(usage_bootstrap_authentication="True"), TOKEN),
        (
            "only for signing",
            _secret(usage_bootstrap_authentication="", usage_bootstrap_signing="true"),
            TOKEN,
        ),
    ],
)
def test_tokens_kube_refuses(what: str, secret: dict[str, Any], token: str) -> None:
    assert _authenticator(secret).authenticate(token) is None, what


def test_a_refusal_is_logged_at_debug_level_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tenantgpu.apiserver.bootstraptoken"):
        assert _authenticator(_secret()).authenticate("abcdef.0123456789abcdee") is None
    (record,) = caplog.records
    assert record.levelno == logging.DEBUG
    assert (
        "kube-system/bootstrap-token-abcdef" in record.getMessage() and "token-secret" in record.getMessage()
    )


def test_the_server_authenticator_tries_bootstrap_tokens_after_service_account_tokens() -> None:
    pki = ServerPKI.create("a")
    signer = TokenSigner(pki.service_account_key_pem)
    authenticator = Authenticator(
        pki.ca.cert_pem, signer, check_issuer=False, tokens=(_authenticator(_secret()),)
    )
    user = authenticator.from_token(TOKEN)
    assert user is not None and user.name == "system:bootstrap:abcdef"
    account = authenticator.from_token(signer.issue("kube-system", "robot"))
    assert account is not None and account.name == "system:serviceaccount:kube-system:robot"
    assert authenticator.from_token("abcdef.fedcba9876543210") is None

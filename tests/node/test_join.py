"""`kubeadm token create` and join discovery: the token's Secret and the check of the signed
cluster-info (kubeadm 1.33's bootstraptoken and discovery/token, cluster-bootstrap's jws)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from datetime import UTC, datetime

import pytest

from tenantgpu.apiserver.bootstraptoken import BootstrapToken
from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.kamaji.kubeadmphases import cluster_info_kubeconfig
from tenantgpu.node.join import (
    DiscoveryError,
    TokenError,
    ca_cert_hash,
    generate_token,
    parse_duration,
    token_secret,
    token_string,
    trusted_cluster,
    verify_detached_signature,
)

CA = CertificateAuthority.create("tenant-a")
TOKEN = BootstrapToken("abcdef", "0123456789abcdef")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jws(content: str, token: BootstrapToken, kid: str | None = None) -> str:
    """An HS256 detached JWS as RFC 7515 builds it, written out here independently of the module."""
    header = _b64url(json.dumps({"alg": "HS256", "kid": kid or token.id}, separators=(",", ":")).encode())
    mac = hmac.new(token.secret.encode(), f"{header}.{_b64url(content.encode())}".encode(), hashlib.sha256)
    return f"{header}..{_b64url(mac.digest())}"


def test_a_new_token_has_kubeadms_form() -> None:
    token = generate_token()
    assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", token_string(token))
    assert generate_token() != token


def test_the_tokens_secret_is_what_kubeadm_token_create_writes() -> None:
    secret = token_secret(TOKEN, datetime(2026, 12, 7, 3, 0, tzinfo=UTC))
    assert secret["metadata"] == {"name": "bootstrap-token-abcdef", "namespace": "kube-system"}
    assert secret["type"] == "bootstrap.kubernetes.io/token"
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}  # type: ignore[union-attr]
    assert data == {
        "token-id": "abcdef",
        "token-secret": "0123456789abcdef",
        "expiration": "2026-12-08T03:00:00Z",
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
    }


def test_only_the_tokens_own_signature_verifies() -> None:
    content = cluster_info_kubeconfig("https://127.0.0.1:6443", CA.cert_pem)
    assert verify_detached_signature(content, _jws(content, TOKEN), TOKEN)
    other = BootstrapToken("abcdef", "fedcba9876543210")
    assert not verify_detached_signature(content, _jws(content, other), TOKEN)
    assert not verify_detached_signature(content + "x", _jws(content, TOKEN), TOKEN)
    assert not verify_detached_signature(content, _jws(content, TOKEN, kid="zzzzzz"), TOKEN)
    assert not verify_detached_signature(content, "not-a-jws", TOKEN)


def _cluster_info(content: str, **signatures: str) -> dict:
    return {"data": {"kubeconfig": content, **{f"jws-kubeconfig-{k}": v for k, v in signatures.items()}}}


def test_discovery_trusts_a_signed_cluster_info_with_the_expected_ca() -> None:
    content = cluster_info_kubeconfig("https://127.0.0.1:6443", CA.cert_pem)
    found = trusted_cluster(
        _cluster_info(content, abcdef=_jws(content, TOKEN)), TOKEN, ca_cert_hash(CA.cert_pem)
    )
    assert (found.server, found.ca_pem) == ("https://127.0.0.1:6443", CA.cert_pem)


def test_the_ca_hash_is_kubeadms_pin_of_the_public_key() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    spki = (
        x509.load_pem_x509_certificate(CA.cert_pem)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert ca_cert_hash(CA.cert_pem) == "sha256:" + hashlib.sha256(spki).hexdigest()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", ca_cert_hash(CA.cert_pem))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unsigned", 'token id "abcdef" is invalid for this cluster or it has expired'),
        ("forged", "failed to verify JWS signature of received cluster info object"),
        ("other-ca", "cluster CA found in cluster-info ConfigMap is invalid: none of the public keys"),
        ("empty", "there is no kubeconfig key in the cluster-info ConfigMap"),
    ],
)
def test_discovery_refuses_in_kubeadms_words(case: str, message: str) -> None:
    content = cluster_info_kubeconfig("https://127.0.0.1:6443", CA.cert_pem)
    info = {
        "unsigned": _cluster_info(content),
        "forged": _cluster_info(content, abcdef=_jws(content, BootstrapToken("abcdef", "x" * 16))),
        "other-ca": _cluster_info(
            (
                other := cluster_info_kubeconfig(
                    "https://127.0.0.1:6443", CertificateAuthority.create("b").cert_pem
                )
            ),
            abcdef=_jws(other, TOKEN),
        ),
        "empty": {"data": {}},
    }[case]
    with pytest.raises(DiscoveryError, match=re.escape(message)):
        trusted_cluster(info, TOKEN, ca_cert_hash(CA.cert_pem))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("24h", 86400), ("30m", 1800), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("0", None)],
)
def test_ttl_is_a_go_duration(text: str, seconds: int | None) -> None:
    found = parse_duration(text)
    assert (found.total_seconds() if found else None) == seconds


@pytest.mark.parametrize("text", ["soon", "24", "1d", "h", "-1h", "24h "])
def test_a_ttl_that_is_no_duration_is_refused(text: str) -> None:
    with pytest.raises(TokenError, match="expected a duration such as 30m, 24h or 1h30m"):
        parse_duration(text)


def test_a_token_without_expiry_has_no_expiration_key() -> None:
    secret = token_secret(TOKEN, datetime(2026, 12, 7, tzinfo=UTC), None)
    assert "expiration" not in secret["data"]  # type: ignore[operator]

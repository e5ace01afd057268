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
    generate_token,
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
    assert trusted_cluster(_cluster_info(content, abcdef=_jws(content, TOKEN)), TOKEN, CA.cert_pem) == (
        "https://127.0.0.1:6443"
    )


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unsigned", 'token id "abcdef" is invalid for this cluster or it has expired'),
        ("forged", "failed to verify JWS signature of received cluster info object"),
        ("other-ca", "cluster CA found in cluster-info ConfigMap is invalid"),
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
        trusted_cluster(info, TOKEN, CA.cert_pem)

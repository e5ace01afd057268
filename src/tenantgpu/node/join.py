"""`kubeadm token create` and the discovery half of `kubeadm join`, as the lab joins a tenant's workers.

Facts from kubeadm 1.33 and cluster-bootstrap (cmd/kubeadm/app/apis/bootstraptoken/v1/utils.go,
cmd/kubeadm/app/discovery/token/token.go, staging/src/k8s.io/cluster-bootstrap/token/{api,jws,util}):

- A token is `<id>.<secret>`: 6 and 16 characters of `[a-z0-9]`. `kubeadm token create` stores it as
  Secret `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` with `token-id`,
  `token-secret`, `expiration` (now + 24 h, RFC 3339 in UTC), `usage-bootstrap-authentication` and
  `usage-bootstrap-signing` set to `true`, and `auth-extra-groups`
  `system:bootstrappers:kubeadm:default-node-token`.
- Discovery: `kubeadm join` reads `kube-public/cluster-info` without credentials, waits for the
  bootstrapsigner's `jws-kubeconfig-<id>` key, and trusts the cluster only if that detached JWS (HS256,
  the token's secret as key, `kid` the token's id) signs the ConfigMap's `kubeconfig`; the CA in it must
  be the one it was told to expect (`--discovery-token-ca-cert-hash`; here the CA the lab holds).
- Then the kubelet's TLS bootstrap (`node/bootstrap.py`) asks for its certificate with the token.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hmac
import secrets
from datetime import UTC, datetime, timedelta

import yaml

from tenantgpu.apiserver.bootstraptoken import (
    EXPIRATION_KEY,
    EXTRA_GROUPS_KEY,
    SECRET_NAMESPACE,
    SECRET_TYPE,
    TOKEN_ID_KEY,
    TOKEN_SECRET_KEY,
    USAGE_AUTHENTICATION,
    USAGE_SIGNING,
    BootstrapToken,
)
from tenantgpu.controlplane.bootstrapsigner import (
    CLUSTER_INFO,
    KUBECONFIG_KEY,
    PUBLIC_NAMESPACE,
    SIGNATURE_PREFIX,
    detached_signature,
)
from tenantgpu.kubeclient import ApiError, KubeClient

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
DEFAULT_TTL = timedelta(hours=24)
DEFAULT_GROUP = "system:bootstrappers:kubeadm:default-node-token"
DISCOVERY_RETRY_SECONDS = 0.2


class DiscoveryError(Exception):
    """cluster-info could not be trusted: unsigned for this token, a bad signature, or another CA."""


def generate_token() -> BootstrapToken:
    """`kubeadm token generate`: six and sixteen random characters of [a-z0-9]."""
    return BootstrapToken(
        "".join(secrets.choice(ALPHABET) for _ in range(6)),
        "".join(secrets.choice(ALPHABET) for _ in range(16)),
    )


def token_string(token: BootstrapToken) -> str:
    return f"{token.id}.{token.secret}"


def token_secret(token: BootstrapToken, now: datetime, ttl: timedelta = DEFAULT_TTL) -> dict[str, object]:
    """The Secret `kubeadm token create` writes for `token`."""
    values = {
        TOKEN_ID_KEY: token.id,
        TOKEN_SECRET_KEY: token.secret,
        EXPIRATION_KEY: (now + ttl).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        USAGE_AUTHENTICATION: "true",
        USAGE_SIGNING: "true",
        EXTRA_GROUPS_KEY: DEFAULT_GROUP,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token.secret_name, "namespace": SECRET_NAMESPACE},
        "type": SECRET_TYPE,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


async def create_token(admin: KubeClient, ttl: timedelta = DEFAULT_TTL) -> BootstrapToken:
    """`kubeadm token create`: a new token, stored for the API server's bootstrap token authenticator."""
    token = generate_token()
    await admin.create("secrets", token_secret(token, datetime.now(UTC), ttl), SECRET_NAMESPACE)
    return token


def verify_detached_signature(content: str, signature: str, token: BootstrapToken) -> bool:
    """Whether `signature` is the token's detached JWS of `content`: recomputed and compared, as kubeadm's
    DetachedTokenIsValid does."""
    expected = detached_signature(content, token.id, token.secret.encode())
    return hmac.compare_digest(expected.encode(), signature.encode())


def trusted_cluster(cluster_info: dict, token: BootstrapToken, ca_pem: bytes) -> str:
    """The server cluster-info names, once its signature and CA check out; else DiscoveryError (with
    kubeadm's words)."""
    data = cluster_info.get("data") or {}
    content = data.get(KUBECONFIG_KEY) or ""
    if not content:
        raise DiscoveryError(
            "there is no kubeconfig key in the cluster-info ConfigMap. This API Server isn't set up for "
            "token bootstrapping, can't connect"
        )
    signature = data.get(SIGNATURE_PREFIX + token.id)
    if not signature:
        raise DiscoveryError(
            f'token id "{token.id}" is invalid for this cluster or it has expired. Use "kubeadm token '
            'create" on the control-plane node to create a new valid token'
        )
    if not verify_detached_signature(content, signature, token):
        raise DiscoveryError(
            "failed to verify JWS signature of received cluster info object, can't trust this API Server"
        )
    clusters = (yaml.safe_load(content) or {}).get("clusters") or []
    cluster = (clusters[0] if clusters else {}).get("cluster") or {}
    if base64.b64decode(cluster.get("certificate-authority-data") or "") != ca_pem:
        raise DiscoveryError(
            "cluster CA found in cluster-info ConfigMap is invalid: not the CA the lab holds"
        )
    return str(cluster.get("server") or "")


async def discover(client: KubeClient, token: BootstrapToken, ca_pem: bytes, timeout: float) -> str:
    """Read cluster-info as an anonymous client until it carries a signature for `token` (the signer
    adds it a moment after the token appears), then check it; returns the server it names."""
    anonymous = KubeClient(
        dataclasses.replace(client.config, token=None, client_cert_data=None, client_key_data=None),
        user_agent="kubeadm",
    )
    last = ""
    try:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    found = await anonymous.get("configmaps", CLUSTER_INFO, PUBLIC_NAMESPACE)
                except ApiError as err:
                    last = f"failed to request the cluster-info ConfigMap: {err.message or err.reason}"
                else:
                    if (found.get("data") or {}).get(SIGNATURE_PREFIX + token.id):
                        return trusted_cluster(found, token, ca_pem)
                    last = f'could not find a JWS signature in the cluster-info ConfigMap for token ID "{token.id}"'
                await asyncio.sleep(DISCOVERY_RETRY_SECONDS)
    except TimeoutError:
        raise DiscoveryError(last or "timed out reading the cluster-info ConfigMap") from None
    finally:
        await anonymous.close()


def bootstrap_client(client: KubeClient, token: BootstrapToken, server: str) -> KubeClient:
    """A client presenting the token to `server` (kubeadm's bootstrap-kubelet.conf)."""
    config = dataclasses.replace(
        client.config, server=server, token=token_string(token), client_cert_data=None, client_key_data=None
    )
    return KubeClient(config, user_agent="kubelet-bootstrap")

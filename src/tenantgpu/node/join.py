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
import binascii
import dataclasses
import hashlib
import hmac
import json
import secrets
from datetime import UTC, datetime, timedelta

import yaml

from tenantgpu.kubeclient import ApiError, KubeClient

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
DEFAULT_TTL = timedelta(hours=24)
DEFAULT_GROUP = "system:bootstrappers:kubeadm:default-node-token"
SIGNATURE_PREFIX = "jws-kubeconfig-"
DISCOVERY_RETRY_SECONDS = 0.2


class DiscoveryError(Exception):
    """cluster-info could not be trusted: unsigned for this token, a bad signature, or another CA."""


@dataclasses.dataclass(frozen=True)
class BootstrapToken:
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"

    @classmethod
    def generate(cls) -> BootstrapToken:
        return cls(
            "".join(secrets.choice(ALPHABET) for _ in range(6)),
            "".join(secrets.choice(ALPHABET) for _ in range(16)),
        )


def token_secret(token: BootstrapToken, now: datetime, ttl: timedelta = DEFAULT_TTL) -> dict[str, object]:
    """The Secret `kubeadm token create` writes for `token`."""
    values = {
        "token-id": token.id,
        "token-secret": token.secret,
        "expiration": (now + ttl).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": DEFAULT_GROUP,
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"bootstrap-token-{token.id}", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


async def create_token(admin: KubeClient, ttl: timedelta = DEFAULT_TTL) -> BootstrapToken:
    """`kubeadm token create`: a new token, stored for the API server's bootstrap token authenticator."""
    token = BootstrapToken.generate()
    await admin.create("secrets", token_secret(token, datetime.now(UTC), ttl), "kube-system")
    return token


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def verify_detached_signature(content: str, signature: str, token: BootstrapToken) -> bool:
    """Whether `signature` (`<header>..<mac>`) is the token's HS256 JWS over `content`."""
    header_b64, sep, mac_b64 = signature.partition("..")
    if not sep:
        return False
    try:
        header = json.loads(_b64url_decode(header_b64))
        mac = _b64url_decode(mac_b64)
    except (ValueError, binascii.Error):
        return False
    if not isinstance(header, dict) or header.get("alg") != "HS256" or header.get("kid") != token.id:
        return False
    signing_input = f"{header_b64}.{_b64url(content.encode())}".encode()
    expected = hmac.new(token.secret.encode(), signing_input, hashlib.sha256).digest()
    return hmac.compare_digest(expected, mac)


def trusted_cluster(cluster_info: dict, token: BootstrapToken, ca_pem: bytes) -> str:
    """The server cluster-info names, once its signature and CA check out; else DiscoveryError (with
    kubeadm's words)."""
    data = cluster_info.get("data") or {}
    content = data.get("kubeconfig") or ""
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
                    found = await anonymous.get("configmaps", "cluster-info", "kube-public")
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
        client.config, server=server, token=str(token), client_cert_data=None, client_key_data=None
    )
    return KubeClient(config, user_agent="kubelet-bootstrap")

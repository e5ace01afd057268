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
- Preflight then reads the cluster's configuration with the token (cmd/join.go, util/config/cluster.go):
  `kube-system/kubeadm-config` (its `ClusterConfiguration` key) and the kubelet's `kube-system/kubelet-config`
  (key `kubelet`), which kubeadm writes to the kubelet's `config.yaml`; on a Kamaji tenant its soot manager
  uploaded both (`kamaji/kubeadmphases.py`). A failure reads `unable to fetch the kubeadm-config ConfigMap: …`.
- Then the kubelet's TLS bootstrap (`node/bootstrap.py`) asks for its certificate with the token.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

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
from tenantgpu.apiserver.bootstraptoken import parse_token as parse_bootstrap_token
from tenantgpu.controlplane.bootstrapsigner import (
    CLUSTER_INFO,
    KUBECONFIG_KEY,
    PUBLIC_NAMESPACE,
    SIGNATURE_PREFIX,
    detached_signature,
)
from tenantgpu.kamaji.kubeadmphases import (
    KUBE_SYSTEM,
    KUBEADM_CONFIG,
    KUBEADM_CONFIG_KEY,
    KUBELET_CONFIG,
    KUBELET_CONFIG_KEY,
)
from tenantgpu.kubeclient import ApiError, KubeClient, KubeConfig

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


def token_secret(
    token: BootstrapToken, now: datetime, ttl: timedelta | None = DEFAULT_TTL
) -> dict[str, object]:
    """The Secret `kubeadm token create` writes for `token`."""
    values = {TOKEN_ID_KEY: token.id, TOKEN_SECRET_KEY: token.secret}
    if ttl is not None:  # no expiration key: the token never expires
        values[EXPIRATION_KEY] = (now + ttl).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    values.update({USAGE_AUTHENTICATION: "true", USAGE_SIGNING: "true", EXTRA_GROUPS_KEY: DEFAULT_GROUP})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token.secret_name, "namespace": SECRET_NAMESPACE},
        "type": SECRET_TYPE,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


async def create_token(admin: KubeClient, ttl: timedelta | None = DEFAULT_TTL) -> BootstrapToken:
    """`kubeadm token create`: a new token, stored for the API server's bootstrap token authenticator."""
    token = generate_token()
    await admin.create("secrets", token_secret(token, datetime.now(UTC), ttl), SECRET_NAMESPACE)
    return token


def verify_detached_signature(content: str, signature: str, token: BootstrapToken) -> bool:
    """Whether `signature` is the token's detached JWS of `content`: recomputed and compared, as kubeadm's
    DetachedTokenIsValid does."""
    expected = detached_signature(content, token.id, token.secret.encode())
    return hmac.compare_digest(expected.encode(), signature.encode())


def ca_cert_hash(ca_pem: bytes) -> str:
    """kubeadm's `--discovery-token-ca-cert-hash`: SHA-256 of the CA certificate's SubjectPublicKeyInfo."""
    cert = x509.load_pem_x509_certificate(ca_pem)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()


@dataclasses.dataclass(frozen=True)
class DiscoveredCluster:
    server: str
    ca_pem: bytes


def trusted_cluster(cluster_info: dict, token: BootstrapToken, ca_hash: str) -> DiscoveredCluster:
    """The cluster cluster-info names, once its signature checks out and its CA has the pinned hash;
    else DiscoveryError, in kubeadm's words."""
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
    ca_pem = base64.b64decode(cluster.get("certificate-authority-data") or "")
    try:
        found = ca_cert_hash(ca_pem)
    except ValueError as err:
        raise DiscoveryError(f"failed to parse cluster CA from the cluster-info ConfigMap: {err}") from None
    if found != ca_hash.lower():
        raise DiscoveryError(
            'cluster CA found in cluster-info ConfigMap is invalid: none of the public keys "'
            + found
            + '" are pinned'
        )
    return DiscoveredCluster(str(cluster.get("server") or ""), ca_pem)


async def discover(
    endpoint: KubeConfig, token: BootstrapToken, ca_hash: str, timeout: float
) -> DiscoveredCluster:
    """Read cluster-info at `endpoint` without credentials until it carries a signature for `token`
    (the signer adds it a moment after the token appears), then check it."""
    anonymous = KubeClient(
        endpoint.with_credentials(),
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
                        return trusted_cluster(found, token, ca_hash)
                    last = f'could not find a JWS signature in the cluster-info ConfigMap for token ID "{token.id}"'
                await asyncio.sleep(DISCOVERY_RETRY_SECONDS)
    except TimeoutError:
        raise DiscoveryError(last or "timed out reading the cluster-info ConfigMap") from None
    finally:
        await anonymous.close()


KUBELET_CONFIG_FILE = "config.yaml"  # kubeadm writes /var/lib/kubelet/config.yaml
DEFAULT_MAX_PODS = 110


async def fetch_kubelet_configuration(bootstrap: KubeClient) -> str:
    """kubeadm join's preflight read of the cluster's configuration, with the bootstrap token: the
    kubelet's configuration text, or DiscoveryError in kubeadm's words."""
    prefix = "unable to fetch the kubeadm-config ConfigMap"
    try:
        kubeadm = await bootstrap.get("configmaps", KUBEADM_CONFIG, KUBE_SYSTEM)
    except ApiError as err:
        raise DiscoveryError(f"{prefix}: failed to get config map: {err.message or err.reason}") from None
    if KUBEADM_CONFIG_KEY not in (kubeadm.get("data") or {}):
        raise DiscoveryError(
            f"{prefix}: unexpected error when reading kubeadm-config ConfigMap: "
            f"{KUBEADM_CONFIG_KEY} key value pair missing"
        )
    try:
        kubelet = await bootstrap.get("configmaps", KUBELET_CONFIG, KUBE_SYSTEM)
    except ApiError as err:
        raise DiscoveryError(
            f"{prefix}: failed to get component configs: {err.message or err.reason}"
        ) from None
    text = (kubelet.get("data") or {}).get(KUBELET_CONFIG_KEY)
    if not text:
        raise DiscoveryError(
            f"{prefix}: failed to get component configs: the {KUBELET_CONFIG} ConfigMap has no {KUBELET_CONFIG_KEY!r} key"
        )
    return str(text)


def configured_max_pods(cert_dir: Path) -> int:
    """The kubelet's `maxPods` from the configuration a join wrote, else the kubelet's default."""
    try:
        config = yaml.safe_load((cert_dir / KUBELET_CONFIG_FILE).read_text())
    except (OSError, yaml.YAMLError):
        return DEFAULT_MAX_PODS
    value = config.get("maxPods") if isinstance(config, dict) else None
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_PODS


def parse_token(text: str) -> BootstrapToken:
    """A `--token` value, or ValueError in kubeadm's words."""
    found = parse_bootstrap_token(text)
    if found is None:
        raise ValueError(f'the bootstrap token "{text}" was not of the form "[a-z0-9]{{6}}.[a-z0-9]{{16}}"')
    return found


def insecure_endpoint(endpoint: str) -> KubeConfig:
    """Where `kubeadm join <endpoint>` first asks, before it trusts any CA: TLS without verification."""
    server = endpoint if endpoint.startswith("https://") else f"https://{endpoint}"
    return KubeConfig(server=server, insecure_skip_tls_verify=True)


def bootstrap_client(cluster: DiscoveredCluster, token: BootstrapToken) -> KubeClient:
    """A client presenting the token to the discovered cluster (kubeadm's bootstrap-kubelet.conf)."""
    config = KubeConfig(server=cluster.server, ca_data=cluster.ca_pem, token=token_string(token))
    return KubeClient(config, user_agent="kubelet-bootstrap")


class TokenError(Exception):
    """A user's mistake in `tenantgpu token create`, in one line."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")


def parse_duration(text: str) -> timedelta | None:
    """A Go duration (`24h`, `1h30m`, `90s`); `0` is None: a token that never expires, as kubeadm's."""
    if text in ("0", "0s"):
        return None
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise TokenError(f'invalid --ttl "{text}": expected a duration such as 30m, 24h or 1h30m')
    seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    return timedelta(seconds=seconds)


async def create_token_command(kubeconfig: Path, ttl: str, print_join_command: bool) -> str:
    """`kubeadm token create [--print-join-command]` against a tenant: the token, or the command a worker
    joins with (the tenant's endpoint, the token, the CA's hash)."""
    lifetime = parse_duration(ttl)
    async with KubeClient.from_kubeconfig(kubeconfig) as admin:
        token = await create_token(admin, lifetime)
        config = admin.config
    if not print_join_command:
        return token_string(token)
    endpoint = config.server.removeprefix("https://")
    assert config.ca_data is not None
    return (
        f"tenantgpu node run --join {endpoint} --token {token_string(token)} "
        f"--discovery-token-ca-cert-hash {ca_cert_hash(config.ca_data)}"
    )

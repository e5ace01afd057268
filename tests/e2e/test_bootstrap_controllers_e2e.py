"""The controller-manager duties that go with bootstrap tokens, as Kamaji runs them
(`--controllers=*,bootstrapsigner,tokencleaner`): the bootstrapsigner signs `kube-public/cluster-info`
for each signing token, the tokencleaner deletes expired token Secrets; and a kubelet joins with a
bootstrap token as kubeadm's TLS bootstrap does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from apiserver_harness import BackgroundLoop, Kubectl, RawClient, RunningAPIServer, wait_for
from bootstrap_token_helpers import new_token, token_secret
from cryptography import x509

from tenantgpu.apiserver.pki import render_kubeconfig
from tenantgpu.controlplane import ControlPlaneServices
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.bootstrap import request_certificate

pytestmark = pytest.mark.slow

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: Y2E=
    server: https://tenant-a.example:6443
  name: ""
contexts: null
current-context: ""
preferences: {}
users: null
"""


@pytest.fixture(scope="module")
def ready(apiserver: RunningAPIServer, services: ControlPlaneServices) -> RunningAPIServer:
    admin = RawClient(apiserver.kubeconfig)
    wait_for(
        "the default RBAC policy",
        lambda: admin.request("GET", "/readyz/poststarthook/rbac/bootstrap-roles").body == b"ok",
    )
    return apiserver


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _expected_signature(content: str, token_id: str, secret: str) -> str:
    """What kubeadm's discovery recomputes and compares: HS256 over the protected header and the content."""
    header = _b64url(json.dumps({"alg": "HS256", "kid": token_id}).replace(" ", "").encode())
    mac = hmac.new(secret.encode(), f"{header}.{_b64url(content.encode())}".encode(), hashlib.sha256).digest()
    return f"{header}..{_b64url(mac)}"


def _cluster_info(kubectl: Kubectl) -> dict[str, str]:
    found = kubectl("get", "configmap", "-n", "kube-public", "cluster-info", "-o", "json", check=False)
    return json.loads(found.stdout)["data"] if found.returncode == 0 else {}


def _apply_cluster_info(kubectl: Kubectl, **data: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": data,
    }
    kubectl("apply", "-f", "-", input=yaml.safe_dump(body))


def _in(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_cluster_info_is_signed_for_each_signing_token_while_it_exists(
    ready: RunningAPIServer, kubectl: Kubectl
) -> None:
    signing_id, signing_secret = new_token()
    kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(
            signing_id, signing_secret, usage_bootstrap_signing="true", usage_bootstrap_authentication="true"
        ),
    )
    other_id, other_secret = new_token()  # authenticates, does not sign
    kubectl(
        "apply", "-f", "-", input=token_secret(other_id, other_secret, usage_bootstrap_authentication="true")
    )

    # a cluster-info without a kubeconfig is left alone
    _apply_cluster_info(kubectl, note="not yet")
    time.sleep(0.5)
    assert _cluster_info(kubectl) == {"note": "not yet"}

    _apply_cluster_info(kubectl, kubeconfig=KUBECONFIG)
    key = f"jws-kubeconfig-{signing_id}"
    data = wait_for("the signature", lambda: (found := _cluster_info(kubectl)).get(key) and found)
    assert data[key] == _expected_signature(KUBECONFIG, signing_id, signing_secret)
    assert f"jws-kubeconfig-{other_id}" not in data

    # a new kubeconfig is signed anew
    changed = KUBECONFIG.replace("tenant-a.example", "tenant-a.example.org")
    _apply_cluster_info(kubectl, kubeconfig=changed)
    wait_for(
        "the new signature",
        lambda: _cluster_info(kubectl).get(key) == _expected_signature(changed, signing_id, signing_secret),
    )

    kubectl("delete", "secret", "-n", "kube-system", f"bootstrap-token-{signing_id}")
    wait_for("the signature to go", lambda: key not in _cluster_info(kubectl))
    assert _cluster_info(kubectl) == {"kubeconfig": changed}


def test_expired_token_secrets_are_deleted_when_they_expire(
    ready: RunningAPIServer, kubectl: Kubectl
) -> None:
    expired_id, expired_secret = new_token()
    kubectl(
        "apply", "-f", "-", input=token_secret(expired_id, expired_secret, expiration="2025-01-01T00:00:00Z")
    )
    later_id, later_secret = new_token()
    kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(later_id, later_secret, expiration=_in(3), usage_bootstrap_signing="true"),
    )
    kept_id, kept_secret = new_token()  # no expiration: kept
    kubectl("apply", "-f", "-", input=token_secret(kept_id, kept_secret))

    def exists(token_id: str) -> bool:
        return (
            kubectl(
                "get", "secret", "-n", "kube-system", f"bootstrap-token-{token_id}", check=False
            ).returncode
            == 0
        )

    wait_for("the expired token to be deleted", lambda: not exists(expired_id), timeout=5)
    missing = kubectl("get", "secret", "-n", "kube-system", f"bootstrap-token-{expired_id}", check=False)
    assert missing.stderr.strip() == (
        f'Error from server (NotFound): secrets "bootstrap-token-{expired_id}" not found'
    )
    assert exists(later_id) and exists(kept_id)
    wait_for("the token to be deleted once it expires", lambda: not exists(later_id), timeout=10)
    assert exists(kept_id)


def test_a_kubelet_joins_with_a_bootstrap_token(
    ready: RunningAPIServer, kubectl: Kubectl, background_loop: BackgroundLoop
) -> None:
    """kubeadm join's TLS bootstrap: the token asks for the node's client certificate, the csrapproving
    controller approves it because kubeadm's bindings let the token's group, the signer issues it."""
    token_id, secret = new_token()
    kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(
            token_id,
            secret,
            usage_bootstrap_authentication="true",
            auth_extra_groups="system:bootstrappers:kubeadm:default-node-token",
        ),
    )
    group = "--group=system:bootstrappers:kubeadm:default-node-token"
    kubectl(
        "create",
        "clusterrolebinding",
        "kubeadm:get-nodes-bootstrap",
        "--clusterrole=system:node-bootstrapper",
        group,
    )
    kubectl(
        "create",
        "clusterrolebinding",
        "kubeadm:node-autoapprove-bootstrap",
        "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        group,
    )
    bootstrap = render_kubeconfig(
        "tenant-a", ready.url, ready.server.ca_pem, "tls-bootstrap", token=f"{token_id}.{secret}"
    )
    path = ready.write_kubeconfig("tls-bootstrap.kubeconfig", bootstrap)

    async def join() -> bytes:
        async with KubeClient.from_kubeconfig(path) as client:
            return await request_certificate(client, "gpu-worker-1", timeout=20)

    pem: Any = background_loop.run(join(), timeout=30)
    certificate = x509.load_pem_x509_certificate(pem)
    assert certificate.subject.rfc4514_string() == "CN=system:node:gpu-worker-1,O=system:nodes"
    csr = json.loads(kubectl("get", "csr", "-o", "json").stdout)["items"]
    (mine,) = [c for c in csr if c["spec"]["username"] == f"system:bootstrap:{token_id}"]
    assert [(c["type"], c["reason"]) for c in mine["status"]["conditions"]] == [("Approved", "AutoApproved")]
    assert mine["spec"]["groups"] == [
        "system:bootstrappers",
        "system:bootstrappers:kubeadm:default-node-token",
        "system:authenticated",
    ]

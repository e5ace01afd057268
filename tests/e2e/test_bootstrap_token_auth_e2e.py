"""Bootstrap tokens at a tenant's API server, which runs with `--enable-bootstrap-token-auth=true` as
Kamaji's tenants do: `kubectl --token=<id>.<secret>` is `system:bootstrap:<id>` while Secret
`kube-system/bootstrap-token-<id>` lets it in, 401 otherwise, and then only what RBAC grants it.

No controller-manager duties run beside this module's server, so an expired token's Secret stays
(its cleaner is in test_bootstrap_controllers_e2e.py) and the expiry itself is what refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apiserver_harness import Kubectl, RawClient, RunningAPIServer, wait_for
from bootstrap_token_helpers import new_token, random_text, token_secret

from tenantgpu.apiserver.pki import render_kubeconfig

pytestmark = pytest.mark.slow

UNAUTHORIZED = "error: You must be logged in to the server (Unauthorized)"
STATUS_401 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


@pytest.fixture(scope="module")
def ready(apiserver: RunningAPIServer) -> RunningAPIServer:
    admin = RawClient(apiserver.kubeconfig)
    wait_for(
        "the default RBAC policy",
        lambda: admin.request("GET", "/readyz/poststarthook/rbac/bootstrap-roles").body == b"ok",
    )
    return apiserver


@pytest.fixture(scope="module")
def no_credentials(ready: RunningAPIServer) -> Path:
    """A kubeconfig with the server and its CA only: the token comes with `--token`."""
    text = render_kubeconfig("tenant-a", ready.url, ready.server.ca_pem, "joining-node")
    return ready.write_kubeconfig("no-credentials.kubeconfig", text)


def _token_kubeconfig(apiserver: RunningAPIServer, token: str) -> Path:
    text = render_kubeconfig("tenant-a", apiserver.url, apiserver.server.ca_pem, "bootstrap", token=token)
    return apiserver.write_kubeconfig(f"bootstrap-{token[:6]}.kubeconfig", text)


def test_kubectl_with_a_bootstrap_token_is_its_bootstrap_user(kubectl: Kubectl, no_credentials: Path) -> None:
    token_id, secret = new_token()
    kubectl(
        "apply",
        "-f",
        "-",
        input=token_secret(
            token_id,
            secret,
            usage_bootstrap_authentication="true",
            auth_extra_groups="system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:gpu",
        ),
    )
    token = f"--token={token_id}.{secret}"

    table = kubectl(token, "auth", "whoami", kubeconfig=no_credentials).stdout
    assert table.split("\n")[1].split() == ["Username", f"system:bootstrap:{token_id}"]
    review = json.loads(kubectl(token, "auth", "whoami", "-o", "json", kubeconfig=no_credentials).stdout)
    assert review["status"]["userInfo"] == {
        "username": f"system:bootstrap:{token_id}",
        "groups": [
            "system:bootstrappers",
            "system:bootstrappers:gpu",
            "system:bootstrappers:kubeadm:default-node-token",
            "system:authenticated",
        ],
    }


@pytest.mark.parametrize(
    ("what", "data", "presented"),
    [
        ("a wrong secret", {"usage_bootstrap_authentication": "true"}, "wrong"),
        (
            "an expired token",
            {"usage_bootstrap_authentication": "true", "expiration": "2025-01-01T00:00:00Z"},
            "",
        ),
        ("no authentication usage", {"usage_bootstrap_signing": "true"}, ""),
        (
            "an invalid extra group",
            {"usage_bootstrap_authentication": "true", "auth_extra_groups": "admins"},
            "",
        ),
    ],
)
def test_tokens_kube_refuses_get_its_401(
    ready: RunningAPIServer,
    kubectl: Kubectl,
    no_credentials: Path,
    what: str,
    data: dict[str, str],
    presented: str,
) -> None:
    token_id, secret = new_token()
    kubectl("apply", "-f", "-", input=token_secret(token_id, secret, **data))
    token = f"{token_id}.{random_text(16) if presented == 'wrong' else secret}"

    refused = kubectl(f"--token={token}", "get", "pods", kubeconfig=no_credentials, check=False)
    assert refused.returncode == 1 and refused.stderr.strip().endswith(UNAUTHORIZED), what
    response = RawClient(_token_kubeconfig(ready, token)).request("GET", "/api/v1/namespaces/default/pods")
    assert (response.status, response.json()) == (401, STATUS_401), what
    # kube-system's Secret is still there: it is the token that is refused, not a missing Secret
    assert kubectl("get", "secret", "-n", "kube-system", f"bootstrap-token-{token_id}").returncode == 0


def test_a_token_stops_working_when_its_secret_is_deleted(kubectl: Kubectl, no_credentials: Path) -> None:
    token_id, secret = new_token()
    kubectl("apply", "-f", "-", input=token_secret(token_id, secret, usage_bootstrap_authentication="true"))
    whoami = ("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert kubectl(f"--token={token_id}.{secret}", *whoami, kubeconfig=no_credentials).stdout == (
        f"system:bootstrap:{token_id}"
    )
    kubectl("delete", "secret", "-n", "kube-system", f"bootstrap-token-{token_id}")
    # kube-apiserver may go on accepting it for the 10 s it remembers a success; this server stops at once

    def refused() -> bool:
        answer = kubectl(f"--token={token_id}.{secret}", *whoami, kubeconfig=no_credentials, check=False)
        return answer.stderr.strip().endswith(UNAUTHORIZED)

    wait_for("the token to be refused", refused, timeout=15, interval=0.5)


def test_a_bootstrap_user_may_ask_for_certificates_once_bound_to_node_bootstrapper(
    kubectl: Kubectl, no_credentials: Path
) -> None:
    token_id, secret = new_token()
    kubectl("apply", "-f", "-", input=token_secret(token_id, secret, usage_bootstrap_authentication="true"))
    token = f"--token={token_id}.{secret}"
    user = f"system:bootstrap:{token_id}"

    def can_i() -> str:
        result = kubectl(token, "auth", "can-i", "create", "csr", kubeconfig=no_credentials, check=False)
        return result.stdout.strip()

    assert can_i() == "no"
    refused = kubectl(token, "get", "csr", kubeconfig=no_credentials, check=False)
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): certificatesigningrequests.certificates.k8s.io is forbidden: User "{user}" '
        'cannot list resource "certificatesigningrequests" in API group "certificates.k8s.io" at the cluster scope'
    )
    # what `kubeadm init` binds for its default tokens' group
    kubectl(
        "create",
        "clusterrolebinding",
        "kubeadm:kubelet-bootstrap",
        "--clusterrole=system:node-bootstrapper",
        "--group=system:bootstrappers",
    )
    assert wait_for("the binding to reach RBAC", lambda: can_i() == "yes")
    assert kubectl(token, "get", "csr", kubeconfig=no_credentials).stderr.strip() == "No resources found"
    assert (
        kubectl(
            token,
            "auth",
            "can-i",
            "get",
            "secrets",
            "-n",
            "kube-system",
            kubeconfig=no_credentials,
            check=False,
        ).stdout.strip()
        == "no"
    )

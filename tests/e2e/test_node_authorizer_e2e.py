"""The Node authorizer as kubelets and their admins meet it on a 1.33 tenant: `kubectl auth can-i` as a
node, and a kubelet's own certificate refused what its pods do not use, with kube's 403."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RawClient, RunningAPIServer, start_server, wait_for
from kubernetes import client as k8s
from kubernetes import config as k8s_config

pytestmark = pytest.mark.slow

AS_W1 = ("--as=system:node:w1", "--as-group=system:nodes")
AS_W2 = ("--as=system:node:w2", "--as-group=system:nodes")


@pytest.fixture(scope="module")
def apiserver(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningAPIServer]:
    """A 1.33 tenant: AuthorizeNodeWithSelectors is on."""
    running = start_server(
        background_loop, tmp_path_factory.mktemp("apiserver"), kubernetes_version="v1.33.1"
    )
    yield running
    background_loop.run(running.server.stop())
    running.datastore.close()


def _pod(name: str, node: str, secret: str) -> str:
    env = {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx", "env": [env]}]},
        }
    )


@pytest.fixture(scope="module")
def workloads(kubectl: Kubectl) -> None:
    """Secret `db` used by pod `web` on w1; secret `other` used by no pod."""
    for secret in ("db", "other"):
        kubectl("create", "secret", "generic", secret, "--from-literal=password=s3cret")
    kubectl("apply", "-f", "-", input=_pod("web", "w1", "db"))


def _node_kubeconfig(apiserver: RunningAPIServer, node: str) -> Path:
    """A kubelet's client certificate: CN system:node:<node>, O system:nodes."""
    return apiserver.write_kubeconfig(
        f"{node}.kubeconfig", apiserver.server.user_kubeconfig(f"system:node:{node}", ["system:nodes"])
    )


@pytest.mark.usefixtures("workloads")
def test_auth_can_i_answers_for_a_node_by_its_pods(kubectl: Kubectl) -> None:
    def can_i(*args: str) -> tuple[int, str]:
        result = kubectl("auth", "can-i", *args, check=False)
        return result.returncode, result.stdout.strip()

    assert can_i("get", "secret/db", *AS_W1) == (0, "yes")
    assert can_i("get", "secret/db", *AS_W2) == (
        1,
        "no - no relationship found between node 'w2' and this object",
    )
    assert can_i("list", "pods", *AS_W1) == (
        1,
        "no - can only list/watch pods with spec.nodeName field selector",
    )
    assert can_i("get", "node/w2", *AS_W1) == (1, "no - node 'w1' cannot read 'w2', only its own Node object")
    assert can_i("get", "node/w1", *AS_W1) == (0, "yes")
    assert can_i("patch", "pod/web", "--subresource=status", *AS_W1) == (0, "yes")
    assert can_i("update", "lease/w2", "-n", "kube-node-lease", *AS_W1) == (
        1,
        "no - can only access node lease with the same name as the requesting node",
    )
    assert can_i("create", "certificatesigningrequests", *AS_W1) == (0, "yes")
    # without the group the name is no node's: RBAC alone answers, and gives it nothing
    assert can_i("get", "secret/db", "--as=system:node:w1") == (1, "no")


@pytest.mark.usefixtures("workloads")
def test_a_kubelet_reads_what_its_pods_use_and_is_refused_the_rest(
    apiserver: RunningAPIServer, kubectl: Kubectl
) -> None:
    node = _node_kubeconfig(apiserver, "w1")
    secret = json.loads(kubectl("get", "secret", "db", "-o", "json", kubeconfig=node).stdout)
    assert secret["data"] == {"password": "czNjcmV0"}
    refused = kubectl("get", "secret", "other", kubeconfig=node, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): secrets "other" is forbidden: User "system:node:w1" cannot get'
        ' resource "secrets" in API group "" in the namespace "default": no relationship found between'
        " node 'w1' and this object"
    )
    mine = kubectl("get", "pods", "-A", "--field-selector=spec.nodeName=w1", "-o", "name", kubeconfig=node)
    assert mine.stdout.split() == ["pod/web"]

    raw = RawClient(node)
    response = raw.request("GET", "/api/v1/pods")
    assert response.status == 403
    status = response.json()
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 403, "Forbidden")
    assert status["message"] == (
        'pods is forbidden: User "system:node:w1" cannot list resource "pods" in API group "" at the cluster'
        " scope: can only list/watch pods with spec.nodeName field selector"
    )
    assert status["details"] == {"kind": "pods"}


@pytest.mark.usefixtures("workloads")
def test_the_python_client_watches_one_related_secret_by_name(apiserver: RunningAPIServer) -> None:
    """A kubelet's secret manager lists and watches one secret by `metadata.name`: the request names it."""
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(_node_kubeconfig(apiserver, "w1"))))
    try:
        listed = api.list_namespaced_secret("default", field_selector="metadata.name=db")
        assert [s.metadata.name for s in listed.items] == ["db"]
        with pytest.raises(k8s.ApiException) as refused:
            api.list_namespaced_secret("default", field_selector="metadata.name=other")
        assert refused.value.status == 403
        assert json.loads(refused.value.body)["message"] == (
            'secrets "other" is forbidden: User "system:node:w1" cannot list resource "secrets" in API group'
            ' "" in the namespace "default": no relationship found between node \'w1\' and this object'
        )
    finally:
        api.api_client.close()


def test_a_node_loses_a_secret_with_the_pod_that_used_it(kubectl: Kubectl) -> None:
    kubectl("create", "secret", "generic", "batch-token", "--from-literal=password=x")
    kubectl("apply", "-f", "-", input=_pod("batch", "w1", "batch-token"))
    can = kubectl("auth", "can-i", "get", "secret/batch-token", *AS_W1, check=False)
    assert can.stdout.strip() == "yes"
    kubectl("delete", "pod", "batch", "--grace-period=0", "--force")
    gone = kubectl("auth", "can-i", "get", "secret/batch-token", *AS_W1, check=False)
    assert gone.stdout.strip() == "no - no relationship found between node 'w1' and this object"


def test_before_1_32_a_node_lists_every_pod_and_reads_any_node(
    background_loop: BackgroundLoop, tmp_path: Path, kubectl: Kubectl
) -> None:
    older = start_server(background_loop, tmp_path, "tenant-131", kubernetes_version="v1.31.4")
    try:
        # discovery is system:discovery's, one of the default roles a post-start hook writes
        admin = RawClient(older.kubeconfig)
        wait_for("the default roles", lambda: admin.request("GET", "/readyz").status == 200)
        node = older.write_kubeconfig(
            "w1.kubeconfig", older.server.user_kubeconfig("system:node:w1", ["system:nodes"])
        )
        listed = kubectl("get", "pods", "-A", kubeconfig=node, check=False)
        assert (listed.returncode, listed.stderr.strip()) == (0, "No resources found")
        other = kubectl("get", "node", "w2", kubeconfig=node, check=False)
        assert other.stderr.strip() == 'Error from server (NotFound): nodes "w2" not found'
        secret = kubectl("get", "secret", "db", kubeconfig=node, check=False)
        assert "no relationship found between node 'w1' and this object" in secret.stderr
    finally:
        background_loop.run(older.server.stop())
        older.datastore.close()


def test_a_subject_access_review_weighs_a_nodes_field_selector(apiserver: RunningAPIServer) -> None:
    admin = RawClient(apiserver.kubeconfig)

    def review(**selector: object) -> dict[str, object]:
        attributes: dict[str, object] = {"verb": "list", "resource": "pods"}
        if selector:
            attributes["fieldSelector"] = selector
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": "system:node:w1", "groups": ["system:nodes"], "resourceAttributes": attributes},
        }
        response = admin.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
        assert response.status == 201, response.body
        return response.json()["status"]

    assert review(rawSelector="spec.nodeName=w1") == {"allowed": True}
    assert review(requirements=[{"key": "spec.nodeName", "operator": "In", "values": ["w1"]}]) == {
        "allowed": True
    }
    assert review(rawSelector="spec.nodeName=w2") == {
        "allowed": False,
        "reason": "can only list/watch pods with spec.nodeName field selector",
    }
    assert review() == {
        "allowed": False,
        "reason": "can only list/watch pods with spec.nodeName field selector",
    }

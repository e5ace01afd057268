"""End to end: deleting a namespace marks it Terminating; the namespace controller empties it over the
wire and removes its finalizer, upon which the API server removes the namespace.

Driven with the official Python client, raw requests and the real kubectl (which waits for the
namespace to go); a pod bound to a node leaves only when "its kubelet" (here: the test) removes it.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RawClient, RunningAPIServer
from apiserver_harness import wait_for as _wait_for

from tenantgpu.controlplane import NamespaceController

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core(
    apiserver: RunningAPIServer, namespace_controller: NamespaceController
) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))


@pytest.fixture(scope="module")
def raw(apiserver: RunningAPIServer) -> RawClient:
    return RawClient(apiserver.kubeconfig)


def _pod(name: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def _condition(namespace: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in namespace["status"].get("conditions") or [] if c["type"] == kind), None)


def test_namespace_waits_for_its_pods_then_goes(core: kubernetes.client.CoreV1Api, raw: RawClient) -> None:
    created = core.create_namespace({"metadata": {"name": "doomed"}})
    assert created.spec.finalizers == ["kubernetes"] and created.status.phase == "Active"
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "settings"}, "data": {"a": "b"}})
    core.create_namespaced_pod("doomed", _pod("pending"))
    core.create_namespaced_pod("doomed", _pod("running", node="worker-1"))

    response = raw.request("DELETE", "/api/v1/namespaces/doomed")
    assert response.status == 200
    marked = response.json()
    assert marked["kind"] == "Namespace"
    assert marked["status"]["phase"] == "Terminating"
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["spec"]["finalizers"] == ["kubernetes"]

    refused = raw.request("POST", "/api/v1/namespaces/doomed/configmaps", {"metadata": {"name": "late"}})
    assert refused.status == 403
    status = refused.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'configmaps "late" is forbidden: unable to create new content in namespace doomed '
        "because it is being terminated"
    )
    assert status["details"]["kind"] == "configmaps"
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace doomed is being terminated",
            "field": "metadata.namespace",
        }
    ]

    # The controller deletes everything; the bound pod is only marked, as a kubelet must stop it first.
    def only_the_bound_pod_left() -> bool:
        names = [p.metadata.name for p in core.list_namespaced_pod("doomed").items]
        return names == ["running"] and not core.list_namespaced_config_map("doomed").items

    _wait_for("the namespace's content deleted", only_the_bound_pod_left)
    assert core.read_namespaced_pod("running", "doomed").metadata.deletion_timestamp is not None

    def content_remaining() -> dict[str, Any] | None:
        namespace = raw.request("GET", "/api/v1/namespaces/doomed").json()
        condition = _condition(namespace, "NamespaceContentRemaining")
        return namespace if condition is not None and condition["status"] == "True" else None

    namespace = _wait_for("the NamespaceContentRemaining condition", content_remaining)
    remaining = _condition(namespace, "NamespaceContentRemaining")
    assert remaining is not None
    assert remaining["reason"] == "SomeResourcesRemain"
    assert remaining["message"] == "Some resources are remaining: pods. has 1 resource instances"
    discovery = _condition(namespace, "NamespaceDeletionDiscoveryFailure")
    assert discovery is not None
    assert (discovery["status"], discovery["reason"]) == ("False", "ResourcesDiscovered")
    content = _condition(namespace, "NamespaceDeletionContentFailure")
    assert content is not None
    assert (content["status"], content["reason"]) == ("False", "ContentDeleted")
    assert namespace["spec"]["finalizers"] == ["kubernetes"]

    # The kubelet has stopped the containers: it removes the pod, and the namespace follows.
    core.delete_namespaced_pod("running", "doomed", grace_period_seconds=0)
    _wait_for("the namespace removed", lambda: raw.request("GET", "/api/v1/namespaces/doomed").status == 404)


def test_finalize_is_the_only_way_to_change_spec_finalizers(
    core: kubernetes.client.CoreV1Api, raw: RawClient
) -> None:
    body = {"metadata": {"name": "held"}, "spec": {"finalizers": ["example.com/hold"]}}
    created = raw.request("POST", "/api/v1/namespaces", body).json()
    assert created["spec"]["finalizers"] == ["example.com/hold", "kubernetes"]
    created["spec"]["finalizers"] = []
    updated = raw.request("PUT", "/api/v1/namespaces/held", created).json()
    assert updated["spec"]["finalizers"] == ["example.com/hold", "kubernetes"]

    assert raw.request("DELETE", "/api/v1/namespaces/held").status == 200

    # The controller removes only its own finalizer; someone else's keeps the namespace Terminating.
    def ours_removed() -> dict[str, Any] | None:
        namespace = raw.request("GET", "/api/v1/namespaces/held").json()
        return namespace if namespace["spec"]["finalizers"] == ["example.com/hold"] else None

    namespace = _wait_for("the kubernetes finalizer removed", ours_removed)
    assert namespace["status"]["phase"] == "Terminating"
    again = raw.request("DELETE", "/api/v1/namespaces/held")
    assert again.status == 200 and again.json()["metadata"]["name"] == "held"

    namespace["spec"]["finalizers"] = []
    namespace["status"]["phase"] = "Active"  # the finalize subresource changes nothing but finalizers
    finalized = raw.request("PUT", "/api/v1/namespaces/held/finalize", namespace)
    assert finalized.status == 200
    assert finalized.json()["status"]["phase"] == "Terminating"
    assert raw.request("GET", "/api/v1/namespaces/held").status == 404


@pytest.mark.parametrize("version", ["1.29", "1.33"])
def test_kubectl_delete_namespace_waits_until_it_is_gone(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl, version: str
) -> None:
    name = f"kubectl-{version.replace('.', '')}"
    kubectl("create", "namespace", name, version=version)
    kubectl("create", "configmap", "settings", "--from-literal=a=b", "-n", name, version=version)
    core.create_namespaced_pod(name, _pod("pending"))
    deleted = kubectl("delete", "namespace", name, version=version)
    assert f'namespace "{name}" deleted' in deleted.stdout
    gone = kubectl("get", "namespace", name, version=version, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_python_client_deletes_a_namespace(core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "by-python"}})
    core.create_namespaced_config_map("by-python", {"metadata": {"name": "c"}})
    core.delete_namespace("by-python")

    def gone() -> bool:
        try:
            core.read_namespace("by-python")
        except kubernetes.client.ApiException as exc:
            return exc.status == 404
        return False

    _wait_for("the namespace removed", gone)

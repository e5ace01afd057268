"""In-place pod resize (`pods/resize`) on a 1.33 tenant, through real kubectl and the Python client:
kube's ValidatePodResize refusals, the kubelet's allocation (`Infeasible`, `Deferred` until room frees,
a restart where `resizePolicy` asks for one), ResourceQuota on the increase, and no such subresource
before 1.33. Facts: kubernetes v1.33 (pkg/apis/core/validation ValidatePodResize, the pod resize strategy,
the kubelet's handlePodResourcesResize and status manager), read in a vendored v1.33.13 tree."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, release_server

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow  # drives real kubectl binaries

NODE = "resize-node"


def _pod(name: str, cpu: str, *, restart_cpu: bool = False, limits: dict[str, str] | None = None) -> str:
    container: dict[str, Any] = {
        "name": "app",
        "image": "busybox",
        "command": ["sleep", "infinity"],
        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": limits or {"memory": "512Mi"}},
    }
    if restart_cpu:
        container["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": NODE, "containers": [container]},
    }
    return json.dumps(pod)


@pytest.fixture(scope="module")
def tenant_133(background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 1.33 tenant with one 4-CPU worker."""
    with release_server(background_loop, tmp_path_factory.mktemp("v133"), "v1.33.1") as kubeconfig:
        client = KubeClient.from_kubeconfig(kubeconfig)
        worker = Worker(client, NODE, [], SharingConfig(), cpu="4", memory="8Gi")
        background_loop.run(worker.start())
        try:
            yield kubeconfig
        finally:
            background_loop.run(worker.stop())
            background_loop.run(client.close())


def _run(kubectl: Kubectl, kubeconfig: Path) -> Callable[..., Any]:
    def run(*args: str, check: bool = True, input: str | None = None) -> Any:
        return kubectl(*args, kubeconfig=kubeconfig, check=check, input=input)

    return run


def _get(run: Callable[..., Any], name: str) -> dict[str, Any]:
    return json.loads(run("get", "pod", name, "-o", "json").stdout)


def _until(run: Callable[..., Any], name: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    for _ in range(150):
        pod = _get(run, name)
        if done(pod):
            return pod
        time.sleep(0.1)
    raise AssertionError(f"{name} never got there: {pod['status']}")


def _running(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") == "Running"


def _conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions") or []}


def _pending(run: Callable[..., Any], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod once it shows PodResizePending, and that condition."""
    pod = _until(run, name, lambda p: "PodResizePending" in _conditions(p))
    return pod, _conditions(pod)["PodResizePending"]


def _resize(run: Callable[..., Any], name: str, resources: dict[str, Any], check: bool = True) -> Any:
    patch = json.dumps({"spec": {"containers": [{"name": "app", "resources": resources}]}})
    return run("patch", "pod", name, "--subresource", "resize", "--patch", patch, check=check)


def test_a_resize_is_allocated_and_the_runtime_reports_it(kubectl: Kubectl, tenant_133: Path) -> None:
    run = _run(kubectl, tenant_133)
    run("apply", "-f", "-", input=_pod("grow", "500m"))
    before = _until(run, "grow", _running)
    entry = before["status"]["containerStatuses"][0]
    assert entry["allocatedResources"] == {"cpu": "500m", "memory": "256Mi"}
    assert before["metadata"]["generation"] == 1

    _resize(run, "grow", {"requests": {"cpu": "1500m"}})
    after = _until(
        run, "grow", lambda p: p["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "1500m"
    )
    assert after["metadata"]["generation"] == 2
    assert after["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1500m", "memory": "256Mi"}
    entry = after["status"]["containerStatuses"][0]
    assert entry["allocatedResources"] == {"cpu": "1500m", "memory": "256Mi"}
    assert entry["restartCount"] == 0  # NotRequired is the default policy
    assert not {"PodResizePending", "PodResizeInProgress"} & set(_conditions(after))
    # the subresource reads back the pod, as kube's ResizeREST does
    read = json.loads(run("get", "pod", "grow", "--subresource", "resize", "-o", "json").stdout)
    assert read["kind"] == "Pod" and read["metadata"]["name"] == "grow"
    run("delete", "pod", "grow", "--wait=false")


def test_more_than_the_node_has_is_infeasible_and_a_resize_back_clears_it(
    kubectl: Kubectl, tenant_133: Path
) -> None:
    run = _run(kubectl, tenant_133)
    run("apply", "-f", "-", input=_pod("huge", "500m"))
    _until(run, "huge", _running)
    _resize(run, "huge", {"requests": {"cpu": "6"}})
    pod, pending = _pending(run, "huge")
    assert (pending["status"], pending["reason"]) == ("True", "Infeasible")
    assert pending["message"] == "Node didn't have enough capacity: cpu, requested: 6000, capacity: 4000"
    assert pending["lastProbeTime"] and pending["lastTransitionTime"]
    assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "500m"

    _resize(run, "huge", {"requests": {"cpu": "500m"}})
    _until(run, "huge", lambda p: "PodResizePending" not in _conditions(p))
    run("delete", "pod", "huge", "--wait=false")


def test_a_resize_without_room_is_deferred_until_another_pod_leaves_and_restarts_where_asked(
    kubectl: Kubectl, tenant_133: Path
) -> None:
    run = _run(kubectl, tenant_133)
    run("apply", "-f", "-", input=_pod("neighbour", "2"))
    run("apply", "-f", "-", input=_pod("waiting", "1", restart_cpu=True))
    _until(run, "neighbour", _running)
    _until(run, "waiting", _running)

    _resize(run, "waiting", {"requests": {"cpu": "2500m"}})
    pod, pending = _pending(run, "waiting")
    assert pending["reason"] == "Deferred"
    assert (
        pending["message"]
        == "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000"
    )

    run("delete", "pod", "neighbour", "--wait=true")
    pod = _until(
        run,
        "waiting",
        lambda p: p["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "2500m",
    )
    assert "PodResizePending" not in _conditions(pod)
    entry = pod["status"]["containerStatuses"][0]
    assert entry["restartCount"] == 1
    assert entry["lastState"]["terminated"]["exitCode"] == 137
    events = json.loads(
        run(
            "get", "events", "--field-selector", "involvedObject.name=waiting,reason=Killing", "-o", "json"
        ).stdout
    )["items"]
    assert [e["message"] for e in events] == ["Container app resize requires restart"]
    run("delete", "pod", "waiting", "--wait=false")


def test_kube_s_resize_rules_refuse_what_may_not_change(kubectl: Kubectl, tenant_133: Path) -> None:
    run = _run(kubectl, tenant_133)
    run("apply", "-f", "-", input=_pod("strict", "500m"))
    _until(run, "strict", _running)

    refused = _resize(run, "strict", {"limits": {"memory": "256Mi"}}, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'The Pod "strict" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: '
        "memory limits cannot be decreased unless resizePolicy is RestartContainer"
    )
    refused = _resize(
        run, "strict", {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "1"}}, check=False
    )
    assert "Pod QOS Class may not change as a result of resizing" in refused.stderr
    assert 'spec: Invalid value: "Burstable"' in refused.stderr
    refused = _resize(run, "strict", {"requests": {"ephemeral-storage": "1Gi"}}, check=False)
    assert "spec: Forbidden: only cpu and memory resources are mutable" in refused.stderr
    rename = json.dumps([{"op": "replace", "path": "/spec/containers/0/name", "value": "other"}])
    refused = run(
        "patch", "pod", "strict", "--subresource", "resize", "--type", "json", "-p", rename, check=False
    )
    assert (
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
        in refused.stderr
    )
    # only the resources pass through: an image change in the same patch is dropped, not refused
    patch = json.dumps(
        {
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "600m"}}}]
            }
        }
    )
    run("patch", "pod", "strict", "--subresource", "resize", "--patch", patch)
    pod = _get(run, "strict")
    assert pod["spec"]["containers"][0]["image"] == "busybox"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "600m"
    run("delete", "pod", "strict", "--wait=false")


def test_the_python_client_resizes_and_quota_charges_the_increase(tenant_133: Path) -> None:
    api_client = kubernetes.config.new_client_from_config(str(tenant_133))
    core = kubernetes.client.CoreV1Api(api_client)
    namespace = "budget"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "cpu"}, "spec": {"hard": {"requests.cpu": "2"}}}
    )
    pod = json.loads(_pod("metered", "1"))
    core.create_namespaced_pod(namespace, pod)
    body = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m"}}}]}}
    resized = core.patch_namespaced_pod_resize("metered", namespace, body)
    assert resized.spec.containers[0].resources.requests["cpu"] == "1500m"
    time.sleep(0.5)  # the quota controller counts the new request
    body = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "3"}}}]}}
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.patch_namespaced_pod_resize("metered", namespace, body)
    assert refused.value.status == 403
    status = json.loads(refused.value.body)
    assert status["reason"] == "Forbidden"
    assert (
        "exceeded quota: cpu, requested: requests.cpu=1500m, used: requests.cpu=1500m, limited: requests.cpu=2"
        in status["message"]
    )
    core.delete_namespace(namespace)
    api_client.close()


def test_before_1_33_there_is_no_resize_subresource(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    with release_server(background_loop, tmp_path / "v132", "v1.32.3") as kubeconfig:
        run = _run(kubectl, kubeconfig)
        names = [r["name"] for r in json.loads(run("get", "--raw", "/api/v1").stdout)["resources"]]
        assert "pods/ephemeralcontainers" in names and "pods/resize" not in names
        spec = json.loads(_pod("old", "500m"))
        spec["spec"].pop("nodeName")
        run("apply", "-f", "-", input=json.dumps(spec))
        refused = _resize(run, "old", {"requests": {"cpu": "1"}}, check=False)
        assert refused.returncode == 1
        assert "the server could not find the requested resource" in refused.stderr

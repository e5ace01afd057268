"""A pod's RuntimeClass on the node: the kubelet looks the class up and hands its handler to the runtime,
which must have it (runc everywhere, nvidia where GPUs are). Otherwise the pod waits in ContainerCreating
with kube's `FailedCreatePodSandBox` and starts once the class can be honoured, as on a real node."""

from __future__ import annotations

import json
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, wait_for

from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow


def _runtime_class(name: str, handler: str) -> str:
    return json.dumps({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                       "handler": handler})  # fmt: skip


def _pod(name: str, node: str, runtime_class: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node,
                "runtimeClassName": runtime_class,
                "containers": [{"name": "app", "image": "busybox"}],
            },
        }
    )


def _pod_object(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "pod", name, "-o", "json").stdout)


def _sandbox_events(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.name={name},reason=FailedCreatePodSandBox"
    return json.loads(kubectl("get", "events", "--field-selector", selector, "-o", "json").stdout)["items"]


def _running(kubectl: Kubectl, name: str) -> bool:
    return _pod_object(kubectl, name)["status"].get("phase") == "Running"


def test_a_handler_the_runtime_lacks_keeps_the_pod_in_container_creating(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    cpu = Worker(client, "cpu-node", [], SharingConfig())
    gpu = Worker(client, "gpu-node", [GPUSpec.parse("NVIDIA L4:23034:1")], SharingConfig())
    background_loop.run(cpu.start())
    background_loop.run(gpu.start())
    try:
        nodes = {
            n["metadata"]["name"]: n
            for n in json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        }
        assert [h["name"] for h in nodes["cpu-node"]["status"]["runtimeHandlers"]] == ["", "runc"]
        assert [h["name"] for h in nodes["gpu-node"]["status"]["runtimeHandlers"]] == ["", "nvidia", "runc"]

        kubectl("apply", "-f", "-", input=_runtime_class("nvidia", "nvidia"))
        kubectl("apply", "-f", "-", input=_pod("no-toolkit", "cpu-node", "nvidia"))
        kubectl("apply", "-f", "-", input=_pod("toolkit", "gpu-node", "nvidia"))

        events = wait_for("a FailedCreatePodSandBox event", lambda: _sandbox_events(kubectl, "no-toolkit"))
        assert {(e["type"], e["message"], e["source"]["component"], e["source"]["host"]) for e in events} == {
            (
                "Warning",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox "
                'runtime: no runtime for "nvidia" is configured',
                "kubelet",
                "cpu-node",
            )
        }
        status = _pod_object(kubectl, "no-toolkit")["status"]
        assert status["phase"] == "Pending" and "podIP" not in status
        assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
        described = kubectl("describe", "pod", "no-toolkit").stdout
        assert "Runtime Class Name:  nvidia" in described
        assert 'no runtime for "nvidia" is configured' in described

        wait_for("the pod on the GPU node Running", lambda: _running(kubectl, "toolkit"))
        assert not _sandbox_events(kubectl, "toolkit")
    finally:
        background_loop.run(cpu.stop())
        background_loop.run(gpu.stop())
        background_loop.run(client.close())


def test_a_class_deleted_after_admission_holds_the_pod_until_it_is_back(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """The RuntimeClass admission plugin checks the class when the pod is created; the kubelet looks it up
    again when it creates the sandbox, and a class deleted in between stops the pod there."""
    kubectl("apply", "-f", "-", input=_runtime_class("short-lived", "runc"))
    kubectl("apply", "-f", "-", input=_pod("orphaned", "late-node", "short-lived"))
    kubectl("delete", "runtimeclass", "short-lived")
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, "late-node", [], SharingConfig())
    worker.kubelet.config_retry_seconds = 0.3  # the pod worker's 10-s back-off, shortened for the test
    background_loop.run(worker.start())
    try:
        events = wait_for("a FailedCreatePodSandBox event", lambda: _sandbox_events(kubectl, "orphaned"))
        assert events[0]["message"] == (
            'Failed to create pod sandbox: runtimeclass.node.k8s.io "short-lived" not found'
        )
        assert _pod_object(kubectl, "orphaned")["status"]["phase"] == "Pending"
        kubectl("apply", "-f", "-", input=_runtime_class("short-lived", "runc"))
        wait_for("the pod Running once its class is back", lambda: _running(kubectl, "orphaned"))
    finally:
        background_loop.run(worker.stop())
        background_loop.run(client.close())

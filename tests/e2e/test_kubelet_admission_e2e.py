"""A pod bound straight to a node (`spec.nodeName`) that does not fit is refused by that node's kubelet
as a real one refuses it: Failed with `OutOfcpu` (what `kubectl get pods` shows as its status), a
Warning event with kube's text, and the room of a deleted pod is free again."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow

NODE = "small-node"


def _pod(name: str, cpu: str, host_port: int | None = None) -> str:
    container: dict[str, Any] = {
        "name": "app",
        "image": "busybox",
        "command": ["sleep", "infinity"],
        "resources": {"requests": {"cpu": cpu}},
    }
    if host_port is not None:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port}]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": NODE, "containers": [container]},
    }
    return json.dumps(pod)


def _status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "pod", name, "-o", "json").stdout)["status"]


def _until_phase(kubectl: Kubectl, name: str, phases: tuple[str, ...]) -> dict[str, Any]:
    for _ in range(200):
        status = _status(kubectl, name)
        if status.get("phase") in phases:
            return status
        time.sleep(0.1)
    raise AssertionError(f"{name} never reached {phases}: {status}")


def test_the_kubelet_refuses_a_pod_without_room_and_frees_the_room_of_a_deleted_one(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, NODE, [], SharingConfig(), cpu="2", pods=10)
    background_loop.run(worker.start())
    try:
        kubectl("apply", "-f", "-", input=_pod("first", "1500m", host_port=8080))
        assert _until_phase(kubectl, "first", ("Running", "Failed"))["phase"] == "Running"

        kubectl("apply", "-f", "-", input=_pod("second", "1"))
        status = _until_phase(kubectl, "second", ("Running", "Failed"))
        assert status["phase"] == "Failed"
        assert status["reason"] == "OutOfcpu"
        assert status["message"] == (
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"
        )
        listed = kubectl("get", "pod", "second", "--no-headers").stdout.split()
        assert listed[1:3] == ["0/1", "OutOfcpu"]
        events = json.loads(
            kubectl(
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=second,reason=OutOfcpu",
                "-o",
                "json",
            ).stdout
        )["items"]
        assert [(e["type"], e["source"].get("component"), e["source"].get("host")) for e in events] == [
            ("Warning", "kubelet", NODE)
        ]
        assert events[0]["message"].startswith("Node didn't have enough resource: cpu, requested: 1000")

        kubectl("apply", "-f", "-", input=_pod("same-port", "100m", host_port=8080))
        status = _until_phase(kubectl, "same-port", ("Running", "Failed"))
        assert (status["phase"], status["reason"]) == ("Failed", "NodePorts")

        # The refused pods hold nothing; the running one holds its cpu until it is gone.
        kubectl("delete", "pod", "first", "--wait=true", timeout=60)
        kubectl("apply", "-f", "-", input=_pod("third", "1500m", host_port=8080))
        assert _until_phase(kubectl, "third", ("Running", "Failed"))["phase"] == "Running"
    finally:
        kubectl(
            "delete", "pod", "first", "second", "third", "same-port", "--ignore-not-found", "--wait=false"
        )
        background_loop.run(worker.stop())
        background_loop.run(client.close())


def test_a_critical_pod_without_room_is_admitted_by_preempting_a_pod_as_kubes_kubelet_does(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """pkg/kubelet/preemption: a `system-node-critical` pod bound to a full node evicts the pod that
    frees its cpu. The victim stays, Failed with reason `Preempting`, a DisruptionTarget condition and a
    Warning event; its containers are stopped (`Killing`); the critical pod runs."""
    node = "critical-node"
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, node, [], SharingConfig(), cpu="2", pods=10)
    background_loop.run(worker.start())

    def pod(name: str, namespace: str, cpu: str, **spec: Any) -> str:
        container = {"name": "app", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}
        return json.dumps({**body, "spec": {"nodeName": node, "containers": [container], **spec}})

    def until(name: str, namespace: str, phases: tuple[str, ...]) -> dict[str, Any]:
        for _ in range(200):
            status = json.loads(kubectl("get", "pod", name, "-n", namespace, "-o", "json").stdout)["status"]
            if status.get("phase") in phases:
                return status
            time.sleep(0.1)
        raise AssertionError(f"{name} never reached {phases}: {status}")

    try:
        kubectl("apply", "-f", "-", input=pod("small", "default", "250m"))
        kubectl("apply", "-f", "-", input=pod("big", "default", "1500m"))
        for name in ("small", "big"):
            assert until(name, "default", ("Running", "Failed"))["phase"] == "Running"
        kubectl(
            "apply", "-f", "-",
            input=pod("agent", "kube-system", "1", priorityClassName="system-node-critical"),
        )  # fmt: skip
        assert until("agent", "kube-system", ("Running", "Failed"))["phase"] == "Running"

        victim = until("big", "default", ("Failed",))
        assert (victim["reason"], victim["message"]) == (
            "Preempting",
            "Preempted in order to admit critical pod",
        )
        disruption = [c for c in victim["conditions"] if c["type"] == "DisruptionTarget"]
        assert [(c["status"], c["reason"], c["message"]) for c in disruption] == [
            ("True", "TerminationByKubelet", "Pod was preempted by Kubelet to accommodate a critical pod.")
        ]
        # its container was killed: exit 137, which `kubectl get pods` shows as Error
        killed = [cs["state"].get("terminated", {}) for cs in victim["containerStatuses"]]
        assert [(t.get("exitCode"), t.get("reason")) for t in killed] == [(137, "Error")]
        assert kubectl("get", "pod", "big", "--no-headers").stdout.split()[2] == "Error"
        assert until("small", "default", ("Running",))["phase"] == "Running"  # 1 cpu freed is enough

        events = json.loads(
            kubectl("get", "events", "--field-selector", "involvedObject.name=big", "-o", "json").stdout
        )["items"]
        seen = {(e["type"], e["reason"], e["message"]) for e in events if e["source"].get("host") == node}
        assert ("Warning", "Preempting", "Preempted in order to admit critical pod") in seen
        assert ("Normal", "Killing", "Stopping container app") in seen

        # A pod that is not critical is refused as before: nothing is evicted for it.
        kubectl("apply", "-f", "-", input=pod("plain", "default", "1"))
        refused = until("plain", "default", ("Running", "Failed"))
        assert (refused["phase"], refused["reason"]) == ("Failed", "OutOfcpu")
        assert until("small", "default", ("Running",))["phase"] == "Running"
    finally:
        kubectl("delete", "pod", "small", "big", "plain", "--ignore-not-found", "--wait=false")
        kubectl("delete", "pod", "agent", "-n", "kube-system", "--ignore-not-found", "--wait=false")
        background_loop.run(worker.stop())
        background_loop.run(client.close())

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

"""A worker's Lease is what keeps its Node Ready: stop it and the node lifecycle controller marks it Unknown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer

from tenantgpu.controlplane.nodelifecycle import NodeLifecycleController
from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow


async def _ready(client: KubeClient, name: str) -> str:
    node = await client.get("nodes", name)
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


async def _until_ready_is(client: KubeClient, name: str, status: str, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while await _ready(client, name) != status:
            await asyncio.sleep(0.1)


Scenario = Callable[[KubeClient, Callable[[str], Worker]], Awaitable[list[str]]]


def _run(apiserver: RunningAPIServer, background_loop: BackgroundLoop, scenario: Scenario) -> list[str]:
    """Runs `scenario` beside a node lifecycle controller with short timings; it gets the client and a
    factory of workers (the same node name again is the same machine coming back)."""

    async def run() -> list[str]:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        cfg = SharingConfig()
        controller = NodeLifecycleController(client, grace_seconds=2.0, monitor_seconds=0.2)

        clients: list[KubeClient] = []

        def worker(name: str) -> Worker:
            # A client of its own, as a kubelet process has: its event recorder starts afresh.
            clients.append(KubeClient.from_kubeconfig(apiserver.kubeconfig))
            return Worker(clients[-1], name, [GPUSpec("NVIDIA L4", 23034)], cfg, lease_duration_seconds=2,
                          status_report_seconds=1)  # fmt: skip

        await controller.start()
        try:
            return await scenario(client, worker)
        finally:
            await controller.stop()
            for opened in [client, *clients]:
                await opened.close()

    return background_loop.run(run(), timeout=60)


def test_stopped_worker_goes_unknown_and_recovers(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def scenario(client: KubeClient, worker: Callable[[str], Worker]) -> list[str]:
        flaky = worker("flaky")
        await flaky.start()
        seen = [await _ready(client, "flaky")]
        await flaky.stop()
        await _until_ready_is(client, "flaky", "Unknown")
        seen.append("Unknown")
        again = worker("flaky")
        await again.start()
        await _until_ready_is(client, "flaky", "True")
        seen.append("True")
        await again.stop()
        return seen

    assert _run(apiserver, background_loop, scenario) == ["True", "Unknown", "True"]


async def _pod_ready(client: KubeClient, name: str) -> str:
    pod = await client.get("pods", name, "default")
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


async def _until_pod_ready_is(client: KubeClient, name: str, status: str, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while await _pod_ready(client, name) != status:
            await asyncio.sleep(0.1)


def test_a_pod_of_a_lost_worker_is_not_ready_until_the_worker_is_back(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    """The node controller marks the pods of a silent node not Ready; the kubelet that comes back (a new
    process: it adopts its pods) writes Ready again, as the kubelet's status manager does."""

    async def scenario(client: KubeClient, worker: Callable[[str], Worker]) -> list[str]:
        first = worker("lost")
        await first.start()
        pod = {
            "metadata": {"name": "kept"},
            "spec": {"nodeName": "lost", "containers": [{"name": "c", "image": "x"}]},
        }
        await client.create("pods", pod, "default")
        seen = []
        for step, status in (("start", "True"), ("stop", "False"), ("again", "True")):
            if step == "stop":
                await first.stop()
            elif step == "again":
                first = worker("lost")
                await first.start()
            await _until_pod_ready_is(client, "kept", status)
            seen.append(status)
        await first.stop()
        return seen

    assert _run(apiserver, background_loop, scenario) == ["True", "False", "True"]


def _node_events(kubectl: Kubectl, node: str) -> list[tuple[str, str, str]]:
    """(source component, reason, message) of the node's events, oldest first, as kubectl lists them."""
    listed = kubectl("get", "events", "-n", "default", "--field-selector",
                     f"involvedObject.kind=Node,involvedObject.name={node}", "-o", "json")  # fmt: skip
    items = sorted(json.loads(listed.stdout)["items"], key=lambda e: e["metadata"]["name"])
    return [(e["source"]["component"], e["reason"], e["message"]) for e in items]


def test_a_node_tells_its_story_in_events(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """What `kubectl describe node` lists on a kind node: the kubelet's start and its conditions'
    changes, the node controller's RegisteredNode, and when the worker falls silent the controller's
    NodeNotReady; the kubelet that comes back starts again and reports the conditions the controller
    had set Unknown, and a condition whose status stays keeps its lastTransitionTime."""

    async def scenario(client: KubeClient, worker: Callable[[str], Worker]) -> list[str]:
        first = worker("told")
        await first.start()
        await asyncio.sleep(0.6)  # a few node controller passes: it registers the node once
        await first.stop()
        await _until_ready_is(client, "told", "Unknown")
        again = worker("told")
        await again.start()
        await _until_ready_is(client, "told", "True")
        node = await client.get("nodes", "told")
        await again.stop()
        return [f"{c['type']}={c['lastTransitionTime']}" for c in node["status"]["conditions"]]

    _run(apiserver, background_loop, scenario)
    kubelet_start = [
        ("kubelet", "Starting", "Starting kubelet."),
        ("kubelet", "NodeHasSufficientMemory", "Node told status is now: NodeHasSufficientMemory"),
        ("kubelet", "NodeHasNoDiskPressure", "Node told status is now: NodeHasNoDiskPressure"),
        ("kubelet", "NodeHasSufficientPID", "Node told status is now: NodeHasSufficientPID"),
        ("kubelet", "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods"),
        ("kubelet", "NodeReady", "Node told status is now: NodeReady"),
    ]
    events = _node_events(kubectl, "told")
    kubelet = [e for e in events if e[0] == "kubelet"]
    controller = [e for e in events if e[0] == "node-controller"]
    assert kubelet == kubelet_start * 2  # the second start finds every condition Unknown
    assert controller == [
        ("node-controller", "RegisteredNode", "Node told event: Registered Node told in Controller"),
        ("node-controller", "NodeNotReady", "Node told status is now: NodeNotReady"),
    ]
    described = kubectl("describe", "node", "told").stdout.split("Events:")[1]
    assert "Starting kubelet." in described and "Registered Node told in Controller" in described


def test_a_heartbeat_keeps_the_transition_times(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    """A kubelet that re-posts unchanged conditions moves their lastHeartbeatTime only."""

    async def scenario(client: KubeClient, worker: Callable[[str], Worker]) -> list[str]:
        steady = worker("steady")
        await steady.start()
        first = (await client.get("nodes", "steady"))["status"]["conditions"]
        await asyncio.sleep(2.5)  # status_report_seconds=1: the status loop re-posts in between
        later = (await client.get("nodes", "steady"))["status"]["conditions"]
        await steady.stop()
        return [
            f"{a['type']} {a['lastTransitionTime'] == b['lastTransitionTime']} "
            f"{a['lastHeartbeatTime'] != b['lastHeartbeatTime']}"
            for a, b in zip(first, later, strict=True)
        ]

    assert _run(apiserver, background_loop, scenario) == [
        f"{kind} True True" for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]

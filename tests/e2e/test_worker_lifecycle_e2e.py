"""A worker's Lease is what keeps its Node Ready: stop it and the node lifecycle controller marks it Unknown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from apiserver_harness import BackgroundLoop, RunningAPIServer

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

        def worker(name: str) -> Worker:
            return Worker(client, name, [GPUSpec("NVIDIA L4", 23034)], cfg, lease_duration_seconds=2,
                          status_report_seconds=1)  # fmt: skip

        await controller.start()
        try:
            return await scenario(client, worker)
        finally:
            await controller.stop()
            await client.close()

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

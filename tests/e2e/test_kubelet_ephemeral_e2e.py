"""The kubelet runs ephemeral containers (`kubectl debug`) once each, keeps them over its own restart, and
ends them with their pod."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, RunningAPIServer

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow

NODE = "debug-node"


async def _until(client: KubeClient, name: str, done: Any, timeout: float = 20) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            pod = await client.get("pods", name, "default")
            if done(pod):
                return pod
            await asyncio.sleep(0.1)


def _ephemeral(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in pod["status"].get("ephemeralContainerStatuses") or []}


def test_ephemeral_containers_run_once_survive_a_kubelet_restart_and_end_with_their_pod(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def scenario() -> None:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        worker = Worker(client, NODE, [], SharingConfig())
        await worker.start()
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "debugged"},
            "spec": {
                "nodeName": NODE,
                "restartPolicy": "Never",
                "containers": [{"name": "app", "image": "busybox", "command": ["sh", "-c", "sleep 4"]}],
            },
        }
        await client.create("pods", pod, "default")
        await _until(client, "debugged", lambda p: p["status"].get("phase") == "Running")
        debug = {
            "spec": {
                "ephemeralContainers": [
                    {"name": "quick", "image": "busybox", "command": ["echo", "checked"]},
                    {"name": "shell", "image": "busybox", "command": ["sh"], "stdin": True, "tty": True},
                ]
            }
        }
        await client.patch(
            "pods", "debugged", debug, "default", subresource="ephemeralcontainers", patch_type="strategic"
        )
        seen = await _until(
            client,
            "debugged",
            lambda p: (
                "terminated" in _ephemeral(p).get("quick", {}).get("state", {})
                and "running" in _ephemeral(p).get("shell", {}).get("state", {})
            ),
        )
        quick = _ephemeral(seen)["quick"]
        assert quick["state"]["terminated"]["exitCode"] == 0 and quick["ready"] is False
        assert worker.kubelet.container_log("default", "debugged", "quick") is not None

        # a restarted kubelet does not run them again
        await worker.stop()
        worker = Worker(client, NODE, [], SharingConfig())
        await worker.start()
        try:
            await asyncio.sleep(0.5)
            again = await client.get("pods", "debugged", "default")
            assert _ephemeral(again)["quick"] == quick
            log = worker.kubelet.container_log("default", "debugged", "quick") or ""
            assert "checked" not in log and "not kept over a kubelet restart" in log

            # the pod's end stops the shell that was still running, in the pod's final status
            final = await _until(client, "debugged", lambda p: p["status"].get("phase") == "Succeeded")
            shell = _ephemeral(final)["shell"]
            assert shell["state"]["terminated"]["exitCode"] == 137
            assert _ephemeral(final)["quick"]["state"] == quick["state"]
        finally:
            await worker.stop()

    background_loop.run(scenario())

"""A deleted pod is removed by its kubelet even when the courtesy final status cannot be written."""

from __future__ import annotations

import asyncio

import pytest
from apiserver_harness import BackgroundLoop, RunningAPIServer

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow

# Every status write of a pod is refused with a 500: the webhook it must call cannot be reached.
_STATUS_BLOCKER = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "refuse-pod-status"},
    "webhooks": [
        {
            "name": "refuse.status.example.com",
            "clientConfig": {"url": "https://127.0.0.1:9/validate"},
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["UPDATE"],
                    "resources": ["pods/status"],
                }
            ],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }
    ],
}


async def _phase(client: KubeClient, name: str) -> str | None:
    try:
        return (await client.get("pods", name, "default"))["status"].get("phase")
    except ApiError as err:
        if err.code == 404:
            return None
        raise


def test_pod_is_removed_although_its_final_status_is_refused(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    async def scenario() -> list[str | None]:
        seen: list[str | None] = []
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
        worker = Worker(client, "deleting-node", [], SharingConfig())
        await worker.start()
        try:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "refused-status"},
                "spec": {"nodeName": "deleting-node", "containers": [{"name": "c", "image": "busybox"}]},
            }
            await client.create("pods", pod, "default")
            async with asyncio.timeout(20):
                while await _phase(client, "refused-status") != "Running":
                    await asyncio.sleep(0.1)
            seen.append("Running")
            await client.create("validatingwebhookconfigurations", _STATUS_BLOCKER)
            with pytest.raises(ApiError) as refused:
                await client.patch(
                    "pods", "refused-status", {"status": {"message": "x"}}, "default", subresource="status"
                )
            seen.append(str(refused.value.code))
            await client.delete("pods", "refused-status", "default")
            async with asyncio.timeout(20):
                while (phase := await _phase(client, "refused-status")) is not None:
                    await asyncio.sleep(0.1)
            seen.append(phase)
        finally:
            await client.delete("validatingwebhookconfigurations", "refuse-pod-status")
            await worker.stop()
            await client.close()
        return seen

    assert background_loop.run(scenario(), timeout=90) == ["Running", "500", None]

"""The way of one pod, every seam on the wire: kubectl → API server → webhook *through the tunnel* →
HAMi scheduler → kubelet + device plugin on the worker → `kubectl logs` *through the tunnel*."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenantgpu.apiserver import errors as api_errors
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.hami.install import install_hami
from tenantgpu.hami.scheduler import HamiScheduler
from tenantgpu.hami.webhook import HamiWebhook
from tenantgpu.konnectivity import AgentIdentifiers, Backoff, ProxyAgent, ProxyServer, mapped_dial_policy
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.node.kubeletclient import KubeletClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow

SERVICE_HOST = "hami-scheduler.kube-system.svc"


async def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(kubeconfig), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(stdin.encode() if stdin else None), 60)
    return process.returncode or 0, output.decode()


@pytest.fixture
async def tenant(tmp_path: Path) -> AsyncIterator[dict]:
    pki = ServerPKI.create("tenant-a")
    proxy = ProxyServer(cert_pem=pki.serving_cert_pem, key_pem=pki.serving_key_pem, dial_timeout=3.0)
    logs = KubeletClient(egress=proxy.egress, error=api_errors.bad_request)
    server = APIServer(
        APIServerConfig(
            name="tenant-a", datastore=SQLiteDatastore(tmp_path / "state.db"), pki=pki,
            egress=proxy.egress, log_source=logs,
        )
    )  # fmt: skip
    await server.start()

    async def token_review(token: str) -> str | None:
        user = server.signer.verify(token)
        return user.name if user else None

    proxy.token_verifier = token_review
    await proxy.start()
    kubeconfig = tmp_path / "admin.kubeconfig"
    kubeconfig.write_text(server.admin_kubeconfig())
    client = KubeClient.from_kubeconfig(kubeconfig)

    async def node_lookup(name: str) -> dict | None:
        try:
            return await client.get("nodes", name)
        except ApiError:
            return None

    logs.node_lookup = node_lookup
    cfg = SharingConfig()
    worker = Worker(client, "worker-a1", [GPUSpec("NVIDIA L4", 23034, 2)], cfg)
    await worker.start()
    scheduler = HamiScheduler(client, cfg)
    await scheduler.start()
    webhook = HamiWebhook(cfg, quotas=lambda: scheduler.state.quotas)
    await webhook.start()
    # The service-addressed webhook (no URL): only the tunnel leads to it.
    await install_hami(client, webhook.ca_bundle)
    agent = ProxyAgent(
        proxy.address,
        pki.ca.cert_pem,
        server.issue_service_account_token("kube-system", "konnectivity-agent"),
        agent_id="worker-a1",
        identifiers=AgentIdentifiers(host=("worker-a1",)),
        # The worker's stand-in for cluster DNS + Service routing; the kubelet is dialled as addressed.
        dial_policy=mapped_dial_policy({(SERVICE_HOST, 443): ("127.0.0.1", webhook.port)}),
        backoff=Backoff(initial=0.05, cap=0.5),
        drain_timeout=1.0,
    )
    await agent.start()
    await agent.wait_connected(10)
    yield {"kubeconfig": kubeconfig, "webhook": webhook, "scheduler": scheduler}
    await agent.stop()
    await webhook.stop()
    await scheduler.stop()
    await worker.stop()
    await client.close()
    await proxy.stop()
    await server.stop()


async def test_one_pod_all_the_way_through_the_tunnel(tenant: dict) -> None:
    kubeconfig = tenant["kubeconfig"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "frac"},
        "spec": {
            "containers": [
                {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpumem": "4096"}}}
            ]
        },
    }
    code, out = await _kubectl(kubeconfig, "create", "--validate=false", "-f", "-", stdin=json.dumps(pod))
    assert code == 0, out
    assert tenant["webhook"].reviews >= 1  # the API server reached the webhook only through the agent
    for _ in range(300):
        code, phase = await _kubectl(kubeconfig, "get", "pod", "frac", "-o", "jsonpath={.status.phase}")
        if phase == "Running":
            break
        await asyncio.sleep(0.05)
    assert phase == "Running"
    code, raw = await _kubectl(kubeconfig, "get", "pod", "frac", "-o", "json")
    got = json.loads(raw)
    assert got["spec"]["schedulerName"] == "hami-scheduler"
    assert got["metadata"]["annotations"][ann.DEVICES_ALLOCATED].endswith(",NVIDIA,4096,0:;")
    code, logs = await _kubectl(kubeconfig, "logs", "frac")
    assert code == 0, logs
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=4096m" in logs and "0MiB / 4096MiB" in logs

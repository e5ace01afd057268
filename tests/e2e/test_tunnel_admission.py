"""A tenant API server calls HAMi's service-addressed webhook only through its Konnectivity tunnel.

kubectl creates a pod; the API server's `cluster` egress is the proxy server's `Egress`; the agent
authenticates with the tenant's own konnectivity-agent token and reaches the webhook on the worker.
With no agent connected the call fails with "No agent available" and failurePolicy decides.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

pytest.importorskip(
    "tenantgpu.apiserver.server", reason="the tenant API server lives on the apiserver branch"
)

from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.konnectivity import (
    AgentIdentifiers,
    Backoff,
    ProxyAgent,
    ProxyServer,
    mapped_dial_policy,
)

pytestmark = pytest.mark.slow

SERVICE = "hami-scheduler.kube-system.svc"


@dataclass
class Tenant:
    server: APIServer
    proxy: ProxyServer
    pki: ServerPKI
    kubeconfig: Path


async def _start_tenant(name: str, directory: Path) -> Tenant:
    directory.mkdir()
    pki = ServerPKI.create(name)
    # As Kamaji wires it: the proxy server serves agents with the API server's certificate.
    proxy = ProxyServer(cert_pem=pki.serving_cert_pem, key_pem=pki.serving_key_pem, dial_timeout=3.0)
    server = APIServer(
        APIServerConfig(
            name=name, datastore=SQLiteDatastore(directory / "state.db"), pki=pki, egress=proxy.egress
        )
    )
    await server.start()

    async def token_review(token: str) -> str | None:
        user = server.signer.verify(token)
        return user.name if user else None

    proxy.token_verifier = token_review
    await proxy.start()
    kubeconfig = directory / "admin.kubeconfig"
    kubeconfig.write_text(server.admin_kubeconfig())
    return Tenant(server, proxy, pki, kubeconfig)


class Webhook:
    """HAMi's mutating webhook stand-in on the worker: labels every pod it sees."""

    def __init__(self, pki: ServerPKI, directory: Path) -> None:
        self.reviewed: list[str] = []
        cert, key = pki.ca.issue_serving([SERVICE])
        (directory / "hook.crt").write_bytes(cert)
        (directory / "hook.key").write_bytes(key)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(directory / "hook.crt", directory / "hook.key")
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/mutate", self._mutate)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _mutate(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviewed.append(review["request"]["object"]["metadata"]["name"])
        patch = [{"op": "add", "path": "/metadata/labels", "value": {"tunnelled": "yes"}}]
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "allowed": True,
                    "patchType": "JSONPatch",
                    "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
                },
            }
        )


async def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(stdin.encode() if stdin else None), 60)
    return process.returncode or 0, output.decode()


def _webhook_configuration(ca_pem: bytes, failure_policy: str) -> str:
    return json.dumps(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "hami-webhook"},
            "webhooks": [
                {
                    "name": "vgpu.hami.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": failure_policy,
                    "clientConfig": {
                        "service": {
                            "name": "hami-scheduler",
                            "namespace": "kube-system",
                            "path": "/mutate",
                            "port": 443,
                        },
                        "caBundle": base64.b64encode(ca_pem).decode(),
                    },
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                        }
                    ],
                }
            ],
        }
    )


def _pod(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
    )


@pytest.fixture
async def tenant(tmp_path: Path) -> AsyncIterator[Tenant]:
    tenant = await _start_tenant("tenant-a", tmp_path / "tenant-a")
    yield tenant
    await tenant.proxy.stop(grace=None)
    await tenant.server.stop()


async def test_webhook_calls_ride_the_tunnel_and_fail_with_no_agent_available_without_one(
    tenant: Tenant, tmp_path: Path
) -> None:
    webhook = Webhook(tenant.pki, tmp_path)
    await webhook.start()
    dialled: list[tuple[str, int]] = []
    worker_policy = mapped_dial_policy({(SERVICE, 443): ("127.0.0.1", webhook.port)}, pass_unmapped=False)

    async def recording_policy(host: str, port: int) -> tuple[str, int]:
        dialled.append((host, port))
        return await worker_policy(host, port)

    agent = ProxyAgent(
        tenant.proxy.address,
        tenant.pki.ca.cert_pem,
        tenant.server.issue_service_account_token("kube-system", "konnectivity-agent"),
        agent_id="worker-a1",
        identifiers=AgentIdentifiers(host=("worker-a1",)),
        dial_policy=recording_policy,
        backoff=Backoff(initial=0.05, cap=0.5),
        drain_timeout=1.0,
    )
    try:
        code, out = await _kubectl(
            tenant.kubeconfig,
            "apply",
            "-f",
            "-",
            stdin=_webhook_configuration(tenant.pki.ca.cert_pem, "Fail"),
        )
        assert code == 0, out

        # No agent yet: the API server cannot reach the webhook, and failurePolicy Fail refuses the pod.
        code, out = await _kubectl(tenant.kubeconfig, "create", "-f", "-", stdin=_pod("before-agent"))
        assert code != 0
        assert "No agent available" in out and 'failed calling webhook "vgpu.hami.io"' in out

        await agent.start()
        await agent.wait_connected(10)
        code, out = await _kubectl(tenant.kubeconfig, "create", "-f", "-", stdin=_pod("through-tunnel"))
        assert code == 0, out
        code, labels = await _kubectl(
            tenant.kubeconfig, "get", "pod", "through-tunnel", "-o", "jsonpath={.metadata.labels.tunnelled}"
        )
        assert (code, labels) == (0, "yes")
        assert webhook.reviewed == ["through-tunnel"]
        assert dialled and set(dialled) == {(SERVICE, 443)}
        # Keep-alive: the next admissions reuse the tunnelled TLS connection instead of dialling again.
        dials = len(dialled)
        for name in ("kept-alive-1", "kept-alive-2"):
            code, out = await _kubectl(tenant.kubeconfig, "create", "-f", "-", stdin=_pod(name))
            assert code == 0, out
        assert webhook.reviewed == ["through-tunnel", "kept-alive-1", "kept-alive-2"]
        assert len(dialled) == dials

        # The agent leaves; with failurePolicy Ignore the pod is admitted unmutated.
        await agent.stop()
        async with asyncio.timeout(5):
            while tenant.proxy.agents:
                await asyncio.sleep(0.02)
        code, out = await _kubectl(
            tenant.kubeconfig,
            "apply",
            "-f",
            "-",
            stdin=_webhook_configuration(tenant.pki.ca.cert_pem, "Ignore"),
        )
        assert code == 0, out
        code, out = await _kubectl(tenant.kubeconfig, "create", "-f", "-", stdin=_pod("ignored"))
        assert code == 0, out
        code, labels = await _kubectl(
            tenant.kubeconfig, "get", "pod", "ignored", "-o", "jsonpath={.metadata.labels}"
        )
        assert (code, labels) == (0, "")
        assert webhook.reviewed == ["through-tunnel", "kept-alive-1", "kept-alive-2"]
    finally:
        await agent.stop()
        await webhook.stop()


async def test_an_agent_with_another_tenants_token_is_refused(tenant: Tenant, tmp_path: Path) -> None:
    other = await _start_tenant("tenant-b", tmp_path / "tenant-b")
    agent = ProxyAgent(
        tenant.proxy.address,
        tenant.pki.ca.cert_pem,
        other.server.issue_service_account_token("kube-system", "konnectivity-agent"),
        backoff=Backoff(initial=0.05, cap=0.2),
    )
    try:
        await agent.start()
        async with asyncio.timeout(10):
            while len(agent.reconnect_delays) < 2:
                await asyncio.sleep(0.02)
        assert not agent.connected
        assert "UNAUTHENTICATED" in (agent.last_error or "")
        assert tenant.proxy.agents == []
        own: Any = tenant.server.issue_service_account_token("kube-system", "konnectivity-agent")
        assert await tenant.proxy.authenticate({"authorization": f"Bearer {own}"}) is not None
    finally:
        await agent.stop()
        await other.proxy.stop(grace=None)
        await other.server.stop()

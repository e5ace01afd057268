"""The API server keeps webhook connections alive: a burst of admissions does not dial (and handshake) per
pod, and a connection the webhook closed while idle is replaced without failing the request."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from aiohttp import web
from apiserver_harness import BackgroundLoop, RawClient, RunningAPIServer, start_server

from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.kubeclient.config import load_cert_chain


class CountingTunnel:
    """An egress to the local webhook that counts the connections it opens; its dials can be made to
    hang, as fresh dials through a congested tunnel did."""

    def __init__(self) -> None:
        self.port = 0
        self.dials = 0
        self.hung_dials = 0
        self.hang_dials = False
        self._unhang: asyncio.Event | None = None

    async def release_hung_dials(self) -> None:
        self.hang_dials = False
        if self._unhang is not None:
            self._unhang.set()
            self._unhang = None

    async def open_connection(
        self, host: str, port: int, *, ssl: ssl.SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.dials += 1
        if self.hang_dials:
            self.hung_dials += 1
            if self._unhang is None:
                self._unhang = asyncio.Event()
            await self._unhang.wait()
        return await asyncio.open_connection("127.0.0.1", self.port, ssl=ssl, server_hostname=server_hostname)


class MutatingHook:
    """A TLS webhook that labels pods; it can drop every idle keep-alive connection on demand."""

    def __init__(self) -> None:
        self.ca = CertificateAuthority.create("keepalive-ca")
        self.calls = 0
        self.answer_delay = 0.0
        self.runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application()
        app.router.add_post("/mutate", self._mutate)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        cert, key = self.ca.issue_serving(["hook.kube-system.svc"])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        load_cert_chain(context, cert, key)
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def drop_idle_connections(self) -> None:
        assert self.runner is not None and self.runner.server is not None
        for handler in list(self.runner.server.connections):
            if handler.transport is not None:
                handler.transport.close()  # what a server's keep-alive timeout does
        await asyncio.sleep(0.05)

    async def _mutate(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.calls += 1
        await asyncio.sleep(self.answer_delay)
        patch = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]
        response = {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
        }
        return web.json_response(
            {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}
        )


@pytest.fixture(scope="module")
def hooked(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningAPIServer, CountingTunnel, MutatingHook]]:
    hook, tunnel = MutatingHook(), CountingTunnel()
    tunnel.port = background_loop.run(hook.start())
    running = start_server(background_loop, tmp_path_factory.mktemp("keepalive"), "keepalive", egress=tunnel)
    raw = RawClient(running.kubeconfig)
    webhook = {
        "name": "mutate.keepalive.io",
        "clientConfig": {
            "service": {"name": "hook", "namespace": "kube-system", "path": "/mutate", "port": 443},
            "caBundle": base64.b64encode(hook.ca.cert_pem).decode(),
        },
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
    }
    created = raw.request(
        "POST",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        {"metadata": {"name": "keepalive"}, "webhooks": [webhook]},
    )
    assert created.status == 201, created.body
    yield running, tunnel, hook
    background_loop.run(running.server.stop())
    assert hook.runner is not None
    background_loop.run(hook.runner.cleanup())


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "keepalive"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def test_sequential_admissions_share_one_tunnelled_connection(
    hooked: tuple[RunningAPIServer, CountingTunnel, MutatingHook],
) -> None:
    running, tunnel, hook = hooked
    raw = RawClient(running.kubeconfig)
    dials, calls = tunnel.dials, hook.calls
    for i in range(10):
        pod = raw.request("POST", "/api/v1/namespaces/default/pods", _pod(f"seq-{i}")).json()
        assert pod["metadata"]["labels"]["mutated"] == "yes"
    assert hook.calls - calls == 10
    assert tunnel.dials - dials <= 1


def test_a_connection_the_webhook_dropped_is_replaced_without_failing_the_pod(
    hooked: tuple[RunningAPIServer, CountingTunnel, MutatingHook], background_loop: BackgroundLoop
) -> None:
    running, tunnel, hook = hooked
    raw = RawClient(running.kubeconfig)
    raw.request("POST", "/api/v1/namespaces/default/pods", _pod("before-drop"))
    background_loop.run(hook.drop_idle_connections())
    dials = tunnel.dials
    created = raw.request("POST", "/api/v1/namespaces/default/pods", _pod("after-drop"))
    assert created.status == 201, created.body
    assert created.json()["metadata"]["labels"]["mutated"] == "yes"
    assert tunnel.dials == dials + 1


def test_while_fresh_dials_hang_concurrent_admissions_share_the_open_connection(
    hooked: tuple[RunningAPIServer, CountingTunnel, MutatingHook], background_loop: BackgroundLoop
) -> None:
    running, tunnel, hook = hooked
    warm = RawClient(running.kubeconfig).request("POST", "/api/v1/namespaces/default/pods", _pod("warm"))
    assert warm.status == 201, warm.body
    tunnel.hang_dials, hook.answer_delay = True, 0.05  # calls overlap, and no new connection opens

    def create(index: int) -> tuple[int, dict[str, Any]]:
        response = RawClient(running.kubeconfig).request(
            "POST", "/api/v1/namespaces/default/pods", _pod(f"congested-{index}")
        )
        return response.status, response.json()

    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(create, range(6)))
    finally:
        hook.answer_delay = 0.0
        background_loop.run(tunnel.release_hung_dials())
    # Go's transport behaviour: a call waiting for its dial takes a connection given back meanwhile,
    # so every pod is admitted (and mutated) by the one open connection, none times out.
    assert [status for status, _ in results] == [201] * 6, results
    assert all(pod["metadata"]["labels"]["mutated"] == "yes" for _, pod in results)
    assert tunnel.hung_dials >= 1  # the calls did overlap and did try to dial

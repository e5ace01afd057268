"""An AdmissionReview over HTTPS reaches a webhook on the worker through the tunnel, as API servers do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from konnectivity_helpers import WEBHOOK_HOST, AgentFactory, TenantCA, Webhook, client_ssl_context

from tenantgpu.konnectivity.server import ProxyServer
from tenantgpu.konnectivity.wire import AgentIdentifiers


@pytest.fixture
async def webhook(tenant_ca: TenantCA) -> AsyncIterator[Webhook]:
    hook = Webhook()
    await hook.start(tenant_ca)
    yield hook
    await hook.stop()


def _review(uid: str, blob: str = "") -> dict[str, object]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "object": {"kind": "Pod", "blob": blob}},
    }


async def test_an_admission_review_goes_over_https_through_the_tunnel_on_one_kept_alive_connection(
    proxy_server: ProxyServer, make_agent: AgentFactory, webhook: Webhook, tenant_ca: TenantCA
) -> None:
    dials: list[tuple[str, int]] = []

    async def counting_policy(host: str, port: int) -> tuple[str, int]:
        dials.append((host, port))
        return await webhook.policy(host, port)

    await make_agent(dial_policy=counting_policy)
    context = client_ssl_context(tenant_ca.cert_pem)
    async with aiohttp.ClientSession(connector=proxy_server.egress.connector(limit=10)) as session:
        for index in range(20):
            async with session.post(
                f"https://{WEBHOOK_HOST}:443/webhook", json=_review(f"uid-{index}"), ssl=context
            ) as response:
                assert response.status == 200
                body = await response.json()
                assert body["response"] == {
                    "uid": f"uid-{index}",
                    "allowed": True,
                    "patchType": "JSONPatch",
                    "patch": "",
                }
    assert dials == [(WEBHOOK_HOST, 443)]  # keep-alive: one tunnelled connection for all twenty
    assert len(webhook.connections) == 1


async def test_concurrent_reviews_and_a_large_object_come_back_intact(
    proxy_server: ProxyServer, make_agent: AgentFactory, webhook: Webhook, tenant_ca: TenantCA
) -> None:
    await make_agent(dial_policy=webhook.policy)
    context = client_ssl_context(tenant_ca.cert_pem)
    blob = "x" * (1024 * 1024)
    async with aiohttp.ClientSession(connector=proxy_server.egress.connector(limit=8)) as session:

        async def call(index: int) -> dict[str, object]:
            payload = _review(f"uid-{index}", blob if index == 0 else "")
            async with session.post(f"https://{WEBHOOK_HOST}/webhook", json=payload, ssl=context) as r:
                return await r.json()  # type: ignore[no-any-return]

        answers = await asyncio.gather(*(call(i) for i in range(24)))
    assert [a["response"]["uid"] for a in answers] == [f"uid-{i}" for i in range(24)]  # type: ignore[index]
    assert answers[0]["echoBytes"] == len(blob)
    assert 1 < len(webhook.connections) <= 8


async def test_the_webhook_certificate_is_checked_end_to_end(
    proxy_server: ProxyServer, make_agent: AgentFactory, webhook: Webhook
) -> None:
    await make_agent(dial_policy=webhook.policy)
    stranger = client_ssl_context(TenantCA.create("another-tenant-ca").cert_pem)
    async with aiohttp.ClientSession(connector=proxy_server.egress.connector()) as session:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.post(f"https://{WEBHOOK_HOST}/webhook", json=_review("u"), ssl=stranger)


async def test_with_no_agent_the_https_call_fails_with_no_agent_available(
    proxy_server: ProxyServer, tenant_ca: TenantCA
) -> None:
    context = client_ssl_context(tenant_ca.cert_pem)
    async with aiohttp.ClientSession(connector=proxy_server.egress.connector()) as session:
        with pytest.raises(aiohttp.ClientConnectorError, match="No agent available"):
            await session.post(f"https://{WEBHOOK_HOST}/webhook", json=_review("u"), ssl=context)


async def test_tls_streams_through_open_connection(
    proxy_server: ProxyServer, make_agent: AgentFactory, webhook: Webhook, tenant_ca: TenantCA
) -> None:
    await make_agent(dial_policy=webhook.policy)
    reader, writer = await proxy_server.egress.open_connection(
        WEBHOOK_HOST, 443, ssl=client_ssl_context(tenant_ca.cert_pem)
    )
    body = b'{"request": {"uid": "raw"}}'
    writer.write(
        b"POST /webhook HTTP/1.1\r\nHost: " + WEBHOOK_HOST.encode() + b"\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    response = await asyncio.wait_for(reader.read(), 5)
    assert response.startswith(b"HTTP/1.1 200")
    assert b'"uid": "raw"' in response
    writer.close()


async def test_start_tls_on_a_plain_tunnel_stream_as_the_api_servers_webhook_client_does(
    proxy_server: ProxyServer, make_agent: AgentFactory, webhook: Webhook, tenant_ca: TenantCA
) -> None:
    await make_agent(dial_policy=webhook.policy)
    reader, writer = await proxy_server.egress.open_connection(WEBHOOK_HOST, 443)
    await writer.start_tls(client_ssl_context(tenant_ca.cert_pem), server_hostname=WEBHOOK_HOST)
    body = b'{"request": {"uid": "upgraded"}}'
    writer.write(
        b"POST /webhook HTTP/1.1\r\nHost: " + WEBHOOK_HOST.encode() + b"\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    await writer.drain()
    response = await asyncio.wait_for(reader.read(), 5)
    assert response.startswith(b"HTTP/1.1 200")
    assert b'"uid": "upgraded"' in response
    writer.close()


async def test_a_kubelet_get_with_an_unverified_certificate_goes_through_the_connector(
    proxy_server: ProxyServer, make_agent: AgentFactory, webhook: Webhook
) -> None:
    # pods/log: the API server reaches the kubelet's self-signed HTTPS endpoint through the tunnel.
    async def kubelet(host: str, port: int) -> tuple[str, int]:
        assert (host, port) == ("10.0.0.5", 10250)
        return "127.0.0.1", webhook.port

    await make_agent(identifiers=AgentIdentifiers(ipv4=("10.0.0.5",)), dial_policy=kubelet)
    async with (
        aiohttp.ClientSession(connector=proxy_server.egress.connector(ssl=False)) as session,
        session.post("https://10.0.0.5:10250/webhook", json=_review("log"), ssl=False) as r,
    ):
        assert r.status == 200
        assert (await r.json())["response"]["uid"] == "log"

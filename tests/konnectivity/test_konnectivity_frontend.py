"""An API server in another process reaches the tunnel over the Unix socket with `ProxyService.Proxy`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from konnectivity_helpers import (
    AGENT_SA,
    FAST_BACKOFF,
    EchoServer,
    TenantCA,
    TokenIssuer,
    Webhook,
    client_ssl_context,
)

from tenantgpu.konnectivity.agent import ProxyAgent
from tenantgpu.konnectivity.backends import DialError, NoAgentAvailable
from tenantgpu.konnectivity.client import GrpcEgress
from tenantgpu.konnectivity.server import ProxyServer


@pytest.fixture
async def uds_server(
    server_cert: tuple[bytes, bytes], tenant_a_tokens: TokenIssuer, tmp_path: Path
) -> AsyncIterator[ProxyServer]:
    cert_pem, key_pem = server_cert
    server = ProxyServer(
        token_verifier=tenant_a_tokens.verify,
        cert_pem=cert_pem,
        key_pem=key_pem,
        uds_path=str(tmp_path / "konnectivity-server.socket"),
        dial_timeout=3.0,
    )
    await server.start()
    yield server
    await server.stop(grace=None)


@pytest.fixture
async def frontend(uds_server: ProxyServer) -> AsyncIterator[GrpcEgress]:
    egress = GrpcEgress(f"unix:{uds_server.uds_path}", dial_timeout=3.0)
    yield egress
    await egress.close()


@pytest.fixture
async def agent(
    uds_server: ProxyServer, tenant_ca: TenantCA, tenant_a_tokens: TokenIssuer
) -> AsyncIterator[ProxyAgent]:
    agent = ProxyAgent(
        uds_server.address, tenant_ca.cert_pem, tenant_a_tokens.token(AGENT_SA), backoff=FAST_BACKOFF
    )
    await agent.start()
    await agent.wait_connected(5)
    yield agent
    await agent.stop()


async def test_no_agent_comes_back_over_the_socket_as_no_agent_available(frontend: GrpcEgress) -> None:
    with pytest.raises(NoAgentAvailable, match="No agent available"):
        await frontend.open_connection("hami-scheduler.kube-system.svc", 443)


async def test_echo_and_a_large_payload_through_the_socket_frontend(
    frontend: GrpcEgress, agent: ProxyAgent, echo_server: EchoServer
) -> None:
    reader, writer = await frontend.open_connection("127.0.0.1", echo_server.port)
    payload = os.urandom(1024 * 1024)
    writer.write(payload)
    assert await asyncio.wait_for(reader.readexactly(len(payload)), 10) == payload
    writer.close()
    async with asyncio.timeout(5):
        while agent.open_connections or echo_server.closed_by_peer < 1:
            await asyncio.sleep(0.01)


async def test_a_worker_side_close_reaches_the_frontend(
    frontend: GrpcEgress, agent: ProxyAgent, echo_server: EchoServer
) -> None:
    reader, writer = await frontend.open_connection("127.0.0.1", echo_server.port)
    writer.write(b"QUIT")
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_a_refused_destination_is_the_agents_dial_error(
    frontend: GrpcEgress, agent: ProxyAgent, echo_server: EchoServer
) -> None:
    await echo_server.stop()
    with pytest.raises(DialError, match=f"127.0.0.1:{echo_server.port}"):
        await frontend.open_connection("127.0.0.1", echo_server.port)


async def test_concurrent_https_posts_through_the_socket_frontend(
    uds_server: ProxyServer, frontend: GrpcEgress, tenant_ca: TenantCA, tenant_a_tokens: TokenIssuer
) -> None:
    hook = Webhook()
    await hook.start(tenant_ca)
    agent = ProxyAgent(
        uds_server.address,
        tenant_ca.cert_pem,
        tenant_a_tokens.token(AGENT_SA),
        dial_policy=hook.policy,
        backoff=FAST_BACKOFF,
    )
    await agent.start()
    try:
        await agent.wait_connected(5)
        context = client_ssl_context(tenant_ca.cert_pem)
        async with aiohttp.ClientSession(connector=frontend.connector(limit=4)) as session:

            async def call(index: int) -> str:
                review = {"request": {"uid": f"u{index}"}}
                async with session.post(
                    "https://hami-scheduler.kube-system.svc/webhook", json=review, ssl=context
                ) as response:
                    return str((await response.json())["response"]["uid"])

            assert await asyncio.gather(*(call(i) for i in range(12))) == [f"u{i}" for i in range(12)]
    finally:
        await agent.stop()
        await hook.stop()


async def test_a_frontend_that_gives_up_cancels_the_agents_dial_with_dial_cls(
    uds_server: ProxyServer, tenant_ca: TenantCA, tenant_a_tokens: TokenIssuer
) -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def hanging_policy(host: str, port: int) -> tuple[str, int]:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return host, port

    agent = ProxyAgent(
        uds_server.address,
        tenant_ca.cert_pem,
        tenant_a_tokens.token(AGENT_SA),
        dial_policy=hanging_policy,
        backoff=FAST_BACKOFF,
    )
    await agent.start()
    impatient = GrpcEgress(f"unix:{uds_server.uds_path}", dial_timeout=0.5)
    try:
        await agent.wait_connected(5)
        with pytest.raises(DialError, match="timed out"):
            await impatient.open_connection("slow.example", 80)
        await asyncio.wait_for(cancelled.wait(), 5)  # the server passed DIAL_CLS on to the agent
        assert entered.is_set()
    finally:
        await impatient.close()
        await agent.stop()

"""Bytes reach a server on the worker only through the agent's stream, intact, and closes propagate."""

from __future__ import annotations

import asyncio
import os

import pytest
from konnectivity_helpers import AgentFactory, EchoServer

from tenantgpu.konnectivity.backends import DialError, NoAgentAvailable
from tenantgpu.konnectivity.server import ProxyServer


async def test_echo_through_the_tunnel(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    agent = await make_agent(agent_id="worker-a1")
    reader, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    writer.write(b"hello tunnel")
    assert await reader.readexactly(12) == b"hello tunnel"
    assert writer.get_extra_info("agent_id") == "worker-a1"
    assert proxy_server.agents[0].agent_id == agent.agent_id
    assert proxy_server.agents[0].identity == "system:serviceaccount:kube-system:konnectivity-agent"
    writer.close()


async def test_dial_policy_maps_a_service_name_to_the_worker_address(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    asked: list[tuple[str, int]] = []

    async def policy(host: str, port: int) -> tuple[str, int]:
        asked.append((host, port))
        return "127.0.0.1", echo_server.port

    await make_agent(dial_policy=policy)
    reader, writer = await proxy_server.egress.open_connection("hami-scheduler.kube-system.svc", 443)
    writer.write(b"WHO")
    assert await reader.readexactly(8) == b"echo:WHO"
    assert asked == [("hami-scheduler.kube-system.svc", 443)]
    writer.close()


async def test_no_agent_connected_fails_the_dial_with_upstreams_message(proxy_server: ProxyServer) -> None:
    with pytest.raises(NoAgentAvailable, match="No agent available"):
        await proxy_server.egress.open_connection("hami-scheduler.kube-system.svc", 443)


async def test_a_refused_destination_comes_back_as_the_agents_dial_error(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    await make_agent()
    await echo_server.stop()
    with pytest.raises(DialError, match=f"127.0.0.1:{echo_server.port}"):
        await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    assert proxy_server.agents[0].open_connections == 0


async def test_refusing_policy_reports_its_reason(
    proxy_server: ProxyServer, make_agent: AgentFactory
) -> None:
    async def only_services(host: str, port: int) -> tuple[str, int]:
        raise PermissionError(f"{host} is not a service of this cluster")

    await make_agent(dial_policy=only_services)
    with pytest.raises(DialError, match=r"evil\.example is not a service"):
        await proxy_server.egress.open_connection("evil.example", 80)


async def test_many_concurrent_connections_keep_their_bytes_apart(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    await make_agent()

    async def conversation(index: int) -> bytes:
        reader, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
        received = b""
        for turn in range(5):
            message = f"conn{index:03d}-turn{turn}|".encode()
            writer.write(message)
            received += await reader.readexactly(len(message))
        writer.close()
        return received

    results = await asyncio.gather(*(conversation(i) for i in range(40)))
    for index, received in enumerate(results):
        assert received == b"".join(f"conn{index:03d}-turn{t}|".encode() for t in range(5))
    assert echo_server.accepted == 40


async def test_one_mebibyte_payloads_arrive_intact_both_ways(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    await make_agent()
    payload = os.urandom(1024 * 1024)
    readers_writers = [
        await proxy_server.egress.open_connection("127.0.0.1", echo_server.port) for _ in range(3)
    ]
    for _, writer in readers_writers:
        writer.write(payload)
    echoed = await asyncio.gather(*(reader.readexactly(len(payload)) for reader, _ in readers_writers))
    assert all(e == payload for e in echoed)
    for _, writer in readers_writers:
        writer.close()


async def test_closing_on_the_api_server_side_closes_the_workers_connection(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    agent = await make_agent()
    reader, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    writer.write(b"ping")
    await reader.readexactly(4)
    assert agent.open_connections == 1
    writer.close()
    async with asyncio.timeout(3):
        while echo_server.closed_by_peer < 1 or agent.open_connections:
            await asyncio.sleep(0.01)
    assert proxy_server.agents[0].open_connections == 0


async def test_closing_on_the_worker_side_ends_the_api_servers_stream(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    agent = await make_agent()
    reader, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    writer.write(b"ping")
    assert await reader.readexactly(4) == b"ping"
    writer.write(b"QUIT")  # the echo server hangs up
    assert await asyncio.wait_for(reader.read(), 3) == b""
    async with asyncio.timeout(3):
        while agent.open_connections or proxy_server.agents[0].open_connections:
            await asyncio.sleep(0.01)
    writer.close()


async def test_when_the_proxy_server_stops_open_tunnelled_connections_end(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    agent = await make_agent()
    reader, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    writer.write(b"ping")
    await reader.readexactly(4)
    await proxy_server.stop(grace=None)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(), 5)
    async with asyncio.timeout(5):
        while agent.open_connections or echo_server.closed_by_peer < 1:
            await asyncio.sleep(0.01)

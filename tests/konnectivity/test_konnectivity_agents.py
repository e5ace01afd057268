"""Agents: who may connect, how they come back after a server restart, how they leave, who gets a dial."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from konnectivity_helpers import AGENT_SA, FAST_BACKOFF, AgentFactory, EchoServer, TenantCA, TokenIssuer

from tenantgpu.konnectivity.agent import Backoff, ProxyAgent
from tenantgpu.konnectivity.backends import NoAgentAvailable
from tenantgpu.konnectivity.server import ProxyServer
from tenantgpu.konnectivity.wire import AgentIdentifiers


async def _who(server: ProxyServer, host: str, port: int) -> bytes:
    reader, writer = await server.egress.open_connection(host, port)
    writer.write(b"WHO")
    answer = await reader.readuntil(b"WHO")
    writer.close()
    return answer


async def _until(condition, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def test_an_agent_token_of_another_tenant_is_refused(
    proxy_server: ProxyServer, make_agent: AgentFactory, tenant_b_tokens: TokenIssuer
) -> None:
    agent = await make_agent(wait=False, token=tenant_b_tokens.token(AGENT_SA))
    await _until(lambda: agent.last_error is not None and len(agent.reconnect_delays) >= 2)
    assert "UNAUTHENTICATED" in (agent.last_error or "")
    assert not agent.connected
    assert proxy_server.agents == []
    with pytest.raises(NoAgentAvailable, match="No agent available"):
        await proxy_server.egress.open_connection("127.0.0.1", 1)


async def test_a_token_of_another_service_account_is_refused(
    proxy_server: ProxyServer, make_agent: AgentFactory, tenant_a_tokens: TokenIssuer
) -> None:
    token = tenant_a_tokens.token("system:serviceaccount:default:default")
    agent = await make_agent(wait=False, token=token)
    await _until(lambda: agent.last_error is not None and len(agent.reconnect_delays) >= 1)
    assert "UNAUTHENTICATED" in (agent.last_error or "")
    assert proxy_server.agents == []


async def test_an_agent_with_the_wrong_ca_does_not_connect(
    proxy_server: ProxyServer, tenant_a_tokens: TokenIssuer
) -> None:
    stranger_ca = TenantCA.create("tenant-b-ca")
    agent = ProxyAgent(
        proxy_server.address, stranger_ca.cert_pem, tenant_a_tokens.token(AGENT_SA), backoff=FAST_BACKOFF
    )
    await agent.start()
    try:
        await _until(lambda: len(agent.reconnect_delays) >= 1)
        assert not agent.connected
        assert proxy_server.agents == []
    finally:
        await agent.stop()


async def test_the_agent_announces_itself_and_learns_the_server_id(
    proxy_server: ProxyServer, make_agent: AgentFactory
) -> None:
    identifiers = AgentIdentifiers(host=("worker-a1",), ipv4=("10.0.0.5",))
    agent = await make_agent(agent_id="worker-a1", identifiers=identifiers)
    assert agent.server_id == proxy_server.server_id
    [info] = proxy_server.agents
    assert (info.agent_id, info.identifiers, info.draining) == ("worker-a1", identifiers, False)


async def test_after_a_server_restart_the_agent_reconnects_with_backoff_and_dials_work_again(
    server_cert: tuple[bytes, bytes],
    tenant_a_tokens: TokenIssuer,
    tenant_ca: TenantCA,
    echo_server: EchoServer,
) -> None:
    cert_pem, key_pem = server_cert
    first = ProxyServer(token_verifier=tenant_a_tokens.verify, cert_pem=cert_pem, key_pem=key_pem)
    await first.start()
    port = first.port
    agent = ProxyAgent(
        first.address, tenant_ca.cert_pem, tenant_a_tokens.token(AGENT_SA), backoff=FAST_BACKOFF
    )
    await agent.start()
    second: ProxyServer | None = None
    try:
        await agent.wait_connected(5)
        await first.stop(grace=None)
        await _until(lambda: not agent.connected)
        # The server stays away for a while: the agent keeps trying, each wait longer than the last.
        await _until(lambda: len(agent.reconnect_delays) >= 4)
        delays = list(agent.reconnect_delays)[:4]
        assert all(later > earlier for earlier, later in itertools.pairwise(delays))
        second = ProxyServer(
            token_verifier=tenant_a_tokens.verify, cert_pem=cert_pem, key_pem=key_pem, port=port
        )
        await second.start()
        await second.wait_for_agents(1, timeout=5)
        await agent.wait_connected(5)
        assert agent.connect_count == 2
        assert agent.server_id == second.server_id
        assert await _who(second, "127.0.0.1", echo_server.port) == b"echo:WHO"
    finally:
        await agent.stop()
        if second is not None:
            await second.stop(grace=None)


def test_backoff_grows_exponentially_to_the_cap_with_bounded_jitter() -> None:
    backoff = Backoff(initial=1.0, cap=10.0, factor=2.0, jitter=0.2)
    rng = random.Random(7)
    delays = [backoff.delay(attempt, rng) for attempt in range(8)]
    bases = [1, 2, 4, 8, 10, 10, 10, 10]
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay <= base * 1.2
    assert len({round(d, 6) for d in delays[4:]}) > 1  # jitter spreads agents that lost the same server


async def test_a_stopping_agent_drains_new_dials_go_elsewhere_then_none_are_left(
    proxy_server: ProxyServer, make_agent: AgentFactory
) -> None:
    first_echo, second_echo = EchoServer(b"first"), EchoServer(b"second")
    await first_echo.start()
    await second_echo.start()

    def to(echo: EchoServer):  # type: ignore[no-untyped-def]
        async def policy(host: str, port: int) -> tuple[str, int]:
            return "127.0.0.1", echo.port

        return policy

    try:
        first = await make_agent(agent_id="first", dial_policy=to(first_echo), drain_timeout=5.0)
        second = await make_agent(agent_id="second", dial_policy=to(second_echo))
        # Find a connection that landed on the first agent and keep it open across the drain.
        held = None
        for _ in range(50):
            reader, writer = await proxy_server.egress.open_connection("svc", 80)
            if writer.get_extra_info("agent_id") == "first":
                held = (reader, writer)
                break
            writer.close()
        assert held is not None
        stopping = asyncio.create_task(first.stop())
        await _until(lambda: any(a.agent_id == "first" and a.draining for a in proxy_server.agents))
        answers = {await _who(proxy_server, "svc", 80) for _ in range(10)}
        assert answers == {b"second:WHO"}
        # The held connection still works while its agent drains.
        held[1].write(b"WHO")
        assert await held[0].readuntil(b"WHO") == b"first:WHO"
        held[1].close()
        await asyncio.wait_for(stopping, 5)
        await _until(lambda: [a.agent_id for a in proxy_server.agents] == ["second"])
        await second.stop()
        await _until(lambda: not proxy_server.agents)
        with pytest.raises(NoAgentAvailable):
            await proxy_server.egress.open_connection("svc", 80)
    finally:
        await first_echo.stop()
        await second_echo.stop()


async def test_a_draining_agent_still_serves_when_it_is_the_only_one(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    agent = await make_agent(drain_timeout=5.0)
    _, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    stopping = asyncio.create_task(agent.stop())
    await _until(lambda: proxy_server.agents[0].draining)
    assert await _who(proxy_server, "127.0.0.1", echo_server.port) == b"echo:WHO"
    writer.close()
    await asyncio.wait_for(stopping, 5)


async def test_dest_host_sends_a_kubelet_dial_to_its_own_nodes_agent(
    proxy_server: ProxyServer, make_agent: AgentFactory
) -> None:
    echoes = {name: EchoServer(name.encode()) for name in ("worker-a1", "worker-a2")}
    for echo in echoes.values():
        await echo.start()
    try:
        for name, echo in echoes.items():

            async def policy(host: str, port: int, echo: EchoServer = echo) -> tuple[str, int]:
                return "127.0.0.1", echo.port

            await make_agent(agent_id=name, identifiers=AgentIdentifiers(host=(name,)), dial_policy=policy)
        for _ in range(5):
            assert await _who(proxy_server, "worker-a2", 10250) == b"worker-a2:WHO"
            assert await _who(proxy_server, "worker-a1", 10250) == b"worker-a1:WHO"
        # A name no agent claims falls back to any agent (the `default` strategy).
        assert await _who(proxy_server, "hami-scheduler.kube-system.svc", 443) in {
            b"worker-a1:WHO",
            b"worker-a2:WHO",
        }
    finally:
        for echo in echoes.values():
            await echo.stop()


async def test_a_dial_in_flight_when_the_agent_vanishes_fails_rather_than_hangs(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    started = asyncio.Event()

    async def slow_policy(host: str, port: int) -> tuple[str, int]:
        started.set()
        await asyncio.sleep(30)
        return "127.0.0.1", echo_server.port

    agent = await make_agent(dial_policy=slow_policy, drain_timeout=0.1)
    dial = asyncio.create_task(proxy_server.egress.open_connection("svc", 80))
    await started.wait()
    await agent.stop()
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(dial, 5)


async def test_a_server_without_a_verifier_refuses_agents_until_one_is_assigned(
    server_cert: tuple[bytes, bytes], tenant_a_tokens: TokenIssuer, tenant_ca: TenantCA
) -> None:
    cert_pem, key_pem = server_cert
    server = ProxyServer(cert_pem=cert_pem, key_pem=key_pem)  # egress first, API server later
    await server.start()
    agent = ProxyAgent(
        server.address, tenant_ca.cert_pem, tenant_a_tokens.token(AGENT_SA), backoff=FAST_BACKOFF
    )
    await agent.start()
    try:
        await _until(lambda: len(agent.reconnect_delays) >= 1)
        assert "UNAUTHENTICATED" in (agent.last_error or "")
        server.token_verifier = tenant_a_tokens.verify
        await agent.wait_connected(5)
        assert [a.agent_id for a in server.agents] == [agent.agent_id]
    finally:
        await agent.stop()
        await server.stop(grace=None)

"""Fixtures for the tunnel: a tenant CA with serving certificates, tenant-signed tokens, local servers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from konnectivity_helpers import AGENT_SA, FAST_BACKOFF, AgentFactory, EchoServer, TenantCA, TokenIssuer

from tenantgpu.konnectivity.agent import ProxyAgent
from tenantgpu.konnectivity.server import ProxyServer


@pytest.fixture(scope="session")
def tenant_ca() -> TenantCA:
    return TenantCA.create("tenant-a-ca")


@pytest.fixture(scope="session")
def server_cert(tenant_ca: TenantCA) -> tuple[bytes, bytes]:
    return tenant_ca.issue("konnectivity-server", "127.0.0.1")


@pytest.fixture(scope="session")
def tenant_a_tokens() -> TokenIssuer:
    return TokenIssuer(b"tenant-a-signing-key")


@pytest.fixture(scope="session")
def tenant_b_tokens() -> TokenIssuer:
    return TokenIssuer(b"tenant-b-signing-key")


@pytest.fixture
async def proxy_server(
    server_cert: tuple[bytes, bytes], tenant_a_tokens: TokenIssuer
) -> AsyncIterator[ProxyServer]:
    cert_pem, key_pem = server_cert
    server = ProxyServer(
        token_verifier=tenant_a_tokens.verify, cert_pem=cert_pem, key_pem=key_pem, dial_timeout=3.0
    )
    await server.start()
    yield server
    await server.stop(grace=None)


@pytest.fixture
async def make_agent(
    proxy_server: ProxyServer, tenant_ca: TenantCA, tenant_a_tokens: TokenIssuer
) -> AsyncIterator[AgentFactory]:
    """Start agents of tenant A against the proxy server; all are stopped at the end."""
    agents: list[ProxyAgent] = []

    async def factory(wait: bool = True, **kwargs: object) -> ProxyAgent:
        kwargs.setdefault("token", tenant_a_tokens.token(AGENT_SA))
        kwargs.setdefault("backoff", FAST_BACKOFF)
        kwargs.setdefault("drain_timeout", 2.0)
        address = kwargs.pop("server_address", proxy_server.address)
        ca_pem = kwargs.pop("ca_pem", tenant_ca.cert_pem)
        agent = ProxyAgent(address, ca_pem, **kwargs)  # type: ignore[arg-type]
        agents.append(agent)
        await agent.start()
        if wait:
            await agent.wait_connected(timeout=5.0)
            if address == proxy_server.address:
                # The agent counts itself connected once its stream is open, the server once it has
                # registered the stream: a dial in between finds no agent (seen on a loaded machine).
                await proxy_server.backends.wait_for(
                    lambda sessions: any(s.info().agent_id == agent.agent_id for s in sessions), 5.0
                )
        return agent

    yield factory
    for agent in agents:
        await agent.stop()


@pytest.fixture
async def echo_server() -> AsyncIterator[EchoServer]:
    server = EchoServer(b"echo")
    await server.start()
    yield server
    await server.stop()

"""The proxy server's metrics tell an operator how many agents are ready, what is open, why dials fail."""

from __future__ import annotations

import pytest
from konnectivity_helpers import AgentFactory, EchoServer
from prometheus_client.parser import text_string_to_metric_families

from tenantgpu.konnectivity.backends import DialError, NoAgentAvailable
from tenantgpu.konnectivity.server import ProxyServer

PREFIX = "konnectivity_network_proxy_server_"


def _sample(server: ProxyServer, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(server.metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == PREFIX + name and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def test_metrics_follow_agents_connections_and_dial_failures(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer
) -> None:
    with pytest.raises(NoAgentAvailable):
        await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    assert _sample(proxy_server, "dial_failure_count_total", reason="no_agent") == 1
    assert _sample(proxy_server, "ready_backends") == 0

    await make_agent()
    assert _sample(proxy_server, "ready_backends") == 1
    assert _sample(proxy_server, "grpc_connections", service_method="Connect") == 1

    reader, writer = await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    writer.write(b"x")
    await reader.readexactly(1)
    assert _sample(proxy_server, "established_connections") == 1
    assert _sample(proxy_server, "dial_duration_seconds_count") == 1
    writer.close()

    await echo_server.stop()
    with pytest.raises(DialError):
        await proxy_server.egress.open_connection("127.0.0.1", echo_server.port)
    assert _sample(proxy_server, "dial_failure_count_total", reason="error_response") == 1

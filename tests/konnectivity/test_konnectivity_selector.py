"""The EgressSelectorConfiguration is Kamaji's, and a dialler configured from it reaches the tunnel."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from konnectivity_helpers import AgentFactory, EchoServer

from tenantgpu.konnectivity.client import GrpcEgress
from tenantgpu.konnectivity.selector import cluster_uds_name, egress_selector_configuration
from tenantgpu.konnectivity.server import ProxyServer


def test_the_configuration_is_kamajis_single_cluster_selection_over_grpc_uds() -> None:
    assert egress_selector_configuration() == {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "GRPC",
                    "transport": {"uds": {"udsName": "/run/konnectivity/konnectivity-server.socket"}},
                },
            }
        ],
    }


def test_unsupported_selections_are_refused_and_direct_means_no_tunnel() -> None:
    http_connect = egress_selector_configuration()
    http_connect["egressSelections"][0]["connection"]["proxyProtocol"] = "HTTPConnect"
    with pytest.raises(ValueError, match="HTTPConnect"):
        cluster_uds_name(http_connect)
    direct = {"kind": "EgressSelectorConfiguration", "egressSelections": [{"name": "cluster"}]}
    assert cluster_uds_name(direct) is None
    only_etcd = {"kind": "EgressSelectorConfiguration", "egressSelections": [{"name": "etcd"}]}
    assert cluster_uds_name(only_etcd) is None


async def test_a_dialler_configured_from_the_file_reaches_the_worker(
    proxy_server: ProxyServer, make_agent: AgentFactory, echo_server: EchoServer, tmp_path: Path
) -> None:
    socket_path = str(tmp_path / "konnectivity-server.socket")
    server = ProxyServer(token_verifier=None, authenticate_agents=False, uds_path=socket_path)
    await server.start()
    try:
        config_file = tmp_path / "egress-selector-configuration.yaml"
        config_file.write_text(yaml.safe_dump(egress_selector_configuration(socket_path)))
        uds = cluster_uds_name(yaml.safe_load(config_file.read_text()))
        await make_agent(server_address=server.address, ca_pem=None)
        egress = GrpcEgress(f"unix:{uds}")
        reader, writer = await egress.open_connection("127.0.0.1", echo_server.port)
        writer.write(b"through the file")
        assert await reader.readexactly(16) == b"through the file"
        writer.close()
        await egress.close()
    finally:
        await server.stop(grace=None)

"""The wire matches upstream Konnectivity: method paths, packet type numbers, field numbers, headers."""

from __future__ import annotations

from tenantgpu.konnectivity import wire
from tenantgpu.konnectivity._proto import agent_pb2, client_pb2


def test_services_and_methods_have_upstreams_grpc_paths() -> None:
    agent_service = agent_pb2.DESCRIPTOR.services_by_name["AgentService"]
    proxy_service = client_pb2.DESCRIPTOR.services_by_name["ProxyService"]
    assert agent_service.full_name == "AgentService"  # upstream declares no proto package
    assert [m.name for m in agent_service.methods] == ["Connect"]
    assert [m.name for m in proxy_service.methods] == ["Proxy"]
    for method in (agent_service.methods[0], proxy_service.methods[0]):
        assert method.client_streaming and method.server_streaming
        assert method.input_type.full_name == method.output_type.full_name == "Packet"


def test_packet_types_are_numbered_as_upstream() -> None:
    assert dict(client_pb2.PacketType.items()) == {
        "DIAL_REQ": 0,
        "DIAL_RSP": 1,
        "CLOSE_REQ": 2,
        "CLOSE_RSP": 3,
        "DATA": 4,
        "DIAL_CLS": 5,
        "DRAIN": 6,
    }


def test_message_fields_are_numbered_as_upstream() -> None:
    def fields(message: str) -> dict[str, int]:
        descriptor = client_pb2.DESCRIPTOR.message_types_by_name[message]
        return {f.name: f.number for f in descriptor.fields}

    assert fields("Packet") == {
        "type": 1,
        "dialRequest": 2,
        "dialResponse": 3,
        "data": 4,
        "closeRequest": 5,
        "closeResponse": 6,
        "closeDial": 7,
        "drain": 8,
    }
    assert fields("DialRequest") == {"protocol": 1, "address": 2, "random": 3}
    assert fields("DialResponse") == {"error": 1, "connectID": 2, "random": 3}
    assert fields("Data") == {"connectID": 1, "error": 2, "data": 3}
    assert fields("CloseRequest") == {"connectID": 1}
    assert fields("CloseResponse") == {"error": 1, "connectID": 2}
    assert fields("CloseDial") == {"random": 1}
    assert fields("Drain") == {}


def test_a_dial_request_round_trips_the_wire() -> None:
    packet = wire.Packet.FromString(
        wire.dial_request("hami-scheduler.kube-system.svc:443", 42).SerializeToString()
    )
    assert packet.type == client_pb2.DIAL_REQ
    assert packet.WhichOneof("payload") == "dialRequest"
    assert (packet.dialRequest.protocol, packet.dialRequest.address, packet.dialRequest.random) == (
        "tcp",
        "hami-scheduler.kube-system.svc:443",
        42,
    )


def test_agent_identifiers_parse_upstreams_url_encoding_and_ignore_unknown_keys() -> None:
    parsed = wire.AgentIdentifiers.parse("host=node1&ipv4=10.0.0.5&default-route=true&uid=abc&future=x")
    assert parsed == wire.AgentIdentifiers(ipv4=("10.0.0.5",), host=("node1",), default_route=True)
    assert wire.AgentIdentifiers.parse(parsed.encode()) == parsed
    assert parsed.serves_host("NODE1") and parsed.serves_host("10.0.0.5")
    assert not parsed.serves_host("node2")


def test_addresses_split_and_join_with_ipv6_brackets() -> None:
    assert wire.split_address("[fd00::1]:10250") == ("fd00::1", 10250)
    assert wire.join_address("fd00::1", 10250) == "[fd00::1]:10250"
    assert wire.split_address("worker-a1:10250") == ("worker-a1", 10250)

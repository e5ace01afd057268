"""Konnectivity's wire vocabulary: packet builders, gRPC metadata headers and agent identifiers."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode

from tenantgpu.konnectivity._proto import client_pb2 as pb

Packet = pb.Packet
PacketType = pb.PacketType

# Metadata keys as upstream's proto/header package names them; gRPC lowercases keys on the wire.
SERVER_ID = "serverid"
SERVER_COUNT = "servercount"
AGENT_ID = "agentid"
AGENT_IDENTIFIERS = "agentidentifiers"
AUTHORIZATION = "authorization"
BEARER_PREFIX = "Bearer "

# Upstream's error text when no backend can take a dial (pkg/server/backend_manager.go).
NO_AGENT_AVAILABLE = "No agent available"

# gRPC's default 4 MiB message cap is raised so one large write never fails a stream; writes
# are still chunked below it so a single connection cannot monopolise the shared stream.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DATA_CHUNK_BYTES = 256 * 1024
GRPC_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


def dial_request(address: str, random: int, protocol: str = "tcp") -> Packet:
    return Packet(
        type=pb.DIAL_REQ, dialRequest=pb.DialRequest(protocol=protocol, address=address, random=random)
    )


def dial_response(random: int, connect_id: int = 0, error: str = "") -> Packet:
    return Packet(
        type=pb.DIAL_RSP, dialResponse=pb.DialResponse(error=error, connectID=connect_id, random=random)
    )


def data(connect_id: int, payload: bytes, error: str = "") -> Packet:
    return Packet(type=pb.DATA, data=pb.Data(connectID=connect_id, data=payload, error=error))


def close_request(connect_id: int) -> Packet:
    return Packet(type=pb.CLOSE_REQ, closeRequest=pb.CloseRequest(connectID=connect_id))


def close_response(connect_id: int, error: str = "") -> Packet:
    return Packet(type=pb.CLOSE_RSP, closeResponse=pb.CloseResponse(connectID=connect_id, error=error))


def close_dial(random: int) -> Packet:
    return Packet(type=pb.DIAL_CLS, closeDial=pb.CloseDial(random=random))


def drain() -> Packet:
    return Packet(type=pb.DRAIN, drain=pb.Drain())


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (IPv6 hosts in brackets) into its parts; ValueError if it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class AgentIdentifiers:
    """What an agent says it can reach directly, sent URL-encoded in the `agentIdentifiers` header.

    Keys are upstream's: `ipv4`, `ipv6`, `host`, `cidr`, `default-route`; unknown keys are ignored
    so that newer agents stay compatible with older servers.
    """

    ipv4: tuple[str, ...] = ()
    ipv6: tuple[str, ...] = ()
    host: tuple[str, ...] = ()
    cidr: tuple[str, ...] = ()
    default_route: bool = False
    _hosts: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = {h.lower() for h in self.host} | set(self.ipv4) | set(self.ipv6)
        object.__setattr__(self, "_hosts", frozenset(names))

    @classmethod
    def parse(cls, encoded: str) -> AgentIdentifiers:
        values = parse_qs(encoded, keep_blank_values=False)
        route = values.get("default-route", ["false"])[0].strip().lower() in ("true", "1", "t")
        return cls(
            ipv4=tuple(values.get("ipv4", ())),
            ipv6=tuple(values.get("ipv6", ())),
            host=tuple(values.get("host", ())),
            cidr=tuple(values.get("cidr", ())),
            default_route=route,
        )

    def encode(self) -> str:
        pairs: list[tuple[str, str]] = []
        pairs += [("ipv4", v) for v in self.ipv4]
        pairs += [("ipv6", v) for v in self.ipv6]
        pairs += [("host", v) for v in self.host]
        pairs += [("cidr", v) for v in self.cidr]
        if self.default_route:
            pairs.append(("default-route", "true"))
        return urlencode(pairs)

    def serves_host(self, host: str) -> bool:
        """True when `host` is one of this agent's own names or addresses (the destHost strategy)."""
        return host.lower() in self._hosts

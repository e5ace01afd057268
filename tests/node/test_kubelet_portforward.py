"""The kubelet's port forwarding on the wire: SPDY streams paired by request and forwarded, refused
streams, the runtime's error text, and the WebSocket form's ports (kube's
`pkg/kubelet/cri/streaming/portforward`, containerd's CRI `portForward`).

Real kubectl (1.27–1.33) and the Python client through an API server are in
tests/e2e/test_port_forward_e2e.py; here the pieces a client depends on byte for byte."""

from __future__ import annotations

import asyncio
import re
import zlib

import pytest

from spdy_helpers import TransportSink, frames_of
from tenantgpu import spdyframes
from tenantgpu.node import portforward, sandbox
from tenantgpu.spdyframes import RST_STREAM, SYN_REPLY, FrameReader, FrameWriter

UID = "5a3c8f0e-2f7e-4b7a-9c1d-0e6f3a1b2c4d"


def test_the_header_dictionary_is_spdy3s() -> None:
    """Every SPDY/3 header block names its dictionary by adler32: kubectl's streams declare 0xe3c6a7c2."""
    assert len(spdyframes.DICTIONARY) == 1423
    assert zlib.adler32(spdyframes.DICTIONARY) == 0xE3C6A7C2


def test_header_blocks_round_trip_in_one_zlib_stream_per_direction() -> None:
    sink = TransportSink()
    writer = FrameWriter(sink)  # type: ignore[arg-type]
    writer.syn_stream(1, {"streamType": ["error"], "port": ["9395"], "requestID": ["0"]})
    writer.syn_stream(3, {"streamType": ["data"], "port": ["9395"], "requestID": ["0"]})
    decoder = spdyframes.HeaderDecoder()
    first, second = frames_of(sink.data)
    # names arrive lower-cased, as spdystream writes them
    assert spdyframes.syn_stream_headers(first, decoder) == {
        "streamtype": ["error"],
        "port": ["9395"],
        "requestid": ["0"],
    }
    assert spdyframes.syn_stream_headers(second, decoder)["streamtype"] == ["data"]
    with pytest.raises(ValueError, match="decompress"):
        spdyframes.HeaderDecoder().decode(second.payload[10:])  # the second block needs the first's context


class _Client:
    """kubectl's side of one SPDY port-forward connection, against a `SpdySession` in memory."""

    def __init__(self, target: portforward.Target) -> None:
        self.to_server = FrameReader()
        self.from_server = TransportSink()
        self.writer = FrameWriter(_Feed(self.to_server))  # type: ignore[arg-type]
        self.session = portforward.SpdySession(FrameWriter(self.from_server), target)  # type: ignore[arg-type]
        self.task = asyncio.ensure_future(self.session.run(self.to_server))

    def open_pair(self, first_id: int, port: str, request_id: str | None) -> None:
        for offset, kind in ((0, "error"), (2, "data")):
            headers = {"streamType": [kind], "port": [port]}
            if request_id is not None:
                headers["requestID"] = [request_id]
            self.writer.syn_stream(first_id + offset, headers)

    def received(self) -> list[spdyframes.Frame]:
        return frames_of(self.from_server.data)

    def stream_bytes(self, stream_id: int) -> bytes:
        return b"".join(f.payload for f in self.received() if not f.control and f.stream_id == stream_id)

    def ended(self, stream_id: int) -> bool:
        return any(not f.control and f.stream_id == stream_id and f.fin for f in self.received())

    async def close(self) -> None:
        self.to_server.feed_eof()
        await asyncio.wait_for(self.task, 5)


class _Feed:
    def __init__(self, reader: FrameReader) -> None:
        self.reader = reader

    def write(self, data: bytes) -> None:
        self.reader.feed_data(data)

    def is_closing(self) -> bool:
        return False


async def _until(condition: object, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def _echo_server() -> tuple[asyncio.Server, int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(b"echo:" + data)
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _target(listening: dict[int, int]) -> portforward.Target:
    async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if port not in listening:
            raise portforward.PortForwardError(sandbox.port_refused(UID, port))
        return await asyncio.open_connection("127.0.0.1", listening[port])

    return portforward.Target(sandbox.sandbox_id(UID), connect)


async def test_a_pair_of_streams_is_forwarded_both_ways_and_ends_when_the_pod_closes() -> None:
    server, port = await _echo_server()
    client = _Client(_target({9395: port}))
    try:
        client.open_pair(1, "9395", "0")
        client.writer.data(3, b"GET /metrics", fin=False)
        await _until(lambda: client.stream_bytes(3) == b"echo:GET /metrics")
        replies = [f.stream_id for f in client.received() if f.control and f.kind == SYN_REPLY]
        assert replies == [1, 3]
        assert client.stream_bytes(1) == b""  # nothing went wrong
        # the client is done sending: the pod's side gets containerd's second, then both streams end
        client.writer.data(3, b"", fin=True)
        await _until(lambda: client.ended(1) and client.ended(3))
        finished = [f.stream_id for f in client.received() if not f.control and f.fin]
        assert finished == [1, 3]  # the error stream first, as kube closes them
    finally:
        await client.close()
        server.close()


async def test_a_port_nothing_listens_on_is_the_runtimes_error_on_the_error_stream() -> None:
    client = _Client(_target({}))
    try:
        client.open_pair(1, "80", "7")
        await _until(lambda: client.ended(1) and client.ended(3))
        text = client.stream_bytes(1).decode()
        sandbox_id = sandbox.sandbox_id(UID)
        assert re.fullmatch(r"[0-9a-f]{64}", sandbox_id)
        assert text == (
            f"error forwarding port 80 to pod {sandbox_id}, uid : failed to execute portforward in network "
            f'namespace "{sandbox.network_namespace(UID)}": failed to connect to localhost:80 inside namespace '
            f'"{sandbox_id}", IPv4: dial tcp4 127.0.0.1:80: connect: connection refused '
            "IPv6 dial tcp6 [::1]:80: connect: connection refused "
        )
        assert client.stream_bytes(3) == b""
    finally:
        await client.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"streamType": ["data"]},  # no port
        {"streamType": ["data"], "port": ["0"]},
        {"streamType": ["data"], "port": ["http"]},
        {"streamType": ["data"], "port": ["70000"]},
        {"port": ["80"]},  # no stream type
        {"streamType": ["resize"], "port": ["80"]},
    ],
)
async def test_a_stream_with_a_missing_or_bad_header_is_reset(headers: spdyframes.Headers) -> None:
    client = _Client(_target({}))
    try:
        client.writer.syn_stream(1, headers)
        await _until(lambda: any(f.control for f in client.received()))
        (frame,) = client.received()
        assert (frame.kind, frame.stream_id) == (RST_STREAM, 1)
        assert frame.payload[4:] == spdyframes.CANCEL.to_bytes(4, "big")
    finally:
        await client.close()


async def test_streams_without_a_request_id_pair_by_consecutive_ids_as_for_old_clients() -> None:
    server, port = await _echo_server()
    client = _Client(_target({8080: port}))
    try:
        client.open_pair(5, "8080", None)  # error 5, data 7: request "5"
        client.writer.data(7, b"hi", fin=False)
        await _until(lambda: client.stream_bytes(7) == b"echo:hi")
    finally:
        await client.close()
        server.close()


async def test_two_connections_at_once_are_kept_apart_by_their_request_ids() -> None:
    server, port = await _echo_server()
    client = _Client(_target({8080: port}))
    try:
        # interleaved as two of kubectl's goroutines may open them
        client.writer.syn_stream(1, {"streamType": ["error"], "port": ["8080"], "requestID": ["0"]})
        client.writer.syn_stream(3, {"streamType": ["error"], "port": ["8080"], "requestID": ["1"]})
        client.writer.syn_stream(5, {"streamType": ["data"], "port": ["8080"], "requestID": ["1"]})
        client.writer.syn_stream(7, {"streamType": ["data"], "port": ["8080"], "requestID": ["0"]})
        client.writer.data(5, b"one", fin=False)
        client.writer.data(7, b"zero", fin=False)
        await _until(lambda: client.stream_bytes(5) == b"echo:one" and client.stream_bytes(7) == b"echo:zero")
    finally:
        await client.close()
        server.close()


async def test_a_ping_is_answered_and_the_end_of_the_connection_closes_the_pods_side() -> None:
    closed = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the kubelet's side goes away
        closed.set()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    client = _Client(_target({9394: server.sockets[0].getsockname()[1]}))
    try:
        client.writer.control(spdyframes.PING, 0, (1).to_bytes(4, "big"))
        client.open_pair(1, "9394", "0")
        await _until(lambda: any(f.kind == spdyframes.PING for f in client.received()))
        await asyncio.sleep(0.05)
    finally:
        await client.close()
    await asyncio.wait_for(closed.wait(), 5)
    server.close()


def test_the_websocket_forms_ports_come_from_the_query_with_kubes_refusals() -> None:
    assert portforward.query_ports(["9395", "80,443"]) == [9395, 80, 443]
    with pytest.raises(ValueError, match=r'^query parameter "port" is required$'):
        portforward.query_ports([])
    with pytest.raises(ValueError, match=r'^query parameter "port" cannot be empty$'):
        portforward.query_ports([""])
    with pytest.raises(ValueError, match=r'^port "0" must be > 0$'):
        portforward.query_ports(["0"])
    with pytest.raises(ValueError, match=r'^unable to parse "http" as a port: '):
        portforward.query_ports(["http"])


def test_each_sandbox_has_its_own_stable_id_and_network_namespace() -> None:
    other = "0b6f1c2e-aaaa-4bbb-8ccc-123456789abc"
    assert sandbox.sandbox_id(UID) == sandbox.sandbox_id(UID) != sandbox.sandbox_id(other)
    assert sandbox.network_namespace(UID).startswith("/var/run/netns/cni-")
    assert sandbox.network_namespace(UID) != sandbox.network_namespace(other)

"""The kubelet's `/portForward/<ns>/<pod>`: `kubectl port-forward` and the Python client's port forwarding.

The facts are kube's `pkg/kubelet/cri/streaming/portforward` (`httpstream.go`, `websocket.go`), which
the kubelet and containerd's streaming server both run, and containerd's CRI `portForward`:

- **SPDY/3.1** (`X-Stream-Protocol-Version: portforward.k8s.io`): each connection the client accepts
  locally opens two streams, `streamType` `error` and `data`, both naming the pod's `port` and sharing a
  `requestID`; a stream with a missing or bad header is reset. Once both are there the runtime connects
  to the port inside the pod's network namespace and copies bytes both ways on the data stream; a
  failure is written as text on the error stream (`error forwarding port P to pod <sandbox>, uid : …`,
  the CRI streaming server knows the sandbox and no uid), and both streams end.
- **WebSocket** (`v4.channel.k8s.io`, `v4.base64.channel.k8s.io`, or none: binary): the ports come from
  the `port` query parameters; port i has the data channel 2i and the error channel 2i+1, each of which
  first carries the port as two little-endian bytes. The connection closes when every port is done.

When one direction of a forwarded connection ends, the other gets a second to finish (containerd's
grace), then both end.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from tenantgpu.apiserver import podexec, spdy
from tenantgpu.apiserver.httputil import header_list
from tenantgpu.spdyframes import (
    CANCEL,
    GOAWAY,
    PING,
    RST_STREAM,
    SYN_STREAM,
    Frame,
    FrameReader,
    FrameWriter,
    HeaderDecoder,
    syn_stream_headers,
)

PROTOCOL = "portforward.k8s.io"
WEBSOCKET_PROTOCOLS = ("v4.channel.k8s.io", "v4.base64.channel.k8s.io")
STREAM_CREATION_TIMEOUT = 30.0  # the streaming server's default
CLOSE_GRACE = 1.0  # containerd: after one direction ends, the other has this long
_READ = 32 * 1024


class PortForwardError(Exception):
    """The runtime could not connect to the port; its text goes to the client's error stream."""


Connect = Callable[[int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


@dataclass(frozen=True)
class Target:
    """The pod as the streaming server names it in errors, and how to reach one of its ports."""

    sandbox: str
    connect: Connect

    def failure(self, port: int, err: Exception) -> str:
        return f"error forwarding port {port} to pod {self.sandbox}, uid : {err}"


def offered_protocols(request: web.BaseRequest) -> list[str]:
    return [p for p in header_list(request, "X-Stream-Protocol-Version") if p]


def query_ports(values: list[str]) -> list[int]:
    """The `port` query parameters (each may list several, comma-separated); ValueError with kube's text."""
    if not values:
        raise ValueError('query parameter "port" is required')
    ports = []
    for value in values:
        if not value:
            raise ValueError('query parameter "port" cannot be empty')
        for word in value.split(","):
            port = _parse_port(word, value)
            ports.append(port)
    return ports


def _parse_port(word: str, shown: str) -> int:
    if not word.isdigit() or int(word) > 65535:
        raise ValueError(
            f'unable to parse "{shown}" as a port: strconv.ParseUint: parsing "{word}": invalid syntax'
        )
    if int(word) < 1:
        raise ValueError(f'port "{shown}" must be > 0')
    return int(word)


async def serve(request: web.Request, target: Target) -> web.StreamResponse:
    """Answer a port-forward request on an HTTP connection of the kubelet's port."""
    if podexec.wants_websocket(request):
        return await _serve_websocket(request, target)
    if not spdy.wants_spdy(request):
        return web.Response(status=400, text="Upgrade request required")
    offered = offered_protocols(request)
    if not offered:
        return web.Response(status=400, text="unable to upgrade: X-Stream-Protocol-Version is required")
    if PROTOCOL not in offered:
        text = f"unable to upgrade: unable to negotiate protocol: client supports {_go_list(offered)}, server accepts [{PROTOCOL}]"
        return web.Response(status=403, text=text, headers={"X-Accepted-Stream-Protocol-Versions": PROTOCOL})
    response = web.StreamResponse(
        status=101,
        headers={"Connection": "Upgrade", "Upgrade": spdy.SPDY, "X-Stream-Protocol-Version": PROTOCOL},
    )
    await response.prepare(request)
    transport = request.transport
    assert transport is not None
    reader = FrameReader()
    # From here on the connection carries SPDY frames, not HTTP.
    request.protocol.set_parser(reader)  # type: ignore[arg-type]
    request.protocol.keep_alive(False)
    session = SpdySession(FrameWriter(transport), target)
    try:
        await session.run(reader)
    finally:
        transport.close()
    return response


def _go_list(values: list[str]) -> str:
    return "[" + " ".join(values) + "]"


@dataclass
class _Pair:
    """The two streams of one forwarded connection."""

    request_id: str
    port: int = 0
    data_id: int | None = None
    error_id: int | None = None
    upstream: asyncio.StreamWriter | None = None
    pending: list[bytes] = field(default_factory=list)  # what the client sent before the port answered
    client_done: bool = False
    task: asyncio.Task[None] | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class SpdySession:
    """One SPDY connection of port forwarding: streams paired by request, each pair forwarded."""

    def __init__(self, writer: FrameWriter, target: Target) -> None:
        self.writer = writer
        self.target = target
        self._pairs: dict[str, _Pair] = {}
        self._by_stream: dict[int, _Pair] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: list[asyncio.TimerHandle] = []

    async def run(self, reader: FrameReader) -> None:
        decoder = HeaderDecoder()
        try:
            while (frame := await reader.frames.get()) is not None:
                if frame.control:
                    if frame.kind == SYN_STREAM:
                        self._open(frame, decoder)
                    elif frame.kind == PING:
                        self.writer.control(PING, 0, frame.payload)
                    elif frame.kind == RST_STREAM:
                        pair = self._by_stream.get(frame.stream_id)
                        if pair is not None:
                            self._close_upstream(pair)
                    elif frame.kind == GOAWAY:
                        break
                else:
                    self._from_client(frame)
        except ValueError:
            pass  # an unreadable header block: the connection cannot go on
        finally:
            for timer in self._timers:
                timer.cancel()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            # their ends are written while the connection is still there
            await asyncio.gather(*tasks, return_exceptions=True)
            for pair in list(self._pairs.values()):
                self._close_upstream(pair)

    def _open(self, frame: Frame, decoder: HeaderDecoder) -> None:
        headers = syn_stream_headers(frame, decoder)
        stream_id = frame.stream_id
        port_text = (headers.get("port") or [""])[0]
        kind = (headers.get("streamtype") or [""])[0]
        try:
            if not port_text:
                raise ValueError('"port" header is required')
            port = _parse_port(port_text, port_text)
            if not kind:
                raise ValueError('"streamType" header is required')
            if kind not in ("error", "data"):
                raise ValueError(f'invalid stream type "{kind}"')
        except ValueError:
            self.writer.rst_stream(stream_id, CANCEL)  # the stream handler refused it
            return
        self.writer.syn_reply(stream_id)
        request_id = (headers.get("requestid") or [""])[0]
        if not request_id:
            # a client too old to send request ids: pair by consecutive stream ids, as kube does
            request_id = str(stream_id if kind == "error" else stream_id - 2)
        pair = self._pairs.get(request_id)
        if pair is None:
            pair = self._pairs[request_id] = _Pair(request_id)
            self._later(STREAM_CREATION_TIMEOUT, lambda: self._creation_timeout(pair))
        if (pair.error_id if kind == "error" else pair.data_id) is not None:
            if pair.error_id is not None:
                message = f"error processing stream for request {request_id}: {kind} stream already assigned"
                self.writer.data(pair.error_id, message.encode(), fin=False)
            return
        self._by_stream[stream_id] = pair
        if kind == "error":
            pair.error_id = stream_id
        else:
            pair.data_id, pair.port = stream_id, port
        if pair.error_id is not None and pair.data_id is not None:
            pair.task = self._spawn(self._forward(pair))

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _later(self, delay: float, callback: Callable[[], None]) -> None:
        self._timers.append(asyncio.get_running_loop().call_later(delay, callback))

    def _creation_timeout(self, pair: _Pair) -> None:
        if pair.task is None and self._pairs.get(pair.request_id) is pair:
            if pair.error_id is not None:
                message = f"(conn={id(self):#x}, request={pair.request_id}) timed out waiting for streams"
                self.writer.data(pair.error_id, message.encode(), fin=True)
            self._forget(pair)

    def _from_client(self, frame: Frame) -> None:
        pair = self._by_stream.get(frame.stream_id)
        if pair is None or frame.stream_id != pair.data_id or pair.client_done:
            return
        if frame.payload:
            if pair.upstream is not None:
                pair.upstream.write(frame.payload)
            else:
                pair.pending.append(frame.payload)
        if frame.fin:
            pair.client_done = True
            if pair.task is not None:
                self._later(CLOSE_GRACE, lambda: self._close_upstream(pair))

    async def _forward(self, pair: _Pair) -> None:
        assert pair.data_id is not None and pair.error_id is not None
        try:
            try:
                reader, writer = await self.target.connect(pair.port)
            except (PortForwardError, OSError) as err:
                self.writer.data(pair.error_id, self.target.failure(pair.port, err).encode(), fin=False)
                return
            pair.upstream = writer
            for chunk in pair.pending:
                writer.write(chunk)
            pair.pending.clear()
            if pair.client_done:
                self._later(CLOSE_GRACE, lambda: self._close_upstream(pair))
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while chunk := await reader.read(_READ):
                    self.writer.data(pair.data_id, chunk, fin=False)
        finally:
            # kube closes the error stream, then the data stream
            self.writer.data(pair.error_id, b"", fin=True)
            self.writer.data(pair.data_id, b"", fin=True)
            self._close_upstream(pair)
            self._forget(pair)

    def _close_upstream(self, pair: _Pair) -> None:
        if pair.upstream is not None:
            pair.upstream.close()

    def _forget(self, pair: _Pair) -> None:
        self._pairs.pop(pair.request_id, None)
        for stream_id in (pair.data_id, pair.error_id):
            if stream_id is not None:
                self._by_stream.pop(stream_id, None)


async def _serve_websocket(request: web.Request, target: Target) -> web.StreamResponse:
    try:
        ports = query_ports(request.query.getall("port", []))
    except ValueError as err:
        return web.Response(status=400, text=str(err))
    ws = web.WebSocketResponse(protocols=WEBSOCKET_PROTOCOLS, autoping=True)
    if not ws.can_prepare(request).ok:
        return web.Response(status=400, text="unable to upgrade websocket connection")
    await ws.prepare(request)
    text = ws.ws_protocol == "v4.base64.channel.k8s.io"

    async def send(channel: int, data: bytes) -> None:
        if text:
            await ws.send_str(str(channel) + base64.b64encode(data).decode())
        else:
            await ws.send_bytes(bytes([channel]) + data)

    upstreams: dict[int, asyncio.StreamWriter] = {}
    pending: dict[int, list[bytes]] = {i: [] for i in range(len(ports))}
    for i, port in enumerate(ports):
        encoded = struct.pack("<H", port)
        await send(2 * i, encoded)
        await send(2 * i + 1, encoded)

    async def forward(i: int, port: int) -> None:
        try:
            reader, writer = await target.connect(port)
        except (PortForwardError, OSError) as err:
            await send(2 * i + 1, target.failure(port, err).encode())
            return
        upstreams[i] = writer
        for chunk in pending.pop(i, []):
            writer.write(chunk)
        try:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, ConnectionResetError):
                while chunk := await reader.read(_READ):
                    await send(2 * i, chunk)
        finally:
            writer.close()

    forwards = asyncio.gather(*(forward(i, port) for i, port in enumerate(ports)))

    async def from_client() -> None:
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                data: bytes = message.data
            elif message.type == WSMsgType.TEXT and text:
                data = bytes([ord(message.data[0]) - ord("0")]) + base64.b64decode(message.data[1:])
            else:
                continue
            if not data or data[0] % 2:
                continue  # only data channels carry the client's bytes
            i = data[0] // 2
            if i in upstreams:
                upstreams[i].write(data[1:])
            elif i in pending:
                pending[i].append(data[1:])

    reading = asyncio.ensure_future(from_client())
    try:
        await asyncio.wait({forwards, reading}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        reading.cancel()
        forwards.cancel()
        for writer in upstreams.values():
            writer.close()
        await ws.close()
    return ws

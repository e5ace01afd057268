"""gRPC's bidirectional streams served over HTTP/2 on asyncio, for the proxy server's agent port.

The wire is gRPC's own (HTTP/2 with TLS and ALPN `h2`, or cleartext with prior knowledge; length-prefixed
protobuf messages; status in trailers), so grpcio's agents connect unchanged. It replaces grpc.aio on
this port because grpc.aio, on a busy event loop, hands a write's completion back long after the bytes
left: `bench/grpc_writes` measured 1 write in 100 completing about 840 ms late, some 200 loop turns,
with 20 agent streams writing at once, while the agent had the bytes within 4 ms. Each agent stream
takes one write at a time, so every tunnelled packet queued behind such a write waited for it. Here a
write returns once its frames are handed to the transport, unless HTTP/2 flow control makes it wait.

The servicer sees what it used of grpc.aio's context: `invocation_metadata()`, `abort()`,
`send_initial_metadata()`, `write()` and `read()` (which returns `grpc.aio.EOF` at the client's end).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from grpc import aio
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import ProtocolError

from tenantgpu.readbuffer import ReadBuffer

log = logging.getLogger(__name__)

_GRPC_CONTENT_TYPE = "application/grpc"
_UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
_UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
_RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]


class GrpcAbort(Exception):
    """Ends the call with this status (what grpc.aio's `context.abort` does)."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


@dataclass(frozen=True)
class StreamMethod:
    """A bidirectional-streaming method: its handler and how to read its request messages."""

    handler: Callable[[StreamContext], Awaitable[None]]
    deserialize: Callable[[bytes], Any]


def grpc_message(details: str) -> str:
    """grpc-message's percent-encoding: bytes outside printable ASCII, and '%' itself."""
    out = []
    for byte in details.encode():
        out.append(chr(byte) if 0x20 <= byte <= 0x7E and byte != 0x25 else f"%{byte:02X}")
    return "".join(out)


class StreamContext:
    """One call: the request's metadata, its messages as they come, and the response's way out."""

    def __init__(self, connection: _Connection, stream_id: int, headers: list[tuple[str, str]], method: StreamMethod,
                 max_message_bytes: int) -> None:  # fmt: skip
        self._connection = connection
        self.stream_id = stream_id
        self._metadata = tuple((k, v) for k, v in headers if not k.startswith(":"))
        self._method = method
        self._max_message_bytes = max_message_bytes
        self._buffer = bytearray()
        self._messages: asyncio.Queue[Any] = asyncio.Queue()
        self._ended: BaseException | None = None
        self.headers_sent = False
        self.closed = False

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise GrpcAbort(code.value[0], details)

    async def send_initial_metadata(self, metadata: Iterable[tuple[str, str]]) -> None:
        self._send_headers(list(metadata))

    def _send_headers(self, metadata: list[tuple[str, str]]) -> None:
        if self.headers_sent:
            raise RuntimeError("initial metadata was already sent")
        self.headers_sent = True
        self._connection.send_headers(
            self.stream_id, [(":status", "200"), ("content-type", _GRPC_CONTENT_TYPE), *metadata]
        )

    async def write(self, message: Any) -> None:
        if not self.headers_sent:
            self._send_headers([])
        payload = message.SerializeToString()
        await self._connection.send_data(self.stream_id, b"\x00" + len(payload).to_bytes(4, "big") + payload)

    async def read(self) -> Any:
        """The next request message, `grpc.aio.EOF` once the client has ended its side."""
        item = await self._messages.get()
        if isinstance(item, BaseException):
            self._messages.put_nowait(item)  # every later read sees the end as well
            if isinstance(item, EOFError):
                return aio.EOF
            raise item
        return item

    # --- fed by the connection ---------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        if self._ended is not None:
            return  # the call's request side is over (ended, refused or reset): nothing more is read
        self._buffer += data
        while len(self._buffer) >= 5:
            if self._buffer[0]:
                self._finish(GrpcAbort(_UNIMPLEMENTED, "compressed messages are not supported"))
                return
            length = int.from_bytes(self._buffer[1:5], "big")
            if length > self._max_message_bytes:
                self._finish(GrpcAbort(_RESOURCE_EXHAUSTED, f"message of {length} bytes is too large"))
                return
            if len(self._buffer) < 5 + length:
                return
            body = bytes(self._buffer[5 : 5 + length])
            del self._buffer[: 5 + length]
            try:
                self._messages.put_nowait(self._method.deserialize(body))
            except Exception as exc:  # a message that is not one: the call fails as grpc's would
                self._finish(GrpcAbort(_UNKNOWN, f"cannot parse request message: {exc}"))
                return

    @property
    def refusal(self) -> GrpcAbort | None:
        """Why the request side was refused (a compressed, oversized or unreadable message), if it was."""
        return self._ended if isinstance(self._ended, GrpcAbort) else None

    def end(self) -> None:
        self._finish(EOFError())

    def fail(self, reason: BaseException) -> None:
        """The call was cut off (reset by the client, the connection lost): reads raise `reason`."""
        self.closed = True
        self._finish(reason)

    def _finish(self, reason: BaseException) -> None:
        if self._ended is None:
            self._ended = reason
            self._messages.put_nowait(reason)


class _Connection(asyncio.BufferedProtocol):
    """One client connection: HTTP/2 framing (h2), each stream's call in a task of its own."""

    def __init__(self, server: H2GrpcServer) -> None:
        self._server = server
        self._read_buffer = server.read_buffer
        self._h2 = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
        self._transport: asyncio.Transport | None = None
        self._calls: dict[int, tuple[StreamContext, asyncio.Task[None]]] = {}
        self._window_open = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self.lost = False

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's TLS transport is no asyncio.Transport subclass
        self._server.connections.add(self)
        self._h2.initiate_connection()
        self._flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_buffer.view

    def buffer_updated(self, nbytes: int) -> None:
        # h2 keeps slices of what it is given, so it gets its own copy
        self.data_received(bytes(self._read_buffer.received(nbytes)))

    def data_received(self, data: bytes) -> None:
        try:
            events = self._h2.receive_data(data)
        except ProtocolError as exc:
            log.debug("agent connection: HTTP/2 protocol error: %s", exc)
            self._flush()
            self._close()
            return
        for event in events:
            if isinstance(event, RequestReceived):
                self._request(event.stream_id, list(event.headers or ()))
            elif isinstance(event, DataReceived):
                call = self._calls.get(event.stream_id)
                if call is not None:
                    call[0].feed(event.data or b"")
                if event.flow_controlled_length:
                    # the window reopens as the bytes arrive; the servicer reads its queue promptly
                    with contextlib.suppress(ProtocolError):  # a stream already closed
                        self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                call = self._calls.get(event.stream_id)
                if call is not None:
                    call[0].end()
            elif isinstance(event, StreamReset):
                call = self._calls.get(event.stream_id)
                if call is not None:
                    call[0].fail(ConnectionResetError("the client cancelled the call"))
                self._wake_writers()
            elif isinstance(event, WindowUpdated | RemoteSettingsChanged):
                self._wake_writers()
            elif isinstance(event, ConnectionTerminated):
                self._close()
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._transport = None
        self._server.connections.discard(self)
        for context, _task in list(self._calls.values()):
            context.fail(ConnectionResetError("the agent's connection closed"))
        self._wake_writers()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- calls --------------------------------------------------------------------------------

    def _request(self, stream_id: int, headers: list[tuple[str, str]]) -> None:
        pseudo = dict(h for h in headers if h[0].startswith(":"))
        method = self._server.methods.get(pseudo.get(":path", ""))
        if method is None or pseudo.get(":method") != "POST":
            self._send_status(
                stream_id, _UNIMPLEMENTED, f"Method not found: {pseudo.get(':path', '')}", trailers_only=True
            )
            return
        context = StreamContext(self, stream_id, headers, method, self._server.max_message_bytes)
        task = asyncio.get_running_loop().create_task(self._serve(context, method))
        self._calls[stream_id] = (context, task)

    async def _serve(self, context: StreamContext, method: StreamMethod) -> None:
        code, details = 0, ""
        try:
            await method.handler(context)
            refused = context.refusal
            if refused is not None:  # a request message the servicer could not have read
                code, details = refused.code, refused.details
        except GrpcAbort as abort:
            code, details = abort.code, abort.details
        except (ConnectionError, asyncio.CancelledError):
            code = -1  # the connection or the server went away: nothing to answer
        except Exception as exc:
            log.exception("agent stream %d failed", context.stream_id)
            code, details = _UNKNOWN, f"Unexpected error: {exc}"
        finally:
            self._calls.pop(context.stream_id, None)
        if code < 0 or context.closed or self.lost:
            return
        self._send_status(context.stream_id, code, details, trailers_only=not context.headers_sent)

    def _send_status(self, stream_id: int, code: int, details: str, *, trailers_only: bool) -> None:
        """End the stream with the call's status: in trailers, or, when no response headers went out
        yet, in a trailers-only response."""
        headers = [(":status", "200"), ("content-type", _GRPC_CONTENT_TYPE)] if trailers_only else []
        headers.append(("grpc-status", str(code)))
        if details:
            headers.append(("grpc-message", grpc_message(details)))
        with contextlib.suppress(ProtocolError):
            self._h2.send_headers(stream_id, headers, end_stream=True)
        self._flush()

    def send_headers(self, stream_id: int, headers: list[tuple[str, str]]) -> None:
        if self.lost:
            raise ConnectionResetError("the agent's connection closed")
        self._h2.send_headers(stream_id, headers)
        self._flush()

    async def send_data(self, stream_id: int, data: bytes) -> None:
        """Send `data` on the stream as flow control allows; returns once it is handed to the transport."""
        view = memoryview(data)
        while view:
            if self.lost:
                raise ConnectionResetError("the agent's connection closed")
            window = min(self._h2.local_flow_control_window(stream_id), self._h2.max_outbound_frame_size)
            if window <= 0:
                self._window_open.clear()
                await self._window_open.wait()
                continue
            chunk, view = view[:window], view[window:]
            self._h2.send_data(stream_id, bytes(chunk))
            self._flush()
        if not self._writable.is_set():
            await self._writable.wait()  # the transport's buffer is full: let the agent catch up

    def _wake_writers(self) -> None:
        self._window_open.set()

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def calls(self) -> list[tuple[StreamContext, asyncio.Task[None]]]:
        return list(self._calls.values())

    def go_away(self) -> None:
        """End every call (RST_STREAM) and tell the client no more come here (GOAWAY); then close."""
        for context, task in list(self._calls.values()):
            context.closed = True
            with contextlib.suppress(ProtocolError):
                self._h2.reset_stream(context.stream_id, ErrorCodes.CANCEL)
            task.cancel()
        with contextlib.suppress(ProtocolError):
            self._h2.close_connection(ErrorCodes.NO_ERROR)
        self._flush()
        transport = self._transport
        if transport is not None:
            transport.close()
            # A TLS close waits for the peer's close_notify (up to 30 s); the client has all it needs.
            asyncio.get_running_loop().call_later(0.5, transport.abort)


class H2GrpcServer:
    """Listens for gRPC clients and serves the stream methods given, by path (`/Service/Method`)."""

    def __init__(self, methods: dict[str, StreamMethod], *, max_message_bytes: int) -> None:
        self.methods = methods
        self.max_message_bytes = max_message_bytes
        self.connections: set[_Connection] = set()
        self.read_buffer = ReadBuffer()
        self.port = 0
        self._listener: asyncio.Server | None = None

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Listen on host:port (0: any free port); the port bound."""
        if ssl_context is not None:
            ssl_context.set_alpn_protocols(["h2"])  # gRPC clients insist on it
        self._listener = await asyncio.get_running_loop().create_server(
            lambda: _Connection(self), host, port, ssl=ssl_context
        )
        self.port = int(self._listener.sockets[0].getsockname()[1])
        return self.port

    async def stop(self, grace: float | None) -> None:
        """Stop listening; every open call ends (after `grace` seconds for those still running)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if grace:
            deadline = asyncio.get_running_loop().time() + grace
            while any(c.calls() for c in self.connections) and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
        tasks = [task for connection in self.connections for _, task in connection.calls()]
        for connection in list(self.connections):
            connection.go_away()
        if tasks:
            # the servicers' own clean-up (their `finally`) runs before stop returns, as with grpc.aio
            await asyncio.wait(tasks, timeout=5.0)

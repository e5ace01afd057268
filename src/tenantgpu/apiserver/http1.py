"""The API server's HTTP/1.1 connections: requests parsed by httptools, each response written at once.

Every write of a pod's way (a dozen per pod) and every watch event passes here, and aiohttp's request
machinery (a payload stream, a payload writer and several objects per request) cost about as much CPU
per request as the API's own work on a small PATCH. This protocol parses a request with httptools,
hands the handler a `Request` with the few attributes it reads, and writes the status line, headers and
body in one piece, or a watch stream as chunks.

A request to switch protocols (kubectl exec over WebSocket or SPDY) is not served here: the connection,
with the request's bytes, is handed to an aiohttp `RequestHandler`, which serves it from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from email.utils import formatdate
from http import HTTPStatus
from ssl import SSLContext
from typing import Any, cast
from urllib.parse import parse_qsl, unquote

import httptools
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from tenantgpu.readbuffer import ReadBuffer

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable["web.StreamResponse | ChunkedStream"]]

# Connections idle this long are closed, as aiohttp's keep-alive timeout does.
IDLE_TIMEOUT = 75.0
_SWEEP_SECONDS = 15.0
# Requests a client may send ahead of their answers (pipelining) before the connection stops reading.
_MAX_QUEUED = 16
# The request line and headers of one request may not exceed this (aiohttp and Go allow less per line).
MAX_HEAD_BYTES = 64 * 1024
_SKIPPED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "date"})


class Request:
    """One parsed request, with the parts of aiohttp's `web.Request` the API handlers read."""

    __slots__ = (
        "_body",
        "_connection",
        "_query",
        "_raw_headers",
        "_target",
        "_too_large",
        "headers",
        "keep_alive",
        "method",
        "path",
        "query_string",
        "upgrade",
    )

    def __init__(
        self,
        connection: HTTPConnection,
        method: str,
        target: bytes,
        raw_headers: list[tuple[bytes, bytes]],
        body: bytes,
        too_large: int,
        keep_alive: bool,
        upgrade: bool,
    ) -> None:
        self._connection = connection
        self.method = method
        self._target = target
        path, _, query = target.decode("utf-8", "surrogateescape").partition("?")
        self.path = unquote(path)
        self.query_string = query
        self._raw_headers = raw_headers
        self.headers = CIMultiDictProxy(
            CIMultiDict(
                (name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape"))
                for name, value in raw_headers
            )
        )
        self._body = body
        self._too_large = too_large
        self.keep_alive = keep_alive
        self.upgrade = upgrade
        self._query: MultiDictProxy[str] | None = None

    @property
    def query(self) -> MultiDictProxy[str]:
        if self._query is None:
            self._query = MultiDictProxy(MultiDict(parse_qsl(self.query_string, keep_blank_values=True)))
        return self._query

    @property
    def transport(self) -> asyncio.Transport | None:
        return self._connection.transport

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def can_read_body(self) -> bool:
        return bool(self._body) or bool(self._too_large)

    async def read(self) -> bytes:
        if self._too_large:
            limit = self._connection.max_body_bytes
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=self._too_large)
        return self._body

    def raw_head(self) -> bytes:
        """The request line and headers as the client sent them (for the handover to aiohttp)."""
        lines = [self.method.encode() + b" " + self._target + b" HTTP/1.1\r\n"]
        lines += [name + b": " + value + b"\r\n" for name, value in self._raw_headers]
        return b"".join(lines) + b"\r\n" + self._body


class ChunkedStream:
    """A streamed response body (a watch, followed logs): each write is one chunk.

    `hold` keeps data to write later, when the server's `defer` runs `flush` (for a watch: once the
    commit that brought the events has run), so what arrives together goes out as one chunk.
    """

    __slots__ = ("_connection", "_held", "finished", "last_write", "status")

    def __init__(self, connection: HTTPConnection, status: int) -> None:
        self._connection = connection
        self.status = status
        self.finished = False
        self._held: list[bytes] | None = None
        self.last_write = time.monotonic()  # of data, held or written

    async def write(self, data: bytes) -> None:
        self.flush()
        if not data:
            return
        transport = self._connection.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.last_write = time.monotonic()
        await self._connection.drain()

    def hold(self, data: bytes) -> bool:
        """Keep `data` for the next `flush()`, unless the connection is closing or paused for the
        client to catch up; whether it was taken."""
        connection = self._connection
        transport = connection.transport
        if transport is None or connection.writing_paused or transport.is_closing():
            return False
        if self._held is None:
            self._held = [data]
            connection.defer(self.flush)
        else:
            self._held.append(data)
        self.last_write = time.monotonic()
        return True

    def flush(self) -> None:
        """Write what `hold` kept, as one chunk (the connection may have closed meanwhile)."""
        held, self._held = self._held, None
        if not held:
            return
        data = b"".join(held)
        transport = self._connection.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    async def write_eof(self, data: bytes = b"") -> None:
        await self.write(data)
        transport = self._connection.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"0\r\n\r\n")
        self.finished = True


async def start_stream(request: Any, status: int, headers: Mapping[str, str]) -> Any:
    """Start a chunked response body on either kind of request; the result has write() and write_eof()."""
    if isinstance(request, Request):
        return request._connection.start_stream(request, status, headers)
    response = web.StreamResponse(status=status, headers=headers)
    response.enable_chunked_encoding()
    await response.prepare(request)
    return response


def _next_turn(callback: Callable[[], None]) -> None:
    asyncio.get_running_loop().call_soon(callback)


class HTTPServer:
    """Owns the listening socket's connections; `fallback` makes the aiohttp handlers that take over
    connections switching protocols."""

    def __init__(
        self,
        handler: Handler,
        fallback: web.Server,
        max_body_bytes: int,
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        sweep_seconds: float = _SWEEP_SECONDS,
        defer: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.handler = handler
        self.fallback = fallback
        self.max_body_bytes = max_body_bytes
        # When held stream data is written (ChunkedStream.hold): by default in the loop's next turn.
        self.defer: Callable[[Callable[[], None]], None] = defer or _next_turn
        self.idle_timeout = idle_timeout
        self._sweep_seconds = sweep_seconds
        self.connections: set[HTTPConnection] = set()
        self.read_buffer = ReadBuffer()
        self._listeners: list[asyncio.Server] = []
        self._date = ""
        self._date_second = -1
        self._sweeper: asyncio.Task[None] | None = None

    def __call__(self) -> HTTPConnection:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        return HTTPConnection(self)

    def date(self) -> str:
        second = int(time.time())
        if second != self._date_second:
            self._date, self._date_second = formatdate(second, usegmt=True), second
        return self._date

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_seconds)
            now = time.monotonic()
            for connection in list(self.connections):
                connection.close_if_idle(now)

    async def listen(self, host: str, port: int, ssl: SSLContext | None, backlog: int = 100) -> int:
        """Accept connections on host:port (0: a free port), with TLS when `ssl` is given; returns the
        port. A server may listen on several."""
        listener = await asyncio.get_running_loop().create_server(self, host, port, ssl=ssl, backlog=backlog)
        self._listeners.append(listener)
        return int(listener.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and every connection: running handlers are cancelled (watches end), sockets
        closed."""
        for listener in self._listeners:
            listener.close()
        self._listeners = []
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        for connection in list(self.connections):
            connection.abort()
        await self.fallback.shutdown(1.0)


class HTTPConnection(asyncio.BufferedProtocol):
    """One client connection: parses requests, answers them in order, hands an upgrade to aiohttp."""

    def __init__(self, server: HTTPServer) -> None:
        self._server = server
        self._read_buffer = server.read_buffer
        self.max_body_bytes = server.max_body_bytes
        self.transport: asyncio.Transport | None = None
        # Made again when data comes: a watch holds its connection for minutes without a request on it,
        # and a lab keeps some thirty per tenant (a parser is about a kilobyte).
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self._mid_message = False
        # Requests pipelined behind the one being answered: rarely more than one, so a list (an empty deque
        # takes 760 bytes, and a lab keeps some forty connections per tenant).
        self._queue: list[Request] = []
        self._task: asyncio.Task[None] | None = None
        self._handover: bytearray | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._idle_since = time.monotonic()
        # the request being parsed
        self._target = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._body_size = 0
        self._head_size = 0

    # --- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is not an asyncio.Transport subclass, but has its methods.
        self.transport = cast(asyncio.Transport, transport)
        self._server.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_buffer.view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read_buffer.received(nbytes))

    def data_received(self, data: bytes | memoryview) -> None:
        if self.transport is None or self.transport.is_closing():
            return  # answered and closing (a bad request, `Connection: close`): the rest is dropped
        if self._handover is not None:
            self._handover += data
            return
        parser = self._parser
        if parser is None:
            parser = self._parser = httptools.HttpRequestParser(self)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # The upgrade request is queued; what follows it belongs to the new protocol.
            self._handover = bytearray(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            # A callback's own error (a head too long) is the reason, not httptools' wrapper of it.
            self._bad_request(str(exc.__cause__ or exc.__context__ or exc))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._server.connections.discard(self)
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()  # as aiohttp's handler_cancellation: a gone client's handler stops
        self._wake_writer()

    @property
    def writing_paused(self) -> bool:
        return self._writing_paused

    def defer(self, callback: Callable[[], None]) -> None:
        self._server.defer(callback)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()

    # --- httptools callbacks ----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._target, self._headers, self._body, self._body_size = b"", [], [], 0
        self._head_size = 0
        self._mid_message = True

    def on_url(self, url: bytes) -> None:
        self._target += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._count_head(len(name) + len(value))

    def _count_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > MAX_HEAD_BYTES:
            raise ValueError(f"request line and headers longer than {MAX_HEAD_BYTES} bytes")

    def on_headers_complete(self) -> None:
        # A client that asks before sending its body gets the go-ahead, unless answers to requests it
        # sent earlier are still due (they must come first; the client then sends after its timeout).
        if self._task is not None or self._queue or self.transport is None:
            return
        for name, value in self._headers:
            if name.lower() == b"expect" and value.lower() == b"100-continue":
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size <= self.max_body_bytes:
            self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self._parser
        assert parser is not None  # called from its feed_data
        self._mid_message = False
        too_large = self._body_size if self._body_size > self.max_body_bytes else 0
        request = Request(
            self,
            parser.get_method().decode("ascii", "replace"),
            self._target,
            self._headers,
            b"".join(self._body) if not too_large else b"",
            too_large,
            parser.should_keep_alive(),
            parser.should_upgrade(),
        )
        self._queue.append(request)
        if len(self._queue) > _MAX_QUEUED and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._serve())

    # --- serving ----------------------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            while self._queue:
                request = self._queue.pop(0)
                if (
                    self._reading_paused
                    and len(self._queue) < _MAX_QUEUED // 2
                    and self.transport is not None
                ):
                    self._reading_paused = False
                    self.transport.resume_reading()
                if request.upgrade:
                    self._hand_over(request)
                    return
                if not await self._answer(request):
                    return
        except Exception:  # a bug here must not leave the client waiting for an answer
            log.exception("serving a connection")
            if self.transport is not None:
                self.transport.close()
        finally:
            self._task = None
            self._idle_since = time.monotonic()

    async def _answer(self, request: Request) -> bool:
        """Serve one request; whether the connection stays open for the next."""
        response = await self._server.handler(request)
        transport = self.transport
        if transport is None:
            return False
        if isinstance(response, ChunkedStream):
            if not response.finished:
                transport.close()  # a stream that ended without its last chunk: the client must see it
                return False
        elif isinstance(response, web.Response):
            transport.write(self._render(request, response))
        else:  # a handler answered in a way only aiohttp can send: a bug, but the client gets an answer
            log.error("unexpected response type %s for %s %s", type(response), request.method, request.path)
            transport.write(
                _plain(500, "Internal Server Error", b"internal error\n", self._server.date(), False)
            )
        if not request.keep_alive:
            transport.close()
            return False
        await self.drain()
        return True

    def _render(self, request: Request, response: web.Response) -> bytes:
        body = response.body
        if not isinstance(body, bytes | bytearray):
            body = response.text.encode() if response.text is not None else b""
        head = [b"HTTP/1.1 %d %s\r\n" % (response.status, response.reason.encode("latin-1", "replace"))]
        for name, value in response.headers.items():
            if name.lower() not in _SKIPPED_HEADERS:
                head.append(f"{name}: {value}\r\n".encode("latin-1", "replace"))
        head.append(b"Content-Length: %d\r\nDate: %s\r\n" % (len(body), self._server.date().encode()))
        if not request.keep_alive:
            head.append(b"Connection: close\r\n")
        head.append(b"\r\n")
        if request.method != "HEAD":
            head.append(bytes(body))
        return b"".join(head)

    def start_stream(self, request: Request, status: int, headers: Mapping[str, str]) -> ChunkedStream:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        head = [b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())]
        head += [f"{name}: {value}\r\n".encode("latin-1", "replace") for name, value in headers.items()]
        head.append(b"Transfer-Encoding: chunked\r\nDate: %s\r\n" % self._server.date().encode())
        if not request.keep_alive:
            head.append(b"Connection: close\r\n")
        transport.write(b"".join(head) + b"\r\n")
        if not self._mid_message and not self._queue:
            self._parser = None
        return ChunkedStream(self, status)

    def _hand_over(self, request: Request) -> None:
        """From here on aiohttp serves this connection, starting with the upgrade request's bytes."""
        transport = self.transport
        if transport is None:
            return
        rest = bytes(self._handover or b"")
        self._server.connections.discard(self)
        if self._reading_paused:
            transport.resume_reading()
        handler = self._server.fallback()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        handler.data_received(request.raw_head() + rest)
        self.transport = None

    # --- flow control and closing -----------------------------------------------------------------

    async def drain(self) -> None:
        if not self._writing_paused or self.transport is None:
            return
        loop = asyncio.get_running_loop()
        if self._drain is None or self._drain.done():
            self._drain = loop.create_future()
        await self._drain

    def _wake_writer(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def _bad_request(self, reason: str) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return  # (the bytes after a bad request land here too: answered once)
        body = f"400 Bad Request: {reason}\n".encode()
        transport.write(_plain(400, "Bad Request", body, self._server.date(), False))
        transport.close()

    def close_if_idle(self, now: float) -> None:
        idle = self._task is None and not self._queue and now - self._idle_since > self._server.idle_timeout
        if idle and self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self.transport is not None:
            self.transport.close()


def _plain(status: int, reason: str, body: bytes, date: str, keep_alive: bool) -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nDate: {date}\r\n"
    )
    if not keep_alive:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body

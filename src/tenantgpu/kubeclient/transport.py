"""HTTP/1.1 connections for the kube client: keep-alive requests, and streamed responses for watches.

Every lab component is a Kubernetes client, and the lab is CPU-bound: a worker process spends a third
of its time sending its API writes. aiohttp's client request path (URL objects, header multidicts,
timers, payload objects, the connector's bookkeeping) costs 2.2 times the CPU per PATCH of a protocol
that writes the request in one call and lets httptools (llhttp) parse the response (`bench/kubeclient`).
A watch gets a connection of its own whose body chunks are handed over as they arrive.

Failures surface as the exceptions aiohttp's client raises, which the callers already handle:
`aiohttp.ClientOSError` when a connection cannot be opened, `aiohttp.ServerDisconnectedError` when the
server drops one mid-request, `aiohttp.ClientPayloadError` when a streamed body is cut off, `TimeoutError`
when a request outlives its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import httptools

from tenantgpu.readbuffer import ReadBuffer

# The lab's API servers close keep-alive connections idle for 75 s (aiohttp's default); a connection
# idle for longer than this is closed here rather than risked.
IDLE_SECONDS = 30.0
# Long timeouts (the default 30 s) are enforced by one sweep a second over the requests in flight
# rather than a timer per request: under load, arming and cancelling an event-loop timer for each
# request cost a worker process about a quarter of its requests' client-side CPU. Shorter timeouts get a
# timer of their own, so they stay exact.
SWEEP_SECONDS = 1.0


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


class _Connection(asyncio.BufferedProtocol):
    """One TLS (or plain) connection carrying one request at a time."""

    def __init__(self, read_buffer: ReadBuffer | None = None) -> None:
        self._read_buffer = read_buffer or ReadBuffer()
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self._body: list[bytes] = []
        self._stream: _Stream | None = None  # set while the connection carries a streamed response
        self.lost = False
        self.reused = False
        self.answered = False  # some of the current response has arrived
        self.idle_since = 0.0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._fail(aiohttp.ServerDisconnectedError(f"the server closed the connection: {exc or 'EOF'}"))
        if self._stream is not None:
            self._stream.cut_off(exc)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_buffer.view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read_buffer.received(nbytes))

    def data_received(self, data: bytes | memoryview) -> None:
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(aiohttp.ClientPayloadError(f"malformed response: {exc}"))
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport: nothing more can be read or sent

    # httptools callbacks

    def on_headers_complete(self) -> None:
        if self._stream is not None:
            waiter, self._waiter = self._waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(Response(self._parser.get_status_code(), b""))

    def on_body(self, body: bytes) -> None:
        if self._stream is not None:
            self._stream.feed(body)
        else:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._stream is not None:
            self._stream.finish()
            return
        waiter, self._waiter = self._waiter, None
        body = b"".join(self._body)
        self._body = []
        if not self._parser.should_keep_alive():
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._parser.get_status_code(), body))

    # the pool's side

    def stream(self, request: bytes) -> tuple[asyncio.Future[Response], _Stream]:
        """Send a request whose response body is handed over chunk by chunk; the future has its status."""
        assert self._transport is not None
        self._stream = _Stream(self._transport)
        return self.send(request), self._stream

    def send(self, request: bytes) -> asyncio.Future[Response]:
        assert self._transport is not None
        self.answered = False
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        return waiter

    def _fail(self, exc: BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.lost = True
        if self._transport is not None:
            self._transport.close()


class _Stream:
    """The body of a streamed response, chunk by chunk; reading pauses while the reader is behind."""

    HIGH_WATER = 4 * 1024 * 1024

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        # A list taken whole by the reader: a watch's stream is idle most of the time, and an empty
        # deque takes 760 bytes.
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._ended = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def feed(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        if self._buffered > self.HIGH_WATER and not self._paused:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def finish(self) -> None:
        self._ended = True
        self._wake()

    def cut_off(self, exc: Exception | None) -> None:
        if not self._ended:
            self._error = aiohttp.ClientPayloadError(
                f"the response was cut off: {exc or 'connection closed'}"
            )
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> bytes:
        while not self._chunks:
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        # Everything that arrived so far, at once: a watch line often spans several chunks.
        chunks, self._chunks = self._chunks, []
        chunk = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._buffered = 0
        if self._paused:
            self._paused = False
            self._transport.resume_reading()
        return chunk

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self])


class Http1Pool:
    """Keep-alive connections to one API server; at most `size` requests in flight, the rest wait."""

    def __init__(
        self, server: str, ssl_context: ssl.SSLContext | bool, *, headers: dict[str, str], size: int = 64
    ) -> None:
        url = urlsplit(server)
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl_context if url.scheme == "https" else None
        self._base = url.path.rstrip("/")
        self._head = b""
        self.set_headers(headers)
        self._idle: list[_Connection] = []
        self._streaming: set[_Connection] = set()
        self._read_buffer = ReadBuffer()
        self._slots = asyncio.Semaphore(size)
        self._closed = False
        # waiter of a request in flight -> (its deadline on the loop's clock, its connection)
        self._deadlines: dict[asyncio.Future[Response], tuple[float, _Connection]] = {}
        self._sweep: asyncio.TimerHandle | None = None

    def set_headers(self, headers: dict[str, str]) -> None:
        """The headers of every request from now on (a renewed bearer token); open watches keep theirs."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        lines = [f"Host: {host}:{self._port}"] + [f"{k}: {v}" for k, v in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        timeout: float = 30.0,
    ) -> Response:
        message = self._message(method, path, params, body, content_type)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if timeout < 2 * SWEEP_SECONDS or self._slots.locked() or not self._idle:
            # Waiting for a slot or a new connection, or a short timeout: a timer of its own.
            async with asyncio.timeout_at(deadline):
                return await self._request(method, message, None)
        return await self._request(method, message, deadline)

    async def _request(self, method: str, message: bytes, deadline: float | None) -> Response:
        """With a `deadline`, the request is bounded by it (a dial under a timer, the answer by the
        sweep); without, the caller's own timer bounds it all."""
        async with self._slots:
            connection = await self._connection(deadline=deadline)
            try:
                return await self._exchange(connection, message, deadline)
            except aiohttp.ServerDisconnectedError:
                # A reused connection the server closed just as the request went out: nothing was
                # answered, so a read is safely sent again on a new connection (a write might have
                # been applied, and is not).
                if method != "GET" or not connection.reused or connection.answered:
                    raise
                fresh = await self._connection(fresh=True, deadline=deadline)
                return await self._exchange(fresh, message, deadline)

    def _message(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        body: bytes | None,
        content_type: str | None,
        headers: dict[str, str] | None = None,
    ) -> bytes:
        # %20 rather than +: set-based label selectors have spaces, and not every server reads + as one.
        target = self._base + path + ("?" + urlencode(params, quote_via=quote) if params else "")
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._head
        if headers:
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
        if body is None:
            return head + b"\r\n"
        return (
            head
            + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode("latin-1")
            + body
        )

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        connect_timeout: float = 30.0,
        headers: dict[str, str] | None = None,
    ) -> AsyncIterator[tuple[int, _Stream]]:
        """A request on a connection of its own whose body is read as it comes (a watch): yields the
        status and the body's chunks; the connection is closed when the block ends. `headers` go with
        this request only."""
        message = self._message(method, path, params, None, None, headers)
        async with asyncio.timeout(connect_timeout):
            connection = await self._connection(fresh=True)
            try:
                head, body = connection.stream(message)
                response = await head
            except BaseException:
                connection.close()
                raise
        self._streaming.add(connection)
        try:
            yield response.status, body
        finally:
            self._streaming.discard(connection)
            connection.close()

    async def _exchange(self, connection: _Connection, message: bytes, deadline: float | None) -> Response:
        """Send and await the answer; with a `deadline`, the sweep fails the request once it is past."""
        waiter = connection.send(message)
        if deadline is not None:
            self._deadlines[waiter] = (deadline, connection)
            if self._sweep is None:
                self._sweep = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self._sweep_deadlines)
        try:
            response = await waiter
        except BaseException:
            # Cancelled or timed out mid-request: the response may still come, so the connection
            # cannot carry another request.
            connection.close()
            raise
        finally:
            if deadline is not None:
                self._deadlines.pop(waiter, None)
        if self._closed:
            connection.close()  # the pool was closed while this request was in flight
        elif not connection.lost:
            connection.idle_since = time.monotonic()
            connection.reused = True
            self._idle.append(connection)
        return response

    def _sweep_deadlines(self) -> None:
        self._sweep = None
        now = asyncio.get_running_loop().time()
        for waiter, (deadline, connection) in list(self._deadlines.items()):
            if deadline <= now:
                del self._deadlines[waiter]
                if not waiter.done():
                    waiter.set_exception(TimeoutError())
                connection.close()
        if self._deadlines:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_SECONDS, self._sweep_deadlines)

    async def _connection(self, *, fresh: bool = False, deadline: float | None = None) -> _Connection:
        """An idle keep-alive connection, else a new one (dialled by `deadline` when one is given)."""
        now = time.monotonic()
        while self._idle and not fresh:
            connection = self._idle.pop()
            if not connection.lost and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.close()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self._read_buffer), self._host, self._port, ssl=self._ssl or None
                )
        except ssl.SSLError as exc:
            raise aiohttp.ClientOSError(
                0, f"TLS handshake with {self._host}:{self._port} failed: {exc}"
            ) from exc
        except OSError as exc:
            raise aiohttp.ClientOSError(
                exc.errno or 0, f"cannot connect to {self._host}:{self._port}: {exc.strerror or exc}"
            ) from exc
        return connection

    def close(self) -> None:
        """Close every connection, the open watches' too (their readers see the body cut off)."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connection in [*self._idle, *self._streaming]:
            connection.close()
        self._idle.clear()

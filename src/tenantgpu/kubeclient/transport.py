"""Keep-alive HTTP/1.1 connections for the kube client's plain requests (everything but watches).

Every lab component is a Kubernetes client, and the lab is CPU-bound: a worker process spends a third
of its time sending its API writes. aiohttp's client request path (URL objects, header multidicts,
timers, payload objects, the connector's bookkeeping) costs about 300 µs of CPU per PATCH on this
machine; a protocol that writes the request in one call and lets httptools (llhttp) parse the response
costs about 100 µs. Watches stay on aiohttp: a stream is opened once and its cost is in its events.

Failures surface as the exceptions aiohttp raises, so callers' handling is the same for both paths:
`aiohttp.ClientOSError` when a connection cannot be opened, `aiohttp.ServerDisconnectedError` when the
server drops one mid-request, `TimeoutError` when a request outlives its timeout.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import httptools

# The lab's API servers close keep-alive connections idle for 75 s (aiohttp's default); a connection
# idle for longer than this is closed here rather than risked.
IDLE_SECONDS = 30.0


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


class _Connection(asyncio.Protocol):
    """One TLS (or plain) connection carrying one request at a time."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self._body: list[bytes] = []
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

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(aiohttp.ClientPayloadError(f"malformed response: {exc}"))
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport: nothing more can be read or sent

    # httptools callbacks

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        body = b"".join(self._body)
        self._body = []
        if not self._parser.should_keep_alive():
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._parser.get_status_code(), body))

    # the pool's side

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
        host = f"[{self._host}]" if ":" in self._host else self._host
        lines = [f"Host: {host}:{self._port}"] + [f"{k}: {v}" for k, v in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(size)
        self._closed = False

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
        # %20 rather than +: set-based label selectors have spaces, and not every server reads + as one.
        target = self._base + path + ("?" + urlencode(params, quote_via=quote) if params else "")
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._head
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode("latin-1")
            message = head + body
        else:
            message = head + b"\r\n"
        async with asyncio.timeout(timeout):
            async with self._slots:
                connection = await self._connection()
                try:
                    return await self._exchange(connection, message)
                except aiohttp.ServerDisconnectedError:
                    # A reused connection the server closed just as the request went out: nothing was
                    # answered, so a read is safely sent again on a new connection (a write might have
                    # been applied, and is not).
                    if method != "GET" or not connection.reused or connection.answered:
                        raise
                    return await self._exchange(await self._connection(fresh=True), message)

    async def _exchange(self, connection: _Connection, message: bytes) -> Response:
        try:
            response = await connection.send(message)
        except BaseException:
            # Cancelled or timed out mid-request: the response may still come, so the connection
            # cannot carry another request.
            connection.close()
            raise
        if not connection.lost and not self._closed:
            connection.idle_since = time.monotonic()
            connection.reused = True
            self._idle.append(connection)
        return response

    async def _connection(self, *, fresh: bool = False) -> _Connection:
        now = time.monotonic()
        while self._idle and not fresh:
            connection = self._idle.pop()
            if not connection.lost and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.close()
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                _Connection, self._host, self._port, ssl=self._ssl or None
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
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()

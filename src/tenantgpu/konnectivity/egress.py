"""The API server's side of the tunnel: dial host:port through an agent (streams, transport, aiohttp)."""

from __future__ import annotations

import asyncio
import random as _random
import ssl as _ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from tenantgpu.konnectivity.backends import BackendManager, NoAgentAvailable
from tenantgpu.konnectivity.metrics import FAILURE_NO_AGENT
from tenantgpu.konnectivity.transport import TunnelTransport

STREAM_LIMIT = 2**16


async def start_tls(
    raw: TunnelTransport,
    protocol: asyncio.BaseProtocol,
    context: _ssl.SSLContext,
    server_hostname: str,
    *,
    ssl_handshake_timeout: float | None = None,
) -> asyncio.Transport | None:
    """Client-side TLS over a tunnelled connection, what `loop.start_tls` does for socket transports.

    uvloop's `start_tls` accepts only its own socket transports, so the handshake is driven here by the
    standard library's TLS protocol, which works on any event loop and any transport. Returns None when
    the transport closed during the handshake.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    tls = sslproto.SSLProtocol(
        loop,
        protocol,
        context,
        waiter,
        server_side=False,
        server_hostname=server_hostname,
        call_connection_made=False,
        ssl_handshake_timeout=ssl_handshake_timeout,
    )
    raw.attach(tls)
    tls.connection_made(raw)
    try:
        await waiter
    except BaseException:
        raw.close()
        raise
    return tls._app_transport  # the transport the application protocol writes to


class Dialler:
    """What every way into the tunnel shares: given `dial`, the asyncio and aiohttp faces of it."""

    async def dial(self, host: str, port: int) -> TunnelTransport:
        """Open host:port through an agent; the transport buffers until a protocol is attached."""
        raise NotImplementedError

    async def create_connection(
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str,
        port: int,
        *,
        ssl: _ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        ssl_handshake_timeout: float | None = None,
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        """Like `loop.create_connection`, through the tunnel; TLS (if `ssl`) runs end to end."""
        raw = await self.dial(host, port)
        protocol = protocol_factory()
        if ssl is None:
            raw.attach(protocol)
            protocol.connection_made(raw)
            return raw, protocol
        try:
            secure = await start_tls(
                raw, protocol, ssl, server_hostname or host, ssl_handshake_timeout=ssl_handshake_timeout
            )
        except BaseException:
            raw.close()
            raise
        if secure is None:  # only when the transport closed mid-handshake
            raise ConnectionResetError(f"connection to {host}:{port} closed during the TLS handshake")
        protocol.connection_made(secure)
        return secure, protocol

    async def open_connection(
        self,
        host: str,
        port: int,
        *,
        ssl: _ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        limit: int = STREAM_LIMIT,
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Like `asyncio.open_connection`, through the tunnel."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        transport, protocol = await self.create_connection(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            host,
            port,
            ssl=ssl,
            server_hostname=server_hostname,
        )
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)  # type: ignore[arg-type]
        return reader, writer

    def connector(self, **kwargs: Any) -> aiohttp.TCPConnector:
        """An aiohttp connector that dials through this egress (keyword arguments go to TCPConnector)."""
        return TunnelConnector(self, **kwargs)


class Egress(Dialler):
    """The `cluster` egress of one tenant API server: every connection rides an agent's stream.

    `open_connection(host, port)` mirrors `asyncio.open_connection`; `create_connection` mirrors
    `loop.create_connection`; `connector()` gives an aiohttp connector so a `ClientSession` sends
    HTTPS (an AdmissionReview, say) through the tunnel, with keep-alive reusing tunnelled connections.
    With no agent connected every dial raises `NoAgentAvailable` ("No agent available ...").
    """

    def __init__(
        self, backends: BackendManager, *, dial_timeout: float = 10.0, rng: _random.Random | None = None
    ) -> None:
        self._backends = backends
        self.dial_timeout = dial_timeout
        self._rng = rng or _random.Random()

    async def dial(self, host: str, port: int) -> TunnelTransport:
        address = f"{host}:{port}"
        try:
            session = self._backends.pick(host)
        except NoAgentAvailable:
            self._backends.metrics.dial_failures.labels(FAILURE_NO_AGENT).inc()
            raise NoAgentAvailable(address) from None
        random_id = self._rng.getrandbits(62) + 1
        return await session.dial(host, port, random_id, self.dial_timeout)


class TunnelConnector(aiohttp.TCPConnector):
    """aiohttp's TCP connector with the socket dial replaced by a tunnel dial.

    Pooling, keep-alive and TLS settings stay aiohttp's; only the connection itself differs, and no
    DNS lookup happens here (the agent resolves the name on the worker's side).
    """

    def __init__(self, egress: Dialler, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._egress = egress

    async def _create_connection(  # type: ignore[override]
        self, req: aiohttp.ClientRequest, traces: Any, timeout: aiohttp.ClientTimeout
    ) -> ResponseHandler:
        sslcontext = self._get_ssl_context(req)
        host = (req.url.raw_host or "").rstrip(".")
        port = req.port or (443 if req.is_ssl() else 80)
        server_hostname = (req.server_hostname or host) if sslcontext else None
        try:
            async with asyncio.timeout(timeout.sock_connect or timeout.connect or None):
                _, protocol = await self._egress.create_connection(
                    self._factory, host, port, ssl=sslcontext, server_hostname=server_hostname
                )
        except (_ssl.CertificateError, _ssl.SSLCertVerificationError) as exc:
            raise aiohttp.ClientConnectorCertificateError(req.connection_key, exc) from exc
        except _ssl.SSLError as exc:
            raise aiohttp.ClientConnectorSSLError(req.connection_key, exc) from exc
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                raise
            raise aiohttp.ClientConnectorError(req.connection_key, exc) from exc
        assert isinstance(protocol, ResponseHandler)
        return protocol

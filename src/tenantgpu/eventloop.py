"""Runs a process's main coroutine on uvloop when it is installed, else on asyncio's own loop.

Every long-running tenantgpu process is a server on the wire; uvloop's C event loop and TLS transport
roughly double what one core serves (see the README's benchmarks). The fallback keeps platforms without
uvloop (Windows) working.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on uvloop if it can be imported."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every platform it supports
        return asyncio.run(main)
    return uvloop.run(main)


def loop_name() -> str:
    """The running loop's implementation, for benchmark reports."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


async def start_tls(
    plain: asyncio.StreamWriter, context: ssl.SSLContext, server_hostname: str, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """TLS on top of an open stream, returned as new streams (the plain ones are done with).

    uvloop's `start_tls` accepts only uvloop's own transports; over a Python transport (a Konnectivity
    tunnel's) asyncio's pure-Python TLS layer does the same work on whichever loop runs.
    """
    loop = asyncio.get_running_loop()
    await plain.drain()
    reader = asyncio.StreamReader(limit=limit)
    protocol = asyncio.StreamReaderProtocol(reader)
    try:
        secure = await loop.start_tls(plain.transport, protocol, context, server_hostname=server_hostname)
    except TypeError:
        secure = await asyncio.BaseEventLoop.start_tls(
            loop,  # type: ignore[arg-type]
            plain.transport,
            protocol,
            context,
            server_hostname=server_hostname,
        )
    if secure is None:
        raise ConnectionResetError(f"{server_hostname}: the connection closed during the TLS handshake")
    protocol.connection_made(secure)
    return reader, asyncio.StreamWriter(secure, protocol, reader, loop)

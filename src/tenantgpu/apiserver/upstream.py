"""One HTTP/1.1 request over a stream the API server opened (through the tunnel or directly): how it
reaches kubelets and pods, for logs, exec and the `proxy` subresources."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from tenantgpu.apiserver.hooks import Egress, ProxyAnswer
from tenantgpu.dialerrors import go_dial_error


@dataclass
class Head:
    """The status line and the headers of an answer that matter here."""

    status: int
    length: int | None = None
    chunked: bool = False
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)  # every header, as sent


async def send(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    method: str,
    path: str,
    authority: str,
    body: bytes = b"",
    content_type: str | None = None,
) -> Head:
    """Send a request (the connection closes after its answer); returns the answer's head."""
    request = f"{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {len(body)}\r\n"
    if content_type:
        request += f"Content-Type: {content_type}\r\n"
    writer.write((request + "Connection: close\r\n\r\n").encode() + body)
    await writer.drain()
    return await read_head(reader)


async def upgrade(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    method: str,
    path: str,
    authority: str,
    headers: Sequence[tuple[str, str]],
) -> Head:
    """Ask to switch protocols (`headers` carry `Upgrade` and what the new protocol needs); returns the
    answer's head. After a 101 the connection is the new protocol's."""
    request = f"{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\n"
    request += "".join(f"{name}: {value}\r\n" for name, value in headers)
    writer.write((request + "Content-Length: 0\r\n\r\n").encode())
    await writer.drain()
    return await read_head(reader)


async def read_head(reader: asyncio.StreamReader) -> Head:
    """The status line and headers of an answer."""
    status_line = await reader.readline()
    parts = status_line.decode("latin-1").split(" ", 2)
    head = Head(int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 502)
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        head.headers.append((name.strip(), value.strip()))
        name, value = name.strip().lower(), value.strip()
        if name == "content-length":
            head.length = int(value)
        elif name == "transfer-encoding" and "chunked" in value.lower():
            head.chunked = True
        elif name == "content-type":
            head.content_type = value
    return head


async def chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The chunks of a chunked HTTP body, as they arrive."""
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        chunk = await reader.readexactly(size)
        await reader.readline()
        yield chunk


async def read_body(reader: asyncio.StreamReader, head: Head) -> bytes:
    if head.chunked:
        return b"".join([chunk async for chunk in chunks(reader)])
    if head.length is not None:
        return await reader.readexactly(head.length)
    return await reader.read()


def insecure_context() -> ssl.SSLContext:
    """A client context that does not check the server's certificate: kube's proxy transport to a pod or
    service by `https:`, and kube-apiserver's to kubelets without `--kubelet-certificate-authority`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def dial(
    egress: Egress, host: str, port: int, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open `host:port` through `egress` (TLS on top with `tls`); a failed dial is an `OSError` in Go's
    words (`dial tcp H:P: connect: connection refused`)."""
    try:
        return await egress.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)
    except OSError as err:
        raise OSError(go_dial_error(f"{host}:{port}", err)) from err


async def exchange(
    egress: Egress,
    host: str,
    port: int,
    method: str,
    path: str,
    *,
    tls: ssl.SSLContext | None = None,
    body: bytes = b"",
    content_type: str | None = None,
) -> ProxyAnswer:
    """Dial `host:port` through `egress` (`dial`), send one request and read its whole answer."""
    reader, writer = await dial(egress, host, port, tls)
    try:
        head = await send(reader, writer, method, path, f"{host}:{port}", body, content_type)
        return ProxyAnswer(head.status, head.content_type, await read_body(reader, head))
    finally:
        writer.close()

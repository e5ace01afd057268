"""A pod-log source for an API server: reads `kubectl logs` from the pod's kubelet, through any egress.

Give it to the API server as its `log_source`. It finds the node's kubelet from the Node object
(`status.addresses` InternalIP, `status.daemonEndpoints.kubeletEndpoint.Port`), opens a stream with the
egress (direct, or the tenant's tunnel) and speaks HTTPS GET `/containerLogs/<ns>/<pod>/<container>`,
as kube-apiserver does with the real kubelet on :10250.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlencode

from tenantgpu import eventloop
from tenantgpu.node.logserver import kubelet_endpoint

NodeLookup = Callable[[str], Awaitable[dict[str, Any] | None]]
ErrorFactory = Callable[[str], Exception]


class _Egress(Protocol):
    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]: ...


class _Direct:
    async def open_connection(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port)


def _insecure_context() -> ssl.SSLContext:
    # The simulated kubelet's serving certificate is self-signed, as with kube-apiserver's
    # --kubelet-certificate-authority unset.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class KubeletLogSource:
    """`stream(pod, options)` yields the container log bytes from the pod's kubelet.

    `node_lookup(name)` returns the Node object (may be set after construction); `egress` dials the
    kubelet (default: directly); `error(message)` builds the exception the API server turns into a
    Status (default ValueError).
    """

    def __init__(
        self,
        node_lookup: NodeLookup | None = None,
        egress: _Egress | None = None,
        error: ErrorFactory | None = None,
    ) -> None:
        self.node_lookup = node_lookup
        self.egress: _Egress = egress or _Direct()
        self.error: ErrorFactory = error or ValueError
        self._tls = _insecure_context()

    async def stream(self, pod: dict[str, Any], options: Any) -> AsyncIterator[bytes]:
        meta = pod.get("metadata") or {}
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        node = await self.node_lookup(node_name) if self.node_lookup else None
        if node is None:
            raise self.error(f'node "{node_name}" of pod "{meta.get("name")}" not found')
        host, port = kubelet_endpoint(node)
        query: dict[str, str] = {}
        if getattr(options, "tail_lines", None) is not None:
            query["tailLines"] = str(options.tail_lines)
        if getattr(options, "timestamps", False):
            query["timestamps"] = "true"
        follow = bool(getattr(options, "follow", False))
        if follow:
            query["follow"] = "true"
        path = f"/containerLogs/{meta.get('namespace')}/{meta.get('name')}/{options.container}"
        if query:
            path += "?" + urlencode(query)
        try:
            _, plain = await self.egress.open_connection(host, port)
            reader, writer = await eventloop.start_tls(plain, self._tls, host)
        except OSError as err:
            raise self.error(f"dial kubelet {host}:{port}: {err}") from err
        try:
            request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
            writer.write(request.encode())
            await writer.drain()
            status_line = await reader.readline()
            parts = status_line.decode("latin-1").split(" ", 2)
            code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 502
            length: int | None = None
            chunked = False
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
                elif name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
                    chunked = True
            if code != 200:
                text = (await _read_body(reader, length, chunked)).decode("utf-8", "replace").strip()
                raise self.error(
                    f'container "{options.container}" in pod "{meta.get("name")}" is not available: {text}'
                )
            limit = getattr(options, "limit_bytes", None)
            if follow and chunked:
                sent = 0
                async for chunk in _chunks(reader):
                    if limit:
                        chunk = chunk[: max(0, limit - sent)]
                    sent += len(chunk)
                    yield chunk
                    if limit and sent >= limit:
                        return
                return
            body = await _read_body(reader, length, chunked)
            yield body[:limit] if limit else body
        finally:
            writer.close()


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The chunks of a chunked HTTP body, as they arrive."""
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        chunk = await reader.readexactly(size)
        await reader.readline()
        yield chunk


async def _read_body(reader: asyncio.StreamReader, length: int | None, chunked: bool) -> bytes:
    if chunked:
        return b"".join([chunk async for chunk in _chunks(reader)])
    if length is not None:
        return await reader.readexactly(length)
    return await reader.read()

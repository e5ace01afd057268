"""`pods/<pod>/portforward`: kube-apiserver's side of `kubectl port-forward`, passed on to the pod's kubelet.

kube-apiserver does not forward ports itself: it opens `/portForward/<ns>/<pod>` on the pod's kubelet
(through the tunnel, like logs and exec) and, once the kubelet has switched protocols, copies bytes
between the client and the kubelet (kube's upgrade-aware proxy). The query's `ports` become the
kubelet's `port` parameters. Three clients meet this:

- kubectl up to 1.30, and later kubectl when the WebSocket below is refused: SPDY/3.1, passed through.
- kubectl from 1.31: a WebSocket whose subprotocol `SPDY/3.1+portforward.k8s.io` carries the SPDY
  connection inside binary messages (feature gate PortForwardWebsockets, beta and on from 1.31). The API
  server asks the kubelet for SPDY and moves the bytes between the kubelet's connection and the messages
  (kube's `TunnelingHandler`). On an older server the WebSocket goes to the kubelet as it is, the kubelet
  finds no `port` in it and refuses, and kubectl falls back to SPDY.
- the Python client: a WebSocket with `v4.channel.k8s.io` and `?ports=`, passed through to the kubelet,
  which speaks it.

An answer of the kubelet that is not `101 Switching Protocols` reaches the client as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import WSMsgType, web

from tenantgpu.apiserver import errors, featuregates, proxy, upstream
from tenantgpu.apiserver.hooks import NodeProxySource
from tenantgpu.apiserver.httputil import header_list

Obj = dict[str, Any]
TUNNEL_PREFIX = "SPDY/3.1+"
_READ = 64 * 1024
# What a switch of protocols needs the kubelet to see; the rest of the client's headers stay here.
_UPGRADE_HEADERS = (
    "upgrade",
    "x-stream-protocol-version",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
)
_ANSWER_HEADERS = ("upgrade", "x-stream-protocol-version", "sec-websocket-accept", "sec-websocket-protocol")


def kubelet_path(pod: Obj, ports: list[str]) -> str:
    """The kubelet's path for the pod, with the request's `ports` as its `port` parameters."""
    meta = pod.get("metadata") or {}
    path = f"/portForward/{quote(meta.get('namespace', ''), safe='')}/{quote(meta.get('name', ''), safe='')}"
    return path + ("?" + urlencode([("port", port) for port in ports]) if ports else "")


def parse_ports(values: list[str]) -> list[str]:
    """`PodPortForwardOptions.ports` from the query (int32s); 400 for a value that is not a number."""
    for value in values:
        try:
            number = int(value)
        except ValueError:
            raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax') from None
        if not -(2**31) <= number < 2**31:
            raise errors.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    return values


def tunnelled_protocols(request: web.BaseRequest) -> list[str]:
    """The SPDY protocols a WebSocket asks to tunnel (`SPDY/3.1+portforward.k8s.io` → `portforward.k8s.io`)."""
    offered = header_list(request, "Sec-WebSocket-Protocol")
    return [p[len(TUNNEL_PREFIX) :] for p in offered if p.startswith(TUNNEL_PREFIX) and p.endswith(".k8s.io")]


async def forward(
    request: web.Request, pod: Obj, node: Obj, source: NodeProxySource, minor: int
) -> web.StreamResponse:
    """Serve one `pods/portforward` request through the pod's kubelet."""
    path = kubelet_path(pod, parse_ports(request.query.getall("ports", [])))
    upgrade = request.headers.get("Upgrade", "").lower()
    if upgrade not in ("websocket", "spdy/3.1"):
        raise errors.bad_request("Upgrade request required")
    tunnelled = tunnelled_protocols(request) if upgrade == "websocket" else []
    if tunnelled and featuregates.enabled("PortForwardWebsockets", minor):
        method, carry = "POST", _tunnel
        headers = [("Upgrade", "SPDY/3.1"), *(("X-Stream-Protocol-Version", p) for p in tunnelled)]
    else:
        method, carry = request.method, _splice
        headers = [
            (name, value) for name, value in request.headers.items() if name.lower() in _UPGRADE_HEADERS
        ]
    head, reader, writer = await _open(source, node, method, path, headers)
    try:
        if head.status != 101:
            return await _answer(head, reader)
        return await carry(request, head, reader, writer)
    finally:
        writer.close()


async def _open(
    source: NodeProxySource, node: Obj, method: str, path: str, headers: list[tuple[str, str]]
) -> tuple[upstream.Head, asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        head, reader, writer = await source.upgrade(node, method, path, headers)
    except (OSError, asyncio.IncompleteReadError) as err:
        # kube's upgrade-aware proxy words a failed dial so: kubectl then shows `error upgrading
        # connection: error dialing backend: dial tcp …`
        raise proxy.unreachable(f"error dialing backend: {str(err) or type(err).__name__}") from err
    return head, reader, writer  # type: ignore[no-any-return]


async def _answer(head: upstream.Head, reader: asyncio.StreamReader) -> web.Response:
    """The kubelet's refusal, passed on as it is."""
    body = await upstream.read_body(reader, head)
    return web.Response(
        status=head.status, body=body, content_type=(head.content_type or "text/plain").split(";")[0]
    )


class _Relay:
    """What arrives from the client after the switch of protocols, written on to the kubelet (an
    aiohttp parser of the upgraded connection)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.ended = asyncio.Event()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if not self._writer.is_closing():
            self._writer.write(data)
        return False, b""

    def feed_eof(self) -> None:
        self.ended.set()


async def _splice(
    request: web.Request, head: upstream.Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> web.StreamResponse:
    """Switch the client's connection as the kubelet switched, then copy bytes both ways until either
    side closes."""
    headers = {name: value for name, value in head.headers if name.lower() in _ANSWER_HEADERS}
    response = web.StreamResponse(status=101, headers={"Connection": "Upgrade", **headers})
    await response.prepare(request)
    transport = request.transport
    assert transport is not None
    relay = _Relay(writer)
    request.protocol.set_parser(relay)  # type: ignore[arg-type]
    request.protocol.keep_alive(False)

    async def from_kubelet() -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while (chunk := await reader.read(_READ)) and not transport.is_closing():
                transport.write(chunk)

    copying = asyncio.ensure_future(from_kubelet())
    ended = asyncio.ensure_future(relay.ended.wait())
    try:
        await asyncio.wait({copying, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        copying.cancel()
        ended.cancel()
        transport.close()
    return response


async def _tunnel(
    request: web.Request, head: upstream.Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> web.StreamResponse:
    """Accept the client's WebSocket with the tunnelled form of the protocol the kubelet chose, then carry
    the kubelet's SPDY bytes in binary messages and the messages' bytes to the kubelet."""
    chosen = next((v for n, v in head.headers if n.lower() == "x-stream-protocol-version"), "").strip()
    ws = web.WebSocketResponse(protocols=(TUNNEL_PREFIX + chosen,) if chosen else (), autoping=True)
    await ws.prepare(request)

    async def from_kubelet() -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ConnectionResetError):
            while chunk := await reader.read(_READ):
                await ws.send_bytes(chunk)

    async def from_client() -> None:
        async for message in ws:
            if message.type == WSMsgType.BINARY and not writer.is_closing():
                writer.write(message.data)

    tasks = {asyncio.ensure_future(from_kubelet()), asyncio.ensure_future(from_client())}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await ws.close()
    return ws

"""The seams other components plug into an API server: the egress dialler, pod logs and pod exec."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, Protocol


class Egress(Protocol):
    """Opens a TCP stream to `host:port` on the tenant's side (a webhook service, a kubelet).

    The tunnel plugs in a dialler that goes through the tenant's Konnectivity server; webhooks addressed
    by `clientConfig.url` always use `DirectEgress`.
    """

    async def open_connection(
        self, host: str, port: int, *, ssl: SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """With `ssl`, TLS runs end to end to `host` (the egress, not the caller, starts it: a
        tunnelled transport cannot be upgraded by every event loop's `start_tls`)."""
        ...


class DirectEgress:
    """Dials the address itself: right for `url` webhooks and for a lab without a tunnel."""

    async def open_connection(
        self, host: str, port: int, *, ssl: SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(host, port, ssl=ssl, server_hostname=server_hostname)


class NoEgress:
    """No route into the tenant yet: service-addressed webhooks fail (their failurePolicy decides)."""

    async def open_connection(
        self, host: str, port: int, *, ssl: SSLContext | None = None, server_hostname: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        raise ConnectionRefusedError(f"no egress to {host}:{port}: the tenant has no tunnel")


@dataclass(frozen=True)
class LogOptions:
    """The `pods/log` query, as `kubectl logs` sends it."""

    container: str
    follow: bool = False
    previous: bool = False
    tail_lines: int | None = None
    timestamps: bool = False
    since_seconds: int | None = None
    limit_bytes: int | None = None


class PodLogSource(Protocol):
    """Where `pods/log` reads from: the kubelet of the pod's node (through the tunnel)."""

    def stream(self, pod: dict[str, Any], options: LogOptions) -> AsyncIterator[bytes]:
        """Yields the log bytes; raise `APIError` (e.g. 400 for a container not started)."""
        ...


class PodExecSource(Protocol):
    """Where `pods/exec` runs a command: the kubelet of the pod's node (through the tunnel)."""

    async def exec(self, pod: dict[str, Any], container: str, command: list[str]) -> Any:
        """The finished command: an object with `stdout`, `stderr` (str) and `exit_code` (int);
        raise `APIError` when the kubelet cannot run it."""
        ...


@dataclass(frozen=True)
class ProxyAnswer:
    """What a kubelet or pod answered a proxied request: passed on to the client as it is."""

    status: int
    content_type: str | None
    body: bytes


class NodeProxySource(Protocol):
    """Where `nodes/proxy` goes: the node's kubelet (through the tunnel), as kube-apiserver's node proxy."""

    async def proxy(
        self, node: dict[str, Any], method: str, path: str, body: bytes, content_type: str | None
    ) -> ProxyAnswer:
        """Send one request to the kubelet; raise `OSError` when it cannot be reached."""
        ...

    async def upgrade(
        self, node: dict[str, Any], method: str, path: str, headers: list[tuple[str, str]]
    ) -> tuple[Any, asyncio.StreamReader, asyncio.StreamWriter]:
        """Ask the kubelet to switch protocols (`pods/portforward`): its answer's head (an
        `upstream.Head`) and the connection, the caller's to close; `OSError` when out of reach."""
        ...

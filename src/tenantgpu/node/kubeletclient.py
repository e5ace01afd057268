"""How an API server reaches a pod's kubelet, through any egress: `kubectl logs` and `kubectl exec`.

Give it to the API server as its `log_source` and `exec_source`. It finds the node's kubelet from the
Node object (`status.addresses` InternalIP, `status.daemonEndpoints.kubeletEndpoint.Port`), opens a
stream with the egress (direct, or the tenant's tunnel) and speaks HTTPS to it, as kube-apiserver does
with the real kubelet on :10250: GET `/containerLogs/<ns>/<pod>/<container>` for logs, POST
`/exec/<ns>/<pod>/<container>?command=…` for a command (answered as JSON by the simulated kubelet), and
any request of `nodes/<node>/proxy/<path>` passed on as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from tenantgpu.apiserver import upstream
from tenantgpu.apiserver.hooks import DirectEgress, Egress, ProxyAnswer
from tenantgpu.apiserver.proxy import kubelet_endpoint
from tenantgpu.kubeclient.config import load_cert_chain
from tenantgpu.node.execresult import ExecResult

NodeLookup = Callable[[str], Awaitable[dict[str, Any] | None]]
ErrorFactory = Callable[[str], Exception]


class KubeletClient:
    """`stream(pod, options)` yields the container log bytes from the pod's kubelet; `exec(...)` runs a
    command in one of its containers.

    `node_lookup(name)` returns the Node object (may be set after construction); `egress` dials the
    kubelet (default: directly); `error(message)` builds the exception the API server turns into a
    Status (default ValueError); `client_certificate` (certificate and key, PEM) is presented to the
    kubelet.
    """

    def __init__(
        self,
        node_lookup: NodeLookup | None = None,
        egress: Egress | None = None,
        error: ErrorFactory | None = None,
        client_certificate: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.node_lookup = node_lookup
        self.egress: Egress = egress or DirectEgress()
        self.error: ErrorFactory = error or ValueError
        # the simulated kubelets' serving certificates are self-signed, as with kube-apiserver's
        # --kubelet-certificate-authority unset
        self._tls = upstream.insecure_context()
        if client_certificate is not None:
            # kube-apiserver's --kubelet-client-certificate/--kubelet-client-key: the kubelets' x509
            # authenticator knows the API server by it
            load_cert_chain(self._tls, *client_certificate)

    async def stream(self, pod: dict[str, Any], options: Any) -> AsyncIterator[bytes]:
        meta = pod.get("metadata") or {}
        query: dict[str, str] = {}
        if getattr(options, "tail_lines", None) is not None:
            query["tailLines"] = str(options.tail_lines)
        if getattr(options, "timestamps", False):
            query["timestamps"] = "true"
        follow = bool(getattr(options, "follow", False))
        if getattr(options, "previous", False):
            query["previous"] = "true"
            follow = False  # a terminated run's log is complete
        if follow:
            query["follow"] = "true"
        path = f"/containerLogs/{meta.get('namespace')}/{meta.get('name')}/{options.container}"
        if query:
            path += "?" + urlencode(query)
        reader, writer, authority = await self._open(pod)
        try:
            head = await upstream.send(reader, writer, "GET", path, authority)
            code, chunked = head.status, head.chunked
            if code != 200:
                text = (await upstream.read_body(reader, head)).decode("utf-8", "replace").strip()
                if code == 400:  # the kubelet's own explanation, as kube passes it on
                    raise self.error(text)
                raise self.error(
                    f'container "{options.container}" in pod "{meta.get("name")}" is not available: {text}'
                )
            limit = getattr(options, "limit_bytes", None)
            if follow and chunked:
                sent = 0
                async for chunk in upstream.chunks(reader):
                    if limit:
                        chunk = chunk[: max(0, limit - sent)]
                    sent += len(chunk)
                    yield chunk
                    if limit and sent >= limit:
                        return
                return
            body = await upstream.read_body(reader, head)
            yield body[:limit] if limit else body
        finally:
            writer.close()

    async def exec(self, pod: dict[str, Any], container: str, command: list[str]) -> ExecResult:
        """Run `command` in `container` of `pod` on its kubelet; raises `error(...)` when it cannot."""
        meta = pod.get("metadata") or {}
        path = f"/exec/{meta.get('namespace')}/{meta.get('name')}/{container}?" + urlencode(
            [("command", word) for word in command], quote_via=quote
        )
        reader, writer, authority = await self._open(pod)
        try:
            head = await upstream.send(reader, writer, "POST", path, authority)
            code, body = head.status, await upstream.read_body(reader, head)
        finally:
            writer.close()
        if code != 200:
            text = body.decode("utf-8", "replace").strip()
            raise self.error(f"unable to upgrade connection: {text}")
        answer = orjson.loads(body)
        return ExecResult(str(answer["stdout"]), str(answer["stderr"]), int(answer["exitCode"]))

    async def proxy(
        self, node: dict[str, Any], method: str, path: str, body: bytes, content_type: str | None
    ) -> ProxyAnswer:
        """One request of `nodes/<node>/proxy` to the node's kubelet; `OSError` when it is out of reach."""
        host, port = kubelet_endpoint(node)
        return await upstream.exchange(
            self.egress, host, port, method, path, tls=self._tls, body=body, content_type=content_type
        )

    async def upgrade(
        self, node: dict[str, Any], method: str, path: str, headers: list[tuple[str, str]]
    ) -> tuple[upstream.Head, asyncio.StreamReader, asyncio.StreamWriter]:
        """A request to switch protocols on the node's kubelet (`/portForward`), as kube-apiserver's
        upgrade-aware proxy sends it; the connection stays open for the new protocol."""
        host, port = kubelet_endpoint(node)
        reader, writer = await upstream.dial(self.egress, host, port, self._tls)
        try:
            head = await upstream.upgrade(reader, writer, method, path, f"{host}:{port}", headers)
        except BaseException:
            writer.close()
            raise
        return head, reader, writer

    async def _open(self, pod: dict[str, Any]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        node = await self.node_lookup(node_name) if self.node_lookup else None
        if node is None:
            raise self.error(
                f'node "{node_name}" of pod "{(pod.get("metadata") or {}).get("name")}" not found'
            )
        host, port = kubelet_endpoint(node)
        try:
            reader, writer = await self.egress.open_connection(
                host, port, ssl=self._tls, server_hostname=host
            )
        except OSError as err:
            raise self.error(f"dial kubelet {host}:{port}: {err}") from err
        return reader, writer, f"{host}:{port}"

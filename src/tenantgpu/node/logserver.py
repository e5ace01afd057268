"""The kubelet's HTTPS endpoint (like :10250) and a client for its logs.

It serves `/containerLogs/<ns>/<pod>/<container>` and `/portForward/<ns>/<pod>` (see `portforward`) as
the real kubelet does, and `/exec/<ns>/<pod>/<container>` at the real path but not with its streaming
protocol: the simulated container's programs finish at once, so a POST there answers with their result
as JSON (`stdout`, `stderr`, `exitCode`), and the API server streams it on to the client.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from tenantgpu.apiserver.proxy import kubelet_endpoint
from tenantgpu.hami.tls import ServingCert
from tenantgpu.httpsite import open_site
from tenantgpu.node import portforward
from tenantgpu.node.execresult import ExecResult
from tenantgpu.node.kubeletauth import KubeletAuth

# (namespace, pod, container | None, tail_lines, timestamps) -> text, or None when unknown
LogReader = Callable[[str, str, str | None, int | None, bool], str | None]
# the same arguments -> the text so far, then new text as it is written (kubectl logs -f)
LogFollower = Callable[[str, str, str | None, int | None, bool], AsyncIterator[str]]
# (namespace, pod, container, command) -> the finished command, or None when no such container runs
ExecRunner = Callable[[str, str, str, list[str]], ExecResult | None]
# the pods bound to this node, as the kubelet last received them from its API server
PodLister = Callable[[], list[dict[str, Any]]]
# (namespace, pod, uid or "") -> how to reach the pod's ports, or None when no such pod runs here
# (a text when the runtime refuses the pod as a whole)
PortForwardTargets = Callable[[str, str, str], portforward.Target | str | None]


def self_signed_context(host: str) -> ssl.SSLContext:
    """A server context with a fresh certificate for `host` (the kubelet's self-signed serving cert)."""
    return ServingCert.issue([host, "localhost"], common_name=f"{host}@tenantgpu-kubelet").server_context()


class KubeletServer:
    """Serves container logs, exec, `/pods` and `/healthz` over HTTPS on `host:port` (port 0 = pick a free
    one)."""

    def __init__(
        self,
        read_log: LogReader,
        host: str = "127.0.0.1",
        port: int = 0,
        follow_log: LogFollower | None = None,
        run_command: ExecRunner | None = None,
        read_previous: LogReader | None = None,
        auth: KubeletAuth | None = None,
        list_pods: PodLister | None = None,
        port_forward_target: PortForwardTargets | None = None,
    ) -> None:
        self.read_log = read_log
        self.list_pods = list_pods
        self.port_forward_target = port_forward_target
        # Without it every caller is served, as a kubelet with anonymous access and AlwaysAllow.
        self.auth = auth
        self.read_previous = read_previous  # the log of a container's run before its last restart
        self.follow_log = follow_log
        self.run_command = run_command
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None
        app = web.Application(middlewares=[self._authenticate] if auth is not None else [])
        app.router.add_get("/containerLogs/{ns}/{pod}/{container}", self._logs)
        app.router.add_get("/containerLogs/{ns}/{pod}", self._logs)
        app.router.add_post("/exec/{ns}/{pod}/{container}", self._exec)
        app.router.add_get("/healthz", self._healthz)
        for path in ("/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"):
            app.router.add_route("GET", path, self._port_forward)
            app.router.add_route("POST", path, self._port_forward)
        app.router.add_get("/pods", self._pods)
        app.router.add_get("/pods/", self._pods)
        self.app = app

    async def start(self) -> None:
        context = self_signed_context(self.host)
        if self.auth is not None:
            context = self.auth.server_context(context)
        self._runner, self.port = await open_site(self.app, self.host, self.port, context)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        assert self.auth is not None
        tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
        peercert = tls.getpeercert() if tls is not None else None
        verdict = await self.auth.check(peercert, request.method, request.path)
        if verdict.status is not None:
            return web.Response(status=verdict.status, text=verdict.text)
        return await handler(request)  # type: ignore[no-any-return]

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _pods(self, _: web.Request) -> web.Response:
        # kube's kubelet encodes its pod manager's pods as one v1 PodList: the list has the type, its
        # items (typed in Go) do not
        items = [
            {k: v for k, v in pod.items() if k not in ("kind", "apiVersion")}
            for pod in (self.list_pods() if self.list_pods is not None else [])
        ]
        items.sort(key=lambda pod: (pod["metadata"].get("namespace", ""), pod["metadata"].get("name", "")))
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        info = request.match_info
        target = None
        if self.port_forward_target is not None:
            target = self.port_forward_target(info["ns"], info["pod"], info.get("uid", ""))
        if target is None:
            return web.Response(status=404, text="pod does not exist")
        if isinstance(target, str):  # the runtime's refusal before any stream (the pod has ended)
            return web.Response(status=500, text=target)
        return await portforward.serve(request, target)

    async def _exec(self, request: web.Request) -> web.Response:
        command = request.query.getall("command", [])
        if not command:
            return web.Response(status=400, text="you must specify at least 1 command")
        result = None
        if self.run_command is not None:
            result = self.run_command(
                request.match_info["ns"], request.match_info["pod"], request.match_info["container"], command
            )
        if result is None:
            return web.Response(status=404, text=f'container not found ("{request.match_info["container"]}")')
        return web.json_response(
            {"stdout": result.stdout, "stderr": result.stderr, "exitCode": result.exit_code}
        )

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        tail = request.query.get("tailLines")
        args = (
            request.match_info["ns"],
            request.match_info["pod"],
            request.match_info.get("container"),
            int(tail) if tail and tail.lstrip("-").isdigit() and int(tail) >= 0 else None,
            request.query.get("timestamps") in ("true", "1"),
        )
        if request.query.get("previous") in ("true", "1"):
            text = self.read_previous(*args) if self.read_previous is not None else None
            if text is None:  # kube's words, passed on to the client as a 400
                container, pod = request.match_info.get("container"), request.match_info["pod"]
                return web.Response(
                    status=400, text=f'previous terminated container "{container}" in pod "{pod}" not found'
                )
            return web.Response(text=text, content_type="text/plain")
        text = self.read_log(*args)
        if text is None:
            return web.Response(status=404, text="container not found")
        if request.query.get("follow") not in ("true", "1") or self.follow_log is None:
            return web.Response(text=text, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            async for chunk in self.follow_log(*args):
                if chunk:
                    await response.write(chunk.encode())
            await response.write_eof()
        return response


async def fetch_container_log(
    node: dict[str, Any],
    namespace: str,
    pod: str,
    container: str,
    *,
    tail_lines: int | None = None,
    timestamps: bool = False,
    session: aiohttp.ClientSession | None = None,
) -> str:
    """GET the log from the node's kubelet; raises LookupError when the kubelet does not know it.

    Pass a `session` whose connector dials through the tunnel to reach a kubelet behind it; the
    kubelet's serving certificate is self-signed, so it is not verified (as with
    `--kubelet-certificate-authority` unset on kube-apiserver).
    """
    host, port = kubelet_endpoint(node)
    params: dict[str, str] = {}
    if tail_lines is not None:
        params["tailLines"] = str(tail_lines)
    if timestamps:
        params["timestamps"] = "true"
    url = f"https://{host}:{port}/containerLogs/{namespace}/{pod}/{container}"
    owned = session is None
    session = session or aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False))
    try:
        async with session.get(url, params=params, ssl=False) as resp:
            text = await resp.text()
            if resp.status == 404:
                raise LookupError(text)
            resp.raise_for_status()
            return text
    finally:
        if owned:
            await session.close()

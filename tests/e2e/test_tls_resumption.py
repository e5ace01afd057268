"""The kube client resumes its TLS session on later connections (a controller opens one per watch), and
the API server still knows who is calling: the client certificate travels with the resumed session."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from apiserver_harness import BackgroundLoop, RunningAPIServer

from tenantgpu.kubeclient.config import ResumingContext, load_kubeconfig


async def _get(url_host: str, port: int, context: ssl.SSLContext, path: str) -> tuple[int, bool]:
    reader, writer = await asyncio.open_connection(url_host, port, ssl=context, server_hostname=url_host)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {url_host}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    await reader.read()
    ssl_object = writer.get_extra_info("ssl_object")
    reused = bool(ssl_object.session_reused)
    writer.close()
    return status, reused


def _context(kubeconfig: Path) -> ssl.SSLContext:
    context = load_kubeconfig(kubeconfig).ssl_context()
    assert isinstance(context, ResumingContext)
    return context


def test_later_connections_resume_and_keep_their_identity(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop
) -> None:
    host, port = "127.0.0.1", apiserver.server.port
    admin = _context(apiserver.kubeconfig)
    developer = _context(
        apiserver.write_kubeconfig("dev.kubeconfig", apiserver.server.user_kubeconfig("dev", ["devs"]))
    )

    async def calls() -> list[tuple[int, bool]]:
        return [await _get(host, port, admin, "/api/v1/namespaces/default/pods") for _ in range(3)] + [
            await _get(host, port, developer, "/api/v1/namespaces/default/pods") for _ in range(3)
        ]

    results = background_loop.run(calls())
    admin_calls, developer_calls = results[:3], results[3:]
    # the first connection of each client does the full handshake, the later ones resume it
    assert [reused for _, reused in admin_calls] == [False, True, True]
    assert [reused for _, reused in developer_calls] == [False, True, True]
    # and the server still tells the two apart: the admin may list pods, the developer may not
    assert {status for status, _ in admin_calls} == {200}
    assert {status for status, _ in developer_calls} == {403}

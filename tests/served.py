"""An aiohttp app served on a free local port, with a KubeClient pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from tenantgpu.kubeclient import KubeClient, KubeConfig


async def serve(app: web.Application, prefix: str = "", **client_options: Any) -> AsyncIterator[KubeClient]:
    """Yields once: a client for `http://127.0.0.1:<port><prefix>`; closes both afterwards."""
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = KubeClient(KubeConfig(server=f"http://127.0.0.1:{port}{prefix}"), **client_options)
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()

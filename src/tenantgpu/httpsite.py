"""An aiohttp application served on one address, for the lab's small HTTP(S) endpoints (the kubelet's
port, HAMi's metrics)."""

from __future__ import annotations

import ssl

from aiohttp import web


async def open_site(
    app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, int]:
    """Serve `app` on `host:port` (0 picks a free port); returns its runner, to clean up, and the port."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

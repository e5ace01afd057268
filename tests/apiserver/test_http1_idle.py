"""`apiserver.http1` closes connections left idle, as aiohttp's keep-alive timeout did, but never one
that is still streaming (a watch) or waiting for its answer."""

from __future__ import annotations

import asyncio

from aiohttp import web

from tenantgpu.apiserver.http1 import HTTPServer, start_stream


async def _handler(request: object) -> object:
    if getattr(request, "path", "") == "/stream":
        stream = await start_stream(request, 200, {"Content-Type": "text/plain"})
        for _ in range(6):
            await stream.write(b"tick\n")
            await asyncio.sleep(0.1)
        await stream.write_eof()
        return stream
    return web.Response(body=b"{}", headers={"Content-Type": "application/json"})


async def _serve() -> tuple[HTTPServer, asyncio.Server, int]:
    http = HTTPServer(_handler, web.Server(_handler), 1024, idle_timeout=0.2, sweep_seconds=0.05)
    listener = await asyncio.get_running_loop().create_server(http, "127.0.0.1", 0)
    return http, listener, listener.sockets[0].getsockname()[1]


async def test_an_idle_connection_is_closed_after_the_timeout() -> None:
    http, listener, port = await _serve()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /version HTTP/1.1\r\nHost: t\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert await reader.readexactly(2) == b"{}"
        assert await asyncio.wait_for(reader.read(), 2.0) == b""  # closed by the server, not by us
        writer.close()
    finally:
        listener.close()
        await http.close()


async def test_a_stream_longer_than_the_timeout_is_not_cut() -> None:
    http, listener, port = await _serve()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        body = await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5.0)
        assert body.count(b"tick") == 6  # 0.6 s of streaming, three idle timeouts long
        writer.close()
    finally:
        listener.close()
        await http.close()

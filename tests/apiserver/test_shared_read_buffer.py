"""The connections of one server (and of one client pool) read into one shared buffer (`readbuffer.py`):
a read is handed over before the next connection reads, so requests and answers that arrive in pieces,
interleaved across connections, reach each connection whole and unmixed, bodies larger than the buffer
included, over TLS as over plain TCP."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from tenantgpu import eventloop
from tenantgpu.apiserver.http1 import HTTPServer
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.kubeclient.transport import Http1Pool
from tenantgpu.readbuffer import READ_BUFFER_BYTES


async def _echo(request: object) -> object:
    """`/p…` sends the body back; anything else describes what arrived."""
    body = await request.read()  # type: ignore[attr-defined]
    path = request.path  # type: ignore[attr-defined]
    if path.startswith("/p"):
        return web.Response(body=body)
    return web.Response(body=orjson.dumps({"path": path, "size": len(body), "tail": body[-8:].decode()}))


async def _interleaved_pieces() -> None:
    http = HTTPServer(_echo, web.Server(_echo), 8 * READ_BUFFER_BYTES)
    listener = await asyncio.get_running_loop().create_server(http, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        pairs = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        bodies = [(b"%d" % i) * (READ_BUFFER_BYTES + 1000 * i) for i in range(4)]
        requests = [
            b"POST /c%d HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%b" % (i, len(body), body)
            for i, body in enumerate(bodies)
        ]
        # each request in 4 KiB pieces, the connections taking turns
        for offset in range(0, max(len(r) for r in requests), 4096):
            for (_, writer), request in zip(pairs, requests, strict=True):
                if offset < len(request):
                    writer.write(request[offset : offset + 4096])
                    await writer.drain()
            await asyncio.sleep(0)
        for i, (reader, writer) in enumerate(pairs):
            await reader.readuntil(b"\r\n\r\n")
            answer = orjson.loads(await asyncio.wait_for(reader.readuntil(b"}"), 5.0))
            assert answer == {"path": f"/c{i}", "size": len(bodies[i]), "tail": bodies[i][-8:].decode()}
            writer.close()
    finally:
        listener.close()
        await http.close()


async def _large_answers_over_tls(tmp_path: Path) -> None:
    pki = ServerPKI.create("buffers")
    (tmp_path / "tls.crt").write_bytes(pki.serving_cert_pem)
    (tmp_path / "tls.key").write_bytes(pki.serving_key_pem)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_context = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
    http = HTTPServer(_echo, web.Server(_echo), 8 * READ_BUFFER_BYTES)
    listener = await asyncio.get_running_loop().create_server(http, "127.0.0.1", 0, ssl=server_context)
    port = listener.sockets[0].getsockname()[1]
    pool = Http1Pool(f"https://127.0.0.1:{port}", client_context, headers={}, size=8)
    try:
        bodies = [bytes([65 + i]) * (3 * READ_BUFFER_BYTES + 777 * i) for i in range(8)]
        answers = await asyncio.gather(
            *(
                pool.request("POST", f"/p{i}", body=body, content_type="text/plain")
                for i, body in enumerate(bodies)
            )
        )
        for body, answer in zip(bodies, answers, strict=True):
            assert answer.status == 200
            assert answer.body == body
    finally:
        pool.close()
        listener.close()
        await http.close()


# the lab's processes run uvloop (eventloop.run), whose TLS transport reads differently from asyncio's
RUNNERS = pytest.mark.parametrize("run", [asyncio.run, eventloop.run], ids=["asyncio", "lab-loop"])


@RUNNERS
def test_interleaved_pieces_of_requests_on_many_connections_stay_apart(run: Callable[..., None]) -> None:
    run(_interleaved_pieces())


@RUNNERS
def test_a_client_pool_reads_concurrent_large_answers_over_tls_unmixed(
    run: Callable[..., None], tmp_path: Path
) -> None:
    run(_large_answers_over_tls(tmp_path))

"""API server throughput: pod creates/s and GETs/s from 50 TLS clients, 10 watchers, idle tenant memory.

The server runs in a subprocess pinned to CPU 0, the load generator on CPU 1. For scale, the same
load is also pointed at two bare TLS handlers that answer `{}` and do nothing else: aiohttp's, and an
httptools protocol like the API server's own (`apiserver/http1.py`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import resource
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from tenantgpu import eventloop

CLIENTS = 50
DURATION = 5.0
WATCHERS = 10
IDLE_TENANTS = 100
RESULTS = Path(__file__).parent / "results"


def _ssl_from_kubeconfig(path: Path, tmp: Path) -> tuple[str, ssl.SSLContext]:
    config = yaml.safe_load(path.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    cert, key = tmp / "c.crt", tmp / "c.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    context.load_cert_chain(cert, key)
    return cluster["server"], context


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > cpu:  # type: ignore[operator]
        os.sched_setaffinity(0, {cpu})


def _start_server(state_dir: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu.apiserver", "--state-dir", str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: _pin(0),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("ready"):
        raise RuntimeError(f"server did not start: {line}")
    return process


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process: a figure the other loads on a shared machine do not skew."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return p50, p99


class _Connection:
    """A minimal keep-alive HTTP/1.1 client over TLS: aiohttp's client alone costs more CPU per request
    than the server under test, so it could not generate the load."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        self._address = (host, port)
        self._context = context
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(*self._address, ssl=self._context)
        assert self._reader is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self._writer.write(head.encode() + b"\r\n" + (body or b""))
        headers = await self._reader.readuntil(b"\r\n\r\n")
        status = int(headers[9:12])
        lower = headers.lower()
        at = lower.find(b"content-length:")
        if at < 0:
            raise RuntimeError("response without Content-Length")
        length = int(lower[at + 15 : lower.find(b"\r\n", at)])
        return status, await self._reader.readexactly(length)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


async def _load(
    server: str, context: ssl.SSLContext, requests: Any, duration: float
) -> tuple[float, float, float, int, int]:
    """CLIENTS connections send `requests(worker, i)` back to back: rate, p50, p99, errors, count.

    Connections are opened (TLS handshake plus one request) before the clock starts, so latencies
    are those of requests on established keep-alive connections, as with kubectl and informers.
    """
    host, port = server.removeprefix("https://").split(":")
    connections = [_Connection(host, int(port), context) for _ in range(CLIENTS)]
    await asyncio.gather(*(c.request("GET", "/version", None) for c in connections))
    latencies: list[float] = []
    failures = 0
    deadline = time.perf_counter() + duration

    async def worker(n: int) -> None:
        nonlocal failures
        connection = connections[n]
        i = 0
        while time.perf_counter() < deadline:
            method, path, body = requests(n, i)
            started = time.perf_counter()
            status, _ = await connection.request(method, path, body)
            latencies.append(time.perf_counter() - started)
            failures += status >= 400
            i += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(worker(n) for n in range(CLIENTS)))
    finally:
        for connection in connections:
            connection.close()
    elapsed = time.perf_counter() - started
    p50, p99 = _percentiles(latencies)
    return len(latencies) / elapsed, p50, p99, failures, len(latencies)


def _pod(name: str, **labels: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "bench", **labels}},
            "spec": {
                "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}]
            },
        }
    ).encode()


async def _watch(
    session: aiohttp.ClientSession, url: str, counts: list[int], index: int, ready: asyncio.Event
) -> None:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
        ready.set()
        async for line in response.content:
            if line.strip():
                event = orjson.loads(line)
                if event["type"] == "ADDED":
                    counts[index] += 1


async def _bench_server(server: str, context: ssl.SSLContext, pid: int) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(ssl=context, limit=CLIENTS + WATCHERS + 5)
    async with aiohttp.ClientSession(connector=connector) as session:
        base = f"{server}/api/v1/namespaces/default/pods"
        path = "/api/v1/namespaces/default/pods"
        cpu_before = _cpu_seconds(pid)
        create_rate, c50, c99, c_fail, creates = await _load(
            server, context, lambda n, i: ("POST", path, _pod(f"b-{n}-{i}")), DURATION
        )
        create_cpu = (_cpu_seconds(pid) - cpu_before) / creates
        cpu_before = _cpu_seconds(pid)
        get_rate, g50, g99, g_fail, gets = await _load(
            server, context, lambda n, i: ("GET", f"{path}/b-{n}-0", None), DURATION
        )
        get_cpu = (_cpu_seconds(pid) - cpu_before) / gets

        start_rv = (await (await session.get(f"{base}?limit=1")).json())["metadata"]["resourceVersion"]
        counts = [0] * WATCHERS
        readies = [asyncio.Event() for _ in range(WATCHERS)]
        watch_url = f"{base}?watch=true&resourceVersion={start_rv}&labelSelector=phase%3Dwatched"
        watchers = [
            asyncio.create_task(_watch(session, watch_url, counts, i, readies[i])) for i in range(WATCHERS)
        ]
        await asyncio.gather(*(r.wait() for r in readies))
        cpu_before = _cpu_seconds(pid)
        watched_rate, _, w99, w_fail, watched = await _load(
            server, context, lambda n, i: ("POST", path, _pod(f"w-{n}-{i}", phase="watched")), DURATION
        )
        await asyncio.sleep(1.0)
        watched_cpu = (_cpu_seconds(pid) - cpu_before) / watched
        for task in watchers:
            task.cancel()
    return {
        "creates_per_s": round(create_rate),
        "create_p50_ms": round(c50, 2),
        "create_p99_ms": round(c99, 2),
        "create_errors": c_fail,
        "gets_per_s": round(get_rate),
        "get_p50_ms": round(g50, 2),
        "get_p99_ms": round(g99, 2),
        "get_errors": g_fail,
        "server_cpu_us_per_create": round(create_cpu * 1e6),
        "server_cpu_us_per_get": round(get_cpu * 1e6),
        "watched_creates_per_s": round(watched_rate),
        "watched_create_p99_ms": round(w99, 2),
        "server_cpu_us_per_watched_create": round(watched_cpu * 1e6),
        "watchers": WATCHERS,
        "watched_creates": watched,
        "watch_events_min": min(counts),
        "watch_events_max": max(counts),
        "watchers_saw_every_event": all(c == watched for c in counts) and w_fail == 0,
    }


_BARE = """
import asyncio, ssl, sys
from aiohttp import web
async def ok(request):
    await request.read()
    return web.Response(body=b'{}', content_type='application/json')
async def main():
    app = web.Application(); app.router.add_route('*', '/{tail:.*}', ok)
    runner = web.AppRunner(app, access_log=None); await runner.setup()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    site = web.TCPSite(runner, '127.0.0.1', 0, ssl_context=ctx); await site.start()
    print('ready', site._server.sockets[0].getsockname()[1], flush=True); await asyncio.Event().wait()
import uvloop  # the same event loop as the API server, so the comparison is of the handlers
uvloop.run(main())
"""


_BARE_HTTPTOOLS = """
import asyncio, ssl, sys
import httptools
class Connection(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.parser = transport, httptools.HttpRequestParser(self)
    def data_received(self, data):
        self.parser.feed_data(data)
    def on_message_complete(self):
        asyncio.get_running_loop().create_task(self.answer())
    async def answer(self):
        self.transport.write(b'HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 2\\r\\n\\r\\n{}')
async def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    server = await asyncio.get_running_loop().create_server(Connection, '127.0.0.1', 0, ssl=ctx)
    print('ready', server.sockets[0].getsockname()[1], flush=True); await asyncio.Event().wait()
import uvloop
uvloop.run(main())
"""


async def _bench_bare(
    pki_dir: Path, context: ssl.SSLContext, script: str = _BARE, prefix: str = "bare"
) -> dict[str, Any]:
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(pki_dir / "apiserver.crt"), str(pki_dir / "apiserver.key")],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: _pin(0),
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().split()[1])
        url = f"https://127.0.0.1:{port}"
        cpu_before = _cpu_seconds(process.pid)
        get_rate, _, _, _, gets = await _load(url, context, lambda n, i: ("GET", "/x", None), DURATION / 2)
        get_cpu = _cpu_seconds(process.pid) - cpu_before
        cpu_before = _cpu_seconds(process.pid)
        post_rate, _, _, _, posts = await _load(
            url, context, lambda n, i: ("POST", "/x", _pod("x")), DURATION / 2
        )
        post_cpu = _cpu_seconds(process.pid) - cpu_before
        return {
            f"{prefix}_gets_per_s": round(get_rate),
            f"{prefix}_posts_per_s": round(post_rate),
            f"{prefix}_cpu_us_per_get": round(get_cpu / gets * 1e6),
            f"{prefix}_cpu_us_per_post": round(post_cpu / posts * 1e6),
        }
    finally:
        process.terminate()
        process.wait()


_IDLE = """
import asyncio, gc, resource, sys, tempfile
from pathlib import Path
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore

def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
async def main(n):
    tmp = Path(tempfile.mkdtemp())
    store = SQLiteDatastore(tmp / 'state.db')
    pkis = [ServerPKI.create(f't{i}') for i in range(n + 1)]
    first = APIServer(APIServerConfig(name='t-first', datastore=store, pki=pkis[-1]))
    await first.start()
    gc.collect(); before = rss()
    servers = []
    for i in range(n):
        server = APIServer(APIServerConfig(name=f't{i}', datastore=store, pki=pkis[i]))
        await server.start(); servers.append(server)
    gc.collect(); after = rss()
    print((after - before) / n)
asyncio.run(main(int(sys.argv[1])))
"""


def _idle_memory() -> float:
    out = subprocess.run(
        [sys.executable, "-c", _IDLE, str(IDLE_TENANTS)], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def pinned_server() -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """One tenant API server in a subprocess on CPU 0, this process on CPU 1: yields the server process
    and the directory its state (`server/`, with `admin.kubeconfig`) is in; stops it afterwards."""
    _pin(1)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        process = _start_server(tmp / "server")
        try:
            yield process, tmp
        finally:
            process.terminate()
            process.wait()


def main() -> None:
    with pinned_server() as (process, tmp):
        server, context = _ssl_from_kubeconfig(tmp / "server" / "admin.kubeconfig", tmp)
        # The load generator runs on uvloop too, and watchers parse with orjson: a client that
        # spends less CPU per request and event measures the server rather than itself.
        figures = eventloop.run(_bench_server(server, context, process.pid))
        figures["server_max_rss_mib"] = None
        with open(f"/proc/{process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    figures["server_max_rss_mib"] = round(int(line.split()[1]) / 1024, 1)
        process.terminate()  # the bare handler gets CPU 0 to itself
        process.wait()
        figures.update(eventloop.run(_bench_bare(tmp / "server" / "pki", context)))
        figures.update(
            eventloop.run(_bench_bare(tmp / "server" / "pki", context, _BARE_HTTPTOOLS, "bare_httptools"))
        )
    figures["idle_tenant_mib"] = round(_idle_memory() / (1024 * 1024), 2)
    figures["idle_tenants_measured"] = IDLE_TENANTS
    figures["load_generator_max_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    for key, value in figures.items():
        print(f"{key:28} {value}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "apiserver.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""The kube client's CPU per request: its own HTTP/1.1 transport against aiohttp's client, same PATCHes.

Every lab component is a client of the tenant API servers, so the client's CPU per request is spent
about ten times per pod in the worker process. One tenant API server runs in a subprocess pinned to
CPU 0; this process, pinned to CPU 1 and on uvloop, sends merge PATCHes to one ConfigMap with 10 in
flight, in rounds that alternate between `KubeClient` (tenantgpu's transport, httptools) and a plain
`aiohttp.ClientSession` with the same TLS context and headers. The figure is this process's CPU time
per request; the median round of each is shown.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.apiserver import RESULTS, pinned_server
from tenantgpu import eventloop
from tenantgpu.kubeclient import KubeClient

REQUESTS = 3000
IN_FLIGHT = 10
ROUNDS = 3
PATH = "/api/v1/namespaces/default/configmaps/bench"
MERGE = "application/merge-patch+json"


async def _cpu_per_request(send: Callable[[int], Awaitable[None]]) -> float:
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> None:
        async with slots:
            await send(i)

    started = time.process_time()
    await asyncio.gather(*(one(i) for i in range(REQUESTS)))
    return (time.process_time() - started) / REQUESTS * 1e6


async def _bench(kubeconfig: Path) -> dict[str, Any]:
    client = KubeClient.from_kubeconfig(kubeconfig)
    await client.create("configmaps", {"metadata": {"name": "bench"}, "data": {"n": "0"}}, "default")
    headers = {"User-Agent": "bench", "Accept": "application/json", "Content-Type": MERGE}
    connector = aiohttp.TCPConnector(ssl=client.config.ssl_context(), limit=IN_FLIGHT)
    session = aiohttp.ClientSession(connector=connector, headers=headers, cookie_jar=aiohttp.DummyCookieJar())
    url = client.config.server + PATH

    async def with_transport(i: int) -> None:
        await client.patch("configmaps", "bench", {"data": {"n": str(i)}}, "default", decode=False)

    async def with_aiohttp(i: int) -> None:
        async with session.patch(url, data=orjson.dumps({"data": {"n": str(i)}})) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"PATCH answered {response.status}")

    transport: list[float] = []
    baseline: list[float] = []
    try:
        for _ in range(ROUNDS):
            transport.append(await _cpu_per_request(with_transport))
            baseline.append(await _cpu_per_request(with_aiohttp))
    finally:
        await session.close()
        await client.close()
    return {
        "requests_per_round": REQUESTS,
        "rounds": ROUNDS,
        "transport_cpu_us_per_patch": round(statistics.median(transport), 1),
        "aiohttp_cpu_us_per_patch": round(statistics.median(baseline), 1),
        "transport_rounds_us": [round(x, 1) for x in transport],
        "aiohttp_rounds_us": [round(x, 1) for x in baseline],
    }


def main() -> None:
    with pinned_server() as (_, tmp):
        figures = eventloop.run(_bench(tmp / "server" / "admin.kubeconfig"))
    ratio = figures["aiohttp_cpu_us_per_patch"] / figures["transport_cpu_us_per_patch"]
    figures["aiohttp_over_transport"] = round(ratio, 2)
    for key, value in figures.items():
        print(f"{key:28} {value}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "kubeclient.json").write_text(json.dumps(figures, indent=2) + "\n")

"""Webhook calls per second through the Konnectivity tunnel versus direct, with p50/p99 latency.

The worker side (an HTTPS webhook and the proxy agent) runs in its own process, as on a real node;
the API-server side (the proxy server and the caller) runs here. Modes:
- direct/keep-alive: aiohttp straight to the webhook, connection reused;
- tunnel/keep-alive: aiohttp through `Egress.connector()`, the tunnelled connection reused;
- direct/per-call and tunnel/per-call: a fresh dial + TLS handshake per call (`Connection: close`),
  as a webhook client without connection reuse does;
- tunnel/keep-alive and tunnel/per-call on a busy loop: the same while other tasks keep this process's
  event loop busy (BUSY_TASKS tasks of BUSY_MS of work per turn, as in a loaded lab process). A gRPC
  write or read completes only after several loop turns and an agent's stream takes one write at a
  time, so the tunnel's calls/s follow the loop's turns/s; `turns_per_call` shows how many a call costs.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

RESULTS = Path(__file__).resolve().parent / "results" / "tunnel.json"
WEBHOOK_HOST = "hami-scheduler.kube-system.svc"
SECONDS_PER_MODE = 3.0
CONCURRENCY = 8
BUSY_TASKS = 10
BUSY_MS = 1.0
REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "bench", "operation": "CREATE", "object": {"kind": "Pod", "pad": "x" * 1500}},
    }
).encode()


def _pki() -> dict[str, bytes]:
    """One CA, a serving certificate for the proxy server and one for the webhook behind the agent."""
    from tenantgpu.apiserver.pki import CertificateAuthority

    ca = CertificateAuthority.create("bench-ca")
    out = {"ca": ca.cert_pem}
    for label, names in (("server", ["konnectivity-server", "127.0.0.1"]), ("webhook", [WEBHOOK_HOST])):
        out[f"{label}_cert"], out[f"{label}_key"] = ca.issue_serving(names, common_name=names[0])
    return out


def _worker(pki: dict[str, bytes], server_address: str, ports: Any) -> None:
    """The simulated node: an HTTPS webhook and the proxy agent that reaches it."""
    asyncio.run(_worker_main(pki, server_address, ports))


async def _worker_main(pki: dict[str, bytes], server_address: str, ports: Any) -> None:
    from aiohttp import web

    from tenantgpu.konnectivity.agent import ProxyAgent

    async def review(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(body=body[:200], content_type="application/json")

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c").write_bytes(pki["webhook_cert"])
        (Path(tmp) / "k").write_bytes(pki["webhook_key"])
        context.load_cert_chain(str(Path(tmp) / "c"), str(Path(tmp) / "k"))
    app = web.Application()
    app.router.add_post("/mutate", review)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def policy(host: str, _port: int) -> tuple[str, int]:
        return "127.0.0.1", port

    agent = ProxyAgent(server_address, pki["ca"], "bench-token", agent_id="bench-worker", dial_policy=policy)
    await agent.start()
    ports.put(port)
    await asyncio.Event().wait()


async def _measure(call: Any, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(CONCURRENCY)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "calls": len(latencies),
        "calls_per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 2),
    }


async def _measure_on_busy_loop(call: Any, seconds: float) -> dict[str, float]:
    """`_measure` while other tasks keep the loop busy; adds the loop's turns per second and per call."""
    loop = asyncio.get_running_loop()
    stop = False
    turns = 0

    def turn() -> None:
        nonlocal turns
        turns += 1
        if not stop:
            loop.call_soon(turn)

    async def busy() -> None:
        while not stop:
            until = time.perf_counter() + BUSY_MS / 1000
            while time.perf_counter() < until:
                pass
            await asyncio.sleep(0)

    tasks = [loop.create_task(busy()) for _ in range(BUSY_TASKS)]
    turn()
    started = time.perf_counter()
    try:
        figures = await _measure(call, seconds)
    finally:
        stop = True
        await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    figures["loop_turns_per_second"] = round(turns / elapsed, 1)
    figures["turns_per_call"] = round(turns / max(1, figures["calls"]) * CONCURRENCY, 1)
    return figures


async def _run() -> dict[str, Any]:
    from tenantgpu.konnectivity.server import ProxyServer

    pki = _pki()

    async def accept_bench_token(token: str) -> str | None:
        return "system:serviceaccount:kube-system:konnectivity-agent" if token == "bench-token" else None

    server = ProxyServer(
        token_verifier=accept_bench_token, cert_pem=pki["server_cert"], key_pem=pki["server_key"]
    )
    await server.start()
    ports: Any = multiprocessing.get_context("spawn").Queue()
    worker = multiprocessing.get_context("spawn").Process(
        target=_worker, args=(pki, server.address, ports), daemon=True
    )
    worker.start()
    try:
        webhook_port = await asyncio.get_running_loop().run_in_executor(None, ports.get, True, 60)
        await server.wait_for_agents(1, timeout=30)
        client_tls = ssl.create_default_context(cadata=pki["ca"].decode())
        results: dict[str, Any] = {"concurrency": CONCURRENCY, "seconds_per_mode": SECONDS_PER_MODE}

        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONCURRENCY, ssl=client_tls)
        ) as direct:

            async def direct_call() -> None:
                async with direct.post(
                    f"https://127.0.0.1:{webhook_port}/mutate",
                    data=REVIEW,
                    server_hostname=WEBHOOK_HOST,
                ) as response:
                    await response.read()

            results["direct_keepalive"] = await _measure(direct_call, SECONDS_PER_MODE)

        async with aiohttp.ClientSession(connector=server.egress.connector(limit=CONCURRENCY)) as tunnelled:

            async def tunnel_call() -> None:
                async with tunnelled.post(
                    f"https://{WEBHOOK_HOST}:443/mutate", data=REVIEW, ssl=client_tls
                ) as response:
                    await response.read()

            results["tunnel_keepalive"] = await _measure(tunnel_call, SECONDS_PER_MODE)
            results["tunnel_keepalive_busy_loop"] = await _measure_on_busy_loop(tunnel_call, SECONDS_PER_MODE)

        async def one_shot(open_connection: Any, host: str, port: int) -> None:
            reader, writer = await open_connection(host, port)
            await writer.start_tls(client_tls, server_hostname=WEBHOOK_HOST)
            writer.write(
                f"POST /mutate HTTP/1.1\r\nHost: {WEBHOOK_HOST}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(REVIEW)}\r\nConnection: close\r\n\r\n".encode()
                + REVIEW
            )
            await reader.read()
            writer.close()

        results["direct_per_call"] = await _measure(
            lambda: one_shot(asyncio.open_connection, "127.0.0.1", webhook_port), SECONDS_PER_MODE
        )
        results["tunnel_per_call"] = await _measure(
            lambda: one_shot(server.egress.open_connection, WEBHOOK_HOST, 443), SECONDS_PER_MODE
        )
        results["tunnel_per_call_busy_loop"] = await _measure_on_busy_loop(
            lambda: one_shot(server.egress.open_connection, WEBHOOK_HOST, 443), SECONDS_PER_MODE
        )
        return results
    finally:
        worker.kill()
        worker.join(5)
        await server.stop(grace=None)


def main() -> None:
    results = asyncio.run(_run())
    modes = (
        "direct_keepalive",
        "tunnel_keepalive",
        "tunnel_keepalive_busy_loop",
        "direct_per_call",
        "tunnel_per_call",
        "tunnel_per_call_busy_loop",
    )
    for mode in modes:
        figures = results[mode]
        busy = (
            f"  loop {figures['loop_turns_per_second']:.0f} turns/s, {figures['turns_per_call']:.1f} per call"
            if "loop_turns_per_second" in figures
            else ""
        )
        print(
            f"{mode:26s} {figures['calls_per_second']:8.1f} calls/s  "
            f"p50 {figures['p50_ms']:7.2f} ms  p99 {figures['p99_ms']:7.2f} ms{busy}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {RESULTS}")


if __name__ == "__main__":
    main()

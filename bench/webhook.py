"""HAMi's webhook: the server's CPU per AdmissionReview, on tenantgpu's HTTP/1.1 server and on aiohttp's.

Every pod created in the lab is reviewed once by its tenant's HAMi webhook, in the worker process. This
process serves reviews of a fractional GPU pod over HTTPS, from `HamiWebhook` (the project's HTTP/1.1
server, as the lab runs it) and from an aiohttp web server calling the same review handler with the same
certificate, in rounds that alternate between the two. The client is a subprocess sending one review
after another on one kept-alive connection; the figure is this process's CPU time per review, median
round of each.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.apiserver import RESULTS
from tenantgpu import eventloop
from tenantgpu.gpushare import SharingConfig
from tenantgpu.hami.webhook import WEBHOOK_PATH, HamiWebhook

REVIEWS = 3000
ROUNDS = 3

# The client: plain sockets and ssl, so that its own cost stays out of this process.
_CLIENT = r"""
import json, socket, ssl, sys
port, ca_file, count, path = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
       "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}}}]}}
body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u",
    "kind": {"kind": "Pod"}, "namespace": "t", "operation": "CREATE", "object": pod}}).encode()
request = (f"POST {path} HTTP/1.1\r\nHost: hami\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
context = ssl.create_default_context(cadata=open(ca_file).read())
conn = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")
for _ in range(count):
    conn.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:40]
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(rest) < length:
        rest += conn.recv(65536)
    assert b'"allowed":true' in rest
"""


async def _round(port: int, ca_file: Path) -> float:
    """This process's CPU seconds per review while the client sends REVIEWS of them."""
    started = time.process_time()
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, str(port), str(ca_file), str(REVIEWS), WEBHOOK_PATH
    )
    if await client.wait() != 0:
        raise RuntimeError("the review client failed")
    return (time.process_time() - started) / REVIEWS


async def _measure() -> dict[str, Any]:
    webhook = HamiWebhook(SharingConfig())
    await webhook.start()
    # The same handler and certificate behind aiohttp's web server: what the webhook ran on before.
    app = web.Application()
    app.router.add_post(WEBHOOK_PATH, webhook._review)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=webhook.cert.server_context())
    await site.start()
    aiohttp_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rounds: dict[str, list[float]] = {"tenantgpu": [], "aiohttp": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ca_file = Path(tmp) / "ca.pem"
            ca_file.write_bytes(webhook.ca_bundle)
            for _ in range(ROUNDS):
                rounds["tenantgpu"].append(await _round(webhook.port, ca_file))
                rounds["aiohttp"].append(await _round(aiohttp_port, ca_file))
    finally:
        await runner.cleanup()
        await webhook.stop()
    return {
        "reviews_per_round": REVIEWS,
        "rounds": ROUNDS,
        "server_cpu_us_per_review": {
            name: round(statistics.median(values) * 1e6, 1) for name, values in rounds.items()
        },
        "rounds_us": {name: [round(v * 1e6, 1) for v in values] for name, values in rounds.items()},
    }


def main() -> None:
    result = eventloop.run(_measure())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "webhook.json").write_text(json.dumps(result, indent=2) + "\n")
    cpu = result["server_cpu_us_per_review"]
    print(
        f"HAMi webhook, server CPU per review (median of {ROUNDS} rounds of {REVIEWS}, alternating): "
        f"tenantgpu's HTTP/1.1 server {cpu['tenantgpu']:.0f} µs, aiohttp's web server {cpu['aiohttp']:.0f} µs"
    )


if __name__ == "__main__":
    main()

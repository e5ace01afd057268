"""Run as a script: start a tunnel with traffic on it, start child processes meanwhile, print their exit codes.

The lab's process does this when it starts (or starts again) a control-plane process while its tenants'
tunnels carry traffic. `python fork_during_traffic.py N` prints a JSON list of N exit codes.
"""

from __future__ import annotations

import asyncio
import json
import sys

# Run as a script, its own directory is on the path: the tests' helpers import as they do in pytest.
from konnectivity_helpers import AGENT_SA, FAST_BACKOFF, EchoServer, TenantCA, TokenIssuer

from tenantgpu import eventloop
from tenantgpu.konnectivity import ProxyAgent, ProxyServer


async def children_during_traffic(count: int) -> list[int]:
    ca = TenantCA.create("fork-test-ca")
    cert_pem, key_pem = ca.issue("konnectivity-server", "127.0.0.1")
    tokens = TokenIssuer(b"fork-test-key")
    server = ProxyServer(token_verifier=tokens.verify, cert_pem=cert_pem, key_pem=key_pem)
    await server.start()
    agent = ProxyAgent(server.address, ca.cert_pem, token=tokens.token(AGENT_SA), backoff=FAST_BACKOFF)
    await agent.start()
    await agent.wait_connected(timeout=5.0)
    await server.backends.wait_for(lambda sessions: bool(sessions), 5.0)
    echo = EchoServer(b"echo")
    await echo.start()
    stopping = asyncio.Event()

    async def traffic() -> None:
        while not stopping.is_set():
            reader, writer = await server.egress.open_connection("127.0.0.1", echo.port)
            for _ in range(20):
                writer.write(b"x" * 4096)
                await reader.readexactly(4096)
            writer.close()

    senders = [asyncio.create_task(traffic()) for _ in range(4)]
    codes = []
    try:
        for _ in range(count):
            child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
            codes.append(await child.wait())
            await asyncio.sleep(0.01)
    finally:
        stopping.set()
        await asyncio.gather(*senders, return_exceptions=True)
        await agent.stop()
        await server.stop(grace=None)
        await echo.stop()
    return codes


if __name__ == "__main__":
    print(json.dumps(eventloop.run(children_during_traffic(int(sys.argv[1])))))

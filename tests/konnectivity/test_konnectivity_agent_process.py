"""The agent as its own process (upstream's flags): connects, serves mapped dials, drains on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from konnectivity_helpers import AGENT_SA, EchoServer, TenantCA, TokenIssuer

from tenantgpu.konnectivity.server import ProxyServer


async def test_agent_process_serves_mapped_dials_and_drains_on_sigterm(
    proxy_server: ProxyServer,
    tenant_ca: TenantCA,
    tenant_a_tokens: TokenIssuer,
    echo_server: EchoServer,
    tmp_path: Path,
) -> None:
    (tmp_path / "ca.crt").write_bytes(tenant_ca.cert_pem)
    (tmp_path / "token").write_text(tenant_a_tokens.token(AGENT_SA))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tenantgpu.konnectivity",
        "agent",
        "--proxy-server-host=127.0.0.1",
        f"--proxy-server-port={proxy_server.port}",
        f"--ca-cert={tmp_path / 'ca.crt'}",
        f"--service-account-token-path={tmp_path / 'token'}",
        "--agent-id=worker-a1",
        "--agent-identifiers=host=worker-a1&ipv4=10.0.0.5",
        f"--dial-map=hami-scheduler.kube-system.svc:443=127.0.0.1:{echo_server.port}",
    )
    try:
        await proxy_server.wait_for_agents(1, timeout=20)
        [info] = proxy_server.agents
        assert (info.agent_id, info.identifiers.host, info.identifiers.ipv4) == (
            "worker-a1",
            ("worker-a1",),
            ("10.0.0.5",),
        )
        reader, writer = await proxy_server.egress.open_connection("hami-scheduler.kube-system.svc", 443)
        writer.write(b"WHO")
        assert await reader.readexactly(8) == b"echo:WHO"
        # An open connection holds the agent in its drain window, so the server can see DRAIN.
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            while not proxy_server.agents[0].draining:
                await asyncio.sleep(0.02)
        writer.close()
        assert await asyncio.wait_for(process.wait(), 10) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

"""`python -m tenantgpu.konnectivity agent ...`: a proxy agent as its own process, with upstream's flags."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from tenantgpu import eventloop
from tenantgpu.konnectivity.agent import ProxyAgent, mapped_dial_policy
from tenantgpu.konnectivity.wire import AgentIdentifiers, split_address


def _mapping(entries: list[str]) -> dict[tuple[str, int], tuple[str, int]]:
    mapping: dict[tuple[str, int], tuple[str, int]] = {}
    for entry in entries:
        source, sep, target = entry.partition("=")
        if not sep:
            raise SystemExit(f"--dial-map {entry!r}: expected host:port=host:port")
        try:
            mapping[split_address(source)] = split_address(target)
        except ValueError as exc:
            raise SystemExit(f"--dial-map {entry!r}: {exc}") from None
    return mapping


async def _run_agent(args: argparse.Namespace) -> None:
    token_path: Path = args.service_account_token_path

    async def token() -> str:
        # Re-read on every connect: projected tokens are rotated on disk.
        return token_path.read_text().strip()

    agent = ProxyAgent(
        f"{args.proxy_server_host}:{args.proxy_server_port}",
        args.ca_cert.read_bytes() if args.ca_cert else None,
        token,
        agent_id=args.agent_id or None,
        identifiers=AgentIdentifiers.parse(args.agent_identifiers),
        dial_policy=mapped_dial_policy(_mapping(args.dial_map)),
        server_name=args.proxy_server_name or None,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await agent.start()
    await stop.wait()
    await agent.stop()  # announces DRAIN first


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tenantgpu.konnectivity", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    agent = commands.add_parser("agent", help="run a proxy agent that dials out to a proxy server")
    agent.add_argument("--proxy-server-host", default="127.0.0.1")
    agent.add_argument("--proxy-server-port", type=int, default=8091)
    agent.add_argument("--proxy-server-name", default="", help="TLS name to expect, if not the host")
    agent.add_argument("--ca-cert", type=Path, help="CA of the server's certificate (none: plaintext)")
    agent.add_argument("--service-account-token-path", type=Path, required=True)
    agent.add_argument("--agent-id", default="")
    agent.add_argument("--agent-identifiers", default="", help="URL-encoded, e.g. host=node1&ipv4=10.0.0.5")
    agent.add_argument(
        "--dial-map",
        action="append",
        default=[],
        help="host:port=host:port, where the worker really dials a destination (repeatable)",
    )
    agent.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level)
    eventloop.run(_run_agent(args))


if __name__ == "__main__":
    main()

"""A standalone API server for tests and benchmarks: `python -m tenantgpu.apiserver --state-dir D`.

Keeps its PKI and SQLite file in the state directory (so a restart keeps data and credentials), writes
`admin.kubeconfig` there, and prints one line `ready <url>` when it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from tenantgpu import eventloop
from tenantgpu.apiserver.gcpolicy import CollectorPolicy
from tenantgpu.apiserver.kinds import KAMAJI_KINDS
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore


async def serve(state_dir: Path, name: str, port: int, version: str, management: bool) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    pki = ServerPKI.load_or_create(state_dir / "pki", name)
    datastore = SQLiteDatastore(state_dir / "state.db")
    server = APIServer(
        APIServerConfig(
            name=name,
            datastore=datastore,
            pki=pki,
            port=port,
            kubernetes_version=version,
            extra_kinds=KAMAJI_KINDS if management else (),
        )
    )
    await server.start()
    collector = CollectorPolicy()
    collector.start()
    (state_dir / "admin.kubeconfig").write_text(server.admin_kubeconfig())
    print(f"ready {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    collector.stop()
    await server.stop()
    datastore.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tenantgpu.apiserver", description=__doc__)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--name", default="tenant")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubernetes-version", default="v1.31.4")
    parser.add_argument("--management", action="store_true", help="also serve Kamaji's kinds")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level)
    eventloop.run(serve(args.state_dir, args.name, args.port, args.kubernetes_version, args.management))


if __name__ == "__main__":
    main()

"""A control-plane process: serves the tenant API servers (and their konnectivity servers) of one DataStore.

One SQLite file has one writer, and one event loop runs on one core; a lab whose tenants are spread over
several DataStores serves each further store from a process like this one, so the tenants' API servers
use more than one core. The lab's `DataStoreHosts` drives it with JSON lines (see
`tenantgpu.childprocess`); each op is a `ControlPlaneHost` method:

    {"id": 1, "op": "start", "instance": {...}}        -> {"id": 1, "ok": true, "result": {"port": ..., "konnectivity_port": ...}}
    {"id": 2, "op": "start_konnectivity", "key": "<uid>", "port": 0, "agent": {...}}   -> result {"port": ...}
    {"id": 3, "op": "stop_instance" | "stop_konnectivity", "key": "<uid>"}
    {"id": 4, "op": "apply_kubeadm", "key": "<uid>", "params": {...}}   -> result {}
    {"id": 4, "op": "purge" | "export_tenant", "schema": "<prefix>"}     export: result {"revision", "rows"}
    {"id": 5, "op": "import_tenant", "schema": "<prefix>", "data": {"revision", "rows"}, "wipe": false}
    {"id": 6, "op": "trust", "ca": "<PEM>"}      another tenant's CA: its certificates get 401, not a TLS error
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from tenantgpu import eventloop
from tenantgpu.apiserver.auth import SharedClientTrust
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.childprocess import Handler, Message, prepare_child, serve_commands
from tenantgpu.kamaji.host import ControlPlaneInstance, TenantData
from tenantgpu.kamaji.inprocess import InProcessHost, trust_directory
from tenantgpu.kamaji.konnectivityagent import AgentSpec
from tenantgpu.kamaji.kubeadmconfig import KubeadmParameters

log = logging.getLogger(__name__)

# A process of the previous run that is still shutting down (its lab was killed) holds the store a little
# longer; the new one waits for it rather than write beside it.
_STORE_LOCK_TIMEOUT = 30.0


def lock_store(path: Path, timeout: float = _STORE_LOCK_TIMEOUT) -> int:
    """Hold `<store>.lock` for as long as this process lives; the kernel drops it when the process dies."""
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise RuntimeError(f"the datastore {path} is held by another process") from None
            time.sleep(0.05)


class HostCommands:
    """The ops of one control-plane process, each answered from its `InProcessHost`."""

    def __init__(self, host: InProcessHost) -> None:
        self.host = host

    def handlers(self) -> dict[str, Handler]:
        return {
            "start": self.start,
            "stop_instance": self.stop,
            "start_konnectivity": self.start_konnectivity,
            "stop_konnectivity": self.stop_konnectivity,
            "apply_kubeadm": self.apply_kubeadm,
            "purge": self.purge,
            "export_tenant": self.export_tenant,
            "import_tenant": self.import_tenant,
            "trust": self.trust,
        }

    async def start(self, command: Message, _: Callable[[Message], None]) -> Message:
        running = await self.host.start(ControlPlaneInstance.from_json(command["instance"]))
        return {"port": running.port, "konnectivity_port": running.konnectivity_port}

    async def stop(self, command: Message, _: Callable[[Message], None]) -> Message:
        await self.host.stop(str(command["key"]))
        return {}

    async def start_konnectivity(self, command: Message, _: Callable[[Message], None]) -> Message:
        agent = command.get("agent")
        port = await self.host.start_konnectivity(
            str(command["key"]), int(command["port"]), None if agent is None else AgentSpec.from_json(agent)
        )
        return {"port": port}

    async def stop_konnectivity(self, command: Message, _: Callable[[Message], None]) -> Message:
        await self.host.stop_konnectivity(str(command["key"]), remove_agent=bool(command.get("remove_agent")))
        return {}

    async def apply_kubeadm(self, command: Message, _: Callable[[Message], None]) -> Message:
        await self.host.apply_kubeadm(str(command["key"]), KubeadmParameters.from_json(command["params"]))
        return {}

    async def purge(self, command: Message, _: Callable[[Message], None]) -> Message:
        await self.host.purge(str(command["schema"]))
        return {}

    async def export_tenant(self, command: Message, _: Callable[[Message], None]) -> Message:
        return (await self.host.export_tenant(str(command["schema"]))).to_json()

    async def import_tenant(self, command: Message, _: Callable[[Message], None]) -> Message:
        data = TenantData.from_json(command["data"])
        await self.host.import_tenant(str(command["schema"]), data, wipe=bool(command.get("wipe")))
        return {}

    async def trust(self, command: Message, _: Callable[[Message], None]) -> Message:
        self.host.client_trust.add_ca(str(command["ca"]))
        return {}


async def serve(datastore_path: Path) -> None:
    datastore = SQLiteDatastore(datastore_path)
    host = InProcessHost(datastore, SharedClientTrust(trust_directory(datastore_path)))

    async def shutdown() -> None:
        await host.stop_all()
        datastore.close()

    await serve_commands(HostCommands(host).handlers(), shutdown)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tenantgpu.kamaji.hostprocess", description=__doc__)
    parser.add_argument("--datastore", type=Path, required=True, help="the SQLite file this process serves")
    parser.add_argument("--name", default="datastore", help="the DataStore's name, for the logs")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    prepare_child(args.name, args.log_level)
    lock = lock_store(args.datastore)
    try:
        eventloop.run(serve(args.datastore))
    finally:
        os.close(lock)


if __name__ == "__main__":
    main()

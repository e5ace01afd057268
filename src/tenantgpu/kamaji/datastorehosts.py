"""Where each tenant's control plane runs when the lab's tenants are spread over several DataStores.

Kamaji binds every TenantControlPlane to one DataStore (`spec.dataStore`). Here a SQLite DataStore is
one file with one writer, and the process that writes it serves the tenant API servers stored in it. The
management plane's own store is served in the lab's process; every other SQLite DataStore gets a
control-plane process of its own (`tenantgpu.kamaji.hostprocess`), started when its first tenant starts.
So the tenants' API servers use as many cores as there are DataStores, and a resumed lab puts each tenant
back where its data is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tenantgpu.childprocess import ChildError, ChildProcess
from tenantgpu.kamaji.host import (
    ControlPlaneHost,
    ControlPlaneInstance,
    MigrationError,
    RunningInstance,
    TenantData,
)
from tenantgpu.kamaji.inprocess import InProcessHost
from tenantgpu.kamaji.konnectivityagent import AgentSpec
from tenantgpu.kamaji.kubeadmconfig import KubeadmParameters

log = logging.getLogger(__name__)

SQLITE_SCHEME = "sqlite://"
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0


def sqlite_path(endpoint: str, base: Path) -> Path | None:
    """The file a `sqlite://` endpoint names (relative paths count from `base`); None for other drivers."""
    if not endpoint.startswith(SQLITE_SCHEME):
        return None
    path = Path(endpoint[len(SQLITE_SCHEME) :])
    return (path if path.is_absolute() else base / path).resolve()


@dataclass
class ProcessHost:
    """A `ControlPlaneHost` in a control-plane process of its own, serving one SQLite file."""

    child: ChildProcess
    _running: dict[str, RunningInstance] = field(default_factory=dict)

    async def start(self, instance: ControlPlaneInstance) -> RunningInstance:
        result = await self._call("start", instance=instance.to_json())
        running = RunningInstance(int(result["port"]), int(result.get("konnectivity_port") or 0))
        self._running[instance.key] = running
        return running

    async def stop(self, key: str) -> None:
        await self._call("stop_instance", key=key)
        self._running.pop(key, None)

    def running(self, key: str) -> RunningInstance | None:
        return self._running.get(key)

    async def start_konnectivity(self, key: str, port: int, agent: AgentSpec | None = None) -> int:
        spec = None if agent is None else agent.to_json()
        agent_port = int((await self._call("start_konnectivity", key=key, port=port, agent=spec))["port"])
        if key in self._running:
            self._running[key] = replace(self._running[key], konnectivity_port=agent_port)
        return agent_port

    async def apply_kubeadm(self, key: str, params: KubeadmParameters) -> None:
        await self._call("apply_kubeadm", key=key, params=params.to_json())

    async def stop_konnectivity(self, key: str, *, remove_agent: bool = False) -> None:
        await self._call("stop_konnectivity", key=key, remove_agent=remove_agent)
        if key in self._running:
            self._running[key] = replace(self._running[key], konnectivity_port=0)

    async def purge(self, schema: str, datastore: str = "") -> None:
        await self._call("purge", schema=schema)

    async def export_tenant(self, schema: str, datastore: str = "") -> TenantData:
        return TenantData.from_json(await self._call("export_tenant", schema=schema))

    async def import_tenant(self, schema: str, data: TenantData, *, wipe: bool, datastore: str = "") -> None:
        try:
            await self.child.call("import_tenant", schema=schema, data=data.to_json(), wipe=wipe)
        except ChildError as err:
            raise MigrationError(str(err)) from None

    async def trust(self, ca_pem: str) -> None:
        await self._call("trust", ca=ca_pem)

    async def _call(self, op: str, **fields: object) -> dict[str, Any]:
        try:
            return await self.child.call(op, **fields)
        except ChildError as err:
            # The controller retries a failed reconciliation; the message says which process failed.
            raise RuntimeError(str(err)) from None


class DataStoreHosts:
    """The lab's `ControlPlaneHost`: routes each instance to the host of its DataStore."""

    def __init__(
        self, local: InProcessHost, local_store: Path, *, log_hint: str = "", log_level: str = "WARNING"
    ) -> None:
        self.local = local
        self.local_store = local_store.resolve()
        self.log_hint = log_hint
        self.log_level = log_level
        self._processes: dict[Path, ProcessHost] = {}
        self._spawning: dict[Path, asyncio.Lock] = {}
        self._where: dict[str, ControlPlaneHost] = {}
        self._instances: dict[str, ControlPlaneInstance] = {}
        self._cas: list[str] = []
        # Told "<namespace>/<name>" of each tenant whose process crashed, so its controller starts it again.
        self.on_lost: Callable[[str], None] | None = None

    @property
    def pids(self) -> list[int]:
        return [host.child.pid for host in self._processes.values()]

    async def _host_for(self, endpoint: str) -> ControlPlaneHost:
        path = sqlite_path(endpoint, self.local_store.parent) if endpoint else None
        # The lab serves other drivers, which it cannot reach, from its own store, as it always has.
        if path is None or path == self.local_store:
            return self.local
        lock = self._spawning.setdefault(path, asyncio.Lock())
        async with lock:
            host = self._processes.get(path)
            if host is None:
                host = await self._spawn(path)
                self._processes[path] = host
        return host

    async def _spawn(self, path: Path) -> ProcessHost:
        path.parent.mkdir(parents=True, exist_ok=True)
        child = ChildProcess(
            f"control-plane process for {path.name}",
            "tenantgpu.kamaji.hostprocess",
            ["--datastore", str(path), "--name", path.stem, "--log-level", self.log_level],
            log_hint=self.log_hint,
        )
        child.on_exit = lambda code: self._lost(path, code)
        host = ProcessHost(child)
        try:
            await child.start(_START_TIMEOUT)
            for ca in self._cas:
                await host.trust(ca)
        except BaseException as err:
            # Also when cancelled (the lab stopping): no process is left behind.
            with contextlib.suppress(Exception):
                await child.stop(_STOP_TIMEOUT)
            if isinstance(err, ChildError | RuntimeError):
                raise RuntimeError(str(err)) from None
            raise
        log.info("DataStore %s: served by process %d", path, child.pid)
        return host

    def _lost(self, path: Path, code: int) -> None:
        """A control-plane process died under its tenants: forget it; the next start spawns a new one."""
        host = self._processes.pop(path, None)
        if host is None:
            return
        keys = [key for key, where in self._where.items() if where is host]
        log.error(
            "the control-plane process for %s exited (code %d); restarting its %d tenants",
            path,
            code,
            len(keys),
        )
        for key in keys:
            del self._where[key]
            instance = self._instances.get(key)
            if instance is not None and self.on_lost is not None:
                self.on_lost(f"{instance.namespace}/{instance.name}")

    async def _trust(self, ca_pem: bytes) -> None:
        """Every server of the lab accepts every tenant's CA at the TLS layer (see SharedClientTrust)."""
        pem = ca_pem.decode()
        if pem in self._cas:
            return
        self._cas.append(pem)
        self.local.client_trust.add_ca(pem)
        for host in list(self._processes.values()):
            await host.trust(pem)

    async def start(self, instance: ControlPlaneInstance) -> RunningInstance:
        await self._trust(instance.ca.cert_pem)
        host = await self._host_for(instance.datastore)
        previous = self._where.get(instance.key)
        if previous is not None and previous is not host:
            # The tenant moved to another DataStore: it stops where it ran before.
            await previous.stop(instance.key)
        self._where[instance.key] = host
        self._instances[instance.key] = instance
        return await host.start(instance)

    def _host_of(self, key: str) -> ControlPlaneHost:
        return self._where.get(key, self.local)

    async def stop(self, key: str) -> None:
        await self._host_of(key).stop(key)
        self._where.pop(key, None)
        self._instances.pop(key, None)

    def running(self, key: str) -> RunningInstance | None:
        return self._host_of(key).running(key)

    async def start_konnectivity(self, key: str, port: int, agent: AgentSpec | None = None) -> int:
        return await self._host_of(key).start_konnectivity(key, port, agent)

    async def stop_konnectivity(self, key: str, *, remove_agent: bool = False) -> None:
        await self._host_of(key).stop_konnectivity(key, remove_agent=remove_agent)

    async def apply_kubeadm(self, key: str, params: KubeadmParameters) -> None:
        await self._host_of(key).apply_kubeadm(key, params)

    async def purge(self, schema: str, datastore: str = "") -> None:
        await (await self._host_for(datastore)).purge(schema, datastore)

    async def export_tenant(self, schema: str, datastore: str = "") -> TenantData:
        return await (await self._host_for(datastore)).export_tenant(schema, datastore)

    async def import_tenant(self, schema: str, data: TenantData, *, wipe: bool, datastore: str = "") -> None:
        await (await self._host_for(datastore)).import_tenant(schema, data, wipe=wipe, datastore=datastore)

    async def stop_all(self) -> None:
        """Stop every control plane: the other processes first shut down their API servers, then exit."""
        await asyncio.gather(
            *(host.child.stop(_STOP_TIMEOUT) for host in self._processes.values()), return_exceptions=True
        )
        self._processes.clear()
        self._where.clear()
        self._instances.clear()
        await self.local.stop_all()

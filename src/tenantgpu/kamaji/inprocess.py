"""The host that runs tenant API servers inside this process, all on one shared datastore."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenantgpu.apiserver.hooks import Egress, NoEgress
from tenantgpu.apiserver.pki import CertificateAuthority, ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import Datastore
from tenantgpu.kamaji.host import ControlPlaneInstance, RunningInstance

log = logging.getLogger(__name__)

# A tenant add-on started beside its API server (e.g. the konnectivity server); returns its stop function,
# the port it listens on, and the egress the API server must use to reach the tenant's services.
SidecarFactory = Callable[[ControlPlaneInstance, APIServer], Awaitable["Sidecar"]]


@dataclass
class Sidecar:
    """A started add-on of one tenant control plane."""

    port: int
    stop: Callable[[], Awaitable[None]]


@dataclass
class _Running:
    instance: ControlPlaneInstance
    server: APIServer
    sidecar: Sidecar | None


def key_prefix(schema: str) -> str:
    """Where a tenant's keys live in the shared datastore (the API server adds the leading slash)."""
    return schema


class InProcessHost:
    """Starts each tenant's API server (and its konnectivity sidecar, when one is plugged in) in this loop."""

    def __init__(
        self,
        datastore: Datastore,
        *,
        sidecar: SidecarFactory | None = None,
        egress: Callable[[ControlPlaneInstance], Egress] | None = None,
    ) -> None:
        self.datastore = datastore
        self._sidecar = sidecar
        self._egress = egress
        self._running: dict[str, _Running] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def server(self, key: str) -> APIServer | None:
        running = self._running.get(key)
        return None if running is None else running.server

    async def start(self, instance: ControlPlaneInstance) -> RunningInstance:
        async with self._lock(instance.key):
            current = self._running.get(instance.key)
            if current is not None:
                if _same_identity(current.instance, instance):
                    return self._report(current)
                await self._stop(instance.key)
            pki = ServerPKI(
                CertificateAuthority(instance.ca.cert_pem, instance.ca.key_pem),
                instance.serving.cert_pem,
                instance.serving.key_pem,
                instance.service_account.key_pem,
            )
            egress = self._egress(instance) if self._egress is not None else NoEgress()
            config = APIServerConfig(
                name=instance.name,
                datastore=self.datastore,
                pki=pki,
                key_prefix=key_prefix(instance.schema),
                kubernetes_version=instance.kubernetes_version or "v1.31.4",
                host=instance.address,
                port=instance.port,
                egress=egress,
            )
            server = APIServer(config)
            await server.start()
            sidecar = None
            if self._sidecar is not None:
                try:
                    sidecar = await self._sidecar(instance, server)
                except BaseException:
                    await server.stop()
                    raise
            running = _Running(instance, server, sidecar)
            self._running[instance.key] = running
            log.info("tenant %s/%s: API server on %s", instance.namespace, instance.name, server.url)
            return self._report(running)

    @staticmethod
    def _report(running: _Running) -> RunningInstance:
        return RunningInstance(running.server.port, running.sidecar.port if running.sidecar else 0)

    async def stop(self, key: str) -> None:
        async with self._lock(key):
            await self._stop(key)

    async def _stop(self, key: str) -> None:
        running = self._running.pop(key, None)
        if running is None:
            return
        if running.sidecar is not None:
            await running.sidecar.stop()
        await running.server.stop()
        log.info("tenant %s/%s: API server stopped", running.instance.namespace, running.instance.name)

    def running(self, key: str) -> RunningInstance | None:
        current = self._running.get(key)
        return None if current is None else self._report(current)

    async def purge(self, schema: str) -> None:
        if not schema:
            return
        await self.datastore.delete_prefix(f"/{key_prefix(schema)}/")

    async def stop_all(self) -> None:
        for key in list(self._running):
            await self.stop(key)


def _same_identity(a: ControlPlaneInstance, b: ControlPlaneInstance) -> bool:
    # A port of 0 means "any"; an instance that already listens somewhere satisfies it.
    return (
        a.ca == b.ca
        and a.serving == b.serving
        and a.service_account == b.service_account
        and a.schema == b.schema
        and (b.port in (0, a.port) or a.port == 0)
    )

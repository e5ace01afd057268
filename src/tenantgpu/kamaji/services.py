"""Where a tenant's kube-scheduler and kube-controller-manager duties run: beside its API server.

In Kamaji they are containers of the TenantControlPlane's pod, next to kube-apiserver, and reach it on
its local endpoint with a client certificate of the tenant's CA. `LocalServices` runs them in this
event loop; `tenantgpu.kamaji.servicesprocess.ServicesProcess` runs them in a process of their own.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from tenantgpu.apiserver.pki import CertificateAuthority
from tenantgpu.controlplane.manager import ControlPlaneServices
from tenantgpu.kamaji.host import ControlPlaneInstance
from tenantgpu.kubeclient import KubeClient, KubeConfig


class ServicesRunner(Protocol):
    async def start(self, instance: ControlPlaneInstance, url: str) -> None:
        """Start the tenant's services against its API server at `url` (replacing any running)."""

    async def stop(self, key: str) -> None:
        """Stop the services of the tenant `<namespace>/<name>`, if they run."""

    async def close(self) -> None:
        """Stop everything; called once the tenants' API servers are stopped."""


class LocalServices:
    """The services of each tenant in this event loop."""

    def __init__(self) -> None:
        self._running: dict[str, ControlPlaneServices] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def start(self, instance: ControlPlaneInstance, url: str) -> None:
        # One start or stop of a tenant at a time, so two starts never leave two sets of services behind.
        async with self._locks.setdefault(instance.key, asyncio.Lock()):
            await self._stop(instance.key)
            await self._start(instance, url)

    async def _start(self, instance: ControlPlaneInstance, url: str) -> None:
        # The lab's API server authorizes by group only (no RBAC): the component is in system:masters.
        cert, key = CertificateAuthority(instance.ca.cert_pem, instance.ca.key_pem).issue_client(
            "system:kube-controller-manager", ["system:masters"]
        )
        client = KubeClient(
            KubeConfig(server=url, ca_data=instance.ca.cert_pem, client_cert_data=cert, client_key_data=key),
            user_agent="kube-controller-manager",
        )
        services = ControlPlaneServices(client)
        try:
            await services.start()
        except BaseException:
            await client.close()
            raise
        self._running[instance.key] = services

    async def stop(self, key: str) -> None:
        async with self._locks.setdefault(key, asyncio.Lock()):
            await self._stop(key)

    async def _stop(self, key: str) -> None:
        services = self._running.pop(key, None)
        if services is None:
            return
        await services.stop()
        await services.client.close()

    async def close(self) -> None:
        for key in list(self._running):
            await self.stop(key)

"""What every cluster has from the start, kept by the API server itself: `default/kubernetes` (Service,
Endpoints and EndpointSlice), the system PriorityClasses and the release's default RBAC objects.

kube-apiserver's bootstrap controller creates the Service and Endpoints `default/kubernetes` once it
serves and puts them back every 10 s if they are deleted or their endpoint drifts: the Service takes the
first IP of the service range, port 443 (`https`), and the Endpoints name the address and port the API
server advertises; in a Kamaji tenant that is the TenantControlPlane's endpoint. A post-start hook
creates `system-node-critical` and `system-cluster-critical`, another (`rbac/bootstrap-roles`) the
default ClusterRoles, Roles and their bindings (`rbacbootstrap.py`). They run beside serving, not before
it; `/readyz` reports each hook until it has done its work once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.crds import ensure_custom_resource_definitions
from tenantgpu.apiserver.defaults import SYSTEM_PRIORITIES
from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.httputil import set_path
from tenantgpu.apiserver.rbacbootstrap import ensure_rbac_policy
from tenantgpu.apiserver.registry import Registry

__all__ = ["KubernetesService", "ensure_system_priority_classes"]

log = logging.getLogger(__name__)

NAME = "kubernetes"
NAMESPACE = "default"
# kube's names for the two post-start hooks, as `/readyz?verbose` lists them
PRIORITY_CLASSES_HOOK = "poststarthook/scheduling/bootstrap-system-priority-classes"
BOOTSTRAP_ROLES_HOOK = "poststarthook/rbac/bootstrap-roles"
BOOTSTRAP_CONTROLLER_HOOK = "poststarthook/bootstrap-controller"
_APISERVER = UserInfo("system:apiserver", ("system:masters",))
ROLES_HOOK_DELAY = 0.1


@dataclass
class KubernetesService:
    """Reconciles `default/kubernetes` for one API server: `await ensure()`, or `start()` the loop."""

    registry: Registry
    address: str
    port: int
    interval: float = 10.0
    minor: int = LATEST  # the release whose bootstrap RBAC policy to keep

    def __post_init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._rbac_task: asyncio.Task[None] | None = None
        self.finished: set[str] = set()  # the hooks that have done their work once

    def service(self) -> dict[str, Any]:
        ip = self.registry.service_network.kubernetes_ip
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "type": "ClusterIP",
                "clusterIP": ip,
                "clusterIPs": [ip],
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": self.port}],
                "sessionAffinity": "None",
            },
        }

    def endpoints(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                # EndpointSlice mirroring leaves these to the API server, which writes its own slice.
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
            },
            "subsets": [
                {
                    "addresses": [{"ip": self.address}],
                    "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
                }
            ],
        }

    def endpoint_slice(self) -> dict[str, Any]:
        """The slice kube-apiserver writes beside its Endpoints (named after the Service, labelled with
        it), which `kubectl describe service` reads."""
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "labels": {"kubernetes.io/service-name": NAME},
            },
            "addressType": "IPv6" if ":" in self.address else "IPv4",
            "endpoints": [{"addresses": [self.address], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
        }

    async def ensure(self) -> None:
        """Creates what is missing and puts back an endpoint that no longer matches this server."""
        kinds = self.registry.kinds
        services = kinds.resource("", "v1", "services")
        endpoints = kinds.resource("", "v1", "endpoints")
        assert services is not None and endpoints is not None
        service = self.registry.get_object(services, NAMESPACE, NAME)
        wanted_port = self.service()["spec"]["ports"]
        if service is None:
            await self._create(services, self.service())
        elif (service.get("spec") or {}).get("ports") != wanted_port:
            # The port the API server listens on may differ after a restart; the IP never changes.
            await self.registry.modify(
                services, NAMESPACE, NAME, _set(("spec", "ports"), wanted_port), _APISERVER
            )
        current = self.registry.get_object(endpoints, NAMESPACE, NAME)
        wanted = self.endpoints()["subsets"]
        if current is None:
            await self._create(endpoints, self.endpoints())
        elif current.get("subsets") != wanted:
            await self.registry.modify(endpoints, NAMESPACE, NAME, _set(("subsets",), wanted), _APISERVER)
        slices = kinds.resource("discovery.k8s.io", "v1", "endpointslices")
        assert slices is not None
        slice_now = self.registry.get_object(slices, NAMESPACE, NAME)
        wanted_slice = self.endpoint_slice()
        if slice_now is None:
            await self._create(slices, wanted_slice)
        elif any(slice_now.get(k) != wanted_slice[k] for k in ("addressType", "endpoints", "ports")):

            def replace(obj: dict[str, Any]) -> dict[str, Any]:
                return {**obj, **{k: wanted_slice[k] for k in ("addressType", "endpoints", "ports")}}

            await self.registry.modify(slices, NAMESPACE, NAME, replace, _APISERVER)

    async def _create(self, kind: Any, obj: dict[str, Any]) -> None:
        try:
            await self.registry.create(kind, NAMESPACE, obj, _APISERVER)
        except errors.APIError as error:
            if error.code != 409:  # someone else (another start of this server) was first
                raise

    def start(self) -> None:
        """Ensures everything now, in the background, and again every `interval` seconds."""
        self._task = asyncio.create_task(self._run(), name=f"kubernetes-service-{self.port}")
        self._rbac_task = asyncio.create_task(self._bootstrap_roles(), name=f"bootstrap-roles-{self.port}")

    async def stop(self) -> None:
        for task in (self._task, self._rbac_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._rbac_task = None

    async def _bootstrap_roles(self) -> None:
        """kube's `rbac/bootstrap-roles` hook: tries every second until every object is in place. It
        starts a moment after the server does, so its ~130 writes do not hold up the first requests (a
        TenantControlPlane becoming Ready)."""
        await asyncio.sleep(ROLES_HOOK_DELAY)
        while not await ensure_rbac_policy(self.registry, self.minor):
            await asyncio.sleep(1.0)
        self.finished.add(BOOTSTRAP_ROLES_HOOK)

    async def _run(self) -> None:
        while True:
            try:
                await ensure_system_priority_classes(self.registry)
                self.finished.add(PRIORITY_CLASSES_HOOK)
                await ensure_custom_resource_definitions(self.registry)
                await self.ensure()
                self.finished.add(BOOTSTRAP_CONTROLLER_HOOK)
            except errors.APIError as error:
                # e.g. the default namespace is being deleted: try again on the next round, as kube does.
                log.debug("default/kubernetes not reconciled: %s", error)
            await asyncio.sleep(self.interval)


# What the system classes say of themselves; their values are the defaulting's (`SYSTEM_PRIORITIES`).
_SYSTEM_CLASS_DESCRIPTIONS = {
    "system-node-critical": "For pods that must run on their node and may not be moved.",
    "system-cluster-critical": "For pods the cluster needs, which may be moved to another node.",
}


async def ensure_system_priority_classes(registry: Registry) -> None:
    kind = registry.kinds.resource("scheduling.k8s.io", "v1", "priorityclasses")
    if kind is None:
        return
    for name, value in SYSTEM_PRIORITIES.items():
        if registry.get_object(kind, "", name) is None:
            body = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": _SYSTEM_CLASS_DESCRIPTIONS[name],
            }
            with contextlib.suppress(errors.APIError):  # created meanwhile by another start of this tenant
                await registry.create(kind, "", body, _APISERVER)


def _set(path: tuple[str, ...], value: Any) -> Any:
    """A registry mutation setting one field."""

    def mutation(obj: dict[str, Any]) -> dict[str, Any]:
        set_path(obj, path, value)
        return obj

    return mutation

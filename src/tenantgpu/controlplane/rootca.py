"""`kube-root-ca.crt` in every namespace: kube-controller-manager's root CA publisher.

Pods verify the API server with this bundle (the service account volume projects it), and tools read it
to trust `kubernetes.default.svc`. The publisher puts the ConfigMap into each active namespace, and puts
it back when someone deletes it or changes its `ca.crt`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tenantgpu.controlplane.namespaces import is_terminating
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

CONFIG_MAP = "kube-root-ca.crt"
KEY = "ca.crt"


class RootCAPublisher:
    """Keeps ConfigMap `kube-root-ca.crt` (`data["ca.crt"]` = the cluster CA) in every active namespace."""

    def __init__(self, client: KubeClient, *, namespaces: Informer, ca_pem: bytes) -> None:
        self.client = client
        self.namespaces = namespaces
        self.ca = ca_pem.decode()
        self.config_maps = Informer(client, "configmaps", field_selector=f"metadata.name={CONFIG_MAP}")

    async def start(self) -> None:
        self.namespaces.add_handler(self._namespace_changed)
        self.config_maps.add_handler(self._config_map_changed)
        await self.config_maps.start()
        await self.namespaces.start()  # shared: starting an informer that runs already is a no-op
        for namespace in self.namespaces.items():
            await self._ensure(namespace)

    async def stop(self) -> None:
        await self.config_maps.stop()

    async def _namespace_changed(
        self, event: str, namespace: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if event != "DELETED":
            await self._ensure(namespace)

    async def _config_map_changed(
        self, event: str, config_map: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        namespace = self.namespaces.get(None, config_map["metadata"].get("namespace", ""))
        if namespace is not None:
            await self._ensure(namespace)

    async def _ensure(self, namespace: dict[str, Any]) -> None:
        if is_terminating(namespace):
            return
        name = (namespace.get("metadata") or {}).get("name", "")
        current = self.config_maps.get(name, CONFIG_MAP)
        # 409: it exists already; 403/404: the namespace is going away. The watch brings the next change.
        with contextlib.suppress(ApiError):
            if current is None:
                body = {"metadata": {"name": CONFIG_MAP, "namespace": name}, "data": {KEY: self.ca}}
                await self.client.create("configmaps", body, name)
            elif (current.get("data") or {}).get(KEY) != self.ca:
                await self.client.patch("configmaps", CONFIG_MAP, {"data": {KEY: self.ca}}, name)

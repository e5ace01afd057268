"""One object of a given name in every active namespace, put back when it is deleted or changed: what
kube-controller-manager's service-account and root-CA-publisher controllers both do."""

from __future__ import annotations

import contextlib
from typing import Any

from tenantgpu.controlplane.namespaces import is_terminating
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

Obj = dict[str, Any]


class EveryNamespace:
    """Keeps `<resource>/<name>` in each namespace that is not being deleted. Subclasses say what the
    object holds (`body`) and, optionally, how to mend one that drifted (`repair`)."""

    resource = ""
    name = ""

    def __init__(self, client: KubeClient, *, namespaces: Informer) -> None:
        self.client = client
        self.namespaces = namespaces
        self.objects = Informer(client, self.resource, field_selector=f"metadata.name={self.name}")

    def body(self, namespace: str) -> Obj:
        return {"metadata": {"name": self.name, "namespace": namespace}}

    def repair(self, current: Obj) -> Obj | None:
        """A merge patch that puts `current` right, or None when it is right."""
        return None

    async def start(self) -> None:
        self.namespaces.add_handler(self._namespace_changed)
        self.objects.add_handler(self._object_changed)
        await self.objects.start()
        await self.namespaces.start()  # shared: starting an informer that runs already is a no-op
        for namespace in self.namespaces.items():
            await self._ensure(namespace)

    async def stop(self) -> None:
        await self.objects.stop()

    async def _namespace_changed(self, event: str, namespace: Obj, old: Obj | None) -> None:
        if event != "DELETED":
            await self._ensure(namespace)

    async def _object_changed(self, event: str, obj: Obj, old: Obj | None) -> None:
        namespace = self.namespaces.get(None, obj["metadata"].get("namespace", ""))
        if namespace is not None:
            await self._ensure(namespace)

    async def _ensure(self, namespace: Obj) -> None:
        if is_terminating(namespace):
            return
        name = (namespace.get("metadata") or {}).get("name", "")
        current = self.objects.get(name, self.name)
        # 409: it exists already; 403/404: the namespace is going away. The watch brings the next change.
        with contextlib.suppress(ApiError):
            if current is None:
                await self.client.create(self.resource, self.body(name), name)
            elif (patch := self.repair(current)) is not None:
                await self.client.patch(self.resource, self.name, patch, name)

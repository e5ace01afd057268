"""Pod garbage collection: pods bound to a node that no longer exists are deleted, as kube-controller-manager does."""

from __future__ import annotations

import contextlib
from typing import Any

from tenantgpu.controlplane.podstate import node_name
from tenantgpu.kubeclient import ApiError, Informer, KubeClient


class PodGarbageCollector:
    """Deletes (with no grace) every pod whose spec.nodeName names a node that is gone."""

    def __init__(
        self, client: KubeClient, *, pods: Informer | None = None, nodes: Informer | None = None
    ) -> None:
        self.client = client
        self.nodes = nodes or Informer(client, "nodes")
        self.pods = pods or Informer(client, "pods")

    async def start(self) -> None:
        self.nodes.add_handler(self._node_changed)
        self.pods.add_handler(self._pod_changed)
        await self.nodes.start()
        await self.pods.start()
        await self.collect()

    async def stop(self) -> None:
        await self.pods.stop()
        await self.nodes.stop()

    async def _node_changed(self, event: str, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            await self.collect()

    async def _pod_changed(self, event: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        # A pod bound after its node vanished (a late Binding) is orphaned at once.
        if event != "DELETED" and self.nodes.synced and self._orphaned(pod):
            await self._delete(pod)

    def _orphaned(self, pod: dict[str, Any]) -> bool:
        node = node_name(pod)
        return bool(node) and self.nodes.get(None, node) is None

    async def collect(self) -> None:
        for pod in self.pods.items():
            if self._orphaned(pod):
                await self._delete(pod)

    async def _delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.delete(
                "pods", meta["name"], meta.get("namespace"), grace_period_seconds=0, uid=meta.get("uid")
            )

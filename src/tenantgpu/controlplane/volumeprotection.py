"""kube-controller-manager's pvc-protection and pv-protection controllers: a claim or volume that is being
deleted keeps its finalizer while it is in use, so that no running pod loses its storage.

Facts from Kubernetes v1.33 (`pkg/controller/volume/pvcprotection`, `pkg/controller/volume/pvprotection`):
a claim's `kubernetes.io/pvc-protection` goes once no scheduled pod that has not ended uses it; a
volume's `kubernetes.io/pv-protection` goes once it is no longer `Bound`.
"""

from __future__ import annotations

from typing import Any

from tenantgpu.controlplane.podstate import is_terminal, node_name
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.gpushare import volumes as v
from tenantgpu.kubeclient import Informer, KubeClient

Obj = dict[str, Any]


async def _drop_finalizer(client: KubeClient, resource: str, obj: Obj, finalizer: str) -> None:
    meta = obj["metadata"]
    kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
    # the resourceVersion makes a finalizer added meanwhile a conflict, and the sync retries
    patch = {"metadata": {"finalizers": kept or None, "resourceVersion": meta.get("resourceVersion")}}
    await client.patch(resource, meta["name"], patch, meta.get("namespace") or None)


def _deleting_with(obj: Obj, finalizer: str) -> bool:
    meta = obj["metadata"]
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or [])


class ClaimProtectionController:
    """Releases a deleted claim once no pod uses it."""

    def __init__(self, client: KubeClient, *, claims: Informer, pods: Informer) -> None:
        self.client = client
        self.claims = claims
        self.pods = pods
        self.queue: WorkQueue[Key] = WorkQueue("pvc-protection-controller", self.sync)

    async def start(self) -> None:
        self.claims.add_handler(self._claim_changed)
        self.pods.add_handler(self._pod_changed)
        await self.claims.start()
        await self.pods.start()
        for claim in self.claims.items():
            self._claim_changed("ADDED", claim, None)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def _claim_changed(self, event: str, claim: Obj, old: Obj | None) -> None:
        if event != "DELETED" and _deleting_with(claim, v.PVC_PROTECTION):
            self.queue.add(object_key(claim))

    def _pod_changed(self, event: str, pod: Obj, old: Obj | None) -> None:
        namespace = pod["metadata"].get("namespace") or ""
        for name in v.pod_claim_names(pod):
            claim = self.claims.get(namespace, name)
            if claim is not None and _deleting_with(claim, v.PVC_PROTECTION):
                self.queue.add((namespace, name))

    def in_use(self, claim: Obj) -> bool:
        meta = claim["metadata"]
        return any(
            node_name(pod) and not is_terminal(pod) and meta["name"] in v.pod_claim_names(pod)
            for pod in self.pods.items()
            if pod["metadata"].get("namespace") == meta.get("namespace")
        )

    async def sync(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is None or not _deleting_with(claim, v.PVC_PROTECTION) or self.in_use(claim):
            return
        await _drop_finalizer(self.client, "persistentvolumeclaims", claim, v.PVC_PROTECTION)


class VolumeProtectionController:
    """Releases a deleted volume once it is not bound to a claim."""

    def __init__(self, client: KubeClient, *, volumes: Informer) -> None:
        self.client = client
        self.volumes = volumes
        self.queue: WorkQueue[Key] = WorkQueue("pv-protection-controller", self.sync)

    async def start(self) -> None:
        self.volumes.add_handler(self._volume_changed)
        await self.volumes.start()
        for volume in self.volumes.items():
            self._volume_changed("ADDED", volume, None)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def _volume_changed(self, event: str, volume: Obj, old: Obj | None) -> None:
        if event != "DELETED" and _deleting_with(volume, v.PV_PROTECTION):
            self.queue.add(object_key(volume))

    async def sync(self, key: Key) -> None:
        volume = self.volumes.get(*key)
        if volume is None or not _deleting_with(volume, v.PV_PROTECTION):
            return
        if (volume.get("status") or {}).get("phase") == "Bound":
            return
        await _drop_finalizer(self.client, "persistentvolumes", volume, v.PV_PROTECTION)

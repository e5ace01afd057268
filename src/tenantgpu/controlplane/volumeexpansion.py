"""kube-controller-manager's expand controller, for the volumes a lab tenant has: a bound claim asking
for more storage than it has gets the event kube gives when no in-tree plugin can expand its volume.

Facts from Kubernetes v1.33 (`pkg/controller/volume/expand/expand_controller.go`): when a claim's
`spec.resources.requests.storage` exceeds `status.capacity.storage` and its volume's plugin is not one
the controller expands (hostPath, local and every CSI volume are not), it records a Normal
`ExternalExpanding` (`waiting for an external controller to expand this PVC`) at each sync and leaves the
claim as it is. minikube's hostpath provisioner has no resizer, so the claim keeps its capacity.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.gpushare import volumes as v
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "volume_expand"
WAITING = "waiting for an external controller to expand this PVC"
Obj = dict[str, Any]


def wants_expansion(claim: Obj, volume: Obj | None) -> bool:
    """The claim is bound to `volume` and asks for more than its status has."""
    if volume is None:
        return False
    ref = (volume.get("spec") or {}).get("claimRef") or {}
    meta = claim.get("metadata") or {}
    if ref.get("namespace") != meta.get("namespace") or ref.get("uid") != meta.get("uid"):
        return False
    if "storage" not in ((claim.get("status") or {}).get("capacity") or {}):
        return False
    return v.requested_storage(claim) > v.claim_capacity(claim)


class ExpandController:
    """Tells a claim that asks to grow that nothing here expands its volume."""

    def __init__(self, client: KubeClient, *, claims: Informer, volumes: Informer) -> None:
        self.client = client
        self.claims = claims
        self.volumes = volumes
        self.queue: WorkQueue[Key] = WorkQueue("expand-controller", self.sync)

    async def start(self) -> None:
        self.claims.add_handler(self._claim_changed)
        await self.claims.start()
        await self.volumes.start()
        for claim in self.claims.items():
            self._claim_changed("ADDED", claim, None)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def _claim_changed(self, event: str, claim: Obj, old: Obj | None) -> None:
        # kube queues a bound claim when it is added, and when its request or its capacity grew
        if event == "DELETED" or (claim.get("status") or {}).get("phase") != "Bound":
            return
        if (
            old is None
            or v.requested_storage(claim) > v.requested_storage(old)
            or v.claim_capacity(claim) > v.claim_capacity(old)
        ):
            self.queue.add(object_key(claim))

    async def sync(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is None:
            return
        name = (claim.get("spec") or {}).get("volumeName") or ""
        if not name or not wants_expansion(claim, self.volumes.get(None, name)):
            return
        with contextlib.suppress(ApiError):
            await self.client.create_event(
                {**claim, "apiVersion": "v1", "kind": "PersistentVolumeClaim"},
                reason="ExternalExpanding",
                message=WAITING,
                component=COMPONENT,
            )

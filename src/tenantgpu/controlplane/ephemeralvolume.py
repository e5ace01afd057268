"""kube-controller-manager's ephemeral-volume controller: a pod's generic ephemeral volume
(`ephemeral.volumeClaimTemplate`) gets its own claim `<pod>-<volume>`, owned by the pod, so the claim
is bound like any other and goes with the pod (the garbage collector deletes it).

Facts from Kubernetes v1.33 (`pkg/controller/volume/ephemeral/controller.go`): the claim takes the
template's labels, annotations and spec, with the pod as its controlling owner; a claim of that name
that the pod does not own is left alone, and the pod waits; a refused create is told on the pod as
`FailedBinding` (`ephemeral volume <volume>: create PVC <claim>: <why>`).
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from tenantgpu.controlplane.owners import owner_reference
from tenantgpu.controlplane.podstate import is_terminal
from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

COMPONENT = "ephemeral_volume"
Obj = dict[str, Any]


def ephemeral_claims(pod: Obj) -> list[Obj]:
    """The claims the pod's ephemeral volumes need, as the controller would create them."""
    meta = pod["metadata"]
    found = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        source = volume.get("ephemeral")
        if source is None:
            continue
        template = copy.deepcopy(source.get("volumeClaimTemplate") or {})
        template_meta = template.get("metadata") or {}
        claim_meta: Obj = {
            "name": f"{meta['name']}-{volume.get('name', '')}",
            "namespace": meta.get("namespace") or "default",
            "ownerReferences": [owner_reference({**pod, "apiVersion": "v1", "kind": "Pod"})],
        }
        for field in ("labels", "annotations"):
            if template_meta.get(field):
                claim_meta[field] = template_meta[field]
        found.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": claim_meta,
                "spec": template.get("spec") or {},
            }
        )
    return found


class EphemeralVolumeController:
    """Creates the claims of pods' generic ephemeral volumes."""

    def __init__(self, client: KubeClient, *, pods: Informer, claims: Informer) -> None:
        self.client = client
        self.pods = pods
        self.claims = claims
        self.queue: WorkQueue[Key] = WorkQueue("ephemeral-volume-controller", self.sync)

    async def start(self) -> None:
        self.pods.add_handler(self._pod_changed)
        await self.pods.start()
        await self.claims.start()
        for pod in self.pods.items():
            self._pod_changed("ADDED", pod, None)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def _pod_changed(self, event: str, pod: Obj, old: Obj | None) -> None:
        if event == "DELETED" or is_terminal(pod) or pod["metadata"].get("deletionTimestamp"):
            return
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            if "ephemeral" in volume:
                self.queue.add(object_key(pod))
                return

    async def sync(self, key: Key) -> None:
        pod = self.pods.get(*key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        volume_names = [
            v.get("name", "") for v in (pod.get("spec") or {}).get("volumes") or () if "ephemeral" in v
        ]
        for volume_name, claim in zip(volume_names, ephemeral_claims(pod), strict=True):
            meta = claim["metadata"]
            if self.claims.get(meta["namespace"], meta["name"]) is not None:
                continue
            try:
                await self.client.create("persistentvolumeclaims", claim)
            except ApiError as err:
                if err.code == 409:
                    continue
                with contextlib.suppress(ApiError):
                    await self.client.create_event(
                        {**pod, "apiVersion": "v1", "kind": "Pod"},
                        reason="FailedBinding",
                        message=f"ephemeral volume {volume_name}: create PVC {meta['name']}: {err.message}",
                        type="Warning",
                        component=COMPONENT,
                    )
                raise

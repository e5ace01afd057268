"""kube-controller-manager's persistentvolume-binder: binds claims to volumes and hands claims of a class
to its provisioner.

What a user sees, as in Kubernetes v1.33 (`pkg/controller/volume/persistentvolume/pv_controller.go`):
- A new volume is `Available`. A claim takes the smallest Available volume of its class, access modes,
  volume mode and selector with room enough, or the volume it names in `spec.volumeName` (or that
  names it in `claimRef`). Both become `Bound`: the volume's `claimRef` names the claim, the claim's
  `spec.volumeName` the volume, and the claim carries `pv.kubernetes.io/bind-completed` and the
  volume's access modes and capacity in its status.
- A claim no volume matches stays `Pending`. With a class, the class's provisioner is asked for a
  volume (the claim's `volume.kubernetes.io/storage-provisioner` annotation and an `ExternalProvisioning`
  event); without one, `FailedBinding` says no volume is available and no class set. A class with
  `WaitForFirstConsumer` waits (`WaitForFirstConsumer` event) instead.
- A claim created without a class gets the default class once one exists (RetroactiveDefaultStorageClass).
- When a bound claim is deleted its volume is `Released`; the provisioner deletes a released volume
  whose reclaim policy is Delete, and one with Retain stays until an administrator acts.
- A bound claim whose volume is gone is `Lost` (`ClaimLost`).

Claims and volumes are synced on every change and again every 15 s, as kube's resync does, so a
repeated event is counted by the event correlator rather than lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.gpushare import volumes as v
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

log = logging.getLogger(__name__)

COMPONENT = "persistentvolume-controller"
RESYNC_SECONDS = 15.0
Obj = dict[str, Any]


def _with_kind(obj: Obj, kind: str) -> Obj:
    return {**obj, "apiVersion": "v1", "kind": kind}


class PersistentVolumeController:
    """Binds one tenant's PersistentVolumeClaims and PersistentVolumes."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        claims: Informer | None = None,
        volumes: Informer | None = None,
        classes: Informer | None = None,
        resync_seconds: float = RESYNC_SECONDS,
    ) -> None:
        self.client = client
        self.pods = pods
        self.claims = claims or Informer(client, "persistentvolumeclaims")
        self.volumes = volumes or Informer(client, "persistentvolumes")
        self.classes = classes or Informer(client, "storageclasses")
        self.resync_seconds = resync_seconds
        self.claim_queue: WorkQueue[Key] = WorkQueue("persistentvolume-binder-claims", self.sync_claim)
        self.volume_queue: WorkQueue[Key] = WorkQueue("persistentvolume-binder-volumes", self.sync_volume)
        self._resync: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        self.claims.add_handler(self._claim_changed)
        self.volumes.add_handler(self._volume_changed)
        self.classes.add_handler(self._class_changed)
        for informer in (self.classes, self.volumes, self.claims, self.pods):
            await informer.start()
        self.claim_queue.start()
        self.volume_queue.start()
        self._resync_all()

    async def stop(self) -> None:
        if self._resync is not None:
            self._resync.cancel()
        await self.claim_queue.stop()
        await self.volume_queue.stop()
        for informer in (self.claims, self.volumes, self.classes):
            await informer.stop()

    def _resync_all(self) -> None:
        for claim in self.claims.items():
            self.claim_queue.add(object_key(claim))
        for volume in self.volumes.items():
            self.volume_queue.add(object_key(volume))
        self._resync = asyncio.get_running_loop().call_later(self.resync_seconds, self._resync_all)

    def _claim_changed(self, event: str, claim: Obj, old: Obj | None) -> None:
        self.claim_queue.add(object_key(claim))
        # deleteClaim: the volume it was bound to is to be released now, not at the next resync
        if event == "DELETED" and (name := (claim.get("spec") or {}).get("volumeName")):
            self.volume_queue.add(("", name))

    def _volume_changed(self, event: str, volume: Obj, old: Obj | None) -> None:
        self.volume_queue.add(object_key(volume))
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("name"):
            self.claim_queue.add((ref.get("namespace") or "", ref["name"]))

    def _class_changed(self, event: str, storage_class: Obj, old: Obj | None) -> None:
        # a new default class may be what a classless claim waits for
        if event != "DELETED" and v.is_default_class(storage_class):
            for claim in self.claims.items():
                if "storageClassName" not in (claim.get("spec") or {}):
                    self.claim_queue.add(object_key(claim))

    # --- claims -----------------------------------------------------------------------------------

    async def sync_claim(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is None:
            return
        if v.ANN_BIND_COMPLETED in (claim["metadata"].get("annotations") or {}):
            await self._sync_bound_claim(claim)
        else:
            await self._sync_unbound_claim(claim)

    def _class(self, claim: Obj) -> Obj | None:
        name = v.claim_class(claim)
        return self.classes.get(None, name) if name else None

    async def _sync_unbound_claim(self, claim: Obj) -> None:
        spec = claim.get("spec") or {}
        name = spec.get("volumeName") or ""
        if not name:
            storage_class = self._class(claim)
            delay = v.delay_binding(storage_class)
            volume = v.find_matching_volume(claim, self.volumes.items(), delay_binding=delay)
            if volume is not None:
                await self._bind(volume, claim)
                return
            if await self._assign_default_class(claim):
                return
            annotations = claim["metadata"].get("annotations") or {}
            if delay and v.ANN_SELECTED_NODE not in annotations:
                await self._event(claim, "Normal", *self._delay_binding_event(claim))
            elif v.claim_class(claim):
                await self._provision(claim, storage_class)
            else:
                await self._event(claim, "Normal", "FailedBinding", v.NO_CLASS_MESSAGE)
            await self._claim_phase(claim, "Pending")
            return
        volume = self.volumes.get(None, name)
        if volume is None:
            await self._claim_phase(claim, "Pending")  # the named volume may be created later
            return
        if not (volume.get("spec") or {}).get("claimRef"):
            problem = v.satisfies(volume, claim)
            if problem is not None:
                await self._event(
                    claim, "Warning", "VolumeMismatch", f'Cannot bind to requested volume "{name}": {problem}'
                )
                await self._claim_phase(claim, "Pending")
                return
            await self._bind(volume, claim)
        elif v.is_bound_to(volume, claim):
            await self._bind(volume, claim)
        else:
            await self._event(
                claim, "Warning", "FailedBinding", f'volume "{name}" already bound to a different claim.'
            )
            await self._claim_phase(claim, "Pending")

    def _delay_binding_event(self, claim: Obj) -> tuple[str, str]:
        """emitEventForUnboundDelayBindingClaim: which pods that use the claim are not scheduled yet."""
        meta = claim["metadata"]
        waiting = sorted(
            pod["metadata"]["name"]
            for pod in self.pods.items()
            if pod["metadata"].get("namespace") == meta.get("namespace")
            and not (pod.get("spec") or {}).get("nodeName")
            and meta.get("name") in v.pod_claim_names(pod)
        )
        if not waiting:
            return "WaitForFirstConsumer", v.WAIT_FOR_FIRST_CONSUMER_MESSAGE
        if len(waiting) == 1:
            return "WaitForPodScheduled", f"waiting for pod {waiting[0]} to be scheduled"
        return "WaitForPodScheduled", f"waiting for pods {','.join(waiting)} to be scheduled"

    async def _assign_default_class(self, claim: Obj) -> bool:
        """RetroactiveDefaultStorageClass: a claim created with no class at all (not "") gets the default
        class once there is one, the same one the DefaultStorageClass admission plugin would give."""
        spec = claim.get("spec") or {}
        if "storageClassName" in spec or v.ANN_BETA_STORAGE_CLASS in (
            claim["metadata"].get("annotations") or {}
        ):
            return False
        chosen = v.default_storage_class(self.classes.items())
        if chosen is None:
            return False
        meta = claim["metadata"]
        await self.client.patch(
            "persistentvolumeclaims",
            meta["name"],
            {
                "metadata": {"resourceVersion": meta.get("resourceVersion")},
                "spec": {"storageClassName": chosen["metadata"]["name"]},
            },
            meta.get("namespace"),
        )
        return True

    async def _provision(self, claim: Obj, storage_class: Obj | None) -> None:
        """provisionClaim for an external provisioner: name it on the claim and say so."""
        if storage_class is None:
            await self._event(
                claim,
                "Warning",
                "ProvisioningFailed",
                f'storageclass.storage.k8s.io "{v.claim_class(claim)}" not found',
            )
            return
        provisioner = storage_class.get("provisioner") or ""
        if provisioner.startswith("kubernetes.io/"):
            # kube's in-tree names: none provisions here (`kubernetes.io/no-provisioner` is the usual one,
            # for local volumes made by hand), and kube says so on every sync
            await self._event(
                claim, "Warning", "ProvisioningFailed", f"no volume plugin matched name: {provisioner}"
            )
            return
        meta = claim["metadata"]
        annotations = meta.get("annotations") or {}
        if (
            annotations.get(v.ANN_STORAGE_PROVISIONER) != provisioner
            or annotations.get(v.ANN_BETA_STORAGE_PROVISIONER) != provisioner
        ):
            patch = {v.ANN_STORAGE_PROVISIONER: provisioner, v.ANN_BETA_STORAGE_PROVISIONER: provisioner}
            try:
                await self.client.patch(
                    "persistentvolumeclaims",
                    meta["name"],
                    {"metadata": {"annotations": patch}},
                    meta.get("namespace"),
                )
            except ApiError as err:
                await self._event(
                    claim, "Warning", "ProvisioningFailed", f"Error saving claim: {err.message}"
                )
                raise
        await self._event(
            claim,
            "Normal",
            "ExternalProvisioning",
            f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or "
            "manually by the system administrator. If volume creation is delayed, please verify that the "
            "provisioner is running and correctly registered.",
        )

    async def _sync_bound_claim(self, claim: Obj) -> None:
        name = (claim.get("spec") or {}).get("volumeName") or ""
        if not name:
            await self._lost(
                claim, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
            )
            return
        volume = self.volumes.get(None, name)
        if volume is None:
            await self._lost(claim, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
            return
        if not (volume.get("spec") or {}).get("claimRef") or v.is_bound_to(volume, claim):
            await self._bind(volume, claim)
        elif (claim.get("status") or {}).get("phase") != "Lost":
            await self._lost(
                claim,
                "Two claims are bound to the same volume, this one is bound incorrectly",
                "ClaimMisbound",
            )

    async def _lost(self, claim: Obj, message: str, reason: str = "ClaimLost") -> None:
        if (claim.get("status") or {}).get("phase") == "Lost":
            return
        await self._claim_phase(claim, "Lost")
        await self._event(claim, "Warning", reason, message)

    async def _claim_phase(self, claim: Obj, phase: str, volume: Obj | None = None) -> None:
        """updateClaimStatus: the phase, and a bound volume's access modes and capacity (none otherwise)."""
        old = claim.get("status") or {}
        status = {**old, "phase": phase}
        if volume is not None:
            vspec = volume.get("spec") or {}
            status["accessModes"] = list(vspec.get("accessModes") or [])
            status["capacity"] = dict(vspec.get("capacity") or {})
        else:
            status.pop("accessModes", None)
            status.pop("capacity", None)
        if status == old:
            return
        await self.client.update_status(
            "persistentvolumeclaims", _with_kind({**claim, "status": status}, "PersistentVolumeClaim")
        )

    # --- binding ----------------------------------------------------------------------------------

    async def _bind(self, volume: Obj, claim: Obj) -> None:
        """bind(): the volume to the claim, the volume Bound, the claim to the volume, the claim Bound."""
        volume = await self._bind_volume_to_claim(volume, claim)
        volume = await self._volume_phase(volume, "Bound")
        claim = await self._bind_claim_to_volume(claim, volume)
        await self._claim_phase(claim, "Bound", volume)

    async def _bind_volume_to_claim(self, volume: Obj, claim: Obj) -> Obj:
        meta = volume["metadata"]
        reference = v.claim_reference(claim)
        current = (volume.get("spec") or {}).get("claimRef") or {}
        if all(current.get(k) == reference[k] for k in ("namespace", "name", "uid")):
            return volume
        patch: Obj = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "spec": {"claimRef": reference},
        }
        if not v.is_bound_to(volume, claim):
            patch["metadata"]["annotations"] = {v.ANN_BOUND_BY_CONTROLLER: "yes"}
        return await self.client.patch("persistentvolumes", meta["name"], patch)

    async def _volume_phase(self, volume: Obj, phase: str, message: str | None = None) -> Obj:
        status = volume.get("status") or {}
        if status.get("phase") == phase and status.get("message") == message:
            return volume
        # the API server's status strategy gives lastPhaseTransitionTime where its release has one
        new_status: Obj = {"phase": phase}
        if message:
            new_status["message"] = message
        return await self.client.update_status(
            "persistentvolumes", _with_kind({**volume, "status": new_status}, "PersistentVolume")
        )

    async def _bind_claim_to_volume(self, claim: Obj, volume: Obj) -> Obj:
        meta = claim["metadata"]
        annotations = meta.get("annotations") or {}
        name = volume["metadata"]["name"]
        spec = claim.get("spec") or {}
        patch_annotations: dict[str, str] = {}
        if spec.get("volumeName") != name:
            patch_annotations[v.ANN_BOUND_BY_CONTROLLER] = "yes"
        if annotations.get(v.ANN_BIND_COMPLETED) != "yes":
            patch_annotations[v.ANN_BIND_COMPLETED] = "yes"
        if not patch_annotations and spec.get("volumeName") == name:
            return claim
        patch: Obj = {
            "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": patch_annotations}
        }
        if spec.get("volumeName") != name:
            patch["spec"] = {"volumeName": name}
        return await self.client.patch("persistentvolumeclaims", meta["name"], patch, meta.get("namespace"))

    # --- volumes ----------------------------------------------------------------------------------

    async def sync_volume(self, key: Key) -> None:
        volume = self.volumes.get(*key)
        if volume is None:
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        phase = (volume.get("status") or {}).get("phase")
        if not ref or not ref.get("uid"):
            # unclaimed, or pre-bound by a user to a claim that has not been bound yet
            if phase != "Available":
                await self._volume_phase(volume, "Available")
            return
        claim = self.claims.get(ref.get("namespace"), ref.get("name", ""))
        if claim is not None and claim["metadata"].get("uid") != ref.get("uid"):
            claim = None  # a new claim of the same name is not the one the volume was bound to
        if claim is None:
            if phase not in ("Released", "Failed"):
                await self._volume_phase(volume, "Released")
            return
        if (claim.get("spec") or {}).get("volumeName") != volume["metadata"]["name"]:
            self.claim_queue.add(object_key(claim))  # the claim's side of the binding is still to do
        elif phase != "Bound":
            await self._volume_phase(volume, "Bound")

    async def _event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        kind = "PersistentVolume" if not obj["metadata"].get("namespace") else "PersistentVolumeClaim"
        with contextlib.suppress(ApiError):
            await self.client.create_event(
                _with_kind(obj, kind), reason=reason, message=message, type=type_, component=COMPONENT
            )

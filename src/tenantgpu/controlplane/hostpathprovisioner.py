"""The tenant's storage provisioner and its default StorageClass, as minikube ships them: class
`standard` (the default, provisioner `k8s.io/minikube-hostpath`, reclaim policy Delete, binding
Immediate) and a provisioner that gives each claim of that class a hostPath volume
`/tmp/hostpath-provisioner/<namespace>/<claim>`, with no node affinity.

A Kamaji tenant has no storage until one is installed; the lab installs this one, the simplest that
binds at once, because the lab's containers write no data anyway. The provisioner follows
sig-storage-lib-external-provisioner, which minikube's is built on: it takes the claims the PV
controller named it for (`volume.kubernetes.io/storage-provisioner`), records `Provisioning` and
`ProvisioningSucceeded` events, creates volume `pvc-<claim uid>` pre-bound to the claim (the PV
controller then binds both), and deletes a volume it made once it is Released under policy Delete.
It runs beside the controller duties, as Kamaji lets a TenantControlPlane carry extra containers.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from tenantgpu.controlplane.workqueue import Key, WorkQueue, object_key
from tenantgpu.gpushare import volumes as v
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

PROVISIONER = "k8s.io/minikube-hostpath"
DEFAULT_CLASS_NAME = "standard"
HOST_PATH_ROOT = "/tmp/hostpath-provisioner"

Obj = dict[str, Any]


def default_storage_class() -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": DEFAULT_CLASS_NAME,
            "annotations": {v.ANN_DEFAULT_CLASS: "true"},
            "labels": {"addonmanager.kubernetes.io/mode": "EnsureExists"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def volume_for(claim: Obj, storage_class: Obj) -> Obj:
    """The volume a claim of the class gets."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    body: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {v.ANN_PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "accessModes": list(spec.get("accessModes") or []),
            "capacity": {
                "storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
            },
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "claimRef": v.claim_reference(claim),
            "hostPath": {"path": f"{HOST_PATH_ROOT}/{meta.get('namespace', '')}/{meta['name']}", "type": ""},
        },
    }
    if storage_class.get("mountOptions"):
        body["spec"]["mountOptions"] = list(storage_class["mountOptions"])
    return body


class HostPathProvisioner:
    """Provisions and deletes the volumes of the classes whose provisioner is `k8s.io/minikube-hostpath`."""

    def __init__(self, client: KubeClient, *, claims: Informer, volumes: Informer, classes: Informer) -> None:
        self.client = client
        # the external-provisioner library names its event source <provisioner>_<host>_<uuid of this run>;
        # minikube's provisioner runs as the pod `storage-provisioner`
        self.component = f"{PROVISIONER}_storage-provisioner_{uuid.uuid4()}"
        self.claims = claims
        self.volumes = volumes
        self.classes = classes
        self.claim_queue: WorkQueue[Key] = WorkQueue("hostpath-provisioner-claims", self.sync_claim)
        self.volume_queue: WorkQueue[Key] = WorkQueue("hostpath-provisioner-volumes", self.sync_volume)

    async def start(self) -> None:
        with contextlib.suppress(ApiError):  # EnsureExists: a class an administrator changed stays so
            if await self.client.get_if_found("storageclasses", DEFAULT_CLASS_NAME) is None:
                await self.client.create("storageclasses", default_storage_class())
        self.claims.add_handler(lambda _e, claim, _o: self.claim_queue.add(object_key(claim)))
        self.volumes.add_handler(lambda _e, volume, _o: self.volume_queue.add(object_key(volume)))
        for informer in (self.classes, self.volumes, self.claims):
            await informer.start()
        for claim in self.claims.items():
            self.claim_queue.add(object_key(claim))
        for volume in self.volumes.items():
            self.volume_queue.add(object_key(volume))
        self.claim_queue.start()
        self.volume_queue.start()

    async def stop(self) -> None:
        await self.claim_queue.stop()
        await self.volume_queue.stop()

    def _our_class(self, claim: Obj) -> Obj | None:
        name = v.claim_class(claim)
        storage_class = self.classes.get(None, name) if name else None
        if storage_class is None or storage_class.get("provisioner") != PROVISIONER:
            return None
        return storage_class

    async def sync_claim(self, key: Key) -> None:
        claim = self.claims.get(*key)
        if claim is None:
            return
        meta, spec = claim["metadata"], claim.get("spec") or {}
        annotations = meta.get("annotations") or {}
        asked = annotations.get(v.ANN_STORAGE_PROVISIONER) or annotations.get(v.ANN_BETA_STORAGE_PROVISIONER)
        if spec.get("volumeName") or asked != PROVISIONER or meta.get("deletionTimestamp"):
            return
        storage_class = self._our_class(claim)
        if storage_class is None:
            return
        if v.delay_binding(storage_class) and v.ANN_SELECTED_NODE not in annotations:
            return
        name = f"pvc-{meta['uid']}"
        if self.volumes.get(None, name) is not None:
            return
        reference = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim}
        await self._event(
            reference,
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{v.claim_key(claim)}"',
        )
        try:
            await self.client.create("persistentvolumes", volume_for(claim, storage_class))
        except ApiError as err:
            if err.code == 409:
                return  # made by an earlier try whose answer was lost
            await self._event(
                reference,
                "ProvisioningFailed",
                f'failed to provision volume with StorageClass "{storage_class["metadata"]["name"]}": {err.message}',
                warning=True,
            )
            raise
        await self._event(reference, "ProvisioningSucceeded", f"Successfully provisioned volume {name}")

    async def sync_volume(self, key: Key) -> None:
        volume = self.volumes.get(*key)
        if volume is None:
            return
        meta, spec = volume["metadata"], volume.get("spec") or {}
        if (
            (meta.get("annotations") or {}).get(v.ANN_PROVISIONED_BY) != PROVISIONER
            or (volume.get("status") or {}).get("phase") != "Released"
            or spec.get("persistentVolumeReclaimPolicy") != "Delete"
            or meta.get("deletionTimestamp")
        ):
            return
        with contextlib.suppress(ApiError):
            await self.client.delete("persistentvolumes", meta["name"], uid=meta.get("uid"))

    async def _event(self, claim: Obj, reason: str, message: str, *, warning: bool = False) -> None:
        with contextlib.suppress(ApiError):
            await self.client.create_event(
                claim,
                reason=reason,
                message=message,
                type="Warning" if warning else "Normal",
                component=self.component,
            )

"""kube-controller-manager's garbage collector, for the owners and dependents a lab tenant has.

One collector serves one kind of owner and one kind of dependent: Jobs and their pods, ReplicaSets
and their pods, Deployments and their ReplicaSets.
What a delete of the owner does to them follows its propagation policy, as in Kubernetes:

- Background: the owner goes at once; the collector then deletes each dependent whose owners are
  all gone (found by the watch, or at start, for owners deleted while it was down).
- Foreground: the owner stays, marked, with the `foregroundDeletion` finalizer; the collector
  deletes its dependents and removes the finalizer once none is left.
- Orphan: the owner stays with the `orphan` finalizer; the collector removes the owner's reference
  from each dependent, then the finalizer.
"""

from __future__ import annotations

import contextlib
from typing import Any

from tenantgpu.controlplane.owners import (
    FOREGROUND_FINALIZER,
    ORPHAN_FINALIZER,
    finalizers,
    owner_uids,
    without_finalizer_patch,
)
from tenantgpu.controlplane.workqueue import WorkQueue, object_key
from tenantgpu.kubeclient import ApiError, Informer, KubeClient


class GarbageCollector:
    """Deletes or orphans the dependents of owners that are deleted."""

    def __init__(self, client: KubeClient, *, owners: Informer, dependents: Informer) -> None:
        self.client = client
        self.owners = owners
        self.dependents = dependents
        # ("deleted", owner uid, ""), ("finalize", namespace, owner) or ("check", namespace, dependent)
        self.queue: WorkQueue[tuple[str, str, str]] = WorkQueue(
            f"garbage-collector-{owners.resource.plural}", self._sync
        )

    async def start(self) -> None:
        self.owners.add_handler(self._owner_changed)
        self.dependents.add_handler(self._dependent_changed)
        await self.owners.start()
        await self.dependents.start()
        self.queue.start()
        for owner in self.owners.items():
            self._owner_changed("ADDED", owner, None)
        for dependent in self.dependents.items():
            self._dependent_changed("ADDED", dependent, None)

    async def stop(self) -> None:
        await self.queue.stop()

    def _owner_changed(self, event: str, owner: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = owner.get("metadata") or {}
        if event == "DELETED":
            self.queue.add(("deleted", meta.get("uid", ""), ""))
        elif meta.get("deletionTimestamp") and {ORPHAN_FINALIZER, FOREGROUND_FINALIZER} & set(
            finalizers(owner)
        ):
            self.queue.add(("finalize", *object_key(owner)))

    def _dependent_changed(self, event: str, dependent: dict[str, Any], old: dict[str, Any] | None) -> None:
        uids = owner_uids(dependent)
        if not uids:
            return
        if event == "DELETED":
            # A foreground deletion may have been waiting for this one.
            for owner in self.owners.items():
                if owner["metadata"].get("uid") in uids and FOREGROUND_FINALIZER in finalizers(owner):
                    self.queue.add(("finalize", *object_key(owner)))
            return
        if self.owners.synced:
            self.queue.add(("check", *object_key(dependent)))

    async def _sync(self, key: tuple[str, str, str]) -> None:
        what, first, second = key
        if what == "deleted":
            await self._delete_dependents_of(first, only_orphaned=True)
        elif what == "finalize":
            owner = self.owners.get(first, second)
            if owner is not None:
                await self._finalize(owner)
        else:
            dependent = self.dependents.get(first, second)
            if dependent is not None:
                await self._check(dependent)

    def _owner_kinds(self) -> str:
        return self.owners.resource.kind

    def _dependents_of(self, uid: str) -> list[dict[str, Any]]:
        return [d for d in self.dependents.items() if uid in owner_uids(d)]

    async def _owner_exists(self, ref: dict[str, Any], namespace: str) -> bool:
        """Whether the owner a reference names is still there; asks the API when the cache lacks it."""
        uid = ref.get("uid")
        if any(o["metadata"].get("uid") == uid for o in self.owners.items()):
            return True
        try:
            owner = await self.client.get(self.owners.resource, ref.get("name", ""), namespace)
        except ApiError as err:
            return err.code != 404
        return owner["metadata"].get("uid") == uid

    async def _check(self, dependent: dict[str, Any]) -> None:
        meta = dependent.get("metadata") or {}
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == self._owner_kinds()]
        if not refs or meta.get("deletionTimestamp"):
            return
        if not await self._all_owners_gone(dependent):
            return
        # The cache may lag (an orphaning patch just written): decide on the object as stored now.
        try:
            latest = await self.client.get(self.dependents.resource, meta["name"], meta.get("namespace"))
        except ApiError:
            return
        if latest["metadata"].get("uid") == meta.get("uid") and await self._all_owners_gone(latest):
            await self._delete(latest)

    async def _all_owners_gone(self, dependent: dict[str, Any]) -> bool:
        meta = dependent.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        if not refs:
            return False
        for ref in refs:
            if ref.get("kind") != self._owner_kinds() or await self._owner_exists(
                ref, meta.get("namespace", "")
            ):
                return False  # an owner of a kind not collected here, or one still there, keeps it
        return True

    async def _delete_dependents_of(self, uid: str, *, only_orphaned: bool) -> None:
        for dependent in self._dependents_of(uid):
            if dependent["metadata"].get("deletionTimestamp"):
                continue
            if only_orphaned:
                await self._check(dependent)
            else:
                await self._delete(dependent)

    async def _delete(self, dependent: dict[str, Any]) -> None:
        meta = dependent["metadata"]
        with contextlib.suppress(ApiError):
            await self.client.delete(
                self.dependents.resource,
                meta["name"],
                meta.get("namespace"),
                uid=meta.get("uid"),
                propagation_policy="Background",
            )

    async def _finalize(self, owner: dict[str, Any]) -> None:
        uid = owner["metadata"]["uid"]
        if ORPHAN_FINALIZER in finalizers(owner):
            for dependent in self._dependents_of(uid):
                await self._orphan(dependent, uid)
            await self._drop_finalizer(owner, ORPHAN_FINALIZER)
        elif FOREGROUND_FINALIZER in finalizers(owner):
            await self._delete_dependents_of(uid, only_orphaned=False)
            if not self._dependents_of(uid):
                await self._drop_finalizer(owner, FOREGROUND_FINALIZER)

    async def _orphan(self, dependent: dict[str, Any], uid: str) -> None:
        meta = dependent["metadata"]
        refs = meta.get("ownerReferences") or []
        kept = [r for r in refs if r.get("uid") != uid]
        patch = [
            {"op": "test", "path": "/metadata/ownerReferences", "value": refs},
            {"op": "replace", "path": "/metadata/ownerReferences", "value": kept},
        ]
        if not kept:
            patch[1] = {"op": "remove", "path": "/metadata/ownerReferences"}
        with contextlib.suppress(ApiError):
            await self.client.patch(
                self.dependents.resource, meta["name"], patch, meta.get("namespace"), patch_type="json"
            )

    async def _drop_finalizer(self, owner: dict[str, Any], finalizer: str) -> None:
        meta = owner["metadata"]
        try:
            await self.client.patch(
                self.owners.resource,
                meta["name"],
                without_finalizer_patch(owner, finalizer),
                meta.get("namespace"),
                patch_type="json",
            )
        except ApiError as err:
            if err.code in (409, 422):
                # Changed meanwhile: look again once the watch has brought the new version.
                self.queue.add_after(("finalize", *object_key(owner)), 0.2)

"""kube's EndpointSliceTracker, shared by the endpointslice and the endpointslicemirroring controllers:
per Service, the generation of each EndpointSlice the controller wrote (-1 once it deleted one), so that
it neither reacts to its own writes nor plans from a cache that has not caught up with them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tenantgpu.controlplane.endpointsbuild import SERVICE_NAME, SLICE_MANAGED_BY
from tenantgpu.controlplane.workqueue import Key
from tenantgpu.kubeclient import ApiError

if TYPE_CHECKING:
    from tenantgpu.kubeclient import KubeClient

Obj = dict[str, Any]
_DELETED = -1


def service_of(slice_: Obj) -> Key | None:
    """The (namespace, name) of the Service a slice belongs to, from its `kubernetes.io/service-name`."""
    meta = slice_.get("metadata") or {}
    name = (meta.get("labels") or {}).get(SERVICE_NAME)
    return (meta.get("namespace") or "", name) if name else None


def namespace_terminating(err: ApiError) -> bool:
    """A write refused because the namespace is being deleted: the controllers let that sync go."""
    return err.code == 403 and "NamespaceTerminating" in str(err.status.get("details") or "")


def _generation(slice_: Obj) -> tuple[str, int]:
    meta = slice_.get("metadata") or {}
    return meta.get("uid") or "", int(meta.get("generation") or 0)


class SliceTracker:
    """The slices one controller (`managed_by`, its `endpointslice.kubernetes.io/managed-by` value) wrote."""

    def __init__(self, managed_by: str) -> None:
        self.managed_by = managed_by
        self._generations: dict[Key, dict[str, int]] = {}

    def managed(self, slice_: Obj) -> bool:
        return ((slice_.get("metadata") or {}).get("labels") or {}).get(SLICE_MANAGED_BY) == self.managed_by

    def should_sync(self, slice_: Obj) -> bool:
        """The slice is not one this controller has just written (a newer generation, or unknown)."""
        key = service_of(slice_)
        known = self._generations.get(key) if key else None
        if known is None:
            return True
        uid, generation = _generation(slice_)
        seen = known.get(uid)
        return seen is None or generation > seen

    def changed(self, event: str, slice_: Obj, old: Obj | None) -> list[Obj]:
        """The slices whose Services a slice event asks to sync (the controllers' slice handlers)."""
        if event == "ADDED":
            return [slice_] if self.managed(slice_) and self.should_sync(slice_) else []
        if event == "MODIFIED" and old is not None:
            if service_of(slice_) != service_of(old):
                return [slice_, old]
            if self.managed(slice_) != self.managed(old) or (
                self.managed(slice_) and self.should_sync(slice_)
            ):
                return [slice_]
            return []
        if event == "DELETED" and self.managed(slice_):
            key = service_of(slice_)
            known = self._generations.get(key) if key else None
            uid, _ = _generation(slice_)
            if known is not None and uid in known and known.pop(uid) != _DELETED:
                return [slice_]  # someone else deleted it: put it back
        return []

    def stale(self, key: Key, slices: list[Obj]) -> bool:
        """StaleSlices: the cache lacks a slice written, shows an older generation, or still one deleted."""
        known = self._generations.get(key)
        if not known:
            return False
        present = dict(_generation(s) for s in slices)
        for uid, wrote in known.items():
            if wrote == _DELETED:
                if uid in present:
                    return True
            elif present.get(uid, _DELETED) < wrote:
                return True
        return False

    def track(self, key: Key, slice_: Obj, *, deleted: bool = False) -> None:
        uid, generation = _generation(slice_)
        self._generations.setdefault(key, {})[uid] = _DELETED if deleted else generation

    def forget(self, key: Key) -> None:
        self._generations.pop(key, None)

    async def write(
        self,
        client: KubeClient,
        key: Key,
        namespace: str,
        *,
        create: Sequence[Obj] = (),
        update: Sequence[Obj] = (),
        delete: Sequence[Obj] = (),
    ) -> None:
        """Carry out a reconciliation's creates, updates and deletes (a slice already gone counts as
        deleted), tracking each slice written."""
        for body in create:
            self.track(key, await client.create("endpointslices", body, namespace))
        for body in update:
            self.track(key, await client.update("endpointslices", body))
        for body in delete:
            try:
                await client.delete("endpointslices", body["metadata"]["name"], namespace)
            except ApiError as err:
                if err.code != 404:
                    raise
            self.track(key, body, deleted=True)

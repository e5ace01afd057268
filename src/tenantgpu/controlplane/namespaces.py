"""Namespace deletion, as kube-controller-manager's namespace controller does it.

Deleting a namespace only marks it (`deletionTimestamp`, phase Terminating); this controller then
deletes every namespaced object in it through the API like any client (pods gracefully, so a kubelet
gets to stop them), reports progress in the namespace's status conditions, waits until nothing is left,
and finally removes its `kubernetes` finalizer through `PUT .../finalize`, upon which the API server
removes the namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tenantgpu.kubeclient import ApiError, Informer, KubeClient
from tenantgpu.kubeclient.client import now_rfc3339
from tenantgpu.kubeclient.resources import ResourceKind

log = logging.getLogger(__name__)

Obj = dict[str, Any]

FINALIZER = "kubernetes"
NAMESPACES = ResourceKind("", "v1", "namespaces", "Namespace", False)

# The conditions the namespace controller maintains, with the reason and message of their all-clear.
CONDITION_TYPES: tuple[str, ...] = (
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
)
_ALL_CLEAR: dict[str, tuple[str, str]] = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    "NamespaceDeletionContentFailure": (
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentRemoved", "All content successfully removed"),
}


@dataclass(frozen=True)
class NamespacedResource:
    """A discovered resource the controller empties: its REST location and the verbs it offers."""

    kind: ResourceKind
    verbs: frozenset[str]

    @property
    def label(self) -> str:
        """`pods.` / `leases.coordination.k8s.io`, as the controller's condition messages name them."""
        return f"{self.kind.plural}.{self.kind.group}"


@dataclass
class DeletionProgress:
    """What one pass over a terminating namespace found: failures and what still remains."""

    discovery_error: str | None = None
    content_errors: list[str] = field(default_factory=list)
    remaining: dict[str, int] = field(default_factory=dict)
    finalizers: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.discovery_error is None and not self.content_errors and not any(self.remaining.values())

    def conditions(self) -> dict[str, tuple[str, str, str]]:
        """Condition type → (status, reason, message); the all-clear variant where nothing failed."""
        found: dict[str, tuple[str, str, str]] = {}
        if self.discovery_error is not None:
            found["NamespaceDeletionDiscoveryFailure"] = ("True", "DiscoveryFailed", self.discovery_error)
        if self.content_errors:
            errors = sorted(self.content_errors)
            found["NamespaceDeletionContentFailure"] = (
                "True",
                "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(errors)} remaining: {', '.join(errors)}",
            )
        remaining = sorted(
            f"{resource} has {count} resource instances"
            for resource, count in self.remaining.items()
            if count
        )
        if remaining:
            found["NamespaceContentRemaining"] = (
                "True",
                "SomeResourcesRemain",
                f"Some resources are remaining: {', '.join(remaining)}",
            )
        finalizers = sorted(
            f"{name} in {count} resource instances" for name, count in self.finalizers.items() if count
        )
        if finalizers:
            found["NamespaceFinalizersRemaining"] = (
                "True",
                "SomeFinalizerRemain",
                f"Some finalizers are remaining: {', '.join(finalizers)}",
            )
        for kind in CONDITION_TYPES:
            if kind not in found:
                reason, message = _ALL_CLEAR[kind]
                found[kind] = ("False", reason, message)
        return found


def is_terminating(namespace: Obj) -> bool:
    """A namespace being deleted: nothing new may be put into it."""
    meta = namespace.get("metadata") or {}
    return (
        bool(meta.get("deletionTimestamp")) or (namespace.get("status") or {}).get("phase") == "Terminating"
    )


def merge_conditions(
    current: list[Obj], wanted: dict[str, tuple[str, str, str]], now: str
) -> list[Obj] | None:
    """The namespace's conditions with `wanted` applied, or None if nothing changes; the transition
    time moves only when a condition's status does."""
    merged = [dict(c) for c in current]
    changed = False
    for kind in CONDITION_TYPES:
        status, reason, message = wanted[kind]
        old = next((c for c in merged if c.get("type") == kind), None)
        if old is None:
            merged.append(
                {
                    "type": kind,
                    "status": status,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
            )
            changed = True
        elif (old.get("status"), old.get("reason"), old.get("message")) != (status, reason, message):
            if old.get("status") != status:
                old["lastTransitionTime"] = now
            old.update(status=status, reason=reason, message=message)
            changed = True
    return merged if changed else None


class NamespaceController:
    """Empties and finalizes every namespace that has a deletionTimestamp."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespaces: Informer | None = None,
        first_recheck: float = 0.05,
        max_recheck: float = 1.0,
    ) -> None:
        """`namespaces`: an informer to share with another controller (one watch instead of two)."""
        self.client = client
        self.namespaces = namespaces or Informer(client, NAMESPACES)
        self._first_recheck = first_recheck
        self._max_recheck = max_recheck
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._waits: dict[str, float] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.namespaces.add_handler(self._namespace_changed)
        await self.namespaces.start()
        self._worker = asyncio.create_task(self._work(), name="namespace-controller")
        for namespace in self.namespaces.items():
            self._consider(namespace)

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        await self.namespaces.stop()

    # --- the work queue ---------------------------------------------------------------------------

    async def _namespace_changed(self, event: str, namespace: Obj, old: Obj | None) -> None:
        if event != "DELETED":
            self._consider(namespace)

    def _consider(self, namespace: Obj) -> None:
        meta = namespace.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self._enqueue(meta.get("name", ""))

    def _enqueue(self, name: str) -> None:
        if name and name not in self._queued:
            self._queued.add(name)
            self._queue.put_nowait(name)

    def _recheck_later(self, name: str) -> None:
        """Content is still going away (pods terminating): look again soon, less often as it drags on."""
        wait = self._waits.get(name, self._first_recheck / 2) * 2
        self._waits[name] = wait = min(wait, self._max_recheck)
        if name not in self._timers:
            loop = asyncio.get_running_loop()
            self._timers[name] = loop.call_later(wait, self._timer_fired, name)

    def _timer_fired(self, name: str) -> None:
        self._timers.pop(name, None)
        self._enqueue(name)

    async def _work(self) -> None:
        while True:
            name = await self._queue.get()
            self._queued.discard(name)
            try:
                finished = await self.sync(name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failed pass is retried; the controller keeps serving the rest
                log.warning("namespace %s: deletion pass failed: %s", name, exc)
                finished = False
            if finished:
                self._waits.pop(name, None)
            else:
                self._recheck_later(name)

    # --- one pass over one namespace ------------------------------------------------------------

    async def sync(self, name: str) -> bool:
        """One deletion pass; true when there is nothing more to do for the namespace."""
        namespace = await self._get(name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return True
        if (namespace.get("status") or {}).get("phase") != "Terminating":
            namespace = await self._update_status(
                namespace, lambda status: status.update(phase="Terminating")
            )
            if namespace is None:
                return True
        if not (namespace.get("spec") or {}).get("finalizers"):
            # Finalized already (ours or every finalizer gone): the second DELETE removes it.
            with contextlib.suppress(ApiError):
                await self.client.delete(NAMESPACES, name, uid=namespace["metadata"].get("uid"))
            return True
        if FINALIZER not in namespace["spec"]["finalizers"]:
            return True  # someone else's finalizer: theirs to remove
        progress = await self.delete_content(name)
        wanted = progress.conditions()
        now = now_rfc3339()

        def conditions(status: Obj) -> None:
            merged = merge_conditions(status.get("conditions") or [], wanted, now)
            if merged is not None:
                status["conditions"] = merged

        namespace = await self._update_status(namespace, conditions)
        if namespace is None:
            return True
        if not progress.done:
            return False
        return await self._finalize(namespace)

    async def delete_content(self, namespace: str) -> DeletionProgress:
        """Deletes what the namespace holds, then counts what is still there (pods may take a while)."""
        progress = DeletionProgress()
        try:
            resources = await self.discover()
        except (ApiError, OSError, ValueError, KeyError, TypeError) as exc:
            progress.discovery_error = f"Discovery failed for some groups: {exc}"
            return progress
        for resource in resources:
            try:
                await self._delete_all(resource, namespace)
                items = (await self.client.list(resource.kind, namespace)).get("items") or []
            except ApiError as exc:
                if exc.code in (404, 405):
                    continue
                progress.content_errors.append(f"{resource.label}: {exc.message}")
                continue
            if items:
                progress.remaining[resource.label] = len(items)
                for item in items:
                    for finalizer in (item.get("metadata") or {}).get("finalizers") or []:
                        progress.finalizers[finalizer] = progress.finalizers.get(finalizer, 0) + 1
        return progress

    async def _delete_all(self, resource: NamespacedResource, namespace: str) -> None:
        if "deletecollection" in resource.verbs:
            await self.client.request(
                "DELETE",
                resource.kind.path(namespace),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
            return
        for item in (await self.client.list(resource.kind, namespace)).get("items") or []:
            meta = item.get("metadata") or {}
            with contextlib.suppress(ApiError):
                await self.client.delete(resource.kind, meta["name"], namespace, uid=meta.get("uid"))

    async def discover(self) -> list[NamespacedResource]:
        """Every namespaced resource of the server's preferred versions that can be listed and deleted."""
        found: list[NamespacedResource] = []
        core = await self.client.request("GET", "/api/v1")
        found += _deletable("", "v1", core.get("resources") or [])
        groups = await self.client.request("GET", "/apis")
        for group in groups.get("groups") or []:
            preferred = (group.get("preferredVersion") or {}).get("version")
            if not preferred:
                continue
            listing = await self.client.request("GET", f"/apis/{group['name']}/{preferred}")
            found += _deletable(group["name"], preferred, listing.get("resources") or [])
        return found

    # --- namespace writes -----------------------------------------------------------------------

    async def _get(self, name: str) -> Obj | None:
        try:
            return await self.client.get(NAMESPACES, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    async def _update_status(self, namespace: Obj, change: Any) -> Obj | None:
        """Applies `change` to the status and writes it, re-reading on conflict; None once it is gone."""
        uid = namespace["metadata"].get("uid")
        for _ in range(10):
            status = dict(namespace.get("status") or {})
            change(status)
            if status == (namespace.get("status") or {}):
                return namespace
            try:
                return await self.client.update_status(NAMESPACES, {**namespace, "status": status})
            except ApiError as exc:
                if exc.code != 409:
                    if exc.code == 404:
                        return None
                    raise
            fresh = await self._get(namespace["metadata"]["name"])
            if fresh is None or fresh["metadata"].get("uid") != uid:
                return None
            namespace = fresh
        raise RuntimeError(f"namespace {namespace['metadata']['name']}: status kept conflicting")

    async def _finalize(self, namespace: Obj) -> bool:
        """Removes our finalizer; the API server deletes the namespace once none is left."""
        name = namespace["metadata"]["name"]
        for _ in range(10):
            remaining = sorted({f for f in namespace["spec"].get("finalizers") or [] if f != FINALIZER})
            body = {**namespace, "spec": {**namespace["spec"], "finalizers": remaining}}
            try:
                await self.client.update(NAMESPACES, body, subresource="finalize")
                return True
            except ApiError as exc:
                if exc.code == 404:
                    return True
                if exc.code != 409:
                    raise
            fresh = await self._get(name)
            if fresh is None:
                return True
            namespace = fresh
        return False


def _deletable(group: str, version: str, resources: Iterable[Obj]) -> list[NamespacedResource]:
    found = []
    for resource in resources:
        verbs = frozenset(resource.get("verbs") or ())
        if not resource.get("namespaced") or "/" in resource.get("name", ""):
            continue
        if "list" not in verbs or not verbs & {"delete", "deletecollection"}:
            continue
        kind = ResourceKind(group, version, resource["name"], resource.get("kind", ""), True)
        found.append(NamespacedResource(kind, verbs))
    return found

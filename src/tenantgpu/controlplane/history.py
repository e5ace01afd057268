"""ControllerRevisions: the template history kube's DaemonSet and StatefulSet controllers keep.

Each template gets a revision `<owner>-<hash>` (the hash of the template, as for a Deployment's
ReplicaSets) holding it as a strategic merge patch that replaces the owner's template, which is what
`kubectl rollout undo` applies; revisions are numbered, a template that comes back (an undo) becomes the
newest again, and old ones beyond `revisionHistoryLimit` that no pod still runs are deleted.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from tenantgpu.controlplane.deployment import template_hash
from tenantgpu.controlplane.owners import owned_by, owner_reference
from tenantgpu.kubeclient import ApiError, Informer, KubeClient

REVISION_HASH = "controller-revision-hash"
CHANGE_CAUSE = "kubernetes.io/change-cause"


def _revision_data(owner: dict[str, Any]) -> dict[str, Any]:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


class History:
    """The revisions of one kind of owner; `current(owner, pods)` returns the current template's hash."""

    def __init__(self, client: KubeClient, revisions: Informer) -> None:
        self.client = client
        self.revisions = revisions

    async def current(
        self, owner: dict[str, Any], pods: list[dict[str, Any]], pod_hash: Callable[[dict[str, Any]], str]
    ) -> str:
        """The hash of the owner's template, its revision created or made the newest; `pod_hash` reads
        the hash a pod was made from, so the revisions pods still run are kept."""
        template = (owner.get("spec") or {}).get("template") or {}
        collisions = int((owner.get("status") or {}).get("collisionCount") or 0)
        current_hash = template_hash(template, collisions)
        name = f"{owner['metadata']['name']}-{current_hash}"
        mine = owned_by(owner, self.revisions.items())
        top = max((int(r.get("revision") or 0) for r in mine), default=0)
        existing = next((r for r in mine if r["metadata"]["name"] == name), None)
        namespace = owner["metadata"].get("namespace")
        if existing is None:
            annotations = owner["metadata"].get("annotations") or {}
            body = {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {
                        **((template.get("metadata") or {}).get("labels") or {}),
                        REVISION_HASH: current_hash,
                    },
                    "annotations": {k: v for k, v in annotations.items() if k == CHANGE_CAUSE},
                    "ownerReferences": [owner_reference(owner)],
                },
                "data": _revision_data(owner),
                "revision": top + 1,
            }
            with contextlib.suppress(ApiError):  # 409: created by a sync the watch has not shown yet
                await self.client.create("controllerrevisions", body, namespace)
        elif int(existing.get("revision") or 0) < top:
            with contextlib.suppress(ApiError):
                await self.client.patch("controllerrevisions", name, {"revision": top + 1}, namespace)
        await self._trim(owner, mine, {pod_hash(p) for p in pods} | {current_hash})
        return current_hash

    async def _trim(self, owner: dict[str, Any], revisions: list[dict[str, Any]], in_use: set[str]) -> None:
        limit = int((owner.get("spec") or {}).get("revisionHistoryLimit", 10))
        old = sorted(
            (r for r in revisions if (r["metadata"].get("labels") or {}).get(REVISION_HASH) not in in_use),
            key=lambda r: int(r.get("revision") or 0),
        )
        for revision in old[: max(len(old) - limit, 0)]:
            with contextlib.suppress(ApiError):
                await self.client.delete(
                    "controllerrevisions", revision["metadata"]["name"], revision["metadata"].get("namespace")
                )

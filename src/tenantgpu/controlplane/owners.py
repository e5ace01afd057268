"""Readings of `metadata.ownerReferences` shared by the job controller and the garbage collector."""

from __future__ import annotations

import copy
from typing import Any

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
# The API server puts these on an owner deleted with propagationPolicy Orphan or Foreground.
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"


def owner_uids(obj: dict[str, Any]) -> list[str]:
    return [ref.get("uid", "") for ref in (obj.get("metadata") or {}).get("ownerReferences") or []]


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The owner reference marked `controller: true`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def owner_reference(owner: dict[str, Any], *, controller: bool = True) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def finalizers(obj: dict[str, Any]) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def without_finalizer_patch(obj: dict[str, Any], finalizer: str) -> list[dict[str, Any]]:
    """A JSON patch removing one finalizer that fails (test op) if the list changed meanwhile."""
    current = finalizers(obj)
    kept = [f for f in current if f != finalizer]
    test = {"op": "test", "path": "/metadata/finalizers", "value": current}
    if not kept:  # kube leaves an empty list out of the object, as Go's omitempty does
        return [test, {"op": "remove", "path": "/metadata/finalizers"}]
    return [test, {"op": "replace", "path": "/metadata/finalizers", "value": kept}]


def owned_by(owner: dict[str, Any], candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates in the owner's namespace whose controller reference names the owner's uid."""
    namespace, uid = owner["metadata"].get("namespace") or "", owner["metadata"]["uid"]
    return [
        obj
        for obj in candidates
        if (obj["metadata"].get("namespace") or "") == namespace
        and (controller_of(obj) or {}).get("uid") == uid
    ]


def pod_from_template(owner: dict[str, Any], *, finalizer: str | None = None) -> dict[str, Any]:
    """A pod of the owner's `spec.template`, named `<owner>-<5 characters>` by the API server and
    controlled by the owner (which carries its apiVersion and kind)."""
    meta = owner["metadata"]
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta['name']}-",
        "namespace": meta.get("namespace"),
        "labels": template_meta.get("labels") or {},
        "ownerReferences": [owner_reference(owner)],
    }
    if finalizer is not None:
        pod_meta["finalizers"] = [finalizer]
    if template_meta.get("annotations"):
        pod_meta["annotations"] = template_meta["annotations"]
    return {"metadata": pod_meta, "spec": template.get("spec") or {}}

"""One copy of identical JSON sub-structures across a process's tenants.

Every tenant holds the same ~130 default RBAC objects (and their informer copies in its controller
duties): as decoded from JSON each would own its dicts, lists and strings. Stored objects are never
changed in place (a write builds a new object), so equal parts — a rule, a subject, a label map — can be
one object shared by all. `share` returns the process's canonical instance of a value, keyed by its
JSON; the table is bounded, and beyond it values are simply not shared.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_CANONICAL: dict[bytes, Any] = {}
_LIMIT = 100_000

Obj = dict[str, Any]


def share(value: Any) -> Any:
    """The canonical instance of a dict or list equal to `value` (that must not be changed in place)."""
    if not isinstance(value, dict | list) or not value:
        return value
    # Keyed by a digest of the JSON, not the JSON: the table keeps a key for every value it has seen,
    # most of them seen once, and a container's JSON is kilobytes. Equality is checked on a hit.
    key = hashlib.blake2b(orjson.dumps(value), digest_size=16).digest()
    found = _CANONICAL.get(key)
    if found is not None and found == value:
        return found
    if found is None and len(_CANONICAL) < _LIMIT:
        _CANONICAL[key] = value
    return value


def _share_items(values: Any) -> Any:
    if not isinstance(values, list):
        return values
    return share([share(v) for v in values])


def share_rbac_object(obj: Obj) -> Obj:
    """Replaces a Role's, ClusterRole's or binding's rules, subjects, roleRef, aggregation rule, labels
    and annotations with the shared instances of equal values (in place; returns `obj`)."""
    for field in ("rules", "subjects"):
        if field in obj:
            obj[field] = _share_items(obj[field])
    for field in ("roleRef", "aggregationRule"):
        if field in obj:
            obj[field] = share(obj[field])
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for field in ("labels", "annotations"):
            if field in meta:
                meta[field] = share(meta[field])
    return obj


# Pod spec fields whose values repeat across a workload's objects and across tenants: every tenant's
# HAMi and konnectivity workloads, their revisions and pods carry the same containers, volumes and
# tolerations.
_POD_SPEC_LISTS = ("containers", "initContainers", "volumes", "tolerations", "imagePullSecrets")
_POD_SPEC_MAPS = ("nodeSelector", "affinity", "securityContext", "dnsConfig")
WORKLOAD_KINDS = frozenset(
    {"Pod", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet", "Job", "ControllerRevision"}
)


def _share_meta(meta: Any) -> None:
    if isinstance(meta, dict):
        for field in ("labels", "annotations"):
            if field in meta:
                meta[field] = share(meta[field])


def _share_pod_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    for field in _POD_SPEC_LISTS:
        if field in spec:
            spec[field] = _share_items(spec[field])
    for field in _POD_SPEC_MAPS:
        if field in spec:
            spec[field] = share(spec[field])


def _share_template(template: Any) -> None:
    if isinstance(template, dict):
        _share_meta(template.get("metadata"))
        _share_pod_spec(template.get("spec"))


def share_workload_object(obj: Obj) -> Obj:
    """Replaces the pod template's (or, for a pod, the spec's) containers, volumes, tolerations and
    scheduling constraints, and the labels and annotations, with shared instances of equal values (in
    place; returns `obj`). Pods are shared only in kube-system: the system components' pods repeat in
    every tenant, while users' pods are the lab's busiest writes."""
    kind = obj.get("kind")
    meta = obj.get("metadata")
    if kind == "Pod":
        if not isinstance(meta, dict) or meta.get("namespace") != "kube-system":
            return obj
        _share_meta(meta)
        _share_pod_spec(obj.get("spec"))
        return obj
    _share_meta(meta)
    if kind == "ControllerRevision":
        data = obj.get("data")
        spec = data.get("spec") if isinstance(data, dict) else None
    else:
        spec = obj.get("spec")
    if isinstance(spec, dict):
        if "selector" in spec:
            spec["selector"] = share(spec["selector"])
        _share_template(spec.get("template"))
    return obj

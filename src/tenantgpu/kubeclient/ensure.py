"""Writing an object only when it is missing or differs, as `helm upgrade` leaves unchanged objects alone.

The lab installs its own objects (HAMi's chart, the lab file's quotas) on every start, also when it
resumes a lab from its datastore. A write that changes nothing is not free there: a tenant whose
TenantControlPlane limits its writes (Kamaji's `writePermissions`) refuses every create, update or
delete outside `kube-system` with a 403, also a create of an object that exists already (admission
comes before the storage's AlreadyExists). So the object is read first, and written only when it is
missing or when what the lab wants is not already in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenantgpu.kubeclient.client import KubeClient
from tenantgpu.kubeclient.errors import ApiError

Obj = dict[str, Any]
# How an existing object is rewritten: from the wanted body and the current object, the body to PUT.
Merge = Callable[[Obj, Obj], Obj]

# What the API server sets on metadata itself; a wanted body never decides these.
_SERVER_METADATA = frozenset(
    {"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink"}
)


def covers(current: Any, wanted: Any) -> bool:
    """Whether `current` already says everything `wanted` says. A mapping may hold more keys (the API
    server's defaults and status) and may lack a key whose wanted value is empty (`false`, `0`, `""`,
    an empty list or map: kube's JSON leaves such `omitempty` fields out); lists are compared item by
    item and must be as long."""
    if isinstance(wanted, dict):
        return isinstance(current, dict) and all(
            covers(current[key], value) if key in current else not value for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(current, list)
            and len(current) == len(wanted)
            and all(covers(c, w) for c, w in zip(current, wanted, strict=True))
        )
    return bool(current == wanted)


def _replacing(wanted: Obj, current: Obj) -> Obj:
    meta = current.get("metadata") or {}
    return {**wanted, "metadata": {**wanted["metadata"], "resourceVersion": meta.get("resourceVersion")}}


async def read_or_create(client: KubeClient, resource: str, wanted: Obj) -> tuple[Obj, bool]:
    """The object as it stands, read first and created from `wanted` when it is missing (also when a
    create races another writer's); True when this call created it."""
    meta = wanted["metadata"]
    namespace = meta.get("namespace")
    current = await client.get_if_found(resource, meta["name"], namespace)
    if current is not None:
        return current, False
    try:
        return await client.create(resource, wanted, namespace), True
    except ApiError as err:
        if err.reason != "AlreadyExists":
            raise
    return await client.get(resource, meta["name"], namespace), False


async def ensure(client: KubeClient, resource: str, wanted: Obj, *, merge: Merge = _replacing) -> Obj:
    """The object as it stands once it says what `wanted` says: read first; created when missing;
    rewritten (`merge`, by default the wanted body at the current resourceVersion) when it differs;
    left alone otherwise."""
    current, created = await read_or_create(client, resource, wanted)
    if created:
        return current
    meta = wanted["metadata"]
    comparable = {**wanted, "metadata": {k: v for k, v in meta.items() if k not in _SERVER_METADATA}}
    if covers(current, comparable):
        return current
    return await client.update(resource, merge(wanted, current))

"""The CustomResourceDefinitions of the kinds an API server serves as custom resources.

On a Kamaji management cluster, `TenantControlPlane` and `DataStore` are CRDs that Kamaji's chart
installs, so `kubectl get crd` lists `tenantcontrolplanes.kamaji.clastix.io`. The lab serves those kinds
natively and writes their definitions itself at start-up, in the shape apiextensions-apiserver shows
once a definition is established, with the structural schema the API server enforces
(`kamajischemas.py`). A lab started by an older release holds definitions with an older schema; they
are brought up to date at start-up.
"""

from __future__ import annotations

import contextlib
import copy
from datetime import UTC, datetime
from typing import Any

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.kamajischemas import crd_schema
from tenantgpu.apiserver.kinds import CUSTOM_RESOURCE_DEFINITION, KAMAJI_KINDS, SCALE_PATHS, Kind
from tenantgpu.apiserver.registry import Registry

__all__ = ["custom_resource_definition", "ensure_custom_resource_definitions"]

_APISERVER = UserInfo("system:apiserver", ("system:masters",))


def _json_path(path: tuple[str, ...]) -> str:
    return "".join(f".{part}" for part in path)


def _schema(kind: Kind) -> dict[str, Any]:
    found = crd_schema(kind.group, kind.version, kind.kind)
    if found is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return copy.deepcopy(dict(found))


def custom_resource_definition(kind: Kind, now: datetime) -> dict[str, Any]:
    """The established definition of `kind`."""
    names: dict[str, Any] = {
        "kind": kind.kind,
        "listKind": kind.list_kind,
        "plural": kind.plural,
        "singular": kind.singular,
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    if kind.categories:
        names["categories"] = list(kind.categories)
    subresources: dict[str, Any] = {}
    if kind.has_status:
        subresources["status"] = {}
    if kind.subresource("scale") is not None and kind.kind in SCALE_PATHS:
        spec_path, status_path, selector_path = SCALE_PATHS[kind.kind]
        subresources["scale"] = {
            "specReplicasPath": _json_path(spec_path),
            "statusReplicasPath": _json_path(status_path),
            "labelSelectorPath": _json_path(selector_path),
        }
    version: dict[str, Any] = {
        "name": kind.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _schema(kind)},
    }
    if subresources:
        version["subresources"] = subresources
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": CUSTOM_RESOURCE_DEFINITION.api_version,
        "kind": CUSTOM_RESOURCE_DEFINITION.kind,
        "metadata": {"name": kind.group_resource},
        "spec": {
            "group": kind.group,
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [version],
            "conversion": {"strategy": "None"},
        },
        "status": {
            "acceptedNames": names,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": stamp,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": stamp,
                },
            ],
            "storedVersions": [kind.version],
        },
    }


async def ensure_custom_resource_definitions(registry: Registry) -> None:
    """Writes the definition of each custom kind the registry serves, once."""
    crd_kind = registry.kinds.resource(
        CUSTOM_RESOURCE_DEFINITION.group,
        CUSTOM_RESOURCE_DEFINITION.version,
        CUSTOM_RESOURCE_DEFINITION.plural,
    )
    if crd_kind is None:
        return
    for kind in registry.kinds:
        if kind not in KAMAJI_KINDS:
            continue
        wanted = custom_resource_definition(kind, datetime.now(UTC))
        stored = registry.get_object(crd_kind, "", kind.group_resource)
        if stored is None:
            with contextlib.suppress(errors.APIError):  # written meanwhile by another start of this server
                await registry.create(crd_kind, "", wanted, _APISERVER)
        elif stored.get("spec") != wanted["spec"]:

            def renewed(obj: dict[str, Any], spec: dict[str, Any] = wanted["spec"]) -> dict[str, Any]:
                obj["spec"] = spec
                return obj

            with contextlib.suppress(errors.APIError):
                await registry.modify(crd_kind, "", kind.group_resource, renewed, _APISERVER)

"""The OpenAPI v3 documents kubectl reads: a root index, one document per group-version.

kubectl (1.29+) looks for the PATCH operation of the object's GVK before create/apply; when that
operation lists the `fieldValidation` query parameter it leaves validation to the server and sends
`fieldValidation=Strict`, so the server's own validation decides what is refused.

`kubectl explain` (every version from 1.27 on, unless told `--output=plaintext-openapiv2`) renders
these documents: it finds the component whose `x-kubernetes-group-version-kind` names the kind and
follows its `$ref`s field by field. A kind the official client has a model of gets its real schema
(`schemas.py`), Kamaji's CRDs the structural schema of their definition (`kamajischemas.py`); any other
kind keeps a permissive stub with only apiVersion, kind and metadata
(`x-kubernetes-preserve-unknown-fields`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantgpu.apiserver.fieldversions import LATEST, trim_to
from tenantgpu.apiserver.kamajischemas import kamaji_kind_schemas
from tenantgpu.apiserver.schemas import kind_schemas, models_version, schema_name

__all__ = [
    "KindSchemaInfo",
    "group_version_path",
    "openapi_v3_group_version",
    "openapi_v3_hash",
    "openapi_v3_root",
    "openapi_v3_sources",
    "schema_name",
]


@dataclass(frozen=True)
class KindSchemaInfo:
    """One served kind: `KindSchemaInfo("", "v1", "Pod", True, "pods")`."""

    group: str
    version: str
    kind: str
    namespaced: bool
    plural: str


def group_version_path(group_version: str) -> str:
    """The key of a group-version in the root index: `api/v1` for core, `apis/<group>/<version>` otherwise."""
    if "/" not in group_version:
        return f"api/{group_version}"
    return f"apis/{group_version}"


def openapi_v3_hash(document: Mapping[str, Any]) -> str:
    """The content hash kube puts in `serverRelativeURL` (upper-case hex SHA-512 of the JSON document)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha512(canonical).hexdigest().upper()


def openapi_v3_root(
    group_versions: list[str], *, documents: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The `/openapi/v3` index: each group-version (`v1`, `admissionregistration.k8s.io/v1`) with its URL.

    Pass, keyed like `group_versions`, the per-group-version `documents` or what each is built from
    (`openapi_v3_sources`) so the `?hash=` changes whenever a document does; without them the hash only
    identifies the group-version.
    """
    paths: dict[str, Any] = {}
    for group_version in group_versions:
        path = group_version_path(group_version)
        document = (documents or {}).get(group_version)
        digest = openapi_v3_hash(document if document is not None else {"groupVersion": group_version})
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def openapi_v3_sources(
    group_version: str, kinds: list[KindSchemaInfo], minor: int = LATEST
) -> dict[str, Any]:
    """What a group-version document is built from, within one release of this code: its kinds and the
    client models' version.

    Hashing this instead of the document lets the root index answer without building every document
    (and importing the client): kubectl applying a Kamaji object then reads only Kamaji's document.
    A new release of this code may change a document under the same hash; that is harmless because the
    documents are served without cache validators (no ETag, no Cache-Control), so kubectl never reuses
    one it fetched before.
    """
    return {
        "groupVersion": group_version,
        "kinds": [[k.group, k.version, k.kind, k.namespaced, k.plural] for k in kinds],
        "models": models_version(),
        "minor": minor,
    }


def _gvk(info: KindSchemaInfo) -> dict[str, str]:
    return {"group": info.group, "version": info.version, "kind": info.kind}


def _query(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "string", "uniqueItems": True},
    }


def _path_param(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": f"{name} of the resource"
        if name == "name"
        else "object name and auth scope, such as for teams and projects",
        "schema": {"type": "string", "uniqueItems": True},
    }


_WRITE_PARAMS = [
    _query("dryRun", "When present, indicates that modifications should not be persisted."),
    _query(
        "fieldManager",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    _query(
        "fieldValidation",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown "
        "or duplicate fields. Valid values are: Ignore, Warn, Strict.",
    ),
]
_LIST_PARAMS = [
    _query("fieldSelector", "A selector to restrict the list of returned objects by their fields."),
    _query("labelSelector", "A selector to restrict the list of returned objects by their labels."),
    _query("limit", "limit is a maximum number of responses to return for a list call."),
    _query(
        "resourceVersion",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    _query("timeoutSeconds", "Timeout for the list/watch call."),
    _query("watch", "Watch for changes to the described resources and return them as a stream."),
]

# Patch bodies the server accepts. Strategic merge is left out on purpose: kubectl then computes
# `apply` patches from its compiled-in types, which carry the real merge keys, instead of from these
# schemas, which carry none (the client's models know no merge keys).
_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]


def _content(ref: str, types: list[str]) -> dict[str, Any]:
    return {media: {"schema": {"$ref": ref}} for media in types}


def _operation(info: KindSchemaInfo, action: str, verb: str, ref: str, scope: str) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "tags": [f"{info.group or 'core'}_{info.version}"],
        "description": f"{verb} {info.kind}",
        "operationId": f"{verb}{scope}{info.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(info),
        "responses": {
            "200": {"description": "OK", "content": _content(ref, ["application/json", "application/yaml"])},
            "401": {"description": "Unauthorized"},
        },
    }
    if action in ("post", "put", "patch"):
        operation["parameters"] = list(_WRITE_PARAMS)
    if action in ("post", "put"):
        operation["requestBody"] = {"content": _content(ref, ["*/*"]), "required": True}
        operation["responses"]["201"] = {
            "description": "Created",
            "content": _content(ref, ["application/json"]),
        }
    if action == "patch":
        operation["requestBody"] = {
            "content": {media: {"schema": {"type": "object"}} for media in _PATCH_TYPES},
            "required": True,
        }
    if action == "list":
        operation["parameters"] = list(_LIST_PARAMS)
    return operation


def _kind_schema(info: KindSchemaInfo) -> dict[str, Any]:
    return {
        "description": f"{info.kind} as served by this API server; fields are validated by the server.",
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this object.",
                "type": "string",
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource.",
                "type": "string",
            },
            "metadata": {
                "description": "Standard object's metadata.",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-group-version-kind": [_gvk(info)],
    }


def _list_schema(info: KindSchemaInfo, item_ref: str) -> dict[str, Any]:
    return {
        "description": f"{info.kind}List is a list of {info.kind}.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": item_ref}},
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-group-version-kind": [{**_gvk(info), "kind": f"{info.kind}List"}],
    }


def _add_schemas(schemas: dict[str, Any], info: KindSchemaInfo) -> tuple[str, str]:
    """Put the kind's and its list's schemas (and what they refer to) in `schemas`; return their names."""
    found = kind_schemas(info.group, info.version, info.kind) or kamaji_kind_schemas(
        info.group, info.version, info.kind
    )
    if found is None:
        name = schema_name(info.group, info.version, info.kind)
        schemas[name] = _kind_schema(info)
        schemas[f"{name}List"] = _list_schema(info, f"#/components/schemas/{name}")
        return name, f"{name}List"
    schemas.update(found.components)
    list_name = found.list_name
    if not list_name:
        list_name = f"{found.name}List"
        schemas[list_name] = _list_schema(info, f"#/components/schemas/{found.name}")
    return found.name, list_name


def openapi_v3_group_version(
    group: str, version: str, kinds: list[KindSchemaInfo], minor: int = LATEST
) -> dict[str, Any]:
    """The `/openapi/v3/<api|apis/group>/<version>` document: paths with GVK-tagged operations and schemas,
    the built-in kinds' as of Kubernetes 1.`minor` (the tenant's release)."""
    prefix = f"/api/{version}" if group == "" else f"/apis/{group}/{version}"
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for info in kinds:
        if (info.group, info.version) != (group, version):
            raise ValueError(f"{info.kind} belongs to {info.group}/{info.version}, not {group}/{version}")
        ref_name, list_ref_name = _add_schemas(schemas, info)
        ref = f"#/components/schemas/{ref_name}"
        list_ref = f"#/components/schemas/{list_ref_name}"
        if info.namespaced:
            collection = f"{prefix}/namespaces/{{namespace}}/{info.plural}"
            scope = "Namespaced"
            scope_params = [_path_param("namespace")]
            paths[f"{prefix}/{info.plural}"] = {
                "get": _operation(info, "list", "list", list_ref, "ForAllNamespaces"),
            }
        else:
            collection = f"{prefix}/{info.plural}"
            scope = ""
            scope_params = []
        paths[collection] = {
            "get": _operation(info, "list", "list", list_ref, scope),
            "post": _operation(info, "post", "create", ref, scope),
            "parameters": scope_params,
        }
        paths[f"{collection}/{{name}}"] = {
            "get": _operation(info, "get", "read", ref, scope),
            "put": _operation(info, "put", "replace", ref, scope),
            "patch": _operation(info, "patch", "patch", ref, scope),
            "delete": _operation(info, "delete", "delete", ref, scope),
            "parameters": [_path_param("name"), *scope_params],
        }
    trim_to(schemas, minor)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
        },
    }

"""The protobuf `/openapi/v2` document kubectl 1.27 and 1.28 insist on before create/apply with validation.

Those versions read only OpenAPI v2 for validation, and only as gnostic's `openapi_v2.Document` protobuf
(a JSON body breaks them). This document exists so kubectl finds, for each kind, a PATCH operation
tagged with the GVK that lists the `fieldValidation` query parameter; kubectl then validates on the
server. Field numbers follow gnostic-models `openapiv2/OpenAPIv2.proto`.

It carries no schema definitions, on purpose. Every kubectl from 1.27 on renders `kubectl explain` from
OpenAPI v3 (`openapi.py`, with the real schemas); 1.27 and 1.28 fetch and parse this document too when
explaining, so it must stay well-formed, but do not render from it. `kubectl apply`, on the other hand,
builds its strategic-merge patch from v2 definitions whenever it finds the kind there (1.27/1.28 always,
later versions when the v3 PATCH lists no strategic merge): schemas derived from the client's models
know no merge keys, so lists such as `containers` would be replaced instead of merged by name. Without
definitions kubectl uses its compiled-in types, which know them. The cost: `kubectl explain
--output=plaintext-openapiv2` answers "couldn't find resource", as it did before.
"""

from __future__ import annotations

from tenantgpu.apiserver._protowire import field_bytes, field_text, field_varint
from tenantgpu.apiserver.openapi import KindSchemaInfo

__all__ = ["OPENAPI_V2_CONTENT_TYPE", "openapi_v2_protobuf"]

# kubectl asks with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, but Go's mime
# parser refuses the `@`, so the answer must carry the dotted form kube-apiserver uses.
OPENAPI_V2_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

# Field numbers of the gnostic messages used below.
_DOCUMENT_SWAGGER, _DOCUMENT_INFO, _DOCUMENT_PATHS = 1, 2, 8
_INFO_TITLE, _INFO_VERSION = 1, 2
_PATHS_PATH = 2
_NAMED_NAME, _NAMED_VALUE = 1, 2
_PATH_ITEM_OPERATIONS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}
_OPERATION_DESCRIPTION, _OPERATION_ID, _OPERATION_CONSUMES = 3, 5, 7
_OPERATION_PARAMETERS, _OPERATION_RESPONSES, _OPERATION_EXTENSIONS = 8, 9, 13
_PARAMETERS_ITEM_PARAMETER = 1
_PARAMETER_NON_BODY = 2
_NON_BODY_QUERY = 3
_QUERY_IN, _QUERY_DESCRIPTION, _QUERY_NAME, _QUERY_TYPE, _QUERY_UNIQUE_ITEMS = 2, 3, 4, 6, 20
_ANY_YAML = 2
_RESPONSES_CODE = 1
_RESPONSE_VALUE_RESPONSE = 1
_RESPONSE_DESCRIPTION = 1

_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]


def _named(name: str, value: bytes) -> bytes:
    return field_text(_NAMED_NAME, name) + field_bytes(_NAMED_VALUE, value)


def _query_parameter(name: str, description: str) -> bytes:
    """A ParametersItem holding one string query parameter."""
    query = (
        field_text(_QUERY_IN, "query")
        + field_text(_QUERY_DESCRIPTION, description)
        + field_text(_QUERY_NAME, name)
        + field_text(_QUERY_TYPE, "string")
        + field_varint(_QUERY_UNIQUE_ITEMS, 1)
    )
    parameter = field_bytes(_PARAMETER_NON_BODY, field_bytes(_NON_BODY_QUERY, query))
    return field_bytes(_PARAMETERS_ITEM_PARAMETER, parameter)


_WRITE_PARAMETERS = [
    _query_parameter("dryRun", "When present, indicates that modifications should not be persisted."),
    _query_parameter("fieldManager", "fieldManager names the actor making these changes."),
    _query_parameter(
        "fieldValidation",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown "
        "or duplicate fields. Valid values are: Ignore, Warn, Strict.",
    ),
]


def _gvk_yaml(info: KindSchemaInfo) -> str:
    # A quoted group keeps the core group an empty string rather than YAML null.
    return f'group: "{info.group}"\nkind: {info.kind}\nversion: {info.version}\n'


def _operation(info: KindSchemaInfo, action: str, verb: str) -> bytes:
    response = field_bytes(_RESPONSE_VALUE_RESPONSE, field_text(_RESPONSE_DESCRIPTION, "OK"))
    responses = field_bytes(_RESPONSES_CODE, _named("200", response))
    extensions = field_bytes(
        _OPERATION_EXTENSIONS, _named("x-kubernetes-action", field_text(_ANY_YAML, f"{action}\n"))
    ) + field_bytes(
        _OPERATION_EXTENSIONS,
        _named("x-kubernetes-group-version-kind", field_text(_ANY_YAML, _gvk_yaml(info))),
    )
    body = field_text(_OPERATION_DESCRIPTION, f"{verb} {info.kind}") + field_text(
        _OPERATION_ID, f"{verb}{info.kind}"
    )
    if action == "patch":
        body += b"".join(field_text(_OPERATION_CONSUMES, media) for media in _PATCH_TYPES)
    if action in ("post", "put", "patch"):
        body += b"".join(field_bytes(_OPERATION_PARAMETERS, item) for item in _WRITE_PARAMETERS)
    return body + field_bytes(_OPERATION_RESPONSES, responses) + extensions


def _path(name: str, operations: dict[str, bytes]) -> bytes:
    item = b"".join(field_bytes(_PATH_ITEM_OPERATIONS[verb], op) for verb, op in operations.items())
    return field_bytes(_PATHS_PATH, _named(name, item))


def openapi_v2_protobuf(kinds: list[KindSchemaInfo], *, version: str = "v1.30.0") -> bytes:
    """The `/openapi/v2` body (serve it as OPENAPI_V2_CONTENT_TYPE) covering `kinds` of any group."""
    paths = b""
    for info in kinds:
        prefix = "/api/" + info.version if info.group == "" else f"/apis/{info.group}/{info.version}"
        scope = "/namespaces/{namespace}" if info.namespaced else ""
        collection = f"{prefix}{scope}/{info.plural}"
        paths += _path(
            collection,
            {"get": _operation(info, "list", "list"), "post": _operation(info, "post", "create")},
        )
        paths += _path(
            f"{collection}/{{name}}",
            {
                "get": _operation(info, "get", "read"),
                "put": _operation(info, "put", "replace"),
                "delete": _operation(info, "delete", "delete"),
                "patch": _operation(info, "patch", "patch"),
            },
        )
    info_bytes = field_text(_INFO_TITLE, "Kubernetes") + field_text(_INFO_VERSION, version)
    return (
        field_text(_DOCUMENT_SWAGGER, "2.0")
        + field_bytes(_DOCUMENT_INFO, info_bytes)
        + field_bytes(_DOCUMENT_PATHS, paths)
    )

"""The protobuf SelfSubjectAccessReview that kubectl 1.32+ posts for `auth can-i`, read and written by hand.

The body is kube's protobuf envelope: the magic `k8s\\x00`, then a `runtime.Unknown` message
{1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType} whose `raw` holds the
SelfSubjectAccessReview {1: metadata, 2: spec, 3: status}. Field numbers follow
`k8s.io/api/authorization/v1/generated.proto`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tenantgpu.apiserver._protowire import (
    BYTES,
    VARINT,
    ProtobufError,
    field_bytes,
    field_text,
    field_varint,
    fields,
    text,
)

__all__ = [
    "PROTOBUF_MAGIC",
    "ProtobufError",
    "decode_self_subject_access_review",
    "decode_unknown",
    "encode_self_subject_access_review_response",
]

PROTOBUF_MAGIC = b"k8s\x00"
_SSAR_API_VERSION = "authorization.k8s.io/v1"
_SSAR_KIND = "SelfSubjectAccessReview"


def _strings(data: bytes, names: Mapping[int, str]) -> dict[str, str]:
    """A message of plain string fields, keeping the non-empty ones under their JSON names."""
    out: dict[str, str] = {}
    for number, _, value in fields(data):
        if number in names:
            decoded = text(value)
            if decoded:
                out[names[number]] = decoded
    return out


# --- the envelope -------------------------------------------------------------------------------------


def decode_unknown(body: bytes) -> tuple[str, str, bytes]:
    """Unwrap kube's protobuf envelope into (apiVersion, kind, raw message bytes)."""
    if not body.startswith(PROTOBUF_MAGIC):
        raise ProtobufError("body does not start with the k8s protobuf magic")
    api_version = kind = ""
    raw = b""
    for number, wire, value in fields(body[len(PROTOBUF_MAGIC) :]):
        if number == 1 and wire == BYTES:
            meta = _strings(value, {1: "apiVersion", 2: "kind"})
            api_version, kind = meta.get("apiVersion", ""), meta.get("kind", "")
        elif number == 2 and wire == BYTES:
            raw = value
        elif number == 3 and wire == BYTES and value:
            raise ProtobufError(f"unsupported content encoding {text(value)!r}")
    return api_version, kind, raw


def _encode_unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field_text(1, api_version) + field_text(2, kind)
    return (
        PROTOBUF_MAGIC
        + field_bytes(1, type_meta)
        + field_bytes(2, raw)
        + field_text(3, "")
        + field_text(4, "")
    )


# --- SelfSubjectAccessReview --------------------------------------------------------------------------

_RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}
_OBJECT_META_STRINGS = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}


def _decode_time(data: bytes) -> str | None:
    seconds = 0
    for number, wire, value in fields(data):
        if number == 1 and wire == VARINT:
            seconds = value - (1 << 64) if value >= 1 << 63 else value
    if seconds == 0:
        return None  # Go's zero time is what kubectl sends for an unset creationTimestamp
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decode_map_entry(data: bytes) -> tuple[str, str]:
    entry = _strings(data, {1: "key", 2: "value"})
    return entry.get("key", ""), entry.get("value", "")


def _decode_metadata(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for number, wire, value in fields(data):
        if wire == BYTES and number in _OBJECT_META_STRINGS:
            decoded = text(value)
            if decoded:
                meta[_OBJECT_META_STRINGS[number]] = decoded
        elif number == 8 and wire == BYTES:
            meta["creationTimestamp"] = _decode_time(value)
        elif number in (11, 12) and wire == BYTES:
            key, item = _decode_map_entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = item
    meta.setdefault("creationTimestamp", None)
    return meta


def _decode_requirements(data: bytes) -> dict[str, Any]:
    requirement: dict[str, Any] = {}
    for number, _, value in fields(data):
        if number == 1:
            requirement["key"] = text(value)
        elif number == 2:
            requirement["operator"] = text(value)
        elif number == 3:
            requirement.setdefault("values", []).append(text(value))
    return requirement


def _decode_selector(data: bytes) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    for number, _, value in fields(data):
        if number == 1 and value:
            selector["rawSelector"] = text(value)
        elif number == 2:
            selector.setdefault("requirements", []).append(_decode_requirements(value))
    return selector


def _decode_resource_attributes(data: bytes) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for number, wire, value in fields(data):
        if wire != BYTES:
            continue
        if number in _RESOURCE_ATTRIBUTES:
            decoded = text(value)
            if decoded:
                attributes[_RESOURCE_ATTRIBUTES[number]] = decoded
        elif number == 8:
            attributes["fieldSelector"] = _decode_selector(value)
        elif number == 9:
            attributes["labelSelector"] = _decode_selector(value)
    return attributes


def _decode_status(data: bytes) -> dict[str, Any]:
    status: dict[str, Any] = {"allowed": False}
    for number, wire, value in fields(data):
        if number == 1 and wire == VARINT:
            status["allowed"] = bool(value)
        elif number == 4 and wire == VARINT and value:
            status["denied"] = True
        elif number == 2 and wire == BYTES and value:
            status["reason"] = text(value)
        elif number == 3 and wire == BYTES and value:
            status["evaluationError"] = text(value)
    return status


def decode_self_subject_access_review(body: bytes) -> dict[str, Any]:
    """The review as the JSON object kubectl ≤1.31 would have posted.

    Raises ProtobufError when the body is not a protobuf SelfSubjectAccessReview.
    """
    api_version, kind, raw = decode_unknown(body)
    if kind != _SSAR_KIND or api_version != _SSAR_API_VERSION:
        raise ProtobufError(
            f"expected {_SSAR_API_VERSION} {_SSAR_KIND}, got {api_version or '?'} {kind or '?'}"
        )
    review: dict[str, Any] = {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": None},
    }
    spec: dict[str, Any] = {}
    for number, wire, value in fields(raw):
        if wire != BYTES:
            continue
        if number == 1:
            review["metadata"] = _decode_metadata(value)
        elif number == 2:
            for spec_number, spec_wire, spec_value in fields(value):
                if spec_number == 1 and spec_wire == BYTES:
                    spec["resourceAttributes"] = _decode_resource_attributes(spec_value)
                elif spec_number == 2 and spec_wire == BYTES:
                    spec["nonResourceAttributes"] = _strings(spec_value, _NON_RESOURCE_ATTRIBUTES)
        elif number == 3:
            review["status"] = _decode_status(value)
    review["spec"] = spec
    return review


def _encode_strings(values: Mapping[str, Any], names: Mapping[int, str]) -> bytes:
    return b"".join(field_text(number, str(values.get(name) or "")) for number, name in sorted(names.items()))


def _encode_selector(selector: Mapping[str, Any]) -> bytes:
    out = field_text(1, str(selector.get("rawSelector") or ""))
    for requirement in selector.get("requirements") or []:
        body = field_text(1, str(requirement.get("key") or "")) + field_text(
            2, str(requirement.get("operator") or "")
        )
        body += b"".join(field_text(3, str(v)) for v in requirement.get("values") or [])
        out += field_bytes(2, body)
    return out


def encode_self_subject_access_review_response(review: Mapping[str, Any]) -> bytes:
    """The review (with its status) in kube's protobuf envelope, for clients that want protobuf back.

    kubectl accepts a JSON answer too; this is for servers that honour `Accept` strictly.
    """
    meta = review.get("metadata") or {}
    meta_bytes = b"".join(
        field_text(number, str(meta.get(name) or "")) for number, name in sorted(_OBJECT_META_STRINGS.items())
    )
    meta_bytes += field_bytes(8, b"")
    spec = review.get("spec") or {}
    spec_bytes = b""
    resource = spec.get("resourceAttributes")
    if resource is not None:
        body = _encode_strings(resource, _RESOURCE_ATTRIBUTES)
        if resource.get("fieldSelector") is not None:
            body += field_bytes(8, _encode_selector(resource["fieldSelector"]))
        if resource.get("labelSelector") is not None:
            body += field_bytes(9, _encode_selector(resource["labelSelector"]))
        spec_bytes += field_bytes(1, body)
    non_resource = spec.get("nonResourceAttributes")
    if non_resource is not None:
        spec_bytes += field_bytes(2, _encode_strings(non_resource, _NON_RESOURCE_ATTRIBUTES))
    status = review.get("status") or {}
    status_bytes = (
        field_varint(1, 1 if status.get("allowed") else 0)
        + field_text(2, str(status.get("reason") or ""))
        + field_text(3, str(status.get("evaluationError") or ""))
        + field_varint(4, 1 if status.get("denied") else 0)
    )
    raw = field_bytes(1, meta_bytes) + field_bytes(2, spec_bytes) + field_bytes(3, status_bytes)
    return _encode_unknown(_SSAR_API_VERSION, _SSAR_KIND, raw)


def decode_self_subject_rules_review(body: bytes) -> dict[str, Any]:
    """The SelfSubjectRulesReview {1: metadata, 2: spec {1: namespace}} that kubectl posts in protobuf
    for `auth can-i --list`, as its JSON form."""
    api_version, kind, raw = decode_unknown(body)
    if kind != "SelfSubjectRulesReview" or api_version != _SSAR_API_VERSION:
        raise ProtobufError(
            f"expected {_SSAR_API_VERSION} SelfSubjectRulesReview, got {api_version or '?'} {kind or '?'}"
        )
    review: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "metadata": {}, "spec": {}}
    for number, wire, value in fields(raw):
        if wire != BYTES:
            continue
        if number == 1:
            review["metadata"] = _decode_metadata(value)
        elif number == 2:
            review["spec"] = _strings(value, {1: "namespace"})
    return review

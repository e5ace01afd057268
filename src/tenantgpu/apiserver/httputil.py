"""HTTP plumbing shared by the API server's handlers: media types, responses, query parsing, targets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.kinds import Kind
from tenantgpu.apiserver.watchcache import encode

Obj = dict[str, Any]

JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
ACCEPTED_BODY_TYPES = f"{JSON}, application/yaml, {PROTOBUF}"
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
ANONYMOUS_PATHS = ("/healthz", "/livez", "/readyz", "/version")
SUCCESS_CREATED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


@dataclass(frozen=True)
class Target:
    """A parsed resource request path."""

    kind: Kind
    namespace: str
    name: str
    subresource: str


def json_response(body: Any, status: int = 200, content_type: str = JSON) -> web.Response:
    data = body if isinstance(body, bytes) else encode(body)
    return web.Response(body=data, status=status, headers={"Content-Type": content_type})


def status_response(error: errors.APIError) -> web.Response:
    return json_response(error.status(), error.code)


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def header_list(request: web.BaseRequest, name: str) -> list[str]:
    """A header's values, each split at commas and trimmed, as kube reads `X-Stream-Protocol-Version`
    (httpstream's commaSeparatedHeaderValues) and a WebSocket's offered subprotocols."""
    return [part.strip() for value in request.headers.getall(name, []) for part in value.split(",")]


def query_flag(query: Any, name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def query_int(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise errors.bad_request(f"invalid value for {name}: {value!r}") from exc


def spec_of(body: Any, kind: str) -> Obj:
    """The `spec` of a request body that must be an object with an object spec (else 400)."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise errors.bad_request(f"{kind} must be a JSON object")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise errors.bad_request(f"{kind}.spec must be an object")
    return spec


def get_path(obj: Obj, path: Sequence[str]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def set_path(obj: Obj, path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value

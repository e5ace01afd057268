"""Kubernetes `Status` errors: the reason, code and message shapes kube-apiserver returns."""

from __future__ import annotations

import json
import re
from typing import Any


class APIError(Exception):
    """An error the API answers with a `Status` object instead of the requested resource."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The `Status` object, as kubectl and client-go expect it."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def qualified(resource: str, group: str) -> str:
    """`pods` for the core group, `leases.coordination.k8s.io` otherwise, as in kube's messages."""
    return f"{resource}.{group}" if group else resource


def _details(name: str, resource: str, group: str) -> dict[str, Any]:
    # kube's StatusDetails omits an empty name (a list's refusal names no object)
    details: dict[str, Any] = {"name": name, "kind": resource} if name else {"kind": resource}
    if group:
        details["group"] = group
    return details


def not_found(resource: str, name: str, group: str = "") -> APIError:
    return APIError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(name, resource, group)
    )


def already_exists(resource: str, name: str, group: str = "") -> APIError:
    return APIError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        _details(name, resource, group),
    )


def conflict(resource: str, name: str, group: str = "", why: str = "") -> APIError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return APIError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(name, resource, group),
    )


def invalid(kind: str, name: str, group: str, causes: list[dict[str, str]]) -> APIError:
    """422 Invalid; each cause is `{"reason", "message", "field"}` as in `metav1.StatusCause`."""
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": causes}
    if group:
        details["group"] = group
    subject = f"{kind}.{group}" if group else kind
    return APIError(422, "Invalid", f"{subject} {json.dumps(name)} is invalid: {summary}", details)


# kube 1.32 reworded field.TooLong (`must have at most N bytes`) and field.TooLongMaxLength (`may not be
# longer than N`, a custom resource's maxLength) alike as `may not be more than N bytes` (apimachinery
# v0.31.0 against v0.32.0, util/validation/field/errors.go). Causes are written in the older wording.
_TOO_LONG_BEFORE_132 = re.compile(r"Too long: (?:must have at most (\d+) bytes|may not be longer than (\d+))")
_REWORDED_MINOR = 32


def worded_for(error: APIError, minor: int | None) -> APIError:
    """`error` in the wording of the tenant's release (None: the newest): an Invalid status's too-long
    causes, and its message, as that release's kube-apiserver words them."""
    if error.reason != "Invalid" or not error.details or (minor is not None and minor < _REWORDED_MINOR):
        return error
    causes = error.details.get("causes") or []
    if not any(c.get("reason") == "FieldValueTooLong" for c in causes):
        return error
    message, reworded = error.message, []
    for cause in causes:
        text = cause.get("message", "")
        if cause.get("reason") == "FieldValueTooLong" and (found := _TOO_LONG_BEFORE_132.fullmatch(text)):
            new = f"Too long: may not be more than {found.group(1) or found.group(2)} bytes"
            field = cause.get("field")
            message = message.replace(
                f"{field}: {text}" if field else text, f"{field}: {new}" if field else new, 1
            )
            cause = {**cause, "message": new}
        reworded.append(cause)
    return APIError(error.code, error.reason, message, {**error.details, "causes": reworded})


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def unauthorized() -> APIError:
    return APIError(401, "Unauthorized", "Unauthorized")


def forbidden_request(
    user: str,
    verb: str,
    resource: str,
    group: str,
    namespace: str,
    name: str,
    subresource: str = "",
    reason: str = "",
) -> APIError:
    """kube's answer to a request its authorizer did not allow; the authorizer's reason, if it gave one
    (RBAC: a binding to a missing role), follows the message."""
    shown = f"{resource}/{subresource}" if subresource else resource
    what = f'cannot {verb} resource "{shown}" in API group "{group}"'
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    subject = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return APIError(
        403,
        "Forbidden",
        f'{subject} is forbidden: User "{user}" {what}{where}' + (f": {reason}" if reason else ""),
        _details(name, resource, group),
    )


def forbidden_path(user: str, verb: str, path: str, reason: str = "") -> APIError:
    """kube's answer to a non-resource request its authorizer did not allow."""
    message = f'forbidden: User "{user}" cannot {verb} path "{path}"'
    return APIError(403, "Forbidden", message + (f": {reason}" if reason else ""), {})


def forbidden(resource: str, name: str, group: str, why: str) -> APIError:
    subject = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return APIError(403, "Forbidden", f"{subject} is forbidden: {why}", _details(name, resource, group))


def method_not_allowed(why: str = "") -> APIError:
    message = "the server does not allow this method on the requested resource"
    return APIError(405, "MethodNotAllowed", f"{message}: {why}" if why else message, {})


def not_acceptable(types: str) -> APIError:
    return APIError(406, "NotAcceptable", f"only the following media types are accepted: {types}")


def unsupported_media_type(accepted: str) -> APIError:
    """kube's 415 for a body (or a patch) of a media type the resource does not take."""
    return APIError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {accepted}",
    )


def too_large(limit: int) -> APIError:
    return APIError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def expired(message: str) -> APIError:
    return APIError(410, "Expired", message)


def unknown_path() -> APIError:
    # kube's generic server response carries empty details; kubectl debug reads them to tell a missing
    # subresource from a missing pod (and crashes when they are absent).
    return APIError(404, "NotFound", "the server could not find the requested resource", {})


def internal(message: str) -> APIError:
    return APIError(
        500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]}
    )


def service_unavailable(message: str) -> APIError:
    return APIError(503, "ServiceUnavailable", message)


def timeout(message: str) -> APIError:
    return APIError(504, "Timeout", message)

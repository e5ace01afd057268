"""Field errors as kube's `field.ErrorList` renders them: one cause of an Invalid status each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tenantgpu.goquote import go_quote


@dataclass(frozen=True)
class Cause:
    """One reason an object is invalid, as it appears in `Status.details.causes`."""

    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, ...
    message: str  # the part after the field: `Required value`, `Invalid value: "x": ...`
    field: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def to_status_cause(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


# kube's field.NewPath(""), the whole object: a path of one nameless element prints as `[]`.
ROOT = "[]"


def show(value: Any) -> str:
    """Render a bad value the way field.Invalid does: strings as `%q` quotes them, numbers bare."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), path)


def invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {show(value)}: {detail}", path)


def not_supported(path: str, value: Any, supported: list[str]) -> Cause:
    listed = ", ".join(json.dumps(s) for s in supported)
    return Cause(
        "FieldValueNotSupported", f"Unsupported value: {show(value)}: supported values: {listed}", path
    )


def duplicate(path: str, value: Any) -> Cause:
    return Cause("FieldValueDuplicate", f"Duplicate value: {show(value)}", path)


def forbidden(path: str, detail: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {detail}", path)


def not_found(path: str, value: Any) -> Cause:
    return Cause("FieldValueNotFound", f"Not found: {show(value)}", path)


def too_long(path: str, limit: int) -> Cause:
    return Cause("FieldValueTooLong", f"Too long: must have at most {limit} bytes", path)


_ABSENT = "<absent>"


def differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """The leaf paths where two JSON values differ, with the old and new value at each (kube appends a
    Go diff of the structs to an immutability error; these name the changed fields instead)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            found.extend(differences(old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}.{key}"))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            d
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if old == new else [(path, old, new)]


def diff_lines(old: Any, new: Any, path: str, limit: int = 10) -> str:
    """The changed fields, old value then new, one pair of lines each."""
    return "\n".join(
        f"-  {at}: {show(was)}\n+  {at}: {show(now)}" for at, was, now in differences(old, new, path)[:limit]
    )

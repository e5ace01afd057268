"""What apiextensions-apiserver does with a custom resource's structural schema before storing it.

A custom resource is decoded without Go structs, so its schema does their work: a field the schema
lacks is pruned (named in the `Warning` header, or refusing the write with `fieldValidation=Strict`, as
for a built-in kind), and a field of the wrong JSON type is an `Invalid` (422) cause,
`spec.x in body must be of type integer: "string"`, where a built-in kind's decoder answers 400. The
schemas given here are self-contained (no `$ref`), like a CRD's `openAPIV3Schema`.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Violation", "json_schema_type", "prune", "prune_at", "violations"]

Schema = Mapping[str, Any]
Path = tuple[str | int, ...]
# A CR's root fields every kind has; `metadata` is pruned against ObjectMeta's own schema.
_ROOT_FIELDS = frozenset({"apiVersion", "kind"})


def field_path(path: Iterable[str | int]) -> str:
    """kube's way of naming a field: `spec.containers[0].image`."""
    text = ""
    for part in path:
        text = f"{text}[{part}]" if isinstance(part, int) else (f"{text}.{part}" if text else part)
    return text


def _field_schema(schema: Schema, name: str) -> Schema | None:
    """The schema of an object's field `name`, or None when the object has no such field."""
    properties = schema.get("properties")
    if properties is not None and name in properties:
        return properties[name]
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra
    if schema.get("x-kubernetes-preserve-unknown-fields") or extra is True:
        return {"x-kubernetes-preserve-unknown-fields": True}
    return None


def prune(schema: Schema, value: Any, path: Path = (), *, metadata: Schema | None = None) -> list[str]:
    """Removes, in place, the fields of `value` its schema lacks, and names them in document order.

    At the root (`path` empty) `apiVersion` and `kind` are kept and `metadata` is pruned against the
    `metadata` schema given (ObjectMeta), as apiextensions-apiserver treats ObjectMeta apart. A field
    set to null is removed without being named: in a merge patch it deletes, and deleting a field the
    schema lacks changes nothing.
    """
    found: list[str] = []
    _prune(schema, value, list(path), found, metadata if not path else None)
    return found


def _prune(
    schema: Schema, value: Any, stack: list[str | int], found: list[str], metadata: Schema | None
) -> None:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return
        unknown: list[str] = []
        for name, item in value.items():
            if metadata is not None and name in _ROOT_FIELDS:
                continue
            sub = metadata if metadata is not None and name == "metadata" else _field_schema(schema, name)
            if sub is None:
                unknown.append(name)
                if item is not None:
                    found.append(field_path([*stack, name]))
            elif item is not None:
                stack.append(name)
                _prune(sub, item, stack, found, None)
                stack.pop()
        for name in unknown:
            del value[name]
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            stack.append(i)
            _prune(schema["items"], item, stack, found, None)
            stack.pop()


def prune_at(
    schema: Schema, pointer: list[str], value: Any, *, metadata: Schema | None = None
) -> tuple[bool, list[str]]:
    """For a JSON patch operation: whether the field its path names exists, and the unknown fields of its
    value (removed from it)."""
    node: Schema | None = schema
    stack: list[str | int] = []
    for depth, segment in enumerate(pointer):
        assert node is not None
        if node.get("type") == "array" or "items" in node:
            node = node.get("items") or {}
            stack.append(int(segment) if segment.isdigit() else segment)
            continue
        if depth == 0 and segment in _ROOT_FIELDS:
            return True, []
        sub = metadata if depth == 0 and segment == "metadata" and metadata is not None else None
        node = sub or _field_schema(node, segment)
        if node is None:
            return False, [field_path([*stack, segment])]
        stack.append(segment)
        if node.get("x-kubernetes-preserve-unknown-fields") and "properties" not in node:
            return True, []
    found: list[str] = []
    if value is not None and node is not None:
        _prune(node, value, stack, found, metadata if not pointer else None)
    return True, found


def json_schema_type(value: Any) -> str:
    """The JSON type a structural schema sees (`integer` for whole numbers, even written `2.0`)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _accepts(wanted: str, found: str) -> bool:
    return wanted == found or (wanted == "number" and found == "integer")


@dataclass(frozen=True)
class Violation:
    """One way a value breaks its schema, as kube-openapi's validator reports it.

    `code` is `type` (`value` the JSON type found, `limit` the one wanted), `required` (`value` None),
    `enum` (`limit` the values allowed), `format` (`limit` the format, such as `byte`), `pattern`
    (`limit` the regular expression), or a bound: `minimum`, `maximum`, `minItems`, `maxItems`,
    `minLength`, `maxLength` (`value` the value, or the count for items, `limit` the bound).
    """

    code: str
    path: str
    value: Any = None
    limit: Any = None


def violations(schema: Schema, value: Any, path: Path = ()) -> list[Violation]:
    """Everything in `value` its schema refuses. Beneath a field of the wrong type nothing is looked at;
    fields the schema lacks are not looked at either (pruning removes them first)."""
    found: list[Violation] = []
    _check(schema, value, list(path), found)
    return found


def _wanted_type(schema: Schema) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return "integer,string"
    return schema.get("type")


def _check(schema: Schema, value: Any, stack: list[str | int], found: list[Violation]) -> None:
    if value is None:
        return  # nullable, or a null apiextensions-apiserver drops before validating
    kind = json_schema_type(value)
    wanted = _wanted_type(schema)
    if wanted is not None and not any(_accepts(w, kind) for w in wanted.split(",")):
        found.append(Violation("type", field_path(stack), kind, wanted))
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        found.append(Violation("enum", field_path(stack), value, list(enum)))
    if kind in ("integer", "number"):
        _bound(schema, "minimum", value, value < schema.get("minimum", value), stack, found)
        _bound(schema, "maximum", value, value > schema.get("maximum", value), stack, found)
    elif kind == "string":
        fmt = schema.get("format")
        if fmt in _FORMATS and not _FORMATS[fmt](value):
            found.append(Violation("format", field_path(stack), value, fmt))
        _bound(schema, "minLength", value, len(value) < schema.get("minLength", 0), stack, found)
        _bound(schema, "maxLength", value, len(value) > schema.get("maxLength", len(value)), stack, found)
        pattern = schema.get("pattern")
        if pattern is not None and not go_regexp(pattern).search(value):
            found.append(Violation("pattern", field_path(stack), value, pattern))
    elif kind == "array":
        _bound(schema, "minItems", len(value), len(value) < schema.get("minItems", 0), stack, found)
        _bound(schema, "maxItems", len(value), len(value) > schema.get("maxItems", len(value)), stack, found)
        if isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                stack.append(i)
                _check(schema["items"], item, stack, found)
                stack.pop()
    elif kind == "object":
        for name in schema.get("required") or ():
            if value.get(name) is None and not _is_root_meta(stack, name):
                found.append(Violation("required", field_path([*stack, name])))
        for name, item in value.items():
            sub = _field_schema(schema, name)
            if sub is not None and not _is_root_meta(stack, name):
                stack.append(name)
                _check(sub, item, stack, found)
                stack.pop()


def _bound(
    schema: Schema, code: str, value: Any, broken: bool, stack: list[str | int], found: list[Violation]
) -> None:
    if broken:
        found.append(Violation(code, field_path(stack), value, schema[code]))


def _is_root_meta(stack: list[str | int], name: str) -> bool:
    """The root's apiVersion, kind and metadata, which ObjectMeta's own checks cover."""
    return not stack and name in ("apiVersion", "kind", "metadata")


@functools.cache
def go_regexp(pattern: str) -> re.Pattern[str]:
    """A schema's `pattern` as kube-openapi matches it (Go's `regexp.MatchString`: found anywhere unless
    anchored). Go's `$` (outside a character class) matches only at the very end, where Python's also
    matches before a final newline, so it becomes `\\Z`."""
    out: list[str] = []
    in_class = escaped = False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "$":
            out.append("\\Z")
            continue
        out.append(ch)
    return re.compile("".join(out))


_TIME_OF_DAY = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z")
_FULL_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")


def _is_date_time(text: str) -> bool:
    """strfmt's IsDateTime: a calendar date, `t` (any case), and a time of day with a zone (RFC 3339)."""
    parts = text.lower().split("t")
    if len(text) < 4 or len(parts) < 2:
        return False
    date = _FULL_DATE.match(parts[0])
    clock = _TIME_OF_DAY.match(parts[1])
    if date is None or clock is None:
        return False
    try:
        datetime.date(int(date[1]), int(date[2]), int(date[3]))
    except ValueError:
        return False
    return clock[1] <= "23" and clock[2] <= "59" and clock[3] <= "59"


def _is_base64(text: str) -> bool:
    """strfmt's IsBase64: Go's standard encoding with padding, which skips line breaks."""
    try:
        base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


# The string formats of kube-openapi's registry that Kamaji's schemas use; other formats (int32,
# int64 on integers) are not checked, as kube does not check them.
_FORMATS: Mapping[str, Callable[[str], bool]] = {"date-time": _is_date_time, "byte": _is_base64}

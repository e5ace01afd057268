"""Stand-ins for the pure helpers (patch, selectors, tables, validation) until their modules land."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any


class PatchError(ValueError):
    pass


class SelectorError(ValueError):
    pass


def apply_merge_patch(obj: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def apply_strategic_merge_patch(obj: Any, patch: Any, kind: str) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    cleaned = {k: v for k, v in patch.items() if not k.startswith("$")}
    result = dict(obj) if isinstance(obj, dict) else {}
    for key, value in cleaned.items():
        if value is None:
            result.pop(key, None)
        elif (
            isinstance(value, list)
            and isinstance(result.get(key), list)
            and all(isinstance(v, dict) and "name" in v for v in value + result[key])
        ):
            merged = {item["name"]: item for item in result[key]}
            for item in value:
                merged[item["name"]] = apply_strategic_merge_patch(merged.get(item["name"], {}), item, kind)
            result[key] = list(merged.values())
        else:
            result[key] = apply_strategic_merge_patch(result.get(key), value, kind)
    return result


def apply_json_patch(obj: Any, ops: Any) -> Any:
    doc = copy.deepcopy(obj)
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list")
    for op in ops:
        path = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in path[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = path[-1]
        kind = op["op"]
        if kind in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(index, op["value"])
                else:
                    parent[index] = op["value"]
            else:
                parent[last] = op["value"]
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        elif kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op["value"]:
                raise PatchError("test failed")
        else:
            raise PatchError(f"unsupported op {kind}")
    return doc


class _Always:
    def matches(self, _: Any) -> bool:
        return True


def _label_requirements(text: str) -> list[tuple[str, str, str]]:
    reqs = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            reqs.append((k.strip(), "!=", v.strip()))
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            reqs.append((k.strip(), "=", v.strip()))
        elif term.startswith("!"):
            reqs.append((term[1:], "!", ""))
        else:
            reqs.append((term, "exists", ""))
    return reqs


class _LabelSelector:
    def __init__(self, text: str) -> None:
        self._reqs = _label_requirements(text)

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        for key, op, value in self._reqs:
            if op == "=" and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
            if op == "exists" and key not in labels:
                return False
            if op == "!" and key in labels:
                return False
        return True


def field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


class _FieldSelector:
    def __init__(self, text: str) -> None:
        self._reqs = [r for r in _label_requirements(text) if r[1] in ("=", "!=")]

    def matches(self, obj: dict[str, Any]) -> bool:
        for key, op, value in self._reqs:
            actual = field_value(obj, key)
            if (op == "=") != (actual == value):
                return False
        return True


def parse_label_selector(text: str) -> Any:
    return _LabelSelector(text)


def parse_field_selector(text: str) -> Any:
    return _FieldSelector(text)


def match_selector_object(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def to_table(
    kind: str, objects: list[dict[str, Any]], *, include_object: str, now: datetime
) -> dict[str, Any]:
    rows = []
    for obj in objects:
        meta = obj.get("metadata", {})
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        rows.append({"cells": [meta.get("name", ""), "<unknown>"], "object": partial})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0},
        ],
        "rows": rows,
    }


def validate(kind: str, obj: dict[str, Any]) -> list[Any]:
    return []


def default(kind: str, obj: dict[str, Any]) -> None:
    return None

"""Stand-ins for the pure helpers (patch, tables) until their modules land."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any


class PatchError(ValueError):
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

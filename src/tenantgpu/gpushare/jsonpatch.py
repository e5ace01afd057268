"""RFC 6902 patches between two JSON documents (what a mutating webhook returns)."""

from __future__ import annotations

from typing import Any


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """Operations that turn `before` into `after`: objects key by key, equal-length lists item by item."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in after.items():
            child = f"{path}/{_escape(key)}"
            if key not in before:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                ops.extend(diff(before[key], value, child))
        return ops
    if isinstance(before, list) and isinstance(after, list):
        if len(before) == len(after):
            ops = []
            for i, (b, a) in enumerate(zip(before, after, strict=True)):
                ops.extend(diff(b, a, f"{path}/{i}"))
            return ops
        if len(after) > len(before) and after[: len(before)] == before:
            return [{"op": "add", "path": f"{path}/-", "value": v} for v in after[len(before) :]]
    return [{"op": "replace", "path": path, "value": after}]


def apply(document: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply add/replace/remove operations (enough to check our own patches)."""
    import copy

    doc = copy.deepcopy(document)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if not tokens:
            doc = op.get("value")
            continue
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        if isinstance(parent, list):
            if op["op"] == "remove":
                parent.pop(int(last))
            elif last == "-":
                parent.append(op["value"])
            elif op["op"] == "add":
                parent.insert(int(last), op["value"])
            else:
                parent[int(last)] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc

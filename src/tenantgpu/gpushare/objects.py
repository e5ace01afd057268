"""Kubernetes objects from YAML or JSON text: one object, several YAML documents, or a `List`; the
fields the planner reads are checked for shape here, where the text comes in."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tenantgpu.gpushare.shape import object_problem


class ObjectsError(ValueError):
    """Text that does not hold Kubernetes objects."""


def load_objects(text: str, source: str = "input") -> list[dict[str, Any]]:
    """Every object in the text, `List`s (and `*List` kinds) flattened, in order; empty documents skipped."""
    try:
        if text.lstrip().startswith(("{", "[")):
            documents: list[Any] = [json.loads(text)]
        else:
            documents = list(yaml.safe_load_all(text))
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ObjectsError(f"{source}: not valid YAML or JSON ({first})") from exc
    objects: list[dict[str, Any]] = []
    for doc in documents:
        _collect(doc, objects, source)
    return objects


def _collect(doc: Any, out: list[dict[str, Any]], source: str) -> None:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            _collect(item, out, source)
        return
    if not isinstance(doc, dict):
        raise ObjectsError(f"{source}: expected Kubernetes objects, found a {type(doc).__name__}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ObjectsError(f"{source}: an object has no kind")
    if kind == "List" or (kind.endswith("List") and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise ObjectsError(f"{source}: {kind}.items is not a list")
        default_kind = kind[: -len("List")] if kind != "List" else None
        for item in items:
            if isinstance(item, dict) and default_kind and "kind" not in item:
                item = {**item, "kind": default_kind}
            _collect(item, out, source)
        return
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise ObjectsError(f"{source}: a {kind} has no metadata.name")
    if not isinstance(meta["name"], str):
        raise ObjectsError(f"{source}: a {kind}'s metadata.name must be a string")
    problem = object_problem(doc)
    if problem is not None:
        raise ObjectsError(f"{source}: {_label(kind, meta)}: {problem}")
    out.append(doc)


def _label(kind: str, meta: dict[str, Any]) -> str:
    """`pod team-a/x`, or `pod x` when the file names no namespace, as the file says it."""
    namespace = meta.get("namespace")
    prefix = f"{namespace}/" if isinstance(namespace, str) and namespace else ""
    return f"{kind.lower()} {prefix}{meta['name']}"

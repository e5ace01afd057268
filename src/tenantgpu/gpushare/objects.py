"""Kubernetes objects from YAML or JSON text: one object, several YAML documents, or a `List`."""

from __future__ import annotations

import json
from typing import Any

import yaml


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
    if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
        raise ObjectsError(f"{source}: a {kind} has no metadata.name")
    out.append(doc)

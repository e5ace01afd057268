"""Stand-in for the pure table printer until `tables.py` lands."""

from __future__ import annotations

from datetime import datetime
from typing import Any


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

"""One copy of identical JSON sub-structures across a process's tenants.

Every tenant holds the same ~130 default RBAC objects (and their informer copies in its controller
duties): as decoded from JSON each would own its dicts, lists and strings. Stored objects are never
changed in place (a write builds a new object), so equal parts — a rule, a subject, a label map — can be
one object shared by all. `share` returns the process's canonical instance of a value, keyed by its
JSON; the table is bounded, and beyond it values are simply not shared.
"""

from __future__ import annotations

from typing import Any

import orjson

_CANONICAL: dict[bytes, Any] = {}
_LIMIT = 100_000

Obj = dict[str, Any]


def share(value: Any) -> Any:
    """The canonical instance of a dict or list equal to `value` (that must not be changed in place)."""
    if not isinstance(value, dict | list) or not value:
        return value
    key = orjson.dumps(value)
    found = _CANONICAL.get(key)
    if found is not None:
        return found
    if len(_CANONICAL) < _LIMIT:
        _CANONICAL[key] = value
    return value


def _share_items(values: Any) -> Any:
    if not isinstance(values, list):
        return values
    return share([share(v) for v in values])


def share_rbac_object(obj: Obj) -> Obj:
    """Replaces a Role's, ClusterRole's or binding's rules, subjects, roleRef, aggregation rule, labels
    and annotations with the shared instances of equal values (in place; returns `obj`)."""
    for field in ("rules", "subjects"):
        if field in obj:
            obj[field] = _share_items(obj[field])
    for field in ("roleRef", "aggregationRule"):
        if field in obj:
            obj[field] = share(obj[field])
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for field in ("labels", "annotations"):
            if field in meta:
                meta[field] = share(meta[field])
    return obj

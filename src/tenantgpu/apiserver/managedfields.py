"""Server-side apply's field management: who owns which field (`metadata.managedFields`), apply's merge,
its conflicts, and the removal of what an applier stopped applying. Pure: JSON objects in, JSON out.

Sets of fields are kept in kube's `FieldsV1` form, nested dicts keyed by path elements (`f:<field>`,
`k:<keys as JSON>` for an item of an associative list, `v:<value as JSON>` for an item of a set);
`{}` is a member without children and a `.` key marks a node that is a member and has children. The
semantics follow kube's structured-merge-diff as kube-apiserver runs it:

- an apply owns exactly the fields its configuration names; what another manager owns and the apply
  would change is a conflict (409) unless the apply forces, which takes the fields over;
- what the applier owned before and no longer applies is removed, unless another manager owns it;
- an update (create, PUT, non-apply PATCH) owns what it changed, and takes it from the other managers;
- an object that has no managedFields is not tracked by updates (kube's skip of non-applied objects);
  an apply to it first records its fields under the manager `before-first-apply`;
- more than ten update managers are folded into `ancient-changes`.

Each entry is keyed, as kube keys it, by its manager, operation, subresource and (for updates) API
version. Where this departs from kube: a struct field created together with its object is a member of
the creator's set (`.: {}`); kube's empty object already holds the fields that are not pointers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tenantgpu.apiserver.listtypes import (
    ATOMIC_MAP_FIELDS,
    ATOMIC_STRUCTS,
    LIST_MAPS,
    LIST_SETS,
    short_component,
)

__all__ = [
    "BEFORE_FIRST_APPLY",
    "DEDUCED",
    "ApplyConflict",
    "Manager",
    "Managers",
    "Shape",
    "apply",
    "compare",
    "decode",
    "encode",
    "field_set",
    "go_json",
    "has",
    "is_reset",
    "merge",
    "path_strings",
    "path_text",
    "shape_of",
    "shape_of_schema",
    "update",
]

BEFORE_FIRST_APPLY = "before-first-apply"
ANCIENT_CHANGES = "ancient-changes"
MAX_UPDATE_MANAGERS = 10
MEMBER = "."
FieldSet = dict[str, Any]

# Fields no manager owns (kube's stripped metadata).
_STRIPPED: FieldSet = {
    "f:apiVersion": {},
    "f:kind": {},
    "f:metadata": {
        MEMBER: {},
        "f:name": {},
        "f:namespace": {},
        "f:creationTimestamp": {},
        "f:selfLink": {},
        "f:uid": {},
        "f:clusterName": {},
        "f:generation": {},
        "f:managedFields": {},
        "f:resourceVersion": {},
    },
}
# Default values of list-map key fields an item may leave out (kube's OpenAPI `default`).
_KEY_DEFAULTS = {"protocol": "TCP"}


# ---------------------------------------------------------------------------------------------- shapes


@dataclass(eq=False)
class Shape:
    """How apply sees one position of an object: `scalar`, `atomic` (replaced and owned whole), `struct`
    (declared fields), `map` (free keys), `listmap` (items keyed by `keys`), `set`, or `deduced` (no
    schema: maps granular, lists atomic, as kube treats unknown content)."""

    kind: str
    keys: tuple[str, ...] = ()
    # struct: field → shape, resolved on first use and kept in `_fields`; map, listmap, set: the items'
    # shape
    resolve: Callable[[str], Shape | None] | None = None
    item: Shape | None = None
    _fields: dict[str, Shape | None] = field(default_factory=dict)

    def child(self, key: str) -> tuple[Shape, bool]:
        """The shape of `key`'s value and whether `key` is a declared field (not a free map key)."""
        if self.kind == "struct":
            if key not in self._fields:
                self._fields[key] = self.resolve(key) if self.resolve else None
            found = self._fields[key]
            if found is not None:
                return found, True
            return DEDUCED, False
        if self.kind == "map":
            return self.item or DEDUCED, False
        return DEDUCED, False


SCALAR = Shape("scalar")
ATOMIC = Shape("atomic")
DEDUCED = Shape("deduced")


def shape_of(node: Any, component_of: Callable[[Any], str | None], parent: str = "", name: str = "") -> Shape:
    """The apply shape of a compiled field-tree node (`fieldtree`'s tuples); `component_of` names an
    object node's component (`io.k8s.api.core.v1.PodSpec`); `parent`/`name` say where the node sits,
    since list and map types belong to the field that holds them."""
    from tenantgpu.apiserver import fieldtree as ft

    tag = node[0]
    if tag == ft.OBJECT:
        component = short_component(component_of(node) or "")
        if component in ATOMIC_STRUCTS:
            return ATOMIC
        fields = node[1]

        def resolve(key: str) -> Shape | None:
            return shape_of(fields[key], component_of, component, key) if key in fields else None

        return Shape("struct", resolve=resolve)
    if tag == ft.LIST:
        keys = LIST_MAPS.get(parent, {}).get(name)
        item = node[1]
        if keys:
            return Shape("listmap", keys=keys, item=shape_of(item, component_of))
        if name in LIST_SETS.get(parent, ()):
            return Shape("set", item=SCALAR)
        return ATOMIC
    if tag == ft.MAP:
        if name in ATOMIC_MAP_FIELDS.get(parent, ()):
            return ATOMIC
        return Shape("map", item=shape_of(node[1], component_of))
    if tag == ft.LEAF:
        return DEDUCED
    return SCALAR


def shape_of_schema(schema: Any, metadata: Shape | None = None) -> Shape:
    """The apply shape of a CRD's structural schema (`openAPIV3Schema`): declared properties, maps of
    `additionalProperties`, `x-kubernetes-list-type` and `-map-type` as kube reads them; `metadata`
    replaces the root's metadata (ObjectMeta's own shape)."""
    if not isinstance(schema, Mapping):
        return DEDUCED
    kind = schema.get("type")
    properties = schema.get("properties")
    if kind == "object" or properties:
        if schema.get("x-kubernetes-map-type") == "atomic":
            return ATOMIC
        if properties:

            def resolve(key: str) -> Shape | None:
                if key not in properties:
                    return None
                if key == "metadata" and metadata is not None:
                    return metadata
                return shape_of_schema(properties[key])

            return Shape("struct", resolve=resolve)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return Shape("map", item=shape_of_schema(extra))
        return DEDUCED
    if kind == "array":
        items = schema.get("items")
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
            return Shape("listmap", keys=keys, item=shape_of_schema(items))
        if list_type == "set":
            return Shape("set", item=SCALAR)
        return ATOMIC
    return SCALAR if kind or schema.get("x-kubernetes-int-or-string") else DEDUCED


def _shape_for(value: Any, shape: Shape) -> Shape:
    if shape.kind == "deduced":
        return DEDUCED if isinstance(value, dict) else ATOMIC
    return shape


# ---------------------------------------------------------------------------------------- path elements


def go_json(value: Any) -> str:
    """JSON as Go's encoder writes it: compact, keys sorted, HTML characters escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _item_element(item: Any, shape: Shape) -> str | None:
    if shape.kind == "listmap":
        if not isinstance(item, dict):
            return None
        key = {}
        for name in shape.keys:
            if name in item:
                key[name] = item[name]
            elif name in _KEY_DEFAULTS:
                key[name] = _KEY_DEFAULTS[name]
        return "k:" + go_json(key)
    return "v:" + go_json(item)


def _element_text(element: str) -> str:
    """kube's path notation of one element: `.spec`, `[name="cuda"]`, `[=value]`."""
    tag, body = element[0], element[2:]
    if tag == "f":
        return "." + body
    if tag == "k":
        key = json.loads(body)
        return "[" + ",".join(f"{k}={_go_string(key[k])}" for k in sorted(key)) + "]"
    if tag == "v":
        return "[=" + _go_string(json.loads(body)) + "]"
    return "[" + body + "]"


def _go_string(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def _sort_key(element: str) -> tuple[Any, ...]:
    tag, body = element[0], element[2:]
    if tag == "f":
        return (0, body)
    if tag == "k":
        key = json.loads(body)
        return (1, tuple((k, _value_key(key[k])) for k in sorted(key)))
    if tag == "v":
        return (2, _value_key(json.loads(body)))
    return (3, int(body) if body.isdigit() else body)


def _value_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (3, value)
    return (4, go_json(value))


# ------------------------------------------------------------------------------------------ set algebra


def _member(node: FieldSet) -> bool:
    return not node or MEMBER in node


def _node(member: bool, children: FieldSet) -> FieldSet | None:
    if not children:
        return {} if member else None
    if member:
        return {MEMBER: {}, **children}
    return children


def _children(node: FieldSet) -> FieldSet:
    return {k: v for k, v in node.items() if k != MEMBER}


def union(a: FieldSet, b: FieldSet) -> FieldSet:
    out = dict(a)
    for key, node in b.items():
        if key == MEMBER:
            out[MEMBER] = {}
        elif key in out:
            mine = out[key]
            merged = _node(_member(mine) or _member(node), union(_children(mine), _children(node)))
            out[key] = merged if merged is not None else {}
        else:
            out[key] = node
    return out


def difference(a: FieldSet, b: FieldSet, *, recursive: bool = False) -> FieldSet:
    """`a` without the members of `b`; `recursive` also drops everything under a member of `b` (kube's
    RecursiveDifference), otherwise only the member itself."""
    out: FieldSet = {}
    for key, node in a.items():
        if key == MEMBER:
            continue
        other = b.get(key)
        if other is None:
            out[key] = node
            continue
        if recursive and _member(other):
            continue
        member = _member(node) and not _member(other)
        kids = difference(_children(node), _children(other), recursive=recursive)
        kept = _node(member, kids)
        if kept is not None:
            out[key] = kept
    return out


def intersection(a: FieldSet, b: FieldSet) -> FieldSet:
    out: FieldSet = {}
    for key, node in a.items():
        if key == MEMBER or key not in b:
            continue
        other = b[key]
        kept = _node(_member(node) and _member(other), intersection(_children(node), _children(other)))
        if kept is not None:
            out[key] = kept
    return out


def _sorted(fields: FieldSet) -> FieldSet:
    out: FieldSet = {MEMBER: {}} if MEMBER in fields else {}
    for key in sorted((k for k in fields if k != MEMBER), key=_sort_key):
        out[key] = _sorted(fields[key])
    return out


Path = tuple[str, ...]


def _paths(fields: FieldSet, prefix: Path) -> Iterator[Path]:
    # kube's order: this level's members first, then each child's paths
    keys = sorted((k for k in fields if k != MEMBER), key=_sort_key)
    for key in keys:
        if _member(fields[key]):
            yield (*prefix, key)
    for key in keys:
        if _children(fields[key]):
            yield from _paths(fields[key], (*prefix, key))


def path_text(path: Path) -> str:
    """kube's notation of a path: `.data.x`, `.spec.containers[name="c"].image`."""
    return "".join(_element_text(e) for e in path)


def path_strings(fields: FieldSet) -> list[str]:
    """The member paths of a set in kube's notation and order."""
    return [path_text(p) for p in _paths(fields, ())]


def has(fields: FieldSet, path: Path) -> bool:
    """Whether `path` is a member of `fields`."""
    node: FieldSet | None = fields
    for element in path:
        node = node.get(element) if node is not None else None
        if node is None:
            return False
    return node is not None and _member(node)


# -------------------------------------------------------------------------------------- typed walkers


def field_set(value: Any, shape: Shape) -> FieldSet:
    """The fields an applied configuration names (kube's ToFieldSet), as the children of its root."""
    shape = _shape_for(value, shape)
    out: FieldSet = {}
    if shape.kind in ("struct", "deduced", "map") and isinstance(value, dict):
        for key, child in value.items():
            child_shape, declared = shape.child(key)
            sub = field_set(child, child_shape)
            child_kind = _shape_for(child, child_shape).kind
            member = (
                child is None
                or (isinstance(child, dict) and not child)
                or not declared
                or child_kind in ("scalar", "atomic")
                or not isinstance(child, (dict, list))
            )
            node = _node(member, sub)
            if node is not None:
                out["f:" + key] = node
    elif shape.kind in ("listmap", "set") and isinstance(value, list):
        for item in value:
            element = _item_element(item, shape)
            if element is None:
                continue
            sub = field_set(item, shape.item or DEDUCED) if shape.kind == "listmap" else {}
            out[element] = union(out.get(element, {}), _node(True, sub) or {})
    return out


def _whole(value: Any, shape: Shape) -> FieldSet:
    """A path holding `value`, as compare reports it when added or removed: a member with all it holds."""
    return _node(True, _everything(value, shape)) or {}


def _everything(value: Any, shape: Shape) -> FieldSet:
    """Every path under `value` as a member (what compare reports for an added or removed subtree)."""
    shape = _shape_for(value, shape)
    out: FieldSet = {}
    if shape.kind in ("struct", "deduced", "map") and isinstance(value, dict):
        for key, child in value.items():
            out["f:" + key] = _whole(child, shape.child(key)[0])
    elif shape.kind in ("listmap", "set") and isinstance(value, list):
        for item in value:
            element = _item_element(item, shape)
            if element is not None:
                out[element] = _whole(item, shape.item or DEDUCED)
    return out


@dataclass
class Comparison:
    added: FieldSet = field(default_factory=dict)
    modified: FieldSet = field(default_factory=dict)
    removed: FieldSet = field(default_factory=dict)

    def changed(self) -> FieldSet:
        return union(self.modified, self.added)

    def without(self, ignored: FieldSet) -> Comparison:
        if not ignored:
            return self
        return Comparison(
            difference(self.added, ignored, recursive=True),
            difference(self.modified, ignored, recursive=True),
            difference(self.removed, ignored, recursive=True),
        )


def compare(old: Any, new: Any, shape: Shape) -> Comparison:
    """What changed from `old` to `new`: paths added, modified (a scalar or an atomic value), removed."""
    out = Comparison()
    _compare(old, new, shape, out.added, out.modified, out.removed)
    return out


def _granular(value: Any, shape: Shape) -> str:
    kind = _shape_for(value, shape).kind
    if kind in ("struct", "deduced", "map") and isinstance(value, dict):
        return "map"
    if kind in ("listmap", "set") and isinstance(value, list):
        return "list"
    return ""


def _compare(
    old: Any, new: Any, shape: Shape, added: FieldSet, modified: FieldSet, removed: FieldSet
) -> None:
    kind = _granular(new, shape)
    if kind == "map" and _granular(old, shape) == "map":
        for key in old.keys() | new.keys():
            element = "f:" + key
            if key in old and key in new and (old[key] is new[key] or old[key] == new[key]):
                continue  # equal subtrees (most of an object, in the usual write) are not walked
            child_shape = shape.child(key)[0]
            if key not in old:
                added[element] = _whole(new[key], child_shape)
            elif key not in new:
                removed[element] = _whole(old[key], child_shape)
            else:
                _compare_child(old[key], new[key], child_shape, element, added, modified, removed)
        return
    if kind == "list" and _granular(old, shape) == "list":
        shape = _shape_for(new, shape)
        olds = {_item_element(item, shape): item for item in old}
        news = {_item_element(item, shape): item for item in new}
        item_shape = shape.item or DEDUCED
        for element, item in news.items():
            if element is None:
                continue
            if element not in olds:
                added[element] = _whole(item, item_shape)
            elif shape.kind == "listmap" and olds[element] != item:
                _compare_child(olds[element], item, item_shape, element, added, modified, removed)
        for element, item in olds.items():
            if element is not None and element not in news:
                removed[element] = _whole(item, item_shape)


def _compare_child(
    old: Any, new: Any, shape: Shape, element: str, added: FieldSet, modified: FieldSet, removed: FieldSet
) -> None:
    if _granular(new, shape) and _granular(old, shape) == _granular(new, shape):
        sub_added: FieldSet = {}
        sub_modified: FieldSet = {}
        sub_removed: FieldSet = {}
        _compare(old, new, shape, sub_added, sub_modified, sub_removed)
        for target, sub in ((added, sub_added), (modified, sub_modified), (removed, sub_removed)):
            if sub:
                target[element] = sub
    elif old != new:
        modified[element] = {}


def merge(live: Any, config: Any, shape: Shape) -> Any:
    """Apply's merge of a configuration onto the live object: granular maps and associative lists are
    merged, everything else is replaced by the configuration's value."""
    kind = _granular(config, shape)
    if kind == "map" and _granular(live, shape) == "map":
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = merge(out[key], value, shape.child(key)[0])
            else:
                out[key] = value
        return out
    if kind == "list" and _granular(live, shape) == "list":
        shape = _shape_for(config, shape)
        item_shape = shape.item or DEDUCED
        live_items = {_item_element(item, shape): item for item in live}
        config_elements = [_item_element(item, shape) for item in config]
        wanted = set(config_elements)
        result: list[Any] = []
        done: set[str | None] = set()
        li = 0
        for element, item in zip(config_elements, config, strict=True):
            # live items the configuration leaves out keep their place before the next applied one
            while li < len(live):
                live_element = _item_element(live[li], shape)
                if live_element in wanted:
                    break
                if live_element not in done:
                    result.append(live[li])
                    done.add(live_element)
                li += 1
            if element in done:
                continue
            if element in live_items and shape.kind == "listmap":
                result.append(merge(live_items[element], item, item_shape))
            else:
                result.append(item)
            done.add(element)
            if li < len(live) and _item_element(live[li], shape) == element:
                li += 1
        for item in live[li:]:
            element = _item_element(item, shape)
            if element not in done:
                result.append(item)
                done.add(element)
        return result
    return config


def remove(obj: Any, fields: FieldSet, shape: Shape) -> Any:
    """`obj` without the members of `fields` (each with all it holds)."""
    kind = _granular(obj, shape)
    if kind == "map":
        out = dict(obj)
        for key, value in obj.items():
            node = fields.get("f:" + key)
            if node is None:
                continue
            if _member(node):
                del out[key]
            else:
                out[key] = remove(value, node, shape.child(key)[0])
        return out
    if kind == "list":
        shape = _shape_for(obj, shape)
        result = []
        for item in obj:
            node = fields.get(_item_element(item, shape) or "")
            if node is None:
                result.append(item)
            elif not _member(node):
                result.append(remove(item, node, shape.item or DEDUCED))
        return result
    return obj


# ------------------------------------------------------------------------------------------- managers


@dataclass
class Manager:
    """One entry of `metadata.managedFields`."""

    manager: str
    operation: str
    api_version: str
    fields: FieldSet
    time: str | None = None
    subresource: str = ""

    @property
    def identity(self) -> str:
        # kube's manager identifier: the entry's JSON without fields and time; appliers without version
        entry: dict[str, str] = {"manager": self.manager, "operation": self.operation}
        if self.operation == "Update":
            entry["apiVersion"] = self.api_version
        if self.subresource:
            entry["subresource"] = self.subresource
        return json.dumps(entry, separators=(",", ":"))

    def printed(self) -> str:
        """How a conflict names the manager: `"kubectl"`, `"kubectl-edit" using apps/v1`."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text


Managers = dict[str, Manager]


class ApplyConflict(Exception):
    """Fields another manager owns that an apply would change: kube's 409 `Apply failed with …`."""

    def __init__(self, conflicts: list[tuple[Manager, Path]]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message())

    def message(self) -> str:
        if len(self.conflicts) == 1:
            manager, path = self.conflicts[0]
            return f"Apply failed with 1 conflict: conflict with {manager.printed()}: {path_text(path)}"
        by_manager: dict[str, list[str]] = {}
        printed: dict[str, str] = {}
        for manager, path in self.conflicts:
            by_manager.setdefault(manager.identity, []).append(path_text(path))
            printed[manager.identity] = manager.printed()
        lines: list[str] = []
        for identity in sorted(by_manager):
            lines.append(f"conflicts with {printed[identity]}:")
            lines.extend(f"- {path}" for path in by_manager[identity])
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[dict[str, str]]:
        return [
            {
                "reason": "FieldManagerConflict",
                "message": f"conflict with {m.printed()}",
                "field": path_text(path),
            }
            for m, path in self.conflicts
        ]


def decode(entries: Any) -> Managers | None:
    """The managers of an object's `managedFields`, or None when they are malformed (kube then keeps the
    live object's)."""
    if not isinstance(entries, list):
        return None
    managers: Managers = {}
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        operation = entry.get("operation")
        if operation not in ("Apply", "Update") or not entry.get("apiVersion"):
            return None
        if entry.get("fieldsType") != "FieldsV1":
            return None
        fields = entry.get("fieldsV1") or {}
        if not isinstance(fields, dict):
            return None
        manager = Manager(
            str(entry.get("manager") or ""),
            operation,
            str(entry["apiVersion"]),
            fields,
            entry.get("time"),
            str(entry.get("subresource") or ""),
        )
        managers[manager.identity] = manager
    return managers


def is_reset(entries: Any) -> bool:
    """`managedFields: []` or `[{}]` in a write: the client asks to drop the tracking."""
    return isinstance(entries, list) and (not entries or (len(entries) == 1 and entries[0] == {}))


def encode(managers: Managers) -> list[dict[str, Any]]:
    """The managers as `metadata.managedFields`, in kube's order (Apply before Update, then by time,
    manager, apiVersion, subresource)."""
    ordered = sorted(
        managers.values(),
        key=lambda m: (m.operation, m.time or "", m.manager, m.api_version, m.subresource),
    )
    out: list[dict[str, Any]] = []
    for m in ordered:
        entry: dict[str, Any] = {"manager": m.manager, "operation": m.operation, "apiVersion": m.api_version}
        if m.time:
            entry["time"] = m.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = _sorted(m.fields)
        if m.subresource:
            entry["subresource"] = m.subresource
        out.append(entry)
    return out


def _take(managers: Managers, cmp: Comparison, skip: str, force: bool) -> Managers:
    """kube's update step: the fields the change touches leave the other managers (with `force`), or
    are conflicts; removed fields leave every other manager."""
    changed = cmp.changed()
    conflicts: list[tuple[Manager, Path]] = []
    out: Managers = {}
    for identity, manager in managers.items():
        if identity == skip:
            out[identity] = manager
            continue
        clash = intersection(manager.fields, changed)
        if clash and not force:
            conflicts.extend((manager, path) for path in _paths(clash, ()))
            continue
        remaining = difference(difference(manager.fields, clash), cmp.removed)
        if remaining:
            out[identity] = replace(manager, fields=remaining)
    if conflicts:
        raise ApplyConflict(conflicts)
    return out


def update(
    live: Any,
    new: Any,
    managers: Managers,
    manager: str,
    api_version: str,
    shape: Shape,
    *,
    now: str,
    subresource: str = "",
    ignored: FieldSet | None = None,
) -> Managers:
    """The managers after a non-apply write by `manager` changed `live` into `new`."""
    ignored = ignored or {}
    cmp = compare(live, new, shape).without(ignored)
    out = _take(managers, cmp, "", True)
    changed = difference(cmp.changed(), _STRIPPED)
    if changed:
        me = Manager(manager or "unknown", "Update", api_version, changed, now, subresource)
        previous = out.get(me.identity)
        if previous:
            me.fields = union(previous.fields, changed)
        out[me.identity] = me
    return _cap(out)


def _cap(managers: Managers) -> Managers:
    """kube's cap on update managers: past ten, the oldest are folded, per API version, into
    `ancient-changes` (the first of each version is kept until a bucket exists)."""
    updaters = sorted(
        (m for m in managers.values() if m.operation == "Update"), key=lambda m: (m.time or "", m.identity)
    )
    length = len(updaters)
    if length <= MAX_UPDATE_MANAGERS:
        return managers
    out = dict(managers)
    first_of: dict[str, str] = {}
    for m in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        first = first_of.get(m.api_version)
        if first is None:
            first_of[m.api_version] = m.identity
            continue
        bucket = Manager(ANCIENT_CHANGES, "Update", m.api_version, {}).identity
        if bucket not in out:
            moved = out.pop(first)
            out[bucket] = Manager(ANCIENT_CHANGES, "Update", m.api_version, moved.fields, moved.time)
        out[bucket] = Manager(
            ANCIENT_CHANGES, "Update", m.api_version, union(m.fields, out[bucket].fields), m.time
        )
        del out[m.identity]
        length -= 1
    return out


def apply(
    live: Any,
    config: Any,
    managers: Managers,
    manager: str,
    api_version: str,
    shape: Shape,
    *,
    force: bool,
    now: str,
    subresource: str = "",
    ignored: FieldSet | None = None,
    empty: Any = None,
) -> tuple[Any, Managers]:
    """Applies `config` as `manager` onto `live`; returns the new object and managers. Raises
    ApplyConflict. `empty` is the kind's empty object, against which an untracked object's fields are
    first recorded as `before-first-apply`'s."""
    ignored = ignored or {}
    if not managers and live:
        managers = update(
            empty if empty is not None else {},
            live,
            {},
            BEFORE_FIRST_APPLY,
            api_version,
            shape,
            now=now,
            subresource=subresource,
            ignored=ignored,
        )
    applied = difference(difference(field_set(config, shape), ignored, recursive=True), _STRIPPED)
    me = Manager(manager, "Apply", api_version, applied, None, subresource)
    previous = managers.get(me.identity)
    merged = merge(live, config, shape)
    managers = {**managers, me.identity: me}
    if previous is not None and previous.fields:
        merged = _prune(merged, managers, previous.fields, shape)
    managers = _take(managers, compare(live, merged, shape).without(ignored), me.identity, force)
    mine = managers[me.identity]
    mine.time = now if merged != live else (previous.time if previous else now)
    if not mine.fields:
        del managers[me.identity]
    return merged, managers


def _prune(merged: Any, managers: Managers, last: FieldSet, shape: Shape) -> Any:
    """Removes what the applier owned before and neither it nor anyone else owns now; a node that
    still holds an owned field stays, with only the owned parts the applier gave up removed."""
    owned: FieldSet = {}
    for m in managers.values():
        owned = union(owned, m.fields)
    gone = difference(last, owned)
    return remove(merged, _keep_owned_parents(gone, owned), shape)


def _keep_owned_parents(gone: FieldSet, owned: FieldSet) -> FieldSet:
    """`gone` where a member that still holds owned fields is no longer a member (its parts are)."""
    out: FieldSet = {}
    for key, node in gone.items():
        if key == MEMBER:
            continue
        held = owned.get(key)
        kids = _keep_owned_parents(_children(node), _children(held) if held else {})
        member = _member(node) and not (held and _children(held))
        kept = _node(member, kids)
        if kept is not None:
            out[key] = kept
    return out

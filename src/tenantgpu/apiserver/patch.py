"""PATCH as kube-apiserver applies it: JSON merge (RFC 7386), JSON patch (RFC 6902), strategic merge."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tenantgpu.apiserver.jsoncodec import clone

__all__ = [
    "PatchError",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "has_strategic_schema",
    "patched_fields",
]


class PatchError(ValueError):
    """A patch that cannot be applied; `code` is kube's HTTP status (400 malformed, 422 not applicable)."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def patched_fields(patch: Any, content_type: str) -> frozenset[str] | None:
    """The top-level fields a merge or strategic merge patch can change; None when that is not known
    (a JSON patch, or a strategic directive that works on the whole object)."""
    if not isinstance(patch, dict) or content_type not in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        return None
    if content_type == MERGE_PATCH:
        return frozenset(patch)
    fields = set()
    for key in patch:
        if key.startswith("$"):
            directive, _, target = key.partition("/")
            if directive + "/" not in (_SET_ORDER, _DELETE_PRIMITIVE) or not target:
                return None
            key = target
        fields.add(key)
    return frozenset(fields)


# --- RFC 7386 JSON merge patch ------------------------------------------------------------------------


def apply_merge_patch(obj: Any, patch: Any, *, owned: bool = False) -> Any:
    """Apply a JSON merge patch: maps merge recursively, `null` deletes, anything else replaces.

    `owned` says the caller gives `obj` away (a private copy), so it is changed in place instead of copied.
    The patch is copied once, whole (a retried update applies it again), so its values can be taken in.
    """
    return _merge(obj if owned else clone(obj), clone(patch))


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# --- RFC 6902 JSON patch --------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer: {json.dumps(path)}", 400)
    if path == "":
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: `true` is not `1`, but `1` is `1.0`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _list_index(container: list[Any], token: str, path: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {json.dumps(token)} in path {json.dumps(path)}")
    index = int(token)
    limit = len(container) if for_add else len(container) - 1
    if index > limit:
        raise PatchError(f"index out of range: {index} in path {json.dumps(path)}")
    return index


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    current = doc
    for token in parts[:-1]:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_list_index(current, token, path, for_add=False)]
        else:
            raise PatchError(f"doc is missing path: {json.dumps(path)}: missing value")
    return current


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    token = parts[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f"doc is missing key: {json.dumps(path)}: missing value")
        return parent[token]
    if isinstance(parent, list):
        return parent[_list_index(parent, token, path, for_add=False)]
    raise PatchError(f"doc is missing path: {json.dumps(path)}: missing value")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    token = parts[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_list_index(parent, token, path, for_add=True), value)
    else:
        raise PatchError(f"doc is missing path: {json.dumps(path)}: missing value")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchError("unable to remove the whole document")
    parent = _parent(doc, parts, path)
    token = parts[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f"unable to remove nonexistent key: {token}: missing value")
        return doc, parent.pop(token)
    if isinstance(parent, list):
        return doc, parent.pop(_list_index(parent, token, path, for_add=False))
    raise PatchError(f"doc is missing path: {json.dumps(path)}: missing value")


def apply_json_patch(obj: Any, ops: Any) -> Any:
    """Apply an RFC 6902 operation list (add, remove, replace, move, copy, test) to a copy of `obj`."""
    if not isinstance(ops, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400)
    doc = clone(obj)
    for number, op in enumerate(ops):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise PatchError(f"invalid JSON patch operation at index {number}", 400)
        kind = op["op"]
        path = op.get("path")
        if path is None:
            raise PatchError(f"operation {kind} at index {number} has no path", 400)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} at index {number} has no value", 400)
        if kind == "add":
            doc = _add(doc, path, clone(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # replace needs an existing target
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, clone(op["value"]))
        elif kind in ("move", "copy"):
            source = op.get("from")
            if source is None:
                raise PatchError(f"operation {kind} at index {number} has no from", 400)
            if kind == "move":
                if path != source and path.startswith(source + "/"):
                    raise PatchError(
                        f"cannot move {json.dumps(source)} into its own child {json.dumps(path)}"
                    )
                doc, value = _remove(doc, source)
            else:
                value = clone(_get(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            try:
                current = _get(doc, path)
            except PatchError:
                raise PatchError(f"testing value {path} failed: test failed") from None
            if not _json_equal(current, op["value"]):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", 400)
    return doc


# --- strategic merge patch ------------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


@dataclass(frozen=True)
class _ListMeta:
    """How a list field merges: by `key` for lists of maps, as a set for primitives (key None)."""

    key: str | None = None


_CONTAINER_LISTS = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_POD_SPEC_LISTS = {
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "resourceClaims": "name",
}
_POD_STATUS_LISTS = {"conditions": "type", "podIPs": "ip", "hostIPs": "ip", "resourceClaimStatuses": "name"}


def _pod_spec_lists(prefix: str) -> dict[str, _ListMeta]:
    lists = {f"{prefix}.{name}": _ListMeta(key) for name, key in _POD_SPEC_LISTS.items()}
    for group in ("containers", "initContainers", "ephemeralContainers"):
        lists[f"{prefix}.{group}"] = _ListMeta("name")
        for name, key in _CONTAINER_LISTS.items():
            lists[f"{prefix}.{group}.{name}"] = _ListMeta(key)
    return lists


_METADATA_LISTS = {"metadata.finalizers": _ListMeta(None), "metadata.ownerReferences": _ListMeta("uid")}
_TEMPLATE_METADATA = {
    "spec.template.metadata.finalizers": _ListMeta(None),
    "spec.template.metadata.ownerReferences": _ListMeta("uid"),
}

# Merge keys and strategies from the `patchMergeKey`/`patchStrategy` tags of k8s.io/api; every list not
# named here is atomic (the patch's list replaces the live one), as for tolerations, taints, args.
_SCHEMAS: dict[str, dict[str, _ListMeta]] = {
    "Pod": {
        **_pod_spec_lists("spec"),
        **{f"status.{name}": _ListMeta(key) for name, key in _POD_STATUS_LISTS.items()},
    },
    "Node": {
        "spec.podCIDRs": _ListMeta(None),
        "status.conditions": _ListMeta("type"),
        "status.addresses": _ListMeta("type"),
    },
    "Namespace": {"status.conditions": _ListMeta("type")},
    "Service": {"spec.ports": _ListMeta("port"), "status.conditions": _ListMeta("type")},
    "ServiceAccount": {"secrets": _ListMeta("name")},
    "PersistentVolumeClaim": {"status.conditions": _ListMeta("type")},
    "ReplicationController": {
        **_pod_spec_lists("spec.template.spec"),
        "status.conditions": _ListMeta("type"),
    },
    "MutatingWebhookConfiguration": {
        "webhooks": _ListMeta("name"),
        "webhooks.matchConditions": _ListMeta("name"),
    },
    "ValidatingWebhookConfiguration": {
        "webhooks": _ListMeta("name"),
        "webhooks.matchConditions": _ListMeta("name"),
    },
    "ConfigMap": {},
    "Secret": {},
    "Event": {},
    "Lease": {},
    "ResourceQuota": {},
    "LimitRange": {},
    "Endpoints": {},
    "Binding": {},
}
for _workload in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"):
    _SCHEMAS[_workload] = {
        **_pod_spec_lists("spec.template.spec"),
        **_TEMPLATE_METADATA,
        "status.conditions": _ListMeta("type"),
    }
_SCHEMAS["CronJob"] = _pod_spec_lists("spec.jobTemplate.spec.template.spec")


def has_strategic_schema(kind: str) -> bool:
    """Whether strategic merge patch knows `kind`; kube refuses it (415) for custom resources."""
    return kind in _SCHEMAS


def apply_strategic_merge_patch(
    obj: dict[str, Any], patch: Any, kind: str, *, owned: bool = False
) -> dict[str, Any]:
    """Apply a strategic merge patch as kube-apiserver does for a built-in `kind`.

    Lists with a merge key merge element by element, primitive merge lists act as sets, other lists are
    replaced; `$patch`, `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…` are honoured
    and `null` deletes a key. Kinds without a schema merge maps and replace every list. `owned` as in
    `apply_merge_patch`.
    """
    if not isinstance(patch, dict):
        raise PatchError("json: cannot unmarshal array into Go value of type map[string]interface {}", 400)
    schema = {**_METADATA_LISTS, **_SCHEMAS.get(kind, {})}
    merged = _Merger(schema).merge_map((obj if owned else clone(obj)) if obj else {}, clone(patch), "")
    return merged if merged is not None else {}


class _Merger:
    def __init__(self, schema: dict[str, _ListMeta]) -> None:
        self.schema = schema

    def list_meta(self, path: str) -> _ListMeta | None:
        return self.schema.get(path)

    def merge_map(self, original: dict[str, Any], patch: dict[str, Any], path: str) -> dict[str, Any]:
        if _DIRECTIVE in patch:
            directive = patch.pop(_DIRECTIVE)
            if directive == "replace":
                return _strip_directives(patch)
            if directive == "delete":
                return {}
            if directive == "merge":
                pass  # an explicit merge is the default behaviour for maps
            else:
                raise PatchError(f"Unknown patch type: {directive} in map: {json.dumps(patch)}", 400)
        if _RETAIN_KEYS in patch:
            self.retain_keys(original, patch)
        for key in [k for k in patch if k.startswith(_SET_ORDER)]:
            self.apply_set_order(original, patch, key, path)
        for key in [k for k in patch if k.startswith(_DELETE_PRIMITIVE)]:
            values = patch.pop(key)
            target = key[len(_DELETE_PRIMITIVE) :]
            if not isinstance(values, list):
                raise PatchError(f"invalid {_DELETE_PRIMITIVE}{target} directive: not a list", 400)
            current = original.get(target)
            if isinstance(current, list):
                original[target] = [v for v in current if not any(_json_equal(v, d) for d in values)]
        for key, value in patch.items():
            if key.startswith("$"):
                raise PatchError(f"unknown directive {key}", 400)
            child = f"{path}.{key}" if path else key
            if value is None:
                original.pop(key, None)
                continue
            current = original.get(key)
            if key not in original or type(current) is not type(value):
                kept = _strip_directives(value)
                if kept is _DROP:
                    original.pop(key, None)
                else:
                    original[key] = kept
            elif isinstance(value, dict):
                original[key] = self.merge_map(current, value, child)
            elif isinstance(value, list):
                original[key] = self.merge_list(current, value, child)
            else:
                original[key] = value
        return original

    def retain_keys(self, original: dict[str, Any], patch: dict[str, Any]) -> None:
        keep = patch.pop(_RETAIN_KEYS)
        if not isinstance(keep, list):
            raise PatchError("invalid patch: $retainKeys must be a list", 400)
        for key, value in patch.items():
            if value is None or key.startswith((_DELETE_PRIMITIVE, _SET_ORDER)):
                continue
            if key not in keep:
                raise PatchError(
                    "doesn't satisfy retainKeys directive: the patch has a field not in $retainKeys", 400
                )
        for key in list(original):
            if key not in keep:
                del original[key]

    def merge_list(self, original: list[Any], patch: list[Any], path: str) -> list[Any]:
        meta = self.list_meta(path)
        if meta is None:
            kept = _strip_directives(patch)
            return kept if isinstance(kept, list) else []
        if not original and not patch:
            return original
        if meta.key is None:
            replaced = _replace_directive(patch)
            if replaced is not None:
                return replaced
            merged = list(original)
            for value in patch:
                if not any(_json_equal(value, m) for m in merged):
                    merged.append(value)
            return _ordered(merged, patch, original, None)
        if not all(isinstance(v, dict) for v in original + patch):
            raise PatchError(f"cannot merge lists of non-objects by merge key {meta.key} at {path}", 400)
        key = meta.key
        replaced = _replace_directive(patch)
        if replaced is not None:
            return replaced
        items: list[Any] = []
        for element in patch:
            directive = element.get(_DIRECTIVE)
            if directive == "delete":
                if key not in element:
                    raise PatchError(
                        f"map: {json.dumps(element)} does not contain declared merge key: {key}", 400
                    )
                original = [o for o in original if not _json_equal(o.get(key), element[key])]
            elif directive is not None:
                raise PatchError(f"Unknown patch type: {directive} in map: {json.dumps(element)}", 400)
            else:
                items.append(element)
        server_order = list(original)
        for element in items:
            if key not in element:
                raise PatchError(
                    f"map: {json.dumps(element)} does not contain declared merge key: {key}", 400
                )
            at = _find(original, key, element[key])
            if at is None:
                original.append(_strip_directives(element))
            else:
                original[at] = self.merge_map(original[at], element, path)
        return _ordered(original, items, server_order, key)

    def apply_set_order(
        self, original: dict[str, Any], patch: dict[str, Any], directive_key: str, path: str
    ) -> None:
        order = patch.pop(directive_key)
        target = directive_key[len(_SET_ORDER) :]
        child = f"{path}.{target}" if path else target
        if not isinstance(order, list):
            raise PatchError("invalid patch: $setElementOrder must be a list", 400)
        meta = self.list_meta(child)
        key = meta.key if meta else None
        in_original = isinstance(original.get(target), list)
        patch_list = patch.pop(target, None) if target in patch else None
        if patch_list is not None and not isinstance(patch_list, list):
            raise PatchError(f"invalid patch: {target} must be a list", 400)
        if patch_list is not None:
            _check_set_order(patch_list, order, key)
        if in_original and patch_list is not None:
            merged = self.merge_list(original[target], patch_list, child)
        elif in_original:
            merged = original[target]
        elif patch_list is not None:
            kept = _strip_directives(patch_list)
            merged = kept if isinstance(kept, list) else []
        else:
            return
        previous = original.get(target) if in_original else []
        original[target] = _ordered(merged, order, previous or [], key)


class _Drop:
    """Marks a value that a directive removed entirely."""


_DROP: Any = _Drop()


def _strip_directives(value: Any) -> Any:
    """A patch value as plain data: maps carrying `$patch` vanish, other `$` keys are dropped."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return _DROP
        cleaned = {}
        for key, item in value.items():
            if key.startswith("$") or item is None:
                continue
            kept = _strip_directives(item)
            if kept is not _DROP:
                cleaned[key] = kept
        return cleaned
    if isinstance(value, list):
        return [kept for kept in (_strip_directives(v) for v in value) if kept is not _DROP]
    return value


def _replace_directive(patch: list[Any]) -> list[Any] | None:
    """When a list patch carries `{"$patch": "replace"}`, the rest of the patch is the new list."""
    if any(isinstance(v, dict) and v.get(_DIRECTIVE) == "replace" for v in patch):
        rest = [v for v in patch if not (isinstance(v, dict) and _DIRECTIVE in v)]
        kept = _strip_directives(rest)
        return kept if isinstance(kept, list) else []
    if any(isinstance(v, dict) and v.get(_DIRECTIVE) == "merge" for v in patch):
        raise PatchError("merging lists cannot yet be specified in the patch", 400)
    return None


def _identity(value: Any, key: str | None) -> Any:
    return value.get(key) if key is not None and isinstance(value, dict) else value


def _find(items: list[Any], key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if _json_equal(item.get(key), value):
            return index
    return None


def _position(order: list[Any], value: Any, key: str | None) -> int:
    wanted = _identity(value, key)
    for index, item in enumerate(order):
        if _json_equal(_identity(item, key), wanted):
            return index
    return -1


def _ordered(
    merged: list[Any], patch_order: list[Any], server_order: list[Any], key: str | None
) -> list[Any]:
    """Order a merged list as kube does: patch items in patch order, server-only ones placed by live order."""
    in_patch = [v for v in merged if _position(patch_order, v, key) >= 0]
    server_only = [v for v in merged if _position(patch_order, v, key) < 0]
    in_patch.sort(key=lambda v: _position(patch_order, v, key))
    server_only.sort(key=lambda v: p if (p := _position(server_order, v, key)) >= 0 else len(server_order))
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(in_patch):
        if i >= len(server_only):
            result.append(in_patch[j])
            j += 1
        elif j >= len(in_patch):
            result.append(server_only[i])
            i += 1
        else:
            left = _position(server_order, server_only[i], key)
            right = _position(server_order, in_patch[j], key)
            if left >= 0 and right >= 0 and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(in_patch[j])
                j += 1
    return result


def _check_set_order(patch_list: list[Any], order: list[Any], key: str | None) -> None:
    """Every non-directive element of the patch list must appear in `$setElementOrder`, in that order."""
    wanted = [v for v in patch_list if not (isinstance(v, dict) and _DIRECTIVE in v)]
    at = 0
    for element in wanted:
        identity = _identity(element, key)
        while at < len(order) and not _json_equal(_identity(order[at], key), identity):
            at += 1
        if at >= len(order):
            raise PatchError(
                f"The order in patch list:\n{json.dumps(patch_list)}\n doesn't match $setElementOrder list:\n"
                f"{json.dumps(order)}\n",
                400,
            )
        at += 1

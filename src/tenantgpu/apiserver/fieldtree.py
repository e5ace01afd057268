"""Which fields each built-in kind has, for kube's field validation (`fieldValidation=Ignore|Warn|Strict`).

kube-apiserver decodes a body into Go structs, so a field they lack is never stored: with `Strict`
(kubectl's default) the write fails with `strict decoding error: unknown field "spec.containers[0].imagee"`,
with `Warn` (the default without the parameter) the field is dropped and a `Warning` header names it,
with `Ignore` it is dropped silently. The fields come from the schemas derived from the `kubernetes`
client's models (`schemas.py`), compiled here into a small table per component.

Deriving them imports the client's models, which takes most of a second; so the compiled table is kept
beside the installed client (`<prefix>/share/tenantgpu/fields-<table form>-<client version>.json`) and read from there
by later processes. Kinds without a model (Kamaji's, on the management plane) are checked by their CRD's
schema instead (`structural.py`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantgpu.apiserver import schemas
from tenantgpu.apiserver.fieldversions import FIRST_MINOR, LATEST
from tenantgpu.apiserver.installcache import cache_path, read_json, write_json
from tenantgpu.apiserver.kinds import KAMAJI_KINDS, VIRTUAL_KINDS, kind_table
from tenantgpu.apiserver.omitempty import OMIT_EMPTY

__all__ = [
    "FieldTree",
    "FieldTypeError",
    "Finding",
    "checked_kinds",
    "pointer_segments",
    "unknown_fields_message",
    "unmarshal_message",
]

log = logging.getLogger(__name__)

_REF = "#/components/schemas/"
# A field's type in the compiled table: "" any value (an IntOrString, a Quantity, a time, bytes, a
# free-form object), "string", "bool", "int32", "int64" or "float64" a leaf of that Go type,
# "@<component>" an object, "[]<type>" a list, "{}<type>" a map with values of that type.
Kinds = tuple[tuple[str, str, str], ...]
# Bump when the compiled table's form changes, so a cache written by an older release is not read.
_TABLE_FORM = 2

# The client's models say only `int`; these fields are int64 in kube's OpenAPI (`format: int64`), the
# rest int32. Read off kube's published OpenAPI document, for the kinds the lab serves; kube's decoder
# names the width in its errors (`of type int64`).
_INT64_FIELDS: dict[str, frozenset[str]] = {
    "ObjectMeta": frozenset({"generation", "deletionGracePeriodSeconds"}),
    "ListMeta": frozenset({"remainingItemCount"}),
    "DeleteOptions": frozenset({"gracePeriodSeconds"}),
    "Condition": frozenset({"observedGeneration"}),
    "PodSpec": frozenset({"activeDeadlineSeconds", "terminationGracePeriodSeconds"}),
    "Probe": frozenset({"terminationGracePeriodSeconds"}),
    "PodSecurityContext": frozenset({"fsGroup", "runAsGroup", "runAsUser", "supplementalGroups"}),
    "SecurityContext": frozenset({"runAsGroup", "runAsUser"}),
    "LinuxContainerUser": frozenset({"uid", "gid", "supplementalGroups"}),
    "Toleration": frozenset({"tolerationSeconds"}),
    "SleepAction": frozenset({"seconds"}),
    "ServiceAccountTokenProjection": frozenset({"expirationSeconds"}),
    "TokenRequestSpec": frozenset({"expirationSeconds"}),
    "PodCondition": frozenset({"observedGeneration"}),
    "PodStatus": frozenset({"observedGeneration"}),
    "ContainerImage": frozenset({"sizeBytes"}),
    "NodeSwapStatus": frozenset({"capacity"}),
    "JobSpec": frozenset({"activeDeadlineSeconds"}),
    "CronJobSpec": frozenset({"startingDeadlineSeconds"}),
    "DaemonSetStatus": frozenset({"observedGeneration"}),
    "DeploymentStatus": frozenset({"observedGeneration"}),
    "ReplicaSetStatus": frozenset({"observedGeneration"}),
    "StatefulSetStatus": frozenset({"observedGeneration"}),
    "ReplicationControllerStatus": frozenset({"observedGeneration"}),
    "ControllerRevision": frozenset({"revision"}),
    "PodDisruptionBudgetStatus": frozenset({"observedGeneration"}),
    "HorizontalPodAutoscalerStatus": frozenset({"observedGeneration"}),
    "ValidatingAdmissionPolicyStatus": frozenset({"observedGeneration"}),
    "CSIDriverSpec": frozenset({"nodeAllocatableUpdatePeriodSeconds"}),
    "TokenRequest": frozenset({"expirationSeconds"}),
}
_LEAF_TYPES = {"string": "string", "boolean": "bool", "number": "float64"}


def _leaf_type(schema: dict[str, Any], struct: str, field: str) -> str:
    kind = schema.get("type")
    if kind == "integer":
        return "int64" if field in _INT64_FIELDS.get(struct, ()) else "int32"
    if kind == "string" and schema.get("format"):
        return ""  # a time or bytes, each decoded by a type of its own
    return _LEAF_TYPES.get(kind or "", "")


def _type_of(schema: dict[str, Any], struct: str = "", field: str = "") -> str:
    ref = schema.get("$ref") or next(
        (s.get("$ref") for s in schema.get("allOf") or [] if s.get("$ref")), None
    )
    if ref:
        name = ref[len(_REF) :]
        # IntOrString and Quantity decode from a string or a number (`sizeLimit: 1` is one byte)
        return "" if name in (schemas.INT_OR_STRING, schemas.QUANTITY) else "@" + name
    if schema.get("type") == "array":
        return "[]" + _type_of(schema.get("items") or {}, struct, field)
    extra = schema.get("additionalProperties")
    if schema.get("type") == "object" and isinstance(extra, dict):
        inner = _type_of(extra)
        # Maps of strings stay untyped but for the named ones (_STRING_MAPS): a map the schemas do not
        # know to hold quantities may still hold them.
        return "{}" + (inner if inner[:1] in ("@", "[", "{") else "")
    return _leaf_type(schema, struct, field)


def compile_kinds(kinds: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """{"kinds": {"group/version/Kind": component}, "components": {component: {json field: type}}}."""
    roots: dict[str, str] = {}
    components: dict[str, dict[str, str]] = {}
    for group, version, kind in kinds:
        found = schemas.kind_schemas(group, version, kind)
        if found is None:
            continue
        roots[f"{group}/{version}/{kind}"] = found.name
        for name, schema in found.components.items():
            if name not in components and schema.get("type") == "object" and "properties" in schema:
                struct = name.rsplit(".", 1)[-1]
                components[name] = {f: _type_of(s, struct, f) for f, s in schema["properties"].items()}
    return {"kinds": roots, "components": components}


def checked_kinds() -> Kinds:
    """Every stored kind any of the lab's API servers serves (tenants' and the management plane's), so
    that all processes share one table; kinds without a model are simply left out of it."""
    table = kind_table(KAMAJI_KINDS)
    return tuple(sorted({(k.group, k.version, k.kind) for k in table if k.kind not in VIRTUAL_KINDS}))


def _cache_path() -> Path:
    version = schemas.models_version() or "unknown"
    return cache_path(f"fields-{_TABLE_FORM}-{version}.json")


@dataclass(frozen=True)
class Finding:
    """An unknown field, as kube names it: `spec.containers[0].imagee`."""

    path: str


def unknown_fields_message(kind: str, version: str, findings: list[Finding]) -> str:
    """The 400 of a strict write: `Pod in version "v1" cannot be handled as a Pod: strict decoding error: …`."""
    listed = ", ".join(f'unknown field "{f.path}"' for f in findings)
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {listed}'


# A compiled type: (LEAF,) any value, (OBJECT, {field: type}, struct, the fields Go's encoder omits when
# zero, {field: the minor release that first has it}), (LIST, type), (MAP, type), or a
# scalar: (EXACT, Python type, Go type) for strings and bools, (INTEGER, int, Go type, bound) and
# (FLOAT, float, "float64"). Objects are shared, so a component used in many places (Container) is one
# dict; the scalar tags are the highest, so one comparison tells a scalar from a node to walk.
LEAF, OBJECT, LIST, MAP, EXACT, INTEGER, FLOAT = 0, 1, 2, 3, 4, 5, 6
Node = tuple[Any, ...]
_ANY: Node = (LEAF,)
_SCALARS: dict[str, Node] = {
    "string": (EXACT, str, "string"),
    "bool": (EXACT, bool, "bool"),
    "int32": (INTEGER, int, "int32", 2**31),
    "int64": (INTEGER, int, "int64", 2**63),
    "float64": (FLOAT, float, "float64"),
}


def load_table(kinds: Kinds, path: Path) -> dict[str, Any]:
    """The table of `kinds` from the cache at `path`, or built (and cached) when it lacks any of them."""
    wanted = {f"{g}/{v}/{k}" for g, v, k in kinds}
    table = read_json(path)
    if isinstance(table, dict) and wanted <= set(table.get("checked") or []):
        return table
    table = compile_kinds(kinds)
    table["checked"] = sorted(wanted)
    write_json(path, table)
    return table


@functools.cache
def _compiled(kinds: Kinds, path: Path) -> tuple[dict[tuple[str, str, str], str], dict[str, Node]]:
    # One compiled table per process, shared by all its API servers (it is read-only). Its kinds are
    # keyed as callers ask for them, since every write asks.
    table = load_table(kinds, path)
    wanted = set(kinds)
    roots: dict[tuple[str, str, str], str] = {}
    for key, component in table["kinds"].items():
        group, version, kind = key.split("/", 2)
        if (group, version, kind) in wanted:
            roots[(group, version, kind)] = component
    return roots, _compile(table)


def _compile(table: dict[str, Any]) -> dict[str, Node]:
    # An object's third item is its Go struct's name (`Container`), which kube's decoding errors name.
    objects: dict[str, Node] = {
        name: (
            OBJECT,
            {},
            name.rsplit(".", 1)[-1],
            OMIT_EMPTY.get(name, frozenset()),
            FIRST_MINOR.get(name, {}),
        )
        for name in table["components"]
    }
    # Lists and maps of untyped leaves are kept (their items are not walked), so a string where a list
    # belongs (`command: "sleep 3600"`) is found.
    leaf_list: Node = (LIST, _ANY)
    leaf_map: Node = (MAP, _ANY)

    def node(text: str) -> Node:
        if text.startswith("@"):
            return objects.get(text[1:], _ANY)
        if text.startswith("[]"):
            inner = node(text[2:])
            return leaf_list if inner is _ANY else (LIST, inner)
        if text.startswith("{}"):
            inner = node(text[2:])
            return leaf_map if inner is _ANY else (MAP, inner)
        return _SCALARS.get(text, _ANY)

    for name, fields in table["components"].items():
        objects[name][1].update({f: node(t) for f, t in fields.items()})
    return objects


@dataclass
class FieldTree:
    """The fields of the kinds given; built (or read from the cache) on first use."""

    kinds: Kinds
    cache: Path | None = None
    _roots: dict[tuple[str, str, str], str] | None = field(default=None, repr=False)
    _objects: dict[str, Node] = field(default_factory=dict, repr=False)
    _names: dict[int, str] | None = field(default=None, repr=False)

    def _loaded(self) -> dict[tuple[str, str, str], str]:
        if self._roots is None:
            self._roots, self._objects = _compiled(self.kinds, self.cache or _cache_path())
        return self._roots

    def root(self, group: str, version: str, kind: str) -> str | None:
        """The kind's component, or None when its fields are not known (it is then not checked)."""
        return self._loaded().get((group, version, kind))

    def node(self, component: str) -> Node | None:
        """The compiled node of a component (`io.k8s.api.core.v1.Pod`), for walkers of their own."""
        self._loaded()
        return self._objects.get(component)

    def component_of(self, node: Node) -> str | None:
        """The component an object node was compiled from."""
        self._loaded()
        if self._names is None:
            self._names = {id(n): name for name, n in self._objects.items()}
        return self._names.get(id(node))

    def prune(
        self,
        component: str,
        obj: Any,
        path: tuple[str | int, ...] = (),
        *,
        zeros: bool = False,
        minor: int = LATEST,
        kept_zeros: list[str] | None = None,
    ) -> list[Finding]:
        """Removes, in place, the fields `obj` has that the component lacks; returns them. Raises
        FieldTypeError for a field whose JSON type kube's decoder would refuse. With `zeros` (a whole
        object, not a patch, where `false` may undo a `true`), the `omitempty` fields holding their zero
        value go too, as kube's round trip through Go structs drops them; without it, such fields are
        kept and, given `kept_zeros`, their paths appended to it (the patched object must lose them).
        A field first released after Kubernetes 1.`minor` is unknown, as to that release's API server."""
        self._loaded()
        found: list[Finding] = []
        _walk(self._objects.get(component, _ANY), obj, list(path), found, "", zeros, minor, kept_zeros)
        return found

    def prune_at(
        self,
        component: str,
        pointer: list[str],
        value: Any,
        *,
        minor: int = LATEST,
        kept_zeros: list[str] | None = None,
    ) -> tuple[bool, list[Finding]]:
        """For a JSON patch operation: whether the field its path names exists (in Kubernetes 1.`minor`),
        and the unknown fields of its value (removed from it); `kept_zeros` as for `prune`."""
        self._loaded()
        node = self._objects.get(component, _ANY)
        stack: list[str | int] = []
        struct = ""
        last = len(pointer) - 1
        for depth, segment in enumerate(pointer):
            if node[0] == OBJECT:
                if segment not in node[1] or node[4].get(segment, 0) > minor:
                    return False, [Finding(_path([*stack, segment]))]
                zero = value is not None and not value
                if zero and kept_zeros is not None and depth == last and segment in node[3]:
                    kept_zeros.append(_path([*stack, segment]))
                struct = node[2]
                node = node[1][segment]
                stack.append(segment)
            elif node[0] == LIST:
                node = node[1]
                stack.append(int(segment) if segment.isdigit() else segment)
            elif node[0] == MAP:
                node = node[1]
                stack.append(segment)
            else:
                return True, []
        found: list[Finding] = []
        if value is not None:
            _walk(node, value, stack, found, struct, False, minor, kept_zeros)
        return True, found


# map[string]string fields: the table cannot tell them from maps of quantities, so they are named.
_STRING_MAPS = frozenset({"labels", "annotations", "matchLabels", "nodeSelector"})


def json_type(value: Any) -> str:
    """How Go's JSON decoder names a value's type in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def unmarshal_message(value: Any, field: str, wanted: str, *, literal: bool = False) -> str:
    """The decoding error kube-apiserver gives for a field of the wrong JSON type; with `literal`, for a
    number that is no integer of the field's width, which Go's decoder names with its text."""
    what = f"number {value!r}" if literal else json_type(value)
    return f"json: cannot unmarshal {what} into Go struct field {field} of type {wanted}"


class FieldTypeError(ValueError):
    """A field of the wrong JSON type, which kube's decoder refuses before anything else (a 400)."""

    def __init__(
        self, struct: str, stack: list[str | int], value: Any, wanted: str, *, literal: bool = False
    ) -> None:
        path = ".".join(str(part) for part in stack if isinstance(part, str))
        super().__init__(unmarshal_message(value, f"{struct}.{path}", wanted, literal=literal))


def _go_type(node: Node) -> str:
    if node[0] == OBJECT:
        return f"v1.{node[2]}"
    if node[0] == LIST:
        return "[]" + ("string" if node[1] is _ANY else _go_type(node[1]))
    if node[0] == MAP:
        return "map[string]" + ("string" if node[1] is _ANY else _go_type(node[1]))
    if node[0] >= EXACT:
        return str(node[2])
    return "string"


def _check_scalar(node: Node, value: Any, stack: list[str | int], struct: str) -> None:
    """Raises FieldTypeError unless `value` decodes into the scalar: called only for a value whose
    Python type is not the scalar's own, or an integer beyond its width."""
    tag = node[0]
    if tag == FLOAT and type(value) is int:
        return
    if tag == INTEGER and type(value) in (int, float):
        # Go parses the literal as an integer: a fraction, an exponent or too many digits is refused
        # with the literal in the message (`number 1.5`), as an integer too wide for the field is.
        raise FieldTypeError(struct, stack, value, node[2], literal=True)
    raise FieldTypeError(struct, stack, value, node[2])


def _walk(
    node: Node,
    value: Any,
    stack: list[str | int],
    found: list[Finding],
    struct: str = "",
    zeros: bool = False,
    minor: int = LATEST,
    kept: list[str] | None = None,
) -> None:
    tag = node[0]
    if tag == OBJECT:
        if type(value) is not dict:
            if stack and struct:
                raise FieldTypeError(struct, stack, value, _go_type(node))
            return
        fields = node[1]
        omitted = node[3] if zeros or kept is not None else ()
        newer = node[4]
        unknown = None
        for name, item in value.items():
            sub = fields.get(name)
            if sub is None or (newer and newer.get(name, 0) > minor):
                if name[:1] != "$":  # a strategic merge patch's directive
                    # Named in the order of the document, as kube's decoder meets them.
                    found.append(Finding(_path([*stack, name])))
                    unknown = [*(unknown or ()), name]
            elif item is not None and (kind := sub[0]):
                if kind >= EXACT:
                    if type(item) is not sub[1] or (kind == INTEGER and not -sub[3] <= item < sub[3]):
                        stack.append(name)
                        _check_scalar(sub, item, stack, node[2])
                        stack.pop()
                else:
                    stack.append(name)
                    _walk(sub, item, stack, found, node[2], zeros, minor, kept)
                    stack.pop()
                if not item and name in omitted:
                    if zeros:
                        unknown = [*(unknown or ()), name]  # the zero of an omitempty field, checked above
                    elif kept is not None:
                        kept.append(_path([*stack, name]))
        for name in unknown or ():
            del value[name]
    elif tag >= EXACT:  # a JSON patch's value for a scalar field
        if type(value) is not node[1] or (tag == INTEGER and not -node[3] <= value < node[3]):
            _check_scalar(node, value, stack, struct)
    elif tag == LIST:
        if type(value) is not list:
            raise FieldTypeError(struct, stack, value, _go_type(node))
        sub = node[1]
        if sub is not _ANY:
            for i, item in enumerate(value):
                if item is not None:
                    stack.append(i)
                    _walk(sub, item, stack, found, struct, zeros, minor, kept)
                    stack.pop()
    elif tag == MAP:
        if type(value) is not dict:
            raise FieldTypeError(struct, stack, value, _go_type(node))
        sub = node[1]
        if sub is not _ANY:
            for key, item in value.items():
                if item is not None:
                    stack.append(key)
                    _walk(sub, item, stack, found, struct, zeros, minor, kept)
                    stack.pop()
        elif stack and stack[-1] in _STRING_MAPS:
            for item in value.values():
                if item is not None and type(item) is not str:
                    raise FieldTypeError(struct, stack, item, "string")


def _path(stack: list[str | int]) -> str:
    """kube's way of naming a field: `spec.containers[0].image`."""
    text = ""
    for part in stack:
        text = f"{text}[{part}]" if isinstance(part, int) else (f"{text}.{part}" if text else part)
    return text


def pointer_segments(pointer: str) -> Iterator[str]:
    """A JSON pointer's segments, unescaped."""
    for part in pointer.split("/")[1:]:
        yield part.replace("~1", "/").replace("~0", "~")


if __name__ == "__main__":
    # `make install` runs this, so the first lab need not build its tables on its first write.
    from tenantgpu.apiserver.kamajischemas import kamaji_schemas_cache, object_meta_schema

    print(f"{len(load_table(checked_kinds(), _cache_path())['kinds'])} kinds' fields in {_cache_path()}")
    object_meta_schema()  # derives and keeps all of them
    print(f"Kamaji's CRD schemas in {kamaji_schemas_cache()}")

"""OpenAPI v3 schemas of the served kinds, derived at run time from the official `kubernetes` client's models.

The client's generated model classes (`kubernetes.client.models.V1Pod` …) carry what `kubectl explain`
prints: `openapi_types` (field → type text such as `List[V1Container]`, `Dict[str, str]`, `datetime`),
`attribute_map` (field → JSON name) and each field's description. Two generations of the client fall in
the supported range: up to 36 the models are plain classes whose property getters hold the descriptions
in their docstrings and whose setters refuse None for required fields; from 37 on they are pydantic
models whose `model_fields` give descriptions, requiredness and, for IntOrString fields, a `int | str`
annotation where `openapi_types` only says `object`. Both are read here, so no upstream text is kept in
this repository: a description the installed client lacks stays empty.

Component names follow kube's (`io.k8s.api.core.v1.PodSpec`, `…meta.v1.ObjectMeta`): apimachinery's
meta types (a handful of names, and what they refer to) go under `io.k8s.apimachinery.pkg.apis.meta.v1`,
a model reachable from one of kube's core kinds is core, and anything else belongs to the group of the
kind it was reached from. `kubectl explain` shows the last segment (`<PodSpec>`, `<[]Container>`), as
against a real cluster.

Building is pure and memoised: a process serving many tenants builds each kind once, on the first
`/openapi` request rather than at start-up (importing the client alone takes a noticeable fraction of
a second).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["INT_OR_STRING", "QUANTITY", "KindSchemas", "kind_schemas", "models_version", "schema_name"]

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_REF = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1"

# apimachinery's meta/v1 types as the client names them (V1<name>); kube files them, and the types they
# refer to, outside any API group.
_META_TYPES = frozenset(
    {
        "Condition",
        "DeleteOptions",
        "FieldSelectorRequirement",
        "LabelSelector",
        "LabelSelectorRequirement",
        "ListMeta",
        "ManagedFieldsEntry",
        "ObjectMeta",
        "OwnerReference",
        "Preconditions",
        "Status",
        "StatusCause",
        "StatusDetails",
    }
)

_META_ROOTS = tuple(sorted(f"V1{name}" for name in _META_TYPES))

# kube's core/v1 kinds: every model reachable from one of them is a core type, even when another
# group's kind embeds it (a Deployment's template is a core PodTemplateSpec).
_CORE_KINDS = (
    "V1Binding",
    "V1ConfigMap",
    "V1Endpoints",
    "CoreV1Event",
    "V1LimitRange",
    "V1Namespace",
    "V1Node",
    "V1PersistentVolume",
    "V1PersistentVolumeClaim",
    "V1Pod",
    "V1PodTemplate",
    "V1ReplicationController",
    "V1ResourceQuota",
    "V1Secret",
    "V1Service",
    "V1ServiceAccount",
)

# Clients before 37 say only `object` for an IntOrString field; these are kube's IntOrString fields there.
_LEGACY_INT_OR_STRING = frozenset(
    {
        ("V1HTTPGetAction", "port"),
        ("V1NetworkPolicyPort", "port"),
        ("V1PodDisruptionBudgetSpec", "max_unavailable"),
        ("V1PodDisruptionBudgetSpec", "min_available"),
        ("V1RollingUpdateDaemonSet", "max_surge"),
        ("V1RollingUpdateDaemonSet", "max_unavailable"),
        ("V1RollingUpdateDeployment", "max_surge"),
        ("V1RollingUpdateDeployment", "max_unavailable"),
        ("V1RollingUpdateStatefulSetStrategy", "max_unavailable"),
        ("V1ServicePort", "target_port"),
        ("V1TCPSocketAction", "port"),
    }
)

# The client's models type quantities as strings; these fields are resource.Quantity in kube's OpenAPI,
# where `kubectl explain` shows `<Quantity>` and `<map[string]Quantity>` (model, JSON field). Read off
# kube's published OpenAPI document, for the kinds the lab serves.
_QUANTITY_FIELDS = frozenset(
    {
        ("V1ResourceRequirements", "limits"),
        ("V1ResourceRequirements", "requests"),
        ("V1VolumeResourceRequirements", "limits"),
        ("V1VolumeResourceRequirements", "requests"),
        ("V1PodSpec", "overhead"),
        ("V1Overhead", "podFixed"),
        ("V1PodStatus", "allocatedResources"),
        ("V1ContainerStatus", "allocatedResources"),
        ("V1NodeStatus", "allocatable"),
        ("V1NodeStatus", "capacity"),
        ("V1ResourceQuotaSpec", "hard"),
        ("V1ResourceQuotaStatus", "hard"),
        ("V1ResourceQuotaStatus", "used"),
        ("V1LimitRangeItem", "default"),
        ("V1LimitRangeItem", "defaultRequest"),
        ("V1LimitRangeItem", "max"),
        ("V1LimitRangeItem", "maxLimitRequestRatio"),
        ("V1LimitRangeItem", "min"),
        ("V1PersistentVolumeSpec", "capacity"),
        ("V1PersistentVolumeClaimStatus", "capacity"),
        ("V1PersistentVolumeClaimStatus", "allocatedResources"),
        ("V1EmptyDirVolumeSource", "sizeLimit"),
        ("V1ResourceFieldSelector", "divisor"),
    }
)
# As kube's OpenAPI v3 gives it (OpenAPIV3OneOfTypes): a string or a number, with no `type` of its own,
# so that explain names it <Quantity>.
_QUANTITY_SCHEMA: dict[str, Any] = {
    "description": "A decimal or binary amount with an optional suffix, such as 500m, 2 or 1Gi.",
    "oneOf": [{"type": "string"}, {"type": "number"}],
}

_PRIMITIVES: dict[str, dict[str, str]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    # kube refers to meta/v1 Time or MicroTime, both date-time strings: explain shows <string> either way.
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytes": {"type": "string", "format": "byte"},
    "object": {"type": "object"},
}
_LIST = re.compile(r"[Ll]ist\[(.+)\]")
_DICT = re.compile(r"(?:[Dd]ict\[|dict\()str, (.+)[\])]")
_CLASS = re.compile(r"(?P<prefix>[A-Z][a-z]+)?(?P<version>V\d+(?:(?:alpha|beta)\d+)?)(?P<name>[A-Z]\w*)")
_NOQA = re.compile(r"\s*# noqa: E501\s*$")

_INT_OR_STRING_SCHEMA: dict[str, Any] = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}


def schema_name(group: str, version: str, kind: str) -> str:
    """The component name kube uses: `io.k8s.api.core.v1.Pod`, `io.clastix.kamaji.v1alpha1.DataStore`."""
    if group == "":
        return f"io.k8s.api.core.{version}.{kind}"
    if group.endswith(".k8s.io"):
        return f"io.k8s.api.{group.split('.')[0]}.{version}.{kind}"
    if "." not in group:
        return f"io.k8s.api.{group}.{version}.{kind}"
    return ".".join(reversed(group.split("."))) + f".{version}.{kind}"


@dataclass(frozen=True)
class KindSchemas:
    """A kind's components: `name` and `list_name` are its and its list's (`list_name` "" when the client
    has no list model); `components` holds them and every schema they refer to. Treat it as read-only:
    it is shared by every server of the process."""

    name: str
    list_name: str
    components: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class _Field:
    json_name: str
    type_text: str
    description: str
    required: bool
    int_or_string: bool
    quantity: bool = False


def models_version() -> str:
    """The installed client's version, which the schemas follow; read without importing the client."""
    try:
        return importlib.metadata.version("kubernetes")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _models() -> types.ModuleType:
    return importlib.import_module("kubernetes.client.models")


def _model(class_name: str) -> type | None:
    found = getattr(_models(), class_name, None)
    if isinstance(found, type) and hasattr(found, "openapi_types") and hasattr(found, "attribute_map"):
        return found
    return None


def _class_description(model: type) -> str:
    text = inspect.cleandoc(model.__doc__ or "").split("\nAttributes:")[0].strip()
    if text == model.__name__ or "auto generated by OpenAPI Generator" in text:
        return ""
    return text


def _getter_description(model: type, attribute: str) -> str:
    """A pre-37 getter's docstring: "Gets the x of this Y.", the description, then `:return:`/`:rtype:`."""
    prop = getattr(model, attribute, None)
    doc = getattr(getattr(prop, "fget", None), "__doc__", None) or ""
    lines = inspect.cleandoc(doc).splitlines()[1:]
    kept: list[str] = []
    for line in lines:
        if line.startswith((":return:", ":rtype:")):
            break
        kept.append(_NOQA.sub("", line))
    return "\n".join(kept).strip()


def _refuses_none(model: type, attribute: str) -> bool:
    """Whether a pre-37 model's setter refuses None with client-side validation on: a required field."""
    prop = getattr(model, attribute, None)
    if not isinstance(prop, property) or prop.fset is None:
        return False
    probe = model.__new__(model)
    probe.local_vars_configuration = types.SimpleNamespace(client_side_validation=True)
    try:
        prop.fset(probe, None)
    except ValueError:
        return True
    return False


def _base_types(annotation: Any) -> set[Any]:
    """The plain types a pydantic annotation admits, through Optional, Union and Annotated."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _base_types(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return {t for arg in typing.get_args(annotation) for t in _base_types(arg)}
    return {annotation}


def _fields(model: type) -> tuple[_Field, ...]:
    # A pydantic model renames fields that clash with Python (`_continue` is `var_continue`); the JSON
    # name, its serialization alias, is what both generations agree on.
    pydantic_fields = {
        info.serialization_alias or name: info for name, info in getattr(model, "model_fields", {}).items()
    }
    found: list[_Field] = []
    for attribute, type_text in model.openapi_types.items():
        json_name = model.attribute_map[attribute]
        if pydantic_fields:
            info = pydantic_fields.get(json_name)
            description = (info.description if info else None) or ""
            required = bool(info and info.is_required())
            admits = _base_types(info.annotation) - {type(None)} if info else set()
            int_or_string = type_text == "object" and admits == {int, str}
        else:
            description = _getter_description(model, attribute)
            required = _refuses_none(model, attribute)
            int_or_string = (model.__name__, attribute) in _LEGACY_INT_OR_STRING
        quantity = (model.__name__, json_name) in _QUANTITY_FIELDS
        found.append(_Field(json_name, type_text, description, required, int_or_string, quantity))
    return tuple(found)


def _type_schema(type_text: str, ref: Callable[[str], str]) -> dict[str, Any]:
    text = type_text.strip()
    if match := _LIST.fullmatch(text):
        return {"type": "array", "items": _type_schema(match[1], ref)}
    if match := _DICT.fullmatch(text):
        return {"type": "object", "additionalProperties": _type_schema(match[1], ref)}
    if text in _PRIMITIVES:
        return dict(_PRIMITIVES[text])
    if _model(text) is not None:
        return {"$ref": _REF + ref(text)}
    return {"type": "object"}


def _referenced(type_text: str) -> list[str]:
    tokens = re.findall(r"[A-Z]\w*", type_text)
    return [token for token in tokens if token not in ("List", "Dict") and _model(token) is not None]


@functools.cache
def _closure(roots: tuple[str, ...]) -> frozenset[str]:
    """The model classes reachable from `roots`, themselves included."""
    seen: set[str] = set()
    pending = [name for name in roots if _model(name) is not None]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        model = _model(name)
        assert model is not None
        for type_text in model.openapi_types.values():
            pending.extend(_referenced(type_text))
    return frozenset(seen)


def _meta_models() -> frozenset[str]:
    return _closure(_META_ROOTS)


def _core_models() -> frozenset[str]:
    return _closure(_CORE_KINDS) - _meta_models()


def _owner_group(class_name: str, group: str) -> str:
    """The group of a model reached from a kind of `group`: "" for core and meta types, whose names and
    schemas do not depend on the kind that reached them."""
    if not group:
        return ""  # everything a core kind reaches is core or meta: no need to import every core model
    if class_name in _meta_models() or class_name in _core_models():
        return ""
    return group


def _component_name(class_name: str, group: str) -> str:
    match = _CLASS.fullmatch(class_name)
    if match is None:
        return class_name
    version, name = match["version"].lower(), match["name"]
    if match["prefix"]:
        # The client prefixes a model with its group when another group has one of the same name.
        return f"io.k8s.api.{match['prefix'].lower()}.{version}.{name}"
    if class_name in _meta_models():
        return f"{_META}.{name}"
    return schema_name(_owner_group(class_name, group), version, name)


def _field_schema(field: _Field, ref: Callable[[str], str]) -> dict[str, Any]:
    schema: dict[str, Any]
    if field.int_or_string:
        schema = {"$ref": _REF + INT_OR_STRING}
    elif field.quantity:
        quantity = {"$ref": _REF + QUANTITY}
        schema = (
            {"type": "object", "additionalProperties": quantity}
            if _DICT.fullmatch(field.type_text)
            else quantity
        )
    else:
        schema = _type_schema(field.type_text, ref)
    if "$ref" in schema and field.description:
        # OpenAPI 3.0 ignores a $ref's siblings, so kube wraps the reference to describe the field.
        schema = {"allOf": [schema]}
    if field.description:
        schema["description"] = field.description
    return schema


@functools.cache
def _component(class_name: str, group: str) -> tuple[dict[str, Any], tuple[str, ...], bool, bool]:
    """One model's schema, the models it refers to, and whether it uses IntOrString and Quantity."""
    model = _model(class_name)
    assert model is not None
    referenced: list[str] = []

    def ref(name: str) -> str:
        referenced.append(name)
        return _component_name(name, group)

    properties: dict[str, Any] = {}
    required: list[str] = []
    int_or_string = quantity = False
    for field in _fields(model):
        properties[field.json_name] = _field_schema(field, ref)
        int_or_string = int_or_string or field.int_or_string
        quantity = quantity or field.quantity
        if field.required:
            required.append(field.json_name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if description := _class_description(model):
        schema["description"] = description
    if required:
        schema["required"] = required
    return schema, tuple(dict.fromkeys(referenced)), int_or_string, quantity


def _kind_class(group: str, version: str, kind: str) -> str | None:
    """The client's model of a kube kind: `V1Pod`, or `CoreV1Event` where the name is shared by groups."""
    if group and "." in group and not group.endswith(".k8s.io"):
        return None  # not one of kube's groups (a CRD such as Kamaji's): the client has no model of it
    client_version = version[:1].upper() + version[1:]
    prefix = (group.split(".")[0] or "core").capitalize()
    for candidate in (f"{prefix}{client_version}{kind}", f"{client_version}{kind}"):
        if _model(candidate) is not None:
            return candidate
    return None


def _gvk(group: str, version: str, kind: str) -> list[dict[str, str]]:
    return [{"group": group, "version": version, "kind": kind}]


@functools.cache
def kind_schemas(group: str, version: str, kind: str) -> KindSchemas | None:
    """The schemas of `kind` and its list kind with all they refer to, or None when the client has no model.

    The kind's and the list's schemas carry `x-kubernetes-group-version-kind`, which is how kubectl finds them.
    """
    kind_class = _kind_class(group, version, kind)
    if kind_class is None:
        return None
    list_class = _kind_class(group, version, f"{kind}List") or ""
    components: dict[str, Mapping[str, Any]] = {}
    pending = [(name, group) for name in (kind_class, list_class) if name]
    while pending:
        class_name, owner = pending.pop()
        effective = _owner_group(class_name, owner)
        name = _component_name(class_name, effective)
        if name in components:
            continue
        schema, referenced, int_or_string, quantity = _component(class_name, effective)
        components[name] = schema
        if int_or_string:
            components[INT_OR_STRING] = _INT_OR_STRING_SCHEMA
        if quantity:
            components[QUANTITY] = _QUANTITY_SCHEMA
        pending.extend((ref, effective) for ref in referenced)
    name = _component_name(kind_class, _owner_group(kind_class, group))
    components[name] = {**components[name], "x-kubernetes-group-version-kind": _gvk(group, version, kind)}
    list_name = ""
    if list_class:
        list_name = _component_name(list_class, _owner_group(list_class, group))
        components[list_name] = {
            **components[list_name],
            "x-kubernetes-group-version-kind": _gvk(group, version, f"{kind}List"),
        }
    return KindSchemas(name, list_name, components)

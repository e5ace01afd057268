"""Schemas derived from the installed `kubernetes` client's models: the types and texts `kubectl explain` shows."""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from kubernetes.client import models

from tenantgpu.apiserver import schemas
from tenantgpu.apiserver.kinds import BUILTIN_KINDS, WORKLOAD_KINDS
from tenantgpu.apiserver.schemas import INT_OR_STRING, QUANTITY, KindSchemas, kind_schemas

META = "io.k8s.apimachinery.pkg.apis.meta.v1"


def ref(name: str) -> str:
    return f"#/components/schemas/{name}"


def target(field: dict[str, Any]) -> str:
    """The component a field refers to, whether bare or wrapped in allOf to carry a description."""
    return field["$ref"] if "$ref" in field else field["allOf"][0]["$ref"]


def client_description(model: type, attribute: str) -> str:
    """The client's own text for a field, read as each client generation keeps it."""
    fields = getattr(model, "model_fields", None)
    if fields:
        return fields[attribute].description or ""
    return inspect.getdoc(getattr(model, attribute)) or ""


def found(group: str, version: str, kind: str) -> KindSchemas:
    result = kind_schemas(group, version, kind)
    assert result is not None
    return result


def test_pod_spec_requires_an_array_of_containers() -> None:
    pod = found("", "v1", "Pod")
    assert (pod.name, pod.list_name) == ("io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList")
    spec = pod.components["io.k8s.api.core.v1.PodSpec"]
    containers = spec["properties"]["containers"]
    assert containers["type"] == "array"
    assert containers["items"] == {"$ref": ref("io.k8s.api.core.v1.Container")}
    assert "containers" in spec["required"]
    assert "name" in pod.components["io.k8s.api.core.v1.Container"]["required"]
    assert "nodeName" not in spec["required"]


def test_field_descriptions_are_the_clients_text() -> None:
    spec = found("", "v1", "Pod").components["io.k8s.api.core.v1.PodSpec"]
    described = spec["properties"]["containers"]["description"]
    assert described and described in client_description(models.V1PodSpec, "containers")
    assert "noqa" not in described and ":return:" not in described


def test_metadata_and_times_are_apimachinery_types() -> None:
    pod = found("", "v1", "Pod")
    assert target(pod.components[pod.name]["properties"]["metadata"]) == ref(f"{META}.ObjectMeta")
    created = pod.components[f"{META}.ObjectMeta"]["properties"]["creationTimestamp"]
    assert (created["type"], created["format"]) == ("string", "date-time")
    assert target(pod.components[f"{META}.ObjectMeta"]["properties"]["ownerReferences"]["items"]) == ref(
        f"{META}.OwnerReference"
    )
    labels = pod.components[f"{META}.ObjectMeta"]["properties"]["labels"]
    assert labels["type"] == "object" and labels["additionalProperties"] == {"type": "string"}


def test_resource_quantities_refer_to_quantity_as_in_kubes_openapi() -> None:
    """The client's models type quantities as strings; kube's OpenAPI refers to resource.Quantity, which
    `kubectl explain` shows as `<map[string]Quantity>` and `<Quantity>`."""
    pod = found("", "v1", "Pod")
    requirements = pod.components["io.k8s.api.core.v1.ResourceRequirements"]
    assert requirements["properties"]["limits"]["additionalProperties"] == {"$ref": ref(QUANTITY)}
    empty_dir = pod.components["io.k8s.api.core.v1.EmptyDirVolumeSource"]["properties"]["sizeLimit"]
    assert target(empty_dir) == ref(QUANTITY)
    assert "type" not in pod.components[QUANTITY]  # a string or a number: explain names it <Quantity>
    # a map of strings that holds no quantities stays one
    node_selector = pod.components["io.k8s.api.core.v1.PodSpec"]["properties"]["nodeSelector"]
    assert node_selector["additionalProperties"] == {"type": "string"}


def test_deployment_rolling_update_takes_int_or_string() -> None:
    deployment = found("apps", "v1", "Deployment")
    rolling = deployment.components["io.k8s.api.apps.v1.RollingUpdateDeployment"]["properties"]
    for name in ("maxSurge", "maxUnavailable"):
        assert target(rolling[name]) == ref(INT_OR_STRING)
        assert rolling[name]["description"]
    assert deployment.components[INT_OR_STRING]["x-kubernetes-int-or-string"] is True
    assert "type" not in deployment.components[INT_OR_STRING]  # so explain names it <IntOrString>
    port = found("", "v1", "Service").components["io.k8s.api.core.v1.ServicePort"]["properties"]
    assert target(port["targetPort"]) == ref(INT_OR_STRING)
    assert port["port"]["type"] == "integer"


def test_components_are_named_as_kube_names_them() -> None:
    deployment = found("apps", "v1", "Deployment")
    spec = deployment.components["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]
    assert target(spec["template"]) == ref(
        "io.k8s.api.core.v1.PodTemplateSpec"
    )  # core, though apps embeds it
    assert target(spec["selector"]) == ref(f"{META}.LabelSelector")
    assert target(spec["strategy"]) == ref("io.k8s.api.apps.v1.DeploymentStrategy")
    job = found("batch", "v1", "Job")
    assert target(job.components[job.name]["properties"]["spec"]) == ref("io.k8s.api.batch.v1.JobSpec")
    assert "io.k8s.api.core.v1.PodSpec" in job.components
    lease = found("coordination.k8s.io", "v1", "Lease")
    assert lease.name == "io.k8s.api.coordination.v1.Lease"
    event = found("", "v1", "Event")  # the client calls it CoreV1Event beside events.k8s.io's
    assert event.name == "io.k8s.api.core.v1.Event"


def test_kind_and_list_carry_their_group_version_kind() -> None:
    lease = found("coordination.k8s.io", "v1", "Lease")
    gvk = {"group": "coordination.k8s.io", "version": "v1"}
    assert lease.components[lease.name]["x-kubernetes-group-version-kind"] == [{**gvk, "kind": "Lease"}]
    assert lease.components[lease.list_name]["x-kubernetes-group-version-kind"] == [
        {**gvk, "kind": "LeaseList"}
    ]
    items = lease.components[lease.list_name]["properties"]["items"]
    assert items["items"] == {"$ref": ref(lease.name)}
    assert "x-kubernetes-preserve-unknown-fields" not in lease.components[lease.name]


def test_kinds_without_a_client_model_get_none() -> None:
    assert kind_schemas("kamaji.clastix.io", "v1alpha1", "TenantControlPlane") is None
    assert kind_schemas("", "v1", "NoSuchKind") is None


# The client models only SelfSubjectReview's v1; the beta is served for kubectl 1.27 without a schema.
MODELLED = [
    k
    for k in [*BUILTIN_KINDS, *WORKLOAD_KINDS]
    if (k.group, k.version) != ("authentication.k8s.io", "v1beta1")
]


def test_only_the_self_subject_review_beta_is_served_without_a_model() -> None:
    unmodelled = [
        k for k in [*BUILTIN_KINDS, *WORKLOAD_KINDS] if kind_schemas(k.group, k.version, k.kind) is None
    ]
    assert [(k.group, k.version, k.kind) for k in unmodelled] == [
        ("authentication.k8s.io", "v1beta1", "SelfSubjectReview")
    ]


@pytest.mark.parametrize("kind", MODELLED, ids=lambda k: f"{k.kind}.{k.version}")
def test_every_served_kind_has_a_closed_schema(kind: Any) -> None:
    result = found(kind.group, kind.version, kind.kind)

    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for reference in refs(result.components):
        assert reference.removeprefix("#/components/schemas/") in result.components


def test_building_is_memoised() -> None:
    assert kind_schemas("", "v1", "Pod") is kind_schemas("", "v1", "Pod")


# --- the pre-37 client: plain classes, texts in getter docstrings, required fields refuse None ---


class V1Widget:
    """NOTE: This class is auto generated by OpenAPI Generator.

    Do not edit the class manually.
    """

    openapi_types: ClassVar[dict[str, str]] = {"kind": "str", "spec": "V1WidgetSpec", "created": "datetime"}
    attribute_map: ClassVar[dict[str, str]] = {"kind": "kind", "spec": "spec", "created": "createdAt"}

    @property
    def kind(self) -> str:
        """Gets the kind of this V1Widget.  # noqa: E501

        What sort of thing this is.  # noqa: E501

        :return: The kind of this V1Widget.  # noqa: E501
        :rtype: str
        """
        return ""

    @kind.setter
    def kind(self, kind: str) -> None:
        pass

    @property
    def spec(self) -> None:
        return None

    @spec.setter
    def spec(self, spec: object) -> None:
        if self.local_vars_configuration.client_side_validation and spec is None:  # type: ignore[attr-defined]
            raise ValueError("Invalid value for `spec`, must not be `None`")


class V1WidgetSpec:
    """NOTE: This class is auto generated by OpenAPI Generator."""

    openapi_types: ClassVar[dict[str, str]] = {"ports": "list[V1ServicePort]", "sizes": "dict(str, int)"}
    attribute_map: ClassVar[dict[str, str]] = {"ports": "ports", "sizes": "sizes"}


class V1ServicePort:
    openapi_types: ClassVar[dict[str, str]] = {"target_port": "object", "extra": "object"}
    attribute_map: ClassVar[dict[str, str]] = {"target_port": "targetPort", "extra": "extra"}


@pytest.fixture
def legacy_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    memos = (schemas.kind_schemas, schemas._component, schemas._closure)
    for memo in memos:
        memo.cache_clear()
    fake = types.SimpleNamespace(V1Widget=V1Widget, V1WidgetSpec=V1WidgetSpec, V1ServicePort=V1ServicePort)
    monkeypatch.setattr(schemas, "_models", lambda: fake)
    yield
    for memo in memos:
        memo.cache_clear()


@pytest.mark.usefixtures("legacy_client")
def test_pre_37_client_models_are_read_too() -> None:
    widget = found("example.k8s.io", "v1", "Widget")
    assert widget.list_name == ""
    schema = widget.components[widget.name]
    assert "description" not in schema  # the generator's class docstring is boilerplate
    assert schema["properties"]["kind"] == {"type": "string", "description": "What sort of thing this is."}
    assert schema["required"] == ["spec"]
    assert schema["properties"]["createdAt"]["format"] == "date-time"
    spec = widget.components["io.k8s.api.example.v1.WidgetSpec"]["properties"]
    assert spec["sizes"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    port = widget.components["io.k8s.api.example.v1.ServicePort"]["properties"]
    assert target(port["targetPort"]) == ref(INT_OR_STRING)
    assert port["extra"] == {"type": "object"}

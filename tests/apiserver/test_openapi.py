"""The OpenAPI v3 documents have the shape kubectl looks for before it trusts server-side field validation,
and the schemas `kubectl explain` walks."""

from typing import Any

import pytest

from tenantgpu.apiserver import openapi
from tenantgpu.apiserver.openapi import (
    KindSchemaInfo,
    openapi_v3_group_version,
    openapi_v3_hash,
    openapi_v3_root,
    openapi_v3_sources,
    schema_name,
)

POD = KindSchemaInfo("", "v1", "Pod", True, "pods")
NODE = KindSchemaInfo("", "v1", "Node", False, "nodes")
MWC = KindSchemaInfo(
    "admissionregistration.k8s.io",
    "v1",
    "MutatingWebhookConfiguration",
    False,
    "mutatingwebhookconfigurations",
)
TCP = KindSchemaInfo("kamaji.clastix.io", "v1alpha1", "TenantControlPlane", True, "tenantcontrolplanes")


def supports_field_validation(document: dict[str, Any], gvk: dict[str, str]) -> bool:
    """kubectl's rule: a PATCH operation tagged with the GVK must list the fieldValidation query parameter."""
    for item in document["paths"].values():
        patch = item.get("patch")
        if patch is None or patch.get("x-kubernetes-group-version-kind") != gvk:
            continue
        return any(p["name"] == "fieldValidation" and p["in"] == "query" for p in patch.get("parameters", []))
    return False


def schema_for(document: dict[str, Any], gvk: dict[str, str]) -> dict[str, Any] | None:
    for schema in document["components"]["schemas"].values():
        if gvk in schema.get("x-kubernetes-group-version-kind", []):
            return schema
    return None


def test_root_index_points_at_each_group_version_with_a_hash() -> None:
    core = openapi_v3_group_version("", "v1", [POD, NODE])
    root = openapi_v3_root(["v1", "admissionregistration.k8s.io/v1"], documents={"v1": core})
    assert set(root["paths"]) == {"api/v1", "apis/admissionregistration.k8s.io/v1"}
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    assert url == f"/openapi/v3/api/v1?hash={openapi_v3_hash(core)}"
    assert root["paths"]["apis/admissionregistration.k8s.io/v1"]["serverRelativeURL"].startswith(
        "/openapi/v3/apis/admissionregistration.k8s.io/v1?hash="
    )


def test_hash_follows_the_document() -> None:
    one = openapi_v3_group_version("", "v1", [POD])
    two = openapi_v3_group_version("", "v1", [POD, NODE])
    assert openapi_v3_hash(one) != openapi_v3_hash(two)
    assert openapi_v3_hash(one) == openapi_v3_hash(openapi_v3_group_version("", "v1", [POD]))


@pytest.mark.parametrize("info", [POD, NODE, MWC, TCP])
def test_each_kind_advertises_field_validation_and_its_gvk(info: KindSchemaInfo) -> None:
    document = openapi_v3_group_version(info.group, info.version, [info])
    gvk = {"group": info.group, "version": info.version, "kind": info.kind}
    assert document["openapi"].startswith("3.")
    assert supports_field_validation(document, gvk)
    schema = schema_for(document, gvk)
    assert schema is not None
    posts = [p["post"] for p in document["paths"].values() if "post" in p]
    assert [op["x-kubernetes-group-version-kind"] for op in posts] == [gvk]
    assert any(p["name"] == "fieldValidation" for p in posts[0]["parameters"])


@pytest.mark.parametrize("info", [POD, NODE, MWC])
def test_kinds_the_client_models_get_their_real_schema(info: KindSchemaInfo) -> None:
    document = openapi_v3_group_version(info.group, info.version, [info])
    schema = schema_for(document, {"group": info.group, "version": info.version, "kind": info.kind})
    assert schema is not None and "x-kubernetes-preserve-unknown-fields" not in schema
    metadata = schema["properties"]["metadata"]
    assert metadata == {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in document["components"]["schemas"]


def test_pod_spec_lists_its_containers() -> None:
    schemas = openapi_v3_group_version("", "v1", [POD])["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}


def test_kinds_without_a_model_keep_the_permissive_stub() -> None:
    widget = KindSchemaInfo("example.com", "v1", "Widget", True, "widgets")
    document = openapi_v3_group_version(widget.group, widget.version, [widget])
    gvk = {"group": widget.group, "version": widget.version, "kind": widget.kind}
    schema = schema_for(document, gvk)
    assert schema is not None and schema["x-kubernetes-preserve-unknown-fields"] is True
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata"}
    assert schema_for(document, {**gvk, "kind": "WidgetList"}) is not None


def test_kamaji_kinds_publish_their_crd_schema_inlined() -> None:
    """As apiextensions-apiserver publishes a CRD: one self-contained schema, embedded core types spelled
    out, the list kind beside it."""
    document = openapi_v3_group_version(TCP.group, TCP.version, [TCP])
    gvk = {"group": TCP.group, "version": TCP.version, "kind": TCP.kind}
    schema = schema_for(document, gvk)
    assert schema is not None and "x-kubernetes-preserve-unknown-fields" not in schema
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    deployment = schema["properties"]["spec"]["properties"]["controlPlane"]["properties"]["deployment"]
    assert deployment["properties"]["replicas"]["default"] == 2
    container = deployment["properties"]["additionalContainers"]["items"]
    assert "$ref" not in str(container) and container["properties"]["image"]["type"] == "string"
    assert schema_for(document, {**gvk, "kind": "TenantControlPlaneList"}) is not None


def test_kinds_without_a_list_model_still_have_a_list() -> None:
    binding = KindSchemaInfo("", "v1", "Binding", True, "bindings")
    document = openapi_v3_group_version("", "v1", [binding])
    assert schema_for(document, {"group": "", "version": "v1", "kind": "BindingList"}) is not None
    schema = schema_for(document, {"group": "", "version": "v1", "kind": "Binding"})
    assert schema is not None and "target" in schema["properties"]


def test_root_hashes_from_sources_without_building(monkeypatch: pytest.MonkeyPatch) -> None:
    """So kubectl applying a Kamaji object does not wait for every kind's schemas (and the client's import)."""

    def refuse(*_: object) -> None:
        raise AssertionError("built a schema for the root index")

    monkeypatch.setattr(openapi, "kind_schemas", refuse)
    one = openapi_v3_root(["v1"], documents={"v1": openapi_v3_sources("v1", [POD])})
    two = openapi_v3_root(["v1"], documents={"v1": openapi_v3_sources("v1", [POD, NODE])})
    assert one["paths"]["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    assert one != two


def test_paths_follow_scope() -> None:
    core = openapi_v3_group_version("", "v1", [POD, NODE])
    assert "/api/v1/namespaces/{namespace}/pods" in core["paths"]
    assert "/api/v1/namespaces/{namespace}/pods/{name}" in core["paths"]
    assert "/api/v1/pods" in core["paths"]
    assert "/api/v1/nodes/{name}" in core["paths"]
    assert "/api/v1/namespaces/{namespace}/nodes" not in core["paths"]
    mwc = openapi_v3_group_version(MWC.group, MWC.version, [MWC])
    assert "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}" in mwc["paths"]


def test_patch_operation_does_not_claim_strategic_merge() -> None:
    """So kubectl apply builds its patch from compiled-in types, which know the merge keys."""
    core = openapi_v3_group_version("", "v1", [POD])
    patch = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert "application/merge-patch+json" in patch["requestBody"]["content"]


def test_schema_names_follow_kube() -> None:
    assert schema_name("", "v1", "Pod") == "io.k8s.api.core.v1.Pod"
    assert schema_name("coordination.k8s.io", "v1", "Lease") == "io.k8s.api.coordination.v1.Lease"
    assert schema_name("apps", "v1", "Deployment") == "io.k8s.api.apps.v1.Deployment"
    assert schema_name("kamaji.clastix.io", "v1alpha1", "DataStore") == "io.clastix.kamaji.v1alpha1.DataStore"


def test_refs_resolve() -> None:
    document = openapi_v3_group_version("", "v1", [POD, NODE])
    schemas = document["components"]["schemas"]

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if "$ref" in node else []
            return found + [r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    all_refs = refs(document)
    assert all_refs
    for ref in all_refs:
        assert ref.removeprefix("#/components/schemas/") in schemas


def test_kinds_of_another_group_are_refused() -> None:
    with pytest.raises(ValueError):
        openapi_v3_group_version("", "v1", [MWC])


def test_the_documents_have_the_tenant_s_release_s_fields() -> None:
    """`kubectl explain pod.spec.resources` answered on a v1.31 tenant, though pod-level resources came
    with 1.32: the documents now leave out what the release does not have, and the index's hash tells
    the releases apart. The shared components are not changed."""
    old = openapi_v3_group_version("", "v1", [POD], minor=31)
    new = openapi_v3_group_version("", "v1", [POD], minor=32)
    spec = "io.k8s.api.core.v1.PodSpec"
    assert "resources" not in old["components"]["schemas"][spec]["properties"]
    assert "resources" in new["components"]["schemas"][spec]["properties"]
    assert "hostnameOverride" not in new["components"]["schemas"][spec]["properties"]
    assert (
        "resources" in openapi_v3_group_version("", "v1", [POD])["components"]["schemas"][spec]["properties"]
    )
    assert openapi_v3_sources("v1", [POD], 31) != openapi_v3_sources("v1", [POD], 32)

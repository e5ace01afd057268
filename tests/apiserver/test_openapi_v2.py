"""The protobuf /openapi/v2 document has what kubectl 1.27/1.28 check before trusting server validation."""

from typing import Any

from tenantgpu.apiserver._protowire import fields, text
from tenantgpu.apiserver.openapi import KindSchemaInfo
from tenantgpu.apiserver.openapi_v2 import OPENAPI_V2_CONTENT_TYPE, openapi_v2_protobuf

POD = KindSchemaInfo("", "v1", "Pod", True, "pods")
MWC = KindSchemaInfo(
    "admissionregistration.k8s.io",
    "v1",
    "MutatingWebhookConfiguration",
    False,
    "mutatingwebhookconfigurations",
)


def one(data: bytes, number: int) -> bytes:
    return next(value for n, _, value in fields(data) if n == number)


def every(data: bytes, number: int) -> list[Any]:
    return [value for n, _, value in fields(data) if n == number]


def paths(document: bytes) -> dict[str, bytes]:
    """Path name to PathItem bytes (Document.paths = 8, Paths.path = 2, NamedPathItem name 1 / value 2)."""
    return {text(one(item, 1)): one(item, 2) for item in every(one(document, 8), 2)}


def patch_operation(path_item: bytes) -> bytes:
    return one(path_item, 8)


def query_parameter_names(operation: bytes) -> list[str]:
    # ParametersItem.parameter 1 -> Parameter.non_body_parameter 2 -> query_parameter_sub_schema 3 -> name 4
    return [text(one(one(one(one(item, 1), 2), 3), 4)) for item in every(operation, 8)]


def extensions(operation: bytes) -> dict[str, str]:
    # Operation.vendor_extension = 13 -> NamedAny {name 1, value 2 -> Any.yaml 2}
    return {text(one(named, 1)): text(one(one(named, 2), 2)) for named in every(operation, 13)}


def test_document_header() -> None:
    document = openapi_v2_protobuf([POD], version="v1.30.2")
    assert text(one(document, 1)) == "2.0"
    info = one(document, 2)
    assert (text(one(info, 1)), text(one(info, 2))) == ("Kubernetes", "v1.30.2")
    assert OPENAPI_V2_CONTENT_TYPE == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def test_patch_operations_carry_gvk_and_field_validation() -> None:
    document = openapi_v2_protobuf([POD, MWC])
    items = paths(document)
    assert set(items) == {
        "/api/v1/namespaces/{namespace}/pods",
        "/api/v1/namespaces/{namespace}/pods/{name}",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}",
    }
    pod_patch = patch_operation(items["/api/v1/namespaces/{namespace}/pods/{name}"])
    assert "fieldValidation" in query_parameter_names(pod_patch)
    assert extensions(pod_patch)["x-kubernetes-group-version-kind"] == 'group: ""\nkind: Pod\nversion: v1\n'
    hook_patch = patch_operation(
        items["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"]
    )
    assert extensions(hook_patch)["x-kubernetes-group-version-kind"] == (
        'group: "admissionregistration.k8s.io"\nkind: MutatingWebhookConfiguration\nversion: v1\n'
    )


def test_collections_have_no_patch() -> None:
    items = paths(openapi_v2_protobuf([POD]))
    collection = items["/api/v1/namespaces/{namespace}/pods"]
    assert every(collection, 8) == []  # no PATCH on the collection
    assert every(collection, 4) != []  # but a POST

"""Pruning and type checks of custom resources by their structural schema, as apiextensions-apiserver
does them, on Kamaji's TenantControlPlane and DataStore."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver import validation
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.crds import custom_resource_definition, ensure_custom_resource_definitions
from tenantgpu.apiserver.kamajischemas import crd_schema, object_meta_schema
from tenantgpu.apiserver.kinds import KAMAJI_KINDS, TENANT_CONTROL_PLANE
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.apiserver.structural import json_schema_type, prune, prune_at, violations


def type_mismatches(schema: Any, value: Any) -> list[tuple[str, str, str]]:
    """The fields of the wrong JSON type, as (path, type found, type wanted)."""
    return [(v.path, v.value, v.limit) for v in violations(schema, value) if v.code == "type"]


TCP_SCHEMA = crd_schema("kamaji.clastix.io", "v1alpha1", "TenantControlPlane")
DATASTORE_SCHEMA = crd_schema("kamaji.clastix.io", "v1alpha1", "DataStore")
TCP: dict[str, Any] = {
    "apiVersion": "kamaji.clastix.io/v1alpha1",
    "kind": "TenantControlPlane",
    "metadata": {"name": "a", "namespace": "default", "labels": {"team": "a"}},
    "spec": {
        "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
        "kubernetes": {"version": "v1.31.4", "kubelet": {"cgroupfs": "systemd"}},
    },
}


def tcp(**spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(TCP)
    obj["spec"].update(spec)
    return obj


def test_the_kinds_served_as_custom_resources_have_a_schema() -> None:
    assert TCP_SCHEMA is not None and DATASTORE_SCHEMA is not None
    assert crd_schema("", "v1", "Pod") is None
    assert crd_schema("kamaji.clastix.io", "v1alpha1", "KubeconfigGenerator") is None


def test_a_valid_tcp_loses_nothing() -> None:
    assert TCP_SCHEMA is not None
    obj = tcp(addons={"konnectivity": {"server": {"port": 8132}}}, networkProfile={"port": 6443})
    before = copy.deepcopy(obj)
    assert prune(TCP_SCHEMA, obj, metadata=object_meta_schema()) == []
    assert obj == before and type_mismatches(TCP_SCHEMA, obj) == []


def test_unknown_fields_are_pruned_and_named_in_document_order() -> None:
    assert TCP_SCHEMA is not None
    obj = tcp(bogus=1, dataStoreOverrides=[{"resource": "/events", "dataStor": "x"}])
    obj["spec"]["controlPlane"]["service"]["typo"] = True
    obj["metadata"]["labls"] = {"x": "y"}
    found = prune(TCP_SCHEMA, obj, metadata=object_meta_schema())
    assert found == [
        "metadata.labls",
        "spec.controlPlane.service.typo",
        "spec.bogus",
        "spec.dataStoreOverrides[0].dataStor",
    ]
    assert obj["spec"]["dataStoreOverrides"] == [{"resource": "/events"}]
    assert "bogus" not in obj["spec"] and obj["metadata"]["labels"] == {"team": "a"}
    assert obj["apiVersion"] == "kamaji.clastix.io/v1alpha1" and obj["kind"] == "TenantControlPlane"


def test_a_null_unknown_field_is_dropped_without_a_name() -> None:
    """A merge patch's null deletes; deleting a field the schema lacks changes nothing."""
    assert TCP_SCHEMA is not None
    patch = {"spec": {"bogus": None, "dataStore": None}}
    assert prune(TCP_SCHEMA, patch, metadata=object_meta_schema()) == []
    assert patch == {"spec": {"dataStore": None}}


def test_free_form_fields_keep_what_they_hold() -> None:
    """`x-kubernetes-preserve-unknown-fields` (a kubelet configuration patch's value) and the core
    types' free-form objects (a managed field's fieldsV1) are not pruned."""
    assert TCP_SCHEMA is not None
    patches = [{"op": "add", "path": "/maxPods", "value": {"any": {"thing": [1]}}}]
    obj = tcp(kubernetes={"version": "v1.31.4", "kubelet": {"configurationJSONPatches": patches}})
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    assert prune(TCP_SCHEMA, obj, metadata=object_meta_schema()) == []
    assert obj["spec"]["kubernetes"]["kubelet"]["configurationJSONPatches"] == patches
    assert obj["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {}}


def test_embedded_core_types_are_pruned_by_their_own_fields() -> None:
    assert TCP_SCHEMA is not None
    deployment = {
        "replicas": 1,
        "additionalContainers": [{"name": "c", "image": "busybox", "imagee": "typo"}],
        "tolerations": [{"key": "k", "operator": "Exists", "effectt": "NoSchedule"}],
    }
    obj = tcp(controlPlane={"deployment": deployment, "service": {"serviceType": "ClusterIP"}})
    assert prune(TCP_SCHEMA, obj, metadata=object_meta_schema()) == [
        "spec.controlPlane.deployment.additionalContainers[0].imagee",
        "spec.controlPlane.deployment.tolerations[0].effectt",
    ]


def test_the_embedded_types_are_those_of_kamaji_s_kubernetes_api() -> None:
    """Found by comparing with Kamaji's generated CRD: the embedded core types came from the client's
    models, a newer Kubernetes than the k8s.io/api v0.36 Kamaji's CRD was generated from, so fields such
    as a volume mount's `bindMountOptions` were kept where Kamaji prunes them. An embedded ObjectMeta (a
    PVC template's) is a bare object in that CRD, so what it holds is pruned as well."""
    assert TCP_SCHEMA is not None
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    deployment = {
        "additionalContainers": [
            {
                "name": "c",
                "image": "busybox",
                "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": "x"}],
            }
        ],
        "additionalVolumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": template}}],
    }
    obj = tcp(controlPlane={"deployment": deployment, "service": {"serviceType": "ClusterIP"}})
    assert prune(TCP_SCHEMA, obj, metadata=object_meta_schema()) == [
        "spec.controlPlane.deployment.additionalContainers[0].volumeMounts[0].bindMountOptions",
        "spec.controlPlane.deployment.additionalVolumes[0].ephemeral.volumeClaimTemplate.metadata.labels",
    ]
    assert obj["spec"]["controlPlane"]["deployment"]["additionalVolumes"][0]["ephemeral"] == {
        "volumeClaimTemplate": {"metadata": {}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    }


def test_a_json_patch_path_is_looked_up_in_the_schema() -> None:
    assert TCP_SCHEMA is not None
    meta = object_meta_schema()
    assert prune_at(TCP_SCHEMA, ["spec", "controlPlane", "deployment", "replicas"], 3, metadata=meta) == (
        True,
        [],
    )
    assert prune_at(TCP_SCHEMA, ["spec", "nope"], 3, metadata=meta) == (False, ["spec.nope"])
    assert prune_at(TCP_SCHEMA, ["metadata", "labels", "team"], "b", metadata=meta) == (True, [])
    value = {"name": "c", "imagee": "x"}
    path = ["spec", "controlPlane", "deployment", "additionalContainers", "0"]
    assert prune_at(TCP_SCHEMA, path, value, metadata=meta) == (
        True,
        ["spec.controlPlane.deployment.additionalContainers[0].imagee"],
    )
    assert value == {"name": "c"}


@pytest.mark.parametrize(
    ("value", "found"), [(2.0, None), (1.5, "number"), ("2", "string"), (True, "boolean"), ([2], "array")]
)
def test_an_integer_field_takes_whole_numbers_only(value: Any, found: str | None) -> None:
    assert TCP_SCHEMA is not None
    obj = tcp(controlPlane={"deployment": {"replicas": value}, "service": {"serviceType": "ClusterIP"}})
    expected = [] if found is None else [("spec.controlPlane.deployment.replicas", found, "integer")]
    assert type_mismatches(TCP_SCHEMA, obj) == expected


def test_types_are_checked_in_embedded_core_types_and_int_or_string_fields() -> None:
    assert TCP_SCHEMA is not None
    ports = [{"name": "p", "port": 1, "targetPort": "http"}, {"name": "q", "port": 2, "targetPort": 8080}]
    obj = tcp(
        controlPlane={
            "deployment": {"additionalContainers": [{"name": "c", "ports": [{"containerPort": "80"}]}]},
            "service": {"serviceType": "ClusterIP", "additionalPorts": ports},
        },
        networkProfile={"certSANs": "one"},
    )
    assert type_mismatches(TCP_SCHEMA, obj) == [
        ("spec.controlPlane.deployment.additionalContainers[0].ports[0].containerPort", "string", "integer"),
        ("spec.networkProfile.certSANs", "string", "array"),
    ]
    obj["spec"]["controlPlane"]["service"]["additionalPorts"][0]["targetPort"] = [1]
    assert ("spec.controlPlane.service.additionalPorts[0].targetPort", "array", "integer,string") in (
        type_mismatches(TCP_SCHEMA, obj)
    )


def test_validation_words_a_type_mismatch_as_kube_does() -> None:
    obj = tcp(dataStore=7)
    causes = validation.validate("TenantControlPlane", obj)
    assert [c.message for c in causes] == [
        'Invalid value: "integer": spec.dataStore in body must be of type string: "integer"',
        'Invalid value: "null": some validation rules were not checked because the object was invalid; '
        "correct the existing errors to complete validation",
    ]
    store = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "DataStore",
        "metadata": {"name": "s"},
        "spec": {"driver": "MySQL", "endpoints": "db:3306"},
    }
    causes = validation.validate("DataStore", store)
    assert [(c.field, c.reason) for c in causes] == [
        ("spec.endpoints", "FieldValueTypeInvalid"),
        ("<nil>", "FieldValueInvalid"),
    ]


def test_json_schema_types() -> None:
    assert [json_schema_type(v) for v in (True, 1, 1.0, 1.5, "s", [], {})] == [
        "boolean",
        "integer",
        "integer",
        "number",
        "string",
        "array",
        "object",
    ]


def test_what_the_lab_writes_in_status_fits_the_schema() -> None:
    """The status the lab's Kamaji controller writes is the CRD's: nothing of it is pruned on the way in."""
    assert TCP_SCHEMA is not None and DATASTORE_SCHEMA is not None
    checked = {"checksum": "c", "lastUpdate": "2026-12-03T11:46:33Z", "secretName": "a-ca"}
    obj = tcp()
    obj["status"] = {
        "addons": {
            "konnectivity": {
                "agent": {"mode": "DaemonSet", "name": "konnectivity-agent", "namespace": "kube-system"},
                "enabled": True,
                "sa": {"name": "konnectivity-agent", "namespace": "kube-system"},
                "service": {"name": "a", "namespace": "default", "port": 40393},
            }
        },
        "certificates": {"apiServer": checked, "ca": checked, "sa": checked},
        "controlPlaneEndpoint": "127.0.0.1:46773",
        "kubeconfig": {"admin": checked},
        "kubernetesResources": {
            "deployment": {
                "availableReplicas": 1,
                "name": "a",
                "namespace": "default",
                "readyReplicas": 1,
                "replicas": 1,
                "selector": "kamaji.clastix.io/name=a",
                "updatedReplicas": 1,
            },
            "service": {"name": "a", "namespace": "default", "port": 46773},
            "version": {"status": "NotReady", "message": 'DataStore "x" not found'},
        },
        "observedGeneration": 1,
        "storage": {
            "config": {"checksum": "c", "secretName": "a-datastore-config"},
            "dataStoreName": "default",
            "driver": "sqlite",
            "setup": {"schema": "s", "user": "s"},
        },
    }
    assert prune(TCP_SCHEMA, obj, metadata=object_meta_schema()) == []
    assert type_mismatches(TCP_SCHEMA, obj) == []
    store = {
        "spec": {"driver": "sqlite", "endpoints": ["sqlite:///x"]},
        "status": {"ready": True, "usedBy": []},
    }
    assert prune(DATASTORE_SCHEMA, store) == [] and type_mismatches(DATASTORE_SCHEMA, store) == []


async def test_a_definition_with_an_older_schema_is_brought_up_to_date(tmp_path: Path) -> None:
    """A lab started by an older release wrote Kamaji's definitions with an open schema; resumed, the
    management plane serves them with the schema it enforces."""
    store = SQLiteDatastore(tmp_path / "s.db")
    server = APIServer(
        APIServerConfig(name="m", datastore=store, pki=ServerPKI.create("m"), extra_kinds=KAMAJI_KINDS)
    )
    registry = server.registry
    await registry.load()
    crd_kind = registry.kinds.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert crd_kind is not None
    old = custom_resource_definition(TENANT_CONTROL_PLANE, datetime.now(UTC))
    old["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    }
    await registry.create(crd_kind, "", old, UserInfo("system:apiserver", ("system:masters",)))
    await ensure_custom_resource_definitions(registry)
    stored = registry.get_object(crd_kind, "", "tenantcontrolplanes.kamaji.clastix.io")
    assert stored is not None
    assert stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == TCP_SCHEMA
    assert registry.get_object(crd_kind, "", "datastores.kamaji.clastix.io") is not None
    store.close()


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("2026-12-03T14:00:00Z", True),
        ("2026-12-03t14:00:00.123+01:00", True),
        ("2024-02-29T23:59:59Z", True),
        ("2026-02-29T10:00:00Z", False),
        ("2026-13-01T00:00:00Z", False),
        ("2026-12-03 14:00:00Z", False),
        ("2026-12-03T14:00:00", False),
        ("2026-12-03T24:00:00Z", False),
        ("yesterday", False),
    ],
)
def test_a_date_time_is_checked_as_kube_openapi_checks_it(value: str, valid: bool) -> None:
    """strfmt's IsDateTime, which kube-openapi's validator uses for `format: date-time`: a real calendar
    date, `T` in either case, a time of day and a zone; a string that is none is a format violation."""
    found = violations({"type": "string", "format": "date-time"}, value, ("status", "lastUpdate"))
    assert (found == []) is valid
    if not valid:
        assert [(v.code, v.path, v.limit) for v in found] == [("format", "status.lastUpdate", "date-time")]

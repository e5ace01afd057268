"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as kube-apiserver 1.33 serves them: their
validation, defaults, printer columns, strategies and the storage admission plugins.

Facts, from kubernetes/kubernetes v1.33 unless a test names another release: `pkg/apis/core/validation/
validation.go`, `pkg/apis/storage/validation/validation.go`, `pkg/apis/core/v1/defaults.go`,
`pkg/apis/storage/v1/defaults.go`, `pkg/registry/core/persistentvolume{,claim}/strategy.go`,
`pkg/printers/internalversion/printers.go`, `plugin/pkg/admission/storage/...`,
`pkg/volume/util/storageclass.go`.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.admission import (
    AdmissionAttributes,
    DefaultStorageClass,
    PersistentVolumeClaimResize,
    StorageObjectInUseProtection,
    default_storage_class,
)
from tenantgpu.apiserver.auth import UserInfo
from tenantgpu.apiserver.defaults import default
from tenantgpu.apiserver.kinds import Kind, kind_table
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.registry import Registry
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.apiserver.tables import to_table
from tenantgpu.apiserver.validation import invalid_message, validate

Obj = dict[str, Any]
ADMIN = UserInfo("admin", ("system:masters",))
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
DEFAULT_CLASS = {"storageclass.kubernetes.io/is-default-class": "true"}


def claim(**spec: Any) -> Obj:
    body: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    body.update(spec)
    return {"metadata": {"name": "data", "namespace": "default"}, "spec": body}


def volume(**spec: Any) -> Obj:
    body: Obj = {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "5Gi"}, "hostPath": {"path": "/d"}}
    body.update(spec)
    return {"metadata": {"name": "pv1"}, "spec": {k: v for k, v in body.items() if v is not None}}


def storage_class(name: str = "fast", created: str = "2026-12-01T10:00:00Z", **fields: Any) -> Obj:
    body: Obj = {
        "metadata": {"name": name, "creationTimestamp": created},
        "provisioner": "rancher.io/local-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }
    body.update(fields)
    return body


def messages(kind: str, obj: Obj, old: Obj | None = None, minor: int | None = None) -> list[str]:
    return [str(c) for c in validate(kind, obj, old=old, minor=minor)]


# --- PersistentVolumeClaim validation ---------------------------------------------------------------------


def test_a_claim_needs_access_modes_and_a_storage_request() -> None:
    """ValidatePersistentVolumeClaimSpec: `at least 1 access mode is required`; the request is keyed
    `spec.resources[storage]` and must be greater than zero (ValidatePositiveQuantityValue)."""
    assert messages("PersistentVolumeClaim", claim(accessModes=[], resources={})) == [
        "spec.accessModes: Required value: at least 1 access mode is required",
        "spec.resources[storage]: Required value",
    ]
    assert messages("PersistentVolumeClaim", claim(resources={"requests": {"storage": "0"}})) == [
        'spec.resources[storage]: Invalid value: "0": must be greater than zero'
    ]


def test_access_modes_are_kube_s_four_and_read_write_once_pod_stands_alone() -> None:
    """supportedAccessModes, listed sorted; `may not use ReadWriteOncePod with other access modes`."""
    assert messages("PersistentVolumeClaim", claim(accessModes=["ReadWriteSometimes"])) == [
        'spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: "ReadOnlyMany", '
        '"ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"'
    ]
    assert messages("PersistentVolumeClaim", claim(accessModes=["ReadWriteOncePod", "ReadOnlyMany"])) == [
        "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"
    ]
    assert messages("PersistentVolumeClaim", claim(accessModes=["ReadWriteOncePod"])) == []


def test_a_claim_s_volume_mode_is_block_or_filesystem() -> None:
    """supportedVolumeModes."""
    assert messages("PersistentVolumeClaim", claim(volumeMode="Raw")) == [
        'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"'
    ]


def _stored_claim(phase: str = "Pending", **spec: Any) -> Obj:
    stored = claim(**{"storageClassName": "fast", "volumeMode": "Filesystem", **spec})
    stored["status"] = {"phase": phase}
    return stored


def test_a_claim_s_spec_is_immutable_but_for_its_binding() -> None:
    """ValidatePersistentVolumeClaimUpdate: the spec may not change (the message names
    volumeAttributesClassName from 1.29, when that field came), except `volumeName` once, by the binder."""
    old = _stored_claim()
    changed = copy.deepcopy(old)
    changed["spec"]["accessModes"] = ["ReadWriteMany"]
    found = messages("PersistentVolumeClaim", changed, old, 33)
    assert len(found) == 1
    assert found[0].startswith(
        "spec: Forbidden: spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims\n"
    )
    assert messages("PersistentVolumeClaim", changed, old, 28)[0].startswith(
        "spec: Forbidden: spec is immutable after creation except resources.requests for bound claims\n"
    )
    bound = copy.deepcopy(old)
    bound["spec"]["volumeName"] = "pv1"
    assert messages("PersistentVolumeClaim", bound, old, 33) == []
    rebound = copy.deepcopy(bound)
    rebound["spec"]["volumeName"] = "pv2"
    assert "spec: Forbidden" in messages("PersistentVolumeClaim", rebound, bound, 33)[0]


def test_only_a_bound_claim_may_change_its_request_and_never_below_it_before_1_32() -> None:
    """A Pending claim's request is part of the immutable spec; a Bound one's may change. Below the old
    value: `field can not be less than previous value` until RecoverVolumeExpansionFailure (on from
    1.32) lets it shrink to above its status capacity."""
    pending = _stored_claim()
    grown = copy.deepcopy(pending)
    grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
    assert messages("PersistentVolumeClaim", grown, pending, 33)[0].startswith("spec: Forbidden")
    bound = _stored_claim("Bound", volumeName="pv1")
    bound["status"]["capacity"] = {"storage": "1Gi"}
    grown = copy.deepcopy(bound)
    grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
    assert messages("PersistentVolumeClaim", grown, bound, 33) == []
    shrunk = copy.deepcopy(bound)
    shrunk["spec"]["resources"]["requests"]["storage"] = "512Mi"
    assert messages("PersistentVolumeClaim", shrunk, bound, 31) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
    ]
    assert messages("PersistentVolumeClaim", shrunk, bound, 33) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
    ]


def test_a_claim_without_a_class_may_be_given_one_once() -> None:
    """validateStorageClassUpgradeFromNil: nil to a name is allowed (the retroactive default class)."""
    old = claim(volumeMode="Filesystem")
    old["status"] = {"phase": "Pending"}
    named = copy.deepcopy(old)
    named["spec"]["storageClassName"] = "fast"
    assert messages("PersistentVolumeClaim", named, old, 33) == []
    renamed = copy.deepcopy(named)
    renamed["spec"]["storageClassName"] = "slow"
    assert messages("PersistentVolumeClaim", renamed, named, 33)[0].startswith("spec: Forbidden")


def test_a_claim_s_volume_mode_is_immutable_under_kube_s_odd_path() -> None:
    """ValidateImmutableField(..., field.NewPath("volumeMode")): the path has no `spec.`."""
    old = _stored_claim()
    block = copy.deepcopy(old)
    block["spec"]["volumeMode"] = "Block"
    assert messages("PersistentVolumeClaim", block, old, 33)[1] == (
        'volumeMode: Invalid value: "Block": field is immutable'
    )


# --- PersistentVolume validation --------------------------------------------------------------------------


def test_a_volume_needs_a_storage_capacity_access_modes_and_one_source() -> None:
    """ValidatePersistentVolumeSpec: capacity required and only `storage` (the Go map printed as kube
    prints it), accessModes required, `must specify a volume type` when no source is given."""
    bare = {"metadata": {"name": "pv1"}, "spec": {}}
    assert messages("PersistentVolume", bare) == [
        "spec.accessModes: Required value",
        "spec.capacity: Required value",
        'spec.capacity: Unsupported value: core.ResourceList(nil): supported values: "storage"',
        "spec: Required value: must specify a volume type",
    ]
    assert messages("PersistentVolume", volume()) == []


def test_a_volume_has_exactly_one_source() -> None:
    """The first source found counts; each later one is `may not specify more than 1 volume type`."""
    both = volume(nfs={"server": "nfs.local", "path": "/export"})
    assert messages("PersistentVolume", both) == [
        "spec.nfs: Forbidden: may not specify more than 1 volume type"
    ]


def test_a_local_volume_needs_node_affinity() -> None:
    """`Local volume requires node affinity`; a CSI source needs its driver and volume handle."""
    local = volume(hostPath=None, local={"path": "/mnt/disk"})
    assert messages("PersistentVolume", local) == [
        "spec.nodeAffinity: Required value: Local volume requires node affinity"
    ]
    pinned = volume(
        hostPath=None,
        local={"path": "/mnt/disk"},
        nodeAffinity={
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                        ]
                    }
                ]
            }
        },
    )
    assert messages("PersistentVolume", pinned) == []
    csi = volume(hostPath=None, csi={"driver": "ebs.csi.aws.com"})
    assert messages("PersistentVolume", csi) == ["spec.csi.volumeHandle: Required value"]


def test_a_volume_s_reclaim_policy_is_one_of_kube_s_three() -> None:
    """supportedReclaimPolicy of a PersistentVolume: Delete, Recycle, Retain."""
    assert messages("PersistentVolume", volume(persistentVolumeReclaimPolicy="Keep")) == [
        'spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: "Delete", '
        '"Recycle", "Retain"'
    ]


def test_a_volume_s_source_is_immutable() -> None:
    """ValidatePersistentVolumeUpdate: `spec.persistentvolumesource is immutable after creation`."""
    old = volume(volumeMode="Filesystem")
    moved = copy.deepcopy(old)
    moved["spec"]["hostPath"] = {"path": "/elsewhere"}
    found = messages("PersistentVolume", moved, old)
    assert len(found) == 1
    assert found[0].startswith(
        "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n"
    )


# --- StorageClass validation ------------------------------------------------------------------------------


def test_a_class_needs_a_provisioner_that_is_a_qualified_name() -> None:
    """validateProvisioner: required, then IsQualifiedName of the lowered name."""
    assert messages("StorageClass", storage_class(provisioner="")) == ["provisioner: Required value"]
    found = messages("StorageClass", storage_class(provisioner="Bad Name"))
    assert found[0].startswith('provisioner: Invalid value: "bad name": name part must consist of')


def test_a_class_s_policies_are_kube_s() -> None:
    """validateReclaimPolicy (Delete, Retain) and validateVolumeBindingMode."""
    wrong = storage_class(reclaimPolicy="Recycle", volumeBindingMode="Later")
    assert messages("StorageClass", wrong) == [
        'reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"',
        'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"',
    ]


def test_a_class_s_provisioner_parameters_and_policies_never_change() -> None:
    """ValidateStorageClassUpdate's messages, in its order."""
    old = storage_class(parameters={"type": "ssd"})
    new = storage_class(
        provisioner="other.io/x",
        parameters={"type": "hdd"},
        reclaimPolicy="Retain",
        volumeBindingMode="WaitForFirstConsumer",
    )
    assert messages("StorageClass", new, old) == [
        "parameters: Forbidden: updates to parameters are forbidden.",
        "provisioner: Forbidden: updates to provisioner are forbidden.",
        "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
        'volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable',
    ]
    relabelled = storage_class(parameters={"type": "ssd"}, allowVolumeExpansion=True)
    assert messages("StorageClass", relabelled, old) == []


def test_errors_name_the_kind_as_kube_does() -> None:
    causes = validate("StorageClass", storage_class(provisioner=""))
    assert invalid_message("StorageClass", "fast", causes) == (
        'StorageClass.storage.k8s.io "fast" is invalid: provisioner: Required value'
    )


# --- defaults ---------------------------------------------------------------------------------------------


def test_defaults_are_kube_s() -> None:
    """SetDefaults_PersistentVolumeClaim(Spec), SetDefaults_PersistentVolume, SetDefaults_StorageClass,
    SetDefaults_HostPathVolumeSource; quantities in canonical form (SetDefaults_ResourceList)."""
    pvc = claim(resources={"requests": {"storage": "1024Mi"}})
    pvc["status"] = {}
    default("PersistentVolumeClaim", pvc)
    assert pvc["spec"]["volumeMode"] == "Filesystem" and pvc["status"] == {"phase": "Pending"}
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    pv = volume()
    default("PersistentVolume", pv)
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["spec"]["hostPath"] == {"path": "/d", "type": ""}
    sc: Obj = {"metadata": {"name": "x"}, "provisioner": "p"}
    default("StorageClass", sc)
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")


# --- printer columns --------------------------------------------------------------------------------------


def _cells(kind: str, obj: Obj, minor: int = 33) -> dict[str, Any]:
    table = to_table(kind, [obj], now=NOW, minor=minor)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


def test_an_unbound_claim_shows_no_capacity_and_an_unset_attributes_class() -> None:
    """printPersistentVolumeClaim: capacity and access modes only once bound; `<unset>`."""
    pvc = _stored_claim()
    pvc["metadata"]["creationTimestamp"] = "2026-12-01T11:59:00Z"
    assert _cells("PersistentVolumeClaim", pvc) == {
        "Name": "data",
        "Status": "Pending",
        "Volume": "",
        "Capacity": "",
        "Access Modes": "",
        "StorageClass": "fast",
        "VolumeAttributesClass": "<unset>",
        "Age": "60s",
        "VolumeMode": "Filesystem",
    }
    bound = _stored_claim("Bound", volumeName="pv1")
    bound["status"].update(
        {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}
    )
    cells = _cells("PersistentVolumeClaim", bound)
    assert (cells["Capacity"], cells["Access Modes"]) == ("5Gi", "RWO,RWX")


def test_a_volume_row_shows_its_claim_and_policy() -> None:
    """printPersistentVolume: CLAIM is namespace/name; access modes in RWO, ROX, RWX, RWOP order."""
    pv = volume(
        accessModes=["ReadWriteOncePod"],
        persistentVolumeReclaimPolicy="Delete",
        claimRef={"namespace": "default", "name": "data"},
        storageClassName="fast",
    )
    pv["status"] = {"phase": "Bound"}
    cells = _cells("PersistentVolume", pv)
    assert [cells[c] for c in ("Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim")] == [
        "5Gi",
        "RWOP",
        "Delete",
        "Bound",
        "default/data",
    ]
    assert cells["StorageClass"] == "fast" and cells["VolumeAttributesClass"] == "<unset>"


def test_the_attributes_class_column_came_with_1_29() -> None:
    """VOLUMEATTRIBUTESCLASS is in the printers of 1.29.0 and not in those of 1.28.3."""
    assert "VolumeAttributesClass" not in _cells("PersistentVolume", volume(), minor=28)
    assert "VolumeAttributesClass" not in _cells("PersistentVolumeClaim", _stored_claim(), minor=28)
    assert "VolumeAttributesClass" in _cells("PersistentVolumeClaim", _stored_claim(), minor=29)


def test_a_default_class_is_marked_in_its_name() -> None:
    """printStorageClass: ` (default)` after the name; Delete, Immediate and false when unset."""
    sc = storage_class(metadata={"name": "fast", "annotations": DEFAULT_CLASS})
    del sc["reclaimPolicy"], sc["volumeBindingMode"]
    cells = _cells("StorageClass", sc)
    assert [cells[c] for c in ("Name", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion")] == [
        "fast (default)",
        "Delete",
        "Immediate",
        False,
    ]


# --- admission --------------------------------------------------------------------------------------------


def test_of_several_default_classes_the_newest_wins_then_the_first_name() -> None:
    """GetDefaultClass: newest creationTimestamp first, then name ascending; the beta annotation counts."""
    old = storage_class("old", "2026-12-01T09:00:00Z", metadata={})
    old["metadata"] = {
        "name": "old",
        "creationTimestamp": "2026-12-01T09:00:00Z",
        "annotations": DEFAULT_CLASS,
    }
    new_b = {**storage_class(), "metadata": {"name": "b", "creationTimestamp": "2026-12-01T10:00:00Z"}}
    new_b["metadata"]["annotations"] = {"storageclass.beta.kubernetes.io/is-default-class": "true"}
    new_a = {**storage_class(), "metadata": {"name": "a", "creationTimestamp": "2026-12-01T10:00:00Z"}}
    new_a["metadata"]["annotations"] = DEFAULT_CLASS
    plain = {**storage_class(), "metadata": {"name": "z", "creationTimestamp": "2026-12-01T11:00:00Z"}}
    assert default_storage_class([old, new_b, new_a, plain])["metadata"]["name"] == "a"  # type: ignore[index]
    assert default_storage_class([plain]) is None


def _attributes(
    kind_name: str, obj: Obj, operation: str = "CREATE", old: Obj | None = None
) -> AdmissionAttributes:
    plural = {"PersistentVolumeClaim": "persistentvolumeclaims", "PersistentVolume": "persistentvolumes"}
    kind = kind_table().resource("", "v1", plural[kind_name])
    assert kind is not None
    namespace = "default" if kind.namespaced else ""
    return AdmissionAttributes(operation, kind, namespace, obj["metadata"]["name"], obj, old, ADMIN)


async def test_a_claim_without_a_class_gets_the_default_one_and_an_empty_class_stays_empty() -> None:
    """setdefault.Admit: only when PersistentVolumeClaimHasClass is false; "" is a class (none)."""
    default_sc = {**storage_class(), "metadata": {"name": "fast", "annotations": DEFAULT_CLASS}}
    plugin = DefaultStorageClass(lambda: [default_sc])
    plain = _attributes("PersistentVolumeClaim", claim())
    await plugin.admit(plain)
    assert plain.obj is not None and plain.obj["spec"]["storageClassName"] == "fast" and plain.mutated
    empty = _attributes("PersistentVolumeClaim", claim(storageClassName=""))
    await plugin.admit(empty)
    assert empty.obj is not None and empty.obj["spec"]["storageClassName"] == "" and not empty.mutated


async def test_new_claims_and_volumes_get_their_protection_finalizer_once() -> None:
    """storageobjectinuseprotection: kubernetes.io/pvc-protection and kubernetes.io/pv-protection."""
    plugin = StorageObjectInUseProtection()
    pvc = _attributes("PersistentVolumeClaim", claim())
    await plugin.admit(pvc)
    assert pvc.obj is not None and pvc.obj["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    pv = volume()
    pv["metadata"]["finalizers"] = ["kubernetes.io/pv-protection"]
    attributes = _attributes("PersistentVolume", pv)
    await plugin.admit(attributes)
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]


async def test_a_claim_grows_only_bound_and_in_a_class_that_allows_expansion() -> None:
    """resize.Validate: `Only bound persistent volume claims can be expanded`, then the class's
    allowVolumeExpansion."""
    classes = {"fast": storage_class(allowVolumeExpansion=True), "fixed": storage_class("fixed")}
    plugin = PersistentVolumeClaimResize(classes.get)

    def grow(phase: str, class_name: str) -> AdmissionAttributes:
        old = _stored_claim(phase, storageClassName=class_name)
        new = copy.deepcopy(old)
        new["spec"]["resources"]["requests"]["storage"] = "2Gi"
        return _attributes("PersistentVolumeClaim", new, "UPDATE", old)

    await plugin.admit(grow("Bound", "fast"))
    with pytest.raises(errors.APIError) as pending:
        await plugin.admit(grow("Pending", "fast"))
    assert pending.value.code == 403 and "Only bound persistent volume claims can be expanded" in str(
        pending.value.message
    )
    with pytest.raises(errors.APIError) as fixed:
        await plugin.admit(grow("Bound", "fixed"))
    assert "the storageclass that provisions the pvc must support resize" in str(fixed.value.message)


# --- the strategies, through the registry -----------------------------------------------------------------


@pytest.fixture
async def registry(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = SQLiteDatastore(tmp_path / "s.db")
    server = APIServer(APIServerConfig(name="t", datastore=store, pki=ServerPKI.create("t")))
    await server.registry.load()  # with the default namespace
    yield server.registry
    store.close()


def _kind(registry: Registry, group: str, plural: str) -> Kind:
    kind = registry.kinds.resource(group, "v1", plural)
    assert kind is not None
    return kind


async def test_a_created_claim_is_pending_with_its_finalizer_and_the_default_class(
    registry: Registry,
) -> None:
    classes = _kind(registry, "storage.k8s.io", "storageclasses")
    await registry.create(
        classes, "", {**storage_class(), "metadata": {"name": "fast", "annotations": DEFAULT_CLASS}}, ADMIN
    )
    claims = _kind(registry, "", "persistentvolumeclaims")
    sent = claim()
    sent["status"] = {"phase": "Bound"}
    stored = (await registry.create(claims, "default", sent, ADMIN)).obj
    assert stored["status"] == {"phase": "Pending"}
    assert stored["spec"]["storageClassName"] == "fast" and stored["spec"]["volumeMode"] == "Filesystem"
    assert stored["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert "generation" not in stored["metadata"]


async def test_status_and_spec_are_written_each_through_its_own_door(registry: Registry) -> None:
    """The main resource keeps the stored status; the status subresource keeps the stored spec."""
    claims = _kind(registry, "", "persistentvolumeclaims")
    await registry.create(claims, "default", claim(storageClassName=""), ADMIN)

    def bind_status(obj: Obj) -> Obj:
        obj["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}
        obj["spec"]["accessModes"] = ["ReadWriteMany"]  # ignored through `status`
        return obj

    after = (await registry.modify(claims, "default", "data", bind_status, ADMIN, subresource="status")).obj
    assert after["status"]["phase"] == "Bound" and after["spec"]["accessModes"] == ["ReadWriteOnce"]

    def main(obj: Obj) -> Obj:
        obj["status"] = {"phase": "Lost"}
        obj["metadata"]["labels"] = {"team": "a"}
        return obj

    after = (await registry.modify(claims, "default", "data", main, ADMIN)).obj
    assert after["status"]["phase"] == "Bound" and after["metadata"]["labels"] == {"team": "a"}


async def test_a_volume_records_when_its_phase_last_changed(registry: Registry) -> None:
    """PersistentVolumeLastPhaseTransitionTime (GA in 1.31): set on create, moved on a phase change by
    the status strategy, kept otherwise."""
    volumes = _kind(registry, "", "persistentvolumes")
    created = (await registry.create(volumes, "", volume(), ADMIN)).obj
    assert created["status"]["phase"] == "Pending" and created["status"]["lastPhaseTransitionTime"]
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]

    def phase(value: str) -> Any:
        def mutation(obj: Obj) -> Obj:
            obj["status"] = {"phase": value}
            return obj

        return mutation

    earlier = "2000-01-01T00:00:00Z"

    def backdate(obj: Obj) -> Obj:
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": earlier}
        return obj

    await registry.modify(volumes, "", "pv1", backdate, ADMIN, subresource="status")
    kept = (await registry.modify(volumes, "", "pv1", phase("Pending"), ADMIN, subresource="status")).obj
    assert kept["status"]["lastPhaseTransitionTime"] == earlier
    moved = (await registry.modify(volumes, "", "pv1", phase("Available"), ADMIN, subresource="status")).obj
    assert moved["status"]["phase"] == "Available" and moved["status"]["lastPhaseTransitionTime"] != earlier


def test_a_1_28_volume_has_no_transition_time() -> None:
    """The gate is alpha and off in 1.28, beta and on from 1.29."""
    kind = kind_table(minor=28).resource("", "v1", "persistentvolumes")
    assert kind is not None and kind.strategy.on_create is not None
    pv = volume()
    kind.strategy.on_create(pv)
    assert pv["status"] == {"phase": "Pending"}
    newer = kind_table(minor=29).resource("", "v1", "persistentvolumes")
    assert newer is not None and newer.strategy.on_status_update is not None

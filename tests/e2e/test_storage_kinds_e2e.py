"""Storage as a tenant serves it to real kubectl and the official Python client: PersistentVolumeClaims,
PersistentVolumes and StorageClasses, with kube-apiserver's defaults, columns, checks and its
DefaultStorageClass, StorageObjectInUseProtection and PersistentVolumeClaimResize admission plugins.

Facts (kubernetes/kubernetes v1.33: pkg/printers/internalversion/printers.go, pkg/apis/core/validation,
pkg/apis/storage/validation, plugin/pkg/admission/storage): `kubectl get sc` marks the default class
`(default)`; a claim created without a class gets the default one, `storageClassName: ""` keeps none;
new claims and volumes carry `kubernetes.io/pvc-protection` / `kubernetes.io/pv-protection`; a claim's
spec is immutable after creation but for a bound claim's request; a class's provisioner may not change.
VOLUMEATTRIBUTESCLASS is a column from 1.29 on.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, release_server

pytestmark = pytest.mark.slow  # drives real kubectl binaries

MANIFESTS = """\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: model-cache}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch}
spec:
  storageClassName: ""
  accessModes: [ReadWriteOncePod]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: datasets}
spec:
  capacity: {storage: 50Gi}
  accessModes: [ReadOnlyMany, ReadWriteOnce]
  hostPath: {path: /srv/datasets}
"""


@pytest.fixture(scope="module")
def applied(kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Path:
    manifest = tmp_path_factory.mktemp("storage") / "storage.yaml"
    manifest.write_text(MANIFESTS)
    out = kubectl("apply", "-f", str(manifest)).stdout
    for created in (
        "storageclass.storage.k8s.io/local-path created",
        "persistentvolumeclaim/model-cache created",
        "persistentvolumeclaim/scratch created",
        "persistentvolume/datasets created",
    ):
        assert created in out
    return manifest


def test_the_storage_kinds_are_discovered_with_their_short_names(kubectl: Kubectl) -> None:
    rows = {line.split()[0]: line.split() for line in kubectl("api-resources").stdout.splitlines()[1:]}
    assert rows["persistentvolumeclaims"][1:] == ["pvc", "v1", "true", "PersistentVolumeClaim"]
    assert rows["persistentvolumes"][1:] == ["pv", "v1", "false", "PersistentVolume"]
    assert rows["storageclasses"][1:] == ["sc", "storage.k8s.io/v1", "false", "StorageClass"]
    explained = kubectl("explain", "pvc.spec.accessModes").stdout
    assert "FIELD: accessModes <[]string>" in explained


def test_a_claim_without_a_class_gets_the_default_one_its_finalizer_and_pending(
    kubectl: Kubectl, applied: Path
) -> None:
    claim = json.loads(kubectl("get", "pvc", "model-cache", "-o", "json").stdout)
    assert claim["spec"]["storageClassName"] == "local-path"
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert claim["status"] == {"phase": "Pending"}
    scratch = json.loads(kubectl("get", "pvc", "scratch", "-o", "json").stdout)
    assert scratch["spec"]["storageClassName"] == ""
    volume = json.loads(kubectl("get", "pv", "datasets", "-o", "json").stdout)
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["hostPath"] == {"path": "/srv/datasets", "type": ""}
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    assert volume["status"]["phase"] == "Pending" and volume["status"]["lastPhaseTransitionTime"]
    # applying the same manifests again changes nothing
    again = kubectl("apply", "-f", str(applied)).stdout
    assert again.count("unchanged") == 4


def test_kubectl_get_shows_kube_s_columns(kubectl: Kubectl, applied: Path) -> None:
    classes = kubectl("get", "sc").stdout.splitlines()
    assert classes[0].split() == [
        "NAME",
        "PROVISIONER",
        "RECLAIMPOLICY",
        "VOLUMEBINDINGMODE",
        "ALLOWVOLUMEEXPANSION",
        "AGE",
    ]
    assert classes[1].split()[:6] == [
        "local-path",
        "(default)",
        "rancher.io/local-path",
        "Delete",
        "WaitForFirstConsumer",
        "false",
    ]
    claims = kubectl("get", "pvc", "model-cache", "-o", "wide").stdout.splitlines()
    assert claims[0].split() == [
        "NAME",
        "STATUS",
        "VOLUME",
        "CAPACITY",
        "ACCESS",
        "MODES",
        "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS",
        "AGE",
        "VOLUMEMODE",
    ]
    # unbound: no volume, capacity or access modes yet
    row = claims[1].split()
    assert row[:4] == ["model-cache", "Pending", "local-path", "<unset>"] and row[-1] == "Filesystem"
    volumes = kubectl("get", "pv", "datasets").stdout.splitlines()
    assert volumes[0].split() == [
        "NAME",
        "CAPACITY",
        "ACCESS",
        "MODES",
        "RECLAIM",
        "POLICY",
        "STATUS",
        "CLAIM",
        "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS",
        "REASON",
        "AGE",
    ]
    assert volumes[1].split()[:6] == ["datasets", "50Gi", "RWO,ROX", "Retain", "Pending", "<unset>"]


def test_a_1_28_tenant_has_no_attributes_class_column(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    manifest = tmp_path / "storage.yaml"
    manifest.write_text(MANIFESTS)
    with release_server(background_loop, tmp_path / "v128", "v1.28.15") as kubeconfig:
        kubectl("apply", "-f", str(manifest), kubeconfig=kubeconfig, version="1.28")
        header = kubectl("get", "pvc", kubeconfig=kubeconfig, version="1.28").stdout.splitlines()[0]
        assert header.split() == [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "AGE",
        ]
        volume = json.loads(kubectl("get", "pv", "datasets", "-o", "json", kubeconfig=kubeconfig).stdout)
        assert volume["status"] == {"phase": "Pending"}  # no transition time: its gate is off in 1.28


def test_refused_writes_show_kube_s_messages(kubectl: Kubectl, applied: Path, tmp_path: Path) -> None:
    changed = kubectl(
        "patch", "pvc", "model-cache", "-p", '{"spec":{"accessModes":["ReadWriteMany"]}}', check=False
    )
    assert changed.returncode == 1
    assert (
        'The PersistentVolumeClaim "model-cache" is invalid: spec: Forbidden: spec is immutable after '
        "creation except resources.requests and volumeAttributesClassName for bound claims"
    ) in changed.stderr
    provisioner = kubectl("patch", "sc", "local-path", "-p", '{"provisioner":"example.com/nfs"}', check=False)
    assert provisioner.returncode == 1
    assert (
        'The StorageClass "local-path" is invalid: provisioner: Forbidden: updates to provisioner are forbidden.'
        in provisioner.stderr
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: bad}\n"
        "spec: {accessModes: [ReadWriteOncePod, ReadWriteOnce]}\n"
        "---\n"
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: bad}\n"
        "spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], local: {path: /mnt/ssd}}\n"
    )
    refused = kubectl("apply", "-f", str(bad), check=False)
    assert refused.returncode == 1
    assert (
        "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes" in refused.stderr
    )
    assert "spec.resources[storage]: Required value" in refused.stderr
    assert "spec.nodeAffinity: Required value: Local volume requires node affinity" in refused.stderr


def test_the_python_client_sees_the_same_and_a_bound_claim_grows_only_in_an_expandable_class(
    apiserver: RunningAPIServer, applied: Path
) -> None:
    core = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    storage = kubernetes.client.StorageV1Api(core.api_client)
    assert storage.read_storage_class("local-path").volume_binding_mode == "WaitForFirstConsumer"
    storage.create_storage_class(
        {"metadata": {"name": "expandable"}, "provisioner": "example.com/csi", "allowVolumeExpansion": True}
    )

    def claim(name: str, class_name: str) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "storageClassName": class_name,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }

    for name, class_name in (("grows", "expandable"), ("fixed", "local-path")):
        created = core.create_namespaced_persistent_volume_claim("default", claim(name, class_name))
        assert created.status.phase == "Pending" and created.metadata.finalizers == [
            "kubernetes.io/pvc-protection"
        ]
        # what the binder writes: the volume's name in the spec, Bound and the capacity in the status
        core.patch_namespaced_persistent_volume_claim(name, "default", {"spec": {"volumeName": f"pv-{name}"}})
        core.patch_namespaced_persistent_volume_claim_status(
            name,
            "default",
            {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}},
        )
    bigger = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    grown = core.patch_namespaced_persistent_volume_claim("grows", "default", bigger)
    assert grown.spec.resources.requests["storage"] == "2Gi"
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.patch_namespaced_persistent_volume_claim("fixed", "default", bigger)
    assert refused.value.status == 403
    assert "only dynamically provisioned pvc can be resized" in refused.value.body
    with pytest.raises(kubernetes.client.ApiException) as shrunk:
        core.patch_namespaced_persistent_volume_claim(
            "grows", "default", {"spec": {"resources": {"requests": {"storage": "512Mi"}}}}
        )
    # the module's tenant runs 1.31, before RecoverVolumeExpansionFailure let a claim shrink back
    assert shrunk.value.status == 422 and "field can not be less than previous value" in shrunk.value.body

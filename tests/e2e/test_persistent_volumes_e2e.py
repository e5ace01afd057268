"""Claims, volumes and classes beside a tenant API server: the PV controller, the claim and volume
protection, the ephemeral-volume controller, the tenant's hostpath provisioner and kube-scheduler's
VolumeBinding, through kubectl and the official client.

Two nodes are registered through the API and a stand-in marks bound pods Running. Facts (Kubernetes
v1.33, read for these tests): `pkg/controller/volume/persistentvolume/pv_controller.go` (binding, its
annotations and events, Released volumes), `pkg/controller/volume/pvcprotection` (a claim in use keeps
`kubernetes.io/pvc-protection`), `pkg/controller/volume/ephemeral` (claim `<pod>-<volume>` owned by the
pod), `pkg/scheduler/framework/plugins/volumebinding` (PreFilter refusals, a bound volume's node
affinity, WaitForFirstConsumer claims bound for the chosen node), and minikube's `standard` class with
its `k8s.io/minikube-hostpath` provisioner, which the lab installs in every tenant.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from apiserver_harness import Kubectl, RunningAPIServer, StandInKubelet, wait_for
from test_controlplane_e2e import node_body

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow

NS = "default"


@pytest.fixture(scope="module")
def core(
    apiserver: RunningAPIServer, services: ControlPlaneServices
) -> Iterator[kubernetes.client.CoreV1Api]:
    api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(apiserver.kubeconfig)))
    for name in ("s1", "s2"):
        api.create_node(node_body(name, "16", "32Gi"))
    with StandInKubelet(api, NS):
        yield api


def claim_body(name: str, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec},
    }


def pod_body(name: str, *claims: str, ephemeral: dict[str, Any] | None = None) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if ephemeral is not None:
        volumes.append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": ephemeral}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "trainer:1",
                    "volumeMounts": [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes],
                }
            ],
            "volumes": volumes,
        },
    }


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    )


def get(kubectl: Kubectl, kind: str, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", kind, name, "-o", "json").stdout)


def gone(kubectl: Kubectl, kind: str, name: str) -> bool:
    return kubectl("get", kind, name, check=False).returncode != 0


def events_of(kubectl: Kubectl, name: str) -> str:
    out = kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json").stdout
    return "\n".join(f"{e['reason']}: {e['message']}" for e in json.loads(out)["items"])


def phase(kubectl: Kubectl, kind: str, name: str) -> str:
    return (get(kubectl, kind, name).get("status") or {}).get("phase", "")


def test_a_claim_of_the_default_class_is_provisioned_at_once_and_its_volume_goes_with_it(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    classes = kubectl("get", "storageclass").stdout
    assert "standard (default)" in classes and "k8s.io/minikube-hostpath" in classes, classes
    apply(kubectl, claim_body("cache", "5Gi"))
    wait_for("the claim bound", lambda: phase(kubectl, "pvc", "cache") == "Bound")
    claim = get(kubectl, "pvc", "cache")
    uid = claim["metadata"]["uid"]
    assert claim["spec"]["storageClassName"] == "standard"  # DefaultStorageClass admission
    assert claim["spec"]["volumeName"] == f"pvc-{uid}"
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert (
        claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"]
        == "k8s.io/minikube-hostpath"
    )
    assert claim["status"]["capacity"] == {"storage": "5Gi"} and claim["status"]["accessModes"] == [
        "ReadWriteOnce"
    ]
    volume = get(kubectl, "pv", f"pvc-{uid}")
    assert volume["spec"]["hostPath"]["path"] == "/tmp/hostpath-provisioner/default/cache"
    assert volume["spec"]["claimRef"]["name"] == "cache" and volume["spec"]["claimRef"]["uid"] == uid
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "k8s.io/minikube-hostpath"
    assert volume["status"]["phase"] == "Bound"
    # the server's status strategy stamps each phase change (PersistentVolumeLastPhaseTransitionTime)
    assert volume["status"]["lastPhaseTransitionTime"] >= volume["metadata"]["creationTimestamp"]
    said = events_of(kubectl, "cache")
    assert (
        "ExternalProvisioning: Waiting for a volume to be created either by the external provisioner " in said
    )
    assert 'Provisioning: External provisioner is provisioning volume for claim "default/cache"' in said
    assert f"ProvisioningSucceeded: Successfully provisioned volume pvc-{uid}" in said
    sources = json.loads(
        kubectl("get", "events", "--field-selector", "involvedObject.name=cache", "-o", "json").stdout
    )["items"]
    provisioner = {e["source"]["component"] for e in sources if e["reason"] == "ProvisioningSucceeded"}
    # the external-provisioner library's source: <provisioner>_<host>_<uuid>
    assert len(provisioner) == 1 and provisioner.pop().startswith(
        "k8s.io/minikube-hostpath_storage-provisioner_"
    )
    row = kubectl("get", "pvc", "cache", "--no-headers").stdout.split()
    assert row[:6] == ["cache", "Bound", f"pvc-{uid}", "5Gi", "RWO", "standard"], row
    kubectl("delete", "pvc", "cache")
    # at once, not at the controller's next 15-s resync
    wait_for("the volume deleted with its claim", lambda: gone(kubectl, "pv", f"pvc-{uid}"), timeout=4)


def test_a_claim_takes_the_smallest_matching_volume_and_a_released_one_stays_with_retain(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    def volume(name: str, size: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "manual",
                "hostPath": {"path": f"/data/{name}"},
            },
        }

    apply(kubectl, volume("nfs-big", "100Gi"), volume("nfs-small", "10Gi"))
    wait_for("the volumes available", lambda: phase(kubectl, "pv", "nfs-small") == "Available")
    apply(kubectl, claim_body("dataset", "8Gi", storageClassName="manual"))
    wait_for("the claim bound", lambda: phase(kubectl, "pvc", "dataset") == "Bound")
    claim = get(kubectl, "pvc", "dataset")
    assert claim["spec"]["volumeName"] == "nfs-small"
    assert claim["status"]["capacity"] == {"storage": "10Gi"}
    small = get(kubectl, "pv", "nfs-small")
    assert small["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert small["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert phase(kubectl, "pv", "nfs-big") == "Available"
    # a claim no volume of its class can serve, and no provisioner behind the class
    apply(kubectl, claim_body("huge", "1Ti", storageClassName=""))
    wait_for(
        "FailedBinding on the classless claim",
        lambda: (
            "FailedBinding: no persistent volumes available for this claim and no storage class is set"
            in events_of(kubectl, "huge")
        ),
    )
    assert phase(kubectl, "pvc", "huge") == "Pending"
    kubectl("delete", "pvc", "dataset", "huge")
    wait_for("the volume released", lambda: phase(kubectl, "pv", "nfs-small") == "Released", timeout=4)
    assert not gone(kubectl, "pv", "nfs-small")  # Retain: an administrator decides
    kubectl("delete", "pv", "nfs-small", "nfs-big")
    wait_for(
        "the volumes deleted", lambda: gone(kubectl, "pv", "nfs-small") and gone(kubectl, "pv", "nfs-big")
    )


def test_a_pod_waits_for_its_claim_and_a_claim_in_use_is_kept_until_the_pod_is_gone(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    apply(kubectl, pod_body("reader", "later"))
    wait_for(
        "FailedScheduling naming the claim",
        lambda: (
            'FailedScheduling: 0/2 nodes are available: persistentvolumeclaim "later" not found. preemption: '
            "0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
            in events_of(kubectl, "reader")
        ),
    )
    assert not get(kubectl, "pod", "reader")["spec"].get("nodeName")
    apply(kubectl, claim_body("later"))
    wait_for(
        "the pod scheduled once its claim is bound", lambda: phase(kubectl, "pod", "reader") == "Running"
    )
    claim = get(kubectl, "pvc", "later")
    assert "kubernetes.io/pvc-protection" in claim["metadata"]["finalizers"]
    kubectl("delete", "pvc", "later", "--wait=false")
    wait_for(
        "the claim Terminating", lambda: get(kubectl, "pvc", "later")["metadata"].get("deletionTimestamp")
    )
    assert phase(kubectl, "pvc", "later") == "Bound"  # still in use by the running pod
    kubectl("delete", "pod", "reader")
    wait_for("the claim gone once the pod is", lambda: gone(kubectl, "pvc", "later"))


def test_a_wait_for_first_consumer_claim_binds_the_local_volume_of_the_node_the_pod_gets(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    local_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local-storage"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    local_volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "nvme-s2"},
        "spec": {
            "capacity": {"storage": "100Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local-storage",
            "local": {"path": "/mnt/nvme0"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["s2"]}
                            ]
                        }
                    ]
                }
            },
        },
    }
    apply(
        kubectl,
        local_class,
        local_volume,
        claim_body("scratch-local", "50Gi", storageClassName="local-storage"),
    )
    wait_for(
        "the claim waiting for its first consumer",
        lambda: (
            "WaitForFirstConsumer: waiting for first consumer to be created before binding"
            in events_of(kubectl, "scratch-local")
        ),
    )
    assert phase(kubectl, "pvc", "scratch-local") == "Pending"
    apply(kubectl, pod_body("local-user", "scratch-local"))
    wait_for("the pod Running", lambda: phase(kubectl, "pod", "local-user") == "Running")
    assert get(kubectl, "pod", "local-user")["spec"]["nodeName"] == "s2"
    assert get(kubectl, "pvc", "scratch-local")["spec"]["volumeName"] == "nvme-s2"
    # a second pod on the bound claim follows the volume to its node
    apply(kubectl, pod_body("local-user-2", "scratch-local"))
    wait_for("the second pod Running", lambda: phase(kubectl, "pod", "local-user-2") == "Running")
    assert get(kubectl, "pod", "local-user-2")["spec"]["nodeName"] == "s2"
    kubectl("delete", "pod", "local-user", "local-user-2")


def test_an_ephemeral_volume_gets_a_claim_owned_by_its_pod_and_collected_with_it(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    template = {
        "metadata": {"labels": {"purpose": "scratch"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
    }
    apply(kubectl, pod_body("etl", ephemeral=template))
    wait_for("the pod Running", lambda: phase(kubectl, "pod", "etl") == "Running")
    claim = get(kubectl, "pvc", "etl-scratch")
    assert claim["metadata"]["labels"] == {"purpose": "scratch"}
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "etl", True)
    assert claim["status"]["phase"] == "Bound"
    kubectl("delete", "pod", "etl")
    wait_for("the claim collected with its pod", lambda: gone(kubectl, "pvc", "etl-scratch"))


def test_a_namespace_quota_counts_claims_and_their_storage_per_class(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    """kube's persistentvolumeclaim quota evaluator: `persistentvolumeclaims`, `requests.storage` and the
    same per class (`<class>.storageclass.storage.k8s.io/…`); a claim that would exceed one is refused
    with 403 and the quota names what it exceeded."""
    kubectl("create", "namespace", "team")
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "storage", "namespace": "team"},
        "spec": {
            "hard": {
                "persistentvolumeclaims": "3",
                "count/persistentvolumeclaims": "3",
                "requests.storage": "20Gi",
                "standard.storageclass.storage.k8s.io/requests.storage": "6Gi",
            }
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(quota))
    first = {**claim_body("first", "5Gi"), "metadata": {"name": "first", "namespace": "team"}}
    kubectl("apply", "-f", "-", input=json.dumps(first))
    second = {**claim_body("second", "5Gi"), "metadata": {"name": "second", "namespace": "team"}}
    refused = kubectl("apply", "-f", "-", input=json.dumps(second), check=False)
    assert refused.returncode == 1
    assert (
        'persistentvolumeclaims "second" is forbidden: exceeded quota: storage, requested: '
        "standard.storageclass.storage.k8s.io/requests.storage=5Gi, used: "
        "standard.storageclass.storage.k8s.io/requests.storage=5Gi, limited: "
        "standard.storageclass.storage.k8s.io/requests.storage=6Gi"
    ) in refused.stderr, refused.stderr
    # a claim of no class counts only against the namespace-wide storage
    other = {
        **claim_body("other", "5Gi", storageClassName=""),
        "metadata": {"name": "other", "namespace": "team"},
    }
    kubectl("apply", "-f", "-", input=json.dumps(other))

    def used() -> dict[str, str]:
        out = kubectl("get", "quota", "storage", "-n", "team", "-o", "json").stdout
        return json.loads(out).get("status", {}).get("used", {})

    wait_for(
        "the quota's usage",
        lambda: (
            used()
            == {
                "persistentvolumeclaims": "2",
                "count/persistentvolumeclaims": "2",
                "requests.storage": "10Gi",
                "standard.storageclass.storage.k8s.io/requests.storage": "5Gi",
            }
        ),
    )
    kubectl("delete", "namespace", "team", "--wait=false")


def test_a_claim_asking_to_grow_is_told_nothing_here_expands_its_volume(
    core: kubernetes.client.CoreV1Api, kubectl: Kubectl
) -> None:
    """A class that allows expansion lets the claim's request grow (PersistentVolumeClaimResize); minikube's
    hostpath volumes have no resizer, so kube's expand controller says it waits for an external one and
    the claim keeps its capacity."""
    growable = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "growable"},
        "provisioner": "k8s.io/minikube-hostpath",
        "allowVolumeExpansion": True,
    }
    apply(kubectl, growable, claim_body("grows", "1Gi", storageClassName="growable"))
    wait_for("the claim bound", lambda: phase(kubectl, "pvc", "grows") == "Bound")
    kubectl("patch", "pvc", "grows", "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    wait_for(
        "ExternalExpanding",
        lambda: (
            "ExternalExpanding: waiting for an external controller to expand this PVC"
            in events_of(kubectl, "grows")
        ),
    )
    claim = get(kubectl, "pvc", "grows")
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert claim["status"]["capacity"] == {"storage": "1Gi"}
    kubectl("delete", "pvc", "grows")

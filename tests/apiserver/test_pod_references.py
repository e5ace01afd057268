"""What a pod and a persistent volume name of other objects, as kube's visitors walk them: the Node
authorizer's edges."""

from __future__ import annotations

from typing import Any

from tenantgpu.apiserver.podreferences import (
    claim_names,
    configmap_names,
    resource_claim_names,
    secret_names,
    volume_secrets,
)

Obj = dict[str, Any]


def _env(kind: str, name: str) -> Obj:
    return {"name": "X", "valueFrom": {kind: {"name": name, "key": "k"}}}


SPEC: Obj = {
    "imagePullSecrets": [{"name": "pull"}, {"name": ""}],
    "initContainers": [{"name": "i", "env": [_env("secretKeyRef", "init-secret")]}],
    "containers": [
        {
            "name": "c",
            "envFrom": [{"secretRef": {"name": "bulk-secret"}}, {"configMapRef": {"name": "bulk-config"}}],
            "env": [_env("configMapKeyRef", "one-config")],
        }
    ],
    "ephemeralContainers": [{"name": "debug", "env": [_env("secretKeyRef", "debug-secret")]}],
    "volumes": [
        {"name": "s", "secret": {"secretName": "volume-secret"}},
        {"name": "m", "configMap": {"name": "volume-config"}},
        {
            "name": "p",
            "projected": {
                "sources": [
                    {"secret": {"name": "projected-secret"}},
                    {"configMap": {"name": "projected-config"}},
                    {"serviceAccountToken": {"path": "token"}},
                ]
            },
        },
        {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}},
        {"name": "azure", "azureFile": {"secretName": "azure-secret", "shareName": "s"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
    ],
}


def test_every_container_and_volume_names_its_secrets_and_config_maps() -> None:
    assert set(secret_names(SPEC)) == {
        "pull",
        "init-secret",
        "bulk-secret",
        "debug-secret",
        "volume-secret",
        "projected-secret",
        "csi-secret",
        "azure-secret",
    }
    assert set(configmap_names(SPEC)) == {"bulk-config", "one-config", "volume-config", "projected-config"}


def test_a_generic_ephemeral_volume_claim_is_named_after_the_pod_and_volume() -> None:
    pod = {"metadata": {"name": "web"}, "spec": SPEC}
    assert list(claim_names(pod)) == ["data", "web-scratch"]


def test_resource_claims_are_named_directly_or_by_the_pods_status() -> None:
    pod = {
        "metadata": {"name": "train"},
        "spec": {
            "resourceClaims": [
                {"name": "shared", "resourceClaimName": "gpu-pool"},
                {"name": "own", "resourceClaimTemplateName": "one-gpu"},
                {"name": "pending", "resourceClaimTemplateName": "one-gpu"},
                # before 1.31 both names sit under `source`
                {"name": "old", "source": {"resourceClaimName": "legacy"}},
            ]
        },
        "status": {
            "resourceClaimStatuses": [
                {"name": "own", "resourceClaimName": "train-own-x7k2p"},
                {"name": "pending"},
            ]
        },
    }
    assert list(resource_claim_names(pod)) == ["gpu-pool", "train-own-x7k2p", "legacy"]


def test_a_volume_hands_the_kubelet_its_node_secrets_in_their_namespaces() -> None:
    csi = {
        "spec": {
            "claimRef": {"namespace": "team", "name": "data"},
            "csi": {
                "driver": "d",
                "volumeHandle": "v",
                "controllerPublishSecretRef": {"name": "controller", "namespace": "storage"},
                "controllerExpandSecretRef": {"name": "expand", "namespace": "storage"},
                "nodePublishSecretRef": {"name": "publish", "namespace": "storage"},
                "nodeStageSecretRef": {"name": "stage", "namespace": "storage"},
                "nodeExpandSecretRef": {"name": "node-expand", "namespace": "storage"},
            },
        }
    }
    assert list(volume_secrets(csi)) == [
        ("storage", "publish"),
        ("storage", "stage"),
        ("storage", "node-expand"),
    ]
    # an in-tree reference without a namespace is in the bound claim's; cinder's has none to fall back to
    rbd = {"spec": {"claimRef": {"namespace": "team"}, "rbd": {"secretRef": {"name": "ceph"}}}}
    assert list(volume_secrets(rbd)) == [("team", "ceph")]
    cinder = {"spec": {"claimRef": {"namespace": "team"}, "cinder": {"secretRef": {"name": "os"}}}}
    assert list(volume_secrets(cinder)) == [("", "os")]
    azure = {"spec": {"claimRef": {"namespace": "team"}, "azureFile": {"secretName": "az"}}}
    assert list(volume_secrets(azure)) == [("team", "az")]

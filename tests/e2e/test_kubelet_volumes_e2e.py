"""A pod whose volume takes files from a ConfigMap or Secret that is not there waits in ContainerCreating,
as on a real node, with kube's `FailedMount` events, and starts once the object is created; a missing
image pull secret is only warned about."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow

NODE = "volume-node"


def _pod(name: str, volumes: list[dict[str, Any]]) -> str:
    container = {
        "name": "app",
        "image": "busybox",
        "volumeMounts": [{"name": v["name"], "mountPath": f"/{v['name']}"} for v in volumes],
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [container], "volumes": volumes},
        }
    )


def _pod_status(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "pod", name, "-o", "json").stdout)["status"]


def _failed_mounts(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    return json.loads(
        kubectl(
            "get",
            "events",
            "--field-selector",
            f"involvedObject.name={name},reason=FailedMount",
            "-o",
            "json",
        ).stdout
    )["items"]


def _until(what: str, check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_missing_configmap_holds_the_pod_in_container_creating_until_it_is_created(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, NODE, [], SharingConfig())
    background_loop.run(worker.start())
    volumes = [
        {"name": "settings", "configMap": {"name": "app-settings"}},
        {"name": "maybe", "secret": {"secretName": "not-there", "optional": True}},
    ]
    try:
        kubectl("apply", "-f", "-", input=_pod("waits", volumes))
        events = _until("a FailedMount event", lambda: _failed_mounts(kubectl, "waits"))
        assert {(e["type"], e["message"], e["source"]["component"], e["source"]["host"]) for e in events} == {
            (
                "Warning",
                'MountVolume.SetUp failed for volume "settings" : configmap "app-settings" not found',
                "kubelet",
                NODE,
            )
        }  # the optional Secret's volume is no reason to wait
        status = _pod_status(kubectl, "waits")
        assert status["phase"] == "Pending" and "podIP" not in status
        assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
        assert kubectl("get", "pod", "waits", "--no-headers").stdout.split()[2] == "ContainerCreating"
        # retried with the volume manager's back-off, the same event counted up
        _until("a retry", lambda: max(e.get("count", 1) for e in _failed_mounts(kubectl, "waits")) >= 2)
        assert "FailedMount" in kubectl("describe", "pod", "waits").stdout

        kubectl("create", "configmap", "app-settings", "--from-literal=mode=fast")
        _until("the pod Running", lambda: _pod_status(kubectl, "waits").get("phase") == "Running")

        # a key the volume's items name must be in the ConfigMap
        keyed = [
            {
                "name": "settings",
                "configMap": {"name": "app-settings", "items": [{"key": "level", "path": "l"}]},
            }
        ]
        kubectl("apply", "-f", "-", input=_pod("wrong-key", keyed))
        events = _until("a FailedMount event", lambda: _failed_mounts(kubectl, "wrong-key"))
        assert events[0]["message"] == (
            'MountVolume.SetUp failed for volume "settings" : configmap references non-existent config key: level'
        )
        assert _pod_status(kubectl, "wrong-key")["phase"] == "Pending"
    finally:
        kubectl("delete", "pod", "waits", "wrong-key", "--ignore-not-found", "--wait=false")
        kubectl("delete", "configmap", "app-settings", "--ignore-not-found")
        background_loop.run(worker.stop())
        background_loop.run(client.close())


def test_missing_image_pull_secrets_are_warned_about_and_the_pod_starts(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """kube's getPullSecretsForPod: `FailedToRetrieveImagePullSecret` names the missing ones, in order."""
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, NODE, [], SharingConfig())
    background_loop.run(worker.start())
    kubectl(
        "create",
        "secret",
        "docker-registry",
        "ngc-present",
        "--docker-server=nvcr.io",
        "--docker-username=$oauthtoken",
        "--docker-password=x",
    )
    pod = json.loads(_pod("pulls", []))
    pod["spec"]["imagePullSecrets"] = [
        {"name": "ngc-missing"},
        {"name": "ngc-present"},
        {"name": "other-missing"},
    ]
    try:
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        _until("the pod Running", lambda: _pod_status(kubectl, "pulls").get("phase") == "Running")
        events = json.loads(
            kubectl(
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=pulls,reason=FailedToRetrieveImagePullSecret",
                "-o",
                "json",
            ).stdout
        )["items"]
        assert [(e["type"], e["message"]) for e in events] == [
            (
                "Warning",
                "Unable to retrieve some image pull secrets (ngc-missing, other-missing); attempting to pull the "
                "image may not succeed.",
            )
        ]
    finally:
        kubectl("delete", "pod", "pulls", "--ignore-not-found", "--wait=false")
        kubectl("delete", "secret", "ngc-present", "--ignore-not-found")
        background_loop.run(worker.stop())
        background_loop.run(client.close())


def test_a_pod_given_a_node_waits_for_its_claim_to_be_bound(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, kubectl: Kubectl
) -> None:
    """A pod bound to a node directly (no scheduler to hold it back) waits in ContainerCreating, without a
    pod IP, until its claim is bound to a volume that names it; kube 1.33's volume manager records no event
    for that. Here nothing binds the claim but the test itself, acting as the PV controller would."""
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    worker = Worker(client, NODE, [], SharingConfig())
    background_loop.run(worker.start())
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "direct", "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    try:
        kubectl("apply", "-f", "-", input=json.dumps(claim))
        kubectl(
            "apply",
            "-f",
            "-",
            input=_pod("claims", [{"name": "data", "persistentVolumeClaim": {"claimName": "direct"}}]),
        )
        waiting = _until(
            "ContainerCreating",
            lambda: (s := _pod_status(kubectl, "claims")).get("containerStatuses") and s,
        )
        time.sleep(1.5)  # a few of the kubelet's retries
        status = _pod_status(kubectl, "claims")
        assert status["phase"] == "Pending" and "podIP" not in status, status
        assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
        assert waiting["phase"] == "Pending"
        uid = json.loads(kubectl("get", "pvc", "direct", "-o", "json").stdout)["metadata"]["uid"]
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "direct-pv"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/data/direct"},
                "claimRef": {"namespace": "default", "name": "direct", "uid": uid},
            },
        }
        kubectl("apply", "-f", "-", input=json.dumps(volume))
        kubectl("patch", "pvc", "direct", "-p", '{"spec":{"volumeName":"direct-pv"}}')
        _until(
            "Running once the claim is bound",
            lambda: _pod_status(kubectl, "claims").get("phase") == "Running",
        )
    finally:
        kubectl("delete", "pod", "claims", "--grace-period=0", "--force", check=False)
        kubectl("delete", "pvc", "direct", "--wait=false", check=False)
        kubectl("delete", "pv", "direct-pv", "--wait=false", check=False)
        background_loop.run(worker.stop())
        background_loop.run(client.close())

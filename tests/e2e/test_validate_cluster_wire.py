"""The suite's `KubeCluster` against a real tenant API server: JSON in and out, Kubernetes errors as ApiError,
refused credentials and dead endpoints as they happen on the wire."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from apiserver_harness import RunningAPIServer

from tenantgpu.validate.cluster import ApiError, KubeCluster, Unreachable


@pytest.fixture(scope="module")
def cluster(apiserver: RunningAPIServer) -> KubeCluster:
    return KubeCluster("tenant", apiserver.kubeconfig)


def test_create_get_patch_delete_round_trip(cluster: KubeCluster) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wire", "labels": {"a": "b"}}}
    created = cluster.create("Namespace", body)
    assert created["metadata"]["uid"]
    assert [n["metadata"]["name"] for n in cluster.list("Namespace", label_selector="a=b")] == ["wire"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "1", "y": "2"}}
    cluster.create("ConfigMap", cm, "wire")
    patched = cluster.patch("ConfigMap", "c", {"data": {"x": "3", "y": None}}, "wire")
    assert patched["data"] == {"x": "3"}  # a JSON merge patch: null removes the key
    cluster.delete("ConfigMap", "c", "wire")
    assert cluster.get("ConfigMap", "c", "wire") is None
    cluster.delete("ConfigMap", "c", "wire")  # deleting what is gone is not an error


def test_errors_carry_the_status_code_and_reason(cluster: KubeCluster) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "twice"}}
    cluster.create("Namespace", body)
    with pytest.raises(ApiError) as caught:
        cluster.create("Namespace", body)
    assert caught.value.code == 409 and caught.value.reason == "AlreadyExists"
    assert "twice" in caught.value.message


def test_a_dead_endpoint_is_unreachable(apiserver: RunningAPIServer, tmp_path: Path) -> None:
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(yaml.safe_dump(config))
    with pytest.raises(Unreachable, match=r"127\.0\.0\.1:9"):
        KubeCluster("dead", dead).version()


def test_a_token_the_server_does_not_know_is_rejected_with_401(
    apiserver: RunningAPIServer, tmp_path: Path
) -> None:
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": "not-a-real-token"}
    stranger = tmp_path / "stranger.kubeconfig"
    stranger.write_text(yaml.safe_dump(config))
    with pytest.raises(ApiError) as caught:
        KubeCluster("stranger", stranger).list("Namespace")
    assert caught.value.code == 401


def test_ca_fingerprint_and_server_come_from_the_kubeconfig(
    cluster: KubeCluster, apiserver: RunningAPIServer
) -> None:
    assert cluster.server() == apiserver.url
    fingerprint = cluster.ca_fingerprint()
    assert fingerprint is not None and len(fingerprint) == 64

"""The management plane's extra kinds: Kamaji's TenantControlPlane (status, scale) and DataStore."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RawClient, RunningAPIServer, kubectl_path, start_server

from tenantgpu.apiserver import errors
from tenantgpu.apiserver.hooks import LogOptions

pytestmark = pytest.mark.slow  # drives real kubectl binaries or subprocesses

TCP = {
    "apiVersion": "kamaji.clastix.io/v1alpha1",
    "kind": "TenantControlPlane",
    "metadata": {"name": "tenant-a", "namespace": "default"},
    "spec": {
        "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "ClusterIP"}},
        "kubernetes": {"version": "v1.31.4", "kubelet": {"cgroupfs": "systemd"}},
    },
}


class RecordedLogs:
    """A PodLogSource standing in for the kubelet: serves fixed lines, refuses unknown containers."""

    def __init__(self) -> None:
        self.asked: list[LogOptions] = []

    async def _lines(self, pod: dict[str, Any], options: LogOptions) -> AsyncIterator[bytes]:
        self.asked.append(options)
        if options.container == "broken":
            raise errors.bad_request(f'container "broken" in pod "{pod["metadata"]["name"]}" is terminated')
        yield b"line 1\n"
        yield b"line 2\n"

    def stream(self, pod: dict[str, Any], options: LogOptions) -> AsyncIterator[bytes]:
        return self._lines(pod, options)


@pytest.fixture(scope="module")
def logs() -> RecordedLogs:
    return RecordedLogs()


@pytest.fixture(scope="module")
def apiserver(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory, logs: RecordedLogs
) -> Iterator[RunningAPIServer]:
    running = start_server(
        background_loop, tmp_path_factory.mktemp("management"), "management", management=True, log_source=logs
    )
    yield running
    background_loop.run(running.server.stop())


def test_tenant_control_plane_lifecycle_with_kubectl(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "tcp.json"
    manifest.write_text(json.dumps(TCP))
    assert (
        "tenantcontrolplane.kamaji.clastix.io/tenant-a created"
        in kubectl("apply", "-f", str(manifest)).stdout
    )
    table = kubectl("get", "tcp").stdout
    header = table.splitlines()[0].split()
    assert header[:5] == ["NAME", "VERSION", "INSTALLED", "VERSION", "STATUS"] and header[-1] == "AGE"
    assert "tenant-a" in table and "v1.31.4" in table
    kubectl("scale", "tcp", "tenant-a", "--replicas=0")
    tcp = json.loads(kubectl("get", "tcp", "tenant-a", "-o", "json").stdout)
    assert tcp["spec"]["controlPlane"]["deployment"]["replicas"] == 0
    assert tcp["metadata"]["generation"] == 2
    status = {"status": {"kubernetesResources": {"version": {"status": "Sleeping", "version": "v1.31.4"}}}}
    kubectl("patch", "tcp", "tenant-a", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    kubectl("label", "tcp", "tenant-a", "team=a")  # a main-resource write may not touch status
    tcp = json.loads(kubectl("get", "tcp", "tenant-a", "-o", "json").stdout)
    assert tcp["status"]["kubernetesResources"]["version"]["status"] == "Sleeping"
    assert tcp["metadata"]["generation"] == 2  # status and labels do not bump the generation
    assert "Sleeping" in kubectl("get", "tcp").stdout
    names = kubectl("api-resources", "--api-group=kamaji.clastix.io", "-o", "name").stdout.split()
    assert names == ["datastores.kamaji.clastix.io", "tenantcontrolplanes.kamaji.clastix.io"]


def test_datastore_is_cluster_scoped(kubectl: Kubectl) -> None:
    store = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "DataStore",
        "metadata": {"name": "default"},
        "spec": {
            "driver": "etcd",
            "endpoints": ["127.0.0.1:2379"],
            "tlsConfig": {
                "certificateAuthority": {
                    "certificate": {"content": "Y2E="},
                    "privateKey": {"content": "a2V5"},
                },
                "clientCertificate": {
                    "certificate": {"content": "Y2VydA=="},
                    "privateKey": {"content": "a2V5"},
                },
            },
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(store))
    out = json.loads(kubectl("get", "datastores", "-o", "json").stdout)
    assert [d["metadata"]["name"] for d in out["items"]] == ["default"]
    assert "namespace" not in out["items"][0]["metadata"]


def test_pod_logs_come_from_the_log_source(
    kubectl: Kubectl, apiserver: RunningAPIServer, logs: RecordedLogs
) -> None:
    raw = RawClient(apiserver.kubeconfig)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "logged"},
        "spec": {"containers": [{"name": "main", "image": "x"}, {"name": "broken", "image": "x"}]},
    }
    raw.request("POST", "/api/v1/namespaces/default/pods", pod)
    # Not bound yet: kube-apiserver has no kubelet to ask and answers 204, an empty log.
    pending = kubectl("logs", "logged", "-c", "main")
    assert (pending.stdout, pending.stderr) == ("", "")
    assert raw.request("GET", "/api/v1/namespaces/default/pods/logged/log?container=main").status == 204
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "logged"},
        "target": {"name": "w1"},
    }
    raw.request("POST", "/api/v1/namespaces/default/pods/logged/binding", binding)
    assert kubectl("logs", "logged", "-c", "main", "--tail=2").stdout == "line 1\nline 2\n"
    assert logs.asked[-1].tail_lines == 2
    unnamed = kubectl("logs", "logged", check=False)
    assert "a container name must be specified" in unnamed.stderr or "Defaulted container" in unnamed.stderr
    broken = kubectl("logs", "logged", "-c", "broken", check=False)
    assert broken.returncode == 1 and 'container "broken" in pod "logged" is terminated' in broken.stderr


def test_dispatcher_picks_the_matching_kubectl(apiserver: RunningAPIServer, tmp_path: Path) -> None:
    """The `kubectl` on PATH runs the binary matching the server's minor version (v1.31 here)."""
    env = {**os.environ, "HOME": str(tmp_path)}
    out = subprocess.run(
        [kubectl_path(), "--kubeconfig", str(apiserver.kubeconfig), "version", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    assert json.loads(out)["clientVersion"]["minor"] == "31"


def _wait_for_definitions(kubectl: Kubectl) -> list[str]:
    # the API server writes them beside serving, right after it starts
    for _ in range(100):
        names = kubectl("get", "crd", "-o", "name").stdout.split()
        if len(names) == 2:
            return names
        time.sleep(0.05)
    return names


def test_kamajis_kinds_are_listed_as_established_crds(kubectl: Kubectl, tmp_path: Path) -> None:
    """As on a Kamaji management cluster, whose chart installs them; a definition of one's own is
    refused with a 405 that says why (the lab serves no custom resources)."""
    assert _wait_for_definitions(kubectl) == [
        "customresourcedefinition.apiextensions.k8s.io/datastores.kamaji.clastix.io",
        "customresourcedefinition.apiextensions.k8s.io/tenantcontrolplanes.kamaji.clastix.io",
    ]
    crd = json.loads(kubectl("get", "crd", "tenantcontrolplanes.kamaji.clastix.io", "-o", "json").stdout)
    assert crd["spec"]["names"]["shortNames"] == ["tcp"] and crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["versions"][0]["subresources"]["scale"] == {
        "specReplicasPath": ".spec.controlPlane.deployment.replicas",
        "statusReplicasPath": ".status.kubernetesResources.deployment.replicas",
        "labelSelectorPath": ".status.kubernetesResources.deployment.selector",
    }
    established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert established == {"NamesAccepted": "True", "Established": "True"}
    assert kubectl("wait", "--for=condition=Established", "crd/datastores.kamaji.clastix.io").returncode == 0
    own = tmp_path / "widget-crd.json"
    own.write_text(
        json.dumps(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {
                    "group": "example.com",
                    "names": {"kind": "Widget", "plural": "widgets"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            }
        )
    )
    refused = kubectl("create", "-f", str(own), check=False)
    assert refused.returncode == 1
    assert "Error from server (MethodNotAllowed)" in refused.stderr
    assert "tenantgpu serves no custom resources" in refused.stderr


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_a_kind_in_the_wrong_api_version_is_no_match(kubectl: Kubectl, tmp_path: Path, version: str) -> None:
    """Found by probing: kubectl's strict validation lists the CRDs to learn whether a kind it does not
    know is a custom one, and printed `failed to list CRDs` when the lab served none."""
    manifest = tmp_path / "wrong.json"
    manifest.write_text(
        json.dumps({"apiVersion": "batch/v1", "kind": "Deployment", "metadata": {"name": "w"}})
    )
    for verb in ("apply", "create"):
        refused = kubectl(verb, "-f", str(manifest), version=version, check=False)
        assert refused.returncode == 1
        assert 'no matches for kind "Deployment" in version "batch/v1"' in refused.stderr
        assert "ensure CRDs are installed first" in refused.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"driver": "Oracle", "endpoints": ["db:1521"]},
            'spec.driver: Unsupported value: "Oracle": supported values: "etcd", "MySQL", "PostgreSQL", "NATS",'
            ' "sqlite"',
        ),
        ({"driver": "MySQL"}, "spec.endpoints: Required value"),
        (
            {"driver": "MySQL", "endpoints": ["db:3306"]},
            'spec: Invalid value: "object": When driver is not etcd, either tlsConfig or basicAuth must be provided',
        ),
        (
            {"driver": "etcd", "endpoints": ["e:2379"]},
            'spec: Invalid value: "object": no such key: tlsConfig evaluating rule: certificateAuthority privateKey'
            " must have secretReference or content when driver is etcd",
        ),
    ],
)
def test_a_datastore_is_checked_against_kamajis_schema(kubectl: Kubectl, spec: dict, message: str) -> None:
    """Found by probing: any DataStore spec was stored. Kamaji's CRD (api/v1alpha1/datastore_types.go):
    the driver enum, required endpoints, and its CEL rules on the credentials each driver needs."""
    store = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "DataStore",
        "metadata": {"name": "bad"},
        "spec": spec,
    }
    refused = kubectl("create", "-f", "-", input=json.dumps(store), check=False)
    assert refused.returncode == 1
    assert 'The DataStore "bad" is invalid' in refused.stderr and message in refused.stderr


@pytest.mark.parametrize(("value", "found"), [('"two"', "string"), ("1.5", "number"), ("true", "boolean")])
def test_a_tcp_field_of_the_wrong_type_is_refused(kubectl: Kubectl, value: str, found: str) -> None:
    """Found by probing: `replicas: "two"` was stored and the controller failed on it in a loop."""
    tcp = json.loads(json.dumps(TCP))
    tcp["metadata"]["name"] = f"typed-{found}"
    tcp["spec"]["controlPlane"]["deployment"]["replicas"] = json.loads(value)
    refused = kubectl("create", "-f", "-", input=json.dumps(tcp), check=False)
    assert refused.returncode == 1
    assert (
        f'spec.controlPlane.deployment.replicas: Invalid value: "{found}": spec.controlPlane.deployment.replicas'
        f' in body must be of type integer: "{found}"'
    ) in refused.stderr


def _tcp(name: str, **deployment: Any) -> dict[str, Any]:
    tcp = json.loads(json.dumps(TCP))
    tcp["metadata"]["name"] = name
    tcp["spec"]["controlPlane"]["deployment"].update(deployment)
    return tcp


def test_an_unknown_tcp_field_is_refused_strictly_and_pruned_otherwise(kubectl: Kubectl) -> None:
    """Found by probing: `spec.bogusField` was stored as given. Kamaji's CRD has a structural schema, so
    apiextensions-apiserver prunes a field it lacks; kubectl's default `--validate=strict` refuses it
    with a strict decoding error, `--validate=warn` gets it dropped with a warning."""
    tcp = _tcp("unknown-field")
    tcp["spec"]["bogusField"] = 1
    tcp["spec"]["controlPlane"]["service"]["typo"] = "x"
    refused = kubectl("create", "-f", "-", input=json.dumps(tcp), check=False)
    assert refused.returncode == 1
    assert (
        'TenantControlPlane in version "v1alpha1" cannot be handled as a TenantControlPlane: strict decoding'
        ' error: unknown field "spec.bogusField", unknown field "spec.controlPlane.service.typo"'
    ) in refused.stderr
    warned = kubectl("create", "--validate=warn", "-f", "-", input=json.dumps(tcp))
    assert 'Warning: unknown field "spec.bogusField"' in warned.stderr
    stored = json.loads(kubectl("get", "tcp", "unknown-field", "-o", "json").stdout)
    assert "bogusField" not in stored["spec"] and "typo" not in stored["spec"]["controlPlane"]["service"]
    assert stored["spec"]["controlPlane"]["service"]["serviceType"] == "ClusterIP"
    patched = kubectl(
        "patch", "tcp", "unknown-field", "--type=merge", "-p", '{"spec":{"networkProfile":{"prot":1}}}'
    )
    assert 'unknown field "spec.networkProfile.prot"' in patched.stderr
    kubectl("delete", "tcp", "unknown-field", "--wait=false")


def test_a_strategic_merge_patch_of_a_tcp_is_unsupported(
    kubectl: Kubectl, apiserver: RunningAPIServer
) -> None:
    """kube serves custom resources without strategic merge patch: kubectl patch's default type is
    refused with 415 and kubectl's own hint, a merge patch goes through."""
    kubectl("create", "-f", "-", input=json.dumps(_tcp("patched")))
    refused = kubectl(
        "patch",
        "tcp",
        "patched",
        "-p",
        '{"spec":{"controlPlane":{"deployment":{"replicas":1}}}}',
        check=False,
    )
    assert refused.returncode == 1
    assert (
        "application/strategic-merge-patch+json is not supported by kamaji.clastix.io/v1alpha1"
        in refused.stderr
    )
    assert (
        "the body of the request was in an unknown format - accepted media types include:"
        " application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    ) in refused.stderr
    api = kubernetes.client.CustomObjectsApi(
        kubernetes.config.new_client_from_config(str(apiserver.kubeconfig))
    )
    with pytest.raises(kubernetes.client.ApiException) as raised:
        api.patch_namespaced_custom_object(
            "kamaji.clastix.io",
            "v1alpha1",
            "default",
            "tenantcontrolplanes",
            "patched",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert raised.value.status == 415 and json.loads(raised.value.body)["reason"] == "UnsupportedMediaType"
    patched = api.patch_namespaced_custom_object(
        "kamaji.clastix.io",
        "v1alpha1",
        "default",
        "tenantcontrolplanes",
        "patched",
        {"spec": {"controlPlane": {"deployment": {"replicas": 1}}}},
        field_validation="Strict",
    )
    assert patched["spec"]["controlPlane"]["deployment"]["replicas"] == 1
    kubectl("delete", "tcp", "patched", "--wait=false")


def test_an_embedded_core_type_is_checked_by_the_schema(kubectl: Kubectl) -> None:
    """The Kubernetes types Kamaji embeds are part of its CRD's schema: a wrong type deep inside an
    additional container is a 422 with the CRD's wording, and its unknown fields are pruned too."""
    tcp = _tcp(
        "embedded",
        additionalContainers=[{"name": "sidecar", "image": "busybox", "ports": [{"containerPort": "a"}]}],
    )
    refused = kubectl("create", "-f", "-", input=json.dumps(tcp), check=False)
    assert refused.returncode == 1
    path = "spec.controlPlane.deployment.additionalContainers[0].ports[0].containerPort"
    assert (
        f'{path}: Invalid value: "string": {path} in body must be of type integer: "string"' in refused.stderr
    )
    tcp["spec"]["controlPlane"]["deployment"]["additionalContainers"][0]["ports"] = [{"containerPort": 80}]
    tcp["spec"]["controlPlane"]["deployment"]["additionalContainers"][0]["imagee"] = "typo"
    refused = kubectl("create", "-f", "-", input=json.dumps(tcp), check=False)
    assert 'unknown field "spec.controlPlane.deployment.additionalContainers[0].imagee"' in refused.stderr


def test_kubectl_explain_walks_the_tcp_schema(kubectl: Kubectl) -> None:
    """Found by probing: `kubectl explain tcp.spec` said `field "spec" does not exist`."""
    explained = kubectl("explain", "tcp.spec.controlPlane.deployment").stdout
    assert "FIELD: deployment <Object>" in explained
    assert "additionalContainers\t<[]Object>" in explained and "replicas\t<integer>" in explained
    service = kubectl("explain", "tcp.spec.controlPlane.service.serviceType").stdout
    assert "ClusterIP" in service and "LoadBalancer" in service
    driver = kubectl("explain", "datastore.spec.driver").stdout
    assert "etcd" in driver and "sqlite" in driver
    crd = json.loads(kubectl("get", "crd", "tenantcontrolplanes.kamaji.clastix.io", "-o", "json").stdout)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["required"] == ["controlPlane", "kubernetes"]

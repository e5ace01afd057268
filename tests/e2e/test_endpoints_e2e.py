"""A Service's Endpoints and EndpointSlices, as kube-controller-manager's endpoints and endpointslice
controllers keep them: a Deployment exposed with `kubectl expose` lists its pods' addresses, follows
scaling and readiness, and they go with the Service; `kubectl describe`, `kubectl get` and the official
client read them; a 1.33 tenant warns that v1 Endpoints are deprecated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, release_server, wait_for

from tenantgpu.controlplane import ControlPlaneServices
from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow  # drives real kubectl binaries and a simulated worker

NODE = "endpoints-node"
DEPRECATION = "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"


@pytest.fixture(scope="module")
def worker(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, services: ControlPlaneServices
) -> Iterator[Worker]:
    client = KubeClient.from_kubeconfig(apiserver.kubeconfig)
    running = Worker(client, NODE, [], SharingConfig())
    background_loop.run(running.start())
    yield running
    background_loop.run(running.stop())
    background_loop.run(client.close())


def _json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl(*args, "-o", "json").stdout)


def _pod_ips(kubectl: Kubectl, selector: str) -> set[str]:
    pods = _json(kubectl, "get", "pods", "-l", selector)["items"]
    return {
        p["status"]["podIP"]
        for p in pods
        if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")
    }


def _addresses(endpoints: dict[str, Any], key: str = "addresses") -> set[str]:
    return {a["ip"] for s in endpoints.get("subsets") or [] for a in s.get(key) or []}


def _slices(kubectl: Kubectl, service: str) -> list[dict[str, Any]]:
    return _json(kubectl, "get", "endpointslices", "-l", f"kubernetes.io/service-name={service}")["items"]


def _running_ips(kubectl: Kubectl, selector: str, count: int) -> set[str]:
    def probe() -> set[str] | None:
        pods = _json(kubectl, "get", "pods", "-l", selector)["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        ready = {
            p["status"]["podIP"]
            for p in live
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []
            )
        }
        return ready if len(live) == count and len(ready) == count else None

    return wait_for(f"{count} ready pods of {selector}", probe, timeout=60)


def _endpoints_become(kubectl: Kubectl, name: str, ips: set[str]) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        got = kubectl("get", "endpoints", name, "-o", "json", check=False)
        if got.returncode != 0:
            return None
        endpoints = json.loads(got.stdout)
        return endpoints if _addresses(endpoints) == ips else None

    return wait_for(f"the Endpoints {name} to list {sorted(ips)}", probe, timeout=30)


def _slices_become(kubectl: Kubectl, name: str, ips: set[str]) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        slices = _slices(kubectl, name)
        listed = {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}
        return slices if listed == ips else None

    return wait_for(f"the EndpointSlices of {name} to list {sorted(ips)}", probe, timeout=30)


def test_an_exposed_deployment_gets_endpoints_and_a_slice_that_follow_its_scale(
    kubectl: Kubectl, worker: Worker
) -> None:
    kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
    kubectl("expose", "deployment", "web", "--port", "80")
    service = _json(kubectl, "get", "svc", "web")
    ips = _running_ips(kubectl, "app=web", 2)
    endpoints = _endpoints_become(kubectl, "web", ips)

    assert endpoints["metadata"]["labels"] == {
        "app": "web",
        "endpoints.kubernetes.io/managed-by": "endpoint-controller",
    }
    assert "endpoints.kubernetes.io/last-change-trigger-time" in endpoints["metadata"]["annotations"]
    assert "ownerReferences" not in endpoints["metadata"]
    [subset] = endpoints["subsets"]
    assert subset["ports"] == [{"port": 80, "protocol": "TCP"}]
    pods = {p["status"]["podIP"]: p for p in _json(kubectl, "get", "pods", "-l", "app=web")["items"]}
    for address in subset["addresses"]:
        pod = pods[address["ip"]]
        assert address["nodeName"] == NODE
        assert address["targetRef"] == {
            "kind": "Pod",
            "namespace": "default",
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
        }
    assert [a["ip"] for a in subset["addresses"]] == sorted(ips)

    [slice_] = _slices_become(kubectl, "web", ips)
    meta = slice_["metadata"]
    assert meta["name"].startswith("web-") and meta["generateName"] == "web-"
    assert meta["labels"] == {
        "app": "web",
        "kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "name": "web",
            "uid": service["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "", "port": 80, "protocol": "TCP"}]
    for endpoint in slice_["endpoints"]:
        assert endpoint["conditions"] == {"ready": True, "serving": True, "terminating": False}
        assert endpoint["nodeName"] == NODE
        assert endpoint["targetRef"]["name"] == pods[endpoint["addresses"][0]]["metadata"]["name"]

    # what kubectl shows of them
    row = kubectl("get", "endpoints", "web", "--no-headers").stdout.split()
    assert row[0] == "web" and set(row[1].split(",")) == {f"{ip}:80" for ip in ips}
    rows = kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=web").stdout.splitlines()
    assert rows[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    name, kind, ports, listed, _age = rows[1].split()
    assert (name, kind, ports) == (meta["name"], "IPv4", "80") and set(listed.split(",")) == ips
    # kubectl up to 1.30 reads the Endpoints, from 1.31 on the EndpointSlices
    for version in ("1.27", "1.30", "1.31", "1.33"):
        described = kubectl("describe", "svc", "web", version=version).stdout
        line = next(line for line in described.splitlines() if line.startswith("Endpoints:"))
        assert set(line.split()[1].split(",")) == {f"{ip}:80" for ip in ips}, (version, line)

    # scaling up and down changes both
    kubectl("scale", "deployment", "web", "--replicas=3")
    ips = _running_ips(kubectl, "app=web", 3)
    _endpoints_become(kubectl, "web", ips)
    [slice_] = _slices_become(kubectl, "web", ips)
    assert slice_["metadata"]["name"] == meta["name"]  # the same slice, updated
    kubectl("scale", "deployment", "web", "--replicas=1")
    ips = wait_for("one pod left", lambda: found if len(found := _pod_ips(kubectl, "app=web")) == 1 else None)
    _endpoints_become(kubectl, "web", ips)
    _slices_become(kubectl, "web", ips)


def test_a_pod_that_is_not_ready_is_listed_as_not_ready_until_it_is(kubectl: Kubectl, worker: Worker) -> None:
    # the pod's container waits for a ConfigMap (CreateContainerConfigError): it has an IP, it is not Ready
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "waiting", "namespace": "default", "labels": {"app": "cfg"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "env": [
                        {
                            "name": "MODE",
                            "valueFrom": {"configMapKeyRef": {"name": "cfg-mode", "key": "mode"}},
                        }
                    ],
                }
            ]
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(pod))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "cfg", "namespace": "default"},
        "spec": {"selector": {"app": "cfg"}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}]},
    }
    kubectl("apply", "-f", "-", input=json.dumps(service))
    ip = wait_for("the pod's IP", lambda: _json(kubectl, "get", "pod", "waiting")["status"].get("podIP"))

    def endpoints_with(key: str) -> dict[str, Any] | None:
        got = kubectl("get", "endpoints", "cfg", "-o", "json", check=False)
        return (
            json.loads(got.stdout)
            if got.returncode == 0 and _addresses(json.loads(got.stdout), key)
            else None
        )

    endpoints = wait_for("a not-ready address", lambda: endpoints_with("notReadyAddresses"))
    assert _addresses(endpoints, "notReadyAddresses") == {ip} and _addresses(endpoints) == set()
    # the named targetPort is the container port of that name
    assert endpoints["subsets"][0]["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    [slice_] = _slices_become(kubectl, "cfg", {ip})
    assert slice_["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert slice_["endpoints"][0]["conditions"] == {"ready": False, "serving": False, "terminating": False}
    # kubectl shows ready addresses only: the column is empty (not `<none>`: there is a subset)
    assert len(kubectl("get", "endpoints", "cfg", "--no-headers").stdout.split()) == 2

    # publishNotReadyAddresses lists it as ready although it is not
    kubectl("patch", "svc", "cfg", "-p", '{"spec":{"publishNotReadyAddresses":true}}')
    endpoints = wait_for("the address published", lambda: endpoints_with("addresses"))
    assert _addresses(endpoints) == {ip} and _addresses(endpoints, "notReadyAddresses") == set()
    wait_for(
        "the slice's endpoint ready but not serving",
        lambda: (
            _slices(kubectl, "cfg")[0]["endpoints"][0]["conditions"]
            == {"ready": True, "serving": False, "terminating": False}
        ),
    )
    kubectl("patch", "svc", "cfg", "-p", '{"spec":{"publishNotReadyAddresses":false}}')
    wait_for("the address not ready again", lambda: endpoints_with("notReadyAddresses"))

    # once the ConfigMap is there the container starts, the pod is Ready, and so is its address
    kubectl("create", "configmap", "cfg-mode", "--from-literal=mode=on")
    wait_for("the address ready", lambda: endpoints_with("addresses"), timeout=60)
    wait_for(
        "the slice's endpoint ready",
        lambda: (
            _slices(kubectl, "cfg")[0]["endpoints"][0]["conditions"]
            == {"ready": True, "serving": True, "terminating": False}
        ),
    )


def test_deleting_the_service_removes_its_endpoints_and_slices(kubectl: Kubectl, worker: Worker) -> None:
    kubectl("create", "deployment", "gone", "--image=nginx")
    kubectl("expose", "deployment", "gone", "--port", "8080")
    ips = _running_ips(kubectl, "app=gone", 1)
    _endpoints_become(kubectl, "gone", ips)
    _slices_become(kubectl, "gone", ips)
    kubectl("delete", "svc", "gone")
    wait_for(
        "the Endpoints gone",
        lambda: kubectl("get", "endpoints", "gone", check=False).returncode != 0,
    )
    wait_for("the slices gone", lambda: _slices(kubectl, "gone") == [])
    # the pods are still there: only what the controllers wrote for the Service went
    assert _pod_ips(kubectl, "app=gone") == ips


def test_a_service_without_pods_or_selector(kubectl: Kubectl, services: ControlPlaneServices) -> None:
    # a selector that picks nothing: Endpoints without subsets, one empty placeholder slice
    kubectl("create", "service", "clusterip", "lonely", "--tcp=80:8080")
    endpoints = wait_for(
        "empty Endpoints",
        lambda: (
            (got := kubectl("get", "endpoints", "lonely", "-o", "json", check=False)).returncode == 0
            and json.loads(got.stdout)
        ),
    )
    assert "subsets" not in endpoints
    [slice_] = wait_for("the placeholder slice", lambda: _slices(kubectl, "lonely"))
    assert "endpoints" not in slice_ or slice_["endpoints"] == []
    assert "ports" not in slice_ or slice_["ports"] == []
    row = kubectl("get", "endpointslices", slice_["metadata"]["name"], "--no-headers").stdout.split()
    assert row[1:4] == ["IPv4", "<unset>", "<unset>"]
    # a Service without a selector keeps the Endpoints it is given; its only slice is the mirrored one
    manual = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "external-db", "namespace": "default"},
        "spec": {"ports": [{"port": 5432}]},
    }
    kubectl("apply", "-f", "-", input=json.dumps(manual))
    given = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "external-db", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 5432}]}],
    }
    kubectl("apply", "-f", "-", input=json.dumps(given))
    # the controllers sync Services in turn: once one created later has its slice, this one was seen
    kubectl("create", "service", "clusterip", "later", "--tcp=80")
    wait_for("the later Service's slice", lambda: _slices(kubectl, "later"))
    [mirrored] = wait_for("the mirrored slice", lambda: _slices(kubectl, "external-db"))
    assert mirrored["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == (
        "endpointslicemirroring-controller.k8s.io"
    )
    stored = _json(kubectl, "get", "endpoints", "external-db")
    assert stored["subsets"] == [
        {"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 5432, "protocol": "TCP"}]}
    ]
    assert "endpoints.kubernetes.io/managed-by" not in (stored["metadata"].get("labels") or {})
    # default/kubernetes is the API server's alone
    kubernetes_endpoints = _json(kubectl, "get", "endpoints", "kubernetes")
    assert kubernetes_endpoints["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}


def test_the_official_client_lists_the_slices(
    apiserver: RunningAPIServer, kubectl: Kubectl, worker: Worker
) -> None:
    kubectl("create", "deployment", "api", "--image=nginx", "--replicas=2")
    kubectl("expose", "deployment", "api", "--port", "443", "--target-port", "8443", "--name", "api")
    ips = _running_ips(kubectl, "app=api", 2)
    _slices_become(kubectl, "api", ips)
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(apiserver.kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as api:
        listed = kubernetes.client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
            "default", label_selector="kubernetes.io/service-name=api"
        )
        [slice_] = listed.items
        assert slice_.address_type == "IPv4"
        assert [(p.name, p.port, p.protocol) for p in slice_.ports] == [("", 8443, "TCP")]
        assert {e.addresses[0] for e in slice_.endpoints} == ips
        assert all(e.conditions.ready and e.node_name == NODE for e in slice_.endpoints)
        assert slice_.metadata.owner_references[0].kind == "Service"
        endpoints = kubernetes.client.CoreV1Api(api).read_namespaced_endpoints("api", "default")
        assert {a.ip for s in endpoints.subsets for a in s.addresses} == ips


def test_a_1_33_tenant_warns_that_v1_endpoints_are_deprecated(
    kubectl: Kubectl, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    # the module's tenant is 1.31: no warning, whichever kubectl asks
    older = kubectl("get", "endpoints", "kubernetes")
    assert "deprecated" not in older.stderr
    with release_server(background_loop, tmp_path / "v133", "v1.33.1") as kubeconfig:
        got = kubectl("get", "endpoints", kubeconfig=kubeconfig)
        assert got.stderr.splitlines() == [DEPRECATION] and "kubernetes" in got.stdout
        # every verb of the resource, refusals too, and from older kubectl as well
        missing = kubectl("get", "endpoints", "nothing", kubeconfig=kubeconfig, check=False)
        assert missing.returncode == 1 and DEPRECATION in missing.stderr
        assert DEPRECATION in kubectl("get", "ep", "-A", kubeconfig=kubeconfig, version="1.29").stderr
        # EndpointSlices are what to use: no warning there
        slices = kubectl("get", "endpointslices", kubeconfig=kubeconfig)
        assert slices.stderr == ""

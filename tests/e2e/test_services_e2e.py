"""What every cluster has and kubectl users look for: `default/kubernetes`, allocated cluster IPs and node
ports, and `kube-root-ca.crt` in every namespace, through the real kubectl and the official client."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, start_server, wait_for

from tenantgpu.controlplane import ControlPlaneServices

pytestmark = pytest.mark.slow  # drives real kubectl binaries


@pytest.fixture(scope="module")
def core(apiserver: RunningAPIServer, services: ControlPlaneServices) -> kubernetes.client.CoreV1Api:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(apiserver.kubeconfig), client_configuration=config)
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def _json(kubectl: Kubectl, *args: str, version: str = "1.33") -> Any:
    return json.loads(kubectl(*args, "-o", "json", version=version).stdout)


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_default_kubernetes_service_points_at_the_api_server(
    kubectl: Kubectl, apiserver: RunningAPIServer, version: str
) -> None:
    # the API server creates it beside serving, as kube-apiserver's bootstrap controller does
    wait_for(
        "default/kubernetes", lambda: kubectl("get", "svc", "kubernetes", check=False).returncode == 0 or None
    )
    table = kubectl("get", "svc", "kubernetes", version=version).stdout
    assert "10.96.0.1" in table and "443/TCP" in table
    service = _json(kubectl, "get", "svc", "kubernetes", version=version)
    assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": apiserver.server.port}
    ]
    endpoints = _json(kubectl, "get", "endpoints", "kubernetes", version=version)
    assert endpoints["subsets"] == [
        {
            "addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": apiserver.server.port, "protocol": "TCP"}],
        }
    ]
    port = apiserver.server.port
    rows = kubectl("get", "endpoints", "kubernetes", version=version).stdout.splitlines()
    assert rows[0].split() == ["NAME", "ENDPOINTS", "AGE"] and rows[1].split()[:2] == [
        "kubernetes",
        f"127.0.0.1:{port}",
    ]
    # kube-apiserver writes its EndpointSlice beside the Endpoints; kubectl describe reads the slice
    endpoint_slice = wait_for(
        "the kubernetes EndpointSlice",
        lambda: (
            kubectl("get", "endpointslices", "kubernetes", "-o", "json", check=False, version=version).stdout
            or None
        ),
    )
    assert json.loads(endpoint_slice)["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    rows = kubectl("get", "endpointslices", version=version).stdout.splitlines()
    assert rows[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert rows[1].split()[:4] == ["kubernetes", "IPv4", str(port), "127.0.0.1"]
    described = kubectl("describe", "svc", "kubernetes", version=version).stdout
    assert f"127.0.0.1:{port}" in " ".join(
        line for line in described.splitlines() if line.startswith("Endpoints:")
    )


def test_services_get_cluster_ips_and_node_ports_and_refusals_read_as_kube_s(kubectl: Kubectl) -> None:
    kubectl("create", "service", "nodeport", "web", "--tcp=80:8080")
    web = _json(kubectl, "get", "svc", "web")
    assert ipaddress.IPv4Address(web["spec"]["clusterIP"]) in ipaddress.IPv4Network("10.96.0.0/16")
    assert web["spec"]["clusterIPs"] == [web["spec"]["clusterIP"]]
    node_port = web["spec"]["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    assert f"80:{node_port}/TCP" in kubectl("get", "svc", "web").stdout

    kubectl("create", "service", "clusterip", "fixed", "--tcp=80", "--clusterip=10.96.0.20")
    taken = kubectl(
        "create", "service", "clusterip", "fixed2", "--tcp=80", "--clusterip=10.96.0.20", check=False
    )
    assert taken.returncode == 1
    assert (
        'Service "fixed2" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.20"]: '
        "failed to allocate IP 10.96.0.20: provided IP is already allocated"
    ) in taken.stderr
    moved = kubectl("patch", "svc", "fixed", "-p", '{"spec":{"clusterIP":"10.96.0.21"}}', check=False)
    assert (
        moved.returncode == 1
        and "spec.clusterIPs[0]" in moved.stderr
        and "may not change once set" in moved.stderr
    )

    # a deleted Service frees its IP for the next one that asks
    kubectl("delete", "svc", "fixed")
    kubectl("create", "service", "clusterip", "fixed2", "--tcp=80", "--clusterip=10.96.0.20")
    headless = kubectl("create", "service", "clusterip", "peers", "--clusterip=None")
    assert headless.returncode == 0
    assert _json(kubectl, "get", "svc", "peers")["spec"]["clusterIP"] == "None"


def test_kubectl_apply_twice_keeps_the_allocated_ip(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "svc.json"
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "applied"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]},
    }
    manifest.write_text(json.dumps(body))
    kubectl("apply", "-f", str(manifest))
    ip = _json(kubectl, "get", "svc", "applied")["spec"]["clusterIP"]
    body["spec"]["ports"] = [{"port": 8080}]
    manifest.write_text(json.dumps(body))
    kubectl("apply", "-f", str(manifest))
    again = _json(kubectl, "get", "svc", "applied")
    assert again["spec"]["clusterIP"] == ip and again["spec"]["ports"][0]["port"] == 8080
    kubectl("replace", "-f", str(manifest))  # a PUT without the IP keeps it too
    assert _json(kubectl, "get", "svc", "applied")["spec"]["clusterIP"] == ip


def test_every_namespace_gets_the_root_ca_and_it_comes_back(
    core: kubernetes.client.CoreV1Api, apiserver: RunningAPIServer
) -> None:
    core.create_namespace({"metadata": {"name": "team-ca"}})

    def published() -> Any:
        try:
            return core.read_namespaced_config_map("kube-root-ca.crt", "team-ca")
        except kubernetes.client.ApiException:
            return None

    config_map = wait_for("kube-root-ca.crt in team-ca", published)
    assert config_map.data == {"ca.crt": apiserver.server.ca_pem.decode()}
    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert core.read_namespaced_config_map("kube-root-ca.crt", namespace).data["ca.crt"]

    core.delete_namespaced_config_map("kube-root-ca.crt", "team-ca")
    wait_for("kube-root-ca.crt re-created", published)
    core.patch_namespaced_config_map("kube-root-ca.crt", "team-ca", {"data": {"ca.crt": "tampered"}})
    wait_for(
        "ca.crt restored",
        lambda: (published().data or {}).get("ca.crt") == apiserver.server.ca_pem.decode() or None,
    )


def test_a_restarted_server_keeps_the_ips_and_follows_its_new_port(
    background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    first = start_server(background_loop, tmp_path, "restarted", service_cidr="10.100.0.0/24")
    client = kubernetes.client.CoreV1Api(_client(first))
    service = wait_for("default/kubernetes", lambda: _service(client, "kubernetes"))
    assert service.spec.cluster_ip == "10.100.0.1"
    created = client.create_namespaced_service(
        "default", {"metadata": {"name": "kept"}, "spec": {"ports": [{"port": 80}]}}
    )
    ip = created.spec.cluster_ip
    assert ipaddress.IPv4Address(ip) in ipaddress.IPv4Network("10.100.0.0/24")
    client.delete_namespaced_service("kubernetes", "default")
    old_port = first.server.port
    background_loop.run(first.server.stop())

    second = start_server(
        background_loop, tmp_path, "restarted", datastore=first.datastore, service_cidr="10.100.0.0/24"
    )
    try:
        assert second.server.port != old_port
        client = kubernetes.client.CoreV1Api(_client(second))
        service = wait_for("default/kubernetes put back", lambda: _service(client, "kubernetes"))
        assert (
            service.spec.cluster_ip == "10.100.0.1"
            and service.spec.ports[0].target_port == second.server.port
        )
        endpoints = wait_for(
            "the endpoints follow the new port",
            lambda: (
                (e := client.read_namespaced_endpoints("kubernetes", "default")).subsets[0].ports[0].port
                == second.server.port
                and e
            ),
        )
        assert endpoints.subsets[0].ports[0].port == second.server.port
        assert client.read_namespaced_service("kept", "default").spec.cluster_ip == ip
        with pytest.raises(kubernetes.client.ApiException) as refused:
            client.create_namespaced_service(
                "default", {"metadata": {"name": "copy"}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}
            )
        assert refused.value.status == 422 and "provided IP is already allocated" in refused.value.body
    finally:
        background_loop.run(second.server.stop())
        second.datastore.close()


def _service(client: kubernetes.client.CoreV1Api, name: str) -> Any:
    try:
        return client.read_namespaced_service(name, "default")
    except kubernetes.client.ApiException as error:
        if error.status != 404:
            raise
        return None


def _client(running: RunningAPIServer) -> kubernetes.client.ApiClient:
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(running.kubeconfig), client_configuration=config)
    return kubernetes.client.ApiClient(config)

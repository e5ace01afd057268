"""`nodes/<node>/proxy/<path>`: the API server passes a request on to the node's kubelet with its kubelet
client certificate, as kube-apiserver does (`kubectl get --raw /api/v1/nodes/N/proxy/pods`), and the
kubelet authorises its callers as its release does: from 1.33 (KubeletFineGrainedAuthz) `nodes/pods` or
`nodes/healthz` is enough for `/pods` or `/healthz`, before that only `nodes/proxy`. Pods' and services'
proxies refuse what they cannot reach with kube's words (their way through the tunnel is in
test_running_lab.py)."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, connect_kubelets, start_server
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.kubeclient.config import load_cert_chain
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow  # real kubectl and a worker

NODE = "gpu-0"
POD = {
    "metadata": {"name": "probe"},
    "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
}


@dataclass
class Tenant:
    running: RunningAPIServer
    worker: Worker
    client: KubeClient
    version: str

    @property
    def kubelet(self) -> tuple[str, int]:
        return self.worker.host_ip, self.worker.server.port


@pytest.fixture(scope="module", params=["v1.31.4", "v1.33.1"])
def tenant(
    request: pytest.FixtureRequest, background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenant]:
    version: str = request.param
    running = start_server(background_loop, tmp_path_factory.mktemp("proxy"), kubernetes_version=version)
    ca = running.server.config.pki.ca
    # the API server shows the kubelets its kubelet client certificate (kube's --kubelet-client-certificate)
    connect_kubelets(running)

    async def up() -> tuple[Worker, KubeClient]:
        client = KubeClient.from_kubeconfig(running.kubeconfig)
        worker = Worker(client, NODE, [], SharingConfig(), client_ca_pem=ca.cert_pem)
        await worker.start()
        await client.create("pods", POD, "default")
        return worker, client

    worker, client = background_loop.run(up())
    yield Tenant(running, worker, client, version)

    async def down() -> None:
        await worker.stop()
        await client.close()

    background_loop.run(down())
    background_loop.run(running.server.stop())
    running.datastore.close()


@pytest.fixture
def kubectl_of(tenant: Tenant, kubectl: Kubectl) -> Kubectl:
    def run(*args: str, check: bool = True) -> object:
        return kubectl(*args, kubeconfig=tenant.running.kubeconfig, check=check)

    return run  # type: ignore[return-value]


def _direct(tenant: Tenant, path: str, user: str) -> tuple[int, str]:
    """`path` straight from the kubelet's HTTPS port with a certificate of the tenant CA naming `user`."""
    cert, key = tenant.running.server.config.pki.ca.issue_client(user, [])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    load_cert_chain(context, cert, key)
    host, port = tenant.kubelet
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=15)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_kubectl_and_the_official_client_reach_the_kubelet_through_nodes_proxy(
    tenant: Tenant, kubectl_of: Kubectl
) -> None:
    assert kubectl_of("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/healthz").stdout == "ok"
    pods = json.loads(kubectl_of("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/pods").stdout)
    # the kubelet's pod manager as one v1 PodList; the items carry no type of their own
    assert (pods["kind"], pods["apiVersion"]) == ("PodList", "v1")
    assert [p["metadata"]["name"] for p in pods["items"]] == ["probe"]
    assert "kind" not in pods["items"][0] and pods["items"][0]["spec"]["nodeName"] == NODE
    # the node's name with its kubelet port, and with a scheme, are the same node
    port = tenant.kubelet[1]
    assert kubectl_of("get", "--raw", f"/api/v1/nodes/{NODE}:{port}/proxy/healthz").stdout == "ok"
    assert kubectl_of("get", "--raw", f"/api/v1/nodes/https:{NODE}:{port}/proxy/healthz").stdout == "ok"

    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(tenant.running.kubeconfig)))
    try:
        assert api.connect_get_node_proxy_with_path(NODE, "healthz") == "ok"
        log = api.connect_get_node_proxy_with_path(NODE, "containerLogs/default/probe/c")
        assert "tenantgpu simulated container c" in log
    finally:
        api.api_client.close()


def test_nodes_proxy_refuses_as_kube_apiserver_does(tenant: Tenant, kubectl_of: Kubectl) -> None:
    def error(path: str) -> str:
        result = kubectl_of("get", "--raw", path, check=False)
        assert result.returncode == 1  # type: ignore[attr-defined]
        return result.stderr.strip()  # type: ignore[attr-defined,no-any-return]

    assert (
        error("/api/v1/nodes/nowhere/proxy/healthz")
        == 'Error from server (NotFound): nodes "nowhere" not found'
    )
    assert error(f"/api/v1/nodes/ftp:{NODE}:1/proxy/healthz") == (
        f'Error from server (BadRequest): invalid node request "ftp:{NODE}:1"'
    )
    # another port of a loopback address is not proxied
    assert (
        error(f"/api/v1/nodes/{NODE}:1/proxy/healthz")
        == "Error from server (BadRequest): address not allowed"
    )
    # who may not `get nodes/proxy` is refused by the API server's RBAC, before any kubelet is asked
    kubectl_of("create", "serviceaccount", "viewer", check=False)
    result = kubectl_of(
        "get", "--raw", f"/api/v1/nodes/{NODE}/proxy/healthz", "--as=system:serviceaccount:default:viewer",
        check=False,
    )  # fmt: skip
    assert result.stderr.strip() == (  # type: ignore[attr-defined]
        f'Error from server (Forbidden): nodes "{NODE}" is forbidden: User "system:serviceaccount:default:viewer" '
        'cannot get resource "nodes/proxy" in API group "" at the cluster scope'
    )


def test_the_kubelets_release_decides_whether_nodes_pods_is_enough(
    tenant: Tenant, kubectl_of: Kubectl
) -> None:
    user = f"monitor-{tenant.version.replace('.', '-')}"
    kubectl_of("create", "clusterrole", user, "--verb=get", "--resource=nodes/pods,nodes/healthz")
    kubectl_of("create", "clusterrolebinding", user, f"--clusterrole={user}", f"--user={user}")
    pods, healthz, logs = (
        _direct(tenant, path, user) for path in ("/pods", "/healthz", "/containerLogs/default/probe/c")
    )
    if tenant.version == "v1.33.1":
        assert pods[0] == 200 and json.loads(pods[1])["kind"] == "PodList"
        assert healthz == (200, "ok")
    else:
        assert pods == (403, f"Forbidden (user={user}, verb=get, resource=nodes, subresource=proxy)")
        assert healthz == (403, f"Forbidden (user={user}, verb=get, resource=nodes, subresource=proxy)")
    # logs are `proxy` in every release: refused, and from 1.32 the text lists what was asked
    named = "subresource(s)=[proxy]" if tenant.version == "v1.33.1" else "subresource=proxy"
    assert logs == (403, f"Forbidden (user={user}, verb=get, resource=nodes, {named})")
    # a user with nothing granted is told both subresources asked on 1.33
    nobody = _direct(tenant, "/pods", "nobody")
    named = "subresource(s)=[pods proxy]" if tenant.version == "v1.33.1" else "subresource=proxy"
    assert nobody == (403, f"Forbidden (user=nobody, verb=get, resource=nodes, {named})")


def test_a_kubelet_out_of_reach_is_a_status_with_the_dials_error(
    tenant: Tenant, background_loop: BackgroundLoop, kubectl_of: Kubectl
) -> None:
    background_loop.run(tenant.worker.server.stop())
    try:
        result = kubectl_of("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/healthz", check=False)
        assert result.returncode == 1  # type: ignore[attr-defined]
        host, port = tenant.kubelet
        assert result.stderr.strip() == (  # type: ignore[attr-defined]
            f"Error from server: dial tcp {host}:{port}: connect: connection refused"
        )
    finally:
        background_loop.run(tenant.worker.server.start())
    assert kubectl_of("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/healthz").stdout == "ok"  # type: ignore[attr-defined]


def test_pod_and_service_proxies_refuse_as_kube_apiserver_does(tenant: Tenant, kubectl_of: Kubectl) -> None:
    """What needs no reachable pod: kube's 400 and 503 answers, through kubectl."""

    def error(path: str) -> str:
        result = kubectl_of("get", "--raw", path, check=False)
        assert result.returncode == 1  # type: ignore[attr-defined]
        return result.stderr.strip()  # type: ignore[attr-defined,no-any-return]

    kubectl_of("create", "service", "clusterip", "lonely", "--tcp=80:8080", check=False)
    assert error("/api/v1/namespaces/default/services/lonely/proxy/") == (
        'Error from server (ServiceUnavailable): no endpoints available for service "lonely"'
    )
    assert error("/api/v1/namespaces/default/services/lonely:81/proxy/") == (
        'Error from server (ServiceUnavailable): no service port 81 found for service "lonely"'
    )
    assert error("/api/v1/namespaces/default/services/nowhere/proxy/") == (
        'Error from server (NotFound): services "nowhere" not found'
    )
    assert error("/api/v1/namespaces/default/pods/ftp:probe:1/proxy/") == (
        'Error from server (BadRequest): invalid pod request "ftp:probe:1"'
    )
    kubectl_of("run", "unplaced", "--image=busybox", "--restart=Never", "--overrides",
               '{"spec": {"nodeName": "elsewhere"}}', check=False)  # fmt: skip
    # a pod without an address is not proxied
    assert error("/api/v1/namespaces/default/pods/unplaced/proxy/") == (
        "Error from server (BadRequest): address not allowed"
    )

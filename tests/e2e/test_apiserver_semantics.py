"""API semantics through the official Python client and raw HTTPS: errors, concurrency, watch, auth."""

from __future__ import annotations

import base64
import http.client
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from apiserver_harness import (
    BackgroundLoop,
    RawClient,
    RunningAPIServer,
    kubectl_path,
    start_server,
    wait_for,
)
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from tenantgpu.apiserver.auth import SharedClientTrust


@pytest.fixture(scope="module")
def api(apiserver: RunningAPIServer) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def raw(apiserver: RunningAPIServer) -> RawClient:
    return RawClient(apiserver.kubeconfig)


def _pod(name: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def test_python_client_version_and_crud(api: client.ApiClient, core: client.CoreV1Api) -> None:
    assert client.VersionApi(api).get_code().git_version == "v1.31.4"
    created = core.create_namespaced_pod("default", _pod("py-1", app="py"))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.spec.restart_policy == "Always" and created.spec.scheduler_name == "default-scheduler"
    assert core.read_namespaced_pod("py-1", "default").metadata.uid == created.metadata.uid
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("nope", "default")
    assert missing.value.status == 404 and json.loads(missing.value.body)["reason"] == "NotFound"
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_pod("default", _pod("py-1"))
    assert exists.value.status == 409 and json.loads(exists.value.body)["reason"] == "AlreadyExists"
    core.delete_namespaced_pod("py-1", "default")
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("py-1", "default")
    assert gone.value.status == 404


def test_stale_update_gets_409_conflict(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
    first = core.read_namespaced_config_map("cfg", "default")
    second = core.read_namespaced_config_map("cfg", "default")
    first.data = {"a": "2"}
    core.replace_namespaced_config_map("cfg", "default", first)
    second.data = {"a": "3"}
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("cfg", "default", second)
    status = json.loads(stale.value.body)
    assert stale.value.status == 409 and status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]
    assert core.read_namespaced_config_map("cfg", "default").data == {"a": "2"}


def test_patch_types(core: client.CoreV1Api) -> None:
    pod = _pod("patched", app="p")
    pod["spec"]["containers"].append({"name": "side", "image": "busybox"})
    core.create_namespaced_pod("default", pod)
    # a dict is sent as a strategic merge patch: containers merge by name
    core.patch_namespaced_pod(
        "patched", "default", {"spec": {"containers": [{"name": "side", "image": "alpine"}]}}
    )
    images = {c.name: c.image for c in core.read_namespaced_pod("patched", "default").spec.containers}
    assert images == {"main": "busybox", "side": "alpine"}
    # a list is sent as a JSON patch
    core.patch_namespaced_pod(
        "patched", "default", [{"op": "add", "path": "/metadata/labels/extra", "value": "x"}]
    )
    assert core.read_namespaced_pod("patched", "default").metadata.labels == {"app": "p", "extra": "x"}
    with pytest.raises(ApiException) as bad:
        core.patch_namespaced_pod("patched", "default", [{"op": "remove", "path": "/metadata/labels/none"}])
    assert bad.value.status == 422


def test_invalid_objects_get_422_with_causes(raw: RawClient) -> None:
    no_containers = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "empty"},
        "spec": {"containers": []},
    }
    response = raw.request("POST", "/api/v1/namespaces/default/pods", no_containers)
    status = response.json()
    assert response.status == 422 and status["reason"] == "Invalid"
    assert {
        "field": "spec.containers",
        "reason": "FieldValueRequired",
        "message": "Required value",
    } in status["details"]["causes"]
    bad_quantity = _pod("bad-quantity")
    bad_quantity["spec"]["containers"][0]["resources"] = {"limits": {"memory": "lots"}}
    response = raw.request("POST", "/api/v1/namespaces/default/pods", bad_quantity)
    assert response.status == 422 and "quantities must match" in response.json()["message"]
    # a field of the wrong JSON type is kube's decoding error, whatever fieldValidation says
    wrong_type = _pod("wrong-type")
    wrong_type["spec"]["containers"][0]["command"] = "sleep 3600"
    for query in ("", "?fieldValidation=Ignore"):
        response = raw.request("POST", f"/api/v1/namespaces/default/pods{query}", wrong_type)
        assert (response.status, response.json()["reason"]) == (400, "BadRequest")
        assert response.json()["message"] == (
            'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct'
            " field Container.spec.containers.command of type []string"
        )
    # beyond Decimal's range (kubectl sends `cpu: 1e1000000` as `10e999999`): once a 500
    for huge in ("10e999999", "1e1000000"):
        bad_quantity["spec"]["containers"][0]["resources"] = {"limits": {"cpu": huge}}
        response = raw.request("POST", "/api/v1/namespaces/default/pods", bad_quantity)
        assert response.status == 422 and "quantities must match" in response.json()["message"]


def test_client_mistakes_get_4xx_and_the_server_keeps_serving(raw: RawClient) -> None:
    malformed = raw.request("POST", "/api/v1/namespaces/default/pods", b'{"apiVersion": "v1", "kind": ')
    assert malformed.status == 400 and malformed.json()["reason"] == "BadRequest"
    wrong_type = raw.request("POST", "/api/v1/namespaces/default/pods", b"x", {"Content-Type": "text/csv"})
    assert wrong_type.status == 415 and wrong_type.json()["reason"] == "UnsupportedMediaType"
    huge = raw.request(
        "POST", "/api/v1/namespaces/default/configmaps", b"{" + b" " * (4 * 1024 * 1024) + b"}"
    )
    assert huge.status == 413 and huge.json()["reason"] == "RequestEntityTooLarge"
    not_allowed = raw.request("PUT", "/api/v1/namespaces/default/pods")
    assert not_allowed.status == 405 and not_allowed.json()["reason"] == "MethodNotAllowed"
    unknown = raw.request("GET", "/api/v1/widgets")
    assert unknown.status == 404
    bad_selector = raw.request("GET", "/api/v1/pods?labelSelector=a%20in%20(")
    assert bad_selector.status == 400
    not_a_list = raw.request("POST", "/api/v1/namespaces/default/pods", [1, 2])
    assert not_a_list.status == 400
    assert raw.request("GET", "/api/v1/namespaces/default/pods").status == 200


def test_generate_name_dry_run_and_namespace_lifecycle(raw: RawClient) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    created = raw.request("POST", "/api/v1/namespaces/default/configmaps", body)
    assert created.status == 201 and created.json()["metadata"]["name"].startswith("gen-")
    assert len(created.json()["metadata"]["name"]) == len("gen-") + 5
    dry = raw.request(
        "POST", "/api/v1/namespaces/default/configmaps?dryRun=All", {"metadata": {"name": "dry"}}
    )
    assert dry.status == 201
    assert raw.request("GET", "/api/v1/namespaces/default/configmaps/dry").status == 404
    orphan = raw.request("POST", "/api/v1/namespaces/missing/configmaps", {"metadata": {"name": "x"}})
    assert orphan.status == 404 and orphan.json()["message"] == 'namespaces "missing" not found'


def test_list_selectors_and_paging(core: client.CoreV1Api, raw: RawClient) -> None:
    core.create_namespace({"metadata": {"name": "paging"}})
    for i in range(7):
        core.create_namespaced_pod("paging", _pod(f"p{i}", parity="even" if i % 2 == 0 else "odd"))
    assert len(core.list_namespaced_pod("paging", label_selector="parity=even").items) == 4
    assert [
        p.metadata.name for p in core.list_namespaced_pod("paging", field_selector="metadata.name=p3").items
    ] == ["p3"]
    names, token = [], None
    while True:
        page = core.list_namespaced_pod("paging", limit=3, _continue=token)
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == [f"p{i}" for i in range(7)]
    deleted = raw.request("DELETE", "/api/v1/namespaces/paging/pods?labelSelector=parity%3Dodd")
    assert deleted.status == 200 and len(deleted.json()["items"]) == 3
    assert len(core.list_namespaced_pod("paging").items) == 4


def test_watch_without_version_sends_current_objects_then_changes(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "watching"}})
    core.create_namespaced_pod("watching", _pod("before"))

    def later() -> None:
        time.sleep(0.5)
        core.create_namespaced_pod("watching", _pod("after"))

    threading.Thread(target=later).start()
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_pod, "watching", timeout_seconds=2):
        seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "before"), ("ADDED", "after")]


def test_watch_resumed_from_a_resource_version_loses_no_event(core: client.CoreV1Api, raw: RawClient) -> None:
    core.create_namespace({"metadata": {"name": "resume"}})
    start = core.list_namespaced_config_map("resume").metadata.resource_version
    for i in range(20):
        core.create_namespaced_config_map("resume", {"metadata": {"name": f"c{i}"}})
    core.delete_namespaced_config_map("c3", "resume")
    response = raw.request(
        "GET", f"/api/v1/namespaces/resume/configmaps?watch=true&resourceVersion={start}&timeoutSeconds=1"
    )
    events = [json.loads(line) for line in response.body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        *(("ADDED", f"c{i}") for i in range(20)),
        ("DELETED", "c3"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(start)


def test_a_watcher_that_stops_reading_still_gets_every_event_in_order(
    core: client.CoreV1Api, raw: RawClient
) -> None:
    # A watch connection that is not read fills up; its events wait in the server's queue for it,
    # and none is dropped or reordered.
    core.create_namespace({"metadata": {"name": "slow-reader"}})
    core.create_namespaced_config_map("slow-reader", {"metadata": {"name": "big"}, "data": {"n": "-1"}})
    start = core.list_namespaced_config_map("slow-reader").metadata.resource_version
    connection = http.client.HTTPSConnection(raw.host, raw.port, context=raw.context, timeout=60)
    headers = {"Accept": "application/json"}
    if raw.token:
        headers["Authorization"] = f"Bearer {raw.token}"
    path = f"/api/v1/namespaces/slow-reader/configmaps?watch=true&resourceVersion={start}&timeoutSeconds=30"
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()  # the headers only: nothing of the stream is read yet
    pad = "x" * 16_000
    for i in range(600):  # about 10 MB of events, more than the sockets between us buffer
        core.patch_namespaced_config_map("big", "slow-reader", {"data": {"n": str(i), "pad": pad}})
    values = []
    try:
        while len(values) < 600:
            event = json.loads(response.readline())
            values.append(int(event["object"]["data"]["n"]))
    finally:
        connection.close()
    assert values == list(range(600))


def test_watch_with_field_selector_sees_a_pod_arrive_on_its_node(
    core: client.CoreV1Api, raw: RawClient
) -> None:
    core.create_namespaced_pod("default", _pod("to-bind"))
    start = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=w7").metadata.resource_version
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "to-bind"},
        "target": {"name": "w7"},
    }
    assert raw.request("POST", "/api/v1/namespaces/default/pods/to-bind/binding", binding).status == 201
    again = raw.request("POST", "/api/v1/namespaces/default/pods/to-bind/binding", binding)
    assert again.status == 409
    response = raw.request(
        "GET",
        f"/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dw7&resourceVersion={start}&timeoutSeconds=1",
    )
    events = [json.loads(line) for line in response.body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "to-bind")]
    assert events[0]["object"]["spec"]["nodeName"] == "w7"


def test_too_old_resource_version_gets_410(background_loop: BackgroundLoop, tmp_path: Path) -> None:
    small = start_server(background_loop, tmp_path, "small-window", watch_window=5)
    try:
        raw = RawClient(small.kubeconfig)
        start = raw.request("GET", "/api/v1/namespaces/default/configmaps").json()["metadata"][
            "resourceVersion"
        ]
        for i in range(10):
            raw.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"c{i}"}})
        response = raw.request(
            "GET", f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={start}"
        )
        event = json.loads(response.body.splitlines()[0])
        assert event["type"] == "ERROR" and event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
    finally:
        background_loop.run(small.server.stop())


def test_a_request_without_credentials_is_system_anonymous(apiserver: RunningAPIServer) -> None:
    """kube-apiserver's --anonymous-auth, on by default and left on by Kamaji: no credential at all makes
    the request `system:anonymous` in `system:unauthenticated`, which RBAC lets read only the health and
    version paths (system:public-info-viewer); discovery is for authenticated users (system:discovery)."""
    anonymous = RawClient(apiserver.kubeconfig, anonymous=True)
    admin = RawClient(apiserver.kubeconfig)
    wait_for("the default roles", lambda: admin.request("GET", "/readyz").status == 200)
    response = anonymous.request("GET", "/api/v1/namespaces/default/pods")
    assert response.status == 403 and response.json()["reason"] == "Forbidden"
    assert response.json()["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the '
        'namespace "default"'
    )
    discovery = anonymous.request("GET", "/api")
    assert discovery.status == 403
    assert discovery.json()["message"] == 'forbidden: User "system:anonymous" cannot get path "/api"'
    assert anonymous.request("GET", "/healthz").body == b"ok"
    assert anonymous.request("GET", "/version").status == 200
    # a credential that does not check out is refused, not taken as anonymous
    bad = RawClient(apiserver.kubeconfig, anonymous=True, token="not-a-token")
    refused = bad.request("GET", "/api/v1/namespaces/default/pods")
    assert refused.status == 401 and refused.json()["reason"] == "Unauthorized"


def test_health_endpoints_list_kubes_checks_with_verbose(
    apiserver: RunningAPIServer, kubectl_home: Path
) -> None:
    """`kubectl get --raw '/readyz?verbose'`, the usual look at an API server's health, lists kube's
    checks in kube's order; liveness has no readiness-only ones; one check alone is `ok`."""
    kubectl = kubectl_path("1.31")

    def raw_get(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, "--kubeconfig", str(apiserver.kubeconfig), "get", "--raw", path],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(kubectl_home)},
        )

    # A server serves before its post-start hooks (rbac/bootstrap-roles) finish, and /readyz says so
    # with a 500 until they have; wait for it, as a user of a fresh server would.
    deadline = time.monotonic() + 30
    while raw_get("/readyz").returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    ready = raw_get("/readyz?verbose").stdout.splitlines()
    assert ready[:5] == [
        "[+]ping ok",
        "[+]log ok",
        "[+]etcd ok",
        "[+]etcd-readiness ok",
        "[+]informer-sync ok",
    ]
    assert "[+]poststarthook/bootstrap-controller ok" in ready
    assert ready[-2:] == ["[+]shutdown ok", "readyz check passed"]
    live = raw_get("/livez?verbose&exclude=etcd").stdout.splitlines()
    assert (
        "[+]etcd excluded: ok" in live and "[+]shutdown ok" not in live and live[-1] == "livez check passed"
    )
    assert raw_get("/readyz/poststarthook/bootstrap-controller").stdout == "ok"
    missing = raw_get("/livez/shutdown")
    assert missing.returncode == 1 and "NotFound" in missing.stderr
    root = json.loads(raw_get("/").stdout)["paths"]
    assert {"/readyz/shutdown", "/livez/etcd", "/healthz/poststarthook/bootstrap-controller"} <= set(root)
    assert "/livez/shutdown" not in root


def test_service_account_tokens_and_token_review(apiserver: RunningAPIServer, raw: RawClient) -> None:
    raw.request("POST", "/api/v1/namespaces/kube-system/serviceaccounts", {"metadata": {"name": "hami"}})
    issued = raw.request(
        "POST",
        "/api/v1/namespaces/kube-system/serviceaccounts/hami/token",
        {"spec": {"expirationSeconds": 600}},
    )
    assert issued.status == 201
    token = issued.json()["status"]["token"]
    kubeconfig = apiserver.write_kubeconfig(
        "sa.kubeconfig", apiserver.server.service_account_kubeconfig("kube-system", "hami")
    )
    as_account = RawClient(kubeconfig)
    # a service account may do only what RBAC grants it, until a cluster admin binds it a role
    denied = as_account.request("GET", "/api/v1/nodes")
    assert denied.status == 403
    assert denied.json()["message"] == (
        'nodes is forbidden: User "system:serviceaccount:kube-system:hami" cannot list resource "nodes" in'
        ' API group "" at the cluster scope'
    )
    reader = {
        "metadata": {"name": "node-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}],
    }
    assert raw.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", reader).status == 201
    binding = {
        "metadata": {"name": "hami-reads-nodes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "hami", "namespace": "kube-system"}],
    }
    assert (
        raw.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding).status == 201
    )
    assert as_account.request("GET", "/api/v1/nodes").status == 200
    review = raw.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token}})
    status = review.json()["status"]
    assert status["authenticated"] is True
    assert status["user"]["username"] == "system:serviceaccount:kube-system:hami"
    forged = raw.request(
        "POST", "/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token[:-4] + "AAAA"}}
    )
    assert forged.json()["status"]["authenticated"] is False


def test_unprivileged_user_is_forbidden_but_can_ask(apiserver: RunningAPIServer) -> None:
    path = apiserver.write_kubeconfig(
        "dev.kubeconfig", apiserver.server.user_kubeconfig("dev", ["developers"])
    )
    dev = RawClient(path)
    denied = dev.request("GET", "/api/v1/namespaces/default/pods")
    assert denied.status == 403 and denied.json()["reason"] == "Forbidden"
    assert 'User "dev" cannot list resource "pods"' in denied.json()["message"]
    review = {"spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}}}
    answer = dev.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    assert answer.status == 201 and answer.json()["status"]["allowed"] is False


def test_credentials_of_another_tenant_get_401(background_loop: BackgroundLoop, tmp_path: Path) -> None:
    trust = SharedClientTrust()
    # tenant-c starts first: it must learn tenant-b's CA while running
    tenant_c = start_server(background_loop, tmp_path / "c", "tenant-c", client_trust=trust)
    tenant_b = start_server(background_loop, tmp_path / "b", "tenant-b", client_trust=trust)
    try:
        # tenant-b's admin certificate and token, pointed at tenant-c
        b_config = yaml.safe_load(tenant_b.kubeconfig.read_text())
        b_config["clusters"][0]["cluster"]["server"] = tenant_c.url
        b_config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
            tenant_c.server.ca_pem
        ).decode()
        foreign_cert = tmp_path / "foreign-cert.kubeconfig"
        foreign_cert.write_text(json.dumps(b_config))
        response = RawClient(foreign_cert).request("GET", "/api/v1/namespaces")
        assert response.status == 401 and response.json()["reason"] == "Unauthorized"

        b_token = tenant_b.server.issue_service_account_token("kube-system", "admin")
        token_config = tenant_c.server.service_account_kubeconfig("kube-system", "admin")
        token_config = token_config.replace(token_config.split("token: ")[1].split()[0], b_token)
        foreign_token = tmp_path / "foreign-token.kubeconfig"
        foreign_token.write_text(token_config)
        response = RawClient(foreign_token).request("GET", "/api/v1/namespaces")
        assert response.status == 401 and response.json()["reason"] == "Unauthorized"
        own = tmp_path / "own.kubeconfig"
        own.write_text(tenant_c.server.service_account_kubeconfig("kube-system", "admin"))
        # its own token is authenticated (and, with no role bound to the account, forbidden)
        response = RawClient(own).request("GET", "/api/v1/namespaces")
        assert response.status == 403
        assert 'User "system:serviceaccount:kube-system:admin" cannot list' in response.json()["message"]
    finally:
        background_loop.run(tenant_b.server.stop())
        background_loop.run(tenant_c.server.stop())


def test_tenants_sharing_one_datastore_do_not_see_each_other(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "only-in-a"}})
    neighbour = start_server(background_loop, apiserver.state_dir, "neighbour", datastore=apiserver.datastore)
    raw = RawClient(neighbour.kubeconfig)
    assert raw.request("GET", "/api/v1/namespaces/default/configmaps/only-in-a").status == 404
    names = [i["metadata"]["name"] for i in raw.request("GET", "/api/v1/configmaps").json()["items"]]
    assert "only-in-a" not in names
    raw.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "only-in-n"}})
    background_loop.run(neighbour.server.stop())
    background_loop.run(neighbour.server.delete_storage())
    # the neighbour's data is gone, ours is untouched
    keys = [kv.key for kv in background_loop.run(apiserver.datastore.range("/"))]
    assert not any(key.startswith("/neighbour/") for key in keys)
    assert core.read_namespaced_config_map("only-in-a", "default").metadata.name == "only-in-a"


def test_graceful_deletion_waits_for_finalizers(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", "default")
    assert gone.value.status == 404


_WRONG_SHAPES = [
    {"metadata": {"name": 5}},
    {"metadata": {"name": "x", "labels": ["a"]}},
    {"metadata": {"name": "x", "annotations": {"a": 1}}},
    {"metadata": {"name": "x"}, "spec": "str"},
    {"metadata": {"name": "x"}, "spec": {"containers": {"a": 1}}},
    {"metadata": {"name": "x"}, "spec": {"containers": [1, 2]}},
    {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "a", "image": "b", "resources": "x"}]}},
    {"metadata": "x"},
    "string",
    None,
]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/pods",
        "/api/v1/nodes",
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/services",
        "/api/v1/namespaces/default/resourcequotas",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    ],
)
def test_bodies_of_the_wrong_shape_never_get_500(raw: RawClient, path: str) -> None:
    for body in _WRONG_SHAPES:
        response = raw.request("POST", path, json.dumps(body))
        assert response.status < 500, (body, response.body)
        if path.endswith("/pods"):  # every one of them is malformed for a pod
            assert 400 <= response.status < 500, (body, response.body)
    raw.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "shape"}})
    for patch in ('{"data": 5}', '{"metadata": {"labels": 3}}', '{"metadata": null}'):
        response = raw.request(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/shape",
            patch,
            {"Content-Type": "application/merge-patch+json"},
        )
        assert response.status < 500, (patch, response.body)


def test_streaming_list_ends_its_initial_events_with_a_bookmark(raw: RawClient) -> None:
    raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "streamed"}})
    raw.request("POST", "/api/v1/namespaces/streamed/configmaps", {"metadata": {"name": "one"}})
    response = raw.request(
        "GET",
        "/api/v1/namespaces/streamed/configmaps?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    events = [json.loads(line) for line in response.body.splitlines()]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_status_is_reset_on_create_except_for_nodes(raw: RawClient) -> None:
    pod = _pod("claims-running")
    pod["status"] = {"phase": "Running"}
    created = raw.request("POST", "/api/v1/namespaces/default/pods", pod).json()
    assert created["status"]["phase"] == "Pending"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "registers"},
        "status": {"capacity": {"cpu": "4"}},
    }
    assert raw.request("POST", "/api/v1/nodes", node).json()["status"]["capacity"] == {"cpu": "4"}


def test_status_and_main_resource_each_keep_what_the_other_owns(raw: RawClient) -> None:
    base = "/api/v1/namespaces/default/pods/owned-parts"
    raw.request("POST", "/api/v1/namespaces/default/pods", _pod("owned-parts", app="a"))
    merge = {"Content-Type": "application/merge-patch+json"}
    # Through /status the spec change is dropped; the label lands, as kube's pod status strategy (which
    # keeps only the spec and the owner references) lets it.
    through_status = {
        "metadata": {"labels": {"app": "b"}},
        "spec": {"activeDeadlineSeconds": 5},
        "status": {"phase": "Running", "message": "up"},
    }
    after_status = raw.request("PATCH", base + "/status", through_status, merge).json()
    assert after_status["status"]["phase"] == "Running"
    assert after_status["metadata"]["labels"] == {"app": "b"}
    assert "activeDeadlineSeconds" not in after_status["spec"]
    # Through the main resource the status change is dropped and the label change lands.
    through_main = {"metadata": {"labels": {"app": "c"}}, "status": {"phase": "Failed", "message": None}}
    after_main = raw.request("PATCH", base, through_main, merge).json()
    assert after_main["metadata"]["labels"] == {"app": "c"}
    assert after_main["status"]["phase"] == "Running" and after_main["status"]["message"] == "up"
    # What was stored is what is read back, and no response shares parts with a later write.
    stored = raw.request("GET", base).json()
    assert stored == after_main
    assert after_status["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]


def test_a_taken_port_fails_start_cleanly_and_a_retry_serves(
    apiserver: RunningAPIServer, background_loop: BackgroundLoop, tmp_path: Path
) -> None:
    with pytest.raises(OSError):
        start_server(background_loop, tmp_path, "clash", port=apiserver.server.port)
    retry = start_server(background_loop, tmp_path, "clash")
    try:
        assert RawClient(retry.kubeconfig).request("GET", "/api/v1/namespaces").status == 200
    finally:
        background_loop.run(retry.server.stop())


def test_system_namespaces_may_not_be_deleted(raw: RawClient) -> None:
    response = raw.request("DELETE", "/api/v1/namespaces/kube-system")
    assert response.status == 403
    assert (
        response.json()["message"]
        == 'namespaces "kube-system" is forbidden: this namespace may not be deleted'
    )

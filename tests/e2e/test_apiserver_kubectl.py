"""The real kubectl (1.27, 1.29, 1.33) against one tenant API server: every command of kubectl-wire.md §2."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from apiserver_harness import Kubectl, RunningAPIServer, kubectl_path

pytestmark = pytest.mark.slow  # drives real kubectl binaries or subprocesses

VERSIONS = ["1.27", "1.29", "1.33"]


def _manifest(tmp_path: Path, name: str, image: str = "nginx:1.25", **labels: str) -> Path:
    path = tmp_path / f"{name}.json"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {"containers": [{"name": "main", "image": image}]},
    }
    path.write_text(json.dumps(pod))
    return path


def _validate_flag(version: str) -> list[str]:
    # 1.27 is also exercised with default validation (protobuf /openapi/v2) in its own test.
    return ["--validate=false"] if version == "1.27" else []


def test_version_reports_the_configured_kubernetes_version(kubectl: Kubectl) -> None:
    out = kubectl("version", "-o", "json").stdout
    assert json.loads(out)["serverVersion"]["gitVersion"] == "v1.31.4"


@pytest.mark.parametrize("version", VERSIONS)
def test_create_get_label_annotate_delete_pod(kubectl: Kubectl, tmp_path: Path, version: str) -> None:
    name = f"web-{version.replace('.', '')}"
    manifest = _manifest(tmp_path, name)
    flags = _validate_flag(version)
    assert f"pod/{name} created" in kubectl("create", "-f", str(manifest), *flags, version=version).stdout
    again = kubectl("create", "-f", str(manifest), *flags, version=version, check=False)
    assert again.returncode == 1
    assert f'pods "{name}" already exists' in again.stderr and "AlreadyExists" in again.stderr

    table = kubectl("get", "pods", version=version).stdout
    assert name in table and "STATUS" in table and "Pending" in table

    kubectl("label", "pod", name, "tier=web", version=version)
    kubectl("annotate", "pod", name, "note=hi", version=version)
    pod = json.loads(kubectl("get", "pod", name, "-o", "json", version=version).stdout)
    assert pod["metadata"]["labels"]["tier"] == "web"
    assert pod["metadata"]["annotations"]["note"] == "hi"
    kubectl("label", "pod", name, "tier-", version=version)
    pod = json.loads(kubectl("get", "pod", name, "-o", "json", version=version).stdout)
    assert "tier" not in pod["metadata"]["labels"]

    selected = kubectl("get", "pods", "-l", "tier!=web", "-o", "name", version=version).stdout
    assert f"pod/{name}" in selected

    assert f'pod "{name}" deleted' in kubectl("delete", "pod", name, version=version).stdout
    missing = kubectl("get", "pod", name, version=version, check=False)
    assert missing.returncode == 1 and f'pods "{name}" not found' in missing.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_apply_creates_then_configures_with_strategic_merge(
    kubectl: Kubectl, tmp_path: Path, version: str
) -> None:
    name = f"applied-{version.replace('.', '')}"
    flags = _validate_flag(version)
    out = kubectl("apply", "-f", str(_manifest(tmp_path, name)), *flags, version=version).stdout
    assert f"pod/{name} created" in out
    kubectl("label", "pod", name, "kept=yes", version=version)
    out = kubectl("apply", "-f", str(_manifest(tmp_path, name, "nginx:1.26")), *flags, version=version).stdout
    assert f"pod/{name} configured" in out
    pod = json.loads(kubectl("get", "pod", name, "-o", "json", version=version).stdout)
    assert [c["image"] for c in pod["spec"]["containers"]] == ["nginx:1.26"]
    assert pod["metadata"]["labels"]["kept"] == "yes"  # a merge, not a replacement
    kubectl("delete", "pod", name, "--wait=false", version=version)


UNQUOTED_QUANTITIES = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: c
        image: cuda
        resources:
          limits: {{nvidia.com/gpu: 1, nvidia.com/gpumem: 8000}}
"""


@pytest.mark.parametrize("server_side", [False, True])
def test_applying_the_same_manifest_again_changes_nothing(
    kubectl: Kubectl, tmp_path: Path, server_side: bool
) -> None:
    """Found by probing: HAMi's unquoted `gpumem: 8000` is stored as `8k`, and every apply of the same
    file bumped the generation (judged before defaulting), so `kubectl diff` reported a change and
    exited 1. kube judges the defaulted object: nothing changes, no new generation or resourceVersion."""
    name = "ssa-again" if server_side else "csa-again"
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(UNQUOTED_QUANTITIES.format(name=name))
    flags = ["--server-side"] if server_side else []
    kubectl("apply", "-f", str(manifest), *flags)
    first = json.loads(kubectl("get", "deployment", name, "-o", "json").stdout)["metadata"]
    for _ in range(2):
        kubectl("apply", "-f", str(manifest), *flags)
    again = json.loads(kubectl("get", "deployment", name, "-o", "json").stdout)["metadata"]
    assert (again["generation"], again["resourceVersion"]) == (first["generation"], first["resourceVersion"])
    diff = kubectl("diff", "-f", str(manifest), *flags, check=False)
    assert (diff.returncode, diff.stdout) == (0, "")
    # a real change still counts
    manifest.write_text(UNQUOTED_QUANTITIES.format(name=name).replace("8000", "9000"))
    assert kubectl("diff", "-f", str(manifest), *flags, check=False).returncode == 1
    kubectl("apply", "-f", str(manifest), *flags)
    changed = json.loads(kubectl("get", "deployment", name, "-o", "json").stdout)["metadata"]
    assert changed["generation"] == first["generation"] + 1


def test_empty_maps_are_not_stored_so_diff_stays_quiet(kubectl: Kubectl, tmp_path: Path) -> None:
    """Found by probing: `labels: {}`, `annotations: {}` and `data: {}` were stored and shown, and a
    client-side diff after a server-side apply reported `+ annotations: {}`. kube's types make them
    `omitempty`, so an empty one is never returned."""
    manifest = tmp_path / "empty-maps.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: empty-maps\n  labels: {}\n  annotations: {}\ndata: {}\n"
    )
    kubectl("apply", "--server-side", "-f", str(manifest))
    stored = json.loads(kubectl("get", "configmap", "empty-maps", "-o", "json").stdout)
    assert (
        "data" not in stored
        and "labels" not in stored["metadata"]
        and "annotations" not in stored["metadata"]
    )
    diff = kubectl("diff", "-f", str(manifest), check=False)
    assert (diff.returncode, diff.stdout) == (0, "")
    # the last label removed leaves no `labels: {}` behind either
    kubectl("label", "configmap", "empty-maps", "team=a")
    kubectl("label", "configmap", "empty-maps", "team-")
    assert (
        "labels" not in json.loads(kubectl("get", "configmap", "empty-maps", "-o", "json").stdout)["metadata"]
    )


def test_get_all_namespaces_wide_and_yaml(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("create", "namespace", "team-b")
    kubectl("create", "-f", str(_manifest(tmp_path, "other")), "-n", "team-b")
    every = kubectl("get", "pods", "-A").stdout
    assert "NAMESPACE" in every and "team-b" in every and "other" in every
    wide = kubectl("get", "pods", "-n", "team-b", "-o", "wide").stdout
    assert "NODE" in wide and "IP" in wide
    text = kubectl("get", "pod", "other", "-n", "team-b", "-o", "yaml").stdout
    assert "uid:" in text and "creationTimestamp:" in text and "namespace: team-b" in text
    nodes = kubectl("get", "nodes").stdout + kubectl("get", "nodes", check=False).stderr
    assert "No resources found" in nodes or "NAME" in nodes


def test_describe_pod_shows_its_events(kubectl: Kubectl, tmp_path: Path, apiserver: RunningAPIServer) -> None:
    kubectl("create", "-f", str(_manifest(tmp_path, "described")))
    uid = json.loads(kubectl("get", "pod", "described", "-o", "json").stdout)["metadata"]["uid"]
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "described.1"},
        "involvedObject": {"kind": "Pod", "name": "described", "namespace": "default", "uid": uid},
        "reason": "Scheduled",
        "message": "Successfully assigned default/described to worker-1",
        "type": "Normal",
        "count": 1,
    }
    kubectl("create", "-f", "-", input=json.dumps(event))
    for version in ("1.27", "1.33"):
        out = kubectl("describe", "pod", "described", version=version).stdout
        assert "Name:" in out and "described" in out
        assert "Successfully assigned default/described to worker-1" in out
    missing = kubectl("describe", "pod", "nope", check=False)
    assert 'pods "nope" not found' in missing.stderr


def test_api_resources_lists_kinds_with_short_names(kubectl: Kubectl) -> None:
    for version in ("1.27", "1.33"):
        out = kubectl("api-resources", version=version).stdout
        lines = {line.split()[0]: line for line in out.splitlines()[1:]}
        assert "po" in lines["pods"] and "Pod" in lines["pods"]
        assert "false" in lines["nodes"]
        assert "admissionregistration.k8s.io/v1" in lines["mutatingwebhookconfigurations"]
        assert "leases" in lines


@pytest.mark.parametrize("version", VERSIONS)
def test_auth_can_i_answers_for_an_admin(kubectl: Kubectl, version: str) -> None:
    assert kubectl("auth", "can-i", "create", "pods", version=version).stdout.strip() == "yes"


def test_get_raw_metrics_is_prometheus_text(kubectl: Kubectl) -> None:
    out = kubectl("get", "--raw", "/metrics").stdout
    assert "# TYPE apiserver_request_total counter" in out
    assert 'apiserver_storage_objects{resource="namespaces"}' in out


def _read_lines(stream: Any, lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


def _wait_for(condition: Any, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_watch_prints_changes_after_the_list(
    kubectl: Kubectl, apiserver: RunningAPIServer, tmp_path: Path, version: str
) -> None:
    namespace = f"w{version[2:]}"
    kubectl("create", "namespace", namespace)
    kubectl("create", "-f", str(_manifest(tmp_path, "seen")), "-n", namespace)
    watch = subprocess.Popen(
        [
            kubectl_path(version),
            "--kubeconfig",
            str(apiserver.kubeconfig),
            "get",
            "pods",
            "-w",
            "-n",
            namespace,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(watch.stdout, lines), daemon=True)
    reader.start()
    try:
        assert _wait_for(lambda: any(line.startswith("seen") for line in lines)), lines
        assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"]
        kubectl("label", "pod", "seen", "-n", namespace, "step=2")
        assert _wait_for(lambda: sum(line.startswith("seen") for line in lines) >= 2), lines
        assert watch.poll() is None  # the stream stays open
    finally:
        watch.terminate()
        watch.wait(10)


def test_delete_waits_for_graceful_deletion_of_a_bound_pod(
    kubectl: Kubectl, apiserver: RunningAPIServer, tmp_path: Path
) -> None:
    """A pod on a node keeps a deletionTimestamp until the kubelet confirms; `kubectl delete` waits for it."""
    from tenantgpu.apiserver.auth import UserInfo
    from tenantgpu.apiserver.registry import DeleteOptions

    kubectl("create", "-f", str(_manifest(tmp_path, "bound")))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "bound"},
        "target": {"kind": "Node", "name": "w1"},
    }
    kubectl(
        "create",
        "--raw",
        "/api/v1/namespaces/default/pods/bound/binding",
        "-f",
        "-",
        input=json.dumps(binding),
    )
    deleting = subprocess.Popen(
        [
            kubectl_path("1.33"),
            "--kubeconfig",
            str(apiserver.kubeconfig),
            "delete",
            "pod",
            "bound",
            "--timeout=20s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    pods = apiserver.server.kinds.resource("", "v1", "pods")
    registry = apiserver.server.registry
    assert _wait_for(
        lambda: (
            (registry.get_object(pods, "default", "bound") or {}).get("metadata", {}).get("deletionTimestamp")
        )
    )
    pod = json.loads(kubectl("get", "pod", "bound", "-o", "json").stdout)
    assert pod["metadata"]["deletionTimestamp"] and pod["spec"]["nodeName"] == "w1"
    time.sleep(0.5)
    assert deleting.poll() is None  # still waiting
    kubelet = UserInfo("system:node:w1", ("system:nodes",))
    apiserver.loop.run(apiserver.server.registry.delete(pods, "default", "bound", DeleteOptions(0), kubelet))
    out, err = deleting.communicate(timeout=20)
    assert deleting.returncode == 0, err
    assert 'pod "bound" deleted' in out


@pytest.mark.parametrize("version", ["1.31", "1.33"])
@pytest.mark.usefixtures(
    "namespace_controller"
)  # `kubectl delete namespace` waits for it to empty the namespace
def test_generator_commands_including_protobuf_bodies(kubectl: Kubectl, version: str) -> None:
    """kubectl ≥ 1.32 sends typed creates (`create namespace/configmap/secret/sa/token/service/quota/
    role/rolebinding/clusterrole/clusterrolebinding/priorityclass/ingress`) as protobuf."""
    suffix = version.replace(".", "")
    kubectl("create", "namespace", f"gen-{suffix}", version=version)
    kubectl(
        "create", "configmap", "settings", "--from-literal=mode=fast", "-n", f"gen-{suffix}", version=version
    )
    kubectl(
        "create",
        "secret",
        "generic",
        "pw",
        "--from-literal=pw=s3cret",
        "-n",
        f"gen-{suffix}",
        version=version,
    )
    kubectl("create", "serviceaccount", "robot", "-n", f"gen-{suffix}", version=version)
    token = kubectl("create", "token", "robot", "-n", f"gen-{suffix}", version=version).stdout.strip()
    assert token.count(".") == 2
    config_map = json.loads(kubectl("get", "cm", "settings", "-n", f"gen-{suffix}", "-o", "json").stdout)
    assert config_map["data"] == {"mode": "fast"}
    secret = json.loads(kubectl("get", "secret", "pw", "-n", f"gen-{suffix}", "-o", "json").stdout)
    assert secret["type"] == "Opaque" and secret["data"] == {"pw": "czNjcmV0"}
    kubectl("create", "service", "nodeport", "web", "--tcp=80:8080", "-n", f"gen-{suffix}", version=version)
    service = json.loads(kubectl("get", "svc", "web", "-n", f"gen-{suffix}", "-o", "json").stdout)
    [port] = service["spec"]["ports"]
    assert service["spec"]["type"] == "NodePort" and service["spec"]["selector"] == {"app": "web"}
    assert (port["name"], port["port"], port["targetPort"], port["protocol"]) == ("80-8080", 80, 8080, "TCP")
    assert 30000 <= port["nodePort"] <= 32767 and service["spec"]["clusterIP"].startswith("10.96.")
    kubectl(
        "create", "service", "clusterip", "peers", "--clusterip=None", "-n", f"gen-{suffix}", version=version
    )
    headless = json.loads(kubectl("get", "svc", "peers", "-n", f"gen-{suffix}", "-o", "json").stdout)
    assert headless["spec"]["clusterIP"] == "None"
    kubectl(
        "create", "quota", "small", "--hard=pods=3,requests.cpu=2", "-n", f"gen-{suffix}", version=version
    )
    quota = json.loads(kubectl("get", "quota", "small", "-n", f"gen-{suffix}", "-o", "json").stdout)
    assert quota["spec"]["hard"] == {"pods": "3", "requests.cpu": "2"}

    ns = ["-n", f"gen-{suffix}"]
    kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods", *ns, version=version)
    kubectl(
        "create",
        "rolebinding",
        "bob-reads",
        "--role=reader",
        "--user=bob",
        "--group=devs",
        *ns,
        version=version,
    )
    kubectl("create", "clusterrole", f"gpus-{suffix}", "--verb=get", "--resource=nodes", version=version)
    kubectl(
        "create", "clusterrolebinding", f"gpus-{suffix}", f"--clusterrole=gpus-{suffix}",
        f"--serviceaccount=gen-{suffix}:robot", version=version,
    )  # fmt: skip
    kubectl(
        "create", "priorityclass", f"batch-{suffix}", "--value=1000", "--description=batch", version=version
    )
    kubectl(
        "create", "ingress", "site", "--class=nginx", "--rule=gpu.example.com/infer*=web:80,tls=site-tls",
        *ns, version=version,
    )  # fmt: skip
    role = json.loads(kubectl("get", "role", "reader", *ns, "-o", "json").stdout)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    binding = json.loads(kubectl("get", "rolebinding", "bob-reads", *ns, "-o", "json").stdout)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
    ]
    cluster_binding = json.loads(kubectl("get", "clusterrolebinding", f"gpus-{suffix}", "-o", "json").stdout)
    assert cluster_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "robot", "namespace": f"gen-{suffix}"}
    ]
    priority = json.loads(kubectl("get", "priorityclass", f"batch-{suffix}", "-o", "json").stdout)
    assert (priority["value"], priority["description"], priority.get("globalDefault", False)) == (
        1000,
        "batch",
        False,
    )
    ingress = json.loads(kubectl("get", "ingress", "site", *ns, "-o", "json").stdout)
    assert ingress["spec"] == {
        "ingressClassName": "nginx",
        "rules": [
            {
                "host": "gpu.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/infer",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ],
        "tls": [{"hosts": ["gpu.example.com"], "secretName": "site-tls"}],
    }
    kubectl("delete", "clusterrolebinding,clusterrole", f"gpus-{suffix}", version=version)
    kubectl("delete", "priorityclass", f"batch-{suffix}", version=version)
    deleted = kubectl("delete", "namespace", f"gen-{suffix}", version=version)
    assert f'namespace "gen-{suffix}" deleted' in deleted.stdout
    assert kubectl("get", "cm", "-n", f"gen-{suffix}", "-o", "name").stdout == ""


@pytest.mark.parametrize("version", ["1.27", "1.28"])
def test_old_kubectl_creates_with_default_validation(kubectl: Kubectl, tmp_path: Path, version: str) -> None:
    """kubectl 1.27/1.28 validate against the protobuf /openapi/v2 document."""
    name = f"validated-{version.replace('.', '')}"
    out = kubectl("apply", "-f", str(_manifest(tmp_path, name)), version=version).stdout
    assert f"pod/{name} created" in out
    out = kubectl("apply", "-f", str(_manifest(tmp_path, name, "nginx:1.26")), version=version).stdout
    assert f"pod/{name} configured" in out


@pytest.mark.parametrize("version", ["1.27", "1.28", "1.33"])  # 1.27 asks the v1beta1 API
def test_auth_whoami_names_the_caller(kubectl: Kubectl, apiserver: RunningAPIServer, version: str) -> None:
    admin = kubectl("auth", "whoami", version=version).stdout
    assert "kubernetes-admin" in admin and "system:masters" in admin
    robot = apiserver.write_kubeconfig(
        "robot.kubeconfig", apiserver.server.service_account_kubeconfig("kube-system", "robot")
    )
    out = kubectl("auth", "whoami", version=version, kubeconfig=robot).stdout
    assert "system:serviceaccount:kube-system:robot" in out


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_as_impersonates_a_user_when_the_caller_may(
    kubectl: Kubectl, apiserver: RunningAPIServer, version: str
) -> None:
    """Found by probing: `--as` was ignored, so every answer was the admin's. kube's impersonation
    filter: the request acts as the named user, with the groups asked for and system:authenticated,
    if the caller may impersonate them (the lab's admins may; other users may not)."""
    who = kubectl("auth", "whoami", "--as=alice", "--as-group=devs", "-o", "json", version=version).stdout
    assert json.loads(who)["status"]["userInfo"] == {
        "username": "alice",
        "groups": ["devs", "system:authenticated"],
    }
    denied = kubectl("get", "pods", "--as=alice", version=version, check=False)
    assert (
        denied.returncode == 1
        and (
            'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group'
            ' "" in the namespace "default"'
        )
        in denied.stderr
    )
    can = kubectl("auth", "can-i", "create", "pods", "--as=alice", version=version, check=False)
    assert (can.returncode, can.stdout.strip()) == (1, "no")
    # a service account's name brings its groups
    robot = kubectl(
        "auth", "whoami", "--as=system:serviceaccount:ci:robot", "-o", "json", version=version
    ).stdout
    assert json.loads(robot)["status"]["userInfo"]["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:ci",
        "system:authenticated",
    ]
    # a user who may not impersonate gets kube's 403
    developer = apiserver.write_kubeconfig(
        "dev-as.kubeconfig", apiserver.server.user_kubeconfig("dev", ["devs"])
    )
    refused = kubectl("get", "pods", "--as=admin", version=version, kubeconfig=developer, check=False)
    assert (
        'users "admin" is forbidden: User "dev" cannot impersonate resource "users" in API group "" at the'
        " cluster scope"
    ) in refused.stderr


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_auth_can_i_list_shows_the_rules(kubectl: Kubectl, apiserver: RunningAPIServer, version: str) -> None:
    rows = kubectl("auth", "can-i", "--list", version=version).stdout.splitlines()
    assert rows[1].split() == ["*.*", "[]", "[]", "[*]"]
    developer = apiserver.write_kubeconfig(
        "dev-list.kubeconfig", apiserver.server.user_kubeconfig("dev", ["devs"])
    )
    listed = kubectl("auth", "can-i", "--list", version=version, kubeconfig=developer).stdout
    assert "selfsubjectaccessreviews.authorization.k8s.io" in listed and "*.*" not in listed
    denied = kubectl("auth", "can-i", "delete", "nodes", version=version, kubeconfig=developer, check=False)
    assert denied.returncode == 1 and denied.stdout.strip() == "no"

"""`tenantgpu up -d / down / status / kubeconfig` as a user runs them, checked with the real kubectl."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from apiserver_harness import child_processes
from apiserver_harness import process_alive as _alive

pytestmark = pytest.mark.slow

TCP_YAML = """\
apiVersion: kamaji.clastix.io/v1alpha1
kind: TenantControlPlane
metadata:
  name: tenant-c
  namespace: default
spec:
  dataStore: default
  controlPlane:
    deployment:
      replicas: 1
    service:
      serviceType: ClusterIP
  kubernetes:
    version: v1.31.4
    kubelet:
      cgroupfs: systemd
"""


@dataclass
class LabDir:
    root: Path
    state: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)
    up_output: str = ""  # what the module's `up -d` printed

    def tenantgpu(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tenantgpu", *args, "--state-dir", str(self.state)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**os.environ, **self.env},
        )

    def kubectl(self, kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(self.home)},
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    @property
    def management(self) -> Path:
        return self.state / "management.kubeconfig"

    def tenant(self, name: str) -> Path:
        return self.state / "kubeconfigs" / f"{name}.kubeconfig"

    def tcp(self, name: str) -> dict:
        out = self.kubectl(self.management, "get", "tcp", name, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else {}

    def wait_tcp(self, name: str, check: Callable[[dict], bool], timeout: float = 20) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tcp = self.tcp(name)
            if check(tcp):
                return tcp
            time.sleep(0.1)
        raise AssertionError(f"TCP {name} never matched: {tcp.get('status')}")


def _state_is(expected: str) -> Callable[[dict], bool]:
    return lambda tcp: (
        (tcp.get("status") or {}).get("kubernetesResources", {}).get("version", {}).get("status") == expected
    )


def _refuses(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabDir]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl must be on PATH for the end-to-end tests")
    root = tmp_path_factory.mktemp("lab")
    # The seed lab keeps its API servers in one process by default; here tenant-b's DataStore gets a
    # control-plane process of its own, so every test below also crosses that seam.
    lab = LabDir(root, root / "state", root / "home", {"TENANTGPU_CONTROL_PLANE_PROCESSES": "1"})
    lab.home.mkdir()
    started = lab.tenantgpu("up", "-d")
    assert started.returncode == 0, started.stderr + started.stdout
    lab.up_output = started.stdout
    yield lab
    stopped = lab.tenantgpu("down", "--purge")
    assert stopped.returncode == 0, stopped.stderr


def test_up_detached_leaves_a_lab_kubectl_can_use(lab: LabDir) -> None:
    assert (lab.state / "lab.pid").read_text().strip().isdigit()
    assert (lab.state / "logs" / "lab.log").exists()
    listing = json.loads(lab.kubectl(lab.management, "get", "tcp", "-A", "-o", "json").stdout)
    tcps = {t["metadata"]["name"]: t for t in listing["items"]}
    assert set(tcps) == {"tenant-a", "tenant-b"}
    for tcp in tcps.values():
        assert tcp["status"]["kubernetesResources"]["version"]["status"] == "Ready"
        assert tcp["status"]["controlPlaneEndpoint"].startswith("127.0.0.1:")
    namespaces = lab.kubectl(lab.tenant("tenant-a"), "get", "ns", "-o", "name").stdout.split()
    assert "namespace/kube-system" in namespaces

    # HAMi and the tunnel agent show up where a Kamaji + HAMi cluster has them: kube-system on the worker,
    # the pods of HAMi's Deployment and DaemonSet and of Kamaji's agent DaemonSet, which `up` does not
    # wait for (as `helm install` without --wait, and Kamaji's Ready, do not).
    def components() -> dict[str, str]:
        system = json.loads(
            lab.kubectl(lab.tenant("tenant-a"), "get", "pods", "-n", "kube-system", "-o", "json").stdout
        )
        return {
            (labels.get("app.kubernetes.io/component") or labels.get("k8s-app")): p["spec"].get(
                "nodeName", ""
            )
            for p in system["items"]
            if (labels := p["metadata"].get("labels") or {}) and p.get("status", {}).get("phase") == "Running"
        }

    expected = {
        "hami-scheduler": "worker-a1",
        "hami-device-plugin": "worker-a1",
        "konnectivity-agent": "worker-a1",
    }
    assert _wait(lambda: components() == expected, "the kube-system pods Running on the worker")
    printed = lab.tenantgpu("kubeconfig", "tenant-b")
    assert printed.returncode == 0
    assert Path(printed.stdout.strip()) == lab.tenant("tenant-b")


def _with_credentials_of(lab: LabDir, target: Path, owner: Path, name: str) -> Path:
    """A kubeconfig that addresses `target`'s server (trusting its CA) with `owner`'s client credentials."""
    import yaml

    config = yaml.safe_load(target.read_text())
    config["users"] = yaml.safe_load(owner.read_text())["users"]
    config["contexts"][0]["context"]["user"] = config["users"][0]["name"]
    path = lab.root / name
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_tenants_credentials_get_401_from_every_other_server(lab: LabDir) -> None:
    """Issue 3: a credential from another tenant is rejected everywhere with 401 (not a TLS failure), also
    between the lab's process and the control-plane process that serves tenant-b."""
    for target, owner, name in (
        (lab.tenant("tenant-b"), lab.tenant("tenant-a"), "a-on-b"),
        (lab.tenant("tenant-a"), lab.tenant("tenant-b"), "b-on-a"),
        (lab.management, lab.tenant("tenant-a"), "a-on-management"),
    ):
        crossed = _with_credentials_of(lab, target, owner, f"{name}.kubeconfig")
        result = lab.kubectl(crossed, "get", "ns", check=False)
        assert result.returncode != 0
        # client-go's words for a 401 Unauthorized; a refused TLS handshake would read "certificate".
        assert "You must be logged in to the server" in result.stderr, result.stderr
        assert "certificate" not in result.stderr
    # The same credentials still work at home.
    assert lab.kubectl(lab.tenant("tenant-a"), "get", "ns").returncode == 0
    assert lab.kubectl(lab.tenant("tenant-b"), "get", "ns").returncode == 0


def _keys(store: Path, fragment: str) -> list[str]:
    import sqlite3

    with sqlite3.connect(store) as db:
        return [row[0] for row in db.execute("SELECT key FROM kv WHERE key LIKE ?", (f"%{fragment}%",))]


def test_tenants_spread_over_datastores_each_served_by_its_own_process(lab: LabDir) -> None:
    """TENANTGPU_CONTROL_PLANE_PROCESSES=1: the lab makes a second DataStore and puts tenant-b on it, as a
    Kamaji user would with `spec.dataStore`; its objects live in that store's file."""
    stores = lab.kubectl(lab.management, "get", "datastores", "-o", "name").stdout.split()
    assert stores == ["datastore.kamaji.clastix.io/datastore-1", "datastore.kamaji.clastix.io/default"]
    assert lab.tcp("tenant-a")["status"]["storage"]["dataStoreName"] == "default"
    assert lab.tcp("tenant-b")["spec"]["dataStore"] == "datastore-1"
    assert lab.tcp("tenant-b")["status"]["storage"]["dataStoreName"] == "datastore-1"
    assert {t["name"]: t["dataStore"] for t in _status(lab)["tenants"]} == {
        "tenant-a": "default",
        "tenant-b": "datastore-1",
    }
    lab.kubectl(lab.tenant("tenant-b"), "create", "configmap", "where-am-i")
    second = lab.state / "datastores" / "datastore-1.sqlite"
    assert _keys(second, "where-am-i") and not _keys(lab.state / "datastore.sqlite", "where-am-i")
    lab_pid = int((lab.state / "lab.pid").read_text())
    assert _children(lab_pid, "tenantgpu.kamaji.hostprocess"), (
        "tenant-b's API server has a process of its own"
    )


GPU_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
spec:
  containers:
    - name: cuda
      image: nvidia/cuda:12.2.0-base-ubuntu22.04
      command: ["sleep", "3600"]
      resources:
        limits:
          nvidia.com/gpu: 1
          nvidia.com/gpumem: 10000
          nvidia.com/gpucores: 30
"""


def _status(lab: LabDir) -> dict:
    result = lab.tenantgpu("status", "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_up_joins_workers_with_their_gpus(lab: LabDir) -> None:
    tenants = {t["name"]: t for t in _status(lab)["tenants"]}
    assert [(n["name"], n["ready"], len(n["gpus"])) for n in tenants["tenant-a"]["nodes"]] == [
        ("worker-a1", True, 1)
    ]
    assert [(n["name"], n["ready"], len(n["gpus"])) for n in tenants["tenant-b"]["nodes"]] == [
        ("worker-b1", True, 2)
    ]
    gpu = tenants["tenant-a"]["nodes"][0]["gpus"][0]
    assert gpu["type"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["memory"] == {"allocated": 0, "total": 81920}
    # Nodes belong to one tenant only.
    nodes = lab.kubectl(lab.tenant("tenant-b"), "get", "nodes", "-o", "name").stdout.split()
    assert nodes == ["node/worker-b1"]


def test_a_gpu_pod_goes_through_the_tunnelled_webhook_and_hami(lab: LabDir) -> None:
    manifest = lab.root / "gpu-pod.yaml"
    manifest.write_text(GPU_POD)
    kubeconfig = lab.tenant("tenant-a")
    lab.kubectl(kubeconfig, "create", "-f", str(manifest))
    deadline = time.monotonic() + 20
    pod: dict = {}
    while time.monotonic() < deadline:
        pod = json.loads(lab.kubectl(kubeconfig, "get", "pod", "gpu-pod", "-o", "json").stdout)
        if pod.get("status", {}).get("phase") == "Running":
            break
        time.sleep(0.2)
    assert pod["status"]["phase"] == "Running", pod.get("status")
    # The webhook (reached only through the konnectivity tunnel) set HAMi's scheduler.
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    assert pod["spec"]["nodeName"] == "worker-a1"
    assert pod["metadata"]["annotations"]["hami.io/bind-phase"] == "success"
    tenant_a = next(t for t in _status(lab)["tenants"] if t["name"] == "tenant-a")
    gpu = tenant_a["nodes"][0]["gpus"][0]
    assert gpu["memory"]["allocated"] == 10000
    assert gpu["cores"]["allocated"] == 30
    assert gpu["sharedPods"] == 1
    # `kubectl logs` reaches the simulated kubelet through the tunnel too.
    logs = lab.kubectl(kubeconfig, "logs", "gpu-pod").stdout
    assert "CUDA_DEVICE_SM_LIMIT=30" in logs


def test_a_crashed_control_plane_process_is_replaced_with_its_tunnel(lab: LabDir) -> None:
    """tenant-b's control-plane process dies: the lab starts a new one on the same endpoint, the worker's
    agent dials its konnectivity server again, and a GPU pod goes through the tunnelled webhook and HAMi."""
    lab_pid = int((lab.state / "lab.pid").read_text())
    (crashed,) = _children(lab_pid, "tenantgpu.kamaji.hostprocess")
    endpoint = lab.tcp("tenant-b")["status"]["controlPlaneEndpoint"]
    os.kill(crashed, signal.SIGKILL)
    kubeconfig = lab.tenant("tenant-b")
    # Until the agent has dialled the new konnectivity server, the webhook is unreachable and a GPU pod
    # would fall back as failurePolicy Ignore says; `kubectl logs` goes through the same tunnel.
    deadline = time.monotonic() + 30
    tunnel_back = False
    while time.monotonic() < deadline and not tunnel_back:
        time.sleep(0.2)
        listed = lab.kubectl(kubeconfig, "get", "pods", "-n", "kube-system", "-o", "name", check=False)
        agents = [n for n in listed.stdout.split() if "konnectivity-agent" in n]
        if listed.returncode == 0 and agents:
            logs = lab.kubectl(kubeconfig, "logs", "-n", "kube-system", agents[0], check=False)
            tunnel_back = logs.returncode == 0
    assert tunnel_back, "the tunnel did not come back"
    assert _children(lab_pid, "tenantgpu.kamaji.hostprocess") not in ([], [crashed])
    manifest = lab.root / "after-crash.yaml"
    manifest.write_text(GPU_POD.replace("name: gpu-pod", "name: after-crash"))
    lab.kubectl(kubeconfig, "create", "-f", str(manifest))
    pod: dict = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pod = json.loads(lab.kubectl(kubeconfig, "get", "pod", "after-crash", "-o", "json").stdout)
        if pod.get("status", {}).get("phase") in ("Running", "Failed"):
            break
        time.sleep(0.2)
    assert pod.get("status", {}).get("phase") == "Running", pod.get("status")
    # Mutated by HAMi's webhook, reached only through the tunnel the agent dialled again.
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    assert pod["metadata"]["annotations"]["hami.io/bind-phase"] == "success"
    assert lab.tcp("tenant-b")["status"]["controlPlaneEndpoint"] == endpoint


def test_second_up_on_a_running_lab_exits_1(lab: LabDir) -> None:
    again = lab.tenantgpu("up", "-d")
    assert again.returncode == 1
    assert "already running" in again.stderr
    assert "Traceback" not in again.stderr


def test_status_json_lists_tenants_with_endpoint_and_state(lab: LabDir) -> None:
    result = lab.tenantgpu("status", "-o", "json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["running"] is True
    assert status["pid"] == int((lab.state / "lab.pid").read_text())
    tenants = {t["name"]: t for t in status["tenants"]}
    assert {"tenant-a", "tenant-b"} <= set(tenants)
    for tenant in tenants.values():
        assert tenant["state"] == "Ready"
        assert tenant["endpoint"]
        assert set(tenant) >= {"namespace", "version", "kubeconfig", "nodes", "pods"}


def test_status_table_piped_keeps_every_cell_whole(lab: LabDir) -> None:
    """Piped (as here, or into grep), the tables are not cut to 80 columns: whole GPU UUIDs, the A100's
    full name and its memory as allocated/total, each GPU on one line."""
    status = _status(lab)
    result = lab.tenantgpu("status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for tenant in status["tenants"]:
        for node in tenant["nodes"]:
            for gpu in node["gpus"]:
                [row] = [line for line in lines if gpu["uuid"] in line]
                assert gpu["type"] in row and node["name"] in row
                assert f"{gpu['memory']['allocated']}/{gpu['memory']['total']}" in row
    # `up`'s summary names each tenant's kubeconfig by its whole path, to copy from a CI log.
    for tenant in status["tenants"]:
        assert tenant["kubeconfig"] in lab.up_output


def test_kubectl_apply_makes_a_tenant_that_sleeps_wakes_and_goes(lab: LabDir) -> None:
    manifest = lab.root / "tcp.yaml"
    manifest.write_text(TCP_YAML)
    lab.kubectl(lab.management, "apply", "-f", str(manifest))
    tcp = lab.wait_tcp("tenant-c", _state_is("Ready"))
    endpoint = tcp["status"]["controlPlaneEndpoint"]
    kubeconfig = Path(lab.tenantgpu("kubeconfig", "tenant-c").stdout.strip())
    lab.kubectl(kubeconfig, "create", "namespace", "team-c")

    lab.kubectl(lab.management, "scale", "tcp", "tenant-c", "--replicas=0")
    lab.wait_tcp("tenant-c", _state_is("Sleeping"))
    assert _refuses(endpoint)

    lab.kubectl(lab.management, "scale", "tcp", "tenant-c", "--replicas=1")
    woke = lab.wait_tcp("tenant-c", _state_is("Ready"))
    assert woke["status"]["controlPlaneEndpoint"] == endpoint
    assert (
        lab.kubectl(kubeconfig, "get", "namespace", "team-c", "-o", "name").stdout.strip()
        == "namespace/team-c"
    )

    lab.kubectl(lab.management, "delete", "tcp", "tenant-c")
    lab.wait_tcp("tenant-c", lambda t: not t)
    assert _refuses(endpoint)
    secrets = lab.kubectl(lab.management, "get", "secrets", "-o", "name").stdout.split()
    assert not [s for s in secrets if s.startswith("secret/tenant-c-")]


def test_a_worker_joins_with_the_command_token_create_prints(lab: LabDir, tmp_path: Path) -> None:
    """`tenantgpu token create TENANT --print-join-command` and the command it prints, as `kubeadm token
    create --print-join-command` and `kubeadm join` are used with a Kamaji tenant: the worker checks the
    tenant by its CA's hash, reads the tenant's kubeadm-config and kubelet-config with the token (Kamaji
    uploaded them), asks for its certificate with the token, keeps it and acts as its node."""

    # The kubelet configuration the join reads decides the node's pod capacity (`maxPods`), as it does
    # for a kubelet that kubeadm configured. An operator's edit of the ConfigMap is written back at once,
    # as Kamaji's soot controller does; the TCP's kubelet patches change it, and reach the new node.
    def kubelet_config() -> dict:
        found = lab.kubectl(
            lab.tenant("tenant-b"), "get", "configmap", "kubelet-config", "-n", "kube-system", "-o", "json"
        ).stdout
        return json.loads(found)

    def max_pods() -> int:
        return int(yaml.safe_load(kubelet_config()["data"]["kubelet"])["maxPods"])

    edited_config = kubelet_config()
    document = yaml.safe_load(edited_config["data"]["kubelet"])
    assert document["kind"] == "KubeletConfiguration" and document["maxPods"] == 110
    edited_config["data"]["kubelet"] = edited_config["data"]["kubelet"].replace("maxPods: 110", "maxPods: 40")
    edited = tmp_path / "kubelet-config.json"
    edited.write_text(json.dumps(edited_config))
    lab.kubectl(lab.tenant("tenant-b"), "replace", "-f", str(edited))
    _wait(lambda: max_pods() == 110, "the edit written back")
    patches = '[{"op":"replace","path":"/maxPods","value":40}]'
    lab.kubectl(
        lab.management,
        "patch",
        "tcp",
        "tenant-b",
        "--type",
        "merge",
        "-p",
        f'{{"spec":{{"kubernetes":{{"kubelet":{{"configurationJSONPatches":{patches}}}}}}}}}',
    )
    _wait(lambda: max_pods() == 40, "the TCP's kubelet patch in kubelet-config")
    created = lab.tenantgpu("token", "create", "tenant-b", "--print-join-command")
    assert created.returncode == 0, created.stderr
    command = created.stdout.strip().split()
    assert command[:4] == ["tenantgpu", "node", "run", "--join"]
    token = command[command.index("--token") + 1]
    cert_dir = tmp_path / "kubelet"
    worker = [sys.executable, "-m", *command, "--name", "joined-b2", "--gpu", "NVIDIA L4:23034:1",
              "--cert-dir", str(cert_dir)]  # fmt: skip

    def run_until_ready() -> str:
        """Start the worker, wait for its `ready` line (it prints it once its Node is registered), stop it."""
        proc = subprocess.Popen(
            worker, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
        )
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                ready, _, _ = select.select([proc.stdout], [], [], 0.5)
                if ready:
                    line = proc.stdout.readline()
                    if not line:
                        break
                    lines.append(line)
                    if " ready: " in line:
                        break
            assert any(" ready: " in line for line in lines), lines
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        node = json.loads(
            lab.kubectl(lab.tenant("tenant-b"), "get", "node", "joined-b2", "-o", "json").stdout
        )
        assert node["status"]["nodeInfo"]["kubeletVersion"]
        assert node["status"]["capacity"]["pods"] == "40"
        return "".join(lines) + out

    first = run_until_ready()
    assert "node joined-b2 joined https://" in first and "node joined-b2 ready: 1 GPU(s)" in first
    requests = json.loads(lab.kubectl(lab.tenant("tenant-b"), "get", "csr", "-o", "json").stdout)["items"]
    mine = [r for r in requests if r["spec"]["username"] == f"system:bootstrap:{token.split('.')[0]}"]
    assert len(mine) == 1 and mine[0]["status"]["conditions"][0]["reason"] == "AutoApproved"
    assert (cert_dir / "kubelet-client-current.pem").exists()
    assert yaml.safe_load((cert_dir / "config.yaml").read_text())["maxPods"] == 40
    # a second run uses the kept certificate: no second request
    second = run_until_ready()
    assert "joined https://" not in second
    again = json.loads(lab.kubectl(lab.tenant("tenant-b"), "get", "csr", "-o", "json").stdout)["items"]
    assert len(again) == len(requests)
    lab.kubectl(lab.tenant("tenant-b"), "delete", "node", "joined-b2")
    unpatch = '[{"op":"remove","path":"/spec/kubernetes/kubelet/configurationJSONPatches"}]'
    lab.kubectl(lab.management, "patch", "tcp", "tenant-b", "--type", "json", "-p", unpatch)
    _wait(lambda: max_pods() == 110, "kubelet-config without the patch")

    # a worker told another CA's hash does not trust the tenant
    wrong = [*worker[: worker.index("--discovery-token-ca-cert-hash") + 1], "sha256:" + "0" * 64]
    refused = subprocess.run(
        [*wrong, "--name", "joined-b3", "--cert-dir", str(tmp_path / "other")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "cluster CA found in cluster-info ConfigMap is invalid: none of the public keys" in refused.stderr
    assert lab.tenantgpu("token", "create", "tenant-b", "--ttl", "soon").returncode == 2


def test_down_and_up_resume_the_same_lab_even_after_kill_9(
    lab: LabDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The seed lab runs in one process by default; here its workers get a process of their own, which
    # must not outlive the lab.
    monkeypatch.setenv("TENANTGPU_WORKER_PROCESSES", "1")
    uuids_before = sorted(g["uuid"] for t in _status(lab)["tenants"] for n in t["nodes"] for g in n["gpus"])
    saved = lab.root / "tenant-a-before.kubeconfig"
    shutil.copy(lab.tenant("tenant-a"), saved)
    lab.kubectl(saved, "create", "namespace", "kept")

    down = lab.tenantgpu("down")
    assert down.returncode == 0, down.stderr
    assert not (lab.state / "lab.pid").exists()
    assert lab.tenantgpu("up", "-d").returncode == 0
    # The kubeconfig from the first run still works: same CA, same endpoint, same credentials.
    assert lab.kubectl(saved, "get", "namespace", "kept", "-o", "name").stdout.strip() == "namespace/kept"
    lab.kubectl(saved, "create", "namespace", "acknowledged")

    lab_pid = int((lab.state / "lab.pid").read_text())
    worker_processes = _children(lab_pid, "tenantgpu.lab.workerprocess")
    assert worker_processes, "the tenants' workers run in a process of their own"
    control_planes = _children(lab_pid, "tenantgpu.kamaji.hostprocess")
    assert control_planes, "tenant-b's API server runs in a process of its own"
    os.kill(lab_pid, signal.SIGKILL)
    # Workers and control planes do not outlive their lab: they notice the supervisor is gone and exit.
    children = worker_processes + control_planes
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children)
    restarted = lab.tenantgpu("up", "-d")
    assert restarted.returncode == 0, restarted.stderr
    names = lab.kubectl(saved, "get", "namespaces", "-o", "name").stdout.split()
    assert {"namespace/kept", "namespace/acknowledged"} <= set(names)
    status = _status(lab)
    assert sorted(g["uuid"] for t in status["tenants"] for n in t["nodes"] for g in n["gpus"]) == uuids_before
    assert all(n["ready"] for t in status["tenants"] for n in t["nodes"])
    pods = lab.kubectl(saved, "get", "pods", "-o", "name").stdout.split()
    assert "pod/gpu-pod" in pods


WRITE_LIMITED = (
    'admission webhook "catchall.write-permissions.kamaji.clastix.io" denied the request: the current '
    "Control Plane has limited write permissions, current changes are blocked: removing the webhook may "
    "lead to an inconsistent state upon its completion"
)


def _refused_as_limited(lab: LabDir, kubeconfig: Path, name: str) -> bool:
    made = lab.kubectl(kubeconfig, "create", "configmap", name, "--from-literal=k=v", check=False)
    if made.returncode == 0:
        lab.kubectl(kubeconfig, "delete", "configmap", name, check=False)
        return False
    assert WRITE_LIMITED in made.stderr, made.stderr
    return True


def test_a_write_limited_tenant_comes_back_limited_after_down_and_up(lab: LabDir) -> None:
    """Kamaji's `spec.writePermissions`: the tenant (in a control-plane process of its own) refuses the
    blocked writes; the lab stops and starts again around it without writing anything it would refuse,
    shows it `WriteLimited`, keeps its node and its running pod; lifting the limits gives writes back."""
    kubeconfig = lab.tenant("tenant-b")
    manifest = lab.root / "limited-pod.yaml"
    manifest.write_text(GPU_POD.replace("name: gpu-pod", "name: before-limits"))
    lab.kubectl(kubeconfig, "create", "-f", str(manifest))
    _wait(
        lambda: (
            lab.kubectl(kubeconfig, "get", "pod", "before-limits", "-o", "jsonpath={.status.phase}").stdout
            == "Running"
        ),
        "the pod Running before the limits",
    )
    blocks = {"blockCreation": True, "blockUpdate": True, "blockDeletion": True}
    lab.kubectl(lab.management, "patch", "tcp", "tenant-b", "--type=merge",
                "-p", json.dumps({"spec": {"writePermissions": blocks}}))  # fmt: skip
    limited = lab.wait_tcp("tenant-b", _state_is("WriteLimited"))
    assert limited["status"]["kubernetesResources"]["version"]["version"] == "v1.31.4"
    _wait(lambda: _refused_as_limited(lab, kubeconfig, "refused"), "Kamaji's webhook refusing a create")

    assert lab.tenantgpu("down").returncode == 0
    restarted = lab.tenantgpu("up", "-d")
    assert restarted.returncode == 0, restarted.stderr + restarted.stdout
    assert "tenant tenant-b WriteLimited" in restarted.stdout
    assert _refused_as_limited(lab, kubeconfig, "still-refused")
    deleted = lab.kubectl(kubeconfig, "delete", "pod", "before-limits", "--wait=false", check=False)
    assert deleted.returncode == 1 and WRITE_LIMITED in deleted.stderr
    tenant_b = next(t for t in _status(lab)["tenants"] if t["name"] == "tenant-b")
    assert tenant_b["state"] == "WriteLimited"
    assert all(n["ready"] for n in tenant_b["nodes"])
    phase = lab.kubectl(kubeconfig, "get", "pod", "before-limits", "-o", "jsonpath={.status.phase}").stdout
    assert phase == "Running"

    lab.kubectl(lab.management, "patch", "tcp", "tenant-b", "--type=json",
                "-p", '[{"op": "remove", "path": "/spec/writePermissions"}]')  # fmt: skip
    lab.wait_tcp("tenant-b", _state_is("Ready"))
    _wait(lambda: not _refused_as_limited(lab, kubeconfig, "allowed"), "creates allowed again")
    lab.kubectl(kubeconfig, "delete", "pod", "before-limits", "--wait=false")


def test_a_gpu_pod_waits_while_updates_are_blocked_and_runs_once_they_are_not(lab: LabDir) -> None:
    """`blockUpdate` alone: a pod may be created, but HAMi's scheduler cannot take its node lock (an
    update of the Node), so the pod stays Pending with HAMi's BindingFailed and Kamaji's sentence; once
    the limits are lifted, HAMi's retry places it."""
    kubeconfig = lab.tenant("tenant-a")
    manifest = lab.root / "blocked-pod.yaml"
    manifest.write_text(GPU_POD.replace("name: gpu-pod", "name: while-blocked"))
    lab.kubectl(lab.management, "patch", "tcp", "tenant-a", "--type=merge",
                "-p", '{"spec": {"writePermissions": {"blockUpdate": true}}}')  # fmt: skip
    lab.wait_tcp("tenant-a", _state_is("WriteLimited"))
    _wait(
        lambda: (
            lab.kubectl(
                kubeconfig, "get", "validatingwebhookconfiguration", "kamaji-write-permissions", check=False
            ).returncode
            == 0
        ),
        "Kamaji's webhook configuration",
    )
    lab.kubectl(kubeconfig, "create", "-f", str(manifest))

    def binding_failed() -> str:
        events = lab.kubectl(kubeconfig, "get", "events", "--field-selector",
                             "involvedObject.name=while-blocked,reason=BindingFailed", "-o", "json").stdout  # fmt: skip
        return next((e["message"] for e in json.loads(events)["items"]), "")

    message = _wait(binding_failed, "HAMi's BindingFailed")
    assert message.startswith("failed to set node lock (node=worker-a1") and WRITE_LIMITED in message, message
    phase = lab.kubectl(kubeconfig, "get", "pod", "while-blocked", "-o", "jsonpath={.status.phase}").stdout
    assert phase == "Pending"
    lab.kubectl(lab.management, "patch", "tcp", "tenant-a", "--type=json",
                "-p", '[{"op": "remove", "path": "/spec/writePermissions"}]')  # fmt: skip
    _wait(
        lambda: (
            lab.kubectl(kubeconfig, "get", "pod", "while-blocked", "-o", "jsonpath={.status.phase}").stdout
            == "Running"
        ),
        "the pod Running once the limits are lifted",
    )
    lab.kubectl(kubeconfig, "delete", "pod", "while-blocked", "--wait=false")


def _children(pid: int, module: str) -> list[int]:
    return [c for c in child_processes(pid) if module in Path(f"/proc/{c}/cmdline").read_text()]


def test_foreground_up_serves_until_ctrl_c(tmp_path: Path) -> None:
    lab_file = tmp_path / "lab.yaml"
    lab_file.write_text("apiVersion: tenantgpu.io/v1alpha1\nkind: Lab\nspec:\n  tenants:\n    - name: solo\n")
    state = tmp_path / "state"
    child = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu", "up", "-f", str(lab_file), "--state-dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert child.stdout is not None
        seen = ""
        for line in child.stdout:
            seen += line
            if "Ctrl-C" in line:
                break
        assert "solo" in seen
        assert (state / "kubeconfigs" / "solo.kubeconfig").exists()
        assert int((state / "lab.pid").read_text()) == child.pid
        child.send_signal(signal.SIGINT)
        assert child.wait(30) == 0
        assert not (state / "lab.pid").exists()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _wait(probe: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := probe():
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _gpu_pods_run_under_the_charts_runtime_class(lab: LabDir) -> None:
    """The lab file sets HAMi's `runtimeClassName: nvidia` with `createRuntimeClass`: the tenant has the
    chart's RuntimeClass, HAMi's device plugin runs under it, and HAMi's webhook names it on a GPU pod,
    which runs on a node whose runtime has the `nvidia` handler."""
    kubeconfig = lab.tenant("research")
    runtime_class = json.loads(lab.kubectl(kubeconfig, "get", "runtimeclass", "nvidia", "-o", "json").stdout)
    assert runtime_class["handler"] == "nvidia"

    def plugins() -> list[dict]:
        return json.loads(
            lab.kubectl(
                kubeconfig, "get", "pods", "-n", "kube-system", "-l", "app.kubernetes.io/component=hami-device-plugin",
                "-o", "json",
            ).stdout
        )["items"]  # fmt: skip

    # the DaemonSet's pod, which the default scheduler places on the GPU node: its RuntimeClass lets it
    running = _wait(
        lambda: [p for p in plugins() if p["status"].get("phase") == "Running"], "the device plugin Running"
    )
    assert [p["spec"].get("runtimeClassName") for p in running] == ["nvidia"]
    assert [p["spec"]["nodeName"] for p in running] == ["res-a10-1"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "jupyter",
                    "image": "jupyter/base",
                    "resources": {"limits": {"nvidia.com/gpumem": "4000"}},
                }
            ]
        },
    }
    subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
        input=json.dumps(pod), capture_output=True, text=True, check=True,
    )  # fmt: skip

    def running() -> dict | None:
        found = json.loads(lab.kubectl(kubeconfig, "get", "pod", "notebook", "-o", "json").stdout)
        return found if found["status"].get("phase") == "Running" else None

    found = _wait(running, "the GPU pod Running under its runtime class")
    assert found["spec"]["runtimeClassName"] == "nvidia"
    assert found["spec"]["schedulerName"] == "hami-scheduler"
    node = json.loads(lab.kubectl(kubeconfig, "get", "node", "res-a10-1", "-o", "json").stdout)
    assert "nvidia" in [h["name"] for h in node["status"]["runtimeHandlers"]]


def test_a_lab_file_brings_its_tenants_workers_and_quotas(tmp_path: Path) -> None:
    lab_file = Path(__file__).resolve().parents[2] / "examples" / "three-tenants.yaml"
    lab = LabDir(tmp_path, tmp_path / "state", tmp_path / "home")
    lab.home.mkdir()
    started = lab.tenantgpu("up", "-d", "-f", str(lab_file))
    assert started.returncode == 0, started.stderr
    try:
        status = _status(lab)
        nodes = {t["name"]: {n["name"]: len(n["gpus"]) for n in t["nodes"]} for t in status["tenants"]}
        assert nodes["inference"] == {"inf-t4-1": 4, "inf-a10-1": 2}
        assert nodes["training"] == {"train-h100-1": 8}
        quota = json.loads(
            lab.kubectl(
                lab.tenant("inference"), "get", "resourcequota", "gpu-quota", "-n", "chatbot", "-o", "json"
            ).stdout
        )
        # the lab file's 30000 comes back as kube-apiserver writes a decoded quantity: 30k
        assert quota["spec"]["hard"] == {
            "limits.nvidia.com/gpumem": "30k",
            "limits.nvidia.com/gpucores": "150",
        }
        _gpu_pods_run_under_the_charts_runtime_class(lab)
        # `up` without -f on this state directory resumes the same lab file.
        assert lab.tenantgpu("down").returncode == 0
        assert lab.tenantgpu("up", "-d").returncode == 0
        assert {t["name"] for t in _status(lab)["tenants"]} == {"inference", "training", "research"}
    finally:
        lab.tenantgpu("down", "--purge")


LAB_133 = """\
apiVersion: tenantgpu.io/v1alpha1
kind: Lab
metadata:
  name: release-133
spec:
  kubernetesVersion: v1.33.1
  tenants:
    - name: t133
      workers:
        - name: w133
          gpus:
            - type: NVIDIA L4
              memory: 23034
"""

POD_133 = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "slice", "annotations": {"tenantgpu.io/run-for": "3s"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "cuda",
                "image": "cuda-sample",
                "envFrom": [{"configMapRef": {"name": "cfg"}}, {"secretRef": {"name": "creds"}}],
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}],
                "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}},
            }
        ],
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
    },
}


def test_a_133_tenants_kubelet_works_as_its_node_within_the_node_authorizers_selectors(
    tmp_path: Path,
) -> None:
    """From 1.32 the Node authorizer lets a kubelet read only its own Node and list its pods only by
    `spec.nodeName`. The lab's kubelet joins as `system:node:<name>` and does all its work within that:
    it reports its release, runs a GPU pod with a ConfigMap and a Secret, serves exec and finishes it."""
    spec = tmp_path / "lab.yaml"
    spec.write_text(LAB_133)
    lab = LabDir(tmp_path, tmp_path / "state", tmp_path / "home")
    lab.home.mkdir()
    started = lab.tenantgpu("up", "-d", "-f", str(spec))
    assert started.returncode == 0, started.stderr
    try:
        tenant = lab.tenant("t133")
        node = json.loads(lab.kubectl(tenant, "get", "node", "w133", "-o", "json").stdout)
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.1"
        as_node = ("--as=system:node:w133", "--as-group=system:nodes")
        answer = lab.kubectl(tenant, "auth", "can-i", "list", "pods", *as_node, check=False).stdout.strip()
        assert answer == "no - can only list/watch pods with spec.nodeName field selector"
        lab.kubectl(tenant, "create", "configmap", "cfg", "--from-literal=MODEL=llama")
        lab.kubectl(tenant, "create", "secret", "generic", "creds", "--from-literal=TOKEN=s3cret")
        subprocess.run(
            ["kubectl", "--kubeconfig", str(tenant), "create", "-f", "-"],
            input=json.dumps(POD_133), text=True, check=True, capture_output=True,
            env={**os.environ, "HOME": str(lab.home)},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        phase = ""
        while time.monotonic() < deadline and phase != "Running":
            pod = json.loads(lab.kubectl(tenant, "get", "pod", "slice", "-o", "json").stdout)
            phase = pod["status"].get("phase", "")
            time.sleep(0.2)
        assert phase == "Running", pod["status"]
        env = lab.kubectl(tenant, "exec", "slice", "--", "env").stdout
        assert "MODEL=llama" in env and "TOKEN=s3cret" in env and "CUDA_DEVICE_MEMORY_LIMIT_0=2000m" in env
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and phase != "Succeeded":
            phase = json.loads(lab.kubectl(tenant, "get", "pod", "slice", "-o", "json").stdout)["status"][
                "phase"
            ]
            time.sleep(0.2)
        assert phase == "Succeeded"
        log = (lab.state / "logs" / "lab.log").read_text()
        assert "forbidden" not in log.lower(), "a component met a refusal"
    finally:
        lab.tenantgpu("down", "--purge")

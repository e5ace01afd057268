"""Acceptance of the running seed lab: `tenantgpu up -d`, then only the real kubectl, as a user works with it.

tenant-a has one A100 80GB (worker-a1), tenant-b two L4 (worker-b1); deviceSplitCount 10, GPU policy
spread. Covered elsewhere and not repeated here: one pod through the tunnelled webhook, `kubectl logs`,
resume after `down` and kill -9 without pods (test_lab_lifecycle.py); the validation suite's checks on the
seed lab (test_validate_lab.py); HAMi's components against one API server (test_hami_e2e.py).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from apiserver_harness import RawClient, closed_unanswered, port_forwarding
from apiserver_harness import process_alive as _alive
from apiserver_harness import wait_for as harness_wait_for

from tenantgpu.kamaji import pki
from tenantgpu.kubeclient.config import load_cert_chain

pytestmark = pytest.mark.slow

A100 = "NVIDIA A100-SXM4-80GB"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloads"
NODE_LOCK = "hami.io/mutex.lock"
ALLOCATED = "hami.io/vgpu-devices-allocated"


@dataclass
class RunningLab:
    root: Path
    state: Path
    home: Path

    def tenantgpu(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tenantgpu", *args, "--state-dir", str(self.state)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )

    def kubectl(
        self,
        tenant: str,
        *args: str,
        input: str | None = None,
        check: bool = True,
        binary: str = "kubectl",
    ) -> subprocess.CompletedProcess[str]:
        kubeconfig = (
            self.state / "management.kubeconfig"
            if tenant == "management"
            else self.state / "kubeconfigs" / f"{tenant}.kubeconfig"
        )
        result = subprocess.run(
            [binary, "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
            env={**os.environ, "HOME": str(self.home)},
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def pods(self, tenant: str, selector: str) -> list[dict[str, Any]]:
        out = self.kubectl(tenant, "get", "pods", "-l", selector, "-o", "json").stdout
        return sorted(json.loads(out)["items"], key=lambda p: p["metadata"]["name"])

    def pod(self, tenant: str, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl(tenant, "get", "pod", name, "-o", "json").stdout)

    def pods_in(self, tenant: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        out = self.kubectl(tenant, "get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
        return sorted(json.loads(out)["items"], key=lambda p: p["metadata"]["name"])

    def pod_in(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl(tenant, "get", "pod", "-n", namespace, name, "-o", "json").stdout)

    def node(self, tenant: str, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl(tenant, "get", "node", name, "-o", "json").stdout)

    def create(self, tenant: str, *manifests: dict[str, Any]) -> None:
        """All manifests in one `kubectl create -f -` (a List), so they arrive at once."""
        listing = {"apiVersion": "v1", "kind": "List", "items": list(manifests)}
        self.kubectl(tenant, "create", "-f", "-", input=json.dumps(listing))

    def delete(self, tenant: str, selector: str) -> None:
        try:
            self.kubectl(tenant, "delete", "pods", "-l", selector, "--wait=true", "--timeout=45s")
        except (subprocess.TimeoutExpired, AssertionError) as exc:
            # Say where the pods got stuck: their state now and what the lab logged about them.
            left = self.kubectl(tenant, "get", "pods", "-l", selector, "-o", "yaml", check=False).stdout
            logs = "\n".join(
                f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-60:])
                for log in sorted((self.state / "logs").glob("*.log"))
            )
            raise AssertionError(f"pods {selector} were not removed: {exc}\n{left}\n{logs}") from exc


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    return harness_wait_for(what, probe, timeout, interval=0.25)


def gpu_pod(
    name: str,
    app: str,
    *,
    gpumem: int,
    gpucores: int | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(gpumem)}
    if gpucores is not None:
        limits["nvidia.com/gpucores"] = str(gpucores)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "cuda", "image": "cuda-sample", "resources": {"limits": limits}}]},
    }


def phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase", "")


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


def card_of(pod: dict[str, Any]) -> str:
    """The GPU UUID of a one-GPU pod, from HAMi's `hami.io/vgpu-devices-allocated` (uuid,type,mem,cores:;)."""
    return annotations(pod)[ALLOCATED].split(",", 1)[0]


def all_running(lab: RunningLab, tenant: str, selector: str, count: int) -> Callable[[], list[dict]]:
    def probe() -> list[dict]:
        pods = lab.pods(tenant, selector)
        return pods if len(pods) == count and all(phase(p) == "Running" for p in pods) else []

    return probe


def pending_reason(lab: RunningLab, tenant: str, name: str) -> str:
    """The reasons a pod waits, as `kubectl get events` shows them to a user."""
    out = lab.kubectl(
        tenant, "get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"
    ).stdout
    return " ".join(f"{e.get('reason')}: {e.get('message')}" for e in json.loads(out)["items"])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl must be on PATH for the end-to-end tests")
    root = tmp_path_factory.mktemp("running-lab")
    lab = RunningLab(root, root / "state", root / "home")
    lab.home.mkdir()
    started = lab.tenantgpu("up", "-d")
    assert started.returncode == 0, started.stderr + started.stdout
    yield lab
    stopped = lab.tenantgpu("down", "--purge")
    assert stopped.returncode == 0, stopped.stderr


def test_ten_8gib_slices_share_the_a100_and_a_deleted_pod_frees_its_slice(lab: RunningLab) -> None:
    lab.create("tenant-a", *(gpu_pod(f"share-{i}", "share", gpumem=8000, gpucores=10) for i in range(10)))
    pods = wait_for("ten sharing pods Running", all_running(lab, "tenant-a", "app=share", 10))
    assert {p["spec"]["nodeName"] for p in pods} == {"worker-a1"}
    assert {p["spec"]["schedulerName"] for p in pods} == {"hami-scheduler"}
    assert len({card_of(p) for p in pods}) == 1
    for pod in pods:
        assert annotations(pod)["hami.io/bind-phase"] == "success"
        assert annotations(pod)[ALLOCATED] == f"{card_of(pod)},NVIDIA,8000,10:;"
    # The device plugin's Allocate gave the container HAMi's environment for its slice.
    logs = lab.kubectl("tenant-a", "logs", "share-0").stdout
    assert f"NVIDIA_VISIBLE_DEVICES={card_of(pods[0])}" in logs
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=8000m" in logs
    assert "CUDA_DEVICE_SM_LIMIT=10" in logs
    assert A100 in logs  # nvidia-smi inside the container shows the card

    # The card is full (10 of deviceSplitCount 10, 80,000 of 81,920 MiB): an eleventh slice waits ...
    lab.create("tenant-a", gpu_pod("share-extra", "share-extra", gpumem=8000, gpucores=10))
    reason = wait_for(
        "the eleventh pod's FailedScheduling",
        lambda: "FailedScheduling" in (r := pending_reason(lab, "tenant-a", "share-extra")) and r,
    )
    assert "CardTimeSlicingExhausted" in reason or "CardInsufficientMemory" in reason
    assert phase(lab.pod("tenant-a", "share-extra")) == "Pending"
    # ... until one pod is deleted and its slice is free again.
    lab.kubectl("tenant-a", "delete", "pod", "share-3", "--wait=true")
    extra = wait_for(
        "the eleventh pod Running", lambda: phase(p := lab.pod("tenant-a", "share-extra")) == "Running" and p
    )
    assert card_of(extra) == card_of(pods[0])
    lab.delete("tenant-a", "app in (share, share-extra)")


def test_a_pod_larger_than_any_card_stays_pending_with_card_insufficient_memory(lab: RunningLab) -> None:
    lab.create("tenant-b", gpu_pod("too-big", "too-big", gpumem=30000))
    reason = wait_for(
        "FailedScheduling for the over-size pod",
        lambda: "FailedScheduling" in (r := pending_reason(lab, "tenant-b", "too-big")) and r,
    )
    assert "CardInsufficientMemory" in reason
    time.sleep(1.0)  # a later retry must not place it either
    pod = lab.pod("tenant-b", "too-big")
    assert phase(pod) == "Pending" and not pod["spec"].get("nodeName")
    assert ALLOCATED not in annotations(pod)
    lab.delete("tenant-b", "app=too-big")


def test_gpu_policy_spreads_by_default_and_binpacks_when_the_pod_asks(lab: RunningLab) -> None:
    lab.create("tenant-b", *(gpu_pod(f"spread-{i}", "spread", gpumem=4000) for i in range(2)))
    spread = wait_for("two spread pods Running", all_running(lab, "tenant-b", "app=spread", 2))
    assert len({card_of(p) for p in spread}) == 2, "the lab's spread policy puts them on both L4"

    binpack = {"hami.io/gpu-scheduler-policy": "binpack"}
    for i in range(2):  # one at a time, so the second sees the first one's usage
        lab.create("tenant-b", gpu_pod(f"binpack-{i}", "binpack", gpumem=4000, annotations=binpack))
        wait_for("binpack pod Running", all_running(lab, "tenant-b", "app=binpack", i + 1))
    packed = lab.pods("tenant-b", "app=binpack")
    assert len({card_of(p) for p in packed}) == 1, "binpack puts both on the same card"
    lab.delete("tenant-b", "app in (spread, binpack)")


def test_twenty_pods_at_once_fill_the_twenty_slots_and_leave_no_lock(lab: RunningLab) -> None:
    lab.create("tenant-b", *(gpu_pod(f"burst-{i:02d}", "burst", gpumem=1000) for i in range(20)))
    pods = wait_for("twenty pods Running", all_running(lab, "tenant-b", "app=burst", 20), timeout=60)
    assert {p["spec"]["nodeName"] for p in pods} == {"worker-b1"}
    assert sorted(Counter(card_of(p) for p in pods).values()) == [10, 10]
    assert all(annotations(p)["hami.io/bind-phase"] == "success" for p in pods)
    node = wait_for(
        "the node lock released",
        lambda: NODE_LOCK not in annotations(n := lab.node("tenant-b", "worker-b1")) and n,
    )
    assert NODE_LOCK not in annotations(node)
    # Every slot is taken: one more slice waits instead of over-committing a card.
    lab.create("tenant-b", gpu_pod("burst-21", "burst-extra", gpumem=1000))
    reason = wait_for(
        "FailedScheduling for the 21st pod",
        lambda: "FailedScheduling" in (r := pending_reason(lab, "tenant-b", "burst-21")) and r,
    )
    assert "CardTimeSlicingExhausted" in reason
    lab.delete("tenant-b", "app in (burst, burst-extra)")


def test_a_gpu_job_runs_its_pods_through_hami_to_completion_and_delete_collects_them(lab: RunningLab) -> None:
    """The README's example Job, as a user would create it."""
    lab.kubectl("tenant-b", "create", "-f", str(EXAMPLES / "smi-job.yaml"))
    lab.kubectl("tenant-b", "wait", "--for=condition=complete", "job/smi", "--timeout=60s")
    assert lab.kubectl("tenant-b", "get", "job", "smi", "--no-headers").stdout.split()[1:3] == [
        "Complete",
        "3/3",
    ]
    pods = lab.pods("tenant-b", "batch.kubernetes.io/job-name=smi")
    assert len(pods) == 3 and {phase(p) for p in pods} == {"Succeeded"}
    for pod in pods:  # each went through HAMi's webhook, scheduler and Allocate
        assert pod["spec"]["schedulerName"] == "hami-scheduler"
        assert annotations(pod)["hami.io/bind-phase"] == "success"
        assert annotations(pod)["hami.io/vgpu-node"] == "worker-b1"
    log = lab.kubectl("tenant-b", "logs", "job/smi").stdout
    assert "0MiB / 3000MiB" in log, log  # nvidia-smi in the container sees its slice as the card
    lab.kubectl("tenant-b", "delete", "job", "smi")
    wait_for(
        "the job's pods to be collected", lambda: not lab.pods("tenant-b", "batch.kubernetes.io/job-name=smi")
    )


def gpu_deployment(name: str, replicas: int, *, gpumem: int, gpucores: int | None = None) -> dict[str, Any]:
    """A Deployment whose pods are `gpu_pod`'s, labelled `app=<name>`."""
    pod = gpu_pod("unused", name, gpumem=gpumem, gpucores=gpucores)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]},
        },
    }


def test_a_deployment_of_gpu_pods_shares_the_a100_scales_and_is_collected(lab: RunningLab) -> None:
    """The README's example Deployment, applied as a user would."""
    lab.kubectl("tenant-a", "apply", "-f", str(EXAMPLES / "infer-deployment.yaml"))
    out = lab.kubectl("tenant-a", "rollout", "status", "deployment/infer", "--timeout=60s").stdout
    assert 'deployment "infer" successfully rolled out' in out
    pods = wait_for("four running replicas", all_running(lab, "tenant-a", "app=infer", 4))
    assert len({card_of(p) for p in pods}) == 1, "the replicas share the one A100"
    lab.kubectl("tenant-a", "scale", "deployment/infer", "--replicas=6")
    pods = wait_for("six running replicas", all_running(lab, "tenant-a", "app=infer", 6))
    assert all(annotations(p)["hami.io/bind-phase"] == "success" for p in pods)
    assert lab.kubectl("tenant-a", "get", "deploy", "infer", "--no-headers").stdout.split()[1] == "6/6"
    # Deleted pods are replaced at once. Three deleted one after another were once taken for pods that
    # had ended on their own and spaced as CrashLoopBackOff spaces restarts: the third came after 40 s.
    gone = {p["metadata"]["name"] for p in pods[:3]}
    for name in gone:
        lab.kubectl("tenant-a", "delete", "pod", name, "--wait=false")
    six = all_running(lab, "tenant-a", "app=infer", 6)

    def replaced() -> list[dict]:
        now = six()
        return now if now and not gone & {p["metadata"]["name"] for p in now} else []

    wait_for("three replacements, without a restart back-off", replaced, timeout=25)
    lab.kubectl("tenant-a", "delete", "deployment", "infer")
    wait_for("the replicas to be collected", lambda: not lab.pods("tenant-a", "app=infer"), timeout=60)


def test_a_gpu_daemonset_puts_a_slice_on_every_node_through_hami(lab: RunningLab) -> None:
    """The README's example DaemonSet: its pod is pinned to the node by affinity and placed by HAMi."""
    lab.kubectl("tenant-b", "apply", "-f", str(EXAMPLES / "gpu-probe-daemonset.yaml"))
    out = lab.kubectl("tenant-b", "rollout", "status", "ds/gpu-probe", "--timeout=60s").stdout
    assert 'daemon set "gpu-probe" successfully rolled out' in out
    [pod] = wait_for("the probe Running", all_running(lab, "tenant-b", "app=gpu-probe", 1))
    assert pod["spec"]["nodeName"] == "worker-b1" and pod["spec"]["schedulerName"] == "hami-scheduler"
    assert annotations(pod)["hami.io/vgpu-node"] == "worker-b1"
    assert annotations(pod)["hami.io/bind-phase"] == "success"
    log = lab.kubectl("tenant-b", "logs", pod["metadata"]["name"]).stdout
    assert "0MiB / 1024MiB" in log
    lab.kubectl("tenant-b", "delete", "ds", "gpu-probe")
    wait_for("the probe collected", lambda: not lab.pods("tenant-b", "app=gpu-probe"), timeout=60)


def test_a_limit_range_gives_every_pod_of_a_namespace_a_gpu_slice_that_hami_places(lab: RunningLab) -> None:
    """kube's LimitRanger runs before the mutating webhooks, so HAMi's sees the defaulted GPU request."""
    lab.kubectl("tenant-b", "create", "namespace", "slices")
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "gpu-slice", "namespace": "slices"},
        "spec": {
            "limits": [{"type": "Container", "default": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}}]
        },
    }
    lab.create("tenant-b", limit_range)
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "namespace": "slices", "labels": {"app": "sliced"}},
        "spec": {"containers": [{"name": "cuda", "image": "cuda-sample"}]},
    }
    lab.create("tenant-b", plain)
    pod = wait_for(
        "the defaulted pod Running",
        lambda: phase(p := lab.pod_in("tenant-b", "slices", "plain")) == "Running" and p,
    )
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "2k",
    }
    assert annotations(pod)["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: nvidia.com/gpu, nvidia.com/gpumem request for container cuda; "
        "nvidia.com/gpu, nvidia.com/gpumem limit for container cuda"
    )
    assert annotations(pod)[ALLOCATED] == f"{card_of(pod)},NVIDIA,2000,0:;"
    log = lab.kubectl("tenant-b", "logs", "-n", "slices", "plain").stdout
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=2000m" in log
    lab.kubectl("tenant-b", "delete", "namespace", "slices", "--wait=true", "--timeout=60s")


def test_the_log_of_a_completed_init_container_stays_readable(lab: RunningLab) -> None:
    """Found by probing: `kubectl logs POD -c init` and `--all-containers` failed with `container not
    found`; a kubelet keeps a completed init container's log, and a GPU init container's shows the
    environment HAMi's Allocate gave it."""
    pod = gpu_pod("with-init", "with-init", gpumem=1000)
    init = {
        **pod["spec"]["containers"][0],
        "name": "prepare",
        "command": ["sh", "-c", "echo prepared; nvidia-smi"],
    }
    pod["spec"]["initContainers"] = [init]
    lab.create("tenant-b", pod)
    wait_for("the pod Running", lambda: phase(lab.pod("tenant-b", "with-init")) == "Running")
    log = lab.kubectl("tenant-b", "logs", "with-init", "-c", "prepare").stdout
    assert "prepared" in log and "CUDA_DEVICE_MEMORY_LIMIT_0=1000m" in log and "NVIDIA L4" in log
    assert log.rstrip().endswith("process exited with code 0")
    both = lab.kubectl("tenant-b", "logs", "with-init", "--all-containers", "--prefix").stdout
    assert "[pod/with-init/prepare] prepared" in both
    assert "[pod/with-init/cuda] tenantgpu simulated container cuda" in both
    lab.kubectl("tenant-b", "delete", "pod", "with-init", "--wait=true")


def test_a_native_sidecar_runs_beside_the_gpu_container_until_the_pod_ends(lab: RunningLab) -> None:
    """Found by probing: an init container with `restartPolicy: Always` (a sidecar, on by default since
    1.29) was reported terminated at once, so `kubectl get pod` said READY 1/2 and its log ended. Now it
    runs with the pod (READY 2/2) and is stopped when the app container ends; the pod still Succeeds."""
    pod = gpu_pod("with-sidecar", "with-sidecar", gpumem=1000, annotations={"tenantgpu.io/run-for": "3s"})
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "envoy",
            "restartPolicy": "Always",
            "command": ["sh", "-c", "echo proxying"],
        }
    ]
    lab.create("tenant-b", pod)
    wait_for("the pod Running", lambda: phase(lab.pod("tenant-b", "with-sidecar")) == "Running")
    row = lab.kubectl("tenant-b", "get", "pod", "with-sidecar", "--no-headers").stdout.split()
    assert row[1:3] == ["2/2", "Running"]
    proxy = lab.pod("tenant-b", "with-sidecar")["status"]["initContainerStatuses"][0]
    assert "running" in proxy["state"] and proxy["ready"] and proxy["started"]
    assert "proxying" in lab.kubectl("tenant-b", "logs", "with-sidecar", "-c", "proxy").stdout
    wait_for("the pod Succeeded", lambda: phase(lab.pod("tenant-b", "with-sidecar")) == "Succeeded")
    proxy = lab.pod("tenant-b", "with-sidecar")["status"]["initContainerStatuses"][0]
    assert proxy["state"]["terminated"]["exitCode"] == 0 and not proxy["ready"]
    log = lab.kubectl("tenant-b", "logs", "with-sidecar", "-c", "proxy").stdout
    assert log.rstrip().endswith("received SIGTERM, exiting")
    lab.kubectl("tenant-b", "delete", "pod", "with-sidecar", "--wait=true")


def test_a_gpu_statefulset_starts_its_workers_in_order_on_the_shared_a100(lab: RunningLab) -> None:
    """The README's example StatefulSet with its headless Service."""
    lab.kubectl("tenant-a", "apply", "-f", str(EXAMPLES / "trainer-statefulset.yaml"))
    out = lab.kubectl("tenant-a", "rollout", "status", "sts/trainer", "--timeout=60s").stdout
    assert "partitioned roll out complete: 3 new pods have been updated" in out
    pods = wait_for("three workers Running", all_running(lab, "tenant-a", "app=trainer", 3))
    assert sorted(p["metadata"]["name"] for p in pods) == ["trainer-0", "trainer-1", "trainer-2"]
    assert {p["spec"]["subdomain"] for p in pods} == {"trainer"} and len({card_of(p) for p in pods}) == 1
    service = json.loads(lab.kubectl("tenant-a", "get", "svc", "trainer", "-o", "json").stdout)
    assert service["spec"]["clusterIP"] == "None"
    lab.kubectl("tenant-a", "delete", "-f", str(EXAMPLES / "trainer-statefulset.yaml"))
    wait_for("the workers collected", lambda: not lab.pods("tenant-a", "app=trainer"), timeout=60)


def test_gpu_workers_keep_their_data_on_claims_the_tenant_provisions(lab: RunningLab) -> None:
    """Every tenant has minikube's default class `standard` and its hostpath provisioner: a GPU pod's claim
    is bound at once, HAMi places the pod, and the kubelet starts it once the claim is bound; a GPU
    StatefulSet's volumeClaimTemplates give each worker its own claim, which outlives the set (the
    default retention policy, Retain) and goes, with its volume, when deleted."""
    classes = lab.kubectl("tenant-b", "get", "storageclass", "--no-headers").stdout.split()
    assert classes[:4] == ["standard", "(default)", "k8s.io/minikube-hostpath", "Delete"], classes
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "model-cache"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}},
    }
    pod = gpu_pod("cached-infer", "cached-infer", gpumem=4000)
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "cache", "mountPath": "/models"}]
    pod["spec"]["volumes"] = [{"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}}]
    items = {"apiVersion": "v1", "kind": "List", "items": [claim, pod]}
    lab.kubectl("tenant-b", "apply", "-f", "-", input=json.dumps(items))
    wait_for("the GPU pod Running on its claim", all_running(lab, "tenant-b", "app=cached-infer", 1))
    bound = json.loads(lab.kubectl("tenant-b", "get", "pvc", "model-cache", "-o", "json").stdout)
    assert bound["status"]["phase"] == "Bound" and bound["spec"]["storageClassName"] == "standard"
    assert annotations(lab.pod("tenant-b", "cached-infer"))[ALLOCATED]  # placed by HAMi
    lab.kubectl("tenant-b", "delete", "pod", "cached-infer")
    lab.kubectl("tenant-b", "delete", "pvc", "model-cache")
    volume = bound["spec"]["volumeName"]
    wait_for(
        "the provisioned volume deleted with its claim",
        lambda: lab.kubectl("tenant-b", "get", "pv", volume, check=False).returncode != 0,
    )

    template = gpu_pod("unused", "shard", gpumem=2000)
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "shard", "mountPath": "/data"}]
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "shard"},
        "spec": {
            "serviceName": "shard",
            "replicas": 2,
            "selector": {"matchLabels": {"app": "shard"}},
            "template": {"metadata": {"labels": {"app": "shard"}}, "spec": template["spec"]},
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "shard"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
        },
    }
    lab.kubectl("tenant-b", "apply", "-f", "-", input=json.dumps(sts))
    pods = wait_for("both workers Running", all_running(lab, "tenant-b", "app=shard", 2), timeout=60)
    assert [p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] for p in pods] == [
        "shard-shard-0",
        "shard-shard-1",
    ]
    claims = json.loads(lab.kubectl("tenant-b", "get", "pvc", "-l", "app=shard", "-o", "json").stdout)[
        "items"
    ]
    assert sorted((c["metadata"]["name"], c["status"]["phase"]) for c in claims) == [
        ("shard-shard-0", "Bound"),
        ("shard-shard-1", "Bound"),
    ]
    events = lab.kubectl("tenant-b", "get", "events", "--field-selector", "involvedObject.name=shard").stdout
    assert "create Claim shard-shard-0 Pod shard-0 in StatefulSet shard success" in events
    lab.kubectl("tenant-b", "delete", "statefulset", "shard")
    wait_for("the workers collected", lambda: not lab.pods("tenant-b", "app=shard"), timeout=60)
    left = json.loads(lab.kubectl("tenant-b", "get", "pvc", "-l", "app=shard", "-o", "json").stdout)["items"]
    assert len(left) == 2  # Retain: the data outlives the set
    lab.kubectl("tenant-b", "delete", "pvc", "-l", "app=shard")


def versioned_kubectls() -> dict[str, str]:
    """The kubectl binaries beside the dispatcher on PATH (`kubectl.1.27` … `kubectl.1.33`), by version."""
    found = shutil.which("kubectl")
    assert found is not None
    folder = Path(found).resolve().parent
    binaries = {p.name.removeprefix("kubectl."): str(p) for p in folder.glob("kubectl.1.*")}
    assert binaries, f"no versioned kubectl binaries in {folder}"
    return binaries


def test_kubectl_exec_shows_what_hami_gave_the_container_with_every_kubectl(lab: RunningLab) -> None:
    lab.create("tenant-a", gpu_pod("exec-0", "exec", gpumem=8000, gpucores=10))
    wait_for("the exec pod Running", all_running(lab, "tenant-a", "app=exec", 1))
    # kubectl 1.27-1.29 speak SPDY/3.1, 1.30 and newer the WebSocket channel protocol v5.
    for version, kubectl in sorted(versioned_kubectls().items()):
        smi = lab.kubectl("tenant-a", "exec", "exec-0", "--", "nvidia-smi", binary=kubectl)
        assert A100 in smi.stdout and "0MiB / 8000MiB" in smi.stdout, f"kubectl {version}: {smi.stdout}"
        query = ("--query-gpu=name,memory.total", "--format=csv,noheader")
        queried = lab.kubectl("tenant-a", "exec", "exec-0", "--", "nvidia-smi", *query, binary=kubectl)
        assert queried.stdout == f"{A100}, 8000 MiB\n", f"kubectl {version}: {queried.stdout}"
        limit = lab.kubectl(
            "tenant-a", "exec", "exec-0", "--", "printenv", "CUDA_DEVICE_SM_LIMIT", binary=kubectl
        )
        assert limit.stdout == "10\n", f"kubectl {version}"
        # kubectl's exit code is the command's; its stderr comes through on its own stream
        failed = lab.kubectl("tenant-a", "exec", "exec-0", "--", "ls", check=False, binary=kubectl)
        assert failed.returncode == 127, f"kubectl {version}: {failed.stderr}"
        assert 'exec: "ls": executable file not found' in failed.stderr
        assert "command terminated with exit code 127" in failed.stderr
        piped = lab.kubectl("tenant-a", "exec", "-i", "exec-0", "--", "hostname", input="x\n", binary=kubectl)
        assert (piped.stdout, piped.stderr) == ("exec-0\n", ""), f"kubectl {version}: {piped.stderr}"

    # With a terminal (-it, under `script` for a pseudo-terminal): one stream, \r\n line ends, and no
    # complaint from kubectl about the connection closing under its terminal-size or stdin writes.
    kubeconfig = str(lab.state / "kubeconfigs" / "tenant-a.kubeconfig")
    for version in ("1.28", "1.31"):
        kubectl = versioned_kubectls()[version]
        shown = subprocess.run(
            [
                "script",
                "-qec",
                f"{kubectl} --kubeconfig {kubeconfig} exec -it exec-0 -- nvidia-smi",
                "/dev/null",
            ],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(lab.home)},
        )
        assert shown.returncode == 0, f"kubectl {version}: {shown.stdout!r}"
        assert b"0MiB / 8000MiB" in shown.stdout and b"+\r\n|" in shown.stdout, f"kubectl {version}"
        assert b"Unhandled Error" not in shown.stdout + shown.stderr, f"kubectl {version}: {shown.stdout!r}"

    wrong = lab.kubectl("tenant-a", "exec", "exec-0", "-c", "sidecar", "--", "env", check=False)
    assert wrong.returncode == 1
    assert "container sidecar is not valid for pod exec-0" in wrong.stderr
    missing = lab.kubectl("tenant-a", "exec", "no-such-pod", "--", "env", check=False)
    assert missing.returncode == 1 and 'pods "no-such-pod" not found' in missing.stderr
    # nothing listens in a workload's simulated container: the runtime refuses the forwarded connection
    with _port_forward(lab, "tenant-a", "pod/exec-0", ":80") as (forward, port):
        assert closed_unanswered(port, b"GET / HTTP/1.1\r\n\r\n")
        _, stderr = forward.communicate(timeout=15)
    assert forward.returncode == 1
    assert "error forwarding port 80 to pod" in stderr and "connect: connection refused" in stderr

    # The official Python client speaks v5/v4.channel.k8s.io over its own WebSocket.
    probe = (
        "from kubernetes import client, config\n"
        "from kubernetes.stream import stream\n"
        f"config.load_kube_config({str(lab.state / 'kubeconfigs' / 'tenant-a.kubeconfig')!r})\n"
        "api = client.CoreV1Api()\n"
        "out = stream(api.connect_get_namespaced_pod_exec, 'exec-0', 'default',\n"
        "             command=['printenv', 'CUDA_DEVICE_MEMORY_LIMIT_0'], stdout=True, stderr=True, stdin=False, tty=False)\n"
        "resp = stream(api.connect_get_namespaced_pod_exec, 'exec-0', 'default', command=['false'],\n"
        "              stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)\n"
        "resp.run_forever(timeout=10)\n"
        "print(repr(out), resp.returncode)\n"
    )
    python = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert python.returncode == 0, python.stderr
    assert python.stdout.strip() == "'8000m\\n' 1"

    # a shell reads its lines from kubectl's stdin, each run in the container through the tunnel
    script = "printenv CUDA_DEVICE_MEMORY_LIMIT_0\nnvidia-smi --query-gpu=memory.total --format=csv,noheader\nexit 3\n"
    shell = lab.kubectl(
        "tenant-a", "exec", "-i", "exec-0", "-c", "cuda", "--", "bash", input=script, check=False
    )
    assert (shell.returncode, shell.stdout) == (3, "8000m\n8000 MiB\n"), shell.stderr

    # exec reaches the kubelet through the tunnel the worker dialled, like the webhook.
    _lab_control(lab, "tenant-a", "konnectivity-agent", "stopped")
    try:
        cut = lab.kubectl("tenant-a", "exec", "exec-0", "--", "hostname", check=False)
        assert cut.returncode == 1 and "No agent available" in cut.stderr, cut.stderr
    finally:
        _lab_control(lab, "tenant-a", "konnectivity-agent", "running")
    back = wait_for(
        "exec through the tunnel again",
        lambda: (
            (r := lab.kubectl("tenant-a", "exec", "exec-0", "--", "hostname", check=False)).returncode == 0
            and r
        ),
    )
    assert back.stdout == "exec-0\n"
    lab.delete("tenant-a", "app=exec")


def test_kubectl_debug_runs_an_ephemeral_container_beside_a_gpu_pod(lab: RunningLab) -> None:
    # written as HAMi's examples are, with unquoted quantities
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: dbg-0, labels: {app: debug}}
spec:
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    command: ["sleep", "infinity"]
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}
"""
    lab.kubectl("tenant-a", "apply", "-f", "-", input=manifest)
    wait_for("the pod to debug Running", all_running(lab, "tenant-a", "app=debug", 1))
    # kube-apiserver writes quantities back as strings, so the official client can read the pod
    probe = (
        "from kubernetes import client, config\n"
        f"config.load_kube_config({str(lab.state / 'kubeconfigs' / 'tenant-a.kubeconfig')!r})\n"
        "pod = client.CoreV1Api().read_namespaced_pod('dbg-0', 'default')\n"
        "print(pod.spec.containers[0].resources.limits['nvidia.com/gpumem'])\n"
    )
    python = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (python.returncode, python.stdout) == (0, "3k\n"), python.stderr

    kubectls = versioned_kubectls()
    for version, kubectl in sorted(kubectls.items()):
        name = f"host-{version.replace('.', '')}"
        lab.kubectl(
            "tenant-a", "debug", "dbg-0", "--image=busybox", "-c", name, "--", "hostname", binary=kubectl
        )

    def ended() -> dict[str, Any] | None:
        statuses = lab.pod("tenant-a", "dbg-0")["status"].get("ephemeralContainerStatuses") or []
        done = {s["name"]: s["state"] for s in statuses if "terminated" in s["state"]}
        return done if len(done) == len(kubectls) else None

    states = wait_for("every debug container to run its command", ended)
    assert {state["terminated"]["exitCode"] for state in states.values()} == {0}
    assert lab.kubectl("tenant-a", "logs", "dbg-0", "-c", "host-133").stdout.splitlines()[-2:] == [
        "dbg-0",
        "process exited with code 0",
    ]

    # a debug shell stays up for exec; it sees no GPU, since the device plugin allocates at admission
    lab.kubectl("tenant-a", "debug", "dbg-0", "--image=busybox", "-c", "shell", "--target=cuda")

    def shell_running() -> bool:
        statuses = lab.pod("tenant-a", "dbg-0")["status"].get("ephemeralContainerStatuses") or []
        return any(s["name"] == "shell" and "running" in s["state"] for s in statuses)

    wait_for("the debug shell Running", shell_running)
    assert lab.kubectl("tenant-a", "exec", "dbg-0", "-c", "shell", "--", "hostname").stdout == "dbg-0\n"
    assert (
        lab.kubectl("tenant-a", "exec", "dbg-0", "-c", "shell", "--", "nvidia-smi", check=False).returncode
        == 127
    )
    smi = lab.kubectl("tenant-a", "exec", "dbg-0", "-c", "cuda", "--", "nvidia-smi").stdout
    assert "0MiB / 3000MiB" in smi  # the GPU container is as HAMi left it
    lab.delete("tenant-a", "app=debug")


def test_the_management_plane_refuses_tenant_control_planes_as_kamaji_does(lab: RunningLab) -> None:
    def apply(name: str, version: str, **spec: Any) -> subprocess.CompletedProcess[str]:
        tcp = {
            "apiVersion": "kamaji.clastix.io/v1alpha1",
            "kind": "TenantControlPlane",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "controlPlane": {"service": {"serviceType": "ClusterIP"}},
                "kubernetes": {"version": version, "kubelet": {"cgroupfs": "systemd"}},
                **spec,
            },
        }
        return lab.kubectl("management", "apply", "-f", "-", input=json.dumps(tcp), check=False)

    schema = apply("tenant-x", "v1.31.4", controlPlane={"service": {"serviceType": "Ingress"}})
    assert schema.returncode == 1
    assert 'spec.controlPlane.service.serviceType: Unsupported value: "Ingress"' in schema.stderr
    resources = {"apiServer": {"limits": {"cpu": "two"}}}
    pattern = apply(
        "tenant-x",
        "v1.31.4",
        controlPlane={"service": {"serviceType": "ClusterIP"}, "deployment": {"resources": resources}},
    )
    cpu = "spec.controlPlane.deployment.resources.apiServer.limits.cpu"
    assert (
        pattern.returncode == 1
        and f'{cpu}: Invalid value: "two": {cpu} in body should match' in pattern.stderr
    )
    webhook = 'Error from server (Forbidden): error when creating "STDIN": admission webhook "vtenantcontrolplane.kb.io" denied the request: '
    assert (
        webhook + "tenant-x-store DataStore does not exist"
        in apply("tenant-x", "v1.31.4", dataStore="tenant-x-store").stderr
    )
    assert (
        webhook + "unable to create a TenantControlPlane with a Kubernetes version greater"
        in apply("tenant-x", "v1.99.0").stderr
    )
    downgrade = lab.kubectl(
        "management", "patch", "tcp", "tenant-a", "--type=merge",
        "-p", '{"spec":{"kubernetes":{"version":"v1.30.0"}}}', check=False,
    )  # fmt: skip
    assert downgrade.returncode == 1
    assert "unable to downgrade a TenantControlPlane from 1.31.0 to 1.30.0" in downgrade.stderr
    assert lab.kubectl("management", "get", "tcp", "tenant-x", check=False).returncode == 1

    # the example a user copies is accepted, defaulted as Kamaji defaults it, and goes Ready
    example = Path(__file__).resolve().parents[2] / "examples" / "kamaji" / "tenant-control-plane.yaml"
    lab.kubectl("management", "apply", "-f", str(example))
    try:
        ready = wait_for(
            "tenant-c Ready",
            lambda: (
                (t := json.loads(lab.kubectl("management", "get", "tcp", "tenant-c", "-o", "json").stdout))
                and (t.get("status") or {}).get("kubernetesResources", {}).get("version", {}).get("status")
                == "Ready"
                and t
            ),
        )
        assert ready["spec"]["networkProfile"]["dnsServiceIPs"] == ["10.96.0.10"]
        # Kamaji's webhook defaults the schema to the UID, which it cannot see on a create (kube fills the
        # uid in after the mutating phase): the spec keeps none, and the controller uses the UID.
        assert "dataStoreSchema" not in ready["spec"] and "dataStoreUsername" not in ready["spec"]
        assert ready["status"]["storage"]["setup"]["schema"] == ready["metadata"]["uid"]
    finally:
        lab.kubectl("management", "delete", "tcp", "tenant-c", "--wait=true")


COMPONENT = "app.kubernetes.io/component"


def system_pods(lab: RunningLab, tenant: str) -> dict[str, list[dict[str, Any]]]:
    """The tenant's kube-system pods by their component (HAMi's chart label, or the `k8s-app` label of
    Kamaji's agent), each list by name."""
    items = json.loads(lab.kubectl(tenant, "get", "pods", "-n", "kube-system", "-o", "json").stdout)["items"]
    found: dict[str, list[dict[str, Any]]] = {}
    for pod in sorted(items, key=lambda p: p["metadata"]["name"]):
        labels = pod["metadata"].get("labels") or {}
        found.setdefault(labels.get(COMPONENT) or labels.get("k8s-app", ""), []).append(pod)
    return found


def system_running(lab: RunningLab, tenant: str) -> Callable[[], dict[str, list[dict[str, Any]]]]:
    """A probe: the kube-system pods once HAMi's scheduler and device plugin and Kamaji's tunnel agent
    each have one pod Running (the pods of workloads `up` does not wait for, as `helm install` and
    Kamaji's Ready do not)."""

    def probe() -> dict[str, list[dict[str, Any]]]:
        found = system_pods(lab, tenant)
        ready = all(
            len(found.get(c, [])) == 1 and phase(found[c][0]) == "Running"
            for c in ("hami-scheduler", "hami-device-plugin", "konnectivity-agent")
        )
        return found if ready else {}

    return probe


def owners(pod: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(o["kind"], o["name"], bool(o.get("controller"))) for o in pod["metadata"]["ownerReferences"]]


def test_drain_needs_ignore_daemonsets_and_evicts_hamis_scheduler_with_the_workloads(lab: RunningLab) -> None:
    """HAMi's device plugin and Kamaji's tunnel agent are DaemonSets' pods: `kubectl drain` refuses to go
    on without `--ignore-daemonsets`, then leaves them. HAMi's scheduler is a Deployment's pod: evicted
    with the workloads, its ReplicaSet makes another, which waits until the node is uncordoned. A deleted
    agent pod is replaced by its DaemonSet."""
    system = wait_for("the kube-system pods Running", system_running(lab, "tenant-b"))
    assert set(system) == {"konnectivity-agent", "hami-device-plugin", "hami-scheduler"}
    [agent], [plugin], [scheduler] = (
        system[c] for c in ("konnectivity-agent", "hami-device-plugin", "hami-scheduler")
    )
    assert owners(agent) == [("DaemonSet", "konnectivity-agent", True)]
    assert owners(plugin) == [("DaemonSet", "hami-device-plugin", True)]
    assert owners(scheduler)[0][0] == "ReplicaSet" and owners(scheduler)[0][1].startswith("hami-scheduler-")
    for pod in (agent, plugin, scheduler):
        assert "kubernetes.io/config.mirror" not in annotations(pod)
    # their charts' priority classes, filled in by the Priority admission plugin: no user pod preempts them
    priorities = {c: (p[0]["spec"]["priorityClassName"], p[0]["spec"]["priority"]) for c, p in system.items()}
    assert priorities == {
        "konnectivity-agent": ("system-cluster-critical", 2000000000),
        "hami-device-plugin": ("system-node-critical", 2000001000),
        "hami-scheduler": ("system-node-critical", 2000001000),
    }
    lab.create("tenant-b", gpu_pod("drained", "drained", gpumem=1000))
    wait_for("the workload Running", all_running(lab, "tenant-b", "app=drained", 1))
    # a PodDisruptionBudget that needs the pod holds the drain back, as on a cluster
    lab.kubectl("tenant-b", "create", "pdb", "keep-one", "--selector=app=drained", "--min-available=1")

    def budget_counted() -> bool:
        budget = json.loads(lab.kubectl("tenant-b", "get", "pdb", "keep-one", "-o", "json").stdout)
        return (budget.get("status") or {}).get("currentHealthy") == 1

    wait_for("the budget counted", budget_counted)
    daemons = [f"kube-system/{p['metadata']['name']}" for p in (plugin, agent)]
    try:
        refused = lab.kubectl("tenant-b", "drain", "worker-b1", "--force", "--timeout=6s", check=False)
        assert refused.returncode == 1
        lines = [ln for ln in refused.stderr.splitlines() if "cannot delete DaemonSet-managed Pods" in ln]
        assert lines and all("(use --ignore-daemonsets to ignore)" in ln for ln in lines)
        assert all(d in ln for ln in lines for d in daemons)
        blocked = lab.kubectl(
            "tenant-b", "drain", "worker-b1", "--ignore-daemonsets", "--force", "--timeout=6s", check=False
        )
        assert blocked.returncode == 1
        assert "Cannot evict pod as it would violate the pod's disruption budget." in blocked.stderr
        assert lab.pods("tenant-b", "app=drained")
        lab.kubectl("tenant-b", "delete", "pdb", "keep-one")
        drained = lab.kubectl(
            "tenant-b", "drain", "worker-b1", "--ignore-daemonsets", "--force", "--timeout=45s"
        )
        said = drained.stderr + drained.stdout
        assert "evicting pod default/drained" in said
        # (the blocked drain already evicted what it could)
        said += blocked.stderr + blocked.stdout
        assert f"evicting pod kube-system/{scheduler['metadata']['name']}" in said
        ignoring = [ln for ln in said.splitlines() if "ignoring DaemonSet-managed Pods:" in ln]
        assert ignoring and all(d in ln for ln in ignoring for d in daemons)
        # the ReplicaSet's new pod cannot go to the cordoned node
        waiting = wait_for(
            "a new scheduler pod, Pending",
            lambda: [
                p
                for p in system_pods(lab, "tenant-b").get("hami-scheduler", [])
                if p["metadata"]["uid"] != scheduler["metadata"]["uid"] and phase(p) == "Pending"
            ],
        )
        assert not waiting[0]["spec"].get("nodeName")
    finally:
        lab.kubectl("tenant-b", "delete", "pdb", "keep-one", "--ignore-not-found")
        lab.kubectl("tenant-b", "uncordon", "worker-b1")
    wait_for("the workload gone", lambda: not lab.pods("tenant-b", "app=drained"))
    after = wait_for("the kube-system pods Running again", system_running(lab, "tenant-b"))
    assert after["hami-scheduler"][0]["metadata"]["uid"] == waiting[0]["metadata"]["uid"]
    assert after["hami-scheduler"][0]["spec"]["nodeName"] == "worker-b1"
    assert after["hami-device-plugin"][0]["metadata"]["uid"] == plugin["metadata"]["uid"]
    assert [p["metadata"]["uid"] for p in after["konnectivity-agent"]] == [agent["metadata"]["uid"]]

    lab.kubectl("tenant-b", "delete", "pod", "-n", "kube-system", agent["metadata"]["name"], "--wait=true")
    replaced = wait_for("the DaemonSet's new agent pod Running", system_running(lab, "tenant-b"))
    [new_agent] = replaced["konnectivity-agent"]
    assert new_agent["metadata"]["uid"] != agent["metadata"]["uid"]
    assert new_agent["spec"]["nodeName"] == "worker-b1"
    assert owners(new_agent) == [("DaemonSet", "konnectivity-agent", True)]
    # the pod is what the cluster shows; the worker's agent behind it keeps the tunnel up throughout
    # its log is that agent's output: the new container starts with the agent's connection lines
    logs = lab.kubectl("tenant-b", "logs", "-n", "kube-system", new_agent["metadata"]["name"])
    assert '] "Start serving" serverID=' in logs.stdout and 'agentID="worker-b1"' in logs.stdout


def _columns(lab: RunningLab, tenant: str, *args: str) -> dict[str, str]:
    """The one row of a `kubectl get` table, by its column headers."""
    header, row = lab.kubectl(tenant, "get", *args).stdout.splitlines()
    # a header starts after two spaces ("NODE SELECTOR" is one header)
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 2 : i] == "  ")]
    bounds = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, bounds, strict=True)}


def test_hamis_scheduler_and_device_plugin_are_the_charts_deployment_and_daemonset(lab: RunningLab) -> None:
    """`helm install hami` makes a Deployment `hami-scheduler` and a DaemonSet `hami-device-plugin` on the
    nodes labelled `gpu=on`: the tenant's controllers make their pods, the default scheduler places them,
    the kubelet runs them; a deleted scheduler pod is replaced by its ReplicaSet, the Service's Endpoints
    follow it, and GPU pods go through HAMi as before."""
    wait_for("HAMi's pods Running", system_running(lab, "tenant-b"))
    deployment = wait_for(
        "the Deployment 1/1",
        lambda: (
            (c := _columns(lab, "tenant-b", "-n", "kube-system", "deploy", "hami-scheduler"))["READY"]
            == "1/1"
            and c
        ),
    )
    assert (deployment["UP-TO-DATE"], deployment["AVAILABLE"]) == ("1", "1")
    ds = _columns(lab, "tenant-b", "-n", "kube-system", "ds", "hami-device-plugin")
    assert [ds[k] for k in ("DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE")] == ["1"] * 5
    assert ds["NODE SELECTOR"] == "gpu=on"
    for workload in ("ds/hami-device-plugin", "deploy/hami-scheduler"):
        status = lab.kubectl("tenant-b", "-n", "kube-system", "rollout", "status", workload, "--timeout=30s")
        assert "successfully rolled out" in status.stdout

    [plugin] = lab.pods_in("tenant-b", "kube-system", f"{COMPONENT}=hami-device-plugin")
    assert owners(plugin) == [("DaemonSet", "hami-device-plugin", True)]
    assert plugin["spec"]["nodeName"] == "worker-b1" and phase(plugin) == "Running"
    assert plugin["spec"]["serviceAccountName"] == "hami-device-plugin"
    assert [c["name"] for c in plugin["spec"]["containers"]] == ["device-plugin", "vgpu-monitor"]
    [scheduler] = lab.pods_in("tenant-b", "kube-system", f"{COMPONENT}=hami-scheduler")
    [(kind, replica_set, _)] = owners(scheduler)
    assert kind == "ReplicaSet"
    rs = json.loads(
        lab.kubectl("tenant-b", "get", "rs", "-n", "kube-system", replica_set, "-o", "json").stdout
    )
    assert owners(rs) == [("Deployment", "hami-scheduler", True)]
    assert scheduler["spec"]["serviceAccountName"] == "hami-scheduler" and phase(scheduler) == "Running"
    assert [c["name"] for c in scheduler["spec"]["containers"]] == [
        "kube-scheduler",
        "vgpu-scheduler-extender",
    ]
    assert scheduler["spec"]["containers"][0]["image"].endswith(
        "kube-scheduler:v1.31.4"
    )  # the tenant's version

    def endpoint_ips() -> list[str]:
        endpoints = json.loads(
            lab.kubectl(
                "tenant-b", "get", "endpoints", "-n", "kube-system", "hami-scheduler", "-o", "json"
            ).stdout
        )
        return [a["ip"] for s in endpoints.get("subsets") or [] for a in s.get("addresses") or []]

    wait_for("the Service's endpoint", lambda: endpoint_ips() == [scheduler["status"]["podIP"]])

    lab.kubectl(
        "tenant-b", "delete", "pod", "-n", "kube-system", scheduler["metadata"]["name"], "--wait=true"
    )
    [replacement] = wait_for(
        "a new scheduler pod Running",
        lambda: [
            p
            for p in lab.pods_in("tenant-b", "kube-system", f"{COMPONENT}=hami-scheduler")
            if p["metadata"]["uid"] != scheduler["metadata"]["uid"] and phase(p) == "Running"
        ],
    )
    assert owners(replacement) == owners(scheduler)
    wait_for("the endpoint to follow", lambda: endpoint_ips() == [replacement["status"]["podIP"]])

    lab.create("tenant-b", gpu_pod("after-hami", "after-hami", gpumem=1000))
    [pod] = wait_for("the GPU pod Running", all_running(lab, "tenant-b", "app=after-hami", 1))
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    assert annotations(pod)["hami.io/bind-phase"] == "success"
    lab.delete("tenant-b", "app=after-hami")


KLOG_LINE = re.compile(r"([IWE])\d{4} \d\d:\d\d:\d\d\.\d{6} +1 (\S+\.go:\d+)\] (.*)")


def klog_lines(text: str) -> list[tuple[str, str, str]]:
    """(severity, source, message) of each klog line of a container's log; other lines fail the test."""
    found = []
    for line in text.splitlines():
        match = KLOG_LINE.fullmatch(line)
        assert match, f"not a klog line: {line!r}"
        found.append((match[1], match[2], match[3]))
    return found


def test_kubectl_logs_of_hamis_and_the_agents_pods_show_what_the_components_did(lab: RunningLab) -> None:
    """The containers that stand for HAMi's extender and device plugin and for the tunnel agent show
    those components' klog output: the filter and bind of a GPU pod, its Allocate, a refused pod, and the
    tunnel's dial for the webhook call."""
    wait_for("the system pods Running", system_running(lab, "tenant-a"))
    lab.create("tenant-a", gpu_pod("logged", "logged", gpumem=2000, gpucores=20))
    [pod] = wait_for("the GPU pod Running", all_running(lab, "tenant-a", "app=logged", 1))
    uid, card = pod["metadata"]["uid"], card_of(pod)
    denied = gpu_pod("refused", "refused", gpumem=1000)
    denied["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    refusal = lab.kubectl("tenant-a", "create", "-f", "-", input=json.dumps(denied), check=False)
    assert refusal.returncode != 0 and "container cuda is privileged" in refusal.stderr

    def extender() -> list[tuple[str, str, str]]:
        out = lab.kubectl(
            "tenant-a", "logs", "-n", "kube-system", "deploy/hami-scheduler", "-c", "vgpu-scheduler-extender"
        ).stdout
        return klog_lines(out)

    lines = wait_for("the refusal in the extender's log", lambda: (e := extender()) and e[-1][0] == "W" and e)
    assert lines[0] == ("I", "scheduler.go:85", '"Initializing HAMi scheduler"')
    assert ("I", "scheduler.go:541") in {(sev, src) for sev, src, _ in lines}  # the node's cards
    mine = [(src, text) for _, src, text in lines if '"logged"' in text]
    assert mine == [
        (
            "scheduler.go:1068",
            f'"Starting schedule filter process" pod="logged" uuid="{uid}" namespace="default"',
        ),
        (
            "scheduler.go:1119",
            '"Scheduling pod to node" podNamespace="default" podName="logged" nodeID="worker-a1"'
            f' devices="map[NVIDIA:[[{{0 {card} NVIDIA 2000 20 0 map[]}}]]]"',
        ),
        (
            "scheduler.go:999",
            '"Attempting to bind pod to node" pod="logged" namespace="default" node="worker-a1"',
        ),
        (
            "scheduler.go:1020",
            '"Trying to get the target node for pod" pod="logged" namespace="default" node="worker-a1"',
        ),
        (
            "scheduler.go:1063",
            '"Successfully bound pod to node" pod="logged" namespace="default" node="worker-a1"',
        ),
    ]
    assert lines[-1][1:] == (
        "webhook.go:100",
        "Processing admission hook for pod default/refused, UID:  - Denying admission as container cuda is privileged",
    )
    tail = lab.kubectl(
        "tenant-a", "logs", "-n", "kube-system", "deploy/hami-scheduler", "-c", "vgpu-scheduler-extender",
        "--tail=1", "--timestamps",
    ).stdout  # fmt: skip
    stamp, line = tail.rstrip("\n").split(" ", 1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", stamp) and "Denying admission" in line

    # a value with a newline (kubectl apply's last-applied annotation) goes on to lines of its own, as
    # Go's %v prints it and the runtime splits it: the plugin's log is read as text
    plugin = lab.kubectl(
        "tenant-a", "logs", "-n", "kube-system", "ds/hami-device-plugin", "-c", "device-plugin"
    ).stdout
    assert "Registered device plugin for 'nvidia.com/gpu' with Kubelet" in plugin
    assert "Allocate pod name is default/logged, annotation is map[" in plugin
    assert f"deviceAllocateFromAnnotation= [{{0 {card} NVIDIA 2000 20 0 map[]}}]" in plugin
    assert "CUDA_DEVICE_MEMORY_LIMIT_0:2000m" in plugin and "CUDA_DEVICE_SM_LIMIT:20" in plugin

    agent = klog_lines(lab.kubectl("tenant-a", "logs", "-n", "kube-system", "ds/konnectivity-agent").stdout)
    texts = [text for _, _, text in agent]
    assert any(t.startswith('"Connect to server" serverID=') for t in texts)
    assert any(t.startswith('"Start serving"') and 'agentID="worker-a1"' in t for t in texts)
    # the API server reaches the webhook (and the kubelet, for these logs) through the agent
    assert any(t.startswith('"Received DIAL_REQ"') for t in texts)
    assert any(t.startswith('"received DATA" connectionID=') for t in texts)
    lab.delete("tenant-a", "app=logged")


def test_a_worker_run_on_its_own_shows_its_device_plugins_log_in_the_plugin_pod_placed_there(
    lab: RunningLab,
) -> None:
    """`tenantgpu node run` against a tenant: HAMi's DaemonSet puts a device-plugin pod on the new GPU node,
    and that pod's log is the log of the device plugin the worker process runs for its cards."""
    kubeconfig = lab.state / "kubeconfigs" / "tenant-a.kubeconfig"
    worker = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu", "node", "run", "--kubeconfig", str(kubeconfig),
         "--name", "own-1", "--gpu", "NVIDIA L4:23034:1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=lab.root,
    )  # fmt: skip
    try:

        def plugin_on_node() -> dict[str, Any] | None:
            pods = lab.pods_in("tenant-a", "kube-system", f"{COMPONENT}=hami-device-plugin")
            return next(
                (p for p in pods if p["spec"].get("nodeName") == "own-1" and phase(p) == "Running"), None
            )

        pod = wait_for("a device-plugin pod Running on own-1", plugin_on_node)
        logs = lab.kubectl(
            "tenant-a", "logs", "-n", "kube-system", pod["metadata"]["name"], "-c", "device-plugin"
        ).stdout
        assert [text for _, _, text in klog_lines(logs)] == [
            "Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock",
            "Registered device plugin for 'nvidia.com/gpu' with Kubelet",
        ]
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=30)
        lab.kubectl("tenant-a", "delete", "node", "own-1", check=False)
        # the DaemonSets' pods there would wait for the pod GC's 40 s quarantine of orphans
        lab.kubectl(
            "tenant-a", "delete", "pods", "-n", "kube-system", "--field-selector", "spec.nodeName=own-1",
            "--force", "--grace-period=0", check=False,
        )  # fmt: skip
    wait_for("one pod of each system component again", system_running(lab, "tenant-a"))


def _lab_control(lab: RunningLab, tenant: str, component: str, desired: str) -> None:
    """Stop or start a lab component through the lab-control ConfigMap, then wait until the lab says so."""
    patch = json.dumps({"data": {f"{component}.desired": desired}})
    lab.kubectl(
        tenant,
        "-n",
        "kube-system",
        "patch",
        "configmap",
        "tenantgpu-lab-control",
        "--type",
        "merge",
        "-p",
        patch,
    )

    def observed() -> bool:
        out = lab.kubectl(
            tenant, "-n", "kube-system", "get", "configmap", "tenantgpu-lab-control", "-o", "json"
        ).stdout
        return json.loads(out)["data"].get(f"{component}.observed") == desired

    wait_for(f"{component} {desired}", observed, timeout=20)


def test_each_worker_joins_as_kubeadm_join_does(lab: RunningLab) -> None:
    """Kamaji's bootstrap-token phase, then `kubeadm token create` and `kubeadm join`: the tenant has
    kubeadm's bindings and a signed `kube-public/cluster-info` that anyone may read; each worker's kubelet
    asks for its certificate with the bootstrap token, the csrapproving controller approves it under
    kubeadm's binding, and the kubelet then acts as `system:node:<name>`."""
    bindings = json.loads(lab.kubectl("tenant-b", "get", "clusterrolebindings", "-o", "json").stdout)["items"]
    roles = {
        b["metadata"]["name"]: (b["roleRef"]["name"], (b.get("subjects") or [{}])[0].get("name"))
        for b in bindings
    }
    group = "system:bootstrappers:kubeadm:default-node-token"
    assert roles["kubeadm:kubelet-bootstrap"] == ("system:node-bootstrapper", group)
    assert roles["kubeadm:node-autoapprove-bootstrap"] == (
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        group,
    )
    assert roles["kubeadm:node-autoapprove-certificate-rotation"][1] == "system:nodes"

    tokens = json.loads(
        lab.kubectl(
            "tenant-b", "get", "secrets", "-n", "kube-system", "--field-selector",
            "type=bootstrap.kubernetes.io/token", "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    assert len(tokens) == 1
    token_id = base64.b64decode(tokens[0]["data"]["token-id"]).decode()

    # cluster-info as `kubeadm join` reads it: without any credential, signed for the token
    kubeconfig = lab.state / "kubeconfigs" / "tenant-b.kubeconfig"
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    # (kubectl itself asks for a user name when it has no credential, so this reads as kubeadm does)
    anonymous = RawClient(kubeconfig, anonymous=True).request(
        "GET", "/api/v1/namespaces/kube-public/configmaps/cluster-info"
    )
    assert anonymous.status == 200, anonymous.body
    data = anonymous.json()["data"]
    assert set(data) == {"kubeconfig", f"jws-kubeconfig-{token_id}"}
    assert yaml.safe_load(data["kubeconfig"])["clusters"][0]["cluster"]["server"] == cluster["server"]

    requests = json.loads(lab.kubectl("tenant-b", "get", "csr", "-o", "json").stdout)["items"]
    kubelet = [
        r for r in requests if r["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
    ]
    assert len(kubelet) == 1 and kubelet[0]["metadata"]["name"].startswith("node-csr-")
    assert kubelet[0]["spec"]["username"] == f"system:bootstrap:{token_id}"
    condition = kubelet[0]["status"]["conditions"][0]
    assert (condition["type"], condition["reason"]) == ("Approved", "AutoApproved")
    assert kubelet[0]["status"]["certificate"]
    pem = (lab.state / "nodes" / "tenant-b" / "worker-b1" / "pki" / "kubelet-client-current.pem").read_bytes()
    assert b"BEGIN CERTIFICATE" in pem and b"PRIVATE KEY" in pem

    # Kamaji's upload-config phases: the official client, holding only the bootstrap token, reads the
    # kubeadm and kubelet configurations `kubeadm join` needs, and nothing else in kube-system
    secret = base64.b64decode(tokens[0]["data"]["token-secret"]).decode()
    configuration = kubernetes.client.Configuration()
    configuration.host = cluster["server"]
    ca_file = lab.state / "tenant-b-ca.crt"
    ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    configuration.ssl_ca_cert = str(ca_file)
    configuration.api_key = {"authorization": f"Bearer {token_id}.{secret}"}
    with kubernetes.client.ApiClient(configuration) as api_client:
        core = kubernetes.client.CoreV1Api(api_client)
        kubeadm = yaml.safe_load(
            core.read_namespaced_config_map("kubeadm-config", "kube-system").data["ClusterConfiguration"]
        )
        kubelet = yaml.safe_load(
            core.read_namespaced_config_map("kubelet-config", "kube-system").data["kubelet"]
        )
        with pytest.raises(kubernetes.client.ApiException) as refused:
            core.read_namespaced_config_map("hami-scheduler", "kube-system")
    assert refused.value.status == 403
    assert kubeadm["kind"] == "ClusterConfiguration" and kubeadm["clusterName"] == "tenant-b"
    assert f"https://{kubeadm['controlPlaneEndpoint']}" == cluster["server"]
    version = json.loads(lab.kubectl("tenant-b", "version", "-o", "json").stdout)["serverVersion"][
        "gitVersion"
    ]
    assert kubeadm["kubernetesVersion"] == version
    assert kubelet["kind"] == "KubeletConfiguration" and kubelet["clusterDNS"] == ["10.96.0.10"]
    assert kubelet["authentication"]["x509"]["clientCAFile"] == "/etc/kubernetes/pki/ca.crt"
    admins = json.loads(
        lab.kubectl("tenant-b", "get", "clusterrolebinding", "kubeadm:cluster-admins", "-o", "json").stdout
    )
    assert admins["roleRef"]["name"] == "cluster-admin"


def _kubelet_request(
    host: str, port: int, path: str, cert: pki.KeyPair | None, method: str = "GET"
) -> tuple[int, str]:
    """One request straight to a kubelet's HTTPS port (its serving certificate is self-signed)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        load_cert_chain(context, cert.cert_pem, cert.key_pem)
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=15)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_the_kubelet_serves_the_api_server_and_whom_the_tenants_rbac_lets_through(lab: RunningLab) -> None:
    """Kamaji's `<tcp>-api-server-kubelet-client-certificate` is what the tenant API server shows the
    kubelets for `kubectl logs` and `exec`; the kubelets, configured as Kamaji's kubelet-config says (no
    anonymous access, the tenant CA's clients, webhook authorization), refuse everyone else."""
    tcp = json.loads(lab.kubectl("management", "get", "tcp", "tenant-b", "-o", "json").stdout)
    namespace = tcp["metadata"]["namespace"]
    name = "tenant-b-api-server-kubelet-client-certificate"
    assert tcp["status"]["certificates"]["apiServerKubeletClient"]["secretName"] == name
    secret = json.loads(
        lab.kubectl("management", "get", "secret", "-n", namespace, name, "-o", "json").stdout
    )
    assert set(secret["data"]) == {"apiserver-kubelet-client.crt", "apiserver-kubelet-client.key"}
    assert secret["metadata"]["labels"] == {
        "kamaji.clastix.io/name": "tenant-b",
        "kamaji.clastix.io/component": "api-server-kubelet-client-certificate",
        "kamaji.clastix.io/certificate_lifecycle_controller": "x509",
    }
    assert secret["metadata"]["ownerReferences"][0]["uid"] == tcp["metadata"]["uid"]
    client = pki.KeyPair(
        base64.b64decode(secret["data"]["apiserver-kubelet-client.crt"]),
        base64.b64decode(secret["data"]["apiserver-kubelet-client.key"]),
    )
    assert pki.certificate_subject(client.cert_pem) == (
        "kube-apiserver-kubelet-client",
        ("kubeadm:cluster-admins",),
    )

    def ca_of(tenant: str) -> pki.KeyPair:
        data = json.loads(
            lab.kubectl("management", "get", "secret", "-n", namespace, f"{tenant}-ca", "-o", "json").stdout
        )["data"]
        return pki.KeyPair(base64.b64decode(data["ca.crt"]), base64.b64decode(data["ca.key"]))

    ca = ca_of("tenant-b")
    assert pki.is_signed_by(client.cert_pem, ca)

    agent = next(
        p
        for p in json.loads(lab.kubectl("tenant-b", "get", "pods", "-n", "kube-system", "-o", "json").stdout)[
            "items"
        ]
        if p["metadata"]["name"].startswith("konnectivity-agent-") and p["spec"]["nodeName"] == "worker-b1"
    )
    container = agent["spec"]["containers"][0]["name"]
    logs_path = f"/containerLogs/kube-system/{agent['metadata']['name']}/{container}?tailLines=1"
    exec_path = f"/exec/kube-system/{agent['metadata']['name']}/{container}?command=hostname"
    # the tenant's own users go through the API server, which shows its certificate to the kubelet
    assert lab.kubectl("tenant-b", "logs", "-n", "kube-system", agent["metadata"]["name"]).stdout
    # and so does its node proxy, through the tunnel: the kubelet's pods as one PodList
    pods = json.loads(lab.kubectl("tenant-b", "get", "--raw", "/api/v1/nodes/worker-b1/proxy/pods").stdout)
    assert pods["kind"] == "PodList" and agent["metadata"]["name"] in {
        p["metadata"]["name"] for p in pods["items"]
    }
    assert all(p["spec"]["nodeName"] == "worker-b1" for p in pods["items"])

    node = lab.node("tenant-b", "worker-b1")
    host = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    assert _kubelet_request(host, port, logs_path, None) == (401, "Unauthorized")
    status, text = _kubelet_request(host, port, logs_path, client)
    assert status == 200 and text
    assert _kubelet_request(host, port, exec_path, client, "POST")[0] == 200

    # A user of the tenant CA is asked about through a SubjectAccessReview: nothing granted, refused
    # with the kubelet's words; `get nodes/proxy` granted, logs (GET) pass and exec (POST, create) not.
    alice = pki.issue_client_certificate(ca, "alice-kubelet-e2e")
    assert _kubelet_request(host, port, logs_path, alice) == (
        403,
        "Forbidden (user=alice-kubelet-e2e, verb=get, resource=nodes, subresource=proxy)",
    )
    lab.kubectl(
        "tenant-b", "create", "clusterrole", "kubelet-e2e-logs", "--verb=get", "--resource=nodes/proxy"
    )
    lab.kubectl(
        "tenant-b", "create", "clusterrolebinding", "kubelet-e2e-logs", "--clusterrole=kubelet-e2e-logs",
        "--user=dave-kubelet-e2e",
    )  # fmt: skip
    try:
        dave = pki.issue_client_certificate(ca, "dave-kubelet-e2e")
        status, text = _kubelet_request(host, port, logs_path, dave)
        assert status == 200 and text
        assert _kubelet_request(host, port, exec_path, dave, "POST") == (
            403,
            "Forbidden (user=dave-kubelet-e2e, verb=create, resource=nodes, subresource=proxy)",
        )
    finally:
        lab.kubectl("tenant-b", "delete", "clusterrolebinding,clusterrole", "kubelet-e2e-logs")

    # tenant-a's CA signs nothing tenant-b's kubelets take: the TLS handshake itself fails
    stranger = pki.issue_client_certificate(
        ca_of("tenant-a"), "kube-apiserver-kubelet-client", ("kubeadm:cluster-admins",)
    )
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        _kubelet_request(host, port, logs_path, stranger)


def test_kamajis_certificate_rotation_renews_tenant_bs_certificates_and_its_kubeconfig(
    lab: RunningLab,
) -> None:
    """`kubectl annotate secret -l kamaji.clastix.io/certificate_lifecycle_controller
    certs.kamaji.clastix.io/rotate=""`, as Kamaji's certificate-lifecycle guide has it: each labelled
    Secret is renewed and says when; the lab's kubeconfig file follows the renewed admin certificate, and
    the tenant, its logs path to the kubelet included, works on."""
    selector = "kamaji.clastix.io/name=tenant-b,kamaji.clastix.io/certificate_lifecycle_controller"

    def labelled() -> dict[str, dict[str, Any]]:
        out = lab.kubectl("management", "get", "secrets", "-A", "-l", selector, "-o", "json").stdout
        return {s["metadata"]["name"]: s for s in json.loads(out)["items"]}

    before = labelled()
    assert sorted(before) == [
        "tenant-b-admin-kubeconfig",
        "tenant-b-api-server-certificate",
        "tenant-b-api-server-kubelet-client-certificate",
    ]
    kubeconfig = lab.state / "kubeconfigs" / "tenant-b.kubeconfig"
    old_file = kubeconfig.read_bytes()
    lab.kubectl("management", "annotate", "secret", "-A", "-l", selector, "certs.kamaji.clastix.io/rotate=")

    def renewed() -> dict[str, dict[str, Any]] | None:
        now = labelled()
        stamps = [
            s["metadata"]["annotations"].get("certs.kamaji.clastix.io/rotate", "") for s in now.values()
        ]
        done = all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", t) for t in stamps)
        return now if done and kubeconfig.read_bytes() != old_file else None

    after = wait_for("the renewed certificates and kubeconfig", renewed)
    for name, secret in after.items():
        assert secret["data"] != before[name]["data"], name
    assert (
        yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["client-certificate-data"]
        == (
            yaml.safe_load(base64.b64decode(after["tenant-b-admin-kubeconfig"]["data"]["admin.conf"]))[
                "users"
            ][0]["user"]["client-certificate-data"]
        )
    )
    # the control plane rolled onto the new certificates: kubectl (with the new kubeconfig) and the
    # API server's way to the kubelets (with its new client certificate) both work
    wait_for(
        "the tenant to answer", lambda: lab.kubectl("tenant-b", "get", "nodes", check=False).returncode == 0
    )
    agent = next(
        p["metadata"]["name"]
        for p in json.loads(lab.kubectl("tenant-b", "get", "pods", "-n", "kube-system", "-o", "json").stdout)[
            "items"
        ]
        if p["metadata"]["name"].startswith("konnectivity-agent-")
    )
    wait_for(
        "the agent's log through the kubelet",
        lambda: lab.kubectl("tenant-b", "logs", "-n", "kube-system", agent, check=False).returncode == 0,
    )


def test_hamis_components_act_as_the_charts_service_accounts_under_its_rbac(lab: RunningLab) -> None:
    """HAMi's chart gives its scheduler and device plugin service accounts and RBAC of their own; in the
    lab they use those identities, so a user's RBAC change reaches them as it would on a cluster."""
    accounts = lab.kubectl("tenant-a", "get", "serviceaccounts", "-n", "kube-system", "-o", "name").stdout
    assert {"serviceaccount/hami-scheduler", "serviceaccount/hami-device-plugin"} <= set(accounts.split())
    bindings = json.loads(lab.kubectl("tenant-a", "get", "clusterrolebindings", "-o", "json").stdout)
    roles = {b["metadata"]["name"]: b["roleRef"]["name"] for b in bindings["items"]}
    assert roles["hami-scheduler"] == "hami-scheduler"
    assert roles["hami-scheduler-kube"] == "system:kube-scheduler"
    assert roles["hami-scheduler-volume"] == "system:volume-scheduler"
    assert roles["hami-device-plugin"] == "hami-device-plugin-monitor"
    assert (
        lab.kubectl("tenant-a", "get", "rolebinding", "hami-scheduler", "-n", "kube-system").returncode == 0
    )

    def can(account: str, *check: str) -> str:
        user = f"system:serviceaccount:kube-system:{account}"
        return lab.kubectl("tenant-a", "auth", "can-i", *check, f"--as={user}", check=False).stdout.strip()

    assert can("hami-scheduler", "create", "pods", "--subresource=binding") == "yes"
    assert can("hami-scheduler", "patch", "nodes") == "yes"
    assert can("hami-scheduler", "delete", "nodes") == "no"
    assert can("hami-device-plugin", "patch", "pods") == "yes"
    assert can("hami-device-plugin", "create", "pods", "--subresource=binding") == "no"

    # Without the binding to its own ClusterRole the scheduler may not take the node lock: HAMi's Bind
    # fails with the API's refusal, and the pod waits until the binding is back.
    saved = json.loads(
        lab.kubectl("tenant-a", "get", "clusterrolebinding", "hami-scheduler", "-o", "json").stdout
    )
    lab.kubectl("tenant-a", "delete", "clusterrolebinding", "hami-scheduler")
    try:
        lab.create("tenant-a", gpu_pod("rbac-gpu", "rbac-gpu", gpumem=2000))
        reason = wait_for(
            "BindingFailed for the pod",
            lambda: "BindingFailed" in (r := pending_reason(lab, "tenant-a", "rbac-gpu")) and r,
        )
        assert (
            "failed to set node lock (node=worker-a1, retry strategy={Duration:100ms Factor:2 Jitter:0.5 "
            'Steps:5 Cap:0s}): nodes "worker-a1" is forbidden: User '
            '"system:serviceaccount:kube-system:hami-scheduler" cannot patch resource "nodes"'
        ) in reason
        pod = lab.pod("tenant-a", "rbac-gpu")
        assert phase(pod) == "Pending" and not pod["spec"].get("nodeName")
        assert NODE_LOCK not in annotations(lab.node("tenant-a", "worker-a1"))
    finally:
        for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
            saved["metadata"].pop(key, None)
        lab.kubectl("tenant-a", "apply", "-f", "-", input=json.dumps(saved))
    wait_for("the pod Running once the binding is back", all_running(lab, "tenant-a", "app=rbac-gpu", 1), 60)
    lab.delete("tenant-a", "app=rbac-gpu")


def test_without_the_tunnel_agent_gpu_pods_are_admitted_unmutated_and_the_path_comes_back(
    lab: RunningLab,
) -> None:
    configuration = json.loads(
        lab.kubectl("tenant-a", "get", "mutatingwebhookconfigurations", "-o", "json").stdout
    )
    hami = [w for c in configuration["items"] for w in c["webhooks"] if "hami" in w["name"]]
    assert hami and {w.get("failurePolicy") for w in hami} == {"Ignore"}  # as HAMi's chart installs it

    _lab_control(lab, "tenant-a", "konnectivity-agent", "stopped")
    try:
        lab.create("tenant-a", gpu_pod("no-agent", "no-agent", gpumem=1000))
        pod = lab.pod("tenant-a", "no-agent")
        # failurePolicy Ignore: admitted, but nothing of HAMi's mutation happened.
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert not [k for k in annotations(pod) if k.startswith("hami.io/")]
    finally:
        _lab_control(lab, "tenant-a", "konnectivity-agent", "running")
    lab.create("tenant-a", gpu_pod("agent-back", "agent-back", gpumem=1000))
    back = wait_for(
        "the pod after the agent came back Running",
        lambda: phase(p := lab.pod("tenant-a", "agent-back")) == "Running" and p,
    )
    assert back["spec"]["schedulerName"] == "hami-scheduler"
    assert annotations(back)["hami.io/bind-phase"] == "success"
    lab.delete("tenant-a", "app in (no-agent, agent-back)")


def test_kill_9_and_up_again_loses_no_pod_and_over_commits_no_gpu(lab: RunningLab) -> None:
    lab.create("tenant-b", *(gpu_pod(f"keep-{i:02d}", "keep", gpumem=2000) for i in range(20)))
    before = wait_for("twenty pods Running", all_running(lab, "tenant-b", "app=keep", 20), timeout=60)
    placed = {p["metadata"]["name"]: (p["spec"]["nodeName"], card_of(p)) for p in before}
    lab.kubectl("tenant-a", "create", "-f", "-", input=json.dumps(gpu_deployment("survive", 3, gpumem=8192)))
    replicas = wait_for("three replicas Running", all_running(lab, "tenant-a", "app=survive", 3), timeout=60)

    requests = lab.kubectl("tenant-b", "get", "csr", "-o", "name").stdout.split()
    pid = int((lab.state / "lab.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for("the killed lab to be gone", lambda: not _alive(pid), timeout=10)
    restarted = lab.tenantgpu("up", "-d")
    assert restarted.returncode == 0, restarted.stderr

    after = wait_for("the pods Running again", all_running(lab, "tenant-b", "app=keep", 20), timeout=60)
    assert {p["metadata"]["name"]: (p["spec"]["nodeName"], card_of(p)) for p in after} == placed
    # The kubelet kept its client certificate: no second bootstrap request.
    assert lab.kubectl("tenant-b", "get", "csr", "-o", "name").stdout.split() == requests
    # The restarted controllers found the Deployment's pods where they were: no replacement, no extra.
    survived = wait_for(
        "the replicas Running again", all_running(lab, "tenant-a", "app=survive", 3), timeout=60
    )
    assert {p["metadata"]["name"] for p in survived} == {p["metadata"]["name"] for p in replicas}
    lab.kubectl("tenant-a", "rollout", "status", "deployment/survive", "--timeout=60s")
    assert len(lab.pods("tenant-a", "app=survive")) == 3
    # The restarted kubelet adopted the running containers with the environment HAMi gave them.
    inside = wait_for(
        "exec in an adopted container",
        lambda: (
            (r := lab.kubectl("tenant-b", "exec", "keep-00", "--", "nvidia-smi", check=False)).returncode == 0
            and r
        ),
    )
    assert card_of(after[0]) in inside.stdout and "/ 2000MiB" in inside.stdout
    # The restarted scheduler rebuilt each card's usage from the pods: both L4 are full, nothing fits.
    lab.create("tenant-b", gpu_pod("one-too-many", "one-too-many", gpumem=1000))
    reason = wait_for(
        "FailedScheduling after the restart",
        lambda: "FailedScheduling" in (r := pending_reason(lab, "tenant-b", "one-too-many")) and r,
    )
    assert "CardTimeSlicingExhausted" in reason
    assert not lab.pod("tenant-b", "one-too-many")["spec"].get("nodeName")
    lab.delete("tenant-b", "app in (keep, one-too-many)")
    lab.kubectl("tenant-a", "delete", "deployment", "survive")


def test_a_containers_environment_is_built_as_the_kubelet_builds_it(lab: RunningLab) -> None:
    """The downward API, ConfigMap and Secret references, `$(NAME)` expansion and the `kubernetes`
    Service's variables, beside HAMi's; a missing ConfigMap holds the container in
    CreateContainerConfigError until it is created (kubelet_pods.go makeEnvironmentVariables)."""
    lab.kubectl(
        "tenant-b", "create", "configmap", "tuning", "--from-literal=mode=fast", "--from-literal=1bad=x"
    )
    lab.kubectl("tenant-b", "create", "secret", "generic", "token", "--from-literal=key=s3cret")
    env = [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {
            "name": "MEM_MI",
            "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
        },
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "tuning", "key": "mode"}}},
        {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "token", "key": "key"}}},
        {"name": "GREETING", "value": "$(POD) on $(NODE) in $(MODE) mode, $$(kept)"},
    ]
    pod = gpu_pod("envy", "envy", gpumem=1000)
    pod["metadata"]["labels"]["team"] = "ml"
    container = pod["spec"]["containers"][0]
    container.update(
        env=env,
        envFrom=[
            {"configMapRef": {"name": "tuning"}},
            {"prefix": "CFG_", "configMapRef": {"name": "tuning"}},
        ],
        resources={**container["resources"], "limits": {**container["resources"]["limits"], "memory": "2Gi"}},
        command=["echo", "$(GREETING)"],
    )
    lab.create("tenant-b", pod)
    running = wait_for(
        "envy Running or done", lambda: phase(lab.pod("tenant-b", "envy")) in ("Running", "Succeeded")
    )
    assert running
    seen = lab.pod("tenant-b", "envy")
    logs = lab.kubectl("tenant-b", "logs", "envy").stdout
    expected = {
        "POD=envy",
        "TEAM=ml",
        "NODE=worker-b1",
        f"IP={seen['status']['podIP']}",
        "MEM_MI=2048",
        "MODE=fast",
        "SECRET=s3cret",
        "mode=fast",
        "CFG_mode=fast",
        "CFG_1bad=x",
        "GREETING=envy on worker-b1 in fast mode, $(kept)",
    }
    assert expected <= {line.strip() for line in logs.splitlines()}
    assert "envy on worker-b1 in fast mode, $(kept)" in logs.split("$ echo", 1)[1]  # the command's own output
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=1000m" in logs
    # a 1.31 kubelet takes C-identifier-like names only: `1bad` is skipped, and said so
    assert not any(line.strip().startswith("1bad=") for line in logs.splitlines())
    assert (
        "InvalidEnvironmentVariableNames: Keys [1bad] from the EnvFrom configMap default/tuning were skipped "
        "since they are considered invalid environment variable names."
    ) in pending_reason(lab, "tenant-b", "envy")

    service = json.loads(lab.kubectl("tenant-b", "get", "service", "kubernetes", "-o", "json").stdout)
    # The Services of the pod's namespace give their variables too (enableServiceLinks, on by default).
    lab.kubectl("tenant-b", "create", "service", "clusterip", "model-api", "--tcp=8080:80")
    lab.kubectl("tenant-b", "create", "service", "clusterip", "headless", "--clusterip=None")
    api = json.loads(lab.kubectl("tenant-b", "get", "service", "model-api", "-o", "json").stdout)
    api_ip = api["spec"]["clusterIP"]
    lab.create("tenant-b", {**gpu_pod("shell", "shell", gpumem=1000)})
    unlinked = gpu_pod("unlinked", "unlinked", gpumem=1000)
    unlinked["spec"]["enableServiceLinks"] = False
    lab.create("tenant-b", unlinked)
    wait_for("shell Running", all_running(lab, "tenant-b", "app=shell", 1))
    shown = lab.kubectl("tenant-b", "exec", "shell", "--", "env").stdout.splitlines()
    assert f"KUBERNETES_SERVICE_HOST={service['spec']['clusterIP']}" in shown
    assert "KUBERNETES_SERVICE_PORT_HTTPS=443" in shown and "HOSTNAME=shell" in shown
    assert {
        f"MODEL_API_SERVICE_HOST={api_ip}",
        "MODEL_API_SERVICE_PORT=8080",
        "MODEL_API_SERVICE_PORT_8080_80=8080",
        f"MODEL_API_PORT=tcp://{api_ip}:8080",
        f"MODEL_API_PORT_8080_TCP_ADDR={api_ip}",
    } <= set(shown)
    assert not any(line.startswith("HEADLESS_") for line in shown)  # no cluster IP, no variables
    wait_for("unlinked Running", all_running(lab, "tenant-b", "app=unlinked", 1))
    bare = lab.kubectl("tenant-b", "exec", "unlinked", "--", "env").stdout.splitlines()
    assert not any(line.startswith("MODEL_API_") for line in bare)
    assert f"KUBERNETES_SERVICE_HOST={service['spec']['clusterIP']}" in bare  # always, as kube's kubelet

    waiting = gpu_pod("waiting", "waiting", gpumem=1000)
    waiting["spec"]["containers"][0]["env"] = [
        {"name": "LATER", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "value"}}}
    ]
    lab.create("tenant-b", waiting)

    def config_error() -> str:
        rows = lab.kubectl("tenant-b", "get", "pod", "waiting", "--no-headers").stdout.split()
        return rows[2] if rows[2] == "CreateContainerConfigError" else ""

    wait_for("CreateContainerConfigError", config_error)
    status = lab.pod("tenant-b", "waiting")["status"]
    assert status["containerStatuses"][0]["state"]["waiting"] == {
        "reason": "CreateContainerConfigError",
        "message": 'configmap "later" not found',
    }
    assert 'Error: configmap "later" not found' in pending_reason(lab, "tenant-b", "waiting")
    lab.kubectl("tenant-b", "create", "configmap", "later", "--from-literal=value=now")
    wait_for(
        "waiting Running once its ConfigMap exists",
        all_running(lab, "tenant-b", "app=waiting", 1),
        timeout=40,
    )
    assert "LATER=now" in lab.kubectl("tenant-b", "logs", "waiting").stdout


def test_kamajis_coredns_and_kube_proxy_addons_run_on_the_tenants_workers(lab: RunningLab) -> None:
    """A TCP edited with kubectl to ask for Kamaji's CoreDNS and kube-proxy add-ons: kubeadm's workloads
    run on the tenant's workers (kube-proxy in the node's network, with the node's address), and they
    leave when the add-ons are switched off."""

    def patch(body: str, patch_type: str = "merge") -> None:
        lab.kubectl("management", "patch", "tcp", "tenant-a", "--type", patch_type, "-p", body)

    def system(selector: str) -> list[dict[str, Any]]:
        return lab.pods_in("tenant-a", "kube-system", selector)

    def running(selector: str, count: int) -> Callable[[], list[dict[str, Any]]]:
        def probe() -> list[dict[str, Any]]:
            pods = system(selector)
            return pods if len(pods) == count and all(phase(p) == "Running" for p in pods) else []

        return probe

    patch('{"spec":{"addons":{"coreDNS":{},"kubeProxy":{}}}}')
    try:
        dns = wait_for("two CoreDNS pods Running", running("k8s-app=kube-dns", 2), timeout=60)
        assert {p["spec"]["containers"][0]["image"] for p in dns} == {
            "registry.k8s.io/coredns/coredns:v1.14.2"
        }
        nodes = json.loads(lab.kubectl("tenant-a", "get", "nodes", "-o", "json").stdout)["items"]
        proxies = wait_for(
            "a kube-proxy on every node", running("k8s-app=kube-proxy", len(nodes)), timeout=60
        )
        for pod in proxies:
            assert pod["status"]["podIP"] == pod["status"]["hostIP"]  # hostNetwork: the node's address
        service = json.loads(
            lab.kubectl("tenant-a", "get", "service", "kube-dns", "-n", "kube-system", "-o", "json").stdout
        )
        assert service["spec"]["clusterIP"] == "10.96.0.10"
        status = json.loads(lab.kubectl("management", "get", "tcp", "tenant-a", "-o", "json").stdout)[
            "status"
        ]
        assert status["addons"]["coreDNS"]["enabled"] and status["addons"]["kubeProxy"]["enabled"]
    finally:
        patch(
            '[{"op":"remove","path":"/spec/addons/coreDNS"},{"op":"remove","path":"/spec/addons/kubeProxy"}]',
            "json",
        )
    wait_for(
        "the add-ons' pods gone",
        lambda: not system("k8s-app=kube-dns") and not system("k8s-app=kube-proxy"),
        timeout=60,
    )
    assert (
        lab.kubectl("tenant-a", "get", "service", "kube-dns", "-n", "kube-system", check=False).returncode
        != 0
    )


def _metric(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample `name` whose labels include `labels`, from a Prometheus text page."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line[len(name) : line.rindex("}") + 1]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_kubectl_attach_follows_hamis_scheduler_as_it_binds_a_pod(lab: RunningLab) -> None:
    """`kubectl attach` to the scheduler extender's container shows its klog lines as HAMi writes them,
    through the tunnel from the kubelet: a pod created after attaching appears bound."""
    listed = lab.kubectl(
        "tenant-b", "-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/component=hami-scheduler",
        "-o", "jsonpath={.items[0].metadata.name}",
    ).stdout  # fmt: skip
    command = [
        "kubectl",
        "--kubeconfig",
        str(lab.state / "kubeconfigs" / "tenant-b.kubeconfig"),
        "-n",
        "kube-system",
        "attach",
        listed,
        "-c",
        "vgpu-scheduler-extender",
    ]
    env = {**os.environ, "HOME": str(lab.home)}
    attached = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(1.0)  # attached before the pod exists
        lab.create("tenant-b", gpu_pod("attached-0", "attached", gpumem=1000, gpucores=5))
        wait_for("the pod Running", all_running(lab, "tenant-b", "app=attached", 1))
        time.sleep(0.5)
    finally:
        attached.terminate()
        stdout, _ = attached.communicate(timeout=15)
        lab.kubectl("tenant-b", "delete", "pod", "attached-0", "--wait=false")
    bound = [
        line for line in stdout.splitlines() if 'pod="attached-0"' in line and "Successfully bound" in line
    ]
    assert len(bound) == 1, stdout[-2000:]
    assert bound[0].startswith("I") and 'node="worker-b1"' in bound[0]  # klog's header and HAMi's words


def _port_forward(
    lab: RunningLab, tenant: str, *args: str
) -> contextlib.AbstractContextManager[tuple[subprocess.Popen[str], int]]:
    """`kubectl port-forward ARGS` against the tenant, running."""
    kubectl = ["kubectl", "--kubeconfig", str(lab.state / "kubeconfigs" / f"{tenant}.kubeconfig")]
    return port_forwarding(kubectl, {**os.environ, "HOME": str(lab.home)}, *args)


def test_hamis_metrics_are_read_through_the_api_servers_service_and_pod_proxy(lab: RunningLab) -> None:
    """The chart's Services (`hami-scheduler` `monitor`, `hami-device-plugin-monitor`) reach the scheduler's
    and the vGPU monitor's metrics the way a cluster's users read them without a NodePort: `services/…/proxy`
    through the tunnel to the pod's port."""
    lab.create("tenant-b", gpu_pod("metered-0", "metered", gpumem=3000, gpucores=25))
    pod = wait_for("a metered pod Running", all_running(lab, "tenant-b", "app=metered", 1))[0]
    card = card_of(pod)
    try:
        scheduler = lab.kubectl(
            "tenant-b",
            "get",
            "--raw",
            "/api/v1/namespaces/kube-system/services/hami-scheduler:monitor/proxy/metrics",
        ).stdout
        assert (
            _metric(
                scheduler,
                "hami_vgpu_memory_allocated_bytes",
                namespace="default",
                pod="metered-0",
                zone="vGPU",
            )
            == 3000 * 1024 * 1024
        )
        # the card's sharers: every pod HAMi placed on it that has not ended (other tests' pods too)
        everyone = json.loads(lab.kubectl("tenant-b", "get", "pods", "-A", "-o", "json").stdout)["items"]
        sharers = [
            p
            for p in everyone
            if ALLOCATED in annotations(p) and card_of(p) == card and phase(p) in ("Pending", "Running")
        ]
        assert _metric(scheduler, "hami_gpu_shared_count", device_uuid=card, node="worker-b1") == len(sharers)
        # a service port by number is the same port
        by_number = lab.kubectl(
            "tenant-b",
            "get",
            "--raw",
            "/api/v1/namespaces/kube-system/services/hami-scheduler:31993/proxy/metrics",
        ).stdout
        assert "hami_gpu_memory_limit_bytes" in by_number

        # `kubectl port-forward` to the Service's monitor port reaches the same page (to the scheduler
        # pod's 9395, through the tunnel and the kubelet)
        service = ("-n", "kube-system", "svc/hami-scheduler", ":31993")
        with (
            _port_forward(lab, "tenant-b", *service) as (_, port),
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15) as page,
        ):
            forwarded = page.read().decode()
        assert (
            _metric(
                forwarded,
                "hami_vgpu_memory_allocated_bytes",
                namespace="default",
                pod="metered-0",
                zone="vGPU",
            )
            == 3000 * 1024 * 1024
        )

        # the vGPU monitor of worker-b1's device plugin: the container's limit from its shared region
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=str(lab.state / "kubeconfigs" / "tenant-b.kubeconfig"),
            client_configuration=configuration,
        )
        with kubernetes.client.ApiClient(configuration) as api_client:
            core = kubernetes.client.CoreV1Api(api_client)
            monitor = core.connect_get_namespaced_service_proxy_with_path(
                "hami-device-plugin-monitor:monitorport", "kube-system", "metrics"
            )
        labels = {"namespace": "default", "pod": "metered-0", "container": "cuda", "device_uuid": card}
        assert (
            _metric(monitor, "hami_vgpu_memory_limit_bytes", vdevice_index="0", **labels)
            == 3000 * 1024 * 1024
        )
        assert (
            _metric(monitor, "hami_host_gpu_memory_used_bytes", device_uuid=card, node="worker-b1")
            is not None
        )

        # the leader's pod is the Service's: HAMi's scheduler labels its own pod
        service = json.loads(
            lab.kubectl(
                "tenant-b", "get", "service", "-n", "kube-system", "hami-scheduler", "-o", "json"
            ).stdout
        )
        assert service["spec"]["selector"]["hami.io/scheduler-role"] == "leader"
        assert [p["name"] for p in service["spec"]["ports"]] == ["http", "monitor"]
        leaders = lab.pods_in("tenant-b", "kube-system", "hami.io/scheduler-role=leader")
        assert [p["metadata"]["name"].startswith("hami-scheduler-") for p in leaders] == [True]

        # the same through the device plugin pod's port 9394
        plugin = lab.pods_in("tenant-b", "kube-system", "app.kubernetes.io/component=hami-device-plugin")[0]
        name = plugin["metadata"]["name"]
        direct = lab.kubectl(
            "tenant-b", "get", "--raw", f"/api/v1/namespaces/kube-system/pods/{name}:9394/proxy/metrics"
        ).stdout
        assert (
            _metric(direct, "hami_vgpu_memory_limit_bytes", vdevice_index="0", **labels) == 3000 * 1024 * 1024
        )
        # no other port of the simulated pod network answers: the dial's refusal, as kube reports it
        refused = lab.kubectl(
            "tenant-b", "get", "--raw", "/api/v1/namespaces/default/pods/metered-0/proxy/", check=False
        )
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"Error from server: dial tcp {pod['status']['podIP']}:80: connect: connection refused"
        )
    finally:
        lab.delete("tenant-b", "app=metered")

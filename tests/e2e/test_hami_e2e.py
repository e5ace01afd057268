"""End to end: an API server, an L4 and an A100 worker, HAMi's scheduler and webhook; real kubectl."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pytest
from apiserver_harness import BackgroundLoop, Kubectl, RunningAPIServer, start_server

from tenantgpu.apiserver import errors as api_errors
from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import GPUSpec
from tenantgpu.hami.install import install_hami
from tenantgpu.hami.scheduler import HamiScheduler
from tenantgpu.hami.webhook import HamiWebhook
from tenantgpu.kubeclient import ApiError, KubeClient
from tenantgpu.node.kubeletclient import KubeletClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow


@dataclass
class GpuLab:
    api: RunningAPIServer
    loop: BackgroundLoop
    client: KubeClient
    scheduler: HamiScheduler
    webhook: HamiWebhook
    workers: list[Worker]


@pytest.fixture(scope="module")
def apiserver(
    background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningAPIServer]:
    """This module's API server reads pod logs from the simulated kubelets."""
    source = KubeletClient(error=api_errors.bad_request)
    running = start_server(background_loop, tmp_path_factory.mktemp("hami-e2e"), log_source=source)
    running.extra["log_source"] = source
    yield running
    background_loop.run(running.server.stop())
    running.datastore.close()


@pytest.fixture(scope="module")
def lab(apiserver: RunningAPIServer, background_loop: BackgroundLoop) -> Iterator[GpuLab]:
    cfg = SharingConfig()

    async def up() -> GpuLab:
        client = KubeClient.from_kubeconfig(apiserver.kubeconfig)

        async def node_lookup(name: str) -> dict | None:
            try:
                return await client.get("nodes", name)
            except ApiError:
                return None

        apiserver.extra["log_source"].node_lookup = node_lookup
        workers = [
            Worker(client, "gpu-l4", [GPUSpec("NVIDIA L4", 23034, 2)], cfg),
            Worker(client, "gpu-a100", [GPUSpec("NVIDIA A100-SXM4-80GB", 81920, 1)], cfg),
        ]
        for worker in workers:
            await worker.start()
        scheduler = HamiScheduler(client, cfg, metrics_port=0)
        await scheduler.start()
        webhook = HamiWebhook(cfg, quotas=lambda: scheduler.state.quotas)
        await webhook.start()
        await install_hami(
            client,
            webhook.ca_bundle,
            webhook_url=webhook.url,
            sharing=cfg,
            cert=webhook.cert,
        )
        return GpuLab(apiserver, background_loop, client, scheduler, webhook, workers)

    running = background_loop.run(up(), timeout=60)
    yield running

    async def down() -> None:
        await running.webhook.stop()
        await running.scheduler.stop()
        for worker in running.workers:
            await worker.stop()
        await running.client.close()

    background_loop.run(down(), timeout=60)


def _pod_yaml(
    name: str,
    *,
    limits: dict[str, str],
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"suite": "hami-e2e", **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
                    "env": [{"name": "APP", "value": "demo"}],
                    "resources": {"limits": limits},
                }
            ],
        },
    }
    if node:
        pod["spec"]["nodeName"] = node
    return json.dumps(pod)


def _get(kubectl: Kubectl, *args: str) -> dict:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def _wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _phase(kubectl: Kubectl, name: str) -> str:
    return _get(kubectl, "pod", name).get("status", {}).get("phase", "")


def _cleanup(kubectl: Kubectl, selector: str) -> None:
    kubectl("delete", "pods", "-l", selector, "--wait=true", "--timeout=60s")


def _events(kubectl: Kubectl, name: str) -> list[dict]:
    return _get(kubectl, "events", "--field-selector", f"involvedObject.name={name}")["items"]


def _lock_free(kubectl: Kubectl, node: str) -> bool:
    return ann.NODE_LOCK not in (_get(kubectl, "node", node)["metadata"].get("annotations") or {})


def test_worker_registers_node_with_hami_resources(lab: GpuLab, kubectl: Kubectl) -> None:
    node = _get(kubectl, "node", "gpu-l4")
    alloc = node["status"]["allocatable"]
    assert alloc["nvidia.com/gpu"] == "20"
    assert alloc["nvidia.com/gpumem"] == "46068" and alloc["nvidia.com/gpucores"] == "200"
    register = json.loads(node["metadata"]["annotations"][ann.NODE_REGISTER])
    assert [d["devmem"] for d in register] == [23034, 23034]
    _wait_for(
        lambda: (
            _get(kubectl, "node", "gpu-l4")["metadata"]["annotations"]
            .get(ann.NODE_HANDSHAKE, "")
            .startswith("Requesting_")
        ),
        what="the scheduler's handshake",
    )
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"
    lease = _get(kubectl, "lease", "gpu-l4", "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == "gpu-l4"
    # the chart's workloads (this bare API server runs no controllers to make their pods)
    deployment = _get(kubectl, "deployment", "hami-scheduler", "-n", "kube-system")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "hami-scheduler"
    daemon_set = _get(kubectl, "daemonset", "hami-device-plugin", "-n", "kube-system")
    assert daemon_set["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "on"}
    mwc = _get(kubectl, "mutatingwebhookconfiguration", "hami-webhook")
    assert mwc["webhooks"][0]["name"] == "vgpu.hami.io" and mwc["webhooks"][0]["failurePolicy"] == "Ignore"


_CHART_RESOURCES = ("deployments", "daemonsets", "services", "configmaps", "secrets",
                    "mutatingwebhookconfigurations")  # fmt: skip


def _chart_writes(kubectl: Kubectl) -> int:
    """Writes the API server counted (`apiserver_request_total`) on the kinds HAMi's chart is made of."""
    total = 0
    for line in kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        written = any(f'verb="{verb}"' in line for verb in ("create", "update", "patch", "apply"))
        if written and any(f'resource="{resource}"' in line for resource in _CHART_RESOURCES):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_installing_hami_again_leaves_an_unchanged_install_alone(lab: GpuLab, kubectl: Kubectl) -> None:
    """A lab that starts again installs HAMi again; like `helm upgrade` with nothing to change, that
    writes nothing (a tenant whose writes are limited would refuse even a write that changes nothing),
    and it writes back what was changed by hand."""

    async def again() -> None:
        await install_hami(
            lab.client,
            lab.webhook.ca_bundle,
            webhook_url=lab.webhook.url,
            sharing=SharingConfig(),
            cert=lab.webhook.cert,
        )

    before = _chart_writes(kubectl)
    assert before >= 6  # the fixture's install
    lab.loop.run(again())
    assert _chart_writes(kubectl) == before
    kubectl("patch", "mutatingwebhookconfiguration", "hami-webhook", "--type=json",
            "-p", '[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}]')  # fmt: skip
    lab.loop.run(again())
    mwc = _get(kubectl, "mutatingwebhookconfiguration", "hami-webhook")
    assert mwc["webhooks"][0]["failurePolicy"] == "Ignore"
    assert _chart_writes(kubectl) == before + 2  # the patch by hand, and the install's update


def test_fractional_pod_runs_with_hami_annotations_env_and_logs(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=_pod_yaml(
            "frac",
            limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"},
            labels={"t": "frac"},
            annotations={"nvidia.com/use-gputype": "L4"},
        ),
    )
    _wait_for(lambda: _phase(kubectl, "frac") == "Running", what="frac Running")
    pod = _get(kubectl, "pod", "frac")
    a = pod["metadata"]["annotations"]
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    assert pod["spec"]["nodeName"] == "gpu-l4" == a[ann.VGPU_NODE]
    assert a[ann.DEVICES_ALLOCATED].endswith(",NVIDIA,3000,30:;")
    assert "NVIDIA" not in a[ann.DEVICES_TO_ALLOCATE]
    assert a[ann.BIND_PHASE] == "success"
    assert pod["status"]["podIP"] and pod["status"]["containerStatuses"][0]["ready"] is True
    logs = kubectl("logs", "frac").stdout
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=3000m" in logs and "CUDA_DEVICE_SM_LIMIT=30" in logs
    assert "0MiB / 3000MiB" in logs  # nvidia-smi inside sees the limit as total
    assert kubectl("logs", "frac", "--tail=1").stdout == "running until deleted\n"
    stamped = kubectl("logs", "frac", "--tail=1", "--timestamps").stdout
    assert stamped.endswith(" running until deleted\n") and stamped[:4].isdigit()
    _wait_for(
        lambda: {"FilteringSucceed", "BindingSucceed"} <= {e["reason"] for e in _events(kubectl, "frac")},
        what="HAMi's scheduling events",
    )
    assert _lock_free(kubectl, "gpu-l4")
    _cleanup(kubectl, "t=frac")


def test_ten_8gib_pods_share_one_a100(lab: GpuLab, kubectl: Kubectl) -> None:
    for i in range(10):
        kubectl(
            "create",
            "--validate=false",
            "-f",
            "-",
            input=_pod_yaml(
                f"a100-{i}",
                limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "10"},
                labels={"t": "a100"},
                annotations={"nvidia.com/use-gputype": "A100"},
            ),
        )
    _wait_for(
        lambda: all(
            p["status"].get("phase") == "Running" for p in _get(kubectl, "pods", "-l", "t=a100")["items"]
        ),
        what="ten A100 pods Running",
    )
    pods = _get(kubectl, "pods", "-l", "t=a100")["items"]
    assert len(pods) == 10
    uuids = {p["metadata"]["annotations"][ann.DEVICES_ALLOCATED].split(",")[0] for p in pods}
    assert len(uuids) == 1 and all(p["spec"]["nodeName"] == "gpu-a100" for p in pods)
    usage = lab.loop.run(_usage(lab, "gpu-a100"))
    assert usage == (10, 81920, 100)
    # the card is full: an eleventh slice stays Pending until one is freed
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=_pod_yaml(
            "a100-extra",
            limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192"},
            labels={"t": "a100-extra"},
            annotations={"nvidia.com/use-gputype": "A100"},
        ),
    )
    _wait_for(
        lambda: any(e["reason"] == "FilteringFailed" for e in _events(kubectl, "a100-extra")), what="event"
    )
    assert _phase(kubectl, "a100-extra") == "Pending"
    kubectl("delete", "pod", "a100-0", "--wait=true")
    _wait_for(lambda: _phase(kubectl, "a100-extra") == "Running", what="freed slice reused")
    _cleanup(kubectl, "t in (a100, a100-extra)")
    _wait_for(lambda: lab.loop.run(_usage(lab, "gpu-a100")) == (0, 0, 0), what="A100 free again")


async def _usage(lab: GpuLab, node: str) -> tuple[int, int, int]:
    views = lab.scheduler.state.node_usage(node)
    return sum(v.used for v in views), sum(v.usedmem for v in views), sum(v.usedcores for v in views)


def test_oversize_pod_stays_pending_with_reason(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=_pod_yaml(
            "huge",
            limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "90000"},
            labels={"t": "huge"},
        ),
    )
    _wait_for(lambda: any(e["reason"] == "FilteringFailed" for e in _events(kubectl, "huge")), what="event")
    messages = " ".join(e["message"] for e in _events(kubectl, "huge"))
    assert "CardInsufficientMemory" in messages
    pod = _get(kubectl, "pod", "huge")
    assert pod["status"]["phase"] == "Pending"
    scheduled = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "False" and scheduled[0]["reason"] == "Unschedulable"
    _cleanup(kubectl, "t=huge")


def test_twenty_pods_at_once_fill_two_l4_without_leaving_a_lock(lab: GpuLab, kubectl: Kubectl) -> None:
    docs = [
        json.loads(
            _pod_yaml(
                f"burst-{i}",
                limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"},
                labels={"t": "burst"},
                annotations={"nvidia.com/use-gputype": "L4"},
            )
        )
        for i in range(20)
    ]
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )
    _wait_for(
        lambda: (
            sum(
                p["status"].get("phase") == "Running" for p in _get(kubectl, "pods", "-l", "t=burst")["items"]
            )
            == 20
        ),
        timeout=60,
        what="20 burst pods Running",
    )
    pods = _get(kubectl, "pods", "-l", "t=burst")["items"]
    assert all(p["metadata"]["annotations"][ann.BIND_PHASE] == "success" for p in pods)
    assert _lock_free(kubectl, "gpu-l4")
    assert lab.loop.run(_usage(lab, "gpu-l4"))[0] == 20
    _cleanup(kubectl, "t=burst")


def test_gpu_pod_that_bypassed_hami_fails_admission(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=_pod_yaml(
            "rogue",
            limits={"nvidia.com/gpu": "1"},
            labels={"t": "rogue", "hami.io/webhook": "ignore"},
            node="gpu-l4",
        ),
    )
    _wait_for(lambda: _phase(kubectl, "rogue") == "Failed", what="rogue Failed")
    status = _get(kubectl, "pod", "rogue")["status"]
    assert status["reason"] == "UnexpectedAdmissionError"
    assert status["message"].startswith("Pod was rejected: Allocate failed due to rpc error: ")
    assert "no binding pod found on node gpu-l4" in status["message"]
    # as kube's rejectPod: a Warning event from the node's kubelet, in `kubectl describe pod`'s Events
    _wait_for(
        lambda: any(e["reason"] == "UnexpectedAdmissionError" for e in _events(kubectl, "rogue")),
        what="the kubelet's UnexpectedAdmissionError event",
    )
    event = next(e for e in _events(kubectl, "rogue") if e["reason"] == "UnexpectedAdmissionError")
    assert event["type"] == "Warning"
    assert event["source"] == {"component": "kubelet", "host": "gpu-l4"}
    assert event["message"] == (
        "Allocate failed due to rpc error: code = Unknown desc = no binding pod found on node gpu-l4, "
        "which is unexpected"
    )
    described = kubectl("describe", "pod", "rogue").stdout
    assert "UnexpectedAdmissionError" in described.split("Events:")[1]
    _cleanup(kubectl, "t=rogue")


def test_plain_pod_runs_and_run_for_succeeds(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=_pod_yaml(
            "plain",
            limits={"cpu": "100m"},
            labels={"t": "plain"},
            annotations={"tenantgpu.io/run-for": "1s"},
            node="gpu-l4",
        ),
    )
    _wait_for(lambda: _phase(kubectl, "plain") == "Succeeded", what="plain Succeeded")
    _cleanup(kubectl, "t=plain")


def test_memory_above_the_limit_is_a_cuda_oom(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl(
        "create",
        "--validate=false",
        "-f",
        "-",
        input=_pod_yaml(
            "oom",
            limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"},
            labels={"t": "oom"},
            annotations={"tenantgpu.io/gpu-memory-used": "2000", "nvidia.com/use-gputype": "L4"},
        ),
    )
    _wait_for(lambda: _phase(kubectl, "oom") == "Failed", what="oom Failed")
    status = _get(kubectl, "pod", "oom")["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    assert "CUDA_ERROR_OUT_OF_MEMORY" in kubectl("logs", "oom").stdout
    _cleanup(kubectl, "t=oom")


def test_scheduler_metrics(lab: GpuLab) -> None:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    body = urllib.request.urlopen(f"http://127.0.0.1:{lab.scheduler.metrics_port}/metrics").read().decode()
    samples = {
        (s.name, s.labels.get("node"), s.labels.get("device_index")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("hami_gpu_memory_limit_bytes", "gpu-a100", "0")] == 81920 * 1024 * 1024
    assert samples[("hami_gpu_memory_limit_bytes", "gpu-l4", "1")] == 23034 * 1024 * 1024
    assert samples[("hami_gpu_core_limit_ratio", "gpu-l4", "0")] == 100
    assert ("hami_gpu_shared_count", "gpu-a100", "0") in samples


def test_node_run_cli_joins_and_leaves(lab: GpuLab, kubectl: Kubectl) -> None:
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu", "node", "run", "--kubeconfig", str(lab.api.kubeconfig),
         "--name", "cli-node", "--gpu", "Tesla T4:15360:1", "--label", "pool=cli"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(
            lambda: kubectl("get", "node", "cli-node", check=False).returncode == 0,
            timeout=30,
            what="cli-node",
        )
        node = _get(kubectl, "node", "cli-node")
        assert node["metadata"]["labels"]["pool"] == "cli"
        register = json.loads(node["metadata"]["annotations"][ann.NODE_REGISTER])
        assert register[0]["type"] == "NVIDIA-Tesla T4" and register[0]["devmem"] == 15360
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "10"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "node cli-node ready: 1 GPU(s)" in out
    kubectl("delete", "node", "cli-node")


def test_node_run_as_its_node_with_the_device_plugins_own_credentials(lab: GpuLab, kubectl: Kubectl) -> None:
    """`tenantgpu node run` with a node's own credentials (`system:node:<name>`, under the Node
    authorizer) and the device plugin's service account (`--device-plugin-kubeconfig`): Allocate's pod
    annotations are the plugin's to write, so a GPU pod HAMi places there runs. Without the option the
    node's credentials may not patch the pod: Allocate fails as HAMi's does and the kubelet rejects the
    pod with UnexpectedAdmissionError."""
    import signal
    import subprocess
    import sys

    from tenantgpu.hami.install import install_identities

    lab.loop.run(install_identities(lab.client))
    server = lab.api.server
    node_kc = lab.api.write_kubeconfig(
        "cli-node2.kubeconfig", server.user_kubeconfig("system:node:cli-node2", ["system:nodes"])
    )
    plugin_kc = lab.api.write_kubeconfig(
        "device-plugin.kubeconfig", server.service_account_kubeconfig("kube-system", "hami-device-plugin")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu", "node", "run", "--kubeconfig", str(node_kc),
         "--device-plugin-kubeconfig", str(plugin_kc), "--name", "cli-node2", "--gpu", "Tesla T4:15360:1",
         "--label", "pool=cli2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(
            lambda: (
                "hami.io/node-nvidia-register"
                in (_get(kubectl, "node", "cli-node2")["metadata"].get("annotations") or {})
                if kubectl("get", "node", "cli-node2", check=False).returncode == 0
                else False
            ),
            timeout=30,
            what="cli-node2 registered",
        )
        pod = json.loads(_pod_yaml("on-cli2", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}))
        pod["spec"]["nodeSelector"] = {"pool": "cli2"}
        kubectl("create", "--validate=false", "-f", "-", input=json.dumps(pod))
        _wait_for(
            lambda: _get(kubectl, "pod", "on-cli2")["status"].get("phase") == "Running",
            timeout=30,
            what="the GPU pod Running on cli-node2",
        )
        placed = _get(kubectl, "pod", "on-cli2")
        assert placed["spec"]["nodeName"] == "cli-node2"
        assert placed["metadata"]["annotations"][ann.BIND_PHASE] == "success"
        kubectl("delete", "pod", "on-cli2", "--wait=true", "--timeout=30s")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "node cli-node2 ready: 1 GPU(s)" in out
    assert "forbidden" not in err.lower()

    # The same worker without the plugin's credentials: the node's may not write Allocate's annotations.
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantgpu", "node", "run", "--kubeconfig", str(node_kc), "--name",
         "cli-node2", "--gpu", "Tesla T4:15360:1", "--label", "pool=cli2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        pod["metadata"]["name"] = "refused-on-cli2"
        kubectl("create", "--validate=false", "-f", "-", input=json.dumps(pod))
        _wait_for(
            lambda: _get(kubectl, "pod", "refused-on-cli2")["status"].get("phase") == "Failed",
            timeout=30,
            what="the GPU pod rejected on cli-node2",
        )
        status = _get(kubectl, "pod", "refused-on-cli2")["status"]
        assert status["reason"] == "UnexpectedAdmissionError"
        assert status["message"] == (
            "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = pods "
            '"refused-on-cli2" is forbidden: User "system:node:cli-node2" cannot patch resource "pods" in '
            'API group "" in the namespace "default", which is unexpected'
        )
        # the lock went with it, so the next pod may be placed
        assert "hami.io/mutex.lock" not in (
            _get(kubectl, "node", "cli-node2")["metadata"].get("annotations") or {}
        )
        kubectl("delete", "pod", "refused-on-cli2")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    kubectl("delete", "node", "cli-node2")


def test_webhook_denies_pods_over_the_namespace_quota(lab: GpuLab, kubectl: Kubectl) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quota-team"}}
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(namespace))
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "quota-team"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "4000"}},
    }
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(quota))
    _wait_for(lambda: lab.scheduler.state.quotas.limited("quota-team"), what="quota seen by the scheduler")
    first = json.loads(
        _pod_yaml("q1", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, labels={"t": "quota"})
    )
    kubectl("create", "--validate=false", "-n", "quota-team", "-f", "-", input=json.dumps(first))
    _wait_for(
        lambda: _get(kubectl, "pod", "q1", "-n", "quota-team")["status"].get("phase") == "Running",
        what="q1 Running",
    )
    second = json.loads(
        _pod_yaml("q2", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, labels={"t": "quota"})
    )
    denied = kubectl(
        "create", "--validate=false", "-n", "quota-team", "-f", "-", input=json.dumps(second), check=False
    )
    assert denied.returncode != 0
    assert "exceeding resource quota" in denied.stderr
    import urllib.request

    metrics = urllib.request.urlopen(f"http://127.0.0.1:{lab.scheduler.metrics_port}/metrics").read().decode()
    assert (
        'hami_resource_quota_used{limit="4000",namespace="quota-team",quota_name="nvidia.com/gpumem"'
        in metrics
    )
    kubectl("delete", "pods", "-n", "quota-team", "-l", "t=quota", "--wait=true")


def test_scheduler_restart_rebuilds_usage_from_the_api(lab: GpuLab, kubectl: Kubectl) -> None:
    def create(name: str) -> None:
        kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
            name, limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "16384"},
            labels={"t": "restart"}, annotations={"nvidia.com/use-gputype": "A100"},
        ))  # fmt: skip

    for i in range(3):
        create(f"before-{i}")
    _wait_for(
        lambda: all(
            p["status"].get("phase") == "Running" for p in _get(kubectl, "pods", "-l", "t=restart")["items"]
        ),
        what="first pods Running",
    )
    # The lab stops and starts the same instance (`validate` switches it off for a moment).
    lab.loop.run(lab.scheduler.stop())
    for i in range(3):
        create(f"after-{i}")  # 3 × 16 GiB + 3 × 16 GiB = 96 GiB > 80 GiB: exactly two more fit
    lab.loop.run(lab.scheduler.start())
    _wait_for(
        lambda: (
            sum(
                p["status"].get("phase") == "Running"
                for p in _get(kubectl, "pods", "-l", "t=restart")["items"]
            )
            == 5
        ),
        what="two more Running after the restart",
    )
    time.sleep(0.5)
    phases = sorted(p["status"].get("phase") for p in _get(kubectl, "pods", "-l", "t=restart")["items"])
    assert phases == ["Pending"] + ["Running"] * 5
    assert lab.loop.run(_usage(lab, "gpu-a100"))[1] == 5 * 16384
    _cleanup(kubectl, "t=restart")


def test_lock_of_a_vanished_pod_is_taken_over(lab: GpuLab, kubectl: Kubectl) -> None:
    stale = "2026-01-01T00:00:00Z,ghosts,gone-pod"  # expired and its holder is gone
    fresh_ghost = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + ",ghosts,gone-pod"
    for value in (stale, fresh_ghost):
        kubectl("annotate", "node", "gpu-a100", f"{ann.NODE_LOCK}={value}", "--overwrite")
        kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
            "taker", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"},
            labels={"t": "taker"}, annotations={"nvidia.com/use-gputype": "A100"},
        ))  # fmt: skip
        _wait_for(lambda: _phase(kubectl, "taker") == "Running", what="taker Running")
        assert _lock_free(kubectl, "gpu-a100")
        _cleanup(kubectl, "t=taker")


def test_pod_with_gpus_only_in_init_containers_binds_without_the_node_lock(
    lab: GpuLab, kubectl: Kubectl
) -> None:
    """HAMi v2.10 nvidia LockNode checks app containers only: a pod whose only GPU container is an init
    container binds past a live lock of another, existing pod and leaves that lock alone."""
    kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
        "holder", limits={"cpu": "100m"}, labels={"t": "initonly"},
    ))  # fmt: skip
    held = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + ",default,holder"
    gpu_nodes = ("gpu-a100", "gpu-l4")
    for name in gpu_nodes:
        kubectl("annotate", "node", name, f"{ann.NODE_LOCK}={held}", "--overwrite")
    pod = json.loads(_pod_yaml("initonly", limits={"cpu": "100m"}, labels={"t": "initonly"}))
    pod["spec"]["initContainers"] = [
        {
            "name": "warm",
            "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
            "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}},
        }
    ]
    try:
        kubectl("create", "--validate=false", "-f", "-", input=json.dumps(pod))
        _wait_for(
            lambda: _get(kubectl, "pod", "initonly")["spec"].get("nodeName") in gpu_nodes,
            what="initonly bound",
        )
        got = _get(kubectl, "pod", "initonly")
        # model-typed cards: the annotation carries the init segment only
        assert got["metadata"]["annotations"][ann.DEVICES_ALLOCATED].endswith(",NVIDIA,1000,0:;")
        annotations = _get(kubectl, "node", got["spec"]["nodeName"])["metadata"].get("annotations") or {}
        assert annotations.get(ann.NODE_LOCK) == held
    finally:
        for name in gpu_nodes:
            kubectl("annotate", "node", name, f"{ann.NODE_LOCK}-")
        _cleanup(kubectl, "t=initonly")


def test_worker_restart_adopts_running_pods(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
        "survivor", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}, labels={"t": "survivor"},
        annotations={"nvidia.com/use-gputype": "A100", "tenantgpu.io/run-for": "4s"},
    ))  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "survivor") == "Running", what="survivor Running")
    worker = next(w for w in lab.workers if w.name == "gpu-a100")
    lab.loop.run(worker.stop())
    replacement = Worker(lab.client, "gpu-a100", worker.gpus, worker.sharing)
    lab.loop.run(replacement.start())
    lab.workers[lab.workers.index(worker)] = replacement
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=2000m" in kubectl("logs", "survivor").stdout
    _wait_for(lambda: _phase(kubectl, "survivor") == "Succeeded", timeout=15, what="survivor Succeeded")
    _cleanup(kubectl, "t=survivor")


def test_official_python_client_reads_worker_objects(lab: GpuLab) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    api_client = k8s_config.new_client_from_config(str(lab.api.kubeconfig))
    try:
        core = k8s.CoreV1Api(api_client)
        node = core.read_node("gpu-l4")
        assert node.status.allocatable["nvidia.com/gpu"] == "20"
        assert node.status.node_info.kubelet_version.startswith("v1.")
        assert node.status.daemon_endpoints.kubelet_endpoint.port == lab.workers[0].kubelet_port
        lease = k8s.CoordinationV1Api(api_client).read_namespaced_lease("gpu-l4", "kube-node-lease")
        assert lease.spec.lease_duration_seconds == 40 and lease.spec.renew_time is not None
        system = core.list_namespaced_pod("kube-system").items
        assert all(p.status.phase == "Running" for p in system)
        assert all(p.status.container_statuses[0].state.running.started_at for p in system)
    finally:
        api_client.close()


def test_allocate_mismatch_fails_the_pod_and_releases_the_lock(lab: GpuLab, kubectl: Kubectl) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kubectl("annotate", "node", "gpu-l4", f"{ann.NODE_LOCK}={now},default,mismatch", "--overwrite")
    kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
        "mismatch", limits={"nvidia.com/gpu": "2"}, labels={"t": "mismatch", "hami.io/webhook": "ignore"},
        node="gpu-l4",
        annotations={
            ann.VGPU_NODE: "gpu-l4",
            ann.BIND_TIME: str(int(time.time())),
            ann.BIND_PHASE: "allocating",
            ann.DEVICES_TO_ALLOCATE: "GPU-only-one,NVIDIA,1000,0:;",
            ann.DEVICES_ALLOCATED: "GPU-only-one,NVIDIA,1000,0:;",
        },
    ))  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "mismatch") == "Failed", what="mismatch Failed")
    pod = _get(kubectl, "pod", "mismatch")
    assert pod["status"]["reason"] == "UnexpectedAdmissionError"
    assert "device number not matched" in pod["status"]["message"]
    _wait_for(
        lambda: any(
            e["reason"] == "UnexpectedAdmissionError" and "device number not matched" in e["message"]
            for e in _events(kubectl, "mismatch")
        ),
        what="the kubelet's Warning event",
    )
    assert pod["metadata"]["annotations"][ann.BIND_PHASE] == "failed"
    assert _lock_free(kubectl, "gpu-l4")
    _cleanup(kubectl, "t=mismatch")


def test_pod_allocated_before_a_kubelet_restart_starts_from_its_annotations(
    lab: GpuLab, kubectl: Kubectl
) -> None:
    uuid = lab.workers[0].device_plugin.devices[0].id
    kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
        "resumed", limits={"nvidia.com/gpu": "1"}, labels={"t": "resumed", "hami.io/webhook": "ignore"},
        node="gpu-l4",
        annotations={
            ann.VGPU_NODE: "gpu-l4",
            ann.BIND_TIME: str(int(time.time())),
            ann.BIND_PHASE: "success",
            ann.DEVICES_TO_ALLOCATE: ";",
            ann.DEVICES_ALLOCATED: f"{uuid},NVIDIA,1234,0:;",
        },
    ))  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "resumed") == "Running", what="resumed Running")
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=1234m" in kubectl("logs", "resumed").stdout
    _cleanup(kubectl, "t=resumed")


def test_standalone_webhook_keeps_its_own_quota_book(lab: GpuLab, kubectl: Kubectl) -> None:
    import ssl

    import aiohttp

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quota-two"}}
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(namespace))
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": "quota-two"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "1000"}},
    }
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(quota))

    async def review(webhook: HamiWebhook, mem: str) -> dict:
        pod = json.loads(_pod_yaml("x", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem}))
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"kind": "Pod"}, "namespace": "quota-two", "object": pod},
        }
        tls = ssl.create_default_context(cadata=webhook.ca_bundle.decode())
        async with aiohttp.ClientSession() as session, session.post(webhook.url, json=body, ssl=tls) as resp:
            return (await resp.json())["response"]

    async def run() -> tuple[dict, dict]:
        webhook = HamiWebhook(lab.scheduler.cfg, client=lab.client)
        await webhook.start()
        try:
            return await review(webhook, "2000"), await review(webhook, "500")
        finally:
            await webhook.stop()

    too_big, fits = lab.loop.run(run())
    assert too_big["allowed"] is False and "exceeding resource quota" in too_big["status"]["message"]
    assert fits["allowed"] is True


def test_gpu_pod_with_a_run_time_succeeds_and_frees_its_slice(lab: GpuLab, kubectl: Kubectl) -> None:
    before = lab.loop.run(_usage(lab, "gpu-a100"))
    kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
        "short", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5000", "nvidia.com/gpucores": "20"},
        labels={"t": "short"}, annotations={"nvidia.com/use-gputype": "A100", "tenantgpu.io/run-for": "1s"},
    ))  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "short") in ("Running", "Succeeded"), what="short started")
    _wait_for(lambda: _phase(kubectl, "short") == "Succeeded", timeout=15, what="short Succeeded")
    status = _get(kubectl, "pod", "short")["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    _wait_for(lambda: lab.loop.run(_usage(lab, "gpu-a100")) == before, what="slice freed")
    _cleanup(kubectl, "t=short")


def test_kubectl_logs_follow_streams_until_the_container_ends(lab: GpuLab, kubectl: Kubectl) -> None:
    kubectl("create", "--validate=false", "-f", "-", input=_pod_yaml(
        "follow", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, labels={"t": "follow"},
        annotations={"nvidia.com/use-gputype": "L4", "tenantgpu.io/run-for": "2s"},
    ))  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "follow") == "Running", what="follow Running")
    started = time.monotonic()
    out = kubectl("logs", "-f", "follow", timeout=30).stdout
    assert time.monotonic() - started > 0.3  # it waited for the end rather than returning at once
    assert "running for 2s" in out and out.endswith("process exited with code 0\n")
    _cleanup(kubectl, "t=follow")


def _create_gpu_pod(kubectl: Kubectl, name: str, command: list[str]) -> None:
    """A GPU pod whose container's `command` is `command`, as a smoke-test manifest has it."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000", "nvidia.com/gpucores": "10"}
    pod = json.loads(_pod_yaml(name, limits=limits, labels={"t": name}))
    pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "A100"
    pod["spec"]["containers"][0]["command"] = command
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(pod))


def test_a_container_command_runs_and_ends_the_pod(lab: GpuLab, kubectl: Kubectl) -> None:
    """A pod whose command is `nvidia-smi` completes, with the output in its log and its slice freed;
    a command that fails ends its pod Failed with the command's status."""
    before = lab.loop.run(_usage(lab, "gpu-a100"))
    _create_gpu_pod(kubectl, "smoke", ["nvidia-smi"])
    _create_gpu_pod(kubectl, "check", ["sh", "-c", "echo checking && false"])
    _wait_for(lambda: _phase(kubectl, "smoke") == "Succeeded", what="smoke Succeeded")
    _wait_for(lambda: _phase(kubectl, "check") == "Failed", what="check Failed")
    smoke = _get(kubectl, "pod", "smoke")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (smoke["reason"], smoke["exitCode"]) == ("Completed", 0)
    log = kubectl("logs", "smoke").stdout
    command_output = log.split("$ nvidia-smi\n")[-1]  # after the start-up block, the command's own
    assert "0MiB / 2000MiB" in command_output and log.endswith("process exited with code 0\n")
    check = _get(kubectl, "pod", "check")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (check["reason"], check["exitCode"]) == ("Error", 1)
    assert "$ sh -c 'echo checking && false'\nchecking\n" in kubectl("logs", "check").stdout
    _wait_for(lambda: lab.loop.run(_usage(lab, "gpu-a100")) == before, what="slices freed")
    _cleanup(kubectl, "t in (smoke,check)")


def test_kubectl_run_with_a_command_ending_in_sleep_runs_that_long(lab: GpuLab, kubectl: Kubectl) -> None:
    """`kubectl run -- …` writes the command as the container's args (the image has no entrypoint).
    This lab runs no default scheduler, so the pod names its node."""
    kubectl("run", "nap", "--image=busybox", "--restart=Never", "--labels=t=nap",
            '--overrides={"spec": {"nodeName": "gpu-l4"}}', "--", "sh", "-c", "hostname && sleep 2")  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "nap") == "Running", what="nap Running")
    started = time.monotonic()
    assert "$ sh -c 'hostname && sleep 2'\nnap\n" in kubectl("logs", "nap").stdout
    _wait_for(lambda: _phase(kubectl, "nap") == "Succeeded", timeout=15, what="nap Succeeded")
    assert time.monotonic() - started > 0.5  # it ran for a while rather than ending at once
    _cleanup(kubectl, "t=nap")


def test_a_restarted_kubelet_keeps_a_sleeping_command_to_its_time(lab: GpuLab, kubectl: Kubectl) -> None:
    """The adopted container's command runs again into the rebuilt log, and its sleep counts from the
    container's start, not from the kubelet's restart (the kubelet is down for 2.5 s of the 4)."""
    _create_gpu_pod(kubectl, "dozer", ["sh", "-c", "hostname && sleep 4"])
    _wait_for(lambda: _phase(kubectl, "dozer") == "Running", what="dozer Running")
    worker = next(w for w in lab.workers if w.name == "gpu-a100")
    lab.loop.run(worker.stop())
    time.sleep(2.5)
    replacement = Worker(lab.client, "gpu-a100", worker.gpus, worker.sharing)
    lab.loop.run(replacement.start())
    lab.workers[lab.workers.index(worker)] = replacement
    log = kubectl("logs", "dozer").stdout
    assert log.startswith("(log rebuilt after a kubelet restart)\n")
    assert "$ sh -c 'hostname && sleep 4'\ndozer\n" in log
    _wait_for(lambda: _phase(kubectl, "dozer") == "Succeeded", timeout=15, what="dozer Succeeded")
    ended = _get(kubectl, "pod", "dozer")["status"]["containerStatuses"][0]["state"]["terminated"]
    ran = datetime.fromisoformat(ended["finishedAt"]) - datetime.fromisoformat(ended["startedAt"])
    assert ran.total_seconds() <= 5  # 4 s at one-second resolution; counted from the restart, 6.5 s
    _cleanup(kubectl, "t=dozer")


def _container_status(kubectl: Kubectl, name: str) -> dict:
    return (_get(kubectl, "pod", name).get("status", {}).get("containerStatuses") or [{}])[0]


def test_a_command_that_ends_under_restart_policy_always_restarts_with_back_off(
    lab: GpuLab, kubectl: Kubectl
) -> None:
    """`kubectl run` writes restartPolicy Always: the kubelet starts the ended command again at once,
    then waits in CrashLoopBackOff (10 s the next time), and `kubectl logs --previous` shows the
    earlier run, as on a real node."""
    kubectl("run", "loop", "--image=busybox", "--labels=t=loop",
            '--overrides={"spec": {"nodeName": "gpu-l4"}}', "--", "sh", "-c", "echo run")  # fmt: skip
    _wait_for(lambda: _container_status(kubectl, "loop").get("restartCount", 0) >= 1, what="a restart")
    _wait_for(
        lambda: "waiting" in _container_status(kubectl, "loop").get("state", {}), what="CrashLoopBackOff"
    )
    pod = _get(kubectl, "pod", "loop")
    status = pod["status"]["containerStatuses"][0]
    waiting = status["state"]["waiting"]
    uid = pod["metadata"]["uid"]
    assert waiting["reason"] == "CrashLoopBackOff"
    assert waiting["message"] == f"back-off 10s restarting failed container=loop pod=loop_default({uid})"
    assert status["lastState"]["terminated"]["exitCode"] == 0 and status["ready"] is False
    assert pod["status"]["phase"] == "Running"
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "False"
    row = kubectl("get", "pod", "loop", "--no-headers").stdout.split()
    assert row[2] == "CrashLoopBackOff" and row[3] == "1" and row[4].startswith("(") and row[5] == "ago)"
    previous = kubectl("logs", "loop", "--previous").stdout
    assert "$ sh -c 'echo run'\nrun\n" in previous and previous.endswith("process exited with code 0\n")
    # kuberuntime's doBackOff: a Warning on the container each time it waits to be restarted
    events = _get(kubectl, "events", "--field-selector", "involvedObject.name=loop,reason=BackOff")["items"]
    assert [(e["type"], e["involvedObject"]["fieldPath"], e["source"]["component"]) for e in events] == [
        ("Warning", "spec.containers{loop}", "kubelet")
    ]
    assert events[0]["message"] == f"Back-off restarting failed container loop in pod loop_default({uid})"
    _cleanup(kubectl, "t=loop")


def test_restart_policy_on_failure_restarts_only_a_failing_command(lab: GpuLab, kubectl: Kubectl) -> None:
    for name, command in (("fine", "true"), ("flaky", "false")):
        kubectl("run", name, "--image=busybox", "--restart=OnFailure", f"--labels=t={name}",
                '--overrides={"spec": {"nodeName": "gpu-l4"}}', "--", command)  # fmt: skip
    _wait_for(lambda: _phase(kubectl, "fine") == "Succeeded", what="fine Succeeded")
    assert _container_status(kubectl, "fine")["restartCount"] == 0
    _wait_for(lambda: _container_status(kubectl, "flaky").get("restartCount", 0) >= 1, what="flaky restarted")
    assert _phase(kubectl, "flaky") == "Running"
    missing = kubectl("logs", "fine", "--previous", check=False)
    assert missing.returncode != 0
    assert 'previous terminated container "fine" in pod "fine" not found' in missing.stderr
    _cleanup(kubectl, "t in (fine,flaky)")

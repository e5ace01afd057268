"""End to end: an API server, an L4 and an A100 worker, HAMi's scheduler and webhook; real kubectl."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

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
from tenantgpu.node.logsource import KubeletLogSource
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
    source = KubeletLogSource(error=api_errors.bad_request)
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
            "127.0.0.1",
            webhook.port,
            webhook.ca_bundle,
            webhook_url=webhook.url,
            metrics_port=scheduler.metrics_port,
            scheduler_node="gpu-l4",
            device_plugin_nodes=["gpu-l4", "gpu-a100"],
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
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"
    lease = _get(kubectl, "lease", "gpu-l4", "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == "gpu-l4"
    system = _get(kubectl, "pods", "-n", "kube-system")["items"]
    names = {p["metadata"]["name"].rsplit("-", 1)[0] for p in system}
    assert {"hami-scheduler", "hami-device-plugin"} <= names
    mwc = _get(kubectl, "mutatingwebhookconfiguration", "hami-webhook")
    assert mwc["webhooks"][0]["name"] == "vgpu.hami.io" and mwc["webhooks"][0]["failurePolicy"] == "Ignore"


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
    assert "no binding pod found on node gpu-l4" in status["message"]
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

    body = urllib.request.urlopen(f"http://127.0.0.1:{lab.scheduler.metrics_port}/metrics").read().decode()
    assert 'hami_gpu_memory_limit_bytes{device_index="0"' in body or "hami_gpu_memory_limit_bytes{" in body
    assert "gpu-a100" in body

"""The kubelet's books on many pods: GPU sharers for compute shares, and pod IPs in use."""

from __future__ import annotations

import random

from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare.device import ContainerDevice
from tenantgpu.hami.device_plugin import Allocation, DevicePlugin, GPUSpec
from tenantgpu.kubeclient import KubeClient, KubeConfig
from tenantgpu.node import gpu_runtime as rt
from tenantgpu.node.admission import NodeUsage, Rejection, admit
from tenantgpu.node.kubelet import Kubelet


def _pod(uid: str) -> dict:
    return {
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {"nodeName": "w", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Pending"},
    }


def _walk_every_pod(kubelet: Kubelet, uid: str, container: str) -> float:
    """The share as defined: over every pod the kubelet runs, those running on the container's GPUs."""
    record = kubelet.pods[uid]
    best = 1.0
    for uuid in record.gpus[container]:
        caps: dict[str, int | None] = {}
        for other in kubelet.pods.values():
            if other is not record and (other.finished or other.terminating or other.started_at is None):
                continue
            for name, uuids in other.gpus.items():
                if uuid in uuids:
                    caps[f"{other.uid}/{name}"] = other.caps.get(name)
        caps[f"{uid}/{container}"] = record.caps.get(container)
        best = min(best, rt.compute_shares(caps)[f"{uid}/{container}"])
    return best


async def test_shares_follow_pods_arriving_running_ending_and_deleted() -> None:
    cfg = SharingConfig()
    client = KubeClient(KubeConfig(server="http://127.0.0.1:9"))  # never contacted here
    plugin = DevicePlugin(client, "w", [GPUSpec("NVIDIA L4", 23034, 3)], cfg)
    kubelet = Kubelet(client, "w", cfg, plugin)
    uuids = [d.id for d in plugin.devices]
    rng = random.Random(7)
    live: list[str] = []
    for step in range(120):
        uid = f"p{step}"
        kubelet._on_pod("ADDED", _pod(uid), None)
        record = kubelet.pods[uid]
        if record.task is not None:
            record.task.cancel()  # the lifecycle is not under test: only the bookkeeping
        allocation = Allocation()
        for name in ("a", "b"):
            if rng.random() < 0.8:
                chosen = rng.sample(uuids, rng.randint(1, 2))
                allocation.devices[name] = [ContainerDevice(u, "NVIDIA", 100, 0) for u in chosen]
                cap = rng.choice(["0", "10", "30", "60", "100"])
                allocation.envs[name] = {"CUDA_DEVICE_SM_LIMIT": cap}
        kubelet._prepare_containers(_pod(uid), record, allocation)
        record.started_at = None if rng.random() < 0.2 else "2026-01-01T00:00:00Z"
        record.finished = rng.random() < 0.1
        live.append(uid)
        if rng.random() < 0.25:  # a pod goes away; its GPUs no longer count
            gone = live.pop(rng.randrange(len(live)))
            kubelet._on_pod("DELETED", _pod(gone), None)
        for uid in rng.sample(live, min(5, len(live))):
            for name in ("a", "b"):
                if kubelet.pods[uid].gpus.get(name):
                    assert kubelet._share(kubelet.pods[uid], name) == _walk_every_pod(kubelet, uid, name)
    await client.close()


async def test_pod_ips_skip_live_pods_and_reuse_those_of_finished_or_deleted_ones() -> None:
    cfg = SharingConfig()
    client = KubeClient(KubeConfig(server="http://127.0.0.1:9"))  # never contacted here
    kubelet = Kubelet(client, "w", cfg, DevicePlugin(client, "w", [], cfg))
    rng = random.Random(3)
    live: list[str] = []
    for step in range(700):  # wraps around the /24 more than twice
        uid = f"p{step}"
        kubelet._on_pod("ADDED", _pod(uid), None)
        record = kubelet.pods[uid]
        if record.task is not None:
            record.task.cancel()
        taken = {r.pod_ip for r in kubelet.pods.values() if r.pod_ip and not r.finished}
        ip = kubelet._allocate_ip()
        assert ip not in taken and ip.startswith(f"10.244.{kubelet._subnet}.")
        kubelet._claim_ip(record, ip)
        live.append(uid)
        if len(live) > 150 or rng.random() < 0.3:
            gone = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                kubelet.pods[gone].finished = True  # Succeeded: its address is free again
            else:
                kubelet._on_pod("DELETED", _pod(gone), None)
    await client.close()


async def test_a_gpu_sidecar_takes_its_part_of_the_card_beside_the_app_container() -> None:
    """A native sidecar (an init container with restartPolicy Always) runs as long as the pod, so its SM
    cap counts in the compute share of the app containers on its card; a plain init container has ended
    before they start and counts for nothing."""
    cfg = SharingConfig()
    client = KubeClient(KubeConfig(server="http://127.0.0.1:9"))  # never contacted here
    plugin = DevicePlugin(client, "w", [GPUSpec("NVIDIA L4", 23034, 1)], cfg)
    kubelet = Kubelet(client, "w", cfg, plugin)
    card = plugin.devices[0].id
    for uid, restart in (("with-sidecar", "Always"), ("with-init", None)):
        pod = _pod(uid)
        init: dict = {"name": "helper"}
        if restart:
            init["restartPolicy"] = restart
        pod["spec"]["initContainers"] = [init]
        pod["spec"]["containers"] = [{"name": "a"}]
        kubelet._on_pod("ADDED", pod, None)
        record = kubelet.pods[uid]
        if record.task is not None:
            record.task.cancel()
        allocation = Allocation()
        for name, cap in (("helper", "40"), ("a", None)):
            allocation.devices[name] = [ContainerDevice(card, "NVIDIA", 100, 0)]
            allocation.envs[name] = {"CUDA_DEVICE_SM_LIMIT": cap} if cap else {}
        kubelet._prepare_containers(pod, record, allocation)
        record.started_at = "2026-01-01T00:00:00Z"
        if uid == "with-sidecar":
            assert kubelet._share(record, "a") == 0.6
            assert kubelet._share(record, "a") == _walk_every_pod(kubelet, uid, "a")
            kubelet._on_pod("DELETED", pod, None)  # its card is free again
        else:
            assert kubelet._share(record, "a") == 1.0
    await client.close()


def _walk_admitted(kubelet: Kubelet) -> NodeUsage:
    """The node's usage as defined: every pod the kubelet admitted and has not finished."""
    charged = [r for r in kubelet.pods.values() if r.requests is not None and not r.finished]
    return NodeUsage.of(
        (r.requests for r in charged if r.requests is not None), (p for r in charged for p in r.host_ports)
    )


async def test_node_usage_follows_pods_admitted_finished_resized_and_deleted() -> None:
    """The totals the kubelet's admission reads stay those of the pods it runs, whatever they do; and
    a pod that no longer fits beside them is refused with kube's reason and figures."""
    cfg = SharingConfig()
    client = KubeClient(KubeConfig(server="http://127.0.0.1:9"))  # never contacted here
    kubelet = Kubelet(client, "w", cfg, DevicePlugin(client, "w", [], cfg))
    rng = random.Random(11)
    live: list[str] = []
    for step in range(400):
        uid = f"p{step}"
        pod = _pod(uid)
        cpu = rng.choice(["100m", "250m", "1"])
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "example.com/dongle": "1"}}
        if rng.random() < 0.3:
            pod["spec"]["containers"][1]["ports"] = [{"containerPort": 80, "hostPort": rng.choice([80, 81])}]
        pod["status"]["phase"] = rng.choice(["Pending", "Running"])
        kubelet._on_pod("ADDED", pod, None)
        record = kubelet.pods[uid]
        if record.task is not None:
            record.task.cancel()
        if record.requests is None and rng.random() < 0.9:
            kubelet._charge(record, pod)  # admitted
        live.append(uid)
        roll = rng.random()
        if roll < 0.15:
            kubelet._finish(kubelet.pods[rng.choice(live)])
        elif roll < 0.3:
            gone = live.pop(rng.randrange(len(live)))
            kubelet._on_pod("DELETED", _pod(gone), None)
        elif roll < 0.4:
            resized = kubelet.pods[rng.choice(live)]
            if resized.requests is not None:
                resized.requests = {**resized.requests, "cpu": rng.choice([50, 2000])}
                kubelet._recount(resized)
        assert kubelet._usage == _walk_admitted(kubelet)
    used = kubelet._usage.requested["cpu"]
    node = {"metadata": {"name": "w"}, "status": {"allocatable": {"cpu": f"{used + 500}m", "pods": "1000"}}}
    big = _pod("big")
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "600m"}}
    assert admit(big, node, kubelet._usage) == Rejection(
        "OutOfcpu",
        f"Node didn't have enough resource: cpu, requested: 600, used: {used}, capacity: {used + 500}",
    )
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    assert admit(big, node, kubelet._usage) is None
    await client.close()

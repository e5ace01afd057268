"""HAMi's NVIDIA device plugin, simulated: registers the node's GPUs and performs Allocate for bound pods.

Register: `hami.io/node-nvidia-register` in v2.10's JSON format plus, like HAMi's mock device plugin,
`nvidia.com/gpumem`, `nvidia.com/gpucores`, `nvidia.com/gpumem-percentage` in capacity/allocatable next to
`nvidia.com/gpu` = GPUs × deviceSplitCount. Allocate: reads `hami.io/vgpu-devices-to-allocate`, gives each
GPU container HAMi's environment, erases the consumed segments, then `bind-phase: success` and releases the
node lock — or `bind-phase: failed` + release on a mismatch (the kubelet then fails the pod with
`UnexpectedAdmissionError`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from tenantgpu import eager
from tenantgpu.gpushare import (
    ContainerDevice,
    DeviceInfo,
    SharingConfig,
    allocate_env,
    encode_node_register,
    encode_pod_devices,
)
from tenantgpu.gpushare import annotations as ann
from tenantgpu.gpushare.codec import decode_container_devices
from tenantgpu.gpushare.register import register_device, registered_type
from tenantgpu.hami.nodelock import release_node_lock
from tenantgpu.klog import ComponentLog, go_map
from tenantgpu.kubeclient import ApiError, KubeClient

log = logging.getLogger(__name__)

REGISTER_INTERVAL_SECONDS = 30.0  # HAMi's WatchAndRegister period


@dataclass(frozen=True)
class GPUSpec:
    """One kind of card on a worker: model name, memory in MiB, how many, NUMA node."""

    model: str
    memory_mib: int
    count: int = 1
    numa: int = 0
    uuids: tuple[str, ...] = ()  # the lab spec's UUIDs for these cards; empty: derived from node and index

    @classmethod
    def parse(cls, text: str) -> GPUSpec:
        """`MODEL:MEMORY_MIB[:COUNT[:NUMA]]`, e.g. `NVIDIA L4:23034:2`."""
        parts = text.rsplit(":", 3) if text.count(":") >= 3 else text.rsplit(":", 2)
        if len(parts) < 2 or not parts[0].strip():
            raise ValueError(f"GPU spec {text!r}: expected MODEL:MEMORY_MIB[:COUNT[:NUMA]]")
        try:
            memory = int(parts[1])
            count = int(parts[2]) if len(parts) > 2 else 1
            numa = int(parts[3]) if len(parts) > 3 else 0
        except ValueError:
            raise ValueError(f"GPU spec {text!r}: memory, count and NUMA must be integers") from None
        model = parts[0].strip()
        if model.rsplit(":", 1)[-1].strip().lstrip("-").isdigit() and ":" in model:
            # a model name may hold colons, but not a number after its last one: a fifth field
            raise ValueError(f"GPU spec {text!r}: expected MODEL:MEMORY_MIB[:COUNT[:NUMA]], at most 4 fields")
        problems = [
            what
            for what, bad in (
                ("memory must be a positive number of MiB", memory <= 0),
                ("count must be positive", count <= 0),
                ("the NUMA node must be 0 or more", numa < 0),
            )
            if bad
        ]
        if problems:
            raise ValueError(f"GPU spec {text!r}: {', '.join(problems)}")
        return cls(model, memory, count, numa)


def device_type(model: str) -> str:
    """HAMi ≥ v2.8 registers the NVML name as is when it starts with NVIDIA, else `NVIDIA-<name>`."""
    return registered_type(model)


def gpu_uuid(node_name: str, index: int) -> str:
    """A stable, NVML-looking UUID per node and card index (the same after a worker restart)."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'tenantgpu:{node_name}:{index}')}"


def node_devices(node_name: str, gpus: list[GPUSpec], cfg: SharingConfig) -> list[DeviceInfo]:
    """The node's GPUs as HAMi's device plugin registers them (gpushare's register_device)."""
    devices: list[DeviceInfo] = []
    for spec in gpus:
        for k in range(spec.count):
            i = len(devices)
            devices.append(
                register_device(
                    spec.uuids[k] if k < len(spec.uuids) else gpu_uuid(node_name, i),
                    i,
                    spec.model,
                    spec.memory_mib,
                    cfg,
                    numa=spec.numa,
                )
            )
    return devices


def extended_resources(devices: list[DeviceInfo], cfg: SharingConfig) -> dict[str, str]:
    """What the real plugin (gpu) and the mock plugin (gpumem, gpucores, percentage) advertise."""
    if not devices:
        return {}
    mem = sum(d.devmem for d in devices)
    if cfg.memory_factor > 1:
        mem //= cfg.memory_factor
    return {
        cfg.resource_count_name: str(len(devices) * cfg.device_split_count),
        cfg.resource_memory_name: str(mem),
        cfg.resource_core_name: str(sum(d.devcore for d in devices)),
        cfg.resource_memory_percentage_name: str(100 * len(devices)),
    }


class AllocateError(Exception):
    """Why Allocate failed; the kubelet reports it in an `UnexpectedAdmissionError`."""


@dataclass
class Allocation:
    """The device plugin's answer for one pod: env per GPU container, and the erased to-allocate value."""

    envs: dict[str, dict[str, str]] = field(default_factory=dict)
    devices: dict[str, list[ContainerDevice]] = field(default_factory=dict)
    remaining: str = ""


def gpu_containers(pod: dict[str, Any], cfg: SharingConfig) -> list[tuple[str, int]]:
    """Containers the kubelet asks the plugin about, in its order (init first): (name, nvidia.com/gpu)."""
    spec = pod.get("spec") or {}
    out: list[tuple[str, int]] = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        raw = (resources.get("limits") or {}).get(cfg.resource_count_name)
        if raw is None:
            raw = (resources.get("requests") or {}).get(cfg.resource_count_name)
        try:
            n = int(str(raw)) if raw is not None else 0
        except ValueError:
            n = 0
        if n > 0:
            out.append((container.get("name", ""), n))
    return out


def is_binding_pod(pod: dict[str, Any], node_name: str) -> bool:
    """HAMi's GetPendingPod test: bound here by HAMi and not yet failed."""
    a = (pod.get("metadata") or {}).get("annotations") or {}
    return (
        bool(a.get(ann.BIND_TIME))
        and a.get(ann.BIND_PHASE) in (ann.BIND_PHASE_ALLOCATING, ann.BIND_PHASE_SUCCESS)
        and a.get(ann.VGPU_NODE) == node_name
    )


def allocate(pod: dict[str, Any], node_name: str, cfg: SharingConfig) -> Allocation:
    """Allocate for every GPU container of `pod` (pure); raises AllocateError with HAMi's message."""
    if not is_binding_pod(pod, node_name):
        raise AllocateError(f"no binding pod found on node {node_name}")
    meta = pod.get("metadata") or {}
    raw = meta["annotations"].get(ann.DEVICES_TO_ALLOCATE)
    if raw is None:
        raise AllocateError("device request not found")
    # HAMi decodes every ";"-separated piece, the empty one after the last ";" too, and writes them all
    # back: "GPU-a,NVIDIA,3000,30:;" is erased to ";;", not ";".
    segments = [decode_container_devices(piece) for piece in raw.split(";")]
    result = Allocation()
    for name, count in gpu_containers(pod, cfg):
        idx = next((i for i, seg in enumerate(segments) if seg), None)
        if idx is None:
            raise AllocateError("no pending device allocation found")
        devices = segments[idx]
        if len(devices) != count:
            raise AllocateError("device number not matched")
        result.envs[name] = allocate_env(devices, cfg, pod_uid=meta.get("uid", ""), container=name)
        result.devices[name] = devices
        segments[idx] = []
    result.remaining = encode_pod_devices(segments)
    return result


async def report_allocation(
    client: KubeClient,
    pod: dict[str, Any],
    node_name: str,
    outcome: Allocation | AllocateError,
    *,
    node: dict[str, Any] | None = None,
) -> None:
    """Write Allocate's outcome: bind-phase (and the erased to-allocate) on the pod, and release the lock.

    HAMi patches the pod and then releases; both are sent at once here, since nothing orders them.
    """
    meta = pod["metadata"]
    if isinstance(outcome, Allocation):
        patch = {ann.DEVICES_TO_ALLOCATE: outcome.remaining, ann.BIND_PHASE: ann.BIND_PHASE_SUCCESS}
    else:
        patch = {ann.BIND_PHASE: ann.BIND_PHASE_FAILED}

    async def mark_pod() -> None:
        try:
            await client.patch(
                "pods", meta["name"], {"metadata": {"annotations": patch}}, meta["namespace"], decode=False
            )
        except ApiError as err:
            if err.code != 404:
                raise

    async def unlock() -> None:
        try:
            await release_node_lock(client, node_name, meta["namespace"], meta["name"], node=node)
        except ApiError as err:
            log.warning("device plugin %s: releasing node lock: %s", node_name, err)

    # Both requests go out in this loop turn. The pod's patch is awaited directly, not through a task
    # and a gather, each of which would cost the kubelet one more loop turn before it starts the pod.
    unlocking = eager.start(unlock())
    await mark_pod()
    await unlocking


class DevicePlugin:
    """Keeps the node's registration annotation and extended resources current, like WatchAndRegister."""

    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        gpus: list[GPUSpec],
        cfg: SharingConfig,
        *,
        kubelet_client: KubeClient | None = None,
        klog: ComponentLog | None = None,
    ) -> None:
        self.client = client
        # what the plugin's container would print (`kubectl logs … -c device-plugin`)
        self.klog = klog or ComponentLog()
        # The extended resources reach the Node's status through the kubelet (the plugin's ListAndWatch
        # feeds it), so they are written with the kubelet's credentials, the annotation with the plugin's.
        self.kubelet_client = kubelet_client or client
        self.node_name = node_name
        self.cfg = cfg
        self.devices = node_devices(node_name, gpus, cfg)
        self.by_uuid = {d.id: d for d in self.devices}

    def register_annotation(self) -> str:
        return encode_node_register(self.devices)

    def log_start(self) -> None:
        """The lines HAMi's plugin prints once it serves the kubelet (server.go)."""
        resource = self.cfg.resource_count_name
        socket = f"/var/lib/kubelet/device-plugins/nvidia-{resource.rpartition('/')[2]}.sock"
        self.klog.infof("server.go:321", f"Starting to serve '{resource}' on {socket}")
        self.klog.infof("server.go:329", f"Registered device plugin for '{resource}' with Kubelet")
        self.klog.started()

    def log_allocate(self, pod: dict[str, Any], outcome: Allocation | AllocateError) -> None:
        """Allocate's lines (server.go). Go prints the kubelet's request and the response structs with
        `%v`; here they are the number of containers asked for and each response's environment."""
        meta = pod.get("metadata") or {}
        containers = len(gpu_containers(pod, self.cfg))
        self.klog.info("server.go:754", "Allocate", request=f"ContainerRequests:{containers}")
        if not is_binding_pod(pod, self.node_name):
            return  # no pending pod: HAMi returns the error before it names one
        annotations = meta.get("annotations") or {}
        self.klog.infof(
            "server.go:762",
            f"Allocate pod name is {meta.get('namespace')}/{meta.get('name')}, annotation is {go_map(annotations)}",
        )
        if not isinstance(outcome, Allocation):
            return
        for devices in outcome.devices.values():
            shown = " ".join(f"{{0 {d.uuid} {d.type} {d.usedmem} {d.usedcores} 0 map[]}}" for d in devices)
            self.klog.infof("server.go:797", f"deviceAllocateFromAnnotation= [{shown}]")
        responses = " ".join(
            f"&ContainerAllocateResponse{{Envs:{go_map(env)},}}" for env in outcome.envs.values()
        )
        self.klog.infof("server.go:909", f"Allocate Response [{responses}]")

    def resources(self) -> dict[str, str]:
        return extended_resources(self.devices, self.cfg)

    async def register(self, node: dict[str, Any] | None = None) -> bool:
        """Patch the node when the registration differs from what it shows; returns whether it patched."""
        if not self.devices:
            return False
        node = node or await self.client.get("nodes", self.node_name)
        current = ((node.get("metadata") or {}).get("annotations") or {}).get(ann.NODE_REGISTER)
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        wanted = self.resources()
        changed = False
        if current != self.register_annotation():
            patch = {"metadata": {"annotations": {ann.NODE_REGISTER: self.register_annotation()}}}
            await self.client.patch("nodes", self.node_name, patch)
            changed = True
        if any(allocatable.get(k) != v for k, v in wanted.items()):
            status = {"status": {"capacity": wanted, "allocatable": wanted}}
            await self.kubelet_client.patch("nodes", self.node_name, status, subresource="status")
            changed = True
        return changed

    async def run(self, interval: float = REGISTER_INTERVAL_SECONDS) -> None:
        while True:
            try:
                await self.register()
                await asyncio.sleep(interval)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # keep registering through API hiccups, as HAMi retries after 5 s
                log.warning("device plugin %s: register: %s", self.node_name, err)
                await asyncio.sleep(5.0)

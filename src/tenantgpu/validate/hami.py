"""HAMi's annotation keys and encodings, read on their own so the suite needs nothing from the lab."""

from __future__ import annotations

import json
from dataclasses import dataclass

NODE_REGISTER = "hami.io/node-nvidia-register"
NODE_LOCK = "hami.io/mutex.lock"
VGPU_NODE = "hami.io/vgpu-node"
DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
USE_GPUTYPE = "nvidia.com/use-gputype"
USE_GPUUUID = "nvidia.com/use-gpuuuid"
GPU_POLICY = "hami.io/gpu-scheduler-policy"
NODE_POLICY = "hami.io/node-scheduler-policy"
SCHEDULER_NAME = "hami-scheduler"
RESOURCE_GPU = "nvidia.com/gpu"
RESOURCE_MEM = "nvidia.com/gpumem"
RESOURCE_MEM_PERCENTAGE = "nvidia.com/gpumem-percentage"
RESOURCE_CORES = "nvidia.com/gpucores"


@dataclass(frozen=True)
class RegisteredGPU:
    """One GPU as a node's device plugin registered it."""

    uuid: str
    index: int
    count: int
    devmem: int
    devcore: int
    type: str
    health: bool


@dataclass(frozen=True)
class AllocatedDevice:
    """One GPU slice of a container, as the scheduler wrote it into the pod."""

    uuid: str
    type: str
    usedmem: int
    usedcores: int


def decode_register(value: str) -> list[RegisteredGPU]:
    """Decode `hami.io/node-nvidia-register`: v2.8+ JSON, else the legacy `a,b,c:` form; ValueError if neither."""
    text = value.strip()
    if text.startswith("["):
        items = json.loads(text)
        return [
            RegisteredGPU(
                uuid=str(item.get("id", "")),
                index=int(item.get("index", 0)),
                count=int(item.get("count", 0)),
                devmem=int(item.get("devmem", 0)),
                devcore=int(item.get("devcore", 0)),
                type=str(item.get("type", "")),
                # JSON omits false (omitempty), so a missing `health` means unhealthy, as in HAMi.
                health=bool(item.get("health", False)),
            )
            for item in items
        ]
    gpus: list[RegisteredGPU] = []
    for position, chunk in enumerate(part for part in text.split(":") if part.strip()):
        fields = chunk.split(",")
        if len(fields) not in (7, 9):
            raise ValueError(f"device {chunk!r} has {len(fields)} fields, expected 7 or 9")
        index = int(fields[7]) if len(fields) == 9 else position
        gpus.append(
            RegisteredGPU(
                uuid=fields[0],
                index=index,
                count=int(fields[1]),
                devmem=int(fields[2]),
                devcore=int(fields[3]),
                type=fields[4],
                health=fields[6].strip().lower() == "true",
            )
        )
    return gpus


def decode_pod_devices(value: str) -> list[list[AllocatedDevice]]:
    """Decode `UUID,NVIDIA,mem,cores:` per device, `;` per container."""
    containers: list[list[AllocatedDevice]] = []
    for segment in value.split(";")[:-1] if value.endswith(";") else value.split(";"):
        devices: list[AllocatedDevice] = []
        for chunk in segment.split(":"):
            if not chunk.strip():
                continue
            fields = chunk.split(",")
            if len(fields) < 4:
                raise ValueError(f"device {chunk!r} has {len(fields)} fields, expected 4")
            devices.append(AllocatedDevice(fields[0], fields[1], int(fields[2]), int(fields[3])))
        containers.append(devices)
    return containers


def allocated_uuids(pod: dict) -> list[str]:
    """Every GPU UUID a pod was given, from `hami.io/vgpu-devices-allocated` (empty when not scheduled)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEVICES_ALLOCATED, "")
    return [device.uuid for container in decode_pod_devices(value) for device in container] if value else []


def node_gpus(node: dict) -> list[RegisteredGPU]:
    """The GPUs a node registered; empty when it has no register annotation."""
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(NODE_REGISTER)
    return decode_register(value) if value else []

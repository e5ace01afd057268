"""The environment HAMi's device plugin gives a container in Allocate (hami-core mode, hami.md §5)."""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Sequence

from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import ContainerDevice

HOOK_PATH = "/usr/local"  # HAMi's global.gpuHookPath


def allocate_env(
    devices: Sequence[ContainerDevice],
    cfg: SharingConfig,
    *,
    pod_uid: str,
    container: str,
    cache_id: str | None = None,
) -> dict[str, str]:
    """NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_SM_LIMIT (from the first card), ...

    HAMi names the shared cache with a random UUID; here it is derived from pod UID and container
    unless `cache_id` is given, so the function stays pure.
    """
    if not devices:
        raise ValueError("a container without devices gets no Allocate response")
    cache = cache_id or str(_uuid.uuid5(_uuid.NAMESPACE_URL, f"hami-cache/{pod_uid}/{container}"))
    env = {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices)}
    for i, dev in enumerate(devices):
        env[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = f"{dev.usedmem}m"
    env["CUDA_DEVICE_SM_LIMIT"] = str(devices[0].usedcores)
    env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{HOOK_PATH}/vgpu/{cache}.cache"
    if cfg.device_memory_scaling > 1:
        env["CUDA_OVERSUBSCRIBE"] = "true"
    env["LIBCUDA_LOG_LEVEL"] = str(cfg.lib_cuda_log_level)
    if cfg.gpu_core_policy == "disable":
        env["GPU_CORE_UTILIZATION_POLICY"] = "disable"
    return env


def allocate_mounts(
    pod_uid: str, container: str, *, disable_control: bool = False
) -> list[dict[str, object]]:
    """The mounts of the same response: libvgpu.so, the container cache dir, the lock dir, ld.so.preload."""
    mounts: list[dict[str, object]] = [
        {
            "containerPath": f"{HOOK_PATH}/vgpu/libvgpu.so",
            "hostPath": f"{HOOK_PATH}/vgpu/libvgpu.so",
            "readOnly": True,
        },
        {
            "containerPath": f"{HOOK_PATH}/vgpu",
            "hostPath": f"{HOOK_PATH}/vgpu/containers/{pod_uid}_{container}",
            "readOnly": False,
        },
        {"containerPath": "/tmp/vgpulock", "hostPath": "/tmp/vgpulock", "readOnly": False},
    ]
    if not disable_control:
        mounts.append(
            {
                "containerPath": "/etc/ld.so.preload",
                "hostPath": f"{HOOK_PATH}/vgpu/ld.so.preload",
                "readOnly": True,
            }
        )
    return mounts

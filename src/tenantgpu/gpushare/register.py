"""What HAMi's device plugin registers for a GPU (register.go): split count, scaled memory and cores, type."""

from __future__ import annotations

from tenantgpu.gpushare.config import SharingConfig
from tenantgpu.gpushare.device import DeviceInfo


def registered_type(model: str) -> str:
    """The NVML name if it starts with "NVIDIA", else `NVIDIA-<name>` (v2.8.0+, PR #1139)."""
    return model if model.startswith("NVIDIA") else f"NVIDIA-{model}"


def register_device(
    uuid: str,
    index: int,
    model: str,
    memory_mib: int,
    cfg: SharingConfig,
    *,
    numa: int = 0,
    health: bool = True,
) -> DeviceInfo:
    """One GPU as the device plugin announces it: count = deviceSplitCount, devmem x deviceMemoryScaling,
    devcore = deviceCoreScaling x 100, hami-core mode; a negative NUMA id becomes 0."""
    return DeviceInfo(
        id=uuid,
        index=index,
        count=cfg.device_split_count,
        devmem=int(memory_mib * cfg.device_memory_scaling),
        devcore=int(cfg.device_core_scaling * 100),
        type=registered_type(model),
        numa=max(numa, 0),
        mode="hami-core",
        health=health,
    )

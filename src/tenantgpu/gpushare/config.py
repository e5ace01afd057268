"""HAMi's scheduler and device settings (the `nvidia:` section of HAMi's device ConfigMap, plus policies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NodePolicy = Literal["binpack", "spread"]
GPUPolicy = Literal["spread", "binpack", "mutex", "topology-aware"]


@dataclass(frozen=True)
class SharingConfig:
    """Every HAMi v2.10 knob that changes a scheduling decision; defaults are HAMi's chart defaults."""

    node_policy: NodePolicy = "binpack"
    gpu_policy: GPUPolicy = "spread"
    resource_count_name: str = "nvidia.com/gpu"
    resource_memory_name: str = "nvidia.com/gpumem"
    resource_memory_percentage_name: str = "nvidia.com/gpumem-percentage"
    resource_core_name: str = "nvidia.com/gpucores"
    resource_priority_name: str = "nvidia.com/priority"
    device_split_count: int = 10
    default_memory: int = 0
    default_cores: int = 0
    default_gpu_num: int = 1
    memory_factor: int = 1
    device_memory_scaling: float = 1.0
    device_core_scaling: float = 1.0
    scheduler_name: str = "hami-scheduler"
    force_overwrite_default_scheduler: bool = True
    gpu_core_policy: Literal["default", "force", "disable"] = "default"
    overwrite_env: bool = False
    lib_cuda_log_level: int = 1
    node_lock_timeout_seconds: float = 300.0

"""Registration as HAMi's device plugin does it (register.go): split count, scaling, `NVIDIA-` prefix."""

import dataclasses

from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare.register import register_device


def test_register_defaults() -> None:
    d = register_device("GPU-1", 0, "NVIDIA L4", 23034, SharingConfig())
    assert (d.count, d.devmem, d.devcore, d.type, d.mode, d.health) == (
        10,
        23034,
        100,
        "NVIDIA L4",
        "hami-core",
        True,
    )


def test_register_scaling_and_prefix() -> None:
    """PR #1139: names not starting with "NVIDIA" get the `NVIDIA-` prefix; memory/core scaling multiply."""
    cfg = dataclasses.replace(
        SharingConfig(), device_split_count=4, device_memory_scaling=1.5, device_core_scaling=2
    )
    d = register_device("GPU-1", 3, "Tesla T4", 15109, cfg, numa=-1)
    assert (d.count, d.devmem, d.devcore, d.type, d.numa, d.index) == (4, 22663, 200, "NVIDIA-Tesla T4", 0, 3)

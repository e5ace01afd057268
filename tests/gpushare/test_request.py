"""Container requests are read as HAMi v2.10's GenerateResourceRequests does (pkg/device/nvidia/device.go)."""

import dataclasses

from gpushare_objects import container

from tenantgpu.gpushare import SharingConfig
from tenantgpu.gpushare.nvidia import NvidiaGPUs
from tenantgpu.gpushare.request import PERCENTAGE_UNSET, ContainerDeviceRequest

CFG = SharingConfig()


def read(c: dict, cfg: SharingConfig = CFG) -> ContainerDeviceRequest | None:
    return NvidiaGPUs(cfg).container_request(c)


def test_limits_win_over_requests() -> None:
    c = container(
        limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, requests={"nvidia.com/gpumem": 9000}
    )
    assert read(c) == ContainerDeviceRequest(1, "NVIDIA", 3000, PERCENTAGE_UNSET, 0)


def test_requests_are_the_fallback() -> None:
    c = container(requests={"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "1000"})
    assert read(c) == ContainerDeviceRequest(2, "NVIDIA", 1000, PERCENTAGE_UNSET, 30)


def test_no_gpu_count_means_no_request() -> None:
    assert read(container(limits={"nvidia.com/gpumem": 1000})) is None
    assert read(container(limits={"nvidia.com/gpu": 0})) is None
    assert read(container(limits={"nvidia.com/gpu": "1500m"})) is None  # not a whole number: AsInt64 fails


def test_gpumem_absent_takes_the_whole_card() -> None:
    """Issue #1173: no gpumem and no percentage => MemPercentagereq 100."""
    req = read(container(limits={"nvidia.com/gpu": 1}))
    assert req is not None and req.mem_percentage == 100 and req.memreq == 0
    assert req.memory_on(23034) == 23034


def test_default_memory_replaces_the_whole_card() -> None:
    req = read(container(limits={"nvidia.com/gpu": 1}), dataclasses.replace(CFG, default_memory=2048))
    assert req is not None and req.memreq == 2048 and req.mem_percentage == PERCENTAGE_UNSET


def test_percentage_clamped_and_nonpositive_unset() -> None:
    over = read(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 150}))
    assert over is not None and over.mem_percentage == 100
    zero = read(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}))
    assert zero is not None and zero.mem_percentage == 100  # unset, then the whole-card default applies


def test_percentage_resolves_per_card_with_integer_division() -> None:
    req = read(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 33}))
    assert req is not None
    assert req.memory_on(23034) == 23034 * 33 // 100 == 7601
    assert req.memory_on(81920) == 27033


def test_gpumem_wins_over_percentage() -> None:
    req = read(
        container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpumem-percentage": 50})
    )
    assert req is not None and req.memory_on(23034) == 1000


def test_bad_gpumem_rejects_the_request() -> None:
    """Non-integer or negative gpumem: HAMi returns an empty request rather than under-allocate."""
    assert read(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1.5"})) is None
    assert read(container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": -5})) is None


def test_memory_factor_multiplies_gpumem() -> None:
    req = read(
        container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}),
        dataclasses.replace(CFG, memory_factor=1024),
    )
    assert req is not None and req.memreq == 10240


def test_default_cores() -> None:
    req = read(
        container(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10}),
        dataclasses.replace(CFG, default_cores=5),
    )
    assert req is not None and req.coresreq == 5

"""The simulated device plugin: HAMi's registration and Allocate (env, erase, success/failed)."""

from __future__ import annotations

import json

import pytest

from tenantgpu.gpushare import SharingConfig, decode_node_register
from tenantgpu.gpushare import annotations as ann
from tenantgpu.hami.device_plugin import (
    AllocateError,
    Allocation,
    DevicePlugin,
    GPUSpec,
    allocate,
    device_type,
    extended_resources,
    gpu_uuid,
    node_devices,
)

CFG = SharingConfig()


def _pod(to_allocate: str, gpus: list[int], *, node: str = "w1", phase: str = "allocating") -> dict:
    return {
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "uid": "uid-1",
            "annotations": {
                ann.VGPU_NODE: node,
                ann.BIND_TIME: "1766199067",
                ann.BIND_PHASE: phase,
                ann.DEVICES_TO_ALLOCATE: to_allocate,
                ann.DEVICES_ALLOCATED: to_allocate,
            },
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": str(n)}} if n else {}}
                for i, n in enumerate(gpus)
            ],
        },
    }


def test_gpu_spec_parsing() -> None:
    assert GPUSpec.parse("NVIDIA L4:23034:2") == GPUSpec("NVIDIA L4", 23034, 2)
    assert GPUSpec.parse("NVIDIA A100-SXM4-80GB:81920") == GPUSpec("NVIDIA A100-SXM4-80GB", 81920, 1)
    assert GPUSpec.parse("NVIDIA L4:23034:2:1").numa == 1
    for bad in ("L4", "NVIDIA L4:lots", "NVIDIA L4:23034:0"):
        with pytest.raises(ValueError):
            GPUSpec.parse(bad)


def test_registration_is_hami_v2_10_json_with_omitted_zero_fields() -> None:
    devices = node_devices("w1", [GPUSpec("NVIDIA L4", 23034, 2, numa=0)], CFG)
    from tenantgpu.gpushare import encode_node_register

    entries = json.loads(encode_node_register(devices))
    assert entries[0] == {
        "id": gpu_uuid("w1", 0),
        "count": 10,
        "devmem": 23034,
        "devcore": 100,
        "type": "NVIDIA L4",
        "mode": "hami-core",
        "health": True,
    }
    assert entries[1]["index"] == 1
    assert decode_node_register(encode_node_register(devices)) == devices


def test_type_prefix_and_stable_uuids() -> None:
    assert device_type("Tesla T4") == "NVIDIA-Tesla T4"
    assert device_type("NVIDIA L4") == "NVIDIA L4"
    assert gpu_uuid("w1", 0) == gpu_uuid("w1", 0) != gpu_uuid("w2", 0)
    assert gpu_uuid("w1", 0).startswith("GPU-")


def test_extended_resources_like_the_mock_plugin() -> None:
    devices = node_devices("w1", [GPUSpec("NVIDIA L4", 23034, 2)], CFG)
    assert extended_resources(devices, CFG) == {
        "nvidia.com/gpu": "20",
        "nvidia.com/gpumem": "46068",
        "nvidia.com/gpucores": "200",
        "nvidia.com/gpumem-percentage": "200",
    }


def test_allocate_gives_hami_env_and_erases_to_allocate() -> None:
    pod = _pod("GPU-a,NVIDIA,8192,10:;", [1])
    result = allocate(pod, "w1", CFG)
    env = result.envs["c0"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-a"
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "8192m"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "10"
    assert "NVIDIA" not in result.remaining


def test_allocate_multi_container_and_multi_gpu() -> None:
    pod = _pod(";GPU-a,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:;", [0, 2])
    result = allocate(pod, "w1", CFG)
    assert set(result.envs) == {"c1"}
    assert result.envs["c1"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"
    assert result.envs["c1"]["CUDA_DEVICE_MEMORY_LIMIT_1"] == "1000m"


def test_count_mismatch_fails_like_hami() -> None:
    with pytest.raises(AllocateError, match="device number not matched"):
        allocate(_pod("GPU-a,NVIDIA,1000,0:;", [2]), "w1", CFG)


def test_pod_without_hami_binding_is_not_found() -> None:
    pod = _pod("GPU-a,NVIDIA,1000,0:;", [1])
    pod["metadata"]["annotations"] = {}
    with pytest.raises(AllocateError, match="no binding pod found on node w1"):
        allocate(pod, "w1", CFG)
    with pytest.raises(AllocateError, match="no binding pod found"):
        allocate(_pod("GPU-a,NVIDIA,1000,0:;", [1], node="w2"), "w1", CFG)
    with pytest.raises(AllocateError, match="no binding pod found"):
        allocate(_pod("GPU-a,NVIDIA,1000,0:;", [1], phase="failed"), "w1", CFG)


def test_erased_to_allocate_keeps_every_piece_like_hami() -> None:
    """HAMi v2.10 plugin/util.go popNextContainerDevices + patchErasedAnnotation: the decoded pieces
    include the empty one after the final ";" and are all written back, so one container's
    "GPU-a,NVIDIA,8192,10:;" becomes ";;" and a two-container ";GPU-a,...:;" becomes ";;;"."""
    assert allocate(_pod("GPU-a,NVIDIA,8192,10:;", [1]), "w1", CFG).remaining == ";;"
    two = allocate(_pod(";GPU-a,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:;", [0, 2]), "w1", CFG)
    assert two.remaining == ";;;"


def test_nothing_left_to_allocate_message() -> None:
    """plugin/util.go popNextContainerDevices: "no pending device allocation found" when every piece is
    empty; decodePodSingleDevice: "device request not found" when the annotation is missing."""
    with pytest.raises(AllocateError, match="no pending device allocation found"):
        allocate(_pod(";;", [1]), "w1", CFG)
    pod = _pod("", [1])
    del pod["metadata"]["annotations"][ann.DEVICES_TO_ALLOCATE]
    with pytest.raises(AllocateError, match="device request not found"):
        allocate(pod, "w1", CFG)


def _plugin_lines(pod: dict) -> list[str]:
    plugin = DevicePlugin(None, "w1", [GPUSpec.parse("NVIDIA L4:23034:1")], CFG)  # type: ignore[arg-type]
    try:
        outcome: Allocation | AllocateError = allocate(pod, "w1", CFG)
    except AllocateError as err:
        outcome = err
    plugin.log_allocate(pod, outcome)
    return [line.split(None, 3)[3] for line in plugin.klog.lines()]


def test_allocate_logs_the_pod_its_annotations_the_devices_and_the_environment_it_gives() -> None:
    lines = _plugin_lines(_pod("GPU-a,NVIDIA,3000,30:;", [1]))
    assert lines[0] == 'server.go:754] "Allocate" request="ContainerRequests:1"'
    assert lines[1].startswith(
        "server.go:762] Allocate pod name is team-a/p, annotation is map[hami.io/bind-phase:"
    )
    assert lines[2] == "server.go:797] deviceAllocateFromAnnotation= [{0 GPU-a NVIDIA 3000 30 0 map[]}]"
    assert lines[3].startswith("server.go:909] Allocate Response [&ContainerAllocateResponse{Envs:map[")
    assert "CUDA_DEVICE_MEMORY_LIMIT_0:3000m" in lines[3] and "CUDA_DEVICE_SM_LIMIT:30" in lines[3]


def test_allocate_for_a_pod_hami_never_bound_logs_only_the_request() -> None:
    assert _plugin_lines(_pod("GPU-a,NVIDIA,3000,30:;", [1], node="elsewhere")) == [
        'server.go:754] "Allocate" request="ContainerRequests:1"'
    ]


def test_the_plugin_announces_its_socket_and_registration_when_it_starts() -> None:
    plugin = DevicePlugin(None, "w1", [], CFG)  # type: ignore[arg-type]
    plugin.log_start()
    assert [line.split(None, 3)[3] for line in plugin.klog.lines()] == [
        "server.go:321] Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock",
        "server.go:329] Registered device plugin for 'nvidia.com/gpu' with Kubelet",
    ]

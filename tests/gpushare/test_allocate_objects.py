"""The device plugin's Allocate environment (hami.md §5) and loading Kubernetes objects from text."""

import dataclasses
import json

import pytest

from tenantgpu.gpushare import ContainerDevice, SharingConfig, allocate_env, decode_pod_devices
from tenantgpu.gpushare.allocate import allocate_mounts
from tenantgpu.gpushare.objects import ObjectsError, load_objects

CFG = SharingConfig()


def test_allocate_env_for_two_cards() -> None:
    """server.go Allocate: one memory limit per card in MiB with an `m` suffix, SM limit from card 0."""
    [devices] = decode_pod_devices("GPU-a,NVIDIA,10240,30:GPU-b,NVIDIA,8000,40:;")
    env = allocate_env(devices, CFG, pod_uid="uid-1", container="main")
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-a,GPU-b"
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "10240m"
    assert env["CUDA_DEVICE_MEMORY_LIMIT_1"] == "8000m"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"].startswith("/usr/local/vgpu/")
    assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith(".cache")
    assert env["LIBCUDA_LOG_LEVEL"] == "1"
    assert "CUDA_OVERSUBSCRIBE" not in env and "GPU_CORE_UTILIZATION_POLICY" not in env
    assert env == allocate_env(devices, CFG, pod_uid="uid-1", container="main")  # pure
    assert env != allocate_env(devices, CFG, pod_uid="uid-2", container="main")


def test_allocate_env_switches() -> None:
    cfg = dataclasses.replace(CFG, device_memory_scaling=1.5, gpu_core_policy="disable")
    env = allocate_env([ContainerDevice("GPU-a", "NVIDIA", 1, 0)], cfg, pod_uid="u", container="c")
    assert env["CUDA_OVERSUBSCRIBE"] == "true" and env["GPU_CORE_UTILIZATION_POLICY"] == "disable"
    with pytest.raises(ValueError):
        allocate_env([], CFG, pod_uid="u", container="c")


def test_allocate_mounts() -> None:
    paths = [m["containerPath"] for m in allocate_mounts("uid", "main")]
    assert paths == ["/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu", "/tmp/vgpulock", "/etc/ld.so.preload"]
    assert "/etc/ld.so.preload" not in [
        m["containerPath"] for m in allocate_mounts("u", "c", disable_control=True)
    ]


def test_objects_single_multi_and_list() -> None:
    one = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"
    assert [o["metadata"]["name"] for o in load_objects(one)] == ["a"]
    multi = one + "---\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
    assert [o["kind"] for o in load_objects(multi)] == ["Pod", "Node"]
    listed = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}},
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
            ],
        }
    )
    assert [o["kind"] for o in load_objects(listed)] == ["Node", "Pod"]
    typed = {"apiVersion": "v1", "kind": "PodList", "items": [{"metadata": {"name": "p"}}]}
    assert load_objects(json.dumps(typed))[0]["kind"] == "Pod"


@pytest.mark.parametrize(
    "bad", ["{", "just a string", "- 1", "kind: Pod\nmetadata: {}\n", "metadata: {name: x}"]
)
def test_objects_refuse_what_is_not_kubernetes(bad: str) -> None:
    with pytest.raises(ObjectsError):
        load_objects(bad)

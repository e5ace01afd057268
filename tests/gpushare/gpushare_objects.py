"""Kubernetes objects for gpushare tests: nodes with registered GPUs, pods with HAMi resources."""

from __future__ import annotations

from typing import Any

from tenantgpu.gpushare import DeviceInfo, encode_node_register

A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"


def gpu(
    uuid: str,
    index: int = 0,
    *,
    mem: int = 23034,
    model: str = L4,
    numa: int = 0,
    count: int = 10,
    core: int = 100,
    health: bool = True,
    mode: str = "hami-core",
) -> DeviceInfo:
    return DeviceInfo(uuid, index, count, mem, core, model, numa, mode, health)


def node(
    name: str, *devices: DeviceInfo, annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if devices:
        notes["hami.io/node-nvidia-register"] = encode_node_register(list(devices))
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": notes, "labels": spec.pop("labels", {})},
        "spec": spec,
    }
    if "allocatable" in notes:
        pass
    return obj


def with_allocatable(obj: dict[str, Any], **alloc: str) -> dict[str, Any]:
    obj["status"] = {"allocatable": alloc}
    return obj


def container(
    name: str = "main",
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": name, "image": "busybox", "resources": resources, **extra}


def pod(
    name: str,
    *containers: dict[str, Any],
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    init: list[dict[str, Any]] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": {"containers": list(containers) or [container()], **spec},
    }
    if init:
        obj["spec"]["initContainers"] = init
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def gpu_pod(
    name: str,
    gpus: int = 1,
    mem: int | None = None,
    cores: int | None = None,
    pct: int | None = None,
    **kw: Any,
) -> dict[str, Any]:
    limits: dict[str, Any] = {"nvidia.com/gpu": gpus}
    if mem is not None:
        limits["nvidia.com/gpumem"] = mem
    if cores is not None:
        limits["nvidia.com/gpucores"] = cores
    if pct is not None:
        limits["nvidia.com/gpumem-percentage"] = pct
    return pod(name, container(limits=limits), **kw)


def placed(name: str, node_name: str, allocated: str, **kw: Any) -> dict[str, Any]:
    """A pod HAMi already placed: vgpu-node plus vgpu-devices-allocated."""
    notes = {"hami.io/vgpu-node": node_name, "hami.io/vgpu-devices-allocated": allocated}
    notes.update(kw.pop("annotations", {}))
    return pod(name, annotations=notes, **kw)

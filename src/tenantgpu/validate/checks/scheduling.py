"""Fractional scheduling: slices share a card, oversize and type rules hold, whole cards block sharing, slices free up."""

from __future__ import annotations

import time

from tenantgpu.validate import hami
from tenantgpu.validate.checks.base import Check
from tenantgpu.validate.checks.gpus import TenantGPU, healthy_gpus, idle_gpu
from tenantgpu.validate.checks.pods import (
    annotations,
    env_from_log,
    gpu_pod,
    node_of,
    state,
    wait_pending_with,
    wait_running,
)
from tenantgpu.validate.cluster import JSON
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckFailed, Outcome

_BINPACK = {hami.GPU_POLICY: "binpack", hami.NODE_POLICY: "binpack"}
# Reasons HAMi gives when a card is taken whole and a slice asks for a share of it.
_CARD_TAKEN = (
    "CardInsufficientMemory",
    "CardInsufficientCore",
    "CardComputeUnitsExhausted",
    "ExclusiveDeviceAllocateConflict",
)


def _allocated(pod: JSON) -> list[hami.AllocatedDevice]:
    value = annotations(pod).get(hami.DEVICES_ALLOCATED, "")
    return [d for container in hami.decode_pod_devices(value) for d in container] if value else []


def _pinned(gpu: TenantGPU) -> dict[str, str]:
    return {hami.USE_GPUUUID: gpu.gpu.uuid}


def _read_env(ctx: CheckContext, namespace: str, name: str, key: str) -> dict[str, str]:
    """The env a pod's container printed, waiting briefly for the log to show `key`."""
    last = {"log": ""}

    def probe() -> dict[str, str] | None:
        last["log"] = ctx.cluster.pod_log(name, namespace)
        env = env_from_log(last["log"])
        return env if key in env else None

    return ctx.wait_for(
        probe,
        what=f"{key} in the log of {namespace}/{name}",
        seen=lambda: repr(last["log"][-300:]) or "empty log",
        command=ctx.kubectl(f"-n {namespace} logs {name}"),
        timeout=min(10.0, ctx.settings.timeout_seconds),
    )


def fractional_scheduling(ctx: CheckContext) -> Outcome:
    gpus = healthy_gpus(ctx)
    smallest = min(g.gpu.devmem for g in gpus)
    asks = [("slice-1", min(4000, smallest // 3), 20), ("slice-2", min(3000, smallest // 4), 30)]
    with ctx.namespace() as namespace:
        pods: dict[str, JSON] = {}
        for name, mem, cores in asks:
            body = gpu_pod(name, labels=ctx.labels(), gpumem=mem, gpucores=cores, annotations=_BINPACK)
            ctx.cluster.create("Pod", body, namespace)
            pods[name] = wait_running(ctx, namespace, name)
        uuids: dict[str, str] = {}
        for name, mem, cores in asks:
            devices = _allocated(pods[name])
            where = ctx.kubectl(f"-n {namespace} get pod {name} -o yaml")
            if len(devices) != 1 or devices[0].usedmem != mem or devices[0].usedcores != cores:
                raise CheckFailed(
                    f"{name}'s allocation does not match its request",
                    expected=f"one device with {mem} MiB and {cores} cores",
                    seen=state(pods[name]),
                    command=where,
                )
            uuids[name] = devices[0].uuid
            env = _read_env(ctx, namespace, name, "CUDA_DEVICE_MEMORY_LIMIT_0")
            want = {"CUDA_DEVICE_MEMORY_LIMIT_0": f"{mem}m", "CUDA_DEVICE_SM_LIMIT": str(cores)}
            got = {key: env.get(key, "<unset>") for key in want}
            if got != want:
                raise CheckFailed(
                    f"{name} does not see the limits it asked for",
                    expected=", ".join(f"{k}={v}" for k, v in want.items()),
                    seen=", ".join(f"{k}={v}" for k, v in got.items()),
                    command=ctx.kubectl(f"-n {namespace} logs {name}"),
                )
        if len(set(uuids.values())) != 1:
            raise CheckFailed(
                "the slices did not share one physical GPU",
                expected="both pods on the same GPU UUID (binpack)",
                seen=", ".join(f"{name} on {uuid}" for name, uuid in uuids.items()),
                command=ctx.kubectl(f"-n {namespace} get pods -o yaml"),
            )
    uuid = next(iter(uuids.values()))
    node = node_of(pods["slice-1"])
    return Outcome.passed(
        f"{len(asks)} pods share {uuid} on {node} "
        + ", ".join(f"({mem} MiB, {cores}%)" for _, mem, cores in asks)
        + "; each sees its CUDA_DEVICE_MEMORY_LIMIT_0 and CUDA_DEVICE_SM_LIMIT"
    )


def oversize_request_pending(ctx: CheckContext) -> Outcome:
    gpus = healthy_gpus(ctx)
    largest = max(g.gpu.devmem for g in gpus)
    with ctx.namespace() as namespace:
        body = gpu_pod("too-big", labels=ctx.labels(), gpumem=largest + 1, gpucores=10)
        ctx.cluster.create("Pod", body, namespace)
        reason = wait_pending_with(ctx, namespace, "too-big", ("CardInsufficientMemory",))
    return Outcome.passed(f"a {largest + 1} MiB request (largest card {largest} MiB) stays Pending: {reason}")


def exclusive_card(ctx: CheckContext) -> Outcome:
    target = idle_gpu(ctx)
    with ctx.namespace() as namespace:
        whole = gpu_pod("whole-card", labels=ctx.labels(), annotations=_pinned(target))
        ctx.cluster.create("Pod", whole, namespace)
        pod = wait_running(ctx, namespace, "whole-card")
        devices = _allocated(pod)
        if [(d.uuid, d.usedmem, d.usedcores) for d in devices] != [(target.gpu.uuid, target.gpu.devmem, 100)]:
            raise CheckFailed(
                "a bare nvidia.com/gpu: 1 pod did not get the whole card",
                expected=f"{target.gpu.uuid} with {target.gpu.devmem} MiB and 100 cores",
                seen=state(pod),
                command=ctx.kubectl(f"-n {namespace} get pod whole-card -o yaml"),
            )
        slice_pod = gpu_pod(
            "slice", labels=ctx.labels(), gpumem=1000, gpucores=10, annotations=_pinned(target)
        )
        ctx.cluster.create("Pod", slice_pod, namespace)
        reason = wait_pending_with(ctx, namespace, "slice", _CARD_TAKEN)
    return Outcome.passed(
        f"whole-card pod holds {target.gpu.uuid} ({target.gpu.devmem} MiB, 100 cores); a slice on it stays Pending: {reason}"
    )


def gpu_type_selection(ctx: CheckContext) -> Outcome:
    gpus = healthy_gpus(ctx)
    wanted = sorted({g.gpu.type for g in gpus})[-1]
    types = {g.gpu.uuid: g.gpu.type for g in gpus}
    with ctx.namespace() as namespace:
        body = gpu_pod(
            "typed", labels=ctx.labels(), gpumem=1000, gpucores=10, annotations={hami.USE_GPUTYPE: wanted}
        )
        ctx.cluster.create("Pod", body, namespace)
        pod = wait_running(ctx, namespace, "typed")
        placed = [types.get(d.uuid, f"unknown GPU {d.uuid}") for d in _allocated(pod)]
        if placed != [wanted]:
            raise CheckFailed(
                f"the pod asking for {wanted} got another GPU type",
                expected=f"one GPU of type {wanted}",
                seen=", ".join(placed) or state(pod),
                command=ctx.kubectl(f"-n {namespace} get pod typed -o yaml"),
            )
        absent = "tenantgpu-no-such-gpu"
        body = gpu_pod(
            "absent-type",
            labels=ctx.labels(),
            gpumem=1000,
            gpucores=10,
            annotations={hami.USE_GPUTYPE: absent},
        )
        ctx.cluster.create("Pod", body, namespace)
        reason = wait_pending_with(ctx, namespace, "absent-type", ("CardTypeMismatch",))
    return Outcome.passed(
        f"{hami.USE_GPUTYPE}: {wanted} placed on a {wanted}; '{absent}' stays Pending: {reason}"
    )


def capacity_freed(ctx: CheckContext) -> Outcome:
    target = idle_gpu(ctx)
    with ctx.namespace() as namespace:
        filler = gpu_pod(
            "filler", labels=ctx.labels(), gpumem=target.gpu.devmem, gpucores=10, annotations=_pinned(target)
        )
        ctx.cluster.create("Pod", filler, namespace)
        wait_running(ctx, namespace, "filler")
        waiter = gpu_pod("waiter", labels=ctx.labels(), gpumem=1000, gpucores=10, annotations=_pinned(target))
        ctx.cluster.create("Pod", waiter, namespace)
        wait_pending_with(ctx, namespace, "waiter", ("CardInsufficientMemory",))
        ctx.cluster.delete("Pod", "filler", namespace)
        started = time.monotonic()
        wait_running(ctx, namespace, "waiter")
        took = time.monotonic() - started
    return Outcome.passed(
        f"{target.gpu.uuid} full → waiter Pending; filler deleted → waiter Running after {took:.1f} s"
    )


def no_lock_contention(ctx: CheckContext) -> Outcome:
    gpus = healthy_gpus(ctx)
    by_node: dict[str, list[TenantGPU]] = {}
    for gpu in gpus:
        by_node.setdefault(gpu.node, []).append(gpu)
    node, cards = max(by_node.items(), key=lambda item: sum(g.gpu.count for g in item[1]))
    burst = max(2, min(6, sum(g.gpu.count for g in cards)))
    mem = max(1, min(1000, min(g.gpu.devmem for g in cards) * len(cards) // (burst + 1)))
    names = [f"burst-{i}" for i in range(burst)]
    with ctx.namespace() as namespace:
        started = time.monotonic()
        for name in names:
            ctx.cluster.create(
                "Pod", gpu_pod(name, labels=ctx.labels(), gpumem=mem, gpucores=5, node=node), namespace
            )
        for name in names:
            wait_running(ctx, namespace, name)
        took = time.monotonic() - started

        def lock_gone() -> bool | None:
            node_obj = ctx.cluster.get("Node", node) or {}
            return True if hami.NODE_LOCK not in annotations(node_obj) else None

        ctx.wait_for(
            lock_gone,
            what=f"no {hami.NODE_LOCK} left on {node} once every pod runs",
            seen=lambda: f"{hami.NODE_LOCK}={annotations(ctx.cluster.get('Node', node)).get(hami.NODE_LOCK)}",
            command=ctx.kubectl(f"get node {node} -o jsonpath='{{.metadata.annotations}}'"),
            timeout=min(5.0, ctx.settings.timeout_seconds),
        )
    return Outcome.passed(f"{burst} GPU pods on {node} all Running in {took:.1f} s; no node lock left")


CHECKS = (
    Check(
        "fractional-scheduling",
        "pods asking for slices share one GPU, run, and see CUDA_DEVICE_MEMORY_LIMIT_0 / CUDA_DEVICE_SM_LIMIT as asked",
        fractional_scheduling,
    ),
    Check(
        "no-lock-contention",
        "a burst of GPU pods on one node all reach Running and no hami.io/mutex.lock remains",
        no_lock_contention,
    ),
    Check(
        "oversize-request-pending",
        "a pod asking for more memory than any card stays Pending with CardInsufficientMemory",
        oversize_request_pending,
    ),
    Check(
        "exclusive-card",
        "a whole-card pod (nvidia.com/gpu: 1 alone) blocks sharing of its card",
        exclusive_card,
    ),
    Check(
        "gpu-type-selection",
        "nvidia.com/use-gputype places a pod on that GPU type; an absent type stays Pending (CardTypeMismatch)",
        gpu_type_selection,
    ),
    Check(
        "capacity-freed",
        "deleting pods frees their slices: a pod waiting for a full card runs once the card's pod is gone",
        capacity_freed,
    ),
)

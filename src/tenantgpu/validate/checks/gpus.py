"""The tenant's registered GPUs as the checks pick them: healthy cards, by node, and the idle ones."""

from __future__ import annotations

from dataclasses import dataclass

from tenantgpu.validate import hami
from tenantgpu.validate.cluster import ApiError
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckFailed, CheckSkipped


@dataclass(frozen=True)
class TenantGPU:
    node: str
    gpu: hami.RegisteredGPU


def healthy_gpus(ctx: CheckContext) -> list[TenantGPU]:
    """Every healthy registered GPU the tenant's nodes offer; fails the check if there is none
    (skips it when the lab declares no GPU for this tenant: nothing to schedule on, by design)."""
    declared = ctx.declared_nodes()
    if declared is not None and not any(node.gpus for node in declared):
        raise CheckSkipped(f"the lab declares no GPU for tenant {ctx.tenant}")
    found: list[TenantGPU] = []
    for node in ctx.cluster.list("Node"):
        try:
            gpus = hami.node_gpus(node)
        except ValueError:
            continue
        found.extend(TenantGPU(node["metadata"]["name"], g) for g in gpus if g.health)
    if not found:
        raise CheckFailed(
            f"tenant {ctx.tenant} has no healthy registered GPU to schedule on",
            expected="at least one node with a healthy GPU in hami.io/node-nvidia-register",
            seen="none",
            command=ctx.kubectl("get nodes -o yaml"),
        )
    return sorted(found, key=lambda t: (t.node, t.gpu.index))


# Pods in these phases hold no device any more (HAMi counts only pods that may still run).
_ENDED = ("Succeeded", "Failed")


def idle_gpu(ctx: CheckContext) -> TenantGPU:
    """The first healthy GPU that no pod of the tenant holds a slice of, for the checks that need a whole
    card. Skips the check, naming the holders, when every card is in use: on a real cluster or a lab with
    workloads, a busy card says nothing about HAMi's behaviour, so it is not a failure."""
    gpus = healthy_gpus(ctx)
    holders: dict[str, list[str]] = {}
    try:
        pods = ctx.cluster.list("Pod")
    except ApiError:
        # Without the right to list every namespace's pods the holders are unknown: take the first card.
        return gpus[0]
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in _ENDED:
            continue
        meta = pod.get("metadata") or {}
        try:
            uuids = hami.allocated_uuids(pod)
        except ValueError:  # an annotation HAMi would not write: the pod holds nothing we can name
            continue
        for uuid in uuids:
            holders.setdefault(uuid, []).append(f"{meta.get('namespace')}/{meta.get('name')}")
    for gpu in gpus:
        if gpu.gpu.uuid not in holders:
            return gpu
    busy = "; ".join(
        f"{g.gpu.uuid} by {', '.join(holders[g.gpu.uuid][:3])}{' …' if len(holders[g.gpu.uuid]) > 3 else ''}"
        for g in gpus
    )
    raise CheckSkipped(f"needs an idle GPU, and every GPU of tenant {ctx.tenant} has pods on it: {busy}")

"""The tenant's registered GPUs as the checks pick them: healthy cards, by node."""

from __future__ import annotations

from dataclasses import dataclass

from tenantgpu.validate import hami
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

"""The tenant's registered GPUs as the checks pick them: healthy cards, by node."""

from __future__ import annotations

from dataclasses import dataclass

from tenantgpu.validate import hami
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import CheckFailed


@dataclass(frozen=True)
class TenantGPU:
    node: str
    gpu: hami.RegisteredGPU


def healthy_gpus(ctx: CheckContext) -> list[TenantGPU]:
    """Every healthy registered GPU the tenant's nodes offer; fails the check if there is none."""
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

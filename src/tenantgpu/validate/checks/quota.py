"""HAMi's namespace quota: `limits.nvidia.com/gpumem` admits what fits and refuses what would exceed it."""

from __future__ import annotations

from tenantgpu.validate import hami
from tenantgpu.validate.checks.base import Check
from tenantgpu.validate.checks.gpus import healthy_gpus
from tenantgpu.validate.checks.pods import gpu_pod, wait_pending_with, wait_running
from tenantgpu.validate.cluster import ApiError
from tenantgpu.validate.context import CheckContext
from tenantgpu.validate.outcome import Outcome

_QUOTA_KEY = f"limits.{hami.RESOURCE_MEM}"


def quota_enforced(ctx: CheckContext) -> Outcome:
    smallest = min(g.gpu.devmem for g in healthy_gpus(ctx))
    each = min(4000, smallest // 3)
    limit = each + each // 2  # room for one pod, not for two
    with ctx.namespace() as namespace:
        quota = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu-quota", "labels": ctx.labels()},
            "spec": {"hard": {_QUOTA_KEY: str(limit)}},
        }
        ctx.cluster.create("ResourceQuota", quota, namespace)
        ctx.cluster.create("Pod", gpu_pod("within", labels=ctx.labels(), gpumem=each, gpucores=10), namespace)
        wait_running(ctx, namespace, "within")
        try:
            ctx.cluster.create(
                "Pod", gpu_pod("beyond", labels=ctx.labels(), gpumem=each, gpucores=10), namespace
            )
        except ApiError as exc:
            if "exceeding resource quota" in exc.message or exc.code == 403:
                return Outcome.passed(
                    f"{_QUOTA_KEY}={limit}: a {each} MiB pod runs, a second is refused at admission: {exc.message}"
                )
            raise
        reason = wait_pending_with(ctx, namespace, "beyond", ("ResourceQuotaNotFit",))
    return Outcome.passed(f"{_QUOTA_KEY}={limit}: a {each} MiB pod runs, a second stays Pending: {reason}")


CHECKS = (
    Check(
        "quota-enforced",
        f"a namespace quota {_QUOTA_KEY} lets one pod in and keeps the one that would exceed it out",
        quota_enforced,
    ),
)
